//! Layer normalisation over the last dimension as one op:
//! `y = (x − μ) · r · γ + β` with r = 1/√(σ² + ε) per row.
//!
//! The backward pass, with x̂ = (x − μ)·r and g = dy·γ, per row of C values:
//!
//! ```text
//! dx = r · (g − mean(g) − x̂ · mean(g·x̂))    dγ = Σ_rows dy·x̂    dβ = Σ_rows dy
//! ```
//!
//! Rows are split over the cores; each chunk of rows sums its own dγ, dβ, added up at the end.

use burn::backend::Flex;
use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;

use burn_cubecl::CubeBackend as Cube;

use crate::cube::{self, CubeAutodiffTensor, from_cube, from_cube_autodiff, to_cube, to_cube_autodiff};
use crate::flex::{
    AutodiffTensor, Route, backward_step, backward_step_on, from_autodiff, from_flex, route, tensor, to_autodiff, to_flex, values,
};
use crate::math::{self, vectorised};
use crate::parallel::{self, SharedMut};

/// Rows per task at least: a row is a few hundred operations.
const MIN_ROWS_PER_TASK: usize = 16;

/// `(x − mean) / √(var + ε) · gamma + beta` over the last dimension of `x` (biased variance, as
/// Burn's and PyTorch's layer norms).
pub fn layer_norm<const D: usize>(x: Tensor<D>, gamma: Tensor<1>, beta: Option<Tensor<1>>, epsilon: f64) -> Tensor<D> {
    layer_norm_of(x, gamma, beta, epsilon, Stream::Alone)
}

/// [`layer_norm`] at the head of a pre-norm residual branch, `x + f(layer_norm(x))`: the caller
/// must add `x` to what the branch makes of this op's output. On a GPU its backward then adds
/// x's gradient into the one that add left for x, in the same launch, where Burn's autodiff
/// would add the two in a launch of its own. (The add always steps back first: it depends on
/// this op's output, so it lies deeper in the graph.) The values are [`layer_norm`]'s.
pub fn pre_norm<const D: usize>(x: Tensor<D>, gamma: Tensor<1>, beta: Option<Tensor<1>>, epsilon: f64) -> Tensor<D> {
    layer_norm_of(x, gamma, beta, epsilon, Stream::AddedBack)
}

/// Whether a layer norm's input is also added back to its branch's output ([`pre_norm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Alone,
    AddedBack,
}

fn layer_norm_of<const D: usize>(x: Tensor<D>, gamma: Tensor<1>, beta: Option<Tensor<1>>, epsilon: f64, stream: Stream) -> Tensor<D> {
    let shape = x.shape();
    let [channels] = gamma.dims();
    assert_eq!(shape[D - 1], channels, "layer norm over {channels} channels of a {shape:?} tensor");
    match route(&x.device(), x.dtype()) {
        Route::Composed => burn::tensor::module::layer_norm(x, gamma, beta, epsilon),
        Route::Flex => {
            let beta = beta.map(to_flex);
            let (y, _) = forward(&to_flex(x), &to_flex(gamma), beta.as_ref(), epsilon as f32);
            from_flex(y)
        }
        Route::FlexAutodiff => from_autodiff(forward_recorded(x, gamma, beta, epsilon as f32)),
        Route::Cube => from_cube(cube::layer_norm::forward(to_cube(x), to_cube(gamma), beta.map(to_cube), epsilon as f32).0),
        Route::CubeAutodiff => from_cube_autodiff(cube_forward_recorded(x, gamma, beta, epsilon as f32, stream)),
    }
}

