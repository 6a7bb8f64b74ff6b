//! Attention tiled for GPUs, the same algebra as `super::attention` (flash-style: P is recomputed
//! from each query row's L = log Σ exp, never stored), causal or both ways, with GQA and an
//! optional bias B on the logits, one for all heads or one per head:
//!
//! ```text
//! forward:  O_i = Σ_j P_ij V_j, P_ij = exp(scale·Q_i·K_j + B_ij − L_i)
//! backward: D_i = dO_i·O_i   dS_ij = P_ij (dO_i·V_j − D_i)
//!           dQ_i = scale Σ_j dS_ij K_j   dK_j = scale Σ_i dS_ij Q_i   dV_j = Σ_i P_ij dO_i
//!           dB_ij = Σ_batch dS_ij (and Σ over the heads for a bias they share)
//! ```
//!
//! A workgroup takes one (batch row, head) and a block of [`ROWS`] query rows (forward, dQ) or key
//! rows (dK, dV), a unit a row. The rows it meets on the other side come in tiles that its units
//! load together into workgroup memory, neighbouring units reading neighbouring values of a row,
//! and every unit then reads each tile's row from there: one load from device memory a tile per
//! workgroup, where one unit a row read every key row of its head itself. A unit's own rows (its
//! query, or its key and value, and what it adds up) stay in registers, the head dimension's
//! loops unrolled (it is known when the kernel is compiled). D_i is added up by the dQ kernel
//! over the keys (Σ_j P_ij dP_ij, which is dO_i·O_i) and written beside L_i for the dK, dV
//! kernel: two launches backward where the per-row kernels take three. At most six tensors a
//! kernel, as WebGPU's limits allow.
//!
//! GPUs emulated on the CPU keep the per-row kernels (`super::attention`): barriers cost them most
//! (the same timing that gives them our product decides, `super::product_choice`).

use burn::backend::ops::FloatTensorOps;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::grid_limit::Axis;
use super::{along_axis, empty, note};

/// Rows of a workgroup (its units), on the side it takes.
const ROWS: usize = 64;

/// Rows of a tile of the other side for head dimension `d`: its two tensors' rows (K and V, or Q
/// and dO, with L and D) fit in 8 KiB of workgroup memory (WebGPU guarantees 16), 64 at most.
fn tile_rows(d: usize) -> usize {
    let rows = (1024 / d.max(1)).clamp(1, ROWS);
    1 << rows.ilog2()
}

/// The position of element [b, h, i, 0] of a 4-d tensor (its last dimension's stride steps on).
#[cube]
pub(super) fn row_start(x: &Tensor<f32>, b: usize, h: usize, i: usize) -> usize {
    b * x.stride(0) + h * x.stride(1) + i * x.stride(2)
}

/// Loads rows `first..first + rows` of head (b, g) of `x` (each `d` values; element [0, 0, 0, 0]
/// at `base`) into `tile`, rows past `len` as zeros: the workgroup's units together, unit u
/// taking values u, u + units, …
#[cube]
#[allow(clippy::too_many_arguments)]
fn load_tile(
    x: &Tensor<f32>,
    base: usize,
    tile: &mut Shared<[f32]>,
    b: usize,
    g: usize,
    first: usize,
    len: usize,
    #[comptime] rows: usize,
    #[comptime] d: usize,
) {
    let mut e = UNIT_POS as usize;
    while e < rows * d {
        let j = first + e / d;
        let mut value = 0.0f32;
        if j < len {
            value = x[base + row_start(x, b, g, j) + (e % d) * x.stride(3)];
        }
        tile[e] = value;
        e += CUBE_DIM as usize;
    }
}

/// This unit's row of the workgroup's block: its index, whether it is one of the `rows`, and
/// the row it reads (row 0 past the last: every unit loads tiles and waits with the others).
#[cube]
fn block_row(rows: usize) -> (usize, bool, usize) {
    let i = CUBE_POS_X as usize * ROWS + UNIT_POS as usize;
    let live = i < rows;
    (i, live, select(live, i, 0))
}

