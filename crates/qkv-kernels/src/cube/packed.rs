//! Up to three projections of one input as one matrix product on a GPU (one where a variant
//! shares a single projection, Q = K = V, is its own packing): the weights side by side,
//! `[W_1 | W_2 | W_3]`, so that `x [W_1 | W_2 | W_3] = [x W_1 | x W_2 | x W_3]`:
//!
//! ```text
//! forward   P  = x W                  W = [W_1 | W_2 | W_3]   [in, Σ out_i], packed (one launch)
//! backward  dx = dP Wᵀ                one product, where the projections took one each and two adds
//!           dW = xᵀ dP                one product (in runs of the rows where they are many:
//!                                     super::weight_gradient), then summed and unpacked into
//!                                     dW_1, dW_2, dW_3 (one launch)
//! ```
//!
//! The weights stay separate parameters (the optimiser, the checkpoints and the counts see them
//! as ever); only the product sees them packed. The products are Burn's: this path is for
//! devices that take Burn's product (`super::product_choice`).

use burn::backend::ops::FloatTensorOps;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::burn_product::{Kernel, product as burn_product};
use super::product_choice::Product;
use super::{empty, note, units};

/// packed[r, ·] = [w0[r, ·] | w1[r, ·] | w2[r, ·]] (`w2` unread unless `three`), a unit a value.
#[cube(launch)]
fn pack_kernel(w0: &Tensor<f32>, w1: &Tensor<f32>, w2: &Tensor<f32>, packed: &mut Tensor<f32>, #[comptime] three: bool) {
    let index = ABSOLUTE_POS;
    if index >= packed.len() {
        terminate!();
    }
    let width = packed.shape(1);
    let (r, c) = (index / width, index % width);
    let (n0, n1) = (w0.shape(1), w1.shape(1));
    if c < n0 {
        packed[index] = w0[r * w0.stride(0) + c * w0.stride(1)];
    } else if c < n0 + n1 {
        packed[index] = w1[r * w1.stride(0) + (c - n0) * w1.stride(1)];
    } else if three {
        packed[index] = w2[r * w2.stride(0) + (c - n0 - n1) * w2.stride(1)];
    }
}

/// Partial sums [`unpack_kernel`] adds up a unit: a fixed loop, as many as a unit of
/// `block_sum::column_sums` adds, so that a unit's work does not grow with the batch (more
/// partials than this are summed down first, by that).
const PARTIALS: usize = super::block_sum::COLUMN_ROWS;

/// The inverse of [`pack_kernel`]: packed's columns into `w0`, `w1`, `w2` (contiguous; `w2`
/// unwritten unless `three`), a unit a value. With `summed`, `packed` holds `runs` ≤
/// [`PARTIALS`] partial sums [runs, in, Σ out_i] (a weight gradient's, `super::weight_gradient`)
/// and each value is their sum.
#[cube(launch)]
fn unpack_kernel(
    packed: &Tensor<f32>,
    w0: &mut Tensor<f32>,
    w1: &mut Tensor<f32>,
    w2: &mut Tensor<f32>,
    runs: u32,
    #[comptime] three: bool,
    #[comptime] summed: bool,
) {
    let index = ABSOLUTE_POS;
    let values = packed.len() / runs as usize;
    if index >= values {
        terminate!();
    }
    let mut value = 0.0f32;
    if summed {
        for s in 0..PARTIALS {
            if s < runs as usize {
                value += packed[s * values + index];
            }
        }
    } else {
        value = packed[index];
    }
    let width = packed.shape(packed.rank() - 1);
    let (r, c) = (index / width, index % width);
    let (n0, n1) = (w0.shape(1), w1.shape(1));
    if c < n0 {
        w0[r * n0 + c] = value;
    } else if c < n0 + n1 {
        w1[r * n1 + c - n0] = value;
    } else if three {
        let n2 = w2.shape(1);
        w2[r * n2 + c - n0 - n1] = value;
    }
}

/// The weights [in, out_i] side by side, [in, Σ out_i]: one launch. Two or three weights.
pub(crate) fn pack(weights: &[CubeTensor]) -> CubeTensor {
    assert!(matches!(weights.len(), 2 | 3), "two or three projections pack, not {}", weights.len());
    let d_in = weights[0].meta.shape()[0];
    let width: usize = weights.iter().map(|w| w.meta.shape()[1]).sum();
    let packed = empty(&weights[0], [d_in, width]);
    let client = weights[0].client.clone();
    let (count, dim) = units(&client, d_in * width);
    note(&count, dim, 1, d_in * width, d_in * width);
    let three = weights.len() == 3;
    pack_kernel::launch(
        &client,
        count,
        dim,
        weights[0].clone().into_tensor_arg(),
        weights[1].clone().into_tensor_arg(),
        weights[weights.len() - 1].clone().into_tensor_arg(),
        packed.clone().into_tensor_arg(),
        three,
    );
    packed
}

