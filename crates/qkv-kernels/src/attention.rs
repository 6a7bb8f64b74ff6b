//! Causal attention, `softmax(scale · Q Kᵀ + bias) V` with the future masked, as one op.
//!
//! Forward, per batch row and head: the logits by one product, bias, mask and softmax in place,
//! the output by a second product. The probabilities P are kept for the backward pass, which is
//! four more products and one elementwise pass (D_i = Σ_j P_ij dP_ij):
//!
//! ```text
//! dP = dO Vᵀ    dV = Pᵀ dO    dS = P ⊙ (dP − D)    dQ = scale · dS K    dK = scale · dSᵀ Q
//! ```
//!
//! Heads sharing a key/value head (GQA, MQA) are handled in place: query head h reads key/value
//! head h / (heads / kv_heads), and dK, dV sum over the heads of a group. Inputs are read through
//! their strides, so a head's slice of a [batch, time, heads·d] projection is used as it lies;
//! outputs are written [batch, time, heads, d] in memory, so that merging the heads back costs no
//! copy either.

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;

use crate::flex::{Route, View4, backward_step, from_autodiff, from_flex, route, strided_tensor, tensor, to_autodiff, to_flex, values};
use crate::math::{self, matmul};
use crate::parallel::{self, SharedMut};

/// `softmax(scale · Q Kᵀ + bias) V` with position j hidden from query i when j > i + t_k − t_q
/// (queries are the newest t_q of t_k positions).
///
/// `query` is [batch, heads, t_q, d]; `key` and `value` are [batch, kv_heads, t_k, d] with `heads`
/// a multiple of `kv_heads` (query head h reads key/value head h / (heads / kv_heads)); `bias`,
/// if any, is [t_q, t_k], the same for every batch row and head. Returns [batch, heads, t_q, d].
pub fn causal_attention(query: Tensor<4>, key: Tensor<4>, value: Tensor<4>, bias: Option<Tensor<2>>, scale: f64) -> Tensor<4> {
    let shapes = Shapes::of(&query, &key, &value, scale);
    if let Some(bias) = &bias {
        assert_eq!(bias.dims(), [shapes.t_q, shapes.t_k], "the attention bias is [t_q, t_k]");
    }
    match route(&query.device(), query.dtype()) {
        Route::Composed => composed(query, key, value, bias, scale),
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
fn composed(query: Tensor<4>, key: Tensor<4>, value: Tensor<4>, bias: Option<Tensor<2>>, scale: f64) -> Tensor<4> {
    let [b, heads, t_q, _] = query.dims();
    let t_k = key.dims()[2];
    let bias = bias.map(|bias| bias.reshape([1, 1, t_q, t_k]).expand([b, heads, t_q, t_k]));
    // Burn's causal mask aligns the last query with the last key: our layout.
    let options = AttentionModuleOptions { scale: Some(scale), softcap: None, is_causal: true };
    attention(query, repeat_kv_heads(key, heads), repeat_kv_heads(value, heads), None, bias, options)
}

#[derive(Debug, Clone, Copy)]
struct Shapes {
    batch: usize,
    heads: usize,
    kv_heads: usize,
    t_q: usize,
    t_k: usize,
    d: usize,
    scale: f32,
}

impl Shapes {
    fn of(query: &Tensor<4>, key: &Tensor<4>, value: &Tensor<4>, scale: f64) -> Self {
        let [batch, heads, t_q, d] = query.dims();
        let [kb, kv_heads, t_k, kd] = key.dims();
        assert_eq!(value.dims(), key.dims(), "keys and values have one shape");
        assert!(kb == batch && kd == d, "queries {:?} and keys {:?} differ in batch or head size", query.dims(), key.dims());
        assert!(kv_heads > 0 && heads % kv_heads == 0, "{heads} query heads cannot share {kv_heads} key/value heads");
        assert!(t_q <= t_k, "{t_q} queries but only {t_k} keys");
        Self { batch, heads, kv_heads, t_q, t_k, d, scale: scale as f32 }
    }

    fn group(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// Keys visible to query row i.
    fn visible(&self, i: usize) -> usize {
        i + 1 + self.t_k - self.t_q
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
    let mut output = vec![0f32; s.batch * s.t_q * s.heads * s.d];
    let mut probabilities = if keep { vec![0f32; s.batch * s.heads * s.t_q * s.t_k] } else { Vec::new() };
    with_view(query, |q| {
        with_view(key, |k| {
            with_view(value, |v| {
                let out = SharedMut::new(&mut output);
                let kept = SharedMut::new(&mut probabilities);
                let group = s.group();
                // One task per (batch row, key/value head): its query heads' outputs and
                // probabilities are regions no other task writes.
                parallel::map(s.batch * s.kv_heads, s.flops(), |task| {
                    let (b, g) = (task / s.kv_heads, task % s.kv_heads);
                    let mut scratch = if keep { Vec::new() } else { vec![0f32; s.t_q * s.t_k] };
                    for h in g * group..(g + 1) * group {
                        let p = if keep {
                            // SAFETY: head (b, h)'s block of the probabilities belongs to this task.
                            unsafe { kept.slice((b * s.heads + h) * s.t_q * s.t_k, s.t_q * s.t_k) }
                        } else {
                            &mut scratch[..]
                        };
                        // SAFETY: every operand lies in its tensor as its strides say; the
                        // output rows of head (b, h) belong to this task.
                        unsafe {
                            matmul(
                                [s.t_q, s.t_k, s.d],
                                (p.as_mut_ptr(), s.t_k as isize, 1),
                                false,
                                (q.matrix(b, h), q.row_stride(), q.col_stride()),
                                (k.matrix(b, g), k.col_stride(), k.row_stride()),
                                s.scale,
                            );
                        }
                        softmax_causal(p, bias, s);
                        unsafe {
                            matmul(
                                [s.t_q, s.d, s.t_k],
                                (out.at((b * s.t_q * s.heads + h) * s.d), (s.heads * s.d) as isize, 1),
                                false,
                                (p.as_ptr(), s.t_k as isize, 1),
                                (v.matrix(b, g), v.row_stride(), v.col_stride()),
                                1.0,
                            );
                        }
                    }
                });
            })
        })
    });
    let shape = [s.batch, s.heads, s.t_q, s.d];
    let output = strided_tensor(output, shape, Shapes::time_major_strides(s.heads, s.t_q, s.d));
    let probabilities = keep.then(|| tensor(probabilities, [s.batch, s.heads, s.t_q, s.t_k]));
    (output, probabilities)
}

/// Logits [t_q, t_k] → probabilities, in place: bias added, the future zeroed, each row's visible
/// part normalised.
fn softmax_causal(p: &mut [f32], bias: Option<&[f32]>, s: &Shapes) {
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
    let mut d_query = vec![0f32; s.batch * s.t_q * s.heads * s.d];
    let mut d_key = vec![0f32; s.batch * s.t_k * s.kv_heads * s.d];
    let mut d_value = vec![0f32; s.batch * s.t_k * s.kv_heads * s.d];
    let group = s.group();
    let bias_partials = with_view(&saved.query, |q| {
        with_view(&saved.key, |k| {
            with_view(&saved.value, |v| {
                with_view(grad, |d_out| {
                    let (dq, dk, dv) = (SharedMut::new(&mut d_query), SharedMut::new(&mut d_key), SharedMut::new(&mut d_value));
                    // One task per (batch row, key/value head), as forward: dK and dV of the
                    // group, and dQ of its heads, are written by this task alone.
                    parallel::map(s.batch * s.kv_heads, 2 * s.flops(), |task| {
                        let (b, g) = (task / s.kv_heads, task % s.kv_heads);
                        let mut d_scores = vec![0f32; s.t_q * s.t_k];
                        let mut d_bias = saved.has_bias.then(|| vec![0f32; s.t_q * s.t_k]);
                        let kv_rows = (s.kv_heads * s.d) as isize;
                        let dk_at = unsafe { dk.at((b * s.t_k * s.kv_heads + g) * s.d) };
                        let dv_at = unsafe { dv.at((b * s.t_k * s.kv_heads + g) * s.d) };
                        for (index, h) in (g * group..(g + 1) * group).enumerate() {
                            let first = index == 0;
                            let p = &probabilities[(b * s.heads + h) * s.t_q * s.t_k..][..s.t_q * s.t_k];
                            // SAFETY (all products): operands lie in their buffers as their
                            // strides say; dQ rows of head (b, h) and dK, dV of (b, g) belong
                            // to this task.
                            unsafe {
                                // dP = dO Vᵀ
                                matmul(
                                    [s.t_q, s.t_k, s.d],
                                    (d_scores.as_mut_ptr(), s.t_k as isize, 1),
                                    false,
                                    (d_out.matrix(b, h), d_out.row_stride(), d_out.col_stride()),
                                    (v.matrix(b, g), v.col_stride(), v.row_stride()),
                                    1.0,
                                );
                                // dV += Pᵀ dO
                                matmul(
                                    [s.t_k, s.d, s.t_q],
                                    (dv_at, kv_rows, 1),
                                    !first,
                                    (p.as_ptr(), 1, s.t_k as isize),
                                    (d_out.matrix(b, h), d_out.row_stride(), d_out.col_stride()),
                                    1.0,
                                );
                            }
                            // dS = P ⊙ (dP − D), D_i = Σ_j P_ij dP_ij
                            for (ds_row, p_row) in d_scores.chunks_exact_mut(s.t_k).zip(p.chunks_exact(s.t_k)) {
                                let d = math::dot(p_row, ds_row);
                                for (ds, &p) in ds_row.iter_mut().zip(p_row) {
                                    *ds = p * (*ds - d);
                                }
                            }
                            if let Some(d_bias) = &mut d_bias {
                                for (acc, ds) in d_bias.iter_mut().zip(&d_scores) {
                                    *acc += ds;
                                }
                            }
                            unsafe {
                                // dQ = scale · dS K
                                matmul(
                                    [s.t_q, s.d, s.t_k],
                                    (dq.at((b * s.t_q * s.heads + h) * s.d), (s.heads * s.d) as isize, 1),
                                    false,
                                    (d_scores.as_ptr(), s.t_k as isize, 1),
                                    (k.matrix(b, g), k.row_stride(), k.col_stride()),
                                    s.scale,
                                );
                                // dK += scale · dSᵀ Q
                                matmul(
                                    [s.t_k, s.d, s.t_q],
                                    (dk_at, kv_rows, 1),
                                    !first,
                                    (d_scores.as_ptr(), 1, s.t_k as isize),
                                    (q.matrix(b, h), q.row_stride(), q.col_stride()),
                                    s.scale,
                                );
                            }
                        }
                        d_bias
                    })
                })
            })
        })
    });
    let d_bias = saved.has_bias.then(|| {
        let mut total = vec![0f32; s.t_q * s.t_k];
        for partial in bias_partials.into_iter().flatten() {
            for (acc, v) in total.iter_mut().zip(partial) {
                *acc += v;
            }
        }
        tensor(total, [s.t_q, s.t_k])
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
    has_bias: bool,
}

#[derive(Debug)]
struct AttentionBackward;

/// N is 3 (query, key, value) or 4 (and the bias).
impl<const N: usize> Backward<Flex, N> for AttentionBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step(ops, grads, |saved, grad| {
            let (d_query, d_key, d_value, d_bias) = backward(saved, &grad);
            [Some(d_query), Some(d_key), Some(d_value), d_bias]
        });
    }
}

fn forward_recorded(
    query: Tensor<4>,
    key: Tensor<4>,
    value: Tensor<4>,
    bias: Option<Tensor<2>>,
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
            has_bias: bias.is_some(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_close, input, values};
    use burn::tensor::Device;

    /// Every input layout the model produces: heads split from [batch, time, heads·d], GQA and
    /// MQA, a bias, and queries that are the newest of more keys (decoding with a cache).
    /// The last cases are larger than a matrix kernel's register tile.
    #[test]
    fn fused_attention_matches_the_composed_ops_forward_and_backward() {
        let cases = [
            (4, 4, 5, 5, 3, false),
            (4, 2, 6, 6, 3, true),
            (4, 1, 3, 7, 3, false),
            (2, 2, 7, 7, 3, true),
            (2, 1, 19, 35, 20, true),
            (2, 2, 33, 33, 16, false),
        ];
        let device = Device::flex().autodiff();
        for (heads, kv_heads, t_q, t_k, d, with_bias) in cases {
            let batch = 2;
            let scale = 0.4;
            let run = |fused: bool| {
                let q = input([batch, t_q, heads * d], 1, &device);
                let k = input([batch, t_k, kv_heads * d], 2, &device);
                let v = input([batch, t_k, kv_heads * d], 3, &device);
                let bias = input([t_q, t_k], 4, &device);
                let split = |x: Tensor<3>, h: usize| {
                    let [b, t, _] = x.dims();
                    x.reshape([b, t, h, d]).swap_dims(1, 2)
                };
                let bias_used = with_bias.then(|| bias.clone());
                let (qs, ks, vs) = (split(q.clone(), heads), split(k.clone(), kv_heads), split(v.clone(), kv_heads));
                let out = if fused { causal_attention(qs, ks, vs, bias_used, scale) } else { composed(qs, ks, vs, bias_used, scale) };
                let weights = input([batch, heads, t_q, d], 5, &device);
                let grads = (out.clone() * weights).sum().backward();
                let grads =
                    [q.grad(&grads).map(values), k.grad(&grads).map(values), v.grad(&grads).map(values), bias.grad(&grads).map(values)];
                (values(out), grads)
            };
            let (fused, fused_grads) = run(true);
            let (composed, composed_grads) = run(false);
            let case = format!("heads {heads}, kv_heads {kv_heads}, t_q {t_q}, t_k {t_k}, d {d}, bias {with_bias}");
            assert_close(&fused, &composed, 1e-5, &case);
            for (name, (a, b)) in ["query", "key", "value", "bias"].iter().zip(fused_grads.into_iter().zip(composed_grads)) {
                match (a, b) {
                    (Some(a), Some(b)) => assert_close(&a, &b, 1e-5, &format!("{case}: d{name}")),
                    (None, None) => assert!(!with_bias && *name == "bias", "{case}: no d{name}"),
                    _ => panic!("{case}: d{name} exists on one side only"),
                }
            }
        }
    }

    #[test]
    fn without_autodiff_the_kernel_gives_the_same_output() {
        let device = Device::flex();
        let q = input([1, 2, 4, 3], 1, &device);
        let k = input([1, 1, 4, 3], 2, &device);
        let v = input([1, 1, 4, 3], 3, &device);
        let bias = input([4, 4], 4, &device);
        let fused = causal_attention(q.clone(), k.clone(), v.clone(), Some(bias.clone()), 0.5);
        assert_close(&values(fused), &values(composed(q, k, v, Some(bias), 0.5)), 1e-5, "no autodiff");
    }
}
