//! Attention, `softmax(scale · Q Kᵀ + bias) V` with the future masked (a decoder) or not (an
//! encoder), as one op.
//!
//! Forward, per batch row and head: the logits by one product, bias, mask and softmax in place,
//! the output by a second product. The probabilities P are kept for the backward pass, which is
//! four more products and one elementwise pass (D_i = Σ_j P_ij dP_ij):
//!
//! ```text
//! dP = dO Vᵀ    dV = Pᵀ dO    dS = P ⊙ (dP − D)    dQ = scale · dS K    dK = scale · dSᵀ Q
//! ```
//!
//! The products run over blocks of query rows, each stopping at the last key its block sees, so
//! that most of a causal mask's future is never computed ([`CAUSAL_BLOCK_ROWS`]); without the mask
//! every block sees every key.
//!
//! Heads sharing a key/value head (GQA, MQA) are handled in place: query head h reads key/value
//! head h / (heads / kv_heads), and dK, dV sum over the heads of a group. Inputs are read through
//! their strides, so a head's slice of a [batch, time, heads·d] projection is used as it lies;
//! outputs are written [batch, time, heads, d] in memory, so that merging the heads back costs no
//! copy either.

use std::ops::Range;

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;
use burn::tensor::module;
use burn::tensor::ops::AttentionModuleOptions;

use burn_cubecl::CubeBackend as Cube;

use crate::cube::attention::LogitBias;
use crate::cube::{self, from_cube, from_cube_autodiff, to_cube, to_cube_autodiff};
use crate::flex::{
    Route, View4, backward_step, backward_step_on, from_autodiff, from_flex, route, strided_tensor, tensor, to_autodiff, to_flex, values,
};
use crate::math::{self, matmul};
use crate::parallel::{self, SharedMut};

/// Which keys a query sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mask {
    /// Position j is hidden from query i when j > i + t_k − t_q (queries are the newest t_q of
    /// t_k positions): a decoder.
    Causal,
    /// Every query sees every key: an encoder.
    Bidirectional,
}

/// `softmax(scale · Q Kᵀ + bias) V`, under `mask`.
///
/// `query` is [batch, heads, t_q, d]; `key` and `value` are [batch, kv_heads, t_k, d] with `heads`
/// a multiple of `kv_heads` (query head h reads key/value head h / (heads / kv_heads)); `bias`,
/// if any, is [1, t_q, t_k] (the same for every head) or [heads, t_q, t_k] (one per head), the
/// same for every batch row. Returns [batch, heads, t_q, d].
pub fn attention(query: Tensor<4>, key: Tensor<4>, value: Tensor<4>, bias: Option<Tensor<3>>, scale: f64, mask: Mask) -> Tensor<4> {
    let shapes = Shapes::of(&query, &key, &value, bias.as_ref(), scale, mask);
    // The kernel writes dK and dV from the blocks of query rows; with no query there is none.
    let route = if shapes.t_q == 0 { Route::Composed } else { route(&query.device(), query.dtype()) };
    // On a GPU emulated on the CPU an encoder and a bias compose (its kernels are causal only,
    // without a bias).
    let causal = mask == Mask::Causal;
    let cube_kernel = matches!(route, Route::Cube | Route::CubeAutodiff)
        && cube::product_choice::cube_device(&query.device()).is_some_and(|device| cube::attention::takes(causal, bias.is_some(), &device));
    match route {
        Route::Cube if cube_kernel => {
            let bias = bias.map(to_cube);
            // No backward pass follows: the forward keeps no copy of the bias for one.
            let bias = bias.as_ref().map(|values| LogitBias { values, for_backward: false });
            from_cube(cube::attention::forward(to_cube(query), to_cube(key), to_cube(value), bias, scale as f32, causal).0)
        }
        Route::CubeAutodiff if cube_kernel => {
            let (query, q_node) = to_cube_autodiff(query).into_parts();
            let (key, k_node) = to_cube_autodiff(key).into_parts();
            let (value, v_node) = to_cube_autodiff(value).into_parts();
            let output = match bias {
                None => {
                    let run = || cube::attention::forward(query, key, value, None, scale as f32, causal);
                    cube::record(CubeAttentionBackward, [q_node, k_node, v_node], run)
                }
                Some(bias) => {
                    let (bias, bias_node) = to_cube_autodiff(bias).into_parts();
                    let bias = LogitBias { values: &bias, for_backward: true };
                    let run = || cube::attention::forward(query, key, value, Some(bias), scale as f32, causal);
                    cube::record(CubeAttentionBackward, [q_node, k_node, v_node, bias_node], run)
                }
            };
            from_cube_autodiff(output)
        }
        Route::Composed | Route::Cube | Route::CubeAutodiff => composed(query, key, value, bias, scale, mask),
        Route::Flex => {
            let bias = bias.map(to_flex);
            let (output, _) = forward(&to_flex(query), &to_flex(key), &to_flex(value), bias.as_ref(), &shapes, false);
            from_flex(output)
        }
        Route::FlexAutodiff => from_autodiff(forward_recorded(query, key, value, bias, shapes)),
    }
}