/// Keys the block's last query row sees: all `t_k`, or up to it and the `t_k − t_q` keys before
/// the first query when causal.
#[cube]
fn keys_seen(t_q: usize, t_k: usize, #[comptime] causal: bool) -> usize {
    let mut keys = t_k;
    if causal {
        let end = CUBE_POS_X as usize * ROWS + ROWS;
        keys = select(end < t_q, end, t_q) + t_k - t_q;
    }
    keys
}

/// Whether query i sees key j (a causal query sees keys up to i + past).
#[cube]
fn sees(i: usize, j: usize, t_k: usize, past: usize, #[comptime] causal: bool) -> bool {
    let mut visible = j < t_k;
    if causal {
        visible = visible && j <= i + past;
    }
    visible
}

/// [`load_tile`] of two tensors' rows (K and V) at once, then a wait for the
/// workgroup: the tiles are whole when this returns.
#[cube]
#[allow(clippy::too_many_arguments)]
fn load_tiles(
    x: &Tensor<f32>,
    x_base: usize,
    y: &Tensor<f32>,
    y_base: usize,
    x_tile: &mut Shared<[f32]>,
    y_tile: &mut Shared<[f32]>,
    b: usize,
    g: usize,
    first: usize,
    len: usize,
    #[comptime] rows: usize,
    #[comptime] d: usize,
) {
    load_tile(x, x_base, x_tile, b, g, first, len, rows, d);
    load_tile(y, y_base, y_tile, b, g, first, len, rows, d);
    sync_cube();
}

/// Where head h's bias row i starts in a [bias_heads, t_q, t_k] bias: one for every head where
/// `bias_heads` is 1.
#[cube]
fn bias_row(bias_heads: usize, h: usize, i: usize, t_q: usize, t_k: usize) -> usize {
    (select(bias_heads == 1, 0usize, h) * t_q + i) * t_k
}

/// Where the bias lies in `stats`, behind the rows' two statistics each.
#[cube]
fn bias_in_stats(q: &Tensor<f32>) -> usize {
    q.shape(0) * q.shape(1) * q.shape(2) * 2
}

