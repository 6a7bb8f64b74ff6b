//! A linear layer on a cubecl device as one op with its own backward, with either product: ours
//! (`super::product`, for the devices where it was timed faster than Burn's,
//! `super::product_choice`), which adds the bias as the product is written (one launch forward,
//! where Burn's takes two), or Burn's (`super::burn_product`, its launches' shapes noted). The
//! backward pass is two products over the operands as they lie and one sum:
//!
//! ```text
//! forward   y  = x W + b      [rows, out]
//! backward  dx = dy Wᵀ        [rows, in]   (not where x needs no gradient: an image's patches)
//!           dW = xᵀ dy        [in, out]    (in runs of the rows where they are many: super::weight_gradient)
//!           db = Σ_rows dy
//! ```

use burn::backend::ops::FloatTensorOps;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;

use super::product_choice::Product;

/// What the backward pass needs of the forward.
#[derive(Debug, Clone)]
pub(crate) struct Saved {
    /// [rows, in].
    pub x: CubeTensor,
    /// [in, out], in whatever strides it came.
    pub weight: CubeTensor,
    pub product: Product,
}

/// `a · b (+ bias)` with `product`.
fn multiply(product: Product, a: CubeTensor, b: CubeTensor, bias: Option<CubeTensor>) -> CubeTensor {
    let Some(kernel) = product.burn_kernel() else { return super::product::product(a, b, bias) };
    let y = super::burn_product::product(a, b, kernel);
    match bias {
        Some(bias) => {
            let outputs = bias.meta.shape()[0];
            Cube::float_add(y, Cube::float_reshape(bias, [1, outputs].into()))
        }
        None => y,
    }
}

/// `x [rows, in] · weight [in, out] + bias` with `product`, and what the backward pass needs.
pub(crate) fn forward(x: CubeTensor, weight: CubeTensor, bias: Option<CubeTensor>, product: Product) -> (CubeTensor, Saved) {
    let y = multiply(product, x.clone(), weight.clone(), bias);
    (y, Saved { x, weight, product })
}

/// dx (where `with_dx`), dW, and db where the layer has a bias.
pub(crate) fn backward(
    saved: &Saved,
    dy: CubeTensor,
    with_dx: bool,
    with_bias: bool,
) -> (Option<CubeTensor>, CubeTensor, Option<CubeTensor>) {
    let Saved { x, weight, product } = saved;
    let dx = with_dx.then(|| multiply(*product, dy.clone(), Cube::float_transpose(weight.clone()), None));
    let dw = super::weight_gradient::weight_gradient(*product, x.clone(), dy.clone());
    let db = with_bias.then(|| {
        let outputs = dy.meta.shape().dims::<2>()[1];
        Cube::float_reshape(Cube::float_sum_dim(dy, 0), [outputs].into())
    });
    (dx, dw, db)
}
