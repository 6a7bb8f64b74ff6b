//! One AdamW update of one parameter as one pass over its values (Burn's AdamW is a dozen tensor
//! ops, each reading and writing every value), and the squared norm of a gradient, for global
//! clipping.
//!
//! The arithmetic is Burn's AdamW, in its order: g ← g·clip; m ← β₁m + (1−β₁)g;
//! v ← β₂v + (1−β₂)g²; θ ← θ·(1 − lr·λ) − lr · (m / (1−β₁ᵗ)) / (√(v / (1−β₂ᵗ)) + ε).

use burn::tensor::{Device, Tensor, TensorData};

use crate::adamw_step::AdamWStep;
use crate::cube::{self, from_cube, to_cube};
use crate::flex::{Route, from_flex, route, tensor, to_flex, values, values_mut, writable};
use crate::math::vectorised;
use crate::parallel::{self, SharedMut};

/// Values per task at least. A parameter is split over the cores only from twice this: waking
/// the pool and waiting for it costs about as much as updating 100,000 values, so the small
/// model's 65,536-value matrices, split in two, took the optimiser from 0.73–0.81 to 1.2–1.5 ms a
/// step on two cores (docs/performance.md, "Threads and cores").
const MIN_PER_TASK: usize = 256 * 1024;

/// A parameter, its two moment estimates (flat, as many values as the parameter; `None` before
/// the first update), after one update with `grad`, scaled first by `grad_scale` (a [1] tensor:
/// global-norm clipping) when given. Tensors are the inner ones, without autodiff.
pub fn adamw_update<const D: usize>(
    param: Tensor<D>,
    grad: Tensor<D>,
    moments: Option<(Tensor<1>, Tensor<1>)>,
    grad_scale: Option<&Tensor<1>>,
    step: AdamWStep,
) -> (Tensor<D>, Tensor<1>, Tensor<1>) {
    match route(&param.device(), param.dtype()) {
        Route::Flex => {}
        Route::Cube => {
            let moments = moments.map(|(m, v)| (to_cube(m), to_cube(v)));
            let (param, m, v) =
                cube::adamw::update(to_cube(param), to_cube(grad), moments, grad_scale.cloned().map(to_cube).as_ref(), step);
            return (from_cube(param), from_cube(m), from_cube(v));
        }
        Route::Composed | Route::FlexAutodiff | Route::CubeAutodiff => return composed(param, grad, moments, grad_scale, step),
    }
    let scale = grad_scale.map_or(1.0, |s| s.clone().into_scalar::<f32>());
    let n = param.shape().num_elements();
    let grad = to_flex(grad);
    let grad = values(&grad);
    let mut param = writable(to_flex(param));
    let (mut moment_1, mut moment_2) = match moments {
        Some((m, v)) => (writable(to_flex(m)), writable(to_flex(v))),
        None => (tensor(vec![0f32; n], [n]), tensor(vec![0f32; n], [n])),
    };
    let (m, v) = (SharedMut::new(values_mut(&mut moment_1)), SharedMut::new(values_mut(&mut moment_2)));
    parallel::for_spans(values_mut(&mut param), MIN_PER_TASK, 16, |start, p| {
        // SAFETY: both moments' span matches this task's span of the parameter, which no other
        // task has.
        let (m, v) = unsafe { (m.slice(start, p.len()), v.slice(start, p.len())) };
        update(p, m, v, &grad[start..start + p.len()], scale, step);
    });
    (from_flex(param), from_flex(moment_1), from_flex(moment_2))
}

/// AdamW updates of a model's parameters with one clipping factor, launched several to a kernel
/// where the device allows: on a cubecl GPU that binds four parameters' buffers a kernel
/// (natively; a browser's WebGPU binds seven buffers, so one parameter a launch there), four a
/// launch. Each [`Self::update`] returns its parameter and moments at once; on such a GPU their
/// values are written by a launch made when four are waiting, or when the updates are dropped,
/// so nothing may read them before then. Elsewhere each is [`adamw_update`].
pub struct AdamWUpdates {
    grad_scale: Option<Tensor<1>>,
    waiting: Vec<cube::adamw::Prepared>,
}

impl AdamWUpdates {
    /// Updates whose gradients are scaled by `grad_scale` (a [1] tensor) when given.
    pub fn new(grad_scale: Option<Tensor<1>>) -> Self {
        Self { grad_scale, waiting: Vec::new() }
    }

