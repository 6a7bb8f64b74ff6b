//! AdamW's update of one parameter as one kernel launch; the gradients' Σx² as one launch per
//! five tensors, and the global norm with its clipping factor as one more. Burn's composed AdamW
//! is about 16 launches per parameter and the clipping norm 3 per tensor and 5 to finish, which
//! made the optimiser most of a small model's GPU step.
//!
//! The arithmetic is the flex kernel's (`crate::adamw`), in the same order. The parameter and its
//! moments are updated in place (their buffers are the step's only copies; a shared one is copied
//! first), so the kernel binds five buffers: WebGPU allows eight storage buffers per kernel.

use burn::tensor::DType;
use burn_cubecl::ops::numeric::zeros_client;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::block_sum::{strided_sum, workgroup_sum, workgroup_units};
use super::grid_limit::Axis;
use super::{along_axis, bindable, contiguous, empty, flat, note, tree_steps, units, writable};
use crate::adamw_step::AdamWStep;

/// One value's update, `g` its gradient (clipped already): the moments at `i` in place, and the
/// parameter's new value returned.
#[cube]
#[allow(clippy::too_many_arguments)]
fn adamw_value(
    param: f32,
    moment_1: &mut Tensor<f32>,
    moment_2: &mut Tensor<f32>,
    i: usize,
    g: f32,
    beta_1: f32,
    beta_2: f32,
    correction_1: f32,
    correction_2: f32,
    epsilon: f32,
    keep: f32,
    lr: f32,
) -> f32 {
    let m = moment_1[i] * beta_1 + g * (1.0 - beta_1);
    let v = moment_2[i] * beta_2 + g * g * (1.0 - beta_2);
    moment_1[i] = m;
    moment_2[i] = v;
    let delta = (m / correction_1) / ((v / correction_2).sqrt() + epsilon);
    param * keep - delta * lr
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn adamw_kernel(
    param: &mut Tensor<f32>,
    moment_1: &mut Tensor<f32>,
    moment_2: &mut Tensor<f32>,
    grad: &Tensor<f32>,
    grad_scale: &Tensor<f32>,
    beta_1: f32,
    beta_2: f32,
    correction_1: f32,
    correction_2: f32,
    epsilon: f32,
    keep: f32,
    lr: f32,
    #[comptime] scaled: bool,
) {
    let i = ABSOLUTE_POS;
    if i >= param.len() {
        terminate!();
    }
    let mut g = grad[i];
    if scaled {
        g *= grad_scale[0];
    }
    param[i] = adamw_value(param[i], moment_1, moment_2, i, g, beta_1, beta_2, correction_1, correction_2, epsilon, keep, lr);
}

/// Parameters one launch of `adamw_many_kernel` updates: seven, whose parameter, moments and
/// gradient make 28 bindings and the clipping factor a 29th (Metal's 31 is the tightest native
/// limit), or as many as fit where a device binds fewer. A browser's WebGPU allows seven and
/// takes one a launch, so the page is built without that kernel (it would cost the page's
/// download and never run).
pub(crate) fn parameters_per_launch(client: &cubecl::client::Client) -> usize {
    const MOST: usize = 7;
    // Four bindings a parameter, and the factor.
    (bindable(client).saturating_sub(1) / 4).min(MOST)
}

/// The update of several parameters, laid end to end: parameter s's values end before
/// `ends[s]`, and `per_parameter` holds its correction₁, correction₂ and keep (1 − lr·λ) at 3s.
/// A slot without a parameter has no values (its buffers are a placeholder's).
#[cfg(not(target_arch = "wasm32"))]
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::needless_pass_by_value, reason = "CubeCL's launch takes a sequence by value")]
fn adamw_many_kernel(
    mut params: Sequence<OwnedTensor<f32>>,
    mut moments_1: Sequence<OwnedTensor<f32>>,
    mut moments_2: Sequence<OwnedTensor<f32>>,
    grads: Sequence<OwnedTensor<f32>>,
    grad_scale: &Tensor<f32>,
    ends: Sequence<u32>,
    per_parameter: Sequence<f32>,
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    lr: f32,
    #[comptime] scaled: bool,
) {
    let unit = ABSOLUTE_POS;
    let mut scale = 1.0f32;
    if scaled {
        scale = grad_scale[0];
    }
    let mut start = 0usize;
    #[unroll]
    for s in 0..params.len() {
        let end = *ends.index(s) as usize;
        if unit >= start && unit < end {
            let i = unit - start;
            let g = grads.index(s)[i] * scale;
            let (correction_1, correction_2, keep) =
                (*per_parameter.index(3 * s), *per_parameter.index(3 * s + 1), *per_parameter.index(3 * s + 2));
            let param = params.index(s)[i];
            let value = adamw_value(
                param,
                moments_1.index_mut(s),
                moments_2.index_mut(s),
                i,
                g,
                beta_1,
                beta_2,
                correction_1,
                correction_2,
                epsilon,
                keep,
                lr,
            );
            params.index_mut(s)[i] = value;
        }
        start = end;
    }
}

