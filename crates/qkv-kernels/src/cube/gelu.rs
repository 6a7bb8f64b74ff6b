//! GELU on a cubecl GPU: one launch forward that also keeps the derivative Φ(x) + x·φ(x) for the
//! backward pass (as the flex kernel does, `crate::gelu`), which is then one multiplication (in
//! place where it may).
//! Burn's composed exact GELU is about five launches forward and ten backward.

use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::{contiguous, empty, note, units};

/// y = x·Φ(x), and Φ(x) + x·φ(x) into `derivative` when asked for.
#[cube(launch)]
fn gelu_kernel(x: &Tensor<f32>, y: &mut Tensor<f32>, derivative: &mut Tensor<f32>, #[comptime] with_derivative: bool) {
    let i = ABSOLUTE_POS;
    if i >= x.len() {
        terminate!();
    }
    let value = x[i];
    let cdf = 0.5f32 * (1.0f32 + Erf::erf(value * 0.707_106_77f32));
    y[i] = value * cdf;
    if with_derivative {
        // φ(x) = exp(−x²/2)/√(2π).
        derivative[i] = cdf + value * 0.398_942_3f32 * (value * value * -0.5f32).exp();
    }
}

fn launch(x: CubeTensor, with_derivative: bool) -> (CubeTensor, Option<CubeTensor>) {
    let x = contiguous(x);
    let n = x.meta.shape().num_elements();
    let y = empty(&x, x.meta.shape().clone());
    // Unwritten without the derivative: a one-value buffer fills the slot (binding y twice
    // would alias two writable bindings, which WebGPU refuses).
    let derivative = empty(&x, if with_derivative { x.meta.shape().clone() } else { [1].into() });
    let client = x.client.clone();
    let (cube_count, cube_dim) = units(&client, n);
    note(&cube_count, cube_dim, 1, n, if with_derivative { 2 * n } else { n });
    gelu_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        x.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        derivative.clone().into_tensor_arg(),
        with_derivative,
    );
    (y, with_derivative.then_some(derivative))
}

pub(crate) fn forward(x: CubeTensor) -> CubeTensor {
    launch(x, false).0
}

/// GELU(x), and its derivative at x for the backward pass.
pub(crate) fn forward_with_derivative(x: CubeTensor) -> (CubeTensor, CubeTensor) {
    let (y, derivative) = launch(x, true);
    (y, derivative.expect("asked for"))
}

/// dx[i] = dy[i]·derivative[i], over dy itself where nothing else holds it (`in_place`).
#[cube(launch)]
fn gelu_backward_kernel(dy: &Tensor<f32>, derivative: &Tensor<f32>, dx: &mut Tensor<f32>, #[comptime] in_place: bool) {
    let i = ABSOLUTE_POS;
    if i >= derivative.len() {
        terminate!();
    }
    if in_place {
        dx[i] *= derivative[i];
    } else {
        dx[i] = dy[i] * derivative[i];
    }
}

/// dx = dy · GELU'(x): one launch of ours (so it says its shape), written over dy where it may.
pub(crate) fn backward(derivative: CubeTensor, dy: CubeTensor) -> CubeTensor {
    let dy = contiguous(dy);
    let n = dy.meta.shape().num_elements();
    let in_place = dy.can_mut();
    let dx = if in_place { dy.clone() } else { empty(&dy, dy.meta.shape().clone()) };
    let client = dy.client.clone();
    let (cube_count, cube_dim) = units(&client, n);
    note(&cube_count, cube_dim, 1, 2 * n, n);
    // In place, dy's slot takes the derivative again: dx alone binds dy's buffer (two bindings
    // of one buffer, one of them writable, would alias).
    let dy_slot = if in_place { derivative.clone() } else { dy };
    gelu_backward_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        dy_slot.into_tensor_arg(),
        derivative.into_tensor_arg(),
        dx.clone().into_tensor_arg(),
        in_place,
    );
    dx
}