/// Row (b, h, i) of the output and L_i into `stats[2·row]`; the workgroup is (block, h, b).
/// When `biased`, the logits gain `bias` [bias_heads, t_q, t_k] (contiguous), which the batch's
/// first row's workgroups also copy behind the statistics for the backward kernels where `stats`
/// has room for it (none where no backward pass follows).
#[cube(launch)]
// `biased` is known when the kernel is compiled: an `if` of its own leaves the code out, where
// joined with a runtime condition it would be a test in the kernel.
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
fn attention_tiled_kernel(
    q: &Tensor<f32>,
    k: &Tensor<f32>,
    v: &Tensor<f32>,
    bias: &Tensor<f32>,
    out: &mut Tensor<f32>,
    stats: &mut Tensor<f32>,
    scale: f32,
    q_base: u32,
    k_base: u32,
    v_base: u32,
    #[comptime] d: usize,
    #[comptime] tile: usize,
    #[comptime] causal: bool,
    #[comptime] biased: bool,
) {
    let (heads, t_q, t_k) = (q.shape(1), q.shape(2), k.shape(2));
    let (h, b) = (CUBE_POS_Y as usize, CUBE_POS_Z as usize);
    let g = h / (heads / k.shape(1));
    let (i, live, row_i) = block_row(t_q);
    let past = t_k - t_q;
    let bias_heads = bias.shape(0);
    let bias_at = bias_row(bias_heads, h, row_i, t_q, t_k);
    if biased {
        if b == 0 && h < bias_heads && stats.len() > bias_in_stats(q) {
            let (first_row, tail) = (CUBE_POS_X as usize * ROWS, bias_in_stats(q));
            let mut e = UNIT_POS as usize;
            while e < ROWS * t_k {
                let row = first_row + e / t_k;
                if row < t_q {
                    let at = (h * t_q + row) * t_k + e % t_k;
                    stats[tail + at] = bias[at];
                }
                e += CUBE_DIM as usize;
            }
        }
    }
    let keys = keys_seen(t_q, t_k, causal);
    let mut q_row = Array::<f32>::new(d);
    let q_at = q_base as usize + row_start(q, b, h, row_i);
    #[unroll]
    for c in 0..d {
        q_row[c] = q[q_at + c * q.stride(3)] * scale;
    }
    let mut acc = Array::<f32>::new(d);
    #[unroll]
    for c in 0..d {
        acc[c] = 0.0;
    }
    let mut top = f32::new(-1.0e30);
    let mut sum = f32::new(0.0);
    let mut k_tile = Shared::<[f32]>::new_slice(tile * d);
    let mut v_tile = Shared::<[f32]>::new_slice(tile * d);
    for t in 0..keys.div_ceil(tile) {
        let first = t * tile;
        load_tiles(k, k_base as usize, v, v_base as usize, &mut k_tile, &mut v_tile, b, g, first, t_k, tile, d);
        for jj in 0..tile {
            let j = first + jj;
            let visible = sees(row_i, j, t_k, past, causal);
            if visible {
                let mut s = 0.0f32;
                #[unroll]
                for c in 0..d {
                    s += q_row[c] * k_tile[jj * d + c];
                }
                if biased {
                    s += bias[bias_at + j];
                }
                let mut new_top = top;
                if s > top {
                    new_top = s;
                }
                let correction = (top - new_top).exp();
                let p = (s - new_top).exp();
                sum = sum * correction + p;
                #[unroll]
                for c in 0..d {
                    acc[c] = acc[c] * correction + p * v_tile[jj * d + c];
                }
                top = new_top;
            }
        }
        sync_cube();
    }
    if live {
        let o_at = b * out.stride(0) + h * out.stride(1) + i * out.stride(2);
        let o_step = out.stride(3);
        #[unroll]
        for c in 0..d {
            out[o_at + c * o_step] = acc[c] / sum;
        }
        stats[((b * heads + h) * t_q + i) * 2] = top + sum.ln();
    }
}