/// A parameter's update made ready while its buffers are the step's only copies, to be launched
/// with others ([`launch_many`]): the parameter and its moments, written in place, and its
/// gradient.
pub(crate) struct Prepared {
    pub param: CubeTensor,
    pub moment_1: CubeTensor,
    pub moment_2: CubeTensor,
    grad: CubeTensor,
    step: AdamWStep,
}

impl Prepared {
    pub(crate) fn step(&self) -> &AdamWStep {
        &self.step
    }
}

/// [`Prepared`] for `param`; `moments` `None` before the first update (zeros then).
pub(crate) fn prepare(param: CubeTensor, grad: CubeTensor, moments: Option<(CubeTensor, CubeTensor)>, step: AdamWStep) -> Prepared {
    let n = param.meta.shape().num_elements();
    let (client, device) = (param.client.clone(), param.device.clone());
    let (moment_1, moment_2) = match moments {
        Some((m, v)) => (writable(m), writable(v)),
        None => {
            let zeros = || zeros_client(client.clone(), device.clone(), [n].into(), DType::F32);
            (zeros(), zeros())
        }
    };
    Prepared { param: writable(param), moment_1, moment_2, grad: contiguous(grad), step }
}

/// Whether `like`'s device takes several parameters a kernel ([`parameters_per_launch`]):
/// natively.
pub(crate) fn takes_many(like: &CubeTensor) -> bool {
    cfg!(not(target_arch = "wasm32")) && parameters_per_launch(&like.client) >= 2
}

/// Correction₁, correction₂ and keep of a step.
fn settings(step: AdamWStep) -> [f32; 3] {
    let AdamWStep { beta_1, beta_2, lr, weight_decay, time, .. } = step;
    [1.0 - beta_1.powi(time), 1.0 - beta_2.powi(time), (1.0 - lr * weight_decay as f64) as f32]
}

/// In a browser nothing takes several parameters a launch ([`takes_many`]).
#[cfg(target_arch = "wasm32")]
pub(crate) fn launch_many(_: &[Prepared], _: Option<&CubeTensor>) {
    unreachable!("a browser updates one parameter a launch (takes_many)")
}

