//! Dropout whose mask is a function of a seed and each element's position: a counter-based
//! generator, so the mask costs a few integer operations per element on every core, the backward
//! pass recomputes it instead of storing it, and a run's masks depend on its own seeds alone (not
//! on what else draws from Burn's process-wide generator, e.g. a run training beside it).

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::nn::DropoutConfig;
use burn::tensor::Tensor;

use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;

use crate::cube::{self, from_cube, from_cube_autodiff, to_cube, to_cube_autodiff};
use crate::flex::{Route, backward_step, backward_step_on, from_autodiff, from_flex, in_place, route, to_autodiff, to_flex};
use crate::math::vectorised;
use crate::parallel;

const MIN_PER_TASK: usize = 32 * 1024;

/// Zeroes each element of `x` with probability `prob` and scales the rest by 1/(1 − prob). The
/// mask is drawn from `seed` on flex and on cubecl GPUs (the same seed, the same mask, on either)
/// and from Burn's generator elsewhere. The caller decides whether dropout applies (training only).
///
/// `x` holds rows `first_row..` of a larger batch (0 for a whole one) along its first dimension:
/// an element's mask is the one it has in the whole batch, so a batch trained in shards drops
/// what it would drop in one piece.
pub fn dropout<const D: usize>(x: Tensor<D>, prob: f64, seed: u64, first_row: usize) -> Tensor<D> {
    let mask = Mask::of(&x, prob, seed, first_row);
    match route(&x.device(), x.dtype()) {
        Route::Composed => DropoutConfig::new(prob).init().forward(x),
        Route::Cube => from_cube(mask.apply_on_cube(to_cube(x))),
        Route::CubeAutodiff => {
            let (x, node) = to_cube_autodiff(x).into_parts();
            from_cube_autodiff(cube::record(CubeDropoutBackward, [node], || (mask.apply_on_cube(x), mask)))
        }
        Route::Flex => from_flex(mask.apply(to_flex(x))),
        Route::FlexAutodiff => {
            let (x, node) = to_autodiff(x).into_parts();
            from_autodiff(match DropoutBackward.prepare::<NoCheckpointing>([node]).compute_bound().stateful() {
                OpsKind::Tracked(prep) => prep.finish(mask, mask.apply(x)),
                OpsKind::UnTracked(prep) => prep.finish(mask.apply(x)),
            })
        }
    }
}

/// `residual + dropout(x, …)`, a residual branch's dropout and its skip: on a GPU one launch
/// forward where the two took two (the backward is dropout's: the skip passes its gradient on),
/// and at rate 0 the add as a kernel of ours. `x` and `residual` have one shape. The values are
/// those of the two ops apart.
pub fn dropout_added<const D: usize>(x: Tensor<D>, residual: Tensor<D>, prob: f64, seed: u64, first_row: usize) -> Tensor<D> {
    assert_eq!(x.shape(), residual.shape(), "a residual branch adds to a tensor of its own shape");
    match route(&x.device(), x.dtype()) {
        Route::Cube => {
            let mask = Mask::of(&x, prob, seed, first_row);
            from_cube(mask.apply_added_on_cube(to_cube(x), to_cube(residual)))
        }
        Route::CubeAutodiff => {
            let mask = Mask::of(&x, prob, seed, first_row);
            let (x, x_node) = to_cube_autodiff(x).into_parts();
            let (residual, residual_node) = to_cube_autodiff(residual).into_parts();
            let run = || (mask.apply_added_on_cube(x, residual), mask);
            from_cube_autodiff(cube::record(CubeDropoutAddedBackward, [x_node, residual_node], run))
        }
        Route::Composed | Route::Flex | Route::FlexAutodiff if prob == 0.0 => residual + x,
        Route::Composed | Route::Flex | Route::FlexAutodiff => residual + dropout(x, prob, seed, first_row),
    }
}

/// A dropout mask, as its seed and rate: element i is kept when a hash of (seed, first + i)
/// reaches the threshold.
#[derive(Debug, Clone, Copy)]
struct Mask {
    seed: u64,
    /// The position of element 0 in the whole batch.
    first: u32,
    /// Kept when the 32-bit hash ≥ this: prob·2³².
    threshold: u32,
    scale: f32,
}

