//! AdamW as both papers use it: decoupled decay on matrices and embeddings only (see
//! [`is_decayed`]), global-norm
//! gradient clipping, and the warmup + cosine schedule of [`TrainingConfig::lr_at`].
//!
//! The update is Burn's AdamW, operation for operation (bias-corrected moments, ε outside the
//! square root, decay `θ·(1 − lr·λ)` before the step; on flex one pass per parameter, see
//! `qkv_kernels::AdamWUpdates`), and its state is saved in the burnpack
//! layout Burn's own optimiser writes, so checkpoints from either read back into the other. It
//! is written here rather than used from Burn for two things Burn's optimiser cannot do: clip by
//! the norm of all gradients together, and read its state back without blocking, which the
//! browser needs to save a checkpoint of a run training on its GPU.

use std::collections::BTreeMap;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::store::burn_pack::{self, Scalar};
use burn::tensor::{Bytes, Device, Tensor, TensorData};

use qkv_kernels::{AdamWStep, AdamWUpdates, SumOfSquares};
use qkv_model::Model;

use crate::recipe::TrainingConfig;

/// The AdamW settings of one run.
#[derive(Debug, Clone, Copy)]
struct AdamW {
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    weight_decay: f32,
    /// Parameters of lower rank (biases, norm gains) are not decayed.
    decay_min_rank: usize,
}

/// One parameter's moment estimates, flattened so that parameters of every rank share a map.
#[derive(Clone)]
struct Moments {
    /// Updates taken (Burn's `time`): the bias correction depends on it.
    time: usize,
    rank: usize,
    moment_1: Tensor<1>,
    moment_2: Tensor<1>,
}

/// The optimiser of one run.
#[derive(Clone)]
pub struct Optimiser {
    adamw: AdamW,
    grad_clip: Option<f64>,
    /// Keyed by parameter id, which a checkpoint's weights keep.
    moments: BTreeMap<u64, Moments>,
}

