//! GELU with the exact (erf) form, `x·Φ(x)`, as PyTorch's `nn.GELU()` and Burn's `gelu`, with
//! an erf that vectorises. Backward: `dx = dy · (Φ(x) + x·φ(x))`.
//!
//! Under autodiff the forward pass keeps that derivative `Φ(x) + x·φ(x)` instead of x: it has Φ
//! and φ at hand already (erf needs exp(-x²/2), which is φ up to a constant), so the backward
//! pass is one multiplication instead of a second erf and exp per element, in the same memory.
//! Both passes write over their input where nothing else holds it ([`in_place`]).

use burn::backend::Flex;
use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;

use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;

use crate::cube::{self, from_cube, from_cube_autodiff, to_cube, to_cube_autodiff};
use crate::flex::{
    Route, backward_step, backward_step_on, from_autodiff, from_flex, in_place, route, tensor, to_autodiff, to_flex, values,
};
use crate::math::{erf_with, exp, vectorised};
use crate::parallel::{self, SharedMut};

const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// 1/√(2π), the normal density's constant.
const FRAC_1_SQRT_2PI: f32 = 0.398_942_3;
/// Elements per task at least.
const MIN_PER_TASK: usize = 16 * 1024;

/// GELU, `x·Φ(x)` with Φ the standard normal CDF.
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    match route(&x.device(), x.dtype()) {
        Route::Composed => burn::tensor::activation::gelu(x),
        Route::Cube => from_cube(cube::gelu::forward(to_cube(x))),
        Route::CubeAutodiff => {
            let (x, node) = to_cube_autodiff(x).into_parts();
            from_cube_autodiff(cube::record(CubeGeluBackward, [node], || cube::gelu::forward_with_derivative(x)))
        }
        Route::Flex => from_flex(forward(to_flex(x))),
        Route::FlexAutodiff => {
            let (x, node) = to_autodiff(x).into_parts();
            from_autodiff(match GeluBackward.prepare::<NoCheckpointing>([node]).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let (y, derivative) = forward_with_derivative(x);
                    prep.finish(derivative, y)
                }
                OpsKind::UnTracked(prep) => prep.finish(forward(x)),
            })
        }
    }
}

vectorised! {
    fn gelu_values(x: &mut [f32]) {
        for x in x.iter_mut() {
            let z = *x * FRAC_1_SQRT_2;
            *x = 0.5 * *x * (1.0 + erf_with(z, exp(-z * z)));
        }
    }
}

vectorised! {
    /// GELU over `x` in place, its derivative at the old values into `derivative`.
    fn gelu_values_and_derivative(x: &mut [f32], derivative: &mut [f32]) {
        for (x, derivative) in x.iter_mut().zip(derivative.iter_mut()) {
            let z = *x * FRAC_1_SQRT_2;
            let density = exp(-z * z);
            let cdf = 0.5 * (1.0 + erf_with(z, density));
            *derivative = cdf + *x * FRAC_1_SQRT_2PI * density;
            *x *= cdf;
        }
    }
}

vectorised! {
    fn multiply_by(values: &mut [f32], by: &[f32]) {
        for (value, &by) in values.iter_mut().zip(by) {
            *value *= by;
        }
    }
}

fn forward(x: FlexTensor) -> FlexTensor {
    in_place(x, |x| parallel::for_spans(x, MIN_PER_TASK, 40, |_, span| gelu_values(span)))
}

/// GELU(x), and its derivative at x for the backward pass.
fn forward_with_derivative(x: FlexTensor) -> (FlexTensor, FlexTensor) {
    let shape = x.shape();
    let mut derivative = vec![0f32; shape.num_elements()];
    let derivative_out = SharedMut::new(&mut derivative);
    let y = in_place(x, |x| {
        parallel::for_spans(x, MIN_PER_TASK, 44, |start, span| {
            // SAFETY: the derivative's span matches this task's span of x, which no other task has.
            let derivative = unsafe { derivative_out.slice(start, span.len()) };
            gelu_values_and_derivative(span, derivative)
        })
    });
    (y, tensor(derivative, shape))
}

