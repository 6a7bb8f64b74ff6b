//! A weight's gradient, dW = xᵀ·dy, split over the batch's rows so that no unit's loop grows
//! with the batch. The product's inner dimension is the batch's rows (B·T), and both products
//! (Burn's and ours) give each unit of C the whole of it: at nanoGPT's 6/6/384 shape a unit
//! looped 2,048 times at batch 8 and 16,384 at batch 64. Here the rows are cut into S equal runs
//! of at most [`RUN_ROWS`], each run's product is a partial sum of dW, and a finish adds the S
//! partials up:
//!
//! ```text
//! partials[s] = x[run s]ᵀ · dy[run s]      [S, in, out]   one launch (a batched product)
//! dW          = Σ_s partials[s]             [in, out]      one launch, a unit adding ≤ 64
//! ```
//!
//! A bigger batch adds runs, which are units, not trips. A model whose batch is at most one run
//! (the classroom model) takes the plain product, as before.

use burn::backend::ops::FloatTensorOps;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;

use super::product_choice::Product;

/// The most rows of the batch a unit of a weight's gradient adds up. 1,024 rows is 4 sequences
/// of nanoGPT's context: batch 8 takes 2 runs, batch 64 takes 16.
pub(crate) const RUN_ROWS: usize = 1024;

/// Runs the rows are cut into: ⌈rows / RUN_ROWS⌉ raised to the nearest divisor of `rows`, so that
/// the runs are equal (Burn's batched product needs that). One run where no divisor lies within
/// twice that (a prime count of rows: the loop is long, the result the same).
pub(crate) fn runs(rows: usize) -> usize {
    let least = rows.div_ceil(RUN_ROWS).max(1);
    (least..=2 * least).find(|s| rows.is_multiple_of(*s)).unwrap_or(1)
}

/// The partial sums of xᵀ·dy over [`runs`] runs of the rows of `x` [rows, in] and `dy` [rows, out],
/// as [runs, in, out] (a run's partial sum is the whole gradient where there is one run), in one
/// launch of `product`.
pub(crate) fn partials(product: Product, x: CubeTensor, dy: CubeTensor) -> CubeTensor {
    let [rows, d_in] = x.meta.shape().dims();
    let d_out = dy.meta.shape()[1];
    let runs = runs(rows);
    let run = rows / runs;
    let Some(kernel) = product.burn_kernel() else {
        return super::product::product_in_runs(Cube::float_transpose(x), dy, run);
    };
    if runs == 1 {
        // One run: the plain product, as the layers took it before there were runs.
        let dw = super::burn_product::product(Cube::float_transpose(x), dy, kernel);
        return Cube::float_reshape(dw, [1, d_in, d_out].into());
    }
    // [runs, run, in] with its last two axes swapped is [runs, in, run], read where it lies.
    let x = Cube::float_swap_dims(Cube::float_reshape(x, [runs, run, d_in].into()), 1, 2);
    let dy = Cube::float_reshape(dy, [runs, run, d_out].into());
    super::burn_product::batched_product(x, dy, kernel)
}

/// dW [in, out] from its `partials` [runs, in, out]: their sum, one launch (none for one run).
pub(crate) fn finish(partials: CubeTensor) -> CubeTensor {
    let [runs, d_in, d_out] = partials.meta.shape().dims();
    if runs == 1 {
        return Cube::float_reshape(partials, [d_in, d_out].into());
    }
    let sums = super::block_sum::column_sums(Cube::float_reshape(partials, [runs, d_in * d_out].into()));
    Cube::float_reshape(sums, [d_in, d_out].into())
}

/// dW = xᵀ·dy for `x` [rows, in] and `dy` [rows, out], with `product`: [`partials`], then [`finish`].
pub(crate) fn weight_gradient(product: Product, x: CubeTensor, dy: CubeTensor) -> CubeTensor {
    finish(partials(product, x, dy))
}

#[cfg(test)]
mod tests {
    use burn::tensor::Tensor;

    use super::{RUN_ROWS, runs, weight_gradient};
    use crate::cube::product_choice::Product;
    use crate::cube::{from_cube, to_cube};
    use crate::tests::{assert_close, gpu, input, values};

    #[test]
    fn the_rows_split_into_equal_runs_of_at_most_a_run() {
        assert_eq!(runs(1), 1);
        assert_eq!(runs(RUN_ROWS), 1);
        assert_eq!(runs(8 * 256), 2);
        assert_eq!(runs(64 * 256), 16);
        assert_eq!(runs(3 * 1000), 3, "3,000 rows: three runs of 1,000");
        assert_eq!(runs(1030), 2, "1,030 rows: two runs of 515");
        assert_eq!(runs(1025), 1, "1,025 = 5²·41 rows: no divisor from 2 to 4, one run");
        assert_eq!(runs(1031), 1, "a prime count of rows stays one run");
    }

    /// Both products, over one run and several (equal runs, and a count of rows whose runs are
    /// not a power of two), match xᵀ·dy, with x read through a transpose as the layers save it.
    #[test]
    fn split_gradients_match_one_product() {
        let device = gpu();
        for rows in [40, 2 * RUN_ROWS, 3000] {
            let x: Tensor<2> = input([rows, 12], 1, &device);
            let dy: Tensor<2> = input([rows, 9], 2, &device);
            let expected = values(x.clone().transpose().matmul(dy.clone()));
            for product in [
                Product::Burn,
                #[cfg(feature = "autotune")]
                Product::Tuned,
                Product::Blocked,
            ] {
                let dw = weight_gradient(product, to_cube(x.clone()), to_cube(dy.clone()));
                assert_close(&values(from_cube::<2>(dw)), &expected, 1e-3, &format!("{product:?} over {rows} rows"));
            }
        }
    }
}