impl Mask {
    /// The mask of `x`, rows `first_row..` of its batch.
    fn of<const D: usize>(x: &Tensor<D>, prob: f64, seed: u64, first_row: usize) -> Self {
        assert!((0.0..1.0).contains(&prob), "dropout probability {prob} is outside [0, 1)");
        let row_len = x.dims()[1..].iter().product::<usize>();
        Self::new(prob, seed, (first_row * row_len) as u32)
    }

    fn new(prob: f64, seed: u64, first: u32) -> Self {
        Self { seed, first, threshold: (prob * 4_294_967_296.0) as u32, scale: (1.0 / (1.0 - prob)) as f32 }
    }

    /// Rate 0: every element kept, unscaled.
    fn keeps_all(&self) -> bool {
        self.threshold == 0
    }

    /// `x ⊙ mask / (1 − prob)`: the forward pass, and the backward pass on the gradient; over
    /// `x` itself where nothing else holds it.
    fn apply(&self, x: FlexTensor) -> FlexTensor {
        in_place(x, |values| {
            parallel::for_spans(values, MIN_PER_TASK, 12, |start, span| mask_values(span, self.first.wrapping_add(start as u32), *self))
        })
    }

    /// [`Mask::apply`] on a cubecl GPU.
    fn apply_on_cube(&self, x: CubeTensor) -> CubeTensor {
        cube::dropout::apply(x, self.seed, self.first, self.threshold, self.scale)
    }

    /// `residual +` [`Mask::apply_on_cube`] in one launch.
    fn apply_added_on_cube(&self, x: CubeTensor, residual: CubeTensor) -> CubeTensor {
        cube::dropout::apply_added(x, residual, self.seed, self.first, self.threshold, self.scale)
    }
}

/// A well-mixed 32-bit hash of an element's position under a seed (murmur3's finaliser, twice
/// keyed). Positions past 2³² would repeat masks; no tensor here comes near.
#[inline(always)]
fn hash(seed: u64, position: u32) -> u32 {
    let mut h = position.wrapping_mul(0x9E37_79B9) ^ seed as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^= h >> 16;
    h ^= (seed >> 32) as u32;
    h = h.wrapping_mul(0x27D4_EB2D);
    h ^ (h >> 15)
}

vectorised! {
    fn mask_values(x: &mut [f32], first: u32, mask: Mask) {
        for (i, x) in x.iter_mut().enumerate() {
            let keep = hash(mask.seed, first.wrapping_add(i as u32)) >= mask.threshold;
            *x = if keep { *x * mask.scale } else { 0.0 };
        }
    }
}

#[derive(Debug)]
struct DropoutBackward;

impl Backward<Flex, 1> for DropoutBackward {
    type State = Mask;

    fn backward(self, ops: Ops<Mask, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step(&ops, grads, |mask, grad| [Some(mask.apply(grad))]);
    }
}

#[derive(Debug)]
struct CubeDropoutBackward;

impl Backward<Cube, 1> for CubeDropoutBackward {
    type State = Mask;

    fn backward(self, ops: Ops<Mask, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step_on::<Cube, _, 1, _>(&ops, grads, |mask, grad| [Some(mask.apply_on_cube(grad))]);
    }
}

#[derive(Debug)]
struct CubeDropoutAddedBackward;

/// x's gradient is dropout's backward; the residual's is the gradient itself.
impl Backward<Cube, 2> for CubeDropoutAddedBackward {
    type State = Mask;

