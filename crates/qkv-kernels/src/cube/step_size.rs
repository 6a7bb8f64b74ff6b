//! Whether a training step fits a GPU's launch grid ([`check_launch_widths`]), checked before a run
//! allocates its model, so that a step too wide is refused with what to lower instead of stopping
//! mid-step. It sizes each axis with the width function the launch itself takes
//! (`super::grid_limit`), so the two count alike; it takes the largest a step can ask (the whole
//! batch at the longest context, every launch whichever the device picks, all the parameters in
//! one Σx² launch), so it may refuse a hair early, never late. Each launch still checks its axis
//! as it is made, for any size this check did not foresee.

use burn::tensor::Device;

use super::grid_limit::{Axis, LaunchTooWide, MOST_PER_AXIS};
use super::product_choice::cube_device;
use super::{adamw, attention_tiled, block_sum, cross_entropy, layer_norm};
use crate::flex::{Route, route};

/// The sizes of a training step that its widest launches depend on, as a model and its recipe
/// give them before anything is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSize {
    /// Rows of one batch on a device (a run spread over devices gives each a share of them).
    pub batch: usize,
    /// Positions in a row: the model's longest context.
    pub context: usize,
    /// Query heads.
    pub heads: usize,
    /// The residual stream's width: layer norm's channels.
    pub width: usize,
    /// Every parameter, summed: the gradient norm squares them all.
    pub parameters: usize,
}

/// Whether a step of `size` fits every launch it makes on `device`: nothing to check on flex or
/// where Burn's composed ops run (they spread their launches themselves); on a CubeCL device,
/// every hand-shaped launch the step may make, each sized by the launch's own width function.
/// Checked with the whole batch, this also bounds each share of a run spread over devices.
pub fn check_launch_widths(device: &Device, size: StepSize) -> Result<(), LaunchTooWide> {
    let plain = device.clone().without_autodiff();
    let Some(cube_device) = cube_device(&plain).filter(|_| route(&plain, burn::tensor::DType::F32) == Route::Cube) else {
        return Ok(());
    };
    // Its workgroup size and bindings, read without a launch.
    let client = cube_device.client();
    step_axes(size, block_sum::workgroup_units(&client), adamw::tensors_per_launch(&client))
        .into_iter()
        .find(|&(needed, _)| needed > MOST_PER_AXIS)
        .map_or(Ok(()), |(needed, lower)| Err(LaunchTooWide { needed, lower }))
}

/// The axes of every hand-shaped launch of a step of `size`, workgroups of `units` units and
/// `per_launch` tensors to one launch of the gradient norm's squares.
fn step_axes(size: StepSize, units: usize, per_launch: usize) -> Vec<Axis> {
    let rows = size.batch * size.context;
    let mut axes = attention_tiled::grid_axes(size.context, size.heads, size.batch).to_vec();
    axes.extend(layer_norm::backward_axes(rows, size.width));
    axes.push(cross_entropy::row_groups(rows, units));
    // The loss mask's sum, a run of `units` rows to a workgroup (`block_sum::sum_all`).
    axes.push(block_sum::run_groups(rows, units));
    axes.push(adamw::widest_squares(size.parameters, units, per_launch));
    axes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nanoGPT's GPU shape (6/6/384, context 256, batch 64) with parameters of its order.
    const NANO_GPT: StepSize = StepSize { batch: 64, context: 256, heads: 6, width: 384, parameters: 10_745_088 };

    /// The step's widest axes, as its launches size them: the batch's own axis in attention, the
    /// rows' blocks in layer norm, the parameters' share of the squares.
    #[test]
    fn a_steps_axes_come_from_its_launches_sizes() {
        let axes = step_axes(NANO_GPT, 256, 26);
        let widest = |lower: &str| axes.iter().filter(|axis| axis.1 == lower).map(|axis| axis.0).max();
        assert_eq!(widest("the batch"), Some(64));
        assert_eq!(widest("the context"), Some(4), "blocks of 64 queries");
        // 16,384 rows in blocks of 64, or groups of 256 units.
        assert_eq!(widest("batch × context"), Some(256));
        assert_eq!(widest("the embedding width"), Some(384));
        assert!(axes.iter().all(|&(needed, _)| needed <= MOST_PER_AXIS));
        // 10.7M values in runs of 64 to a unit, 256 units to a workgroup, and one partly filled
        // unit a tensor at most.
        assert_eq!(widest("the model's size"), Some((10_745_088usize.div_ceil(64) + 26).div_ceil(256)));
    }

    /// Past the limit the first axis over it is named, with the setting that sets it: a batch of
    /// 70,000 in attention's grid, or a longer batch × context in layer norm's blocks.
    #[test]
    fn the_first_axis_over_the_limit_names_its_setting() {
        let over = |size: StepSize| step_axes(size, 256, 26).into_iter().find(|&(needed, _)| needed > MOST_PER_AXIS);
        assert_eq!(over(StepSize { batch: 70_000, context: 2, ..NANO_GPT }), Some((70_000, "the batch")));
        let long = StepSize { batch: 32_768, context: 256, ..NANO_GPT };
        assert_eq!(over(long), Some((32_768 * 256 / 64, "batch × context")));
        assert_eq!(over(StepSize { batch: 1, context: 4_194_304 + 64, ..NANO_GPT }), Some((65_537, "the context")));
        assert_eq!(over(NANO_GPT), None);
    }

    /// On flex there is no grid to fit: any size passes.
    #[test]
    fn flex_has_no_grid_to_fit() {
        let huge = StepSize { batch: 1 << 20, context: 1 << 12, ..NANO_GPT };
        assert_eq!(check_launch_widths(&Device::flex(), huge), Ok(()));
    }

    /// On wgpu (lavapipe here) the check reads the device's workgroup size and refuses the batch
    /// the launch would have refused.
    #[test]
    fn wgpu_refuses_a_batch_its_attention_grid_cannot_take() {
        let Some(device) = crate::tests::wgpu() else { return };
        let error = check_launch_widths(&device, StepSize { batch: 70_000, context: 2, ..NANO_GPT }).expect_err("too wide");
        assert_eq!(error, LaunchTooWide { needed: 70_000, lower: "the batch" });
        assert_eq!(check_launch_widths(&device.autodiff(), NANO_GPT), Ok(()));
    }
}
