//! The devices each backend has in this build and on this machine.

use burn::tensor::{Device, DeviceType};

use crate::{Backend, ComputeError};

impl Backend {
    /// The backend's first device.
    pub async fn device(self) -> Result<Device, ComputeError> {
        Ok(self.devices(1).await?.remove(0))
    }

    /// `count` devices of this backend, its default device first. CUDA and ROCm devices are
    /// numbered (the driver says at the first operation whether one is missing); wgpu, Metal and
    /// Vulkan list the adapters there are, and fewer than `count` is an error. Async because
    /// the browser opens WebGPU only so; a command line blocks on it.
    pub async fn devices(self, count: usize) -> Result<Vec<Device>, ComputeError> {
        let count = count.max(1);
        let devices = match self {
            Backend::Flex if count > 1 => return Err(ComputeError::OneDevice { backend: self }),
            Backend::Flex => vec![Device::flex()],
            Backend::Wgpu => {
                let first = Device::wgpu_options().init_async().await.map_err(|cause| ComputeError::NoWgpu { cause })?;
                adapters(first, DeviceType::Wgpu, count)
            }
            native => native_gpus(native, count).ok_or(ComputeError::NotBuilt { backend: native })?,
        };
        if devices.len() < count {
            return Err(ComputeError::TooFew { backend: self, asked: count, found: devices.len() });
        }
        Ok(devices)
    }
}

/// Up to `count` devices of the native backend, or `None` when this build was made without it.
// A build with none of the features has nothing to count.
#[cfg_attr(not(any(feature = "cuda", feature = "rocm", feature = "metal", feature = "vulkan")), allow(unused_variables))]
fn native_gpus(backend: Backend, count: usize) -> Option<Vec<Device>> {
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => Some((0..count).map(Device::cuda).collect()),
        #[cfg(feature = "rocm")]
        Backend::Rocm => Some((0..count).map(Device::rocm).collect()),
        #[cfg(feature = "metal")]
        Backend::Metal => Some(adapters(Device::metal(burn::tensor::DeviceKind::DefaultDevice), DeviceType::Metal, count)),
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => Some(adapters(Device::vulkan(burn::tensor::DeviceKind::DefaultDevice), DeviceType::Vulkan, count)),
        _ => None,
    }
}

/// `first`, then the other adapters of its kind up to `count` in all: how the graphics backends
/// (wgpu among them) name a machine's GPUs.
fn adapters(first: Device, kind: DeviceType, count: usize) -> Vec<Device> {
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
    fn a_backend_has_devices_exactly_when_it_is_built() {
        for backend in Backend::NATIVE_GPUS {
            assert_eq!(native_gpus(backend, 1).is_some(), backend.is_built(), "{backend}");
            if !backend.is_built() {
                let message = pollster::block_on(backend.device()).expect_err("not built").to_string();
                assert!(message.contains(&format!("--features {backend}")), "{message}");
            }
        }
        assert!(native_gpus(Backend::Wgpu, 1).is_none());
    }

    #[test]
    fn flex_is_one_device_and_says_so() {
        assert_eq!(pollster::block_on(Backend::Flex.devices(1)).unwrap(), vec![Device::flex()]);
        let error = pollster::block_on(Backend::Flex.devices(2)).expect_err("flex is one device");
        assert!(error.is_usage() && error.to_string().contains("flex is one device"), "{error}");
    }

    #[test]
    fn adapters_start_with_the_first_and_stop_at_count() {
        let first = Device::flex();
        let devices = adapters(first.clone(), DeviceType::Flex, 3);
        assert_eq!(devices.first(), Some(&first));
        assert!(devices.len() <= 3);
        assert_eq!(adapters(first.clone(), DeviceType::Flex, 0), vec![first]);
    }
}