/// y, and each row's mean and 1/σ.
fn forward(x: &FlexTensor, gamma: &FlexTensor, beta: Option<&FlexTensor>, epsilon: f32) -> (FlexTensor, Stats) {
    let shape = x.shape();
    let x = values(x);
    let gamma = values(gamma);
    let beta = beta.map(values);
    let channels = gamma.len();
    let rows = x.len() / channels;
    let mut y = vec![0f32; x.len()];
    let mut mean = vec![0f32; rows];
    let mut rstd = vec![0f32; rows];
    let (y_out, mean_out, rstd_out) = (SharedMut::new(&mut y), SharedMut::new(&mut mean), SharedMut::new(&mut rstd));
    let chunks = parallel::chunks(rows, MIN_ROWS_PER_TASK);
    parallel::map(chunks.len(), x.len() * 8, |c| {
        let rows = chunks[c].clone();
        // SAFETY: chunk c's rows of y and of the statistics belong to this task.
        let (y, mean, rstd) = unsafe {
            (
                y_out.slice(rows.start * channels, rows.len() * channels),
                mean_out.slice(rows.start, rows.len()),
                rstd_out.slice(rows.start, rows.len()),
            )
        };
        let x = &x[rows.start * channels..rows.end * channels];
        normalise_rows(x, &gamma, beta.as_deref(), epsilon, y, mean, rstd);
    });
    (tensor(y, shape), Stats { mean, rstd })
}

vectorised! {
    fn normalise_rows(
        x: &[f32],
        gamma: &[f32],
        beta: Option<&[f32]>,
        epsilon: f32,
        y: &mut [f32],
        mean: &mut [f32],
        rstd: &mut [f32],
    ) {
        let channels = gamma.len();
        for (row, (x, y)) in x.chunks_exact(channels).zip(y.chunks_exact_mut(channels)).enumerate() {
            let mu = math::sum(x) / channels as f32;
            let mut squares = [0f32; 8];
            for chunk in x.chunks(8) {
                for (lane, &v) in squares.iter_mut().zip(chunk) {
                    *lane += (v - mu) * (v - mu);
                }
            }
            let variance = squares.iter().sum::<f32>() / channels as f32;
            let r = 1.0 / (variance + epsilon).sqrt();
            match beta {
                Some(beta) => {
                    for (((y, &x), &g), &b) in y.iter_mut().zip(x).zip(gamma).zip(beta) {
                        *y = (x - mu) * r * g + b;
                    }
                }
                None => {
                    for ((y, &x), &g) in y.iter_mut().zip(x).zip(gamma) {
                        *y = (x - mu) * r * g;
                    }
                }
            }
            mean[row] = mu;
            rstd[row] = r;
        }
    }
}

/// Each row's mean and 1/σ, from the forward pass.
#[derive(Debug, Clone)]
struct Stats {
    mean: Vec<f32>,
    rstd: Vec<f32>,
}

/// dx, dγ, dβ.
fn backward(saved: &Saved, grad: &FlexTensor) -> (FlexTensor, FlexTensor, FlexTensor) {
    let shape = saved.x.shape();
    let x = values(&saved.x);
    let gamma = values(&saved.gamma);
    let dy = values(grad);
    let channels = gamma.len();
    let mut dx = vec![0f32; x.len()];
    let dx_out = SharedMut::new(&mut dx);
    let chunks = parallel::chunks(x.len() / channels, MIN_ROWS_PER_TASK);
    let partials = parallel::map(chunks.len(), x.len() * 12, |c| {
        let rows = chunks[c].clone();
        let span = rows.start * channels..rows.end * channels;
        let mut d_gamma = vec![0f32; channels];
        let mut d_beta = vec![0f32; channels];
        // SAFETY: chunk c's rows of dx belong to this task.
        let dx = unsafe { dx_out.slice(span.start, span.len()) };
        backward_rows(
            &x[span.clone()],
            &dy[span],
            &gamma,
            &saved.stats.mean[rows.clone()],
            &saved.stats.rstd[rows],
            dx,
            &mut d_gamma,
            &mut d_beta,
        );
        (d_gamma, d_beta)
    });
    let mut d_gamma = vec![0f32; channels];
    let mut d_beta = vec![0f32; channels];
    for (g, b) in partials {
        d_gamma.iter_mut().zip(g).for_each(|(acc, v)| *acc += v);
        d_beta.iter_mut().zip(b).for_each(|(acc, v)| *acc += v);
    }
    (tensor(dx, shape), tensor(d_gamma, [channels]), tensor(d_beta, [channels]))
}