/// GQA/MQA for ops that need every query head's keys: [batch, kv_heads, t, d] →
/// [batch, heads, t, d], each key/value head repeated for its group of query heads.
pub fn repeat_kv_heads(x: Tensor<4>, heads: usize) -> Tensor<4> {
    let [b, g, t, d] = x.dims();
    let group = heads / g;
    if group == 1 {
        return x;
    }
    x.reshape([b, g, 1, t, d]).expand([b, g, group, t, d]).reshape([b, g * group, t, d])
}

/// The same computation from Burn's ops, for every device without the kernels.
fn composed(query: Tensor<4>, key: Tensor<4>, value: Tensor<4>, bias: Option<Tensor<3>>, scale: f64, mask: Mask) -> Tensor<4> {
    let [b, heads, t_q, _] = query.dims();
    let t_k = key.dims()[2];
    let bias = bias.map(|bias| bias.unsqueeze_dim::<4>(0).expand([b, heads, t_q, t_k]));
    // Burn's causal mask aligns the last query with the last key: our layout.
    let options = AttentionModuleOptions { scale: Some(scale), softcap: None, is_causal: mask == Mask::Causal };
    module::attention(query, repeat_kv_heads(key, heads), repeat_kv_heads(value, heads), None, bias, options)
}

/// Query rows per block of the causal products. A block skips the keys after its last row's,
/// which saves work once a context spans several blocks (at 256 positions, 37.5% of the
/// products' multiply-adds), while each block is one more product call (about a microsecond of
/// set-up): at 64 positions or fewer there is one block, the whole matrix.
const CAUSAL_BLOCK_ROWS: usize = 64;

#[derive(Debug, Clone, Copy)]
struct Shapes {
    batch: usize,
    heads: usize,
    kv_heads: usize,
    t_q: usize,
    t_k: usize,
    d: usize,
    scale: f32,
    causal: bool,
    /// 0 without a bias, 1 for one shared by every head, `heads` for one per head.
    bias_heads: usize,
}

impl Shapes {
    fn of(query: &Tensor<4>, key: &Tensor<4>, value: &Tensor<4>, bias: Option<&Tensor<3>>, scale: f64, mask: Mask) -> Self {
        let [batch, heads, t_q, d] = query.dims();
        let [kb, kv_heads, t_k, kd] = key.dims();
        assert_eq!(value.dims(), key.dims(), "keys and values have one shape");
        assert!(kb == batch && kd == d, "queries {:?} and keys {:?} differ in batch or head size", query.dims(), key.dims());
        assert!(kv_heads > 0 && heads % kv_heads == 0, "{heads} query heads cannot share {kv_heads} key/value heads");
        assert!(t_q <= t_k, "{t_q} queries but only {t_k} keys");
        let bias_heads = bias.map_or(0, |bias| bias.dims()[0]);
        if let Some(bias) = bias {
            assert!(bias_heads == 1 || bias_heads == heads, "the attention bias is [1 or {heads}, t_q, t_k], not {:?}", bias.dims());
            assert_eq!(bias.dims()[1..], [t_q, t_k], "the attention bias is [1 or {heads}, t_q, t_k]");
        }
        Self { batch, heads, kv_heads, t_q, t_k, d, scale: scale as f32, causal: mask == Mask::Causal, bias_heads }
    }