// Burn's record names: `{id}.momentum.moment_1`, `{id}.momentum.time`, `{id}.__rank`.
/// Why an optimiser state cannot be saved or restored.
#[derive(Debug, thiserror::Error)]
pub enum OptimiserStateError {
    /// Burn's record format refused the bytes.
    #[error("the optimiser state is not a readable record: {0}")]
    Format(#[from] burn_pack::Error),
    #[error("reading the optimiser state: {0}")]
    Device(#[from] qkv_kernels::ReadBackError),
    #[error("the optimiser state of parameter {id} has no {what}")]
    Missing { id: u64, what: &'static str },
    #[error("the optimiser state has parameter {0}, which the model does not")]
    UnknownParameter(u64),
    #[error("the optimiser state of parameter {id} has {found} values; the parameter has {expected}")]
    WrongSize { id: u64, found: usize, expected: usize },
}

const MOMENT_1: &str = "momentum.moment_1";
const MOMENT_2: &str = "momentum.moment_2";
const TIME: &str = "momentum.time";
const RANK: &str = "__rank";

impl Optimiser {
    pub fn new(config: &TrainingConfig) -> Self {
        Self {
            adamw: AdamW {
                beta_1: config.beta1 as f32,
                beta_2: config.beta2 as f32,
                epsilon: 1e-8,
                weight_decay: config.weight_decay as f32,
                decay_min_rank: config.decay_min_rank,
            },
            grad_clip: config.grad_clip,
            moments: BTreeMap::new(),
        }
    }

    /// Clips `grads` to the configured global norm and applies one AdamW step at `lr`. Returns
    /// the updated model and the gradient norm before clipping (a [1] tensor, not read back, so
    /// that no step waits on the device).
    pub fn step(&mut self, model: Model, grads: GradientsParams, lr: f64) -> (Model, Tensor<1>) {
        // scale = max_norm / max(norm, max_norm): 1 when the norm is within bounds.
        let (norm, scale) = global_norm(&model, &grads, self.grad_clip);
        let mut update = Update { adamw: self.adamw, moments: &mut self.moments, grads, updates: AdamWUpdates::new(scale), lr };
        let model = model.map(&mut update);
        // Launches the updates still waiting, before anything reads the parameters.
        drop(update);
        (model, norm)
    }

    /// The state in Burn's optimiser-record layout, every tensor awaited rather than blocked on.
    pub async fn to_bytes(&self) -> Result<Vec<u8>, OptimiserStateError> {
        let mut tensors = Vec::new();
        let mut scalars = Vec::new();
        for (&id, moments) in &self.moments {
            for (leaf, tensor) in [(MOMENT_1, &moments.moment_1), (MOMENT_2, &moments.moment_2)] {
                let data = qkv_kernels::read_back(tensor.clone()).await?;
                let (bytes, shape, dtype) = data.into_parts();
                tensors.push(burn_pack::Tensor::new(format!("{id}.{leaf}"), dtype, shape, Some(id), bytes));
            }
            scalars.push((format!("{id}.{TIME}"), Scalar::from(moments.time)));
            scalars.push((format!("{id}.{RANK}"), Scalar::from(moments.rank)));
        }
        let writer = scalars.iter().fold(burn_pack::Writer::new(tensors), |w, (key, value)| w.with_scalar(key, *value));
        Ok(writer.into_bytes()?.to_vec())
    }

    /// Restores the state saved by [`Optimiser::to_bytes`] (or by Burn's AdamW) into an
    /// optimiser for the same model, on `device`.
    pub fn load_bytes(mut self, bytes: Vec<u8>, device: &Device) -> Result<Self, OptimiserStateError> {
        let reader = burn_pack::Reader::from_bytes(Bytes::from_bytes_vec(bytes))?;
        let scalar = |key: String| reader.scalars().get(&key).and_then(|s| usize::try_from(*s).ok());
        let mut times = BTreeMap::new();
        for name in reader.tensor_names() {
            if let Some(id) = name.strip_suffix(&format!(".{MOMENT_1}")).and_then(|id| id.parse::<u64>().ok()) {
                let time = scalar(format!("{id}.{TIME}")).ok_or(OptimiserStateError::Missing { id, what: "step count" })?;
                let rank = scalar(format!("{id}.{RANK}")).ok_or(OptimiserStateError::Missing { id, what: "rank" })?;
                times.insert(id, (time, rank));
            }
        }
        let mut data: BTreeMap<String, TensorData> = BTreeMap::new();
        for tensor in reader.into_tensors()? {
            let (name, dtype, shape, _, bytes) = tensor.into_parts()?;
            let n = shape.iter().product::<usize>();
            data.insert(name, TensorData::from_bytes(bytes, [n], dtype));
        }
        let mut take = |id: u64, leaf: &'static str| -> Result<Tensor<1>, OptimiserStateError> {
            let d = data.remove(&format!("{id}.{leaf}")).ok_or(OptimiserStateError::Missing { id, what: leaf })?;
            Ok(Tensor::<1>::from_data(d, device))
        };
        self.moments = BTreeMap::new();
        for (id, (time, rank)) in times {
            let moments = Moments { time, rank, moment_1: take(id, MOMENT_1)?, moment_2: take(id, MOMENT_2)? };
            self.moments.insert(id, moments);
        }
        Ok(self)
    }

    /// Whether every saved moment belongs to a parameter of `model` and has its size: a state
    /// from another model would otherwise fail at the next step instead of at loading.
    pub fn check_fits(&self, model: &Model) -> Result<(), OptimiserStateError> {
        struct Sizes(BTreeMap<u64, usize>);
        impl ModuleVisitor for Sizes {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                self.0.insert(param.id.val(), param.val().dims().iter().product());
            }
        }
        let mut sizes = Sizes(BTreeMap::new());
        model.visit(&mut sizes);
        for (id, moments) in &self.moments {
            let expected = *sizes.0.get(id).ok_or(OptimiserStateError::UnknownParameter(*id))?;
            for moment in [&moments.moment_1, &moments.moment_2] {
                let [found] = moment.dims();
                if found != expected {
                    return Err(OptimiserStateError::WrongSize { id: *id, found, expected });
                }
            }
        }
        Ok(())
    }
}

/// One AdamW step over every parameter that has a gradient.
struct Update<'a> {
    adamw: AdamW,
    moments: &'a mut BTreeMap<u64, Moments>,
    grads: GradientsParams,
    /// Several parameters a launch where the device allows.
    updates: AdamWUpdates,
    lr: f64,
}

