//! Layer normalisation on a cubecl GPU: one launch forward, two backward (Burn's composed layer
//! norm is about ten launches forward and twenty backward). The arithmetic is the flex kernel's
//! (`crate::layer_norm`). Forward, each unit takes one row, which suits the small widths this
//! playground trains. Backward, a workgroup takes a block of rows, its units side by side along
//! each row, and leaves dγ and dβ as a partial sum per block, which a second launch adds up
//! (`block_sum`): no unit loops over the batch's rows. GPUs emulated on the CPU take the
//! barrier-free backward of `layer_norm_serial` instead.

use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::block_sum::{strided_sum, workgroup_sums, workgroup_units};
use super::dx_target::{DxTarget, store_dx};
use super::grid_limit::Axis;
use super::{along_axis, contiguous, empty, note, tree_steps, units};

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

/// Rows whose means one workgroup tree adds up at once: a tree's barriers cost an emulated GPU
/// (lavapipe, SwiftShader) far more than its additions, and four rows' eight sums take
/// 8 KiB of workgroup memory at 256 units (WebGPU guarantees 16).
const ROWS_AT_ONCE: usize = 4;

/// dx = r·(g − mean(g) − x̂·mean(g·x̂)) per row (added to `dx`'s values with `accumulate`),
/// with g = dy·γ and x̂ = (x − μ)·r; and each
/// channel's Σ dy·x̂ and Σ dy over the workgroup's rows into `partials` [2·channels, cubes]
/// (dγ's partial sums, then dβ's). The workgroup's units share each row, unit u taking channels
/// u, u + units, … (neighbouring units read neighbouring values), and add up the means of
/// [`ROWS_AT_ONCE`] rows together in workgroup memory.
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
    #[comptime] accumulate: bool,
) {
    let channels = gamma.len();
    let rows = stats.len() / 2;
    let cubes = partials.len() / (2 * channels);
    let unit = UNIT_POS as usize;
    let count = f32::cast_from(channels as u32);
    let mut shared = Shared::<[f32]>::new_slice(2 * ROWS_AT_ONCE * units);
    let mut sums = Array::<f32>::new(2 * ROWS_AT_ONCE);
    let mut g = Array::<f32>::new(ROWS_AT_ONCE * per_unit);
    let mut normalised = Array::<f32>::new(ROWS_AT_ONCE * per_unit);
    let mut d_gamma = Array::<f32>::new(per_unit);
    let mut d_beta = Array::<f32>::new(per_unit);
    #[unroll]
    for k in 0..per_unit {
        d_gamma[k] = 0.0;
        d_beta[k] = 0.0;
    }
    for step in 0..ROWS_PER_CUBE / ROWS_AT_ONCE {
        // Every unit takes part in every tree (they wait for each other); past the last row
        // they read row 0 and write nothing.
        #[unroll]
        for r in 0..ROWS_AT_ONCE {
            let row = CUBE_POS * ROWS_PER_CUBE + step * ROWS_AT_ONCE + r;
            let at = select(row < rows, row, 0);
            let start = at * channels;
            let (mu, rstd) = (stats[at * 2], stats[at * 2 + 1]);
            sums[2 * r] = 0.0;
            sums[2 * r + 1] = 0.0;
            #[unroll]
            for k in 0..per_unit {
                let c = unit + k * units;
                let i = r * per_unit + k;
                g[i] = 0.0;
                normalised[i] = 0.0;
                if c < channels {
                    g[i] = dy[start + c] * gamma[c];
                    normalised[i] = (x[start + c] - mu) * rstd;
                    sums[2 * r] += g[i];
                    sums[2 * r + 1] += g[i] * normalised[i];
                }
            }
        }
        workgroup_sums(&mut shared, &mut sums, 2 * ROWS_AT_ONCE);
        #[unroll]
        for r in 0..ROWS_AT_ONCE {
            let row = CUBE_POS * ROWS_PER_CUBE + step * ROWS_AT_ONCE + r;
            let start = row * channels;
            let (mean_g, mean_gn) = (sums[2 * r] / count, sums[2 * r + 1] / count);
            #[unroll]
            for k in 0..per_unit {
                let c = unit + k * units;
                let i = r * per_unit + k;
                if row < rows && c < channels {
                    let d = dy[start + c];
                    let value = stats[row * 2 + 1] * (g[i] - mean_g - normalised[i] * mean_gn);
                    store_dx(dx, start + c, value, accumulate);
                    d_gamma[k] += d * normalised[i];
                    d_beta[k] += d;
                }
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
    let mut sums = Array::<f32>::new(2usize);
    sums[0] = strided_sum(partials, channel * cubes, cubes);
    sums[1] = strided_sum(partials, (channels + channel) * cubes, cubes);
    workgroup_sums(&mut shared, &mut sums, 2usize);
    if UNIT_POS == 0 {
        d_gamma[channel] = sums[0];
        d_beta[channel] = sums[1];
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
    // A unit reads its row twice (μ, then σ²) and writes it once.
    note(&cube_count, cube_dim, 3 * channels, rows * channels + channels * (1 + usize::from(with_beta)), rows * channels + 2 * rows);
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

/// dx, dγ, dβ: two launches, neither looping over the batch's rows in one unit; on a GPU
/// emulated on the CPU, the barrier-free kernels of `layer_norm_serial` instead. Given x's
/// gradient so far (`stream`), dx is added to it, in the same launch where nothing else holds
/// its buffer.
pub(crate) fn backward(saved: &Saved, dy: CubeTensor, stream: Option<CubeTensor>) -> (CubeTensor, CubeTensor, CubeTensor) {
    if super::product_choice::emulated(&saved.x.device) {
        return super::layer_norm_serial::backward(&saved.x, &saved.gamma, &saved.stats, dy, stream);
    }
    backward_in_blocks(saved, dy, stream)
}

/// The axes of [`backward_in_blocks`]' two launches over `rows` rows of `channels`: a workgroup
/// per block of rows, then one per channel (`grid_limit`).
pub(crate) fn backward_axes(rows: usize, channels: usize) -> [Axis; 2] {
    [(rows.div_ceil(ROWS_PER_CUBE), "batch × context"), (channels, "the embedding width")]
}

/// [`backward`] by blocks of rows, with workgroup trees.
pub(crate) fn backward_in_blocks(saved: &Saved, dy: CubeTensor, stream: Option<CubeTensor>) -> (CubeTensor, CubeTensor, CubeTensor) {
    let Saved { x, gamma, stats } = saved;
    let dy = contiguous(dy);
    let channels = gamma.meta.shape().num_elements();
    let rows = x.meta.shape().num_elements() / channels;
    let client = x.client.clone();
    // A workgroup no wider than the row (down to 32, a warp), so few units idle on narrow rows.
    let units = workgroup_units(&client).min(channels.next_power_of_two().max(32));
    let [blocks, finish] = backward_axes(rows, channels);
    let cubes = blocks.0;
    let target = DxTarget::new(stream, x);
    let partials = empty(x, [2 * channels, cubes]);
    let (count, dim) = (cubecl::CubeCount::new_1d(along_axis(blocks)), cubecl::CubeDim::new_1d(units as u32));
    let per_unit = channels.div_ceil(units);
    // Two passes over a unit's channels of each of its rows, and a tree every ROWS_AT_ONCE rows.
    let trips = ROWS_PER_CUBE * 2 * per_unit + (ROWS_PER_CUBE / ROWS_AT_ONCE) * tree_steps(units);
    note(&count, dim, trips, 2 * rows * channels + 2 * rows + channels + target.values_read(), rows * channels + 2 * channels * cubes);
    layer_norm_backward_kernel::launch(
        &client,
        count,
        dim,
        x.clone().into_tensor_arg(),
        gamma.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        dy.into_tensor_arg(),
        target.dx.clone().into_tensor_arg(),
        partials.clone().into_tensor_arg(),
        units,
        per_unit,
        target.accumulate,
    );
    let dx = target.finish();
    let (d_gamma, d_beta) = (empty(x, [channels]), empty(x, [channels]));
    // A whole workgroup whatever the batch, so that a unit's share stays one partial sum up to
    // 256 blocks (16,384 rows) and the work per unit does not change with the batch.
    let finish_units = workgroup_units(&client);
    let (count, dim) = (cubecl::CubeCount::new_1d(along_axis(finish)), cubecl::CubeDim::new_1d(finish_units as u32));
    note(&count, dim, 2 * cubes.div_ceil(finish_units) + tree_steps(finish_units), 2 * channels * cubes, 2 * channels);
    layer_norm_d_gamma_beta_kernel::launch(
        &client,
        count,
        dim,
        partials.into_tensor_arg(),
        d_gamma.clone().into_tensor_arg(),
        d_beta.clone().into_tensor_arg(),
        finish_units,
    );
    (dx, d_gamma, d_beta)
}

#[cfg(test)]
mod tests {
    use burn::backend::ops::FloatTensorOps;
    use burn_cubecl::CubeBackend as Cube;
    use burn_cubecl::tensor::CubeTensor;

    use crate::cube::{from_cube, to_cube};
    use crate::tests::{assert_close, gpu, input, values};

    /// The blocked backward and the emulators' serial one give the same gradients: 150 rows (the
    /// last block short) of 300 channels (more than a workgroup's units).
    #[test]
    fn the_blocked_and_the_serial_backward_agree() {
        let device = gpu();
        let (x, gamma) = (to_cube(input([150, 300], 1, &device)), to_cube(input([300], 2, &device)));
        let dy = to_cube(input([150, 300], 3, &device));
        let (_, saved) = super::forward(x, gamma, None, 1e-5);
        let flat = |t: CubeTensor| {
            let n = t.meta.shape().num_elements();
            values(from_cube::<1>(Cube::float_reshape(t, [n].into())))
        };
        let as_values = |(dx, dg, db): (CubeTensor, CubeTensor, CubeTensor)| [dx, dg, db].map(flat);
        let blocked = as_values(super::backward_in_blocks(&saved, dy.clone(), None));
        let serial_with =
            |stream| as_values(super::super::layer_norm_serial::backward(&saved.x, &saved.gamma, &saved.stats, dy.clone(), stream));
        let serial = serial_with(None);
        for (name, (a, b)) in ["dx", "dγ", "dβ"].iter().zip(blocked.iter().zip(&serial)) {
            assert_close(a, b, 1e-5, name);
        }
        // Given x's gradient so far, dx is added to it: in place where nothing else holds it,
        // and afterwards where something does (`held`).
        let stream = input([150, 300], 4, &device);
        let sum: Vec<f32> = values(stream.clone()).iter().zip(&serial[0]).map(|(s, d)| s + d).collect();
        let in_place = as_values(super::backward_in_blocks(&saved, dy.clone(), Some(to_cube(stream.clone()))));
        let serial_in_place = serial_with(Some(to_cube(stream.clone())));
        let held = to_cube(stream);
        let afterwards = as_values(super::backward_in_blocks(&saved, dy.clone(), Some(held.clone())));
        for (name, got) in [("in place", &in_place), ("afterwards", &afterwards), ("serial, in place", &serial_in_place)] {
            assert_close(&got[0], &sum, 1e-5, name);
            assert_close(&got[1], &serial[1], 1e-5, name);
        }
        drop(held);
    }
}