/// dQ_i for row (b, h, i), and D_i into `stats[2·row + 1]`; the workgroup is (block, h, b). When
/// `biased`, the bias lies behind the statistics in `stats`, `bias_heads` heads of it.
/// D_i = dO_i·O_i = Σ_j P_ij dP_ij, so it is added up over the keys with the rest, O unread:
/// dQ_i = scale Σ_j P_ij (dP_ij − D_i) K_j = scale (Σ_j P_ij dP_ij K_j − D_i Σ_j P_ij K_j). Six
/// tensors, as WebGPU's eight storage buffers a kernel allow (CubeCL keeps one, and one more
/// for its own metadata).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn attention_tiled_d_query_kernel(
    q: &Tensor<f32>,
    k: &Tensor<f32>,
    v: &Tensor<f32>,
    d_out: &Tensor<f32>,
    stats: &mut Tensor<f32>,
    d_q: &mut Tensor<f32>,
    scale: f32,
    q_base: u32,
    k_base: u32,
    v_base: u32,
    bias_heads: u32,
    #[comptime] d: usize,
    #[comptime] tile: usize,
    #[comptime] causal: bool,
    #[comptime] biased: bool,
) {
    let (heads, t_q, t_k) = (q.shape(1), q.shape(2), k.shape(2));
    let (h, b) = (CUBE_POS_Y as usize, CUBE_POS_Z as usize);
    let g = h / (heads / k.shape(1));
    let (i, live, row_i) = block_row(t_q);
    let row = (b * heads + h) * t_q + row_i;
    let past = t_k - t_q;
    let bias_at = bias_in_stats(q) + bias_row(bias_heads as usize, h, row_i, t_q, t_k);
    let keys = keys_seen(t_q, t_k, causal);
    let (q_at, o_at) = (q_base as usize + row_start(q, b, h, row_i), row_start(d_out, b, h, row_i));
    let mut q_row = Array::<f32>::new(d);
    let mut do_row = Array::<f32>::new(d);
    // Σ_j P_ij dP_ij K_j and Σ_j P_ij K_j.
    let mut with_dp = Array::<f32>::new(d);
    let mut plain = Array::<f32>::new(d);
    #[unroll]
    for c in 0..d {
        q_row[c] = q[q_at + c * q.stride(3)] * scale;
        do_row[c] = d_out[o_at + c * d_out.stride(3)];
        with_dp[c] = 0.0;
        plain[c] = 0.0;
    }
    let log_norm = stats[row * 2];
    let mut delta = 0.0f32;
    let mut k_tile = Shared::<[f32]>::new_slice(tile * d);
    let mut v_tile = Shared::<[f32]>::new_slice(tile * d);
    for t in 0..keys.div_ceil(tile) {
        let first = t * tile;
        load_tiles(k, k_base as usize, v, v_base as usize, &mut k_tile, &mut v_tile, b, g, first, t_k, tile, d);
        for jj in 0..tile {
            let j = first + jj;
            let visible = sees(row_i, j, t_k, past, causal);
            if visible {
                let mut s = 0.0f32;
                let mut dp = 0.0f32;
                #[unroll]
                for c in 0..d {
                    s += q_row[c] * k_tile[jj * d + c];
                    dp += do_row[c] * v_tile[jj * d + c];
                }
                if biased {
                    s += stats[bias_at + j];
                }
                let p = (s - log_norm).exp();
                delta += p * dp;
                #[unroll]
                for c in 0..d {
                    with_dp[c] += p * dp * k_tile[jj * d + c];
                    plain[c] += p * k_tile[jj * d + c];
                }
            }
        }
        sync_cube();
    }
    if live {
        stats[row * 2 + 1] = delta;
        let dq_at = b * d_q.stride(0) + h * d_q.stride(1) + i * d_q.stride(2);
        let dq_step = d_q.stride(3);
        #[unroll]
        for c in 0..d {
            d_q[dq_at + c * dq_step] = (with_dp[c] - delta * plain[c]) * scale;
        }
    }
}