    /// Where head h's [t_q, t_k] bias starts in the bias (and its gradient).
    fn bias_start(&self, h: usize) -> usize {
        let head = if self.bias_heads == 1 { 0 } else { h };
        head * self.t_q * self.t_k
    }

    fn group(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// Keys visible to query row i.
    fn visible(&self, i: usize) -> usize {
        if self.causal { i + 1 + self.t_k - self.t_q } else { self.t_k }
    }

    /// The query rows in blocks of [`CAUSAL_BLOCK_ROWS`]: a block's products stop at the last
    /// key its last row sees ([`Shapes::keys_seen`]), so most of the masked future is never
    /// computed.
    fn query_blocks(&self) -> impl DoubleEndedIterator<Item = Range<usize>> + Clone + use<> {
        let t_q = self.t_q;
        (0..t_q).step_by(CAUSAL_BLOCK_ROWS).map(move |start| start..(start + CAUSAL_BLOCK_ROWS).min(t_q))
    }

    /// Keys seen by any row of a block of query rows.
    fn keys_seen(&self, rows: &Range<usize>) -> usize {
        self.visible(rows.end - 1)
    }

    /// Multiply-adds of one forward pass, for deciding whether to spread it over threads.
    fn flops(&self) -> usize {
        4 * self.batch * self.heads * self.t_q * self.t_k * self.d
    }

    /// Strides of a [batch, heads, t, d] view of a [batch, t, heads, d] buffer.
    fn time_major_strides(heads: usize, t: usize, d: usize) -> Vec<isize> {
        [t * heads * d, d, heads * d, 1].map(|s| s as isize).to_vec()
    }
}

/// A tensor's [`View4`], copying it first if its strides cannot be read as they are.
fn with_view<R>(tensor: &FlexTensor, f: impl FnOnce(View4) -> R) -> R {
    match View4::of(tensor) {
        Some(view) => f(view),
        None => {
            let copy = tensor.to_contiguous();
            f(View4::of(&copy).expect("a contiguous tensor has positive strides"))
        }
    }
}

/// The output ([batch, heads, t_q, d], laid out time-major) and, when `keep` is set, the
/// probabilities [batch, heads, t_q, t_k].
fn forward(
    query: &FlexTensor,
    key: &FlexTensor,
    value: &FlexTensor,
    bias: Option<&FlexTensor>,
    s: &Shapes,
    keep: bool,
) -> (FlexTensor, Option<FlexTensor>) {
    let bias = bias.map(values);
    let bias = bias.as_deref();
    // Both buffers are written whole before they are read (the products do not accumulate, and
    // every probability not computed is zeroed), so they start uninitialised.
    let output_len = s.batch * s.t_q * s.heads * s.d;
    let probabilities_len = if keep { s.batch * s.heads * s.t_q * s.t_k } else { 0 };
    let mut output: Vec<f32> = Vec::with_capacity(output_len);
    let mut probabilities: Vec<f32> = Vec::with_capacity(probabilities_len);
    with_view(query, |q| {
        with_view(key, |k| {
            with_view(value, |v| {
                let out = SharedMut::of_capacity(&mut output);
                let kept = SharedMut::of_capacity(&mut probabilities);
                let group = s.group();
                // One task per (batch row, key/value head): its query heads' outputs and
                // probabilities are regions no other task writes.
                parallel::map(s.batch * s.kv_heads, s.flops(), |task| {
                    let (b, g) = (task / s.kv_heads, task % s.kv_heads);
                    let mut scratch: Vec<f32> = Vec::with_capacity(if keep { 0 } else { s.t_q * s.t_k });
                    for h in g * group..(g + 1) * group {
                        let p = if keep {
                            // SAFETY: head (b, h)'s block of the probabilities belongs to this task.
                            unsafe { kept.at((b * s.heads + h) * s.t_q * s.t_k) }
                        } else {
                            scratch.as_mut_ptr()
                        };
                        // SAFETY: every operand lies in its tensor as its strides say; P of head
                        // (b, h) belongs to this task.
                        unsafe { head_scores(s, p, (&q, b, h), (&k, g), s.scale) };
                        let bias = bias.map(|bias| &bias[s.bias_start(h)..][..s.t_q * s.t_k]);
                        // SAFETY: every value of P was just written (computed or zeroed).
                        softmax_masked(unsafe { std::slice::from_raw_parts_mut(p, s.t_q * s.t_k) }, bias, s);
                        // SAFETY: P and V lie in their buffers as given; the output rows of head
                        // (b, h) belong to this task.
                        unsafe { head_rows_from_keys(s, out, (b, h), p, (v.matrix(b, g), v.row_stride(), v.col_stride()), 1.0) };
                    }
                });
            })
        })
    });
    // SAFETY: every task wrote its heads' whole outputs and probabilities.
    unsafe {
        output.set_len(output_len);
        probabilities.set_len(probabilities_len);
    }
    let shape = [s.batch, s.heads, s.t_q, s.d];
    let output = strided_tensor(output, shape, Shapes::time_major_strides(s.heads, s.t_q, s.d));
    let probabilities = keep.then(|| tensor(probabilities, [s.batch, s.heads, s.t_q, s.t_k]));
    (output, probabilities)
}

/// A head's [t_q, t_k] scores at `dst` (row-major) ← scale · X Mᵀ, block by block of query
/// rows: X is the head's [t_q, d] rows (Q, or dO) and M the group's [t_k, d] keys (K, or V), in
/// views. Each block computes the keys it sees and zeroes the rest, so every score is written.
///
/// # Safety
/// The head's [t_q, t_k] scores at `dst` belong to the caller.
unsafe fn head_scores(s: &Shapes, dst: *mut f32, (x, b, h): (&View4, usize, usize), (m, g): (&View4, usize), scale: f32) {
    for rows in s.query_blocks() {
        let keys = s.keys_seen(&rows);
        // SAFETY: the block's rows of the scores lie in the caller's [t_q, t_k] at `dst`; X and M
        // lie in their views; the zeroed tail of each row is within it (keys ≤ t_k).
        unsafe {
            let dst_rows = dst.add(rows.start * s.t_k);
            matmul(
                [rows.len(), keys, s.d],
                (dst_rows, s.t_k as isize, 1),
                false,
                (x.row(b, h, rows.start), x.row_stride(), x.col_stride()),
                (m.matrix(b, g), m.col_stride(), m.row_stride()),
                scale,
            );
            for row in 0..rows.len() {
                std::ptr::write_bytes(dst_rows.add(row * s.t_k + keys), 0, s.t_k - keys);
            }
        }
    }
}

/// Head (b, h)'s rows of `out` ([batch, t_q, heads, d] in memory) ← scale · A · M, block by
/// block of query rows, each block reading only the keys it sees: A is the head's [t_q, t_k]
/// weights (P, or dS), row-major; M is [t_k, d] at its strides (the values, or the keys).
///
/// # Safety
/// A and M must lie in their buffers as given, and the head's rows of `out` belong to the caller.
unsafe fn head_rows_from_keys(
    s: &Shapes,
    out: SharedMut,
    (b, h): (usize, usize),
    a: *const f32,
    m: (*const f32, isize, isize),
    scale: f32,
) {
    for rows in s.query_blocks() {
        // SAFETY: A and M lie in their buffers as the caller promises; the block's rows of head
        // (b, h) in `out` are the caller's.
        unsafe {
            matmul(
                [rows.len(), s.d, s.keys_seen(&rows)],
                (out.at(((b * s.t_q + rows.start) * s.heads + h) * s.d), (s.heads * s.d) as isize, 1),
                false,
                (a.add(rows.start * s.t_k), s.t_k as isize, 1),
                m,
                scale,
            );
        }
    }
}

/// The group's [t_k, d] keys at `dst` (row stride as given) ← scale · Aᵀ X, or += when not
/// `first`, block by block of query rows: A is a head's [t_q, t_k] weights (P, or dS),
/// row-major; X is the head's [t_q, d] rows (dO, or Q) in a view. A block adds only to the keys
/// it sees; the last block sees every key, so it goes first and, for the first head, writes them
/// all.
///
/// # Safety
/// A must lie in its buffer as given, and the group's keys at `dst` belong to the caller.
unsafe fn group_keys_from_rows(
    s: &Shapes,
    (dst, dst_rows): (*mut f32, isize),
    first: bool,
    a: *const f32,
    (x, b, h): (&View4, usize, usize),
    scale: f32,
) {
    for (block, rows) in s.query_blocks().rev().enumerate() {
        // SAFETY: A lies in its buffer as the caller promises, X in its view; the keys seen lie
        // in the caller's group at `dst`.
        unsafe {
            matmul(
                [s.keys_seen(&rows), s.d, rows.len()],
                (dst, dst_rows, 1),
                !first || block > 0,
                (a.add(rows.start * s.t_k), 1, s.t_k as isize),
                (x.row(b, h, rows.start), x.row_stride(), x.col_stride()),
                scale,
            );
        }
    }
}

/// Logits [t_q, t_k] → probabilities, in place: the head's bias added, what the mask hides zeroed,
/// each row's visible part normalised.
fn softmax_masked(p: &mut [f32], bias: Option<&[f32]>, s: &Shapes) {
    for (i, row) in p.chunks_exact_mut(s.t_k).enumerate() {
        let (visible, future) = row.split_at_mut(s.visible(i));
        if let Some(bias) = bias {
            for (logit, b) in visible.iter_mut().zip(&bias[i * s.t_k..]) {
                *logit += b;
            }
        }
        let shift = math::max(visible);
        let total = math::exp_shifted_sum(visible, shift);
        math::scale(visible, 1.0 / total);
        future.fill(0.0);
    }
}

/// Gradients of query, key, value (laid out time-major) and bias from the output's gradient.
fn backward(saved: &Saved, grad: &FlexTensor) -> (FlexTensor, FlexTensor, FlexTensor, Option<FlexTensor>) {
    let s = &saved.shapes;
    let probabilities = values(&saved.probabilities);
    // Written whole before they are read (see below), so they start uninitialised.
    let (q_len, kv_len) = (s.batch * s.t_q * s.heads * s.d, s.batch * s.t_k * s.kv_heads * s.d);
    let mut d_query: Vec<f32> = Vec::with_capacity(q_len);
    let mut d_key: Vec<f32> = Vec::with_capacity(kv_len);
    let mut d_value: Vec<f32> = Vec::with_capacity(kv_len);
    let group = s.group();
    let bias_partials = with_view(&saved.query, |q| {
        with_view(&saved.key, |k| {
            with_view(&saved.value, |v| {
                with_view(grad, |d_out| {
                    let dq = SharedMut::of_capacity(&mut d_query);
                    let dk = SharedMut::of_capacity(&mut d_key);
                    let dv = SharedMut::of_capacity(&mut d_value);
                    // One task per (batch row, key/value head), as forward: dK and dV of the
                    // group, and dQ of its heads, are written by this task alone.
                    parallel::map(s.batch * s.kv_heads, 2 * s.flops(), |task| {
                        let (b, g) = (task / s.kv_heads, task % s.kv_heads);
                        // dP, then dS in place: each head writes it whole before reading it.
                        let mut d_scores_buffer: Vec<f32> = Vec::with_capacity(s.t_q * s.t_k);
                        let ds = d_scores_buffer.as_mut_ptr();
                        let mut d_bias = (s.bias_heads > 0).then(|| vec![0f32; s.bias_heads * s.t_q * s.t_k]);
                        let kv_rows = (s.kv_heads * s.d) as isize;
                        // SAFETY: the group's first key row lies in the [batch, t_k, kv_heads, d]
                        // gradients, whose capacity the buffers were made with.
                        let dk_at = unsafe { dk.at((b * s.t_k * s.kv_heads + g) * s.d) };
                        // SAFETY: as for dK.
                        let dv_at = unsafe { dv.at((b * s.t_k * s.kv_heads + g) * s.d) };
                        for (index, h) in (g * group..(g + 1) * group).enumerate() {
                            let p = &probabilities[(b * s.heads + h) * s.t_q * s.t_k..][..s.t_q * s.t_k];
                            // dK and dV sum over the group's heads: the first head writes them.
                            let first = index == 0;
                            // The products: operands lie in their buffers as their strides say; dQ
                            // rows of head (b, h) and dK, dV of (b, g) belong to this task.
                            // dP = dO Vᵀ
                            // SAFETY: dP, the scratch at `ds`, is this task's.
                            unsafe { head_scores(s, ds, (&d_out, b, h), (&v, g), 1.0) };
                            // dV += Pᵀ dO
                            // SAFETY: dV of (b, g) is this task's; P lies in `probabilities`.
                            unsafe { group_keys_from_rows(s, (dv_at, kv_rows), first, p.as_ptr(), (&d_out, b, h), 1.0) };
                            // SAFETY: every value of dP was just written (computed or zeroed).
                            let d_scores = unsafe { std::slice::from_raw_parts_mut(ds, s.t_q * s.t_k) };
                            // dS = P ⊙ (dP − D), D_i = Σ_j P_ij dP_ij, over the keys row i sees:
                            // P, and so dS, is zero past them.
                            for (i, (ds_row, p_row)) in d_scores.chunks_exact_mut(s.t_k).zip(p.chunks_exact(s.t_k)).enumerate() {
                                let (ds_seen, ds_future) = ds_row.split_at_mut(s.visible(i));
                                let p_seen = &p_row[..ds_seen.len()];
                                let d = math::dot(p_seen, ds_seen);
                                for (ds, &p) in ds_seen.iter_mut().zip(p_seen) {
                                    *ds = p * (*ds - d);
                                }
                                ds_future.fill(0.0);
                            }
                            if let Some(d_bias) = &mut d_bias {
                                let d_bias = &mut d_bias[s.bias_start(h)..][..s.t_q * s.t_k];
                                for (acc, ds) in d_bias.iter_mut().zip(d_scores.iter()) {
                                    *acc += ds;
                                }
                            }
                            // dQ = scale · dS K
                            // SAFETY: dQ rows of head (b, h) are this task's; dS is its scratch.
                            unsafe { head_rows_from_keys(s, dq, (b, h), ds, (k.matrix(b, g), k.row_stride(), k.col_stride()), s.scale) };
                            // dK += scale · dSᵀ Q
                            // SAFETY: dK of (b, g) is this task's; dS is its scratch.
                            unsafe { group_keys_from_rows(s, (dk_at, kv_rows), first, ds, (&q, b, h), s.scale) };
                        }
                        d_bias
                    })
                })
            })
        })
    });
    // SAFETY: every task wrote its heads' dQ rows whole, and its group's dK and dV (the first
    // head's last block writes every key).
    unsafe {
        d_query.set_len(q_len);
        d_key.set_len(kv_len);
        d_value.set_len(kv_len);
    }
    let d_bias = (s.bias_heads > 0).then(|| {
        let mut total = vec![0f32; s.bias_heads * s.t_q * s.t_k];
        for partial in bias_partials.into_iter().flatten() {
            for (acc, v) in total.iter_mut().zip(partial) {
                *acc += v;
            }
        }
        tensor(total, [s.bias_heads, s.t_q, s.t_k])
    });
    let q_strides = Shapes::time_major_strides(s.heads, s.t_q, s.d);
    let kv_strides = Shapes::time_major_strides(s.kv_heads, s.t_k, s.d);
    let kv_shape = [s.batch, s.kv_heads, s.t_k, s.d];
    (
        strided_tensor(d_query, [s.batch, s.heads, s.t_q, s.d], q_strides),
        strided_tensor(d_key, kv_shape, kv_strides.clone()),
        strided_tensor(d_value, kv_shape, kv_strides),
        d_bias,
    )
}

/// What the backward pass needs: the inputs (shared with the graph, not copied) and the
/// probabilities.
#[derive(Debug, Clone)]
struct Saved {
    query: FlexTensor,
    key: FlexTensor,
    value: FlexTensor,
    probabilities: FlexTensor,
    shapes: Shapes,
}

#[derive(Debug)]
struct AttentionBackward;

/// N is 3 (query, key, value) or 4 (and the bias).
impl<const N: usize> Backward<Flex, N> for AttentionBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step(&ops, grads, |saved, grad| {
            let (d_query, d_key, d_value, d_bias) = backward(saved, &grad);
            [Some(d_query), Some(d_key), Some(d_value), d_bias]
        });
    }
}

