//! A linear layer, `y = x W + b`, as one op whose products run as gemm calls over row blocks:
//!
//! ```text
//! forward   y  = x W + b         [rows, out]
//! backward  dx = dy Wᵀ           [rows, in]
//!           dW = xᵀ dy           [in, out], split over its rows
//!           db = Σ_rows dy
//! ```
//!
//! The weight is read through its strides (the tied LM head passes the embedding transposed),
//! and outputs are written straight into new buffers: Burn's flex matmul zero-fills an output,
//! then copies it once more to align it (`FlexTensor::empty`), which cost a sixth of a small
//! model's step.

use burn::backend::Flex;
use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;
use burn_cubecl::CubeBackend as Cube;

use crate::cube::product_choice::Product;
use crate::cube::{self, CubeAutodiffTensor, from_cube, from_cube_autodiff, to_cube, to_cube_autodiff};
use crate::flex::{
    AutodiffTensor, Route, backward_step, backward_step_on, from_autodiff, from_flex, route, tensor, to_autodiff, to_flex, values,
};
use crate::math::matmul_parallel;

/// `x W + b` over the last dimension of `x`: [..., in] · [in, out] → [..., out].
pub fn linear<const D: usize>(x: Tensor<D>, weight: Tensor<2>, bias: Option<Tensor<1>>) -> Tensor<D> {
    linear_with(x, weight, bias, None)
}

/// [`linear`] with `product` on a cubecl device (`None`: the one chosen for the device, looked up
/// only on that route, so that flex's layers pay nothing for it).
fn linear_with<const D: usize>(x: Tensor<D>, weight: Tensor<2>, bias: Option<Tensor<1>>, product: Option<Product>) -> Tensor<D> {
    match route(&x.device(), x.dtype()) {
        Route::Composed => burn::tensor::module::linear(x, weight, bias),
        // Burn's linear multiplies a [batch, time, in] input batch row by batch row, so the
        // weight's gradient is a [batch, in, out] product summed over the batch (a reduce launch
        // per layer, and that much memory); over the rows flattened it is one product: Burn's,
        // or ours where it was timed faster on the device (`cube::product_choice`), each way in
        // an op of ours, so that every product's launch shape is noted (`cube::burn_product`).
        r @ (Route::Cube | Route::CubeAutodiff) => {
            let mut shape = x.dims();
            let d_in = shape[D - 1];
            let rows = shape[..D - 1].iter().product::<usize>();
            shape[D - 1] = weight.dims()[1];
            let x = x.reshape([rows, d_in]);
            let product = product.unwrap_or_else(|| cube::product_choice::product_for(&x.device()));
            let y: Tensor<2> = match r {
                Route::Cube => from_cube(cube::linear::forward(to_cube(x), to_cube(weight), bias.map(to_cube), product).0),
                _ => from_cube_autodiff(cube_forward_recorded(x, weight, bias, product)),
            };
            y.reshape(shape)
        }
        Route::Flex => {
            let bias = bias.map(to_flex);
            from_flex(forward(&to_flex(x), &to_flex(weight), bias.as_ref()))
        }
        Route::FlexAutodiff => from_autodiff(forward_recorded(x, weight, bias)),
    }
}

/// A 2-d matrix read through its strides.
#[derive(Clone, Copy)]
struct Matrix<'a> {
    data: &'a [f32],
    offset: usize,
    rows: usize,
    cols: usize,
    row_stride: isize,
    col_stride: isize,
}

impl<'a> Matrix<'a> {
    /// `None` for a layout with negative strides.
    fn of(tensor: &'a FlexTensor) -> Option<Self> {
        let layout = tensor.layout();
        let [rows, cols] = layout.shape().dims();
        let [row_stride, col_stride]: [isize; 2] = layout.strides().try_into().ok()?;
        (row_stride >= 0 && col_stride >= 0).then(|| Self {
            data: tensor.storage::<f32>(),
            offset: layout.start_offset(),
            rows,
            cols,
            row_stride,
            col_stride,
        })
    }

    fn at(&self, row: usize, col: usize) -> *const f32 {
        // SAFETY: within the storage, as the layout says.
        unsafe { self.data.as_ptr().add(self.offset).offset(row as isize * self.row_stride + col as isize * self.col_stride) }
    }

    /// Element (i, j) of the transpose is element (j, i).
    fn transposed(self) -> Self {
        Self { rows: self.cols, cols: self.rows, row_stride: self.col_stride, col_stride: self.row_stride, ..self }
    }
}