/// Updates `prepared` (one to [`parameters_per_launch`], sharing β₁, β₂, ε and lr) in one
/// launch, gradients scaled by `grad_scale` when given.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn launch_many(prepared: &[Prepared], grad_scale: Option<&CubeTensor>) {
    let first = &prepared[0];
    let client = first.param.client.clone();
    let slots = parameters_per_launch(&client);
    assert!(prepared.len() <= slots, "{} parameters in one AdamW launch of {slots}", prepared.len());
    // Empty slots bind placeholders of their own: two writable bindings of one buffer would alias.
    // Every launch binds every slot, so that one kernel is compiled.
    let placeholder = || empty(&first.param, [1]).into_tensor_arg();
    let (mut params, mut moments_1, mut moments_2, mut grads) =
        (SequenceArg::new(), SequenceArg::new(), SequenceArg::new(), SequenceArg::new());
    let (mut ends, mut per_parameter, mut end) = (SequenceArg::new(), SequenceArg::new(), 0usize);
    for slot in 0..slots {
        match prepared.get(slot) {
            Some(p) => {
                end += p.param.meta.shape().num_elements();
                params.push(flat(&p.param).into_tensor_arg());
                moments_1.push(flat(&p.moment_1).into_tensor_arg());
                moments_2.push(flat(&p.moment_2).into_tensor_arg());
                grads.push(flat(&p.grad).into_tensor_arg());
                for value in settings(p.step) {
                    per_parameter.push(value);
                }
            }
            None => {
                params.push(placeholder());
                moments_1.push(placeholder());
                moments_2.push(placeholder());
                grads.push(placeholder());
                for value in [1.0, 1.0, 1.0] {
                    per_parameter.push(value);
                }
            }
        }
        ends.push(end as u32);
    }
    let scaled = grad_scale.is_some();
    let grad_scale = grad_scale.cloned().unwrap_or_else(|| empty(&first.param, [1]));
    let AdamWStep { beta_1, beta_2, epsilon, lr, .. } = first.step;
    let (cube_count, cube_dim) = units(&client, end);
    note(&cube_count, cube_dim, 1, 4 * end + usize::from(scaled), 3 * end);
    adamw_many_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        params,
        moments_1,
        moments_2,
        grads,
        grad_scale.into_tensor_arg(),
        ends,
        per_parameter,
        beta_1,
        beta_2,
        epsilon,
        lr as f32,
        scaled,
    );
}

/// The parameter, its first and second moments (flat) after one update; `moments` `None` before
/// the first. All on one cubecl device, f32.
pub(crate) fn update(
    param: CubeTensor,
    grad: CubeTensor,
    moments: Option<(CubeTensor, CubeTensor)>,
    grad_scale: Option<&CubeTensor>,
    step: AdamWStep,
) -> (CubeTensor, CubeTensor, CubeTensor) {
    let prepared = prepare(param, grad, moments, step);
    launch_one(&prepared, grad_scale);
    let Prepared { param, moment_1, moment_2, .. } = prepared;
    (param, moment_1, moment_2)
}

/// Updates one parameter: five bindings, as every device allows.
pub(crate) fn launch_one(prepared: &Prepared, grad_scale: Option<&CubeTensor>) {
    let Prepared { param, moment_1, moment_2, grad, step } = prepared;
    let [correction_1, correction_2, keep] = settings(*step);
    let AdamWStep { beta_1, beta_2, epsilon, lr, .. } = *step;
    let n = param.meta.shape().num_elements();
    let client = param.client.clone();
    let scaled = grad_scale.is_some();
    // Unread when not scaled; any f32 buffer fills the slot.
    let grad_scale = grad_scale.map_or_else(|| grad.clone(), |scale| contiguous(scale.clone()));
    let (cube_count, cube_dim) = units(&client, n);
    // Reads the parameter, its moments and its gradient (and the factor); writes the first three.
    note(&cube_count, cube_dim, 1, 4 * n + usize::from(scaled), 3 * n);
    adamw_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        param.clone().into_tensor_arg(),
        moment_1.clone().into_tensor_arg(),
        moment_2.clone().into_tensor_arg(),
        grad.clone().into_tensor_arg(),
        grad_scale.into_tensor_arg(),
        beta_1,
        beta_2,
        correction_1,
        correction_2,
        epsilon,
        keep,
        lr as f32,
        scaled,
    );
}

/// Values each unit of the Σx² kernel adds up. A parameter's count does not depend on the
/// batch, so neither does this loop.
const VALUES_PER_UNIT: usize = 64;

/// Tensors one Σx² launch reads: five in a browser (with the partial sums, six bindings: WebGPU
/// allows eight storage buffers a kernel, and CubeCL keeps one), and natively 26 (28 bindings:
/// Metal's 31 is the tightest native limit). At 6/6/384 a model's 51 gradients take two
/// launches natively (eleven at five).
pub(crate) fn tensors_per_launch(client: &cubecl::client::Client) -> usize {
    const BROWSER: usize = 5;
    const NATIVE: usize = 26;
    if cfg!(target_arch = "wasm32") {
        return BROWSER;
    }
    // A binding a tensor, and the partial sums.
    bindable(client).saturating_sub(1).clamp(BROWSER, NATIVE)
}