impl ModuleMapper for Update<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let Some(grad) = self.grads.remove::<D>(id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let require_grad = tensor.is_require_grad();
        let AdamW { beta_1, beta_2, epsilon, weight_decay, decay_min_rank } = self.adamw;
        let previous = self.moments.remove(&id.val());
        let time = previous.as_ref().map_or(1, |m| m.time + 1);
        let step = AdamWStep {
            beta_1,
            beta_2,
            epsilon,
            lr: self.lr,
            weight_decay: if is_decayed(&tensor.dims(), decay_min_rank) { weight_decay } else { 0.0 },
            time: time as i32,
        };
        let (updated, moment_1, moment_2) = self.updates.update(tensor.inner(), grad, previous.map(|m| (m.moment_1, m.moment_2)), step);
        self.moments.insert(id.val(), Moments { time, rank: D, moment_1, moment_2 });
        let mut updated = Tensor::from_inner(updated);
        if require_grad {
            updated = updated.require_grad();
        }
        Param::from_mapped_value(id, updated, mapper)
    }
}

/// Whether a parameter of shape `dims` is decayed: a matrix (rank ≥ `min_rank`) in every
/// dimension. Vectors are not (biases, norm gains), nor a matrix with a dimension of 1, which is
/// a vector by another name: (Q=K-V)+'s 10 → 1 mix, whose weights sum to the gain on the logits
/// and would be pulled towards flat attention, as a LayerNorm gain would be.
fn is_decayed(dims: &[usize], min_rank: usize) -> bool {
    dims.len() >= min_rank && dims.iter().all(|&d| d > 1)
}

