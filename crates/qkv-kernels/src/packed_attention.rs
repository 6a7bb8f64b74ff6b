//! Self-attention from its input on a GPU with the projections as one matrix product: Q, K and V
//! (or K and V, where the queries are the input itself, W_Q = I) come out side by side in one
//! tensor P = x [W_Q | W_K | W_V] (`cube::packed`), and the tiled attention kernels read each
//! head where it lies in P and write dQ, dK and dV straight into one dP:
//!
//! ```text
//!             separate projections            packed
//! forward     3 products                      1 packing + 1 product
//! backward    6 products + 2 adds of dx       2 products + 1 unpacking
//! ```
//!
//! A layer of the standard variant takes six launches fewer a step. Where a variant shares a
//! projection (Q = K, K = V, Q = K = V) its weight is in P once, the attention reads it for each
//! role, and the dK/dV kernel adds the roles' gradients in its place (`Sharing`). Two ops under
//! autodiff: the packed product (x and the weights in, P out) and the attention over P (P, and x
//! for W_Q = I, in). The weights stay separate parameters. Taken where Burn's product and the
//! tiled kernels are (a GPU, not one emulated on the CPU); everywhere else the caller projects and
//! attends apart ([`crate::attention`]), which computes the same values.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, NodeGuard, Ops};
use burn::backend::ops::FloatTensorOps;
use burn::tensor::Tensor;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;

use crate::attention::Mask;
pub use crate::cube::attention_tiled::Sharing;
use crate::cube::attention_tiled::{self, Bases, KeyValueLayout};
use crate::cube::burn_product::Kernel;
use crate::cube::{self, empty, from_cube, from_cube_autodiff, to_cube, to_cube_autodiff};
use crate::flex::{Route, backward_step_on, route};

/// The weights that make the queries, keys and values from the attention's input, each
/// [n_embd, heads·d] (keys and values with `kv_heads` heads). A shared projection is the same
/// weight in each place it serves, and `sharing` says which.
#[derive(Debug, Clone)]
pub struct Projections {
    /// W_Q; `None` where the queries are the input itself, head h reading channels
    /// [h·d, (h+1)·d) (W_Q = I).
    pub query: Option<Tensor<2>>,
    pub key: Tensor<2>,
    pub value: Tensor<2>,
    pub sharing: Sharing,
}

impl Projections {
    /// Each weight once, in P's order (a shared one where it first serves).
    fn distinct(&self) -> Vec<Tensor<2>> {
        match self.sharing {
            Sharing::None => self.query.iter().chain([&self.key, &self.value]).cloned().collect(),
            Sharing::QueryKey => vec![self.key.clone(), self.value.clone()],
            Sharing::KeyValue => self.query.iter().chain([&self.key]).cloned().collect(),
            Sharing::All => vec![self.key.clone()],
        }
    }
}

/// `attention(x W_Q, x W_K, x W_V)` of `x` [batch, time, n_embd] under `mask`, with the
/// projections as one product: [batch, heads, time, d], laid out as [`crate::attention`]'s. `None`
/// where this path is not taken (see the module): project and attend apart there.
pub fn packed_attention(
    x: &Tensor<3>,
    projections: &Projections,
    heads: usize,
    kv_heads: usize,
    scale: f64,
    mask: Mask,
) -> Option<Tensor<4>> {
    let shape = Shape::of(x, projections, heads, kv_heads)?;
    if !matches!(route(&x.device(), x.dtype()), Route::Cube | Route::CubeAutodiff) {
        return None;
    }
    // The packing is for Burn's product; a device given ours projects apart.
    let kernel = cube::product_choice::product_for(&x.device()).burn_kernel()?;
    Some(packed(x, projections, shape, kernel, scale, mask))
}