/// Σ x[start]², x[start + step]², x[start + 2·step]², …
#[cube]
fn strided_squares(x: &Tensor<f32>, start: usize, step: usize) -> f32 {
    let mut sum = f32::new(0.0);
    let mut i = start;
    while i < x.len() {
        let value = x[i];
        sum += value * value;
        i += step;
    }
    sum
}

/// The units are laid end to end over the tensors `xs`, `ends[t]` past tensor t's last: unit u
/// of tensor t's `units` adds up the squares of its values u, u + units, u + 2·units, …
/// (neighbouring units read neighbouring values). Each workgroup adds its units' sums up and
/// writes the total to `partials[offset + workgroup]`. A slot without a tensor has no units, and
/// units past the last add 0 (every unit takes part in the workgroup's sum).
#[cube(launch)]
#[allow(clippy::needless_pass_by_value, reason = "CubeCL's launch takes a sequence by value")]
fn sum_of_squares_kernel(
    xs: Sequence<OwnedTensor<f32>>,
    partials: &mut Tensor<f32>,
    offset: u32,
    ends: Sequence<u32>,
    #[comptime] units: usize,
) {
    let unit = ABSOLUTE_POS;
    let mut sum = 0.0f32;
    let mut start = 0usize;
    #[unroll]
    for t in 0..xs.len() {
        let end = *ends.index(t) as usize;
        if unit >= start && unit < end {
            sum = strided_squares(xs.index(t), unit - start, end - start);
        }
        start = end;
    }
    let mut shared = Shared::<[f32]>::new_slice(units);
    let total = workgroup_sum(&mut shared, sum);
    if UNIT_POS == 0 {
        partials[offset as usize + CUBE_POS] = total;
    }
}

/// `norm[0]` = √(Σ partials), and, when clipping, `scale[0]` = max_norm / max(norm, max_norm)
/// (1 within bounds): the end of the gradient norm and the clipping factor in one workgroup.
#[cube(launch)]
fn norm_and_clip_kernel(
    partials: &Tensor<f32>,
    norm: &mut Tensor<f32>,
    scale: &mut Tensor<f32>,
    max_norm: f32,
    #[comptime] clip: bool,
    #[comptime] units: usize,
) {
    let mut shared = Shared::<[f32]>::new_slice(units);
    let total = workgroup_sum(&mut shared, strided_sum(partials, 0, partials.len()));
    if UNIT_POS == 0 {
        let value = total.sqrt();
        norm[0] = value;
        if clip {
            let mut bound = value;
            if max_norm > value {
                bound = max_norm;
            }
            scale[0] = max_norm / bound;
        }
    }
}

/// Units a Σx² launch lays over a tensor of `n` values.
fn units_over(n: usize) -> usize {
    n.div_ceil(VALUES_PER_UNIT)
}

/// The workgroups of one Σx² launch whose tensors take these many units each (`grid_limit`).
fn squares_axis(units_per_tensor: impl IntoIterator<Item = usize>, units: usize) -> Axis {
    (units_per_tensor.into_iter().sum::<usize>().div_ceil(units), "the model's size")
}

/// The most workgroups a Σx² launch of a model of `parameters` values can take, at most
/// `per_launch` tensors to a launch: all the values in one launch, with one partly filled unit
/// a tensor.
pub(crate) fn widest_squares(parameters: usize, units: usize, per_launch: usize) -> Axis {
    squares_axis([units_over(parameters), per_launch], units)
}

/// The partial sums of Σx² over tensors of `sizes` values, [`tensors_per_launch`] a launch in
/// order, and the launches' workgroups: one partial sum each. Every unit of a launch adds up
/// at most [`VALUES_PER_UNIT`] values; the finish adds up ⌈partials / units⌉ a unit.
pub(crate) struct Squares {
    partials: CubeTensor,
    units: usize,
}

