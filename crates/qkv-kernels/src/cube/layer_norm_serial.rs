//! Layer norm's backward pass for GPUs emulated on the CPU (SwiftShader, lavapipe where our
//! product was chosen): a unit a row for dx, and a unit a channel looping over every row for dγ
//! and dβ. No workgroup memory and no barrier, which is what an emulator pays for most (it runs
//! a workgroup's units a few to a SIMD vector and suspends them at every barrier): on
//! SwiftShader the blocked backward (`super::layer_norm`) took a classroom step from 2,794 to
//! 2,296 tokens/s. The same timing that gives a device our product (`super::product_choice`,
//! whose reason is the same) gives it this. On a GPU the per-channel loop over all B·T rows is
//! the serial work the blocked backward removes.

use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::dx_target::{DxTarget, store_dx};
use super::{contiguous, empty, note, units};

/// dx = r·(g − mean(g) − x̂·mean(g·x̂)) per row (added to `dx`'s values with `accumulate`), with
/// g = dy·γ and x̂ = (x − μ)·r.
#[cube(launch)]
fn layer_norm_dx_kernel(
    x: &Tensor<f32>,
    gamma: &Tensor<f32>,
    stats: &Tensor<f32>,
    dy: &Tensor<f32>,
    dx: &mut Tensor<f32>,
    #[comptime] accumulate: bool,
) {
    let row = ABSOLUTE_POS;
    let channels = gamma.len();
    if row * 2 >= stats.len() {
        terminate!();
    }
    let start = row * channels;
    let count = f32::cast_from(channels as u32);
    let mu = stats[row * 2];
    let r = stats[row * 2 + 1];
    let mut sum_g = 0.0f32;
    let mut sum_gn = 0.0f32;
    for c in 0..channels {
        let g = dy[start + c] * gamma[c];
        sum_g += g;
        sum_gn += g * (x[start + c] - mu) * r;
    }
    let mean_g = sum_g / count;
    let mean_gn = sum_gn / count;
    for c in 0..channels {
        let g = dy[start + c] * gamma[c];
        let normalised = (x[start + c] - mu) * r;
        store_dx(dx, start + c, r * (g - mean_g - normalised * mean_gn), accumulate);
    }
}

/// dγ = Σ_rows dy·x̂ and dβ = Σ_rows dy, per channel.
#[cube(launch)]
fn layer_norm_d_gamma_beta_by_channel_kernel(
    x: &Tensor<f32>,
    stats: &Tensor<f32>,
    dy: &Tensor<f32>,
    d_gamma: &mut Tensor<f32>,
    d_beta: &mut Tensor<f32>,
) {
    let channel = ABSOLUTE_POS;
    let channels = d_gamma.len();
    if channel >= channels {
        terminate!();
    }
    let rows = stats.len() / 2;
    let mut sum_gamma = 0.0f32;
    let mut sum_beta = 0.0f32;
    for row in 0..rows {
        let at = row * channels + channel;
        let normalised = (x[at] - stats[row * 2]) * stats[row * 2 + 1];
        sum_gamma += dy[at] * normalised;
        sum_beta += dy[at];
    }
    d_gamma[channel] = sum_gamma;
    d_beta[channel] = sum_beta;
}
/// dx, dγ, dβ from the forward's input `x`, gain `gamma` and row statistics `stats` [rows, 2]
/// (μ, r): two launches. dx is added to x's gradient so far, `stream`, where there is one.
pub(crate) fn backward(
    x: &CubeTensor,
    gamma: &CubeTensor,
    stats: &CubeTensor,
    dy: CubeTensor,
    stream: Option<CubeTensor>,
) -> (CubeTensor, CubeTensor, CubeTensor) {
    let dy = contiguous(dy);
    let channels = gamma.meta.shape().num_elements();
    let rows = x.meta.shape().num_elements() / channels;
    let target = DxTarget::new(stream, x);
    let (d_gamma, d_beta) = (empty(x, [channels]), empty(x, [channels]));
    let client = x.client.clone();
    let (cube_count, cube_dim) = units(&client, rows);
    note(&cube_count, cube_dim, 2 * channels, 2 * rows * channels + 2 * rows + channels + target.values_read(), rows * channels);
    layer_norm_dx_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        x.clone().into_tensor_arg(),
        gamma.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        dy.clone().into_tensor_arg(),
        target.dx.clone().into_tensor_arg(),
        target.accumulate,
    );
    let dx = target.finish();
    let (cube_count, cube_dim) = units(&client, channels);
    note(&cube_count, cube_dim, rows, 2 * rows * channels + 2 * rows, 2 * channels);
    layer_norm_d_gamma_beta_by_channel_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        x.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        dy.into_tensor_arg(),
        d_gamma.clone().into_tensor_arg(),
        d_beta.clone().into_tensor_arg(),
    );
    (dx, d_gamma, d_beta)
}