/// dK_j and dV_j for key row (b, g, j), summed over the group's query heads, into `d_kv`: head g of
/// key row (b, j) at `dk_base + (b·t_k + j)·d_row + g·d` (dV at `dv_base + …`); the workgroup is (block, g, b).
/// When `biased`, the bias lies behind the statistics in `stats` (`bias_heads` heads), and dS of
/// (b, h, i, j) goes to `d_kv[ds_base + ((b·heads + h)·t_q + i)·t_k + j]`, 0 where i does not see j.
/// Where projections are shared ([`Sharing`]): with `keys_onto_queries` dK is added to what lies
/// at its place (the dQ that the dQ kernel wrote there, Q = K), and with `values_onto_keys` dV is
/// added to dK in dK's place (K = V).
#[cube(launch)]
// `biased` as in `attention_tiled_kernel`; CubeCL's compile-time flags are bools, each flag a
// kernel of its own.
#[allow(clippy::too_many_arguments, clippy::collapsible_if, clippy::fn_params_excessive_bools)]
fn attention_tiled_d_key_value_kernel(
    q: &Tensor<f32>,
    k: &Tensor<f32>,
    v: &Tensor<f32>,
    d_out: &Tensor<f32>,
    stats: &Tensor<f32>,
    d_kv: &mut Tensor<f32>,
    scale: f32,
    q_base: u32,
    k_base: u32,
    v_base: u32,
    dk_base: u32,
    dv_base: u32,
    d_row: u32,
    bias_heads: u32,
    ds_base: u32,
    #[comptime] d: usize,
    #[comptime] tile: usize,
    #[comptime] causal: bool,
    #[comptime] biased: bool,
    #[comptime] keys_onto_queries: bool,
    #[comptime] values_onto_keys: bool,
) {
    let (heads, t_q) = (q.shape(1), q.shape(2));
    let (kv_heads, t_k) = (k.shape(1), k.shape(2));
    let (g, b) = (CUBE_POS_Y as usize, CUBE_POS_Z as usize);
    let group = heads / kv_heads;
    let (j, live, row_j) = block_row(t_k);
    let past = t_k - t_q;
    let bias_base = bias_in_stats(q);
    // dS of (b, h, i, j) at `ds_rows + (h·t_q + i)·t_k + j`.
    let ds_rows = ds_base as usize + b * heads * t_q * t_k;
    // Queries that see the block's first key (a causal query i sees key j when i + past ≥ j).
    let mut first_query = 0usize;
    if causal {
        let first_key = CUBE_POS_X as usize * ROWS;
        if first_key > past {
            first_query = first_key - past;
        }
    }
    let (k_at, v_at) = (k_base as usize + row_start(k, b, g, row_j), v_base as usize + row_start(v, b, g, row_j));
    let mut k_row = Array::<f32>::new(d);
    let mut v_row = Array::<f32>::new(d);
    let mut d_k = Array::<f32>::new(d);
    let mut d_v = Array::<f32>::new(d);
    #[unroll]
    for c in 0..d {
        k_row[c] = k[k_at + c * k.stride(3)] * scale;
        v_row[c] = v[v_at + c * v.stride(3)];
        d_k[c] = 0.0;
        d_v[c] = 0.0;
    }
    let mut q_tile = Shared::<[f32]>::new_slice(tile * d);
    let mut do_tile = Shared::<[f32]>::new_slice(tile * d);
    let mut stat_tile = Shared::<[f32]>::new_slice(tile * 2);
    let first_tile = first_query / tile;
    for h in g * group..(g + 1) * group {
        if biased {
            // The queries of the tiles skipped below see none of this block's keys: dS is 0.
            let skipped = select(first_tile * tile < t_q, first_tile * tile, t_q);
            if live {
                for i in 0..skipped {
                    d_kv[ds_rows + (h * t_q + i) * t_k + j] = 0.0;
                }
            }
        }
        for t in first_tile..t_q.div_ceil(tile) {
            let first = t * tile;
            load_tile(q, q_base as usize, &mut q_tile, b, h, first, t_q, tile, d);
            load_tile(d_out, 0, &mut do_tile, b, h, first, t_q, tile, d);
            let mut e = UNIT_POS as usize;
            while e < tile * 2 {
                let i = first + e / 2;
                let mut value = 0.0f32;
                if i < t_q {
                    value = stats[((b * heads + h) * t_q + i) * 2 + e % 2];
                }
                stat_tile[e] = value;
                e += CUBE_DIM as usize;
            }
            sync_cube();
            for ii in 0..tile {
                let i = first + ii;
                let visible = i < t_q && sees(i, row_j, t_k, past, causal);
                let mut d_s = 0.0f32;
                if visible {
                    let mut s = 0.0f32;
                    let mut dp = 0.0f32;
                    #[unroll]
                    for c in 0..d {
                        s += q_tile[ii * d + c] * k_row[c];
                        dp += do_tile[ii * d + c] * v_row[c];
                    }
                    if biased {
                        s += stats[bias_base + bias_row(bias_heads as usize, h, i, t_q, t_k) + row_j];
                    }
                    let p = (s - stat_tile[ii * 2]).exp();
                    d_s = p * (dp - stat_tile[ii * 2 + 1]);
                    #[unroll]
                    for c in 0..d {
                        d_k[c] += d_s * q_tile[ii * d + c];
                        d_v[c] += p * do_tile[ii * d + c];
                    }
                }
                if biased {
                    if live && i < t_q {
                        d_kv[ds_rows + (h * t_q + i) * t_k + j] = d_s;
                    }
                }
            }
            sync_cube();
        }
    }
    if live {
        let row_out = (b * t_k + j) * d_row as usize + g * d;
        let (k_out, v_out) = (dk_base as usize + row_out, dv_base as usize + row_out);
        write_key_value(d_kv, &d_k, &d_v, k_out, v_out, scale, d, keys_onto_queries, values_onto_keys);
    }
}

