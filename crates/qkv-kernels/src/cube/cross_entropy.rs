//! Next-token cross-entropy on a cubecl GPU: one launch for every row's log Σ exp and each
//! workgroup's share of the weighted mean, one to add the shares up (`block_sum`), one launch
//! backward. Burn's composed log-softmax, gather
//! and mean are about a dozen launches forward and as many backward. The arithmetic is the flex
//! kernel's (`crate::cross_entropy`), one unit per row.

use burn::backend::ops::FloatTensorOps;
use burn::tensor::DType;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::block_sum::{self, workgroup_sum};
use super::grid_limit::Axis;
use super::{along_axis, contiguous, empty, note, tree_steps, units};

/// Row i's log Σ exp(logits) into `log_norms[i]`, and the sum over the workgroup's rows of
/// `w_i·(log_norm − logits[target])` into `partials[workgroup]`, with w_i `weights[i]` when
/// masked, else `uniform`. One unit a row; every unit takes part in the workgroup's sum, so units
/// past the last row add 0 rather than end.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn cross_entropy_kernel(
    logits: &Tensor<f32>,
    targets: &Tensor<i32>,
    weights: &Tensor<f32>,
    partials: &mut Tensor<f32>,
    log_norms: &mut Tensor<f32>,
    uniform: f32,
    #[comptime] masked: bool,
    #[comptime] units: usize,
) {
    let rows = targets.len();
    let live = ABSOLUTE_POS < rows;
    let row = select(live, ABSOLUTE_POS, 0);
    let vocab = logits.len() / rows;
    let start = row * vocab;
    let mut top = logits[start];
    for v in 1..vocab {
        let logit = logits[start + v];
        if logit > top {
            top = logit;
        }
    }
    let mut sum = 0.0f32;
    for v in 0..vocab {
        sum += (logits[start + v] - top).exp();
    }
    let log_norm = top + sum.ln();
    let target = u32::cast_from(targets[row]) as usize;
    let mut weight = uniform;
    if masked {
        weight = weights[row];
    }
    let mut loss = 0.0f32;
    if live {
        log_norms[row] = log_norm;
        loss = weight * (log_norm - logits[start + target]);
    }
    let mut shared = Shared::<[f32]>::new_slice(units);
    let total = workgroup_sum(&mut shared, loss);
    if UNIT_POS == 0 {
        partials[CUBE_POS] = total;
    }
}

/// d_logits[i, v] = g·w_i·(exp(logits[i, v] − log_norm_i) − [v = target_i]), g = `grad[0]`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn cross_entropy_backward_kernel(
    logits: &Tensor<f32>,
    targets: &Tensor<i32>,
    weights: &Tensor<f32>,
    log_norms: &Tensor<f32>,
    grad: &Tensor<f32>,
    d_logits: &mut Tensor<f32>,
    uniform: f32,
    #[comptime] masked: bool,
) {
    let i = ABSOLUTE_POS;
    if i >= logits.len() {
        terminate!();
    }
    let rows = targets.len();
    let vocab = logits.len() / rows;
    let row = i / vocab;
    let mut weight = uniform;
    if masked {
        weight = weights[row];
    }
    let scale = grad[0] * weight;
    let mut d = scale * (logits[i] - log_norms[row]).exp();
    if i - row * vocab == u32::cast_from(targets[row]) as usize {
        d -= scale;
    }
    d_logits[i] = d;
}

/// What the backward pass needs of the forward.
#[derive(Debug, Clone)]
pub(crate) struct Saved {
    logits: CubeTensor,
    targets: CubeTensor,
    /// Each row's weight in the mean (mask / Σ mask), or `None` for 1/rows.
    weights: Option<CubeTensor>,
    log_norms: CubeTensor,
}

/// Whether the kernels take these targets: i32, the integer type Burn's cubecl devices use.
pub(crate) fn takes(targets: &CubeTensor) -> bool {
    targets.dtype == DType::I32
}

/// The forward's workgroups over `rows` rows, a row to each of `units` units (`grid_limit`).
pub(crate) fn row_groups(rows: usize, units: usize) -> Axis {
    (rows.div_ceil(units), "batch × context")
}

/// The loss [1] (the mean, weighted by `mask` when given) and what the backward pass needs.
pub(crate) fn forward(logits: CubeTensor, targets: CubeTensor, mask: Option<CubeTensor>) -> (CubeTensor, Saved) {
    let logits = contiguous(logits);
    let targets = contiguous(targets);
    let rows = targets.meta.shape().num_elements();
    let weights = mask.map(|mask| {
        let mask = Cube::float_reshape(mask, [rows].into());
        let total = block_sum::sum_all(mask.clone());
        contiguous(Cube::float_div(mask, total))
    });
    let client = logits.client.clone();
    let units = block_sum::workgroup_units(&client);
    let groups = row_groups(rows, units);
    let cubes = groups.0;
    let (partials, log_norms) = (empty(&logits, [cubes]), empty(&logits, [rows]));
    let (count, dim) = (cubecl::CubeCount::new_1d(along_axis(groups)), cubecl::CubeDim::new_1d(units as u32));
    let vocab = logits.meta.shape().num_elements() / rows.max(1);
    // A unit reads its row twice (maximum, then Σ exp); the logits, targets and any weights in,
    // the log-norms and the partial sums out.
    note(&count, dim, 2 * vocab + tree_steps(units), rows * vocab + rows * (1 + usize::from(weights.is_some())), rows + cubes);
    cross_entropy_kernel::launch(
        &client,
        count,
        dim,
        logits.clone().into_tensor_arg(),
        targets.clone().into_tensor_arg(),
        // Unread without a mask: any read-only buffer fills the slot.
        weights.clone().unwrap_or_else(|| logits.clone()).into_tensor_arg(),
        partials.clone().into_tensor_arg(),
        log_norms.clone().into_tensor_arg(),
        1.0 / rows as f32,
        weights.is_some(),
        units,
    );
    let loss = block_sum::sum_runs(partials, cubes);
    (loss, Saved { logits, targets, weights, log_norms })
}

/// d_logits, from the gradient [1] arriving at the loss.
pub(crate) fn backward(saved: &Saved, grad: CubeTensor) -> CubeTensor {
    let Saved { logits, targets, weights, log_norms } = saved;
    let n = logits.meta.shape().num_elements();
    let rows = targets.meta.shape().num_elements();
    let d_logits = empty(logits, logits.meta.shape().clone());
    let client = logits.client.clone();
    let (cube_count, cube_dim) = units(&client, n);
    note(&cube_count, cube_dim, 1, n + rows * (2 + usize::from(weights.is_some())) + 1, n);
    cross_entropy_backward_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        logits.clone().into_tensor_arg(),
        targets.clone().into_tensor_arg(),
        weights.clone().unwrap_or_else(|| logits.clone()).into_tensor_arg(),
        log_norms.clone().into_tensor_arg(),
        contiguous(grad).into_tensor_arg(),
        d_logits.clone().into_tensor_arg(),
        1.0 / rows as f32,
        weights.is_some(),
    );
    d_logits
}