fn forward_recorded(
    query: Tensor<4>,
    key: Tensor<4>,
    value: Tensor<4>,
    bias: Option<Tensor<3>>,
    shapes: Shapes,
) -> crate::flex::AutodiffTensor {
    let (query, query_node) = to_autodiff(query).into_parts();
    let (key, key_node) = to_autodiff(key).into_parts();
    let (value, value_node) = to_autodiff(value).into_parts();
    let run = |bias: Option<FlexTensor>, tracked: bool| {
        let (output, probabilities) = forward(&query, &key, &value, bias.as_ref(), &shapes, tracked);
        let saved = probabilities.map(|probabilities| Saved {
            query: query.clone(),
            key: key.clone(),
            value: value.clone(),
            probabilities,
            shapes,
        });
        (output, saved)
    };
    match bias {
        None => match AttentionBackward.prepare::<NoCheckpointing>([query_node, key_node, value_node]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (output, saved) = run(None, true);
                prep.finish(saved.expect("kept for the backward pass"), output)
            }
            OpsKind::UnTracked(prep) => prep.finish(run(None, false).0),
        },
        Some(bias) => {
            let (bias, bias_node) = to_autodiff(bias).into_parts();
            match AttentionBackward.prepare::<NoCheckpointing>([query_node, key_node, value_node, bias_node]).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let (output, saved) = run(Some(bias), true);
                    prep.finish(saved.expect("kept for the backward pass"), output)
                }
                OpsKind::UnTracked(prep) => prep.finish(run(Some(bias), false).0),
            }
        }
    }
}

