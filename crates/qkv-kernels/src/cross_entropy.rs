//! Next-token cross-entropy as one op: log-softmax, the target's entry and the (masked) mean in
//! one pass over the logits; backward `dlogits_i = w_i · (softmax(logits_i) − onehot(t_i))`,
//! with w_i the weight of row i in the mean.

use burn::backend::Flex;
use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Int, Tensor};

use burn_cubecl::CubeBackend as Cube;

use crate::cube::{self, from_cube, from_cube_autodiff, to_cube, to_cube_autodiff};
use crate::flex::{
    Route, backward_step, backward_step_on, constant_to_flex, from_autodiff, from_flex, int_to_flex, int_values, route, tensor,
    to_autodiff, to_flex, values,
};
use crate::math::{self, exp, vectorised};
use crate::parallel::{self, SharedMut};

const MIN_ROWS_PER_TASK: usize = 64;

/// Mean negative log-likelihood of `targets` [batch, time] under `logits` [batch, time, vocab],
/// over the positions where `mask` [batch, time] is 1 (every position without a mask), as a [1]
/// tensor.
pub fn cross_entropy(logits: Tensor<3>, targets: Tensor<2, Int>, mask: Option<Tensor<2>>) -> Tensor<1> {
    let r = route(&logits.device(), logits.dtype());
    if let Route::Cube | Route::CubeAutodiff = r {
        let autodiff = r == Route::CubeAutodiff;
        let cube_targets = cube::int_to_cube(targets.clone(), autodiff);
        if cube::cross_entropy::takes(&cube_targets) {
            let mask = mask.map(|m| cube::constant_to_cube(m, autodiff));
            if !autodiff {
                return from_cube(cube::cross_entropy::forward(to_cube(logits), cube_targets, mask).0);
            }
            let (logits, node) = to_cube_autodiff(logits).into_parts();
            let run = || cube::cross_entropy::forward(logits, cube_targets, mask);
            return from_cube_autodiff(cube::record(CubeCrossEntropyBackward, [node], run));
        }
    }
    if !matches!(r, Route::Flex | Route::FlexAutodiff) {
        return composed(logits, targets, mask);
    }
    let targets = int_values(&int_to_flex(targets, r));
    let weights = row_weights(mask.map(|m| constant_to_flex(m, r)).as_ref(), targets.len());
    match r {
        Route::Flex => from_flex(forward(&to_flex(logits), &targets, &weights).0),
        _ => {
            let (logits, node) = to_autodiff(logits).into_parts();
            from_autodiff(match CrossEntropyBackward.prepare::<NoCheckpointing>([node]).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let (loss, log_norms) = forward(&logits, &targets, &weights);
                    prep.finish(Saved { logits, targets, weights, log_norms }, loss)
                }
                OpsKind::UnTracked(prep) => prep.finish(forward(&logits, &targets, &weights).0),
            })
        }
    }
}

/// The same from Burn's ops, for every device without the kernels.
fn composed(logits: Tensor<3>, targets: Tensor<2, Int>, mask: Option<Tensor<2>>) -> Tensor<1> {
    let [batch, time, _] = logits.dims();
    let log_probs = log_softmax(logits, 2);
    let picked = log_probs.gather(2, targets.unsqueeze_dim::<3>(2)).reshape([batch, time]);
    match mask {
        Some(mask) => -(picked * mask.clone()).sum() / mask.sum(),
        None => -picked.mean(),
    }
}

/// Each row's weight in the mean: mask_i / Σ mask, or 1/rows. (A mask of zeros gives NaN
/// weights and a NaN loss, as the composed division by zero does.)
fn row_weights(mask: Option<&FlexTensor>, rows: usize) -> Vec<f32> {
    match mask {
        Some(mask) => {
            let mask = values(mask);
            let total: f32 = mask.iter().sum();
            mask.iter().map(|m| m / total).collect()
        }
        None => vec![1.0 / rows as f32; rows],
    }
}

/// The loss [1] and each row's log Σ exp(logits).
fn forward(logits: &FlexTensor, targets: &[i64], weights: &[f32]) -> (FlexTensor, Vec<f32>) {
    let logits = values(logits);
    let rows = targets.len();
    let vocab = logits.len() / rows;
    let mut log_norms = vec![0f32; rows];
    let norms_out = SharedMut::new(&mut log_norms);
    let chunks = parallel::chunks(rows, MIN_ROWS_PER_TASK);
    let partials = parallel::map(chunks.len(), logits.len() * 20, |c| {
        let rows = chunks[c].clone();
        // SAFETY: chunk c's rows of the norms belong to this task.
        let norms = unsafe { norms_out.slice(rows.start, rows.len()) };
        let mut row_buffer = vec![0f32; vocab];
        let mut loss = 0f64;
        for (i, norm) in rows.zip(norms) {
            let row = &logits[i * vocab..(i + 1) * vocab];
            let target = target_index(targets[i], vocab);
            row_buffer.copy_from_slice(row);
            let shift = math::max(row);
            *norm = shift + math::exp_shifted_sum(&mut row_buffer, shift).ln();
            if weights[i] != 0.0 {
                loss += (weights[i] * (*norm - row[target])) as f64;
            }
        }
        loss
    });
    (tensor(vec![partials.iter().sum::<f64>() as f32], [1]), log_norms)
}

