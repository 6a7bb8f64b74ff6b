//! Attention on a cubecl GPU without the T×T matrix in memory (flash-style): one launch forward,
//! two or three backward, where Burn's composed attention builds the whole matrix and takes about
//! fifteen launches forward and thirty backward. GPUs take the tiled kernels
//! (`super::attention_tiled`, causal or both ways); GPUs emulated on the CPU take the per-row
//! kernels here (causal), which need no workgroup memory and no barrier. The arithmetic is the flex kernel's
//! (`crate::attention`):
//!
//! ```text
//! forward:  O_i = Σ_j P_ij V_j, P_ij = exp(scale·Q_i·K_j − L_i), L_i = log Σ_j exp(scale·Q_i·K_j)
//! backward: D_i = dO_i·O_i   dP_ij = dO_i·V_j   dS_ij = P_ij (dP_ij − D_i)
//!           dQ_i = scale Σ_j dS_ij K_j   dK_j = scale Σ_i dS_ij Q_i   dV_j = Σ_i P_ij dO_i
//! ```
//!
//! One unit per query row (forward, dQ) or key row (dK, dV), each looping over the keys or
//! queries it sees, with the running maximum of an online softmax forward: P is recomputed from
//! L instead of kept. Query head h reads key/value head h / (heads / kv_heads) (GQA, MQA), and a
//! key row sums over its group's heads. Inputs are read through their strides, so a head's slice
//! of a projection is used as it lies; the output and the gradients are written [batch, time,
//! heads, d] in memory, so that merging the heads back (and splitting them, backward) is free. At most six tensors a kernel: WebGPU allows eight
//! storage buffers, and CubeCL keeps one.

use burn::backend::ops::FloatTensorOps;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

pub(crate) use super::attention_tiled::LogitBias;
use super::attention_tiled::row_start;
use super::{empty, note, units};

/// scale · Q_i·K_j, with Q_i at `q_at` and K_j at `k_at`.
#[cube]
fn logit(q: &Tensor<f32>, q_at: usize, k: &Tensor<f32>, k_at: usize, scale: f32, #[comptime] d: usize) -> f32 {
    let mut dot = 0.0f32;
    for c in 0..d {
        dot += q[q_at + c * q.stride(3)] * k[k_at + c * k.stride(3)];
    }
    dot * scale
}

/// dO_i · V_j.
#[cube]
fn d_out_dot(d_out: &Tensor<f32>, o_at: usize, v: &Tensor<f32>, v_at: usize, #[comptime] d: usize) -> f32 {
    let mut dot = 0.0f32;
    for c in 0..d {
        dot += d_out[o_at + c * d_out.stride(3)] * v[v_at + c * v.stride(3)];
    }
    dot
}

/// Row (b, h, i) of the output, and L_i into `stats[2·row]`.
#[cube(launch)]
fn attention_kernel(
    q: &Tensor<f32>,
    k: &Tensor<f32>,
    v: &Tensor<f32>,
    out: &mut Tensor<f32>,
    stats: &mut Tensor<f32>,
    scale: f32,
    #[comptime] d: usize,
) {
    let row = ABSOLUTE_POS;
    let (heads, t_q, t_k) = (q.shape(1), q.shape(2), k.shape(2));
    if row * 2 >= stats.len() {
        terminate!();
    }
    let i = row % t_q;
    let h = (row / t_q) % heads;
    let b = row / (t_q * heads);
    let g = h / (heads / k.shape(1));
    let q_at = row_start(q, b, h, i);
    let mut acc = Array::<f32>::new(d);
    let mut top = f32::new(-1.0e30);
    let mut sum = f32::new(0.0);
    for j in 0..i + 1 + t_k - t_q {
        let s = logit(q, q_at, k, row_start(k, b, g, j), scale, d);
        let mut new_top = top;
        if s > top {
            new_top = s;
        }
        let correction = (top - new_top).exp();
        let p = (s - new_top).exp();
        sum = sum * correction + p;
        let v_at = row_start(v, b, g, j);
        for c in 0..d {
            acc[c] = acc[c] * correction + p * v[v_at + c * v.stride(3)];
        }
        top = new_top;
    }
    let o_at = b * out.stride(0) + h * out.stride(1) + i * out.stride(2);
    let o_step = out.stride(3);
    for c in 0..d {
        out[o_at + c * o_step] = acc[c] / sum;
    }
    stats[row * 2] = top + sum.ln();
}