#[derive(Debug)]
struct CubeAttentionBackward;

/// N is 3 (query, key, value) or 4 (and the bias).
impl<const N: usize> Backward<Cube, N> for CubeAttentionBackward {
    type State = cube::attention::Saved;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step_on::<Cube, _, N, _>(&ops, grads, |saved, grad| {
            let (d_query, d_key, d_value, d_bias) = cube::attention::backward(saved, grad);
            [Some(d_query), Some(d_key), Some(d_value), d_bias]
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_close, flex_and_wgpu, input, values};
    use burn::tensor::Device;

    /// Every input layout the model produces: heads split from [batch, time, heads·d], GQA and
    /// MQA, a bias shared by the heads or one per head, queries that are the newest of more keys
    /// (decoding with a cache), and both masks. The cases after those are larger than a matrix
    /// kernel's register tile, and the last span several blocks of query rows
    /// ([`CAUSAL_BLOCK_ROWS`]), the final block shorter than the others.
    #[test]
    fn fused_attention_matches_the_composed_ops_forward_and_backward() {
        use Mask::{Bidirectional, Causal};
        // (heads, kv_heads, t_q, t_k, d, bias heads (0: none), mask)
        let cases = [
            (4, 4, 5, 5, 3, 0, Causal),
            (4, 2, 6, 6, 3, 1, Causal),
            (4, 1, 3, 7, 3, 0, Causal),
            (2, 2, 7, 7, 3, 2, Causal),
            (4, 2, 6, 6, 3, 4, Bidirectional),
            (2, 1, 5, 5, 3, 0, Bidirectional),
            (2, 1, 3, 7, 3, 1, Bidirectional),
            (2, 1, 19, 35, 20, 1, Causal),
            (2, 2, 33, 33, 16, 0, Causal),
            (2, 1, 2 * CAUSAL_BLOCK_ROWS + 3, 2 * CAUSAL_BLOCK_ROWS + 3, 4, 1, Causal),
            (2, 2, CAUSAL_BLOCK_ROWS + 5, 2 * CAUSAL_BLOCK_ROWS + 9, 4, 0, Causal),
            (2, 1, CAUSAL_BLOCK_ROWS + 5, CAUSAL_BLOCK_ROWS + 5, 4, 2, Bidirectional),
            // The GPU's tiled kernels: more rows than a workgroup takes, several tiles of keys,
            // with a bias and without.
            (4, 2, 70, 70, 64, 0, Causal),
            (2, 2, 70, 70, 32, 0, Bidirectional),
            (2, 1, 9, 75, 16, 0, Bidirectional),
            (4, 2, 70, 70, 64, 4, Causal),
            (4, 2, 130, 130, 16, 1, Causal),
            (2, 2, 70, 70, 32, 2, Bidirectional),
            (2, 1, 9, 75, 16, 1, Bidirectional),
            (2, 1, 9, 75, 16, 2, Causal),
        ];
        // flex's kernel to flex's composed ops, and CubeCL's (the tiled kernels: a device not timed
        // as emulated) to Burn's on wgpu (lavapipe).
        for ((device, tolerance), (heads, kv_heads, t_q, t_k, d, bias_heads, mask)) in
            flex_and_wgpu(1e-5, 1e-4).iter().flat_map(|device| cases.map(|case| (device, case)))
        {
            let batch = 2;
            let scale = 0.4;
            let run = |fused: bool| {
                let q = input([batch, t_q, heads * d], 1, device);
                let k = input([batch, t_k, kv_heads * d], 2, device);
                let v = input([batch, t_k, kv_heads * d], 3, device);
                let bias = input([bias_heads.max(1), t_q, t_k], 4, device);
                let split = |x: Tensor<3>, h: usize| {
                    let [b, t, _] = x.dims();
                    x.reshape([b, t, h, d]).swap_dims(1, 2)
                };
                let bias_used = (bias_heads > 0).then(|| bias.clone());
                let (qs, ks, vs) = (split(q.clone(), heads), split(k.clone(), kv_heads), split(v.clone(), kv_heads));
                let out = if fused { attention(qs, ks, vs, bias_used, scale, mask) } else { composed(qs, ks, vs, bias_used, scale, mask) };
                let weights = input([batch, heads, t_q, d], 5, device);
                let grads = (out.clone() * weights).sum().backward();
                let grads =
                    [q.grad(&grads).map(values), k.grad(&grads).map(values), v.grad(&grads).map(values), bias.grad(&grads).map(values)];
                (values(out), grads)
            };
            let (fused, fused_grads) = run(true);
            let (composed, composed_grads) = run(false);
            let case =
                format!("{device:?}: heads {heads}, kv_heads {kv_heads}, t_q {t_q}, t_k {t_k}, d {d}, bias heads {bias_heads}, {mask:?}");
            assert_close(&fused, &composed, *tolerance, &case);
            for (name, (a, b)) in ["query", "key", "value", "bias"].iter().zip(fused_grads.into_iter().zip(composed_grads)) {
                match (a, b) {
                    (Some(a), Some(b)) => assert_close(&a, &b, *tolerance, &format!("{case}: d{name}")),
                    (None, None) => assert!(bias_heads == 0 && *name == "bias", "{case}: no d{name}"),
                    _ => panic!("{case}: d{name} exists on one side only"),
                }
            }
        }
    }

    #[test]
    fn no_queries_give_an_empty_output_and_zero_key_and_value_gradients() {
        let device = Device::flex().autodiff();
        let q = input([1, 2, 0, 3], 1, &device);
        let k = input([1, 2, 4, 3], 2, &device);
        let v = input([1, 2, 4, 3], 3, &device);
        let out = attention(q, k.clone(), v.clone(), None, 0.5, Mask::Causal);
        assert_eq!(out.dims(), [1, 2, 0, 3]);
        let grads = (out.sum() + k.clone().sum() * 0.0 + v.clone().sum() * 0.0).backward();
        for grad in [k.grad(&grads), v.grad(&grads)] {
            assert!(values(grad.expect("a gradient")).iter().all(|&g| g == 0.0));
        }
    }

    #[test]
    fn without_autodiff_the_kernel_gives_the_same_output() {
        let device = Device::flex();
        let q = input([1, 2, 4, 3], 1, &device);
        let k = input([1, 1, 4, 3], 2, &device);
        let v = input([1, 1, 4, 3], 3, &device);
        for (bias, mask) in [(input([1, 4, 4], 4, &device), Mask::Causal), (input([2, 4, 4], 4, &device), Mask::Bidirectional)] {
            let fused = attention(q.clone(), k.clone(), v.clone(), Some(bias.clone()), 0.5, mask);
            let composed = composed(q.clone(), k.clone(), v.clone(), Some(bias), 0.5, mask);
            assert_close(&values(fused), &values(composed), 1e-5, &format!("no autodiff, {mask:?}"));
        }
    }
}
