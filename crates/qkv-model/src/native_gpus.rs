//! Burn's native GPU backends beside wgpu, each behind a cargo feature of this crate (`cuda`,
//! `rocm`, `metal`, `vulkan`): the one place that knows which of them a build has and how their
//! devices are named, for the CLI's `--backend`/`--devices` and the desktop app's compute menu.

use burn::tensor::Device;

/// The native backends by feature name, in the order they are offered.
pub const NATIVE_GPUS: [&str; 4] = ["cuda", "rocm", "metal", "vulkan"];

/// The first device of the native backend `name` (one of [`NATIVE_GPUS`]), or `None` when this
/// build was made without its feature.
pub fn native_gpu(name: &str) -> Option<Device> {
    native_gpus(name, 1).and_then(|devices| devices.into_iter().next())
}

/// Up to `count` devices of the native backend `name`, its default device first, or `None` when
/// this build was made without its feature. CUDA and ROCm devices are numbered (the driver says
/// at the first operation whether one is missing); Metal and Vulkan list the adapters there are,
/// so fewer than `count` come back on a machine with fewer.
// A build with none of the features has nothing to count.
#[cfg_attr(not(any(feature = "cuda", feature = "rocm", feature = "metal", feature = "vulkan")), allow(unused_variables))]
pub fn native_gpus(name: &str, count: usize) -> Option<Vec<Device>> {
    match name {
        #[cfg(feature = "cuda")]
        "cuda" => Some((0..count.max(1)).map(Device::cuda).collect()),
        #[cfg(feature = "rocm")]
        "rocm" => Some((0..count.max(1)).map(Device::rocm).collect()),
        #[cfg(feature = "metal")]
        "metal" => Some(adapters(Device::metal(burn::tensor::DeviceKind::DefaultDevice), burn::tensor::DeviceType::Metal, count)),
        #[cfg(feature = "vulkan")]
        "vulkan" => Some(adapters(Device::vulkan(burn::tensor::DeviceKind::DefaultDevice), burn::tensor::DeviceType::Vulkan, count)),
        _ => None,
    }
}

/// `first`, then the other adapters of its kind up to `count` in all: how the graphics backends
/// (wgpu among them) name a machine's GPUs.
pub fn adapters(first: Device, kind: burn::tensor::DeviceType, count: usize) -> Vec<Device> {
    if count <= 1 {
        // Listing adapters opens each of them: not for a run that needs one.
        return vec![first];
    }
    let others = Device::enumerate(kind).into_iter().filter(|device| *device != first);
    std::iter::once(first.clone()).chain(others).take(count).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_is_there_exactly_when_its_feature_is() {
        let built = [cfg!(feature = "cuda"), cfg!(feature = "rocm"), cfg!(feature = "metal"), cfg!(feature = "vulkan")];
        for (name, built) in NATIVE_GPUS.iter().zip(built) {
            assert_eq!(native_gpu(name).is_some(), built, "{name}");
            assert_eq!(native_gpus(name, 2).is_some(), built, "{name}");
        }
        assert!(native_gpu("wgpu").is_none());
    }

    #[test]
    fn adapters_start_with_the_first_and_stop_at_count() {
        let first = Device::flex();
        let devices = adapters(first.clone(), burn::tensor::DeviceType::Flex, 3);
        assert_eq!(devices.first(), Some(&first));
        assert!(devices.len() <= 3);
        assert_eq!(adapters(first.clone(), burn::tensor::DeviceType::Flex, 0), vec![first]);
    }
}