    /// [`adamw_update`] of one parameter, its launch maybe shared with the next ones.
    pub fn update<const D: usize>(
        &mut self,
        param: Tensor<D>,
        grad: Tensor<D>,
        moments: Option<(Tensor<1>, Tensor<1>)>,
        step: AdamWStep,
    ) -> (Tensor<D>, Tensor<1>, Tensor<1>) {
        if !matches!(route(&param.device(), param.dtype()), Route::Cube) {
            return adamw_update(param, grad, moments, self.grad_scale.as_ref(), step);
        }
        let moments = moments.map(|(m, v)| (to_cube(m), to_cube(v)));
        let prepared = cube::adamw::prepare(to_cube(param), to_cube(grad), moments, step);
        let updated = (from_cube(prepared.param.clone()), from_cube(prepared.moment_1.clone()), from_cube(prepared.moment_2.clone()));
        if !cube::adamw::takes_many(&prepared.param) {
            cube::adamw::launch_one(&prepared, self.grad_scale.clone().map(to_cube).as_ref());
            return updated;
        }
        // One launch shares β₁, β₂, ε and lr.
        let shared = |s: &AdamWStep| (s.beta_1, s.beta_2, s.epsilon, s.lr);
        if self.waiting.first().is_some_and(|first| shared(first.step()) != shared(&step)) {
            self.launch_waiting();
        }
        self.waiting.push(prepared);
        if self.waiting.len() == cube::adamw::parameters_per_launch(&self.waiting[0].param.client) {
            self.launch_waiting();
        }
        updated
    }

    fn launch_waiting(&mut self) {
        if !self.waiting.is_empty() {
            cube::adamw::launch_many(&self.waiting, self.grad_scale.clone().map(to_cube).as_ref());
            self.waiting.clear();
        }
    }
}

impl Drop for AdamWUpdates {
    /// Launches the updates still waiting: every parameter returned is written by the time its
    /// updates are gone.
    fn drop(&mut self) {
        self.launch_waiting();
    }
}

vectorised! {
    fn update(param: &mut [f32], m: &mut [f32], v: &mut [f32], grad: &[f32], scale: f32, step: AdamWStep) {
        let AdamWStep { beta_1, beta_2, epsilon, lr, weight_decay, time } = step;
        let correction_1 = 1.0 - beta_1.powi(time);
        let correction_2 = 1.0 - beta_2.powi(time);
        let keep = (1.0 - lr * weight_decay as f64) as f32;
        let lr = lr as f32;
        for (((p, m), v), &g) in param.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(grad) {
            let g = g * scale;
            *m = *m * beta_1 + g * (1.0 - beta_1);
            *v = *v * beta_2 + g * g * (1.0 - beta_2);
            let delta = (*m / correction_1) / ((*v / correction_2).sqrt() + epsilon);
            *p = *p * keep - delta * lr;
        }
    }
}

/// Burn's AdamW from tensor ops, for every device without the kernel.
pub(crate) fn composed<const D: usize>(
    param: Tensor<D>,
    grad: Tensor<D>,
    moments: Option<(Tensor<1>, Tensor<1>)>,
    grad_scale: Option<&Tensor<1>>,
    step: AdamWStep,
) -> (Tensor<D>, Tensor<1>, Tensor<1>) {
    let AdamWStep { beta_1, beta_2, epsilon, lr, weight_decay, time } = step;
    let grad = match grad_scale {
        Some(scale) => grad * scale.clone().unsqueeze::<D>(),
        None => grad,
    };
    let dims = param.dims();
    let grad = grad.reshape([dims.iter().product::<usize>()]);
    let (moment_1, moment_2) = match moments {
        Some((m, v)) => (
            m.mul_scalar(beta_1).add(grad.clone().mul_scalar(1.0 - beta_1)),
            v.mul_scalar(beta_2).add(grad.square().mul_scalar(1.0 - beta_2)),
        ),
        None => (grad.clone().mul_scalar(1.0 - beta_1), grad.square().mul_scalar(1.0 - beta_2)),
    };
    let m_hat = moment_1.clone().div_scalar(1f32 - beta_1.powi(time));
    let v_hat = moment_2.clone().div_scalar(1f32 - beta_2.powi(time));
    let delta = m_hat.div(v_hat.sqrt().add_scalar(epsilon)).reshape(dims);
    let decay_rate = lr * weight_decay as f64;
    let decayed = if decay_rate == 0.0 { param } else { param.mul_scalar(1.0 - decay_rate) };
    (decayed - delta.mul_scalar(lr), moment_1, moment_2)
}

/// Σ x² over any number of tensors (a model's gradients, for global-norm clipping), added up as
/// they come. On flex the sums are made on the host in f64, and the total becomes a tensor once:
/// a [1] tensor and an add per gradient cost more than summing a small gradient (the small
/// model's norm took 0.33 ms a step that way: docs/performance.md, "Threads and cores"). On a
/// cubecl GPU five tensors' sums are one kernel launch into one buffer of workgroup partial
/// sums, added up once at the end (three composed launches per tensor before). Elsewhere they
/// are tensor ops. Nothing is read back.
#[derive(Default)]
pub struct SumOfSquares {
    /// The flex tensors' sum; `None` until one is added, so that a GPU's total needs no upload.
    on_host: Option<f64>,
    /// The cubecl tensors, summed when the total is asked for (the partial sums' buffer is
    /// sized by all of them).
    on_cube: Vec<burn_cubecl::tensor::CubeTensor>,
    on_device: Option<Tensor<1>>,
}

