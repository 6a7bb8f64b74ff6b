//! Layer normalisation on a cubecl GPU: one launch forward, two backward (Burn's composed layer
//! norm is about ten launches forward and twenty backward). The arithmetic is the flex kernel's
//! (`crate::layer_norm`); each unit takes one row (forward, dx) or one channel (dγ, dβ), which
//! suits the small widths this playground trains.

use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::{contiguous, empty, units};

/// y = (x − μ)·r·γ + β per row of `channels` values, and each row's μ and r = 1/√(σ² + ε) in
/// `stats` [rows, 2].
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn layer_norm_kernel(
    x: &Tensor<f32>,
    gamma: &Tensor<f32>,
    beta: &Tensor<f32>,
    y: &mut Tensor<f32>,
    stats: &mut Tensor<f32>,
    epsilon: f32,
    #[comptime] with_beta: bool,
) {
    let row = ABSOLUTE_POS;
    let channels = gamma.len();
    if row * 2 >= stats.len() {
        terminate!();
    }
    let start = row * channels;
    let count = f32::cast_from(channels as u32);
    let mut sum = 0.0f32;
    for c in 0..channels {
        sum += x[start + c];
    }
    let mu = sum / count;
    let mut squares = 0.0f32;
    for c in 0..channels {
        let centred = x[start + c] - mu;
        squares += centred * centred;
    }
    let r = 1.0f32 / (squares / count + epsilon).sqrt();
    for c in 0..channels {
        let mut value = (x[start + c] - mu) * r * gamma[c];
        if with_beta {
            value += beta[c];
        }
        y[start + c] = value;
    }
    stats[row * 2] = mu;
    stats[row * 2 + 1] = r;
}

/// dx = r·(g − mean(g) − x̂·mean(g·x̂)) per row, with g = dy·γ and x̂ = (x − μ)·r.
#[cube(launch)]
fn layer_norm_dx_kernel(x: &Tensor<f32>, gamma: &Tensor<f32>, stats: &Tensor<f32>, dy: &Tensor<f32>, dx: &mut Tensor<f32>) {
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
        dx[start + c] = r * (g - mean_g - normalised * mean_gn);
    }
}

/// dγ = Σ_rows dy·x̂ and dβ = Σ_rows dy, per channel.
#[cube(launch)]
fn layer_norm_d_gamma_beta_kernel(
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

/// What the backward pass needs of the forward.
#[derive(Debug, Clone)]
pub(crate) struct Saved {
    pub x: CubeTensor,
    pub gamma: CubeTensor,
    /// [rows, 2]: μ, r.
    pub stats: CubeTensor,
}

/// y and what the backward pass needs.
pub(crate) fn forward(x: CubeTensor, gamma: CubeTensor, beta: Option<CubeTensor>, epsilon: f32) -> (CubeTensor, Saved) {
    let x = contiguous(x);
    let gamma = contiguous(gamma);
    let channels = gamma.meta.shape().num_elements();
    let rows = x.meta.shape().num_elements() / channels;
    let y = empty(&x, x.meta.shape());
    let stats = empty(&x, [rows, 2]);
    let with_beta = beta.is_some();
    // Unread without β; any f32 buffer fills the slot.
    let beta = beta.map_or_else(|| gamma.clone(), contiguous);
    let client = x.client.clone();
    let (cube_count, cube_dim) = units(&client, rows);
    layer_norm_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        x.clone().into_tensor_arg(),
        gamma.clone().into_tensor_arg(),
        beta.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        epsilon,
        with_beta,
    );
    (y, Saved { x, gamma, stats })
}

/// dx, dγ, dβ.
pub(crate) fn backward(saved: &Saved, dy: CubeTensor) -> (CubeTensor, CubeTensor, CubeTensor) {
    let Saved { x, gamma, stats } = saved;
    let dy = contiguous(dy);
    let channels = gamma.meta.shape().num_elements();
    let rows = x.meta.shape().num_elements() / channels;
    let dx = empty(x, x.meta.shape());
    let (d_gamma, d_beta) = (empty(x, [channels]), empty(x, [channels]));
    let client = x.client.clone();
    let (cube_count, cube_dim) = units(&client, rows);
    layer_norm_dx_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        x.clone().into_tensor_arg(),
        gamma.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        dy.clone().into_tensor_arg(),
        dx.clone().into_tensor_arg(),
    );
    let (cube_count, cube_dim) = units(&client, channels);
    layer_norm_d_gamma_beta_kernel::launch(
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
