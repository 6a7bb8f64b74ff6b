//! AdamW as both papers use it: decoupled decay on matrices and embeddings only, global-norm
//! gradient clipping, and the warmup + cosine schedule of [`TrainingConfig::lr_at`].
//!
//! Burn provides AdamW and parameter groups; what it lacks is clipping by the norm of all
//! gradients together (its clipping is per tensor), written here.

use burn::module::{Module, ModuleVisitor, Param, ParamGroup, ParamId};
use burn::optim::{AdamWConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;

use qkv_model::Gpt;

use crate::recipe::TrainingConfig;

/// The optimiser of one run.
#[derive(Clone)]
pub struct Optimiser {
    inner: ModuleOptimizer,
    grad_clip: Option<f64>,
}

/// Ids of the float parameters whose rank is below `min_rank`.
struct LowRankParams {
    min_rank: usize,
    ids: Vec<ParamId>,
}

impl ModuleVisitor for LowRankParams {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if D < self.min_rank {
            self.ids.push(param.id);
        }
    }
}

impl Optimiser {
    pub fn new(model: &Gpt, config: &TrainingConfig) -> Self {
        let adamw = |weight_decay: f64| {
            AdamWConfig::new()
                .with_beta_1(config.beta1 as f32)
                .with_beta_2(config.beta2 as f32)
                .with_epsilon(1e-8)
                .with_weight_decay(weight_decay as f32)
                .build()
        };
        let mut no_decay = LowRankParams { min_rank: config.decay_min_rank, ids: Vec::new() };
        model.visit(&mut no_decay);
        let inner = ModuleOptimizer::from(adamw(config.weight_decay)).with_group(
            ParamGroup::from_ids(no_decay.ids),
            adamw(0.0),
            None,
        );
        Self { inner, grad_clip: config.grad_clip }
    }

    /// Clips `grads` to the configured global norm and applies one AdamW step at `lr`. Returns
    /// the updated model and the gradient norm before clipping (a [1] tensor, not read back, so
    /// that no step waits on the device).
    pub fn step(&mut self, model: Gpt, mut grads: GradientsParams, lr: f64) -> (Gpt, Tensor<1>) {
        let norm = global_norm(&model, &grads);
        if let Some(max_norm) = self.grad_clip {
            // scale = max_norm / max(norm, max_norm): 1 when the norm is within bounds.
            let scale = norm.clone().clamp_min(max_norm).recip() * max_norm;
            let mut scaler = ScaleGrads { grads: &mut grads, scale };
            model.visit(&mut scaler);
        }
        (self.inner.step(lr, model, grads), norm)
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>, String> {
        self.inner.into_bytes().map(|b| b.to_vec()).map_err(|e| format!("{e:?}"))
    }

    /// Restores the state saved by [`Optimiser::to_bytes`] into an optimiser for the same model.
    pub fn load_bytes(self, bytes: Vec<u8>) -> Result<Self, String> {
        let inner = self.inner.from_bytes(burn::tensor::Bytes::from_bytes_vec(bytes)).map_err(|e| format!("{e:?}"))?;
        Ok(Self { inner, grad_clip: self.grad_clip })
    }
}

/// √(Σ‖g‖²) over every parameter's gradient, as a [1] tensor.
pub fn global_norm(model: &Gpt, grads: &GradientsParams) -> Tensor<1> {
    struct SumOfSquares<'a> {
        grads: &'a GradientsParams,
        total: Option<Tensor<1>>,
    }
    impl ModuleVisitor for SumOfSquares<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.grads.get::<D>(param.id) {
                let squares = grad.square().sum();
                self.total = Some(match self.total.take() {
                    Some(total) => total + squares,
                    None => squares,
                });
            }
        }
    }
    let mut visitor = SumOfSquares { grads, total: None };
    model.visit(&mut visitor);
    let device = model.devices().first().cloned().unwrap_or_default();
    visitor.total.unwrap_or_else(|| Tensor::zeros([1], &device.without_autodiff())).sqrt()
}

struct ScaleGrads<'a> {
    grads: &'a mut GradientsParams,
    scale: Tensor<1>,
}

impl ModuleVisitor for ScaleGrads<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.remove::<D>(param.id) {
            self.grads.register(param.id, grad * self.scale.clone().unsqueeze::<D>());
        }
    }
}