impl Squares {
    /// Σx² of each of `xs`, in workgroup partial sums: a launch for every
    /// [`tensors_per_launch`] of them.
    pub(crate) fn of(xs: &[CubeTensor]) -> Self {
        let first = xs.first().expect("Σx² of no tensors");
        let client = first.client.clone();
        let units = workgroup_units(&client);
        let per_launch = tensors_per_launch(&client);
        let launches: Vec<&[CubeTensor]> = xs.chunks(per_launch).collect();
        let axis = |group: &[CubeTensor]| squares_axis(group.iter().map(|x| units_over(x.meta.shape().num_elements())), units);
        let cubes = |group: &[CubeTensor]| axis(group).0;
        let partials = empty(first, [launches.iter().map(|group| cubes(group)).sum::<usize>()]);
        let mut offset = 0;
        for group in launches {
            let xs: Vec<CubeTensor> = group.iter().cloned().map(contiguous).collect();
            // Every launch binds `per_launch` slots, so that one kernel is compiled: slots without
            // a tensor read the first and have no units.
            let (mut slots, mut ends, mut end) = (SequenceArg::new(), SequenceArg::new(), 0usize);
            for slot in 0..per_launch {
                end += xs.get(slot).map_or(0, |x| units_over(x.meta.shape().num_elements()));
                ends.push(end as u32);
                slots.push(flat(xs.get(slot).unwrap_or(&xs[0])).into_tensor_arg());
            }
            let (count, dim) = (cubecl::CubeCount::new_1d(along_axis(axis(group))), cubecl::CubeDim::new_1d(units as u32));
            let values: usize = xs.iter().map(|x| x.meta.shape().num_elements()).sum();
            note(&count, dim, VALUES_PER_UNIT + tree_steps(units), values, cubes(group));
            sum_of_squares_kernel::launch(&client, count, dim, slots, partials.clone().into_tensor_arg(), offset as u32, ends, units);
            offset += cubes(group);
        }
        Self { partials, units }
    }

    /// √Σx² as a [1] tensor, and with `max_norm` the clipping factor max_norm / max(norm,
    /// max_norm), another [1] tensor: one launch.
    pub(crate) fn norm(self, max_norm: Option<f32>) -> (CubeTensor, Option<CubeTensor>) {
        let Self { partials, units } = self;
        let norm = empty(&partials, [1]);
        // Unwritten without clipping, but bound all the same: two writable bindings of one buffer
        // would alias.
        let scale = empty(&partials, [1]);
        let client = partials.client.clone();
        let partial_count = partials.meta.shape().num_elements();
        let (count, dim) = (cubecl::CubeCount::new_1d(1), cubecl::CubeDim::new_1d(units as u32));
        note(&count, dim, partial_count.div_ceil(units) + tree_steps(units), partial_count, 2);
        norm_and_clip_kernel::launch(
            &client,
            count,
            dim,
            partials.into_tensor_arg(),
            norm.clone().into_tensor_arg(),
            scale.clone().into_tensor_arg(),
            max_norm.unwrap_or(0.0),
            max_norm.is_some(),
            units,
        );
        (norm, max_norm.map(|_| scale))
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, Tensor, TensorData};

    use crate::adamw::{AdamWUpdates, SumOfSquares, adamw_update, composed};
    use crate::adamw_step::AdamWStep;
    use crate::tests::{assert_close, gpu, input, values};

    #[test]
    fn the_update_matches_the_composed_ops_over_three_steps_on_wgpu() {
        let device = gpu();
        let start = input([13, 700], 1, &device);
        let scale = Tensor::<1>::from_data(TensorData::new(vec![0.7f32], [1]), &device);
        let run = |fused: bool, scale: Option<&Tensor<1>>| {
            let (mut param, mut moments) = (start.clone(), None);
            for time in 1..=3 {
                // A transposed gradient: the kernel reads it in the parameter's order.
                let grad = input([700, 13], 10 + time as u64, &device).transpose();
                let step = AdamWStep { beta_1: 0.9, beta_2: 0.99, epsilon: 1e-8, lr: 1e-2, weight_decay: 0.1, time };
                let (p, m, v) =
                    if fused { adamw_update(param, grad, moments, scale, step) } else { composed(param, grad, moments, scale, step) };
                param = p;
                moments = Some((m, v));
            }
            values(param)
        };
        for scale in [Some(&scale), None] {
            let (fused, composed) = (run(true, scale), run(false, scale));
            assert!(fused.iter().zip(values(start.clone())).any(|(a, b)| (a - b).abs() > 1e-3), "the steps moved nothing");
            assert_close(&fused, &composed, 1e-5, "three AdamW steps on wgpu");
        }
        assert_eq!(values(start.clone()), values(input([13, 700], 1, &device)), "the parameter the caller kept is untouched");
    }

