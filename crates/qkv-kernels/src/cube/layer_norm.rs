//! Layer normalisation on a cubecl GPU: one launch forward, two backward (Burn's composed layer
//! norm is about ten launches forward and twenty backward). The arithmetic is the flex kernel's
//! (`crate::layer_norm`). Forward, each unit takes one row, which suits the small widths this
//! playground trains. Backward, a workgroup takes a block of rows, its units side by side along
//! each row, and leaves dγ and dβ as a partial sum per block, which a second launch adds up
//! (`block_sum`): no unit loops over the batch's rows.

use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::block_sum::{strided_sum, workgroup_sum, workgroup_units};
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

/// Rows one workgroup of the backward pass takes. Its units add up their channels' dγ and dβ
/// over these rows in registers, so a channel's finish adds ⌈rows / ROWS_PER_CUBE⌉ partial
/// sums: one per unit of a workgroup of 256 up to 16,384 rows (batch 64 × context 256).
const ROWS_PER_CUBE: usize = 64;

/// dx = r·(g − mean(g) − x̂·mean(g·x̂)) per row, with g = dy·γ and x̂ = (x − μ)·r; and each
/// channel's Σ dy·x̂ and Σ dy over the workgroup's rows into `partials` [2·channels, cubes]
/// (dγ's partial sums, then dβ's). The workgroup's units share each row, unit u taking channels
/// u, u + units, … (neighbouring units read neighbouring values), and add up the row's two means
/// together in workgroup memory.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn layer_norm_backward_kernel(
    x: &Tensor<f32>,
    gamma: &Tensor<f32>,
    stats: &Tensor<f32>,
    dy: &Tensor<f32>,
    dx: &mut Tensor<f32>,
    partials: &mut Tensor<f32>,
    #[comptime] units: usize,
    #[comptime] per_unit: usize,
) {
    let channels = gamma.len();
    let rows = stats.len() / 2;
    let cubes = partials.len() / (2 * channels);
    let unit = UNIT_POS as usize;
    let count = f32::cast_from(channels as u32);
    let mut shared = Shared::<[f32]>::new_slice(2 * units);
    let mut d_gamma = Array::<f32>::new(per_unit);
    let mut d_beta = Array::<f32>::new(per_unit);
    let mut g = Array::<f32>::new(per_unit);
    let mut normalised = Array::<f32>::new(per_unit);
    #[unroll]
    for k in 0..per_unit {
        d_gamma[k] = 0.0;
        d_beta[k] = 0.0;
    }
    for r in 0..ROWS_PER_CUBE {
        // Every unit takes part in every row's sums (they wait for each other); past the last
        // row they read row 0 and write nothing.
        let row = CUBE_POS * ROWS_PER_CUBE + r;
        let live = row < rows;
        let at = select(live, row, 0);
        let start = at * channels;
        let (mu, rstd) = (stats[at * 2], stats[at * 2 + 1]);
        let mut sum_g = 0.0f32;
        let mut sum_gn = 0.0f32;
        #[unroll]
        for k in 0..per_unit {
            let c = unit + k * units;
            g[k] = 0.0;
            normalised[k] = 0.0;
            if c < channels {
                g[k] = dy[start + c] * gamma[c];
                normalised[k] = (x[start + c] - mu) * rstd;
                sum_g += g[k];
                sum_gn += g[k] * normalised[k];
            }
        }
        let (sum_g, sum_gn) = workgroup_sum(&mut shared, sum_g, sum_gn);
        let (mean_g, mean_gn) = (sum_g / count, sum_gn / count);
        #[unroll]
        for k in 0..per_unit {
            let c = unit + k * units;
            if live && c < channels {
                let d = dy[start + c];
                dx[start + c] = rstd * (g[k] - mean_g - normalised[k] * mean_gn);
                d_gamma[k] += d * normalised[k];
                d_beta[k] += d;
            }
        }
    }
    #[unroll]
    for k in 0..per_unit {
        let c = unit + k * units;
        if c < channels {
            partials[c * cubes + CUBE_POS] = d_gamma[k];
            partials[(channels + c) * cubes + CUBE_POS] = d_beta[k];
        }
    }
}

/// dγ[c] and dβ[c]: the sums of channel c's partial sums, one workgroup a channel.
#[cube(launch)]
fn layer_norm_d_gamma_beta_kernel(partials: &Tensor<f32>, d_gamma: &mut Tensor<f32>, d_beta: &mut Tensor<f32>, #[comptime] units: usize) {
    let channel = CUBE_POS;
    let channels = d_gamma.len();
    let cubes = partials.len() / (2 * channels);
    let mut shared = Shared::<[f32]>::new_slice(2 * units);
    let gamma_share = strided_sum(partials, channel * cubes, cubes);
    let beta_share = strided_sum(partials, (channels + channel) * cubes, cubes);
    let (sum_gamma, sum_beta) = workgroup_sum(&mut shared, gamma_share, beta_share);
    if UNIT_POS == 0 {
        d_gamma[channel] = sum_gamma;
        d_beta[channel] = sum_beta;
    }
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

/// dx, dγ, dβ: two launches, neither looping over the batch's rows in one unit.
pub(crate) fn backward(saved: &Saved, dy: CubeTensor) -> (CubeTensor, CubeTensor, CubeTensor) {
    let Saved { x, gamma, stats } = saved;
    let dy = contiguous(dy);
    let channels = gamma.meta.shape().num_elements();
    let rows = x.meta.shape().num_elements() / channels;
    let client = x.client.clone();
    // A workgroup no wider than the row (down to 32, a warp), so few units idle on narrow rows.
    let units = workgroup_units(&client).min(channels.next_power_of_two().max(32));
    let cubes = rows.div_ceil(ROWS_PER_CUBE);
    let dx = empty(x, x.meta.shape());
    let partials = empty(x, [2 * channels, cubes]);
    layer_norm_backward_kernel::launch(
        &client,
        cubecl::CubeCount::new_1d(cubes as u32),
        cubecl::CubeDim::new_1d(units as u32),
        x.clone().into_tensor_arg(),
        gamma.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        dy.into_tensor_arg(),
        dx.clone().into_tensor_arg(),
        partials.clone().into_tensor_arg(),
        units,
        channels.div_ceil(units),
    );
    let (d_gamma, d_beta) = (empty(x, [channels]), empty(x, [channels]));
    let finish_units = workgroup_units(&client).min(cubes.next_power_of_two().max(32));
    layer_norm_d_gamma_beta_kernel::launch(
        &client,
        cubecl::CubeCount::new_1d(channels as u32),
        cubecl::CubeDim::new_1d(finish_units as u32),
        partials.into_tensor_arg(),
        d_gamma.clone().into_tensor_arg(),
        d_beta.clone().into_tensor_arg(),
        finish_units,
    );
    (dx, d_gamma, d_beta)
}
