//! A GPT's input on a cubecl GPU: token and position embeddings added, one launch, where Burn's
//! embeddings and the sum take three (two gathers and an add) and an upload of the positions.
//! Backward, the token table's gradient is two launches over the batch's positions grouped by
//! token on the host (`crate::token_groups`): each run of one token's positions summed, then each
//! token's runs; without the groups, Burn's scatter (`embedding_backward`, a unit a channel looping
//! over every position); a tied LM head's gradient for the table is added in the second. The
//! position table's is the gradient summed over the batch (`block_sum::column_sums`, one launch up
//! to 64 rows), where Burn's embedding, its scatter and the broadcast's sum took three launches.

use burn::backend::ops::{FloatTensorOps, ModuleOps};
use burn::tensor::Slice;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::{contiguous, empty, note, units};
use crate::token_groups::RUN;

/// out[r, c] = wte[tokens[r], c] + wpe[offset + r mod time, c], one unit a value.
#[cube(launch)]
fn embed_kernel(tokens: &Tensor<i32>, wte: &Tensor<f32>, wpe: &Tensor<f32>, out: &mut Tensor<f32>, offset: u32, time: u32) {
    let i = ABSOLUTE_POS;
    if i >= out.len() {
        terminate!();
    }
    let channels = out.shape(out.rank() - 1);
    let row = i / channels;
    let c = i % channels;
    let token = u32::cast_from(tokens[row]) as usize;
    let position = offset as usize + row % time as usize;
    out[i] = wte[token * wte.stride(0) + c * wte.stride(1)] + wpe[position * wpe.stride(0) + c * wpe.stride(1)];
}

/// `partial[j, c]` = Σ `d_out[order[k], c]` over run j's `k` in `run_starts[j]..run_starts[j + 1]`
/// (at most [`RUN`]): a workgroup a run, its units along the channels.
#[cube(launch)]
fn token_run_sums_kernel(d_out: &Tensor<f32>, order: &Tensor<i32>, run_starts: &Tensor<i32>, partial: &mut Tensor<f32>, runs: u32) {
    let run = CUBE_POS;
    if run >= runs as usize {
        terminate!();
    }
    let channels = partial.shape(1);
    let (start, end) = (u32::cast_from(run_starts[run]) as usize, u32::cast_from(run_starts[run + 1]) as usize);
    let mut c = UNIT_POS as usize;
    while c < channels {
        let mut sum = 0.0f32;
        for i in 0..RUN {
            let k = start + i;
            if k < end {
                sum += d_out[u32::cast_from(order[k]) as usize * channels + c];
            }
        }
        partial[run * channels + c] = sum;
        c += CUBE_DIM as usize;
    }
}

/// `d_wte[v, c]` = Σ `partial[j, c]` over token v's runs `token_runs[v]..token_runs[v + 1]`, 0
/// for a token without any, plus `so_far[v, c]` (read through its strides) `with_so_far`: a
/// workgroup a token, its units along the channels, each looping `span` times (at least any
/// token's runs).
#[cube(launch)]
fn token_sums_kernel(
    partial: &Tensor<f32>,
    token_runs: &Tensor<i32>,
    so_far: &Tensor<f32>,
    d_wte: &mut Tensor<f32>,
    span: u32,
    #[comptime] with_so_far: bool,
) {
    let token = CUBE_POS;
    let channels = d_wte.shape(1);
    if token >= d_wte.shape(0) {
        terminate!();
    }
    let (first, last) = (u32::cast_from(token_runs[token]) as usize, u32::cast_from(token_runs[token + 1]) as usize);
    let mut c = UNIT_POS as usize;
    while c < channels {
        let mut sum = 0.0f32;
        for i in 0..span as usize {
            let j = first + i;
            if j < last {
                sum += partial[j * channels + c];
            }
        }
        if with_so_far {
            sum += so_far[token * so_far.stride(0) + c * so_far.stride(1)];
        }
        d_wte[token * channels + c] = sum;
        c += CUBE_DIM as usize;
    }
}

/// What the backward pass needs of the forward.
#[derive(Debug, Clone)]
pub(crate) struct Saved {
    tokens: CubeTensor,
    wte: CubeTensor,
    positions: usize,
    offset: usize,
    /// The batch's positions by token, on the device, where the caller grouped them.
    groups: Option<DeviceGroups>,
}

/// A [`crate::token_groups::Layout`] on the device.
#[derive(Debug, Clone)]
pub(crate) struct DeviceGroups {
    pub order: CubeTensor,
    pub run_starts: CubeTensor,
    pub token_runs: CubeTensor,
    pub span: usize,
}