    fn backward(self, ops: Ops<Mask, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step_on::<Cube, _, 2, _>(&ops, grads, |mask, grad| {
            // At rate 0 the branch's gradient is the skip's: no launch.
            let branch = if mask.keeps_all() { grad.clone() } else { mask.apply_on_cube(grad.clone()) };
            [Some(branch), Some(grad)]
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{input, values};
    use burn::tensor::Device;

    #[test]
    fn the_mask_keeps_the_expected_share_scales_it_and_is_its_own_gradient() {
        let device = Device::flex().autodiff();
        let x = (input([200, 500], 1, &device).abs() + 0.5).detach().require_grad();
        let y = dropout(x.clone(), 0.2, 42, 0);
        let grads = y.clone().sum().backward();
        let (x_values, y_values, dx) = (values(x.clone()), values(y), values(x.grad(&grads).unwrap()));
        let kept = y_values.iter().filter(|&&v| v != 0.0).count() as f64 / y_values.len() as f64;
        assert!((kept - 0.8).abs() < 0.005, "kept {kept}");
        for ((x, y), d) in x_values.iter().zip(&y_values).zip(&dx) {
            if *y == 0.0 {
                assert_eq!(*d, 0.0);
            } else {
                assert!((y - x * 1.25).abs() < 1e-6 && (d - 1.25).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn a_seed_is_one_mask_and_another_seed_another() {
        let device = Device::flex().autodiff();
        let x = input([100, 100], 2, &device).abs() + 0.5;
        let mask = |seed| values(dropout(x.clone(), 0.5, seed, 0)).iter().map(|&v| v != 0.0).collect::<Vec<_>>();
        assert_eq!(mask(7), mask(7));
        let same = mask(7).iter().zip(mask(8)).filter(|(a, b)| **a == *b).count();
        assert!((4_500..5_500).contains(&same), "seeds 7 and 8 agree on {same} of 10000 positions");
    }

    #[test]
    fn wgpu_drops_what_flex_drops_forward_and_backward() {
        let on = |device: Device| {
            let x = (input([30, 700], 5, &device).abs() + 0.5).detach().require_grad();
            let y = dropout(x.clone(), 0.3, 0xDEAD_BEEF_0123_4567, 11);
            let grads = (y.clone() * input([30, 700], 6, &device)).sum().backward();
            (values(y), values(x.grad(&grads).unwrap()))
        };
        let (flex, gpu) = (on(Device::flex().autodiff()), on(crate::tests::gpu().autodiff()));
        let zeros = |v: &[f32]| v.iter().map(|&x| x == 0.0).collect::<Vec<_>>();
        assert_eq!(zeros(&gpu.0), zeros(&flex.0), "the same mask");
        crate::tests::assert_close(&gpu.0, &flex.0, 1e-6, "dropout on wgpu");
        crate::tests::assert_close(&gpu.1, &flex.1, 1e-6, "dropout's backward on wgpu");
    }

    /// A branch's dropout and its skip as one op give what the two give apart, on flex and on
    /// wgpu, forward and backward.
    #[test]
    fn dropout_added_is_the_residual_plus_dropout() {
        for ((device, _), rate) in crate::tests::flex_and_wgpu((), ()).into_iter().flat_map(|d| [(d.clone(), 0.3), (d, 0.0)]) {
            let run = |together: bool| {
                let x = (input([30, 70], 5, &device).abs() + 0.5).detach().require_grad();
                let residual = input([30, 70], 7, &device).detach().require_grad();
                let y = if together {
                    dropout_added(x.clone(), residual.clone(), rate, 99, 4)
                } else {
                    residual.clone() + dropout(x.clone(), rate, 99, 4)
                };
                let grads = (y.clone() * input([30, 70], 6, &device)).sum().backward();
                [values(y), values(x.grad(&grads).unwrap()), values(residual.grad(&grads).unwrap())]
            };
            let (together, apart) = (run(true), run(false));
            for (name, (a, b)) in ["y", "dx", "d residual"].iter().zip(together.iter().zip(&apart)) {
                assert_eq!(a, b, "{name} on {device:?} at rate {rate}");
            }
        }
    }

    #[test]
    fn a_batch_in_shards_drops_what_it_drops_whole() {
        let device = Device::flex();
        let x = input([6, 5, 4], 3, &device).abs() + 0.5;
        let whole = values(dropout(x.clone(), 0.5, 9, 0));
        let top = values(dropout(x.clone().narrow(0, 0, 2), 0.5, 9, 0));
        let bottom = values(dropout(x.narrow(0, 2, 4), 0.5, 9, 2));
        assert_eq!([top, bottom].concat(), whole);
    }
}