vectorised! {
    #[allow(clippy::too_many_arguments)]
    fn backward_rows(
        x: &[f32],
        dy: &[f32],
        gamma: &[f32],
        mean: &[f32],
        rstd: &[f32],
        dx: &mut [f32],
        d_gamma: &mut [f32],
        d_beta: &mut [f32],
    ) {
        let channels = gamma.len();
        let mut normalised = vec![0f32; channels];
        let mut g = vec![0f32; channels];
        let rows = x.chunks_exact(channels).zip(dy.chunks_exact(channels)).zip(dx.chunks_exact_mut(channels));
        for (row, ((x, dy), dx)) in rows.enumerate() {
            let (mu, r) = (mean[row], rstd[row]);
            for (((n, gi), (&x, &dy)), &gamma) in normalised.iter_mut().zip(g.iter_mut()).zip(x.iter().zip(dy)).zip(gamma) {
                *n = (x - mu) * r;
                *gi = dy * gamma;
            }
            let mean_g = math::sum(&g) / channels as f32;
            let mean_gn = math::dot(&g, &normalised) / channels as f32;
            for ((dx, &gi), &n) in dx.iter_mut().zip(&g).zip(&normalised) {
                *dx = r * (gi - mean_g - n * mean_gn);
            }
            for (((dg, db), &dy), &n) in d_gamma.iter_mut().zip(d_beta.iter_mut()).zip(dy).zip(&normalised) {
                *dg += dy * n;
                *db += dy;
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Saved {
    x: FlexTensor,
    gamma: FlexTensor,
    stats: Stats,
}

#[derive(Debug)]
struct LayerNormBackward;

/// N is 2 (x, γ) or 3 (and β).
impl<const N: usize> Backward<Flex, N> for LayerNormBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step(&ops, grads, |saved, grad| {
            let (dx, d_gamma, d_beta) = backward(saved, &grad);
            [Some(dx), Some(d_gamma), Some(d_beta)]
        });
    }
}

fn forward_recorded<const D: usize>(x: Tensor<D>, gamma: Tensor<1>, beta: Option<Tensor<1>>, epsilon: f32) -> AutodiffTensor {
    let (x, x_node) = to_autodiff(x).into_parts();
    let (gamma, gamma_node) = to_autodiff(gamma).into_parts();
    let run = |beta: Option<&FlexTensor>| forward(&x, &gamma, beta, epsilon);
    let saved = |stats: Stats| Saved { x: x.clone(), gamma: gamma.clone(), stats };
    match beta {
        None => match LayerNormBackward.prepare::<NoCheckpointing>([x_node, gamma_node]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (y, stats) = run(None);
                prep.finish(saved(stats), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(run(None).0),
        },
        Some(beta) => {
            let (beta, beta_node) = to_autodiff(beta).into_parts();
            match LayerNormBackward.prepare::<NoCheckpointing>([x_node, gamma_node, beta_node]).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let (y, stats) = run(Some(&beta));
                    prep.finish(saved(stats), y)
                }
                OpsKind::UnTracked(prep) => prep.finish(run(Some(&beta)).0),
            }
        }
    }
}

#[derive(Debug)]
struct CubeLayerNormBackward(Stream);

/// N is 2 (x, γ) or 3 (and β).
impl<const N: usize> Backward<Cube, N> for CubeLayerNormBackward {
    type State = cube::layer_norm::Saved;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        // x's gradient so far, taken out to be added to in place: the residual add's, where x is
        // a tracked op's output (a leaf's gradient is only lent by `consume`, so it is left to
        // `register` to add to).
        let stream = match (&ops.parents[0], self.0) {
            (Some(x), Stream::AddedBack) if !x.parents.is_empty() => Some(grads.consume::<Cube>(x)),
            _ => None,
        };
        backward_step_on::<Cube, _, N, _>(&ops, grads, |saved, grad| {
            let (dx, d_gamma, d_beta) = cube::layer_norm::backward(saved, grad, stream);
            [Some(dx), Some(d_gamma), Some(d_beta)]
        });
    }
}