/// Workgroups for `groups` groups of one launch: along x up to the axis limit, then rows of
/// them; `CUBE_POS` counts them in order.
fn groups_grid(groups: usize) -> cubecl::CubeCount {
    use super::grid_limit::MOST_PER_AXIS;
    cubecl::CubeCount::new_2d(groups.clamp(1, MOST_PER_AXIS) as u32, groups.div_ceil(MOST_PER_AXIS).max(1) as u32)
}

/// The token table's gradient from the output's by the batch's groups, plus the table's gradient
/// `so_far` (a tied LM head's): two launches.
fn token_gradient(d_out: &CubeTensor, wte: &CubeTensor, groups: &DeviceGroups, so_far: Option<CubeTensor>) -> CubeTensor {
    let [vocab, channels] = wte.meta.shape().dims();
    let runs = groups.run_starts.meta.shape().num_elements() - 1;
    let positions = groups.order.meta.shape().num_elements();
    let client = wte.client.clone();
    let dim = cubecl::CubeDim::new_1d(super::block_sum::workgroup_units(&client).min(channels.next_power_of_two()) as u32);
    let per_unit = channels.div_ceil(dim.num_elems() as usize);
    let partial = empty(wte, [runs.max(1), channels]);
    let count = groups_grid(runs);
    note(&count, dim, RUN * per_unit, positions * (channels + 1) + runs + 1, runs * channels);
    token_run_sums_kernel::launch(
        &client,
        count,
        dim,
        d_out.clone().into_tensor_arg(),
        groups.order.clone().into_tensor_arg(),
        groups.run_starts.clone().into_tensor_arg(),
        partial.clone().into_tensor_arg(),
        runs as u32,
    );
    let d_wte = empty(wte, [vocab, channels]);
    let count = groups_grid(vocab);
    let with_so_far = so_far.is_some();
    let so_far_read = if with_so_far { vocab * channels } else { 0 };
    note(&count, dim, groups.span * per_unit, runs * channels + vocab + 1 + so_far_read, vocab * channels);
    // Unread without a gradient so far; any f32 tensor fills the slot.
    let so_far = so_far.unwrap_or_else(|| partial.clone());
    token_sums_kernel::launch(
        &client,
        count,
        dim,
        partial.into_tensor_arg(),
        groups.token_runs.clone().into_tensor_arg(),
        so_far.into_tensor_arg(),
        d_wte.clone().into_tensor_arg(),
        groups.span as u32,
        with_so_far,
    );
    d_wte
}

/// [batch, time, channels] from `tokens` [batch, time] (i32), the token table `wte` [vocab,
/// channels] and the position table `wpe` [positions, channels], positions from `offset`.
pub(crate) fn forward(
    tokens: CubeTensor,
    wte: CubeTensor,
    wpe: CubeTensor,
    offset: usize,
    groups: Option<DeviceGroups>,
) -> (CubeTensor, Saved) {
    let tokens = contiguous(tokens);
    let [batch, time] = tokens.meta.shape().dims();
    let [positions, channels] = wpe.meta.shape().dims();
    let out = empty(&wte, [batch, time, channels]);
    let n = batch * time * channels;
    let client = wte.client.clone();
    let (cube_count, cube_dim) = units(&client, n);
    note(&cube_count, cube_dim, 1, batch * time + 2 * n, n);
    embed_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        tokens.clone().into_tensor_arg(),
        wte.clone().into_tensor_arg(),
        wpe.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        offset as u32,
        time as u32,
    );
    (out, Saved { tokens, wte, positions, offset, groups })
}

/// The token table's and the position table's gradients from the output's.
/// The token table's gradient is added to `table_so_far`, the table's gradient from its other
/// uses (a tied LM head's), where there is one.
pub(crate) fn backward(saved: &Saved, d_out: CubeTensor, table_so_far: Option<CubeTensor>) -> (CubeTensor, CubeTensor) {
    let Saved { tokens, wte, positions, offset, groups } = saved;
    let [batch, time, channels] = d_out.meta.shape().dims();
    let d_out = contiguous(d_out);
    let d_wte = match (groups, table_so_far) {
        (Some(groups), so_far) => token_gradient(&d_out, wte, groups, so_far),
        (None, so_far) => {
            let scattered = Cube::embedding_backward(wte.clone(), d_out.clone(), tokens.clone());
            so_far.map_or(scattered.clone(), |so_far| Cube::float_add(scattered, so_far))
        }
    };
    let by_batch_row = Cube::float_reshape(d_out, [batch, time * channels].into());
    let by_position = Cube::float_reshape(super::block_sum::column_sums(by_batch_row), [time, channels].into());
    let d_wpe = if *offset == 0 && time == *positions {
        by_position
    } else {
        let zeros = Cube::float_zeros([*positions, channels].into(), &wte.device, burn::tensor::FloatDType::F32);
        Cube::float_slice_assign(zeros, &[Slice::from(*offset..*offset + time)], by_position)
    };
    (d_wte, d_wpe)
}