/// D_i = dO_i · O_i into `stats[2·row + 1]`.
#[cube(launch)]
fn attention_delta_kernel(out: &Tensor<f32>, d_out: &Tensor<f32>, stats: &mut Tensor<f32>, #[comptime] d: usize) {
    let row = ABSOLUTE_POS;
    let (heads, t_q) = (out.shape(1), out.shape(2));
    if row * 2 >= stats.len() {
        terminate!();
    }
    let i = row % t_q;
    let h = (row / t_q) % heads;
    let b = row / (t_q * heads);
    let (o_at, d_at) = (row_start(out, b, h, i), row_start(d_out, b, h, i));
    let mut dot = 0.0f32;
    for c in 0..d {
        dot += out[o_at + c * out.stride(3)] * d_out[d_at + c * d_out.stride(3)];
    }
    stats[row * 2 + 1] = dot;
}

/// dQ_i for row (b, h, i), into `d_q` [batch, heads, t_q, d] (laid out [batch, t_q, heads, d]).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn attention_d_query_kernel(
    q: &Tensor<f32>,
    k: &Tensor<f32>,
    v: &Tensor<f32>,
    d_out: &Tensor<f32>,
    stats: &Tensor<f32>,
    d_q: &mut Tensor<f32>,
    scale: f32,
    #[comptime] d: usize,
) {
    let row = ABSOLUTE_POS;
    let (heads, t_q, t_k) = (q.shape(1), q.shape(2), k.shape(2));
    if row * 2 >= stats.len() {
        terminate!();
    }
    let i = row % t_q;
    let h = (row / t_q) % heads;
    let b = row / (t_q * heads);
    let g = h / (heads / k.shape(1));
    let (q_at, o_at) = (row_start(q, b, h, i), row_start(d_out, b, h, i));
    let (log_norm, delta) = (stats[row * 2], stats[row * 2 + 1]);
    let mut acc = Array::<f32>::new(d);
    for j in 0..i + 1 + t_k - t_q {
        let k_at = row_start(k, b, g, j);
        let p = (logit(q, q_at, k, k_at, scale, d) - log_norm).exp();
        let d_s = p * (d_out_dot(d_out, o_at, v, row_start(v, b, g, j), d) - delta);
        for c in 0..d {
            acc[c] += d_s * k[k_at + c * k.stride(3)];
        }
    }
    let at = b * d_q.stride(0) + h * d_q.stride(1) + i * d_q.stride(2);
    let step = d_q.stride(3);
    for c in 0..d {
        d_q[at + c * step] = acc[c] * scale;
    }
}

/// dK_j and dV_j for key row (b, g, j), summed over the group's query heads, into
/// `d_kv` [2, batch, t_k, kv_heads, d] (dK first).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn attention_d_key_value_kernel(
    q: &Tensor<f32>,
    k: &Tensor<f32>,
    v: &Tensor<f32>,
    d_out: &Tensor<f32>,
    stats: &Tensor<f32>,
    d_kv: &mut Tensor<f32>,
    scale: f32,
    #[comptime] d: usize,
) {
    let key_row = ABSOLUTE_POS;
    let (heads, t_q) = (q.shape(1), q.shape(2));
    let (kv_heads, t_k) = (k.shape(1), k.shape(2));
    let key_rows = k.shape(0) * kv_heads * t_k;
    if key_row >= key_rows {
        terminate!();
    }
    let j = key_row % t_k;
    let g = (key_row / t_k) % kv_heads;
    let b = key_row / (t_k * kv_heads);
    let group = heads / kv_heads;
    let (k_at, v_at) = (row_start(k, b, g, j), row_start(v, b, g, j));
    // Query i sees key j when j < i + 1 + t_k − t_q.
    let past = t_k - t_q;
    let mut first = 0usize;
    if j > past {
        first = j - past;
    }
    let mut d_k = Array::<f32>::new(d);
    let mut d_v = Array::<f32>::new(d);
    for h in g * group..(g + 1) * group {
        for i in first..t_q {
            let row = (b * heads + h) * t_q + i;
            let (q_at, o_at) = (row_start(q, b, h, i), row_start(d_out, b, h, i));
            let p = (logit(q, q_at, k, k_at, scale, d) - stats[row * 2]).exp();
            let d_s = p * (d_out_dot(d_out, o_at, v, v_at, d) - stats[row * 2 + 1]);
            for c in 0..d {
                d_k[c] += d_s * q[q_at + c * q.stride(3)];
                d_v[c] += p * d_out[o_at + c * d_out.stride(3)];
            }
        }
    }
    // Laid out [2, batch, t_k, kv_heads, d], so that the heads merge back without a copy.
    let k_out = ((b * t_k + j) * kv_heads + g) * d;
    let v_out = key_rows * d + k_out;
    for c in 0..d {
        d_kv[k_out + c] = d_k[c] * scale;
        d_kv[v_out + c] = d_v[c];
    }
}