/// `f` with the weight as a [`Matrix`], copied first if its strides cannot be read.
fn with_matrix<R>(weight: &FlexTensor, f: impl FnOnce(Matrix) -> R) -> R {
    match Matrix::of(weight) {
        Some(m) => f(m),
        None => {
            let copy = weight.to_contiguous();
            f(Matrix::of(&copy).expect("a contiguous matrix has positive strides"))
        }
    }
}

/// `a [m, k] · b [k, n]` into a new row-major [m, n] buffer (`a` row-major).
fn product(a: &[f32], m: usize, k: usize, b: Matrix) -> Vec<f32> {
    let n = b.cols;
    let mut out: Vec<f32> = Vec::with_capacity(m * n);
    // SAFETY: gemm writes every value of the output without reading it (not accumulating), so
    // the buffer may start uninitialised; the operands lie as their strides say.
    unsafe {
        matmul_parallel(
            [m, n, k],
            (out.as_mut_ptr(), n as isize, 1),
            false,
            (a.as_ptr(), k as isize, 1),
            (b.at(0, 0), b.row_stride, b.col_stride),
            1.0,
        );
        out.set_len(m * n);
    }
    out
}

fn forward(x: &FlexTensor, weight: &FlexTensor, bias: Option<&FlexTensor>) -> FlexTensor {
    let mut shape = x.shape();
    let x = values(x);
    let y = with_matrix(weight, |w| {
        let rows = x.len() / w.rows;
        let mut y = product(&x, rows, w.rows, w);
        if let Some(bias) = bias {
            let bias = values(bias);
            for row in y.chunks_exact_mut(w.cols) {
                row.iter_mut().zip(bias.iter()).for_each(|(y, b)| *y += b);
            }
        }
        *shape.last_mut().expect("x has a last dimension") = w.cols;
        y
    });
    tensor(y, shape)
}

/// dx, dW and db (when there is a bias) from dy.
fn backward(x: &FlexTensor, weight: &FlexTensor, grad: &FlexTensor, with_bias: bool) -> (FlexTensor, FlexTensor, Option<FlexTensor>) {
    let x_shape = x.shape();
    let x = values(x);
    let dy = values(grad);
    with_matrix(weight, |w| {
        let (inputs, outputs) = (w.rows, w.cols);
        let rows = x.len() / inputs;
        let dx = product(&dy, rows, outputs, w.transposed());
        // dW = xᵀ dy: row i of dW is column i of x against dy, so dW splits over x's columns.
        let x_t = Matrix { data: &x[..], offset: 0, rows, cols: inputs, row_stride: inputs as isize, col_stride: 1 }.transposed();
        let dy_m = Matrix { data: &dy[..], offset: 0, rows, cols: outputs, row_stride: outputs as isize, col_stride: 1 };
        let mut dw: Vec<f32> = Vec::with_capacity(inputs * outputs);
        // SAFETY: as in `product`.
        unsafe {
            matmul_parallel(
                [inputs, outputs, rows],
                (dw.as_mut_ptr(), outputs as isize, 1),
                false,
                (x_t.at(0, 0), x_t.row_stride, x_t.col_stride),
                (dy_m.at(0, 0), dy_m.row_stride, dy_m.col_stride),
                1.0,
            );
            dw.set_len(inputs * outputs);
        }
        let db = with_bias.then(|| {
            let mut db = vec![0f32; outputs];
            for row in dy.chunks_exact(outputs) {
                db.iter_mut().zip(row).for_each(|(acc, v)| *acc += v);
            }
            tensor(db, [outputs])
        });
        (tensor(dx, x_shape), tensor(dw, [inputs, outputs]), db)
    })
}

#[derive(Debug, Clone)]
struct Saved {
    x: FlexTensor,
    weight: FlexTensor,
}

#[derive(Debug)]
struct LinearBackward;

/// N is 2 (x, W) or 3 (and b).
impl<const N: usize> Backward<Flex, N> for LinearBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step(&ops, grads, |saved, grad| {
            let (dx, dw, db) = backward(&saved.x, &saved.weight, &grad, N == 3);
            [Some(dx), Some(dw), db]
        });
    }
}