/// √(Σ‖g‖²) over every parameter's gradient, as a [1] tensor, and with `max_norm` the clipping
/// factor max_norm / max(norm, max_norm), another.
pub fn global_norm(model: &Model, grads: &GradientsParams, max_norm: Option<f64>) -> (Tensor<1>, Option<Tensor<1>>) {
    struct Squares<'a> {
        grads: &'a GradientsParams,
        sum: SumOfSquares,
    }
    impl ModuleVisitor for Squares<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.grads.get::<D>(param.id) {
                self.sum.add(grad);
            }
        }
    }
    let mut visitor = Squares { grads, sum: SumOfSquares::default() };
    model.visit(&mut visitor);
    let device = model.devices().first().cloned().unwrap_or_default();
    visitor.sum.norm(&device.without_autodiff(), max_norm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::module::ParamId;
    use burn::optim::{AdamWConfig, ModuleOptimizer};
    use qkv_model::AttentionVariant;

    use crate::loss::cross_entropy;
    use crate::rng::Rng;
    use crate::run::batch_tensors;
    use crate::run::tests::{tiny_spec, tiny_text};

    /// Burn's AdamW with the same decay groups, as QKV Lab ran before it had its own.
    fn burns_adamw(model: &Model, config: &TrainingConfig) -> ModuleOptimizer {
        let adamw = |weight_decay: f64| {
            AdamWConfig::new()
                .with_beta_1(config.beta1 as f32)
                .with_beta_2(config.beta2 as f32)
                .with_epsilon(1e-8)
                .with_weight_decay(weight_decay as f32)
                .build()
        };
        struct LowRank(Vec<ParamId>, usize);
        impl ModuleVisitor for LowRank {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                if !is_decayed(&param.val().dims(), self.1) {
                    self.0.push(param.id);
                }
            }
        }
        let mut low = LowRank(Vec::new(), config.decay_min_rank);
        model.visit(&mut low);
        ModuleOptimizer::from(adamw(config.weight_decay)).with_group(burn::module::ParamGroup::from_ids(low.0), adamw(0.0), None)
    }

    #[test]
    fn matrices_decay_and_vectors_do_not_whatever_their_rank() {
        assert!(is_decayed(&[128, 384], 2), "a projection");
        assert!(!is_decayed(&[384], 2), "a bias or a norm gain");
        assert!(!is_decayed(&[10, 1], 2), "(Q=K-V)+'s mix: its weights sum to a gain");
        assert!(!is_decayed(&[128, 384], 3), "below the configured rank");
    }

    /// Every weight of `model`, in the module's order.
    fn weights(model: &Model) -> Vec<f32> {
        let read = pollster::block_on(crate::cpu_copy::read_weights(model)).expect("weights read back");
        read.into_iter().flat_map(|(_, data)| data.iter::<f32>().collect::<Vec<_>>()).collect()
    }

    fn largest_difference(a: &Model, b: &Model) -> f32 {
        weights(a).iter().zip(weights(b)).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
    }

    #[test]
    fn steps_match_burns_adamw_and_continue_from_its_saved_state() {
        let dataset = tiny_text();
        let spec = tiny_spec(AttentionVariant::Standard, &dataset);
        let config = TrainingConfig { grad_clip: None, weight_decay: 0.1, ..spec.training.clone() };
        let device = Device::flex().autodiff();
        let grads = |model: &Model, seed: u64| {
            let (inputs, targets, mask) = batch_tensors(&dataset.train_batch(&mut Rng::new(seed), 8, 16, 0), &device);
            GradientsParams::from_grads(cross_entropy(model.forward(inputs), targets, mask).backward(), model)
        };
        let start = Model::new_seeded(&spec.model, &device, 7).unwrap();
        let (mut ours, mut theirs) = (start.clone(), start.clone());
        let mut optimiser = Optimiser::new(&config);
        let mut burn = burns_adamw(&start, &config);
        // A large rate, so that a slip in the update (decay group, bias correction, ε) shows.
        let lr = 1e-2;
        for seed in 0..3 {
            let g = grads(&ours, seed);
            ours = optimiser.step(ours, g, lr).0;
            let g = grads(&theirs, seed);
            theirs = burn.step(lr, theirs, g);
        }
        let moved = largest_difference(&start, &theirs);
        assert!(moved > 1e-3, "three steps moved the weights by only {moved}");
        let apart = largest_difference(&ours, &theirs);
        assert!(apart < 1e-6, "three steps of ours and Burn's AdamW differ by {apart}");

        // Checkpoints written with Burn's optimiser state continue with ours.
        let saved = burn.into_bytes().unwrap().to_vec();
        let mut resumed = Optimiser::new(&config).load_bytes(saved, &Device::flex()).unwrap();
        let g = grads(&theirs, 9);
        let continued = resumed.step(theirs.clone(), g, lr).0;
        let g = grads(&theirs, 9);
        let theirs = burn.step(lr, theirs, g);
        let apart = largest_difference(&continued, &theirs);
        assert!(apart < 1e-6, "the step after loading Burn's state differs by {apart}");
    }

    #[test]
    fn damaged_state_is_refused_with_the_reason() {
        let config = TrainingConfig::for_preset(qkv_model::Preset::Classroom);
        let err = Optimiser::new(&config).load_bytes(b"not burnpack".to_vec(), &Device::flex()).err().unwrap();
        assert!(matches!(err, OptimiserStateError::Format(_)), "{err:?}");
    }
}