/// [`packed_attention`] on a cubecl device, with Burn's product picking its kernel by `kernel`.
fn packed(x: &Tensor<3>, projections: &Projections, shape: Shape, kernel: Kernel, scale: f64, mask: Mask) -> Tensor<4> {
    let causal = mask == Mask::Causal;
    let weights = projections.distinct();
    match route(&x.device(), x.dtype()) {
        Route::CubeAutodiff => {
            let x = to_cube_autodiff(x.clone());
            let (x_flat, x_node) = x.clone().into_parts();
            let x_flat = Cube::float_reshape(x_flat, [shape.rows(), shape.n_embd].into());
            let (weights, nodes): (Vec<CubeTensor>, Vec<NodeGuard>) = weights.into_iter().map(|w| to_cube_autodiff(w).into_parts()).unzip();
            let project = || cube::packed::forward(x_flat, &weights, kernel);
            let mut nodes = nodes.into_iter();
            let packed = match (nodes.next(), nodes.next(), nodes.next()) {
                (Some(q), Some(k), Some(v)) => cube::record(PackedProductBackward(shape), [x_node, q, k, v], project),
                (Some(first), Some(second), None) => cube::record(PackedProductBackward(shape), [x_node, first, second], project),
                (Some(only), None, None) => cube::record(PackedProductBackward(shape), [x_node, only], project),
                _ => unreachable!("one to three projections"),
            };
            let (packed, packed_node) = packed.into_parts();
            let attend = |query| attend(query, packed, shape, scale as f32, causal);
            from_cube_autodiff(if shape.query_packed {
                cube::record(PackedAttentionBackward(shape), [packed_node], || attend(None))
            } else {
                let (query, query_node) = x.into_parts();
                cube::record(PackedAttentionBackward(shape), [query_node, packed_node], || attend(Some(query)))
            })
        }
        Route::Cube => {
            let x = to_cube(x.clone());
            let x_flat = Cube::float_reshape(x.clone(), [shape.rows(), shape.n_embd].into());
            let weights: Vec<CubeTensor> = weights.into_iter().map(to_cube).collect();
            let (packed, _) = cube::packed::forward(x_flat, &weights, kernel);
            from_cube(attend((!shape.query_packed).then_some(x), packed, shape, scale as f32, causal).0)
        }
        other => unreachable!("packed attention runs on cubecl devices, not on {other:?}"),
    }
}

/// The sizes of one packed attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    batch: usize,
    time: usize,
    n_embd: usize,
    heads: usize,
    kv_heads: usize,
    d: usize,
    /// Whether P holds the queries (W_Q) or they are the input itself (W_Q = I).
    query_packed: bool,
    sharing: Sharing,
}

impl Shape {
    /// `None` for sizes this path does not take: no positions, widths that do not make whole
    /// heads, or a sharing the sizes do not allow (Q = K needs as many key heads as query heads;
    /// every variant that shares has W_Q).
    fn of(x: &Tensor<3>, projections: &Projections, heads: usize, kv_heads: usize) -> Option<Self> {
        let [batch, time, n_embd] = x.dims();
        let [_, kv_width] = projections.key.dims();
        let d = kv_width / kv_heads.max(1);
        let query_width = projections.query.as_ref().map_or(n_embd, |w| w.dims()[1]);
        let whole = d > 0 && kv_heads > 0 && heads.is_multiple_of(kv_heads) && kv_width == kv_heads * d && query_width == heads * d;
        let sharing = projections.sharing;
        let shares = sharing == Sharing::None || (projections.query.is_some() && (!sharing.keys_onto_queries() || heads == kv_heads));
        (whole && shares && time > 0 && projections.value.dims()[1] == kv_width).then_some(Self {
            batch,
            time,
            n_embd,
            heads,
            kv_heads,
            d,
            query_packed: projections.query.is_some(),
            sharing,
        })
    }

    fn rows(&self) -> usize {
        self.batch * self.time
    }

    /// Heads side by side in a row of P: the queries' (if packed and not the keys'), the keys'
    /// (unless the values'), the values'.
    fn packed_heads(&self) -> usize {
        let queries = usize::from(self.query_packed && !self.sharing.keys_onto_queries()) * self.heads;
        let keys = usize::from(!self.sharing.values_onto_keys()) * self.kv_heads;
        queries + keys + self.kv_heads
    }