/// The sum of `partials` [runs, in, Σ widths] (a weight gradient's partial sums; one run: the
/// packed weights themselves), into one [in, width] tensor a width: one launch (two past
/// [`PARTIALS`] runs).
pub(crate) fn unpack(partials: CubeTensor, widths: &[usize]) -> Vec<CubeTensor> {
    assert!(matches!(widths.len(), 1..=3), "one to three projections unpack, not {}", widths.len());
    if widths.len() == 1 {
        return vec![super::weight_gradient::finish(partials)];
    }
    let [runs, d_in, width] = partials.meta.shape().dims();
    let (partials, runs) = if runs > PARTIALS {
        let sums = super::weight_gradient::finish(partials);
        (Cube::float_reshape(sums, [1, d_in, width].into()), 1)
    } else {
        (super::contiguous(partials), runs)
    };
    let parts: Vec<CubeTensor> = widths.iter().map(|&w| empty(&partials, [d_in, w])).collect();
    // Two parts: the third slot takes a value the kernel never writes.
    let unused = empty(&partials, [1, 1]);
    let third = parts.get(2).unwrap_or(&unused);
    let client = partials.client.clone();
    let values = d_in * width;
    let summed = runs > 1;
    let (count, dim) = units(&client, values);
    note(&count, dim, if summed { PARTIALS } else { 1 }, runs * values, values);
    unpack_kernel::launch(
        &client,
        count,
        dim,
        partials.into_tensor_arg(),
        parts[0].clone().into_tensor_arg(),
        parts[1].clone().into_tensor_arg(),
        third.clone().into_tensor_arg(),
        runs as u32,
        widths.len() == 3,
        summed,
    );
    parts
}

/// What the backward pass needs: the input, the packed weights, and how Burn's product picked
/// its kernel forward.
#[derive(Debug, Clone)]
pub(crate) struct Saved {
    x: CubeTensor,
    packed: CubeTensor,
    widths: Vec<usize>,
    kernel: Kernel,
}

/// `x` [rows, in] times the weights side by side: P [rows, Σ out_i], in two launches (the packing,
/// then Burn's product; one weight needs no packing).
pub(crate) fn forward(x: CubeTensor, weights: &[CubeTensor], kernel: Kernel) -> (CubeTensor, Saved) {
    // One weight (Q = K = V) is its own packing.
    let packed = if let [weight] = weights { weight.clone() } else { pack(weights) };
    let widths = weights.iter().map(|w| w.meta.shape()[1]).collect();
    let p = burn_product(x.clone(), packed.clone(), kernel);
    (p, Saved { x, packed, widths, kernel })
}

/// dx [rows, in] and each weight's gradient, from dP [rows, Σ out_i]: three launches.
pub(crate) fn backward(saved: &Saved, d_p: CubeTensor) -> (CubeTensor, Vec<CubeTensor>) {
    let Saved { x, packed, widths, kernel } = saved;
    let dx = burn_product(d_p.clone(), Cube::float_transpose(packed.clone()), *kernel);
    let partials = super::weight_gradient::partials(Product::burn(*kernel), x.clone(), d_p);
    (dx, unpack(partials, widths))
}

#[cfg(test)]
mod tests {
    use burn::backend::ops::FloatTensorOps;
    use burn::tensor::Tensor;

    use crate::cube::{from_cube, to_cube};
    use crate::tests::{assert_close, gpu, input, values};

    /// Packing and unpacking are inverses, and the packed product is each projection's beside
    /// the others': three weights and two, of unequal widths (GQA's keys and values are
    /// narrower than its queries), one of them read through a transpose; a few rows, and
    /// enough that the weights' gradients are summed from runs of rows.
    #[test]
    fn the_packed_product_is_the_projections_side_by_side() {
        let device = gpu();
        for (rows, widths) in [(10, vec![12, 4, 4]), (10, vec![6, 6]), (3000, vec![12, 4, 4])] {
            let x = input([rows, 12], 1, &device);
            let weights: Vec<Tensor<2>> = widths.iter().enumerate().map(|(i, &w)| input([12, w], 2 + i as u64, &device)).collect();
            // A transposed view as the first weight: the kernel reads through strides.
            let first = input([widths[0], 12], 9, &device).transpose();
            let weights: Vec<Tensor<2>> = std::iter::once(first).chain(weights.into_iter().skip(1)).collect();
            let cubes: Vec<_> = weights.iter().cloned().map(to_cube).collect();
            let (p, saved) = super::forward(to_cube(x.clone()), &cubes, super::Kernel::Default);
            let expected = Tensor::cat(weights.iter().map(|w| x.clone().matmul(w.clone())).collect(), 1);
            assert_close(&values(from_cube::<2>(p)), &values(expected), 1e-5, &format!("P for widths {widths:?}"));
            let packed = burn_cubecl::CubeBackend::float_reshape(saved.packed.clone(), [1, 12, widths.iter().sum()].into());
            for (part, weight) in super::unpack(packed, &widths).into_iter().zip(&weights) {
                assert_close(&values(from_cube::<2>(part)), &values(weight.clone()), 0.0, &format!("unpacked, widths {widths:?}"));
            }
            // Backward: dx = dP Wᵀ summed over the projections; dW_i = xᵀ dP_i.
            let total: usize = widths.iter().sum();
            let d_p = input([rows, total], 11, &device);
            let (dx, d_weights) = super::backward(&saved, to_cube(d_p.clone()));
            let mut start = 0;
            let mut expected_dx = x.zeros_like();
            for (d_weight, (&w, weight)) in d_weights.into_iter().zip(widths.iter().zip(&weights)) {
                let d_part = d_p.clone().slice([0..rows, start..start + w]);
                expected_dx = expected_dx + d_part.clone().matmul(weight.clone().transpose());
                let expected = x.clone().transpose().matmul(d_part);
                assert_close(&values(from_cube::<2>(d_weight)), &values(expected), 1e-3, &format!("dW, {rows} rows, widths {widths:?}"));
                start += w;
            }
            assert_close(&values(from_cube::<2>(dx)), &values(expected_dx), 1e-4, &format!("dx, {rows} rows, widths {widths:?}"));
        }
    }
}