/// What the backward pass needs of the forward.
#[derive(Debug, Clone)]
pub(crate) struct Saved {
    q: CubeTensor,
    k: CubeTensor,
    v: CubeTensor,
    out: CubeTensor,
    /// [rows, 2]: L_i, and D_i once the backward pass has computed it (the tiled kernels' bias
    /// behind them).
    stats: CubeTensor,
    /// The bias's heads (1: one for all heads), where there is one.
    bias_heads: Option<usize>,
    scale: f32,
    kernels: Kernels,
}

/// Which kernels a device takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernels {
    /// A unit a row, no workgroup memory or barrier: for GPUs emulated on the CPU, causal only.
    PerRow,
    /// `super::attention_tiled`, causal or not.
    Tiled { causal: bool },
}

/// Whether the kernels take this attention on `device`: the tiled ones take every attention, with
/// a bias or without; on a GPU emulated on the CPU the per-row ones take the causal one without a
/// bias.
pub(crate) fn takes(causal: bool, biased: bool, device: &burn_cubecl::CubeDevice) -> bool {
    (causal && !biased) || !super::product_choice::emulated(device)
}

/// The output [batch, heads, t_q, d] (laid out [batch, t_q, heads, d]) and what the backward
/// pass needs. `k` and `v` are [batch, kv_heads, t_k, d]; `bias`, if any, [1 or heads, t_q, t_k];
/// the future is masked when `causal`.
pub(crate) fn forward(
    q: CubeTensor,
    k: CubeTensor,
    v: CubeTensor,
    bias: Option<LogitBias>,
    scale: f32,
    causal: bool,
) -> (CubeTensor, Saved) {
    let kernels = if super::product_choice::emulated(&q.device) { Kernels::PerRow } else { Kernels::Tiled { causal } };
    assert!(
        (causal && bias.is_none()) || kernels != Kernels::PerRow,
        "the per-row attention kernels are causal only, without a bias: route other attention elsewhere (`takes`)"
    );
    forward_with(q, k, v, bias, scale, kernels)
}

/// [`forward`] with `kernels`.
fn forward_with(q: CubeTensor, k: CubeTensor, v: CubeTensor, bias: Option<LogitBias>, scale: f32, kernels: Kernels) -> (CubeTensor, Saved) {
    if let Kernels::Tiled { causal } = kernels {
        let bias_heads = bias.map(|bias| bias.values.meta.shape()[0]);
        let (out, stats) = super::attention_tiled::forward(&q, &k, &v, bias, super::attention_tiled::Bases::default(), scale, causal);
        return (out.clone(), Saved { q, k, v, out, stats, bias_heads, scale, kernels });
    }
    let [batch, heads, t_q, d] = q.meta.shape().dims();
    let rows = batch * heads * t_q;
    let out = Cube::float_swap_dims(empty(&q, [batch, t_q, heads, d]), 1, 2);
    let stats = empty(&q, [rows, 2]);
    let client = q.client.clone();
    let (count, dim) = units(&client, rows);
    let [_, kv_heads, t_k, _] = k.meta.shape().dims();
    // The last query row sees every key: a logit and an update of d values each, then d written.
    note(&count, dim, t_k * 2 * d + d, rows * d + 2 * batch * kv_heads * t_k * d, rows * d + rows);
    attention_kernel::launch(
        &client,
        count,
        dim,
        q.clone().into_tensor_arg(),
        k.clone().into_tensor_arg(),
        v.clone().into_tensor_arg(),
        out.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        scale,
        d,
    );
    (out.clone(), Saved { q, k, v, out, stats, bias_heads: None, scale, kernels: Kernels::PerRow })
}