    /// Where Q, K and V's heads start in a row of P (Q at 0 wherever it lies), shared ones in
    /// one place.
    fn bases(&self) -> Bases {
        let k = usize::from(self.query_packed && !self.sharing.keys_onto_queries()) * self.heads * self.d;
        let v = k + usize::from(!self.sharing.values_onto_keys()) * self.kv_heads * self.d;
        Bases { q: 0, k, v }
    }
}

/// `heads` heads of `tensor` [rows, width] or [batch, time, width] as a [batch, heads, time, d]
/// view with the row's strides, its element [0, 0, 0, 0] at the tensor's first value (a kernel
/// adds the offset of the heads it wants, [`Bases`]).
fn heads_view(tensor: CubeTensor, shape: Shape, heads: usize) -> CubeTensor {
    let width = tensor.meta.shape().num_elements() / shape.rows();
    let split = Cube::float_reshape(tensor, [shape.batch, shape.time, width / shape.d, shape.d].into());
    let mut view = Cube::float_swap_dims(split, 1, 2);
    view.meta.shape_mut()[1] = heads;
    view
}

/// What the attention's backward pass needs.
#[derive(Debug, Clone)]
struct Saved {
    query: CubeTensor,
    key: CubeTensor,
    value: CubeTensor,
    stats: CubeTensor,
    scale: f32,
    causal: bool,
}

/// The attention over P (and `query`, the input itself, where P holds no queries).
fn attend(query: Option<CubeTensor>, packed: CubeTensor, shape: Shape, scale: f32, causal: bool) -> (CubeTensor, Saved) {
    let query = heads_view(query.unwrap_or_else(|| packed.clone()), shape, shape.heads);
    let key = heads_view(packed.clone(), shape, shape.kv_heads);
    let value = heads_view(packed, shape, shape.kv_heads);
    let (out, stats) = attention_tiled::forward(&query, &key, &value, None, shape.bases(), scale, causal);
    (out, Saved { query, key, value, stats, scale, causal })
}

#[derive(Debug)]
struct PackedProductBackward(Shape);

/// N is 2 (x and one weight, Q = K = V), 3 (x and two: W_K and W_V, or a shared one and the
/// other) or 4 (x, W_Q, W_K, W_V).
impl<const N: usize> Backward<Cube, N> for PackedProductBackward {
    type State = cube::packed::Saved;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = self.0;
        backward_step_on::<Cube, _, N, _>(&ops, grads, |saved, d_packed| {
            let (dx, d_weights) = cube::packed::backward(saved, d_packed);
            let dx = Cube::float_reshape(dx, [s.batch, s.time, s.n_embd].into());
            std::iter::once(Some(dx)).chain(d_weights.into_iter().map(Some))
        });
    }
}

#[derive(Debug)]
struct PackedAttentionBackward(Shape);