/// A key row's dK (times `scale`) at `k_out` and dV at `v_out` in `d_kv`; with
/// `keys_onto_queries` dK added to what lies there (dQ, Q = K), with `values_onto_keys` dV added
/// to dK in its place (K = V).
#[cube]
#[allow(clippy::too_many_arguments)]
fn write_key_value(
    d_kv: &mut Tensor<f32>,
    d_k: &Array<f32>,
    d_v: &Array<f32>,
    k_out: usize,
    v_out: usize,
    scale: f32,
    #[comptime] d: usize,
    #[comptime] keys_onto_queries: bool,
    #[comptime] values_onto_keys: bool,
) {
    #[unroll]
    for c in 0..d {
        let mut key = d_k[c] * scale;
        if values_onto_keys {
            key += d_v[c];
        } else {
            d_kv[v_out + c] = d_v[c];
        }
        if keys_onto_queries {
            key += d_kv[k_out + c];
        }
        d_kv[k_out + c] = key;
    }
}

/// The workgroups for `rows` rows of each (head, batch row): (blocks, heads, batch).
fn grid(rows: usize, heads: usize, batch: usize) -> cubecl::CubeCount {
    let [blocks, heads, batch] = grid_axes(rows, heads, batch).map(along_axis);
    cubecl::CubeCount::new_3d(blocks, heads, batch)
}

/// [`grid`]'s axes, each with the setting that sets it (`grid_limit`).
pub(crate) fn grid_axes(rows: usize, heads: usize, batch: usize) -> [Axis; 3] {
    [(rows.div_ceil(ROWS), "the context"), (heads, "the heads"), (batch, "the batch")]
}

/// Where Q, K and V lie in their buffers: each tensor's metadata gives a [batch, heads, t, d]
/// view's strides, and these the positions of its element [0, 0, 0, 0] (0 for a tensor of its
/// own; a column for a packed projection, `crate::packed_attention`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Bases {
    pub q: usize,
    pub k: usize,
    pub v: usize,
}

/// Where the backward pass writes dK and dV in one tensor: head g of key row (b, j) at
/// `k + (b·t_k + j)·row + g·d`, and at `v + …`; where projections are shared, which gradients
/// meet in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyValueLayout {
    pub k: usize,
    pub v: usize,
    pub row: usize,
    pub sharing: Sharing,
}

/// Which of Q, K and V are one projection's output (the variants Q=K, K=V and Q=K=V), so that
/// their gradients are added in one place of dP: dK onto dQ (Q = K, written there by the dQ
/// kernel before), dV onto dK (K = V), or both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sharing {
    #[default]
    None,
    QueryKey,
    KeyValue,
    All,
}

impl Sharing {
    pub(crate) fn keys_onto_queries(self) -> bool {
        matches!(self, Sharing::QueryKey | Sharing::All)
    }

    pub(crate) fn values_onto_keys(self) -> bool {
        matches!(self, Sharing::KeyValue | Sharing::All)
    }
}

/// A kernel's u32 argument: the buffers this playground allocates hold far fewer values.
fn arg(value: usize) -> u32 {
    u32::try_from(value).expect("an index within a GPU buffer fits in 32 bits")
}

/// A bias on the logits in the backward pass: its heads (1: one for all heads), and where in the
/// dK, dV tensor the kernel writes dS, [batch, heads, t_q, t_k] (`partials_at`), for
/// [`bias_gradient`] to sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BiasPartials {
    pub heads: usize,
    pub partials_at: usize,
}

/// A bias on the logits, [1 or heads, t_q, t_k], and whether a backward pass follows the forward
/// one (which then leaves a copy of it behind the statistics for the backward kernels to read;
/// evaluation and generation need none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogitBias<'a> {
    pub values: &'a CubeTensor,
    pub for_backward: bool,
}