/// dQ, dK, dV and the bias's gradient (where there is a bias) from the gradient arriving at the
/// output.
pub(crate) fn backward(saved: &Saved, d_out: CubeTensor) -> (CubeTensor, CubeTensor, CubeTensor, Option<CubeTensor>) {
    let Saved { q, k, v, out, stats, bias_heads, scale, kernels } = saved;
    let [batch, heads, t_q, d] = q.meta.shape().dims();
    let [_, kv_heads, t_k, _] = k.meta.shape().dims();
    let half = |d_kv: &CubeTensor, index: usize| {
        let slice = Cube::float_slice(d_kv.clone(), &[burn::tensor::Slice::from(index..index + 1)]);
        Cube::float_swap_dims(Cube::float_reshape(slice, [batch, t_k, kv_heads, d].into()), 1, 2)
    };
    if let Kernels::Tiled { causal } = *kernels {
        let (d_q, d_kv, d_bias) = super::attention_tiled::backward(q, k, v, stats, *bias_heads, d_out, *scale, causal);
        return (d_q, half(&d_kv, 0), half(&d_kv, 1), d_bias);
    }
    let rows = batch * heads * t_q;
    let key_rows = batch * kv_heads * t_k;
    let client = q.client.clone();
    let (count, dim) = units(&client, rows);
    let kv_values = batch * kv_heads * t_k * d;
    note(&count, dim, d, 2 * rows * d, rows);
    attention_delta_kernel::launch(
        &client,
        count.clone(),
        dim,
        out.clone().into_tensor_arg(),
        d_out.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        d,
    );
    let d_q = Cube::float_swap_dims(empty(q, [batch, t_q, heads, d]), 1, 2);
    // The last query row sees every key: its logit, dO·V and d values of dQ each.
    note(&count, dim, t_k * 3 * d + d, 2 * rows * d + 2 * kv_values + 2 * rows, rows * d);
    attention_d_query_kernel::launch(
        &client,
        count,
        dim,
        q.clone().into_tensor_arg(),
        k.clone().into_tensor_arg(),
        v.clone().into_tensor_arg(),
        d_out.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        d_q.clone().into_tensor_arg(),
        *scale,
        d,
    );
    let d_kv = empty(q, [2, batch, t_k, kv_heads, d]);
    let (count, dim) = units(&client, key_rows);
    // The first key row is seen by every query of its group's heads: a logit, dO·V and d values
    // each of dK and dV.
    note(&count, dim, (heads / kv_heads) * t_q * 4 * d + 2 * d, 2 * rows * d + 2 * kv_values + 2 * rows, 2 * kv_values);
    attention_d_key_value_kernel::launch(
        &client,
        count,
        dim,
        q.clone().into_tensor_arg(),
        k.clone().into_tensor_arg(),
        v.clone().into_tensor_arg(),
        d_out.into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        d_kv.clone().into_tensor_arg(),
        *scale,
        d,
    );
    (d_q, half(&d_kv, 0), half(&d_kv, 1), None)
}

#[cfg(test)]
mod tests {
    use burn::backend::ops::FloatTensorOps;
    use burn_cubecl::CubeBackend as Cube;
    use burn_cubecl::tensor::CubeTensor;

    use super::{Kernels, LogitBias, backward, forward_with};
    use crate::cube::{from_cube, to_cube};
    use crate::tests::{assert_close, gpu, input, values};

    fn flat(t: CubeTensor) -> Vec<f32> {
        let n = t.meta.shape().num_elements();
        values(from_cube::<1>(Cube::float_reshape(t, [n].into())))
    }

    /// The per-row kernels (GPUs emulated on the CPU) and the tiled ones agree, forward and
    /// backward: GQA, queries that are the newest of more keys, more rows than a workgroup takes
    /// and a head dimension that takes several tiles.
    #[test]
    fn the_per_row_and_the_tiled_kernels_agree() {
        let device = gpu();
        for (heads, kv_heads, t_q, t_k, d) in [(4, 2, 70, 70, 64), (2, 1, 9, 75, 16), (2, 2, 130, 130, 8)] {
            let q = to_cube(input([2, heads, t_q, d], 1, &device));
            let k = to_cube(input([2, kv_heads, t_k, d], 2, &device));
            let v = to_cube(input([2, kv_heads, t_k, d], 3, &device));
            let d_out = to_cube(input([2, heads, t_q, d], 4, &device));
            let run = |kernels| {
                let (out, saved) = forward_with(q.clone(), k.clone(), v.clone(), None, 0.3, kernels);
                let (d_q, d_k, d_v, _) = backward(&saved, d_out.clone());
                [out, d_q, d_k, d_v].map(flat)
            };
            let (per_row, tiled) = (run(Kernels::PerRow), run(Kernels::Tiled { causal: true }));
            for (name, (a, b)) in ["out", "dQ", "dK", "dV"].iter().zip(per_row.iter().zip(&tiled)) {
                assert_close(b, a, 1e-4, &format!("{name}: heads {heads}/{kv_heads}, t {t_q}/{t_k}, d {d}"));
            }
        }
    }