/// N is 1 (P) or 2 (the input as the queries, then P).
impl<const N: usize> Backward<Cube, N> for PackedAttentionBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = self.0;
        backward_step_on::<Cube, _, N, _>(&ops, grads, |saved, d_out| {
            let Saved { query, key, value, stats, scale, causal } = saved;
            let d_packed = empty(key, [s.rows(), s.packed_heads() * s.d]);
            let bases = s.bases();
            let layout = KeyValueLayout { k: bases.k, v: bases.v, row: s.packed_heads() * s.d, sharing: s.sharing };
            // dQ into P's query columns, or into a tensor of its own laid out as the input.
            let d_query = if s.query_packed { d_packed.clone() } else { empty(key, [s.batch, s.time, s.n_embd]) };
            let d_query_view = heads_view(d_query.clone(), s, s.heads);
            attention_tiled::backward_into(query, key, value, bases, stats, None, d_out, *scale, *causal, &d_query_view, &d_packed, layout);
            if s.query_packed { vec![Some(d_packed)] } else { vec![Some(d_query), Some(d_packed)] }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_close, gpu, input, values};

    /// The packed path computes what projecting and attending apart computes, forward and
    /// backward: with W_Q and without (W_Q = I), GQA, causal and not, several tiles of keys, and
    /// the shared projections (Q = K, K = V with GQA, Q = K = V), whose gradients meet.
    #[test]
    fn packed_attention_matches_projecting_and_attending_apart() {
        let device = gpu().autodiff();
        // (heads, kv_heads, d, time, with W_Q, mask, sharing)
        let cases = [
            (4, 4, 8, 9, true, Mask::Causal, Sharing::None),
            (4, 2, 16, 70, true, Mask::Bidirectional, Sharing::None),
            (2, 1, 8, 33, false, Mask::Causal, Sharing::None),
            (4, 4, 8, 40, true, Mask::Causal, Sharing::QueryKey),
            (4, 2, 16, 70, true, Mask::Bidirectional, Sharing::KeyValue),
            (2, 2, 8, 33, true, Mask::Causal, Sharing::All),
        ];
        for (heads, kv_heads, d, time, with_query, mask, sharing) in cases {
            let n_embd = heads * d;
            let case = format!("{heads} heads, {kv_heads} kv, d {d}, time {time}, W_Q {with_query}, {mask:?}, {sharing:?}");
            let run = |packed: bool| {
                let leaf = |t: Tensor<3>| t.detach().require_grad();
                let x = leaf(input([2, time, n_embd], 1, &device) * 0.5);
                let w = |seed, width| (input([n_embd, width], seed, &device) * 0.2).detach().require_grad();
                let (query, key, value) = (w(2, n_embd), w(3, kv_heads * d), w(4, kv_heads * d));
                let projections = match sharing {
                    Sharing::None => Projections { query: with_query.then_some(query), key, value, sharing },
                    Sharing::QueryKey => Projections { query: Some(key.clone()), key, value, sharing },
                    Sharing::KeyValue => Projections { query: Some(query), key: key.clone(), value: key, sharing },
                    Sharing::All => Projections { query: Some(key.clone()), key: key.clone(), value: key, sharing },
                };
                // The packed path itself, with Burn's default kernel (`cube::weight_gradient`'s test
                // has the tuned one against it).
                let out = if packed {
                    let shape = Shape::of(&x, &projections, heads, kv_heads).expect("sizes the path takes");
                    super::packed(&x, &projections, shape, Kernel::Default, 0.3, mask)
                } else {
                    let split = |t: Tensor<3>, h: usize| t.reshape([2, time, h, d]).swap_dims(1, 2);
                    let query = projections.query.clone().map_or(x.clone(), |w| x.clone().matmul(w.unsqueeze()));
                    let (key, value) =
                        (x.clone().matmul(projections.key.clone().unsqueeze()), x.clone().matmul(projections.value.clone().unsqueeze()));
                    crate::attention(split(query, heads), split(key, kv_heads), split(value, kv_heads), None, 0.3, mask)
                };
                let grads = (out.clone() * input([2, heads, time, d], 5, &device)).sum().backward();
                let grad = |t: Option<Tensor<2>>| t.map(|t| values(t.grad(&grads).expect("a weight's gradient")));
                let dx = values(x.grad(&grads).expect("dx"));
                (
                    values(out),
                    dx,
                    grad(projections.query.clone()),
                    grad(Some(projections.key.clone())),
                    grad(Some(projections.value.clone())),
                )
            };
            let (packed, apart) = (run(true), run(false));
            assert_close(&packed.0, &apart.0, 1e-5, &format!("{case}: out"));
            assert_close(&packed.1, &apart.1, 1e-4, &format!("{case}: dx"));
            for (name, (a, b)) in [("dW_Q", (&packed.2, &apart.2)), ("dW_K", (&packed.3, &apart.3)), ("dW_V", (&packed.4, &apart.4))] {
                match (a, b) {
                    (Some(a), Some(b)) => assert_close(a, b, 1e-4, &format!("{case}: {name}")),
                    (None, None) => assert!(!with_query && name == "dW_Q"),
                    _ => panic!("{case}: {name} on one side only"),
                }
            }
        }
    }
}