fn backward(derivative: &FlexTensor, grad: FlexTensor) -> FlexTensor {
    let derivative = values(derivative);
    in_place(grad, |dy| parallel::for_spans(dy, MIN_PER_TASK, 1, |start, span| multiply_by(span, &derivative[start..start + span.len()])))
}

#[derive(Debug)]
struct GeluBackward;

impl Backward<Flex, 1> for GeluBackward {
    /// GELU's derivative at the input.
    type State = FlexTensor;

    fn backward(self, ops: Ops<FlexTensor, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step(&ops, grads, |derivative, grad| [Some(backward(derivative, grad))]);
    }
}

#[derive(Debug)]
struct CubeGeluBackward;

impl Backward<Cube, 1> for CubeGeluBackward {
    /// GELU'(x).
    type State = CubeTensor;

    fn backward(self, ops: Ops<CubeTensor, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step_on::<Cube, _, 1, _>(&ops, grads, |derivative, grad| [Some(cube::gelu::backward(derivative.clone(), grad))]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_close, flex_and_wgpu, input, values};
    use burn::tensor::Device;

    /// flex's kernel and CubeCL's on wgpu (lavapipe) against Burn's composed ops on flex. (Not
    /// against Burn's on wgpu: its cubecl backend differentiates the tanh approximation of GELU
    /// (Burn's default `gelu_backward`) while its forward is the exact erf form, 6e-4 apart.)
    #[test]
    fn fused_gelu_matches_burns_forward_and_backward() {
        for (device, tolerance) in flex_and_wgpu(1e-6, 1e-5) {
            fused_gelu_matches_burns_ops_on(&device, tolerance);
        }
    }

    fn fused_gelu_matches_burns_ops_on(device: &Device, tolerance: f32) {
        let reference = Device::flex().autodiff();
        let run = |fused: bool| {
            let device = if fused { device } else { &reference };
            // Inputs across the range where GELU bends, and far out where it is flat or linear.
            let x = input([3, 700], 1, device) * 4.0;
            let x = x.clone().detach().require_grad();
            let y = if fused { gelu(x.clone()) } else { burn::tensor::activation::gelu(x.clone()) };
            let grads = (y.clone() * input([3, 700], 2, device)).sum().backward();
            (values(y), values(x.grad(&grads).unwrap()))
        };
        let (fused, d_fused) = run(true);
        let (composed, d_composed) = run(false);
        assert_close(&fused, &composed, tolerance, &format!("gelu on {device:?}"));
        assert_close(&d_fused, &d_composed, tolerance, &format!("gelu backward on {device:?}"));
        let inner = device.clone().without_autodiff();
        let x = input([3, 700], 1, &inner) * 4.0;
        let plain = values(burn::tensor::activation::gelu(x.clone()));
        assert_close(&values(gelu(x)), &plain, tolerance, &format!("gelu without autodiff on {inner:?}"));
    }

    /// GELU writes over its input only where nothing else holds it: a tensor still in use, and
    /// the rest of a buffer a view lies in, keep their values (forward, and backward where the
    /// gradient is shared).
    #[test]
    fn gelu_leaves_tensors_held_elsewhere_as_they_were() {
        let x = input([4, 3000], 1, &Device::flex());
        let before = values(x.clone());
        let y = values(gelu(x.clone()));
        assert_eq!(values(x.clone()), before, "an input still held");
        let rows = values(gelu(x.clone().slice([1..3, 0..3000])));
        assert_eq!(values(x.clone()), before, "the buffer around a view");
        assert_eq!(rows, y[3000..9000], "the view's values");

        // Burn's addition hands one gradient to both of its inputs: GELU's backward must not
        // write over the one the residual path also reads.
        let device = Device::flex().autodiff();
        let grad_of_x = |fused: bool| {
            let x = input([4, 3000], 1, &device);
            let activated = if fused { gelu(x.clone()) } else { burn::tensor::activation::gelu(x.clone()) };
            let grads = ((activated + x.clone()) * input([4, 3000], 2, &device).detach()).sum().backward();
            values(x.grad(&grads).unwrap())
        };
        assert_close(&grad_of_x(true), &grad_of_x(false), 1e-6, "a gradient shared with the residual path");
    }
}