/// The output [batch, heads, t_q, d] (laid out [batch, t_q, heads, d]) and the rows' L in
/// `stats` (two values a row, L first; the bias behind them where a backward pass follows). `k`
/// and `v` are [batch, kv_heads, t_k, d], each where `bases` says.
pub(crate) fn forward(
    q: &CubeTensor,
    k: &CubeTensor,
    v: &CubeTensor,
    bias: Option<LogitBias>,
    bases: Bases,
    scale: f32,
    causal: bool,
) -> (CubeTensor, CubeTensor) {
    let [batch, heads, t_q, d] = q.meta.shape().dims();
    let [_, kv_heads, t_k, _] = k.meta.shape().dims();
    let rows = batch * heads * t_q;
    let out = Cube::float_swap_dims(empty(q, [batch, t_q, heads, d]), 1, 2);
    let biased = bias.is_some();
    let kept = bias.is_some_and(|bias| bias.for_backward);
    // Without a bias the kernel binds one unread value in its place.
    let bias = bias.map_or_else(|| empty(q, [1]), |bias| super::contiguous(bias.values.clone()));
    let bias_values = if biased { bias.meta.shape().num_elements() } else { 0 };
    let kept_values = if kept { bias_values } else { 0 };
    let stats = empty(q, [rows * 2 + kept_values]);
    let tile = tile_rows(d);
    let (count, dim) = (grid(t_q, heads, batch), cubecl::CubeDim::new_1d(ROWS as u32));
    // Each unit meets every key of its head (the last row of a causal block), d values twice, and
    // its row's bias; where it is kept, the first batch row's units copy a block of it, t_k
    // values each.
    note(
        &count,
        dim,
        t_k * 2 * d + 2 * d + if biased { t_k } else { 0 } + if kept { t_k } else { 0 },
        rows * d + 2 * batch * kv_heads * t_k * d + bias_values,
        rows * d + rows + kept_values,
    );
    attention_tiled_kernel::launch(
        &q.client,
        count,
        dim,
        q.clone().into_tensor_arg(),
        k.clone().into_tensor_arg(),
        v.clone().into_tensor_arg(),
        bias.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        scale,
        arg(bases.q),
        arg(bases.k),
        arg(bases.v),
        d,
        tile,
        causal,
        biased,
    );
    (out, stats)
}

/// dQ, and dK and dV as one [2, batch, t_k, kv_heads, d] tensor; `stats` gains each row's D. With
/// a bias of `bias_heads` heads (`stats` holding it, as [`forward`] left it), its gradient too.
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward(
    q: &CubeTensor,
    k: &CubeTensor,
    v: &CubeTensor,
    stats: &CubeTensor,
    bias_heads: Option<usize>,
    d_out: CubeTensor,
    scale: f32,
    causal: bool,
) -> (CubeTensor, CubeTensor, Option<CubeTensor>) {
    let [batch, heads, t_q, d] = q.meta.shape().dims();
    let [_, kv_heads, t_k, _] = k.meta.shape().dims();
    let d_q = Cube::float_swap_dims(empty(q, [batch, t_q, heads, d]), 1, 2);
    let kv_values = batch * t_k * kv_heads * d;
    let layout = KeyValueLayout { k: 0, v: kv_values, row: kv_heads * d, sharing: Sharing::None };
    let bias = bias_heads.map(|heads| BiasPartials { heads, partials_at: 2 * kv_values });
    let partials = if bias.is_some() { batch * heads * t_q * t_k } else { 0 };
    // Laid out [2, batch, t_k, kv_heads, d], so that the heads merge back without a copy; dS
    // behind them where there is a bias.
    let d_kv = empty(q, [2 * kv_values + partials]);
    backward_into(q, k, v, Bases::default(), stats, bias, d_out, scale, causal, &d_q, &d_kv, layout);
    let d_bias = bias.map(|bias| bias_gradient(&d_kv, bias, [batch, heads, t_q, t_k]));
    let d_kv = Cube::float_slice(d_kv, &[burn::tensor::Slice::from(0..2 * kv_values)]);
    (d_q, Cube::float_reshape(d_kv, [2, batch, t_k, kv_heads, d].into()), d_bias)
}

