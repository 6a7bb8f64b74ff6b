//! Burn's native GPU backends beside wgpu, each behind a cargo feature of this crate (`cuda`,
//! `rocm`, `metal`, `vulkan`): the one place that knows which of them a build has, for the CLI's
//! `--backend` and the desktop app's compute menu.

use burn::tensor::Device;

/// The native backends by feature name, in the order they are offered.
pub const NATIVE_GPUS: [&str; 4] = ["cuda", "rocm", "metal", "vulkan"];

/// The first device of the native backend `name` (one of [`NATIVE_GPUS`]), or `None` when this
/// build was made without its feature.
pub fn native_gpu(name: &str) -> Option<Device> {
    match name {
        #[cfg(feature = "cuda")]
        "cuda" => Some(Device::cuda(0)),
        #[cfg(feature = "rocm")]
        "rocm" => Some(Device::rocm(0)),
        #[cfg(feature = "metal")]
        "metal" => Some(Device::metal(burn::tensor::DeviceKind::DefaultDevice)),
        #[cfg(feature = "vulkan")]
        "vulkan" => Some(Device::vulkan(burn::tensor::DeviceKind::DefaultDevice)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_is_there_exactly_when_its_feature_is() {
        let built = [cfg!(feature = "cuda"), cfg!(feature = "rocm"), cfg!(feature = "metal"), cfg!(feature = "vulkan")];
        for (name, built) in NATIVE_GPUS.iter().zip(built) {
            assert_eq!(native_gpu(name).is_some(), built, "{name}");
        }
        assert!(native_gpu("wgpu").is_none());
    }
}