impl SumOfSquares {
    pub fn add<const D: usize>(&mut self, x: Tensor<D>) {
        match route(&x.device(), x.dtype()) {
            Route::Flex => {}
            Route::Cube => return self.on_cube.push(to_cube(x)),
            Route::Composed | Route::FlexAutodiff | Route::CubeAutodiff => {
                let squares = x.square().sum();
                self.on_device = Some(match self.on_device.take() {
                    Some(sum) => sum + squares,
                    None => squares,
                });
                return;
            }
        }
        let x = to_flex(x);
        let values = values(&x);
        let chunks = parallel::chunks(values.len(), MIN_PER_TASK);
        let partials = parallel::map(chunks.len(), values.len() * 2, |c| sum_squares_in_blocks(&values[chunks[c].clone()]));
        *self.on_host.get_or_insert(0.0) += partials.iter().sum::<f64>();
    }

    /// The total, as a [1] tensor on `device` (the gradients' device, without autodiff), or on
    /// the device of the tensors summed there.
    pub fn total(mut self, device: &Device) -> Tensor<1> {
        if !self.on_cube.is_empty() {
            // The kernels end in the norm (`Self::norm`); squared here for a total that mixes
            // devices, which training never asks for.
            let (norm, _) = cube::adamw::Squares::of(&std::mem::take(&mut self.on_cube)).norm(None);
            let sum = from_cube::<1>(norm).powi_scalar(2);
            self.on_device = Some(match self.on_device.take() {
                Some(other) => other + sum,
                None => sum,
            });
        }
        let host_tensor = |sum: f64, device: &Device| Tensor::from_data(TensorData::new(vec![sum as f32], [1]), device);
        match (self.on_host, self.on_device) {
            (on_host, None) => host_tensor(on_host.unwrap_or(0.0), device),
            (None, Some(on_device)) => on_device,
            (Some(on_host), Some(on_device)) => {
                let device = on_device.device();
                on_device + host_tensor(on_host, &device)
            }
        }
    }

    /// The global norm √Σx², and with `max_norm` the clipping factor max_norm / max(norm,
    /// max_norm) (1 within bounds), as [1] tensors like [`Self::total`]'s. On a cubecl GPU the
    /// partial sums' finish, the square root and the factor are one launch (five composed).
    pub fn norm(self, device: &Device, max_norm: Option<f64>) -> (Tensor<1>, Option<Tensor<1>>) {
        if !self.on_cube.is_empty() && self.on_host.is_none() && self.on_device.is_none() {
            let (norm, scale) = cube::adamw::Squares::of(&self.on_cube).norm(max_norm.map(|m| m as f32));
            return (from_cube(norm), scale.map(from_cube));
        }
        let norm = self.total(device).sqrt();
        let scale = max_norm.map(|max_norm| norm.clone().clamp_min(max_norm).recip() * max_norm);
        (norm, scale)
    }
}

vectorised! {
    fn sum_squares(values: &[f32]) -> f32 {
        crate::math::dot(values, values)
    }
}

/// Σ x² in blocks whose f32 sums are added in f64: one f32 running sum over a span of 300,000
/// values drifts by about 1e-5 of the total.
fn sum_squares_in_blocks(values: &[f32]) -> f64 {
    values.chunks(4096).map(|block| f64::from(sum_squares(block))).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_close, input, values};

    #[test]
    fn fused_update_matches_the_composed_ops_over_three_steps() {
        let device = Device::flex();
        let start = input([13, 7], 1, &device);
        let scale = Tensor::<1>::from_data(TensorData::new(vec![0.7f32], [1]), &device);
        let run = |fused: bool| {
            let (mut param, mut moments) = (start.clone(), None);
            for time in 1..=3 {
                let grad = input([13, 7], 10 + time as u64, &device);
                let step = AdamWStep { beta_1: 0.9, beta_2: 0.99, epsilon: 1e-8, lr: 1e-2, weight_decay: 0.1, time };
                let (p, m, v) = if fused {
                    adamw_update(param, grad, moments, Some(&scale), step)
                } else {
                    composed(param, grad, moments, Some(&scale), step)
                };
                param = p;
                moments = Some((m, v));
            }
            values(param)
        };
        let (fused, composed) = (run(true), run(false));
        assert!(fused.iter().zip(values(start.clone())).any(|(a, b)| (a - b).abs() > 1e-3), "the steps moved nothing");
        assert_close(&fused, &composed, 1e-6, "three AdamW steps");
    }

    #[test]
    fn sum_of_squares_matches_a_double_precision_sum() {
        // A matrix large enough to be summed in parts on two threads or more, and a vector; the
        // reference is in f64 (an f32 running sum over 600,000 values drifts by about 1e-5).
        let (x, y) = (input([1000, 601], 3, &Device::flex()), input([77], 4, &Device::flex()));
        let squares = |t: Vec<f32>| t.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>();
        let exact = squares(values(x.clone())) + squares(values(y.clone()));
        let mut sum = SumOfSquares::default();
        sum.add(x);
        sum.add(y);
        let fused = values(sum.total(&Device::flex()));
        assert_close(&fused, &[exact as f32], 1e-6, "Σx²");
    }
}