    /// The tiled kernels with a bias on the logits, one for every head or one per head, compute
    /// what Burn's composed attention computes, and its gradients (the bias's among them): causal
    /// and both ways, GQA and MQA, queries that are the newest of more keys, more rows than a
    /// workgroup takes. Called directly, so that no device timing routes them elsewhere.
    #[test]
    fn the_tiled_kernels_with_a_bias_match_burn_s_attention() {
        use burn::tensor::module;
        use burn::tensor::ops::AttentionModuleOptions;

        use crate::attention::repeat_kv_heads;

        let device = gpu();
        let autodiff = device.clone().autodiff();
        let batch = 2;
        // (heads, kv_heads, t_q, t_k, d, bias heads, causal)
        let cases = [
            (4, 2, 70, 70, 16, 4, true),
            (2, 2, 130, 130, 8, 1, true),
            (2, 1, 9, 75, 16, 1, false),
            (4, 1, 5, 9, 8, 4, false),
            (2, 1, 9, 75, 8, 2, true),
        ];
        for (heads, kv_heads, t_q, t_k, d, bias_heads, causal) in cases {
            let shapes = ([batch, heads, t_q, d], [batch, kv_heads, t_k, d], [bias_heads, t_q, t_k]);
            let (out, saved) = forward_with(
                to_cube(input(shapes.0, 1, &device)),
                to_cube(input(shapes.1, 2, &device)),
                to_cube(input(shapes.1, 3, &device)),
                Some(LogitBias { values: &to_cube(input(shapes.2, 4, &device)), for_backward: true }),
                0.3,
                Kernels::Tiled { causal },
            );
            // Without a backward pass to follow, the same output, and no copy of the bias kept.
            let (alone, alone_saved) = forward_with(
                to_cube(input(shapes.0, 1, &device)),
                to_cube(input(shapes.1, 2, &device)),
                to_cube(input(shapes.1, 3, &device)),
                Some(LogitBias { values: &to_cube(input(shapes.2, 4, &device)), for_backward: false }),
                0.3,
                Kernels::Tiled { causal },
            );
            let rows = batch * heads * t_q;
            assert_eq!(alone_saved.stats.meta.shape().num_elements(), 2 * rows, "statistics only");
            assert_eq!(saved.stats.meta.shape().num_elements(), 2 * rows + bias_heads * t_q * t_k, "and the bias");
            assert_close(&flat(alone), &flat(out.clone()), 0.0, "the output without a backward pass");
            let (d_q, d_k, d_v, d_bias) = backward(&saved, to_cube(input(shapes.0, 5, &device)));
            let tiled = [out, d_q, d_k, d_v, d_bias.expect("a bias's gradient")].map(flat);

            let (q, k, v, bias) = (
                input(shapes.0, 1, &autodiff),
                input(shapes.1, 2, &autodiff),
                input(shapes.1, 3, &autodiff),
                input(shapes.2, 4, &autodiff),
            );
            let options = AttentionModuleOptions { scale: Some(0.3), softcap: None, is_causal: causal };
            let expanded = bias.clone().unsqueeze_dim::<4>(0).expand([batch, heads, t_q, t_k]);
            let (keys, key_values) = (repeat_kv_heads(k.clone(), heads), repeat_kv_heads(v.clone(), heads));
            let composed = module::attention(q.clone(), keys, key_values, None, Some(expanded), options);
            let grads = (composed.clone() * input(shapes.0, 5, &autodiff)).sum().backward();
            let gradient = |x: &burn::tensor::Tensor<4>| values(x.grad(&grads).expect("a gradient"));
            let expected =
                [values(composed), gradient(&q), gradient(&k), gradient(&v), values(bias.grad(&grads).expect("the bias's gradient"))];
            for (name, (a, b)) in ["out", "dQ", "dK", "dV", "dB"].iter().zip(tiled.iter().zip(&expected)) {
                let case = format!("{name}: heads {heads}/{kv_heads}, t {t_q}/{t_k}, d {d}, bias heads {bias_heads}, causal {causal}");
                assert_close(a, b, 1e-4, &case);
            }
        }
    }
}
