//! How wide one launch may be. Every GPU API takes at most 65,535 workgroups along an axis of a
//! launch, and wgpu refuses a wider dispatch with a validation error that names neither cause nor
//! fix. Launches that spread their items over the axes (`units`, `embed`'s grid) never meet it;
//! those shaped by hand can, at sizes past every preset: tiled attention's grid of context
//! blocks, heads and batch rows, layer norm's blocked backward and its finish, the
//! cross-entropy's row groups and the mask's sum, the gradient norm's squares. Each such launch
//! takes its axes from a width function beside it and passes them through [`along_axis`]; a run
//! checks the same functions at its sizes before it allocates anything (`super::step_size`).

/// The most workgroups one launch may have along an axis on any GPU API (WebGPU's, Vulkan's and
/// Metal's least maximum).
pub(crate) const MOST_PER_AXIS: usize = 65_535;

/// Workgroups one launch needs along one axis, and the setting that sets them: what the user
/// lowers when they are too many ("the batch", "batch × context").
pub(crate) type Axis = (usize, &'static str);

/// A step that would launch wider than a GPU takes, and what to lower.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("this model's launch needs {needed} workgroups along one axis, more than a GPU takes ({most}): lower {lower}", most = MOST_PER_AXIS)]
pub struct LaunchTooWide {
    pub needed: usize,
    pub lower: &'static str,
}

/// `count` workgroups along one axis of a launch, as the launch takes it. Over
/// [`MOST_PER_AXIS`] it stops with [`LaunchTooWide`]'s message (`lower`: "the batch", say), in
/// place of wgpu's validation error; the session reports the message and keeps running.
pub(crate) fn along_axis((count, lower): Axis) -> u32 {
    assert!(count <= MOST_PER_AXIS, "{}", LaunchTooWide { needed: count, lower });
    count as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A launch at the axis limit goes as it is; one over it stops with what to lower, which the
    /// session shows (its first line) in place of wgpu's validation error.
    #[test]
    fn a_launch_wider_than_a_gpu_takes_says_what_to_lower() {
        assert_eq!(along_axis((MOST_PER_AXIS, "the batch")), 65_535);
        let over = std::panic::catch_unwind(|| along_axis((MOST_PER_AXIS + 1, "the batch"))).expect_err("over the limit");
        let message = over.downcast_ref::<String>().expect("a formatted message");
        assert!(message.contains("65536 workgroups") && message.ends_with("lower the batch"), "{message}");
        assert_eq!(message.lines().count(), 1, "the session shows a panic's first line");
    }
}
