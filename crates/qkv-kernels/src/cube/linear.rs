//! A linear layer on a cubecl device with our product (`super::product`), for the devices where
//! it was timed faster than Burn's (`super::product_choice`): the bias is added as the product is
//! written (one launch forward, where Burn's takes two), and the backward pass is two products
//! over the operands as they lie and one sum:
//!
//! ```text
//! forward   y  = x W + b      [rows, out]
//! backward  dx = dy Wᵀ        [rows, in]
//!           dW = xᵀ dy        [in, out]
//!           db = Σ_rows dy
//! ```

use burn::backend::ops::FloatTensorOps;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;

use super::product::product;

/// What the backward pass needs of the forward.
#[derive(Debug, Clone)]
pub(crate) struct Saved {
    /// [rows, in].
    pub x: CubeTensor,
    /// [in, out], in whatever strides it came.
    pub weight: CubeTensor,
}

/// `x [rows, in] · weight [in, out] + bias`, and what the backward pass needs.
pub(crate) fn forward(x: CubeTensor, weight: CubeTensor, bias: Option<CubeTensor>) -> (CubeTensor, Saved) {
    let y = product(x.clone(), weight.clone(), bias);
    (y, Saved { x, weight })
}

/// dx, dW, and db when the layer has a bias.
pub(crate) fn backward(saved: &Saved, dy: CubeTensor, with_bias: bool) -> (CubeTensor, CubeTensor, Option<CubeTensor>) {
    let Saved { x, weight } = saved;
    let dx = product(dy.clone(), Cube::float_transpose(weight.clone()), None);
    let dw = product(Cube::float_transpose(x.clone()), dy.clone(), None);
    let db = with_bias.then(|| {
        let outputs = dy.meta.shape().dims::<2>()[1];
        Cube::float_reshape(Cube::float_sum_dim(dy, 0), [outputs].into())
    });
    (dx, dw, db)
}