fn forward_recorded<const D: usize>(x: Tensor<D>, weight: Tensor<2>, bias: Option<Tensor<1>>) -> AutodiffTensor {
    let (x, x_node) = to_autodiff(x).into_parts();
    let (weight, weight_node) = to_autodiff(weight).into_parts();
    let saved = || Saved { x: x.clone(), weight: weight.clone() };
    match bias {
        None => match LinearBackward.prepare::<NoCheckpointing>([x_node, weight_node]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish(saved(), forward(&x, &weight, None)),
            OpsKind::UnTracked(prep) => prep.finish(forward(&x, &weight, None)),
        },
        Some(bias) => {
            let (bias, bias_node) = to_autodiff(bias).into_parts();
            match LinearBackward.prepare::<NoCheckpointing>([x_node, weight_node, bias_node]).compute_bound().stateful() {
                OpsKind::Tracked(prep) => prep.finish(saved(), forward(&x, &weight, Some(&bias))),
                OpsKind::UnTracked(prep) => prep.finish(forward(&x, &weight, Some(&bias))),
            }
        }
    }
}

#[derive(Debug)]
struct CubeLinearBackward;

/// N is 2 (x, W) or 3 (and b).
impl<const N: usize> Backward<Cube, N> for CubeLinearBackward {
    type State = cube::linear::Saved;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        // An input that needs no gradient (an image's patches) costs no product.
        let with_dx = ops.parents[0].is_some();
        backward_step_on::<Cube, _, N, _>(&ops, grads, |saved, grad| {
            let (dx, dw, db) = cube::linear::backward(saved, grad, with_dx, N == 3);
            [dx, Some(dw), db]
        });
    }
}

fn cube_forward_recorded(x: Tensor<2>, weight: Tensor<2>, bias: Option<Tensor<1>>, product: Product) -> CubeAutodiffTensor {
    let (x, x_node) = to_cube_autodiff(x).into_parts();
    let (weight, weight_node) = to_cube_autodiff(weight).into_parts();
    let run = |bias| cube::linear::forward(x, weight, bias, product);
    match bias {
        None => cube::record(CubeLinearBackward, [x_node, weight_node], || run(None)),
        Some(bias) => {
            let (bias, bias_node) = to_cube_autodiff(bias).into_parts();
            cube::record(CubeLinearBackward, [x_node, weight_node, bias_node], || run(Some(bias)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_close, input, values};
    use burn::tensor::Device;

    #[test]
    fn fused_linear_matches_burns_forward_and_backward() {
        // Bias or not, and a transposed weight (the tied LM head); on flex, and on wgpu (lavapipe)
        // with either product.
        let mut devices = vec![(Device::flex().autodiff(), Product::Burn)];
        if let Some(wgpu) = crate::tests::wgpu().map(|device| device.autodiff()) {
            devices.extend([(wgpu.clone(), Product::Burn), (wgpu, Product::Blocked)]);
        }
        for ((device, product), (with_bias, transposed)) in
            devices.iter().flat_map(|d| [(false, false), (true, false), (false, true)].map(|c| (d, c)))
        {
            let run = |fused: bool| {
                let x = input([3, 70, 9], 1, device);
                let w = if transposed { input([5, 9], 2, device) } else { input([9, 5], 2, device) };
                let b = input([5], 3, device);
                let weight = if transposed { w.clone().transpose() } else { w.clone() };
                let bias = with_bias.then(|| b.clone());
                let y = if fused {
                    linear_with(x.clone(), weight, bias, Some(*product))
                } else {
                    burn::tensor::module::linear(x.clone(), weight, bias)
                };
                let grads = (y.clone() * input([3, 70, 5], 4, device)).sum().backward();
                (values(y), [x.grad(&grads).map(values), w.grad(&grads).map(values), b.grad(&grads).map(values)])
            };
            let (fused, fused_grads) = run(true);
            let (composed, composed_grads) = run(false);
            let case = format!("{device:?}, {product}: bias {with_bias}, transposed {transposed}");
            assert_close(&fused, &composed, 1e-5, &case);
            for (name, (a, b)) in ["x", "weight", "bias"].iter().zip(fused_grads.into_iter().zip(composed_grads)) {
                match (a, b) {
                    (Some(a), Some(b)) => assert_close(&a, &b, 1e-5, &format!("{case}: d{name}")),
                    (None, None) => assert!(!with_bias && *name == "bias"),
                    _ => panic!("{case}: d{name} exists on one side only"),
                }
            }
        }
    }
}