fn cube_forward_recorded<const D: usize>(
    x: Tensor<D>,
    gamma: Tensor<1>,
    beta: Option<Tensor<1>>,
    epsilon: f32,
    stream: Stream,
) -> CubeAutodiffTensor {
    let (x, x_node) = to_cube_autodiff(x).into_parts();
    let (gamma, gamma_node) = to_cube_autodiff(gamma).into_parts();
    let run = |beta| cube::layer_norm::forward(x, gamma, beta, epsilon);
    match beta {
        None => cube::record(CubeLayerNormBackward(stream), [x_node, gamma_node], || run(None)),
        Some(beta) => {
            let (beta, beta_node) = to_cube_autodiff(beta).into_parts();
            cube::record(CubeLayerNormBackward(stream), [x_node, gamma_node, beta_node], || run(Some(beta)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_close, flex_and_wgpu, input, values};

    #[test]
    fn fused_layer_norm_matches_burns_forward_and_backward() {
        // flex's kernels to flex's composed ops, and CubeCL's to Burn's on wgpu (lavapipe). 150
        // rows: three of the GPU backward's blocks of 64, the last one short; 300 channels: more
        // than a workgroup's units, so a unit takes two.
        let cases = flex_and_wgpu(1.0, 5.0);
        for ((device, loose), (with_beta, channels)) in
            cases.iter().flat_map(|c| [(false, 12), (true, 20), (true, 3), (true, 300)].map(|s| (c, s)))
        {
            let device = device.clone();
            let run = |fused: bool| {
                let x = input([3, 50, channels], 1, &device);
                let gamma = input([channels], 2, &device);
                let beta = input([channels], 3, &device);
                let beta_used = with_beta.then(|| beta.clone());
                // A view with strides, as the model's inputs can be.
                let xs = x.clone().swap_dims(0, 1).swap_dims(0, 1);
                let y = if fused {
                    layer_norm(xs, gamma.clone(), beta_used, 1e-5)
                } else {
                    burn::tensor::module::layer_norm(xs, gamma.clone(), beta_used, 1e-5)
                };
                let weights = input([3, 50, channels], 4, &device);
                let grads = (y.clone() * weights).sum().backward();
                (values(y), [x.grad(&grads).map(values), gamma.grad(&grads).map(values), beta.grad(&grads).map(values)])
            };
            let (fused, fused_grads) = run(true);
            let (composed, composed_grads) = run(false);
            let case = format!("{device:?}: beta {with_beta}, {channels} channels");
            assert_close(&fused, &composed, 1e-5 * loose, &case);
            for (name, (a, b)) in ["x", "gamma", "beta"].iter().zip(fused_grads.into_iter().zip(composed_grads)) {
                match (a, b) {
                    (Some(a), Some(b)) => assert_close(&a, &b, 2e-5 * loose, &format!("{case}: d{name}")),
                    (None, None) => assert!(!with_beta && *name == "beta"),
                    _ => panic!("{case}: d{name} exists on one side only"),
                }
            }
        }
    }

    /// In a pre-norm residual branch `h + f(pre_norm(h))`, h's gradient is layer norm's: the
    /// backward adds into the residual add's gradient for h rather than beside it. h is an op's
    /// output (as in a model), and also a leaf (where the op leaves the adding to autodiff).
    #[test]
    fn pre_norm_gives_layer_norms_gradients() {
        for (device, _) in flex_and_wgpu(1.0, 1.0) {
            for leaf in [false, true] {
                let run = |pre: bool| {
                    let x = input([4, 70, 24], 1, &device).require_grad();
                    let h = if leaf { x.clone() } else { x.clone() * 1.5 };
                    let (gamma, beta) = (input([24], 2, &device).require_grad(), input([24], 3, &device).require_grad());
                    let normed = if pre {
                        pre_norm(h.clone(), gamma.clone(), Some(beta.clone()), 1e-5)
                    } else {
                        layer_norm(h.clone(), gamma.clone(), Some(beta.clone()), 1e-5)
                    };
                    let y = h + normed * input([4, 70, 24], 4, &device);
                    let grads = (y * input([4, 70, 24], 5, &device)).sum().backward();
                    let grad = |g: Option<Tensor<1>>| values(g.expect("a gradient"));
                    [grad(x.grad(&grads).map(|g| g.flatten(0, 2))), grad(gamma.grad(&grads)), grad(beta.grad(&grads))]
                };
                let (pre, plain) = (run(true), run(false));
                for (name, (a, b)) in ["x", "gamma", "beta"].iter().zip(pre.iter().zip(&plain)) {
                    assert_close(a, b, 1e-6, &format!("{device:?}, leaf {leaf}: d{name}"));
                }
            }
        }
    }
}