fn target_index(target: i64, vocab: usize) -> usize {
    usize::try_from(target)
        .ok()
        .filter(|&t| t < vocab)
        .unwrap_or_else(|| panic!("target token {target} is outside the vocabulary of {vocab}"))
}

vectorised! {
    /// `d = g·w·(e^(logit − log_norm) − onehot(target))` for one row.
    fn row_gradient(logits: &[f32], log_norm: f32, target: usize, scale: f32, d: &mut [f32]) {
        for (d, &l) in d.iter_mut().zip(logits) {
            *d = scale * exp(l - log_norm);
        }
        d[target] -= scale;
    }
}

fn backward(saved: &Saved, grad: &FlexTensor) -> FlexTensor {
    let g = values(grad)[0];
    let logits = values(&saved.logits);
    let rows = saved.targets.len();
    let vocab = logits.len() / rows;
    let mut d_logits = vec![0f32; logits.len()];
    let out = SharedMut::new(&mut d_logits);
    let chunks = parallel::chunks(rows, MIN_ROWS_PER_TASK);
    parallel::map(chunks.len(), logits.len() * 20, |c| {
        for i in chunks[c].clone() {
            let scale = g * saved.weights[i];
            if scale == 0.0 {
                continue;
            }
            // SAFETY: row i of the gradient belongs to this task.
            let d = unsafe { out.slice(i * vocab, vocab) };
            row_gradient(&logits[i * vocab..(i + 1) * vocab], saved.log_norms[i], target_index(saved.targets[i], vocab), scale, d);
        }
    });
    tensor(d_logits, saved.logits.shape())
}

#[derive(Debug, Clone)]
struct Saved {
    logits: FlexTensor,
    targets: Vec<i64>,
    weights: Vec<f32>,
    log_norms: Vec<f32>,
}

#[derive(Debug)]
struct CrossEntropyBackward;

impl Backward<Flex, 1> for CrossEntropyBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step(&ops, grads, |saved, grad| [Some(backward(saved, &grad))]);
    }
}

#[derive(Debug)]
struct CubeCrossEntropyBackward;

impl Backward<Cube, 1> for CubeCrossEntropyBackward {
    type State = cube::cross_entropy::Saved;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step_on::<Cube, _, 1, _>(&ops, grads, |saved, grad| [Some(cube::cross_entropy::backward(saved, grad))]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_close, flex_and_wgpu, input, values};
    use burn::tensor::{Device, TensorData};

    #[test]
    fn fused_cross_entropy_matches_the_composed_ops_with_and_without_a_mask() {
        // flex's kernels to flex's composed ops, and CubeCL's to Burn's on wgpu (lavapipe).
        for (device, tolerance) in flex_and_wgpu(1e-6, 1e-5) {
            fused_cross_entropy_matches_the_composed_ops_on(&device, tolerance);
        }
    }

    fn fused_cross_entropy_matches_the_composed_ops_on(device: &Device, tolerance: f32) {
        let (batch, time, vocab) = (3, 5, 11);
        let targets: Vec<i64> = (0..batch * time).map(|i| (i * 7 % vocab) as i64).collect();
        let mask: Vec<f32> = (0..batch * time).map(|i| (i % 3 != 0) as u8 as f32).collect();
        for masked in [false, true] {
            let run = |fused: bool| {
                let logits = input([batch, time, vocab], 1, device) * 3.0;
                let logits = logits.detach().require_grad();
                let t = Tensor::<2, Int>::from_data(TensorData::new(targets.clone(), [batch, time]), device);
                let m = masked.then(|| Tensor::<2>::from_data(TensorData::new(mask.clone(), [batch, time]), device));
                let loss = if fused { cross_entropy(logits.clone(), t, m) } else { composed(logits.clone(), t, m) };
                let grads = (loss.clone() * 2.5).backward();
                (values(loss), values(logits.grad(&grads).unwrap()))
            };
            let (fused, d_fused) = run(true);
            let (composed, d_composed) = run(false);
            assert_close(&fused, &composed, tolerance, &format!("{device:?}: loss, masked {masked}"));
            assert_close(&d_fused, &d_composed, tolerance, &format!("{device:?}: dlogits, masked {masked}"));
        }
    }
}