/// The bias's gradient [bias heads, t_q, t_k] from the dS that the backward kernels wrote into
/// `d_kv` ([`BiasPartials`]): summed over the batch rows, and over the heads too for a bias they
/// share.
fn bias_gradient(d_kv: &CubeTensor, bias: BiasPartials, [batch, heads, t_q, t_k]: [usize; 4]) -> CubeTensor {
    let partials = batch * heads * t_q * t_k;
    let d_s = Cube::float_slice(d_kv.clone(), &[burn::tensor::Slice::from(bias.partials_at..bias.partials_at + partials)]);
    let rows = partials / (bias.heads * t_q * t_k);
    let sums = super::block_sum::column_sums(Cube::float_reshape(d_s, [rows, bias.heads * t_q * t_k].into()));
    Cube::float_reshape(sums, [bias.heads, t_q, t_k].into())
}

/// The backward pass into given tensors: dQ through `d_q`'s strides (its element [0, 0, 0, 0]
/// first), dK and dV into `d_kv` as `layout` says, and dS where `bias` says; `stats` gains each
/// row's D. Q, K and V lie where `bases` says.
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward_into(
    q: &CubeTensor,
    k: &CubeTensor,
    v: &CubeTensor,
    bases: Bases,
    stats: &CubeTensor,
    bias: Option<BiasPartials>,
    d_out: CubeTensor,
    scale: f32,
    causal: bool,
    d_q: &CubeTensor,
    d_kv: &CubeTensor,
    layout: KeyValueLayout,
) {
    let [batch, heads, t_q, d] = q.meta.shape().dims();
    let [_, kv_heads, t_k, _] = k.meta.shape().dims();
    let rows = batch * heads * t_q;
    let kv_values = batch * kv_heads * t_k * d;
    let tile = tile_rows(d);
    let dim = cubecl::CubeDim::new_1d(ROWS as u32);
    let (biased, bias_heads, partials_at) = bias.map_or((false, 0, 0), |bias| (true, bias.heads, bias.partials_at));
    // Each unit reads its row's bias, and each dS it meets, once.
    let (bias_read, bias_trips) = if biased { (bias_heads * t_q * t_k, t_k) } else { (0, 0) };
    let d_s = if biased { rows * t_k } else { 0 };
    let count = grid(t_q, heads, batch);
    note(&count, dim, t_k * 4 * d + 2 * d + bias_trips, 2 * rows * d + 2 * kv_values + rows + bias_read, rows * d + rows);
    attention_tiled_d_query_kernel::launch(
        &q.client,
        count,
        dim,
        q.clone().into_tensor_arg(),
        k.clone().into_tensor_arg(),
        v.clone().into_tensor_arg(),
        d_out.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        d_q.clone().into_tensor_arg(),
        scale,
        arg(bases.q),
        arg(bases.k),
        arg(bases.v),
        arg(bias_heads),
        d,
        tile,
        causal,
        biased,
    );
    let count = grid(t_k, kv_heads, batch);
    // The block's first key is seen by every query of its group's heads (and writes dS for each).
    let group_trips = (heads / kv_heads) * t_q;
    let (onto_queries, onto_keys) = (layout.sharing.keys_onto_queries(), layout.sharing.values_onto_keys());
    note(
        &count,
        dim,
        group_trips * 4 * d + 4 * d + if biased { 2 * group_trips } else { 0 },
        2 * rows * d + 2 * kv_values + 2 * rows + bias_read + if onto_queries { kv_values } else { 0 },
        if onto_keys { kv_values } else { 2 * kv_values } + d_s,
    );
    attention_tiled_d_key_value_kernel::launch(
        &q.client,
        count,
        dim,
        q.clone().into_tensor_arg(),
        k.clone().into_tensor_arg(),
        v.clone().into_tensor_arg(),
        d_out.into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        d_kv.clone().into_tensor_arg(),
        scale,
        arg(bases.q),
        arg(bases.k),
        arg(bases.v),
        arg(layout.k),
        arg(layout.v),
        arg(layout.row),
        arg(bias_heads),
        arg(partials_at),
        d,
        tile,
        causal,
        biased,
        onto_queries,
        onto_keys,
    );
}
