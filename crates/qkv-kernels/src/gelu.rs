//! GELU with the exact (erf) form, `x·Φ(x)`, as PyTorch's `nn.GELU()` and Burn's `gelu`, with
//! an erf that vectorises. Backward: `dx = dy · (Φ(x) + x·φ(x))`.

use burn::backend::Flex;
use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;

use crate::flex::{Route, backward_step, from_autodiff, from_flex, route, tensor, to_autodiff, to_flex, values};
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
        Route::Flex => from_flex(forward(&to_flex(x))),
        Route::FlexAutodiff => {
            let (x, node) = to_autodiff(x).into_parts();
            from_autodiff(match GeluBackward.prepare::<NoCheckpointing>([node]).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let y = forward(&x);
                    prep.finish(x, y)
                }
                OpsKind::UnTracked(prep) => prep.finish(forward(&x)),
            })
        }
    }
}

vectorised! {
    fn gelu_values(x: &[f32], y: &mut [f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            let z = x * FRAC_1_SQRT_2;
            *y = 0.5 * x * (1.0 + erf_with(z, exp(-z * z)));
        }
    }
}

vectorised! {
    fn gelu_gradient(x: &[f32], dy: &[f32], dx: &mut [f32]) {
        for ((dx, &x), &dy) in dx.iter_mut().zip(x).zip(dy) {
            let z = x * FRAC_1_SQRT_2;
            let density = exp(-z * z);
            let cdf = 0.5 * (1.0 + erf_with(z, density));
            *dx = dy * (cdf + x * FRAC_1_SQRT_2PI * density);
        }
    }
}

/// Applies `kernel` to matching spans of `inputs` and of a new output, over the cores.
fn elementwise(shape: burn::tensor::Shape, inputs: &[&[f32]], kernel: impl Fn(&[&[f32]], &mut [f32]) + Sync) -> FlexTensor {
    let len = inputs[0].len();
    let mut out = vec![0f32; len];
    let out_ptr = SharedMut::new(&mut out);
    let chunks = parallel::chunks(len, MIN_PER_TASK);
    parallel::map(chunks.len(), len * 40, |c| {
        let span = chunks[c].clone();
        // SAFETY: span c of the output belongs to this task.
        let out = unsafe { out_ptr.slice(span.start, span.len()) };
        let parts: Vec<&[f32]> = inputs.iter().map(|input| &input[span.clone()]).collect();
        kernel(&parts, out);
    });
    tensor(out, shape)
}

fn forward(x: &FlexTensor) -> FlexTensor {
    let values = values(x);
    elementwise(x.shape(), &[&values], |inputs, y| gelu_values(inputs[0], y))
}

fn backward(x: &FlexTensor, grad: &FlexTensor) -> FlexTensor {
    let (x_values, dy) = (values(x), values(grad));
    elementwise(x.shape(), &[&x_values, &dy], |inputs, dx| gelu_gradient(inputs[0], inputs[1], dx))
}

#[derive(Debug)]
struct GeluBackward;

impl Backward<Flex, 1> for GeluBackward {
    /// The input.
    type State = FlexTensor;

    fn backward(self, ops: Ops<FlexTensor, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step(ops, grads, |x, grad| [Some(backward(x, grad))]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_close, input, values};
    use burn::tensor::Device;

    #[test]
    fn fused_gelu_matches_burns_forward_and_backward() {
        let device = Device::flex().autodiff();
        let run = |fused: bool| {
            // Inputs across the range where GELU bends, and far out where it is flat or linear.
            let x = input([3, 700], 1, &device) * 4.0;
            let x = x.clone().detach().require_grad();
            let y = if fused { gelu(x.clone()) } else { burn::tensor::activation::gelu(x.clone()) };
            let grads = (y.clone() * input([3, 700], 2, &device)).sum().backward();
            (values(y), values(x.grad(&grads).unwrap()))
        };
        let (fused, d_fused) = run(true);
        let (composed, d_composed) = run(false);
        assert_close(&fused, &composed, 1e-6, "gelu");
        assert_close(&d_fused, &d_composed, 1e-6, "gelu backward");
    }
}