    /// Parameters updated several a launch (seven where the device binds that many buffers, as
    /// lavapipe does) end as each updated alone: nine of them, so that a second launch has
    /// empty slots, decayed or not, one first seen at the second step, over three steps with a
    /// clipping factor.
    #[test]
    fn updates_launched_together_match_one_at_a_time() {
        let device = gpu();
        let shapes = [[13, 700], [1, 5], [64, 3], [1, 4096], [7, 7], [2, 129], [3, 3], [1, 1], [40, 40]];
        let scale = Tensor::<1>::from_data(TensorData::new(vec![0.7f32], [1]), &device);
        let run = |together: bool| {
            let mut params: Vec<Tensor<2>> = shapes.iter().enumerate().map(|(i, &s)| input(s, i as u64, &device)).collect();
            let mut moments: Vec<Option<(Tensor<1>, Tensor<1>)>> = vec![None; shapes.len()];
            for time in 1..=3 {
                let mut updates = AdamWUpdates::new(Some(scale.clone()));
                for (i, param) in params.iter_mut().enumerate() {
                    if i == 4 && time == 1 {
                        continue;
                    }
                    let grad = input(shapes[i], 100 * time as u64 + i as u64, &device);
                    let weight_decay = if i % 2 == 0 { 0.1 } else { 0.0 };
                    let step = AdamWStep { beta_1: 0.9, beta_2: 0.99, epsilon: 1e-8, lr: 1e-2, weight_decay, time };
                    let (p, m, v) = if together {
                        updates.update(param.clone(), grad, moments[i].take(), step)
                    } else {
                        adamw_update(param.clone(), grad, moments[i].take(), Some(&scale), step)
                    };
                    *param = p;
                    moments[i] = Some((m, v));
                }
            }
            params.into_iter().map(values).collect::<Vec<_>>()
        };
        for (i, (together, alone)) in run(true).iter().zip(run(false)).enumerate() {
            assert_close(together, &alone, 1e-6, &format!("parameter {i}"));
        }
    }

    #[test]
    fn sum_of_squares_on_wgpu_matches_the_cpu() {
        // More tensors than one launch takes (natively 26, in a browser 5), of sizes that do and
        // do not fill a unit's share.
        let shapes: [&[usize]; 7] = [&[300, 601], &[77], &[4096], &[1], &[64, 3], &[5000], &[129]];
        let squares = |device: &Device| {
            let mut sum = SumOfSquares::default();
            for (seed, shape) in shapes.iter().cycle().take(30).enumerate() {
                sum.add(input([shape.iter().product::<usize>()], seed as u64, device));
            }
            sum
        };
        assert_close(&values(squares(&gpu()).total(&gpu())), &values(squares(&Device::flex()).total(&Device::flex())), 1e-5, "Σx² on wgpu");
        // The norm (some hundreds) with a bound above it, then below it (the factor is 1, then not).
        for max_norm in [None, Some(1000.0), Some(1.0)] {
            let (norm, scale) = squares(&gpu()).norm(&gpu(), max_norm);
            let (flex_norm, flex_scale) = squares(&Device::flex()).norm(&Device::flex(), max_norm);
            assert_close(&values(norm), &values(flex_norm), 1e-5, "the norm on wgpu");
            assert_eq!(scale.is_some(), max_norm.is_some(), "a clipping factor exactly when clipping");
            if let (Some(scale), Some(flex_scale)) = (scale, flex_scale) {
                assert_close(&values(scale), &values(flex_scale), 1e-6, &format!("the factor for {max_norm:?}"));
            }
        }
    }
}
