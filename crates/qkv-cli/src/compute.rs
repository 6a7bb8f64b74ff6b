//! Where a command computes: a backend by name (`--backend`), and the devices that share every
//! batch of a run (`--devices N` of that backend, `--remote ws://HOST:PORT` for the devices another
//! machine lends with `qkv serve`).

use clap::Args;
use serde::Serialize;

use qkv_model::burn::tensor::Device;

use crate::Failure;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Flex,
    Wgpu,
    Cuda,
    Rocm,
    Metal,
    Vulkan,
}

/// The devices beside the backend's first that take a share of every batch (data parallel).
#[derive(Args, Debug, Clone)]
pub struct SpreadArgs {
    /// Devices of the backend that share every batch (data parallel): each takes a share of the rows, and the
    /// gradients meet on the first, where the optimiser steps. GPU backends only (flex already uses every core).
    #[arg(long, default_value_t = 1)]
    pub devices: usize,
    /// A machine whose devices share every batch too, lent by `qkv serve` running there (repeat for several). Needs
    /// a qkv built with `--features remote`.
    #[arg(long = "remote", value_name = "ws://HOST:PORT")]
    pub remote: Vec<String>,
}

impl Default for SpreadArgs {
    fn default() -> Self {
        Self { devices: 1, remote: Vec::new() }
    }
}

/// A GPU adapter: its name, and whether it is a software rasterizer (wgpu on the CPU), whose
/// figures are not a GPU's.
#[derive(Debug, Clone, Serialize)]
pub struct Adapter {
    pub name: String,
    pub software: bool,
}

impl Adapter {
    /// Refuses a software adapter unless `allowed`: a figure from it is not a GPU's.
    pub fn check(&self, allowed: bool) -> Result<(), Failure> {
        if self.software && !allowed {
            return Err(format!(
                "the adapter is {}, a software rasterizer on the CPU, not a GPU: its figures are no GPU's. Pass \
                 --allow-software to measure it anyway, or run where a GPU and its Vulkan driver are installed",
                self.name
            )
            .into());
        }
        Ok(())
    }
}

/// The devices a run trains on: `home`, where its model lives and the optimiser steps, and
/// `replicas`, which each train a share of every batch on a copy of the model.
#[derive(Debug, Clone)]
pub struct Compute {
    pub backend: Backend,
    pub home: Device,
    pub replicas: Vec<Device>,
}

impl Compute {
    /// The devices `spread` names beside `backend`'s first.
    pub fn new(backend: Backend, spread: &SpreadArgs) -> Result<Self, Failure> {
        let mut devices = backend.devices(spread.devices)?;
        for url in &spread.remote {
            devices.extend(remote_devices(url)?);
        }
        let home = devices.remove(0);
        Ok(Self { backend, home, replicas: devices })
    }

    /// The backend and its first device for reports, with the others counted.
    pub fn describe(&self) -> String {
        let Self { backend, home, replicas } = self;
        match replicas.len() {
            0 => format!("{backend:?} ({home:?})"),
            others => format!("{backend:?} ({home:?} and {others} more, every batch split across them)"),
        }
    }

    /// The adapter the run's first device computes on, as it names itself; `None` for flex
    /// (the CPU), which has none.
    pub fn adapter(&self) -> Option<Adapter> {
        let identity = self.home.clone().without_autodiff().as_dispatch().identity()?;
        // A software rasterizer (lavapipe, llvmpipe, SwiftShader) is no card; the names say so
        // where a runtime does not.
        let by_name = ["llvmpipe", "lavapipe", "swiftshader"].iter().any(|soft| identity.name.to_lowercase().contains(soft));
        Some(Adapter { software: identity.physical.is_none() || by_name, name: identity.name })
    }

    /// The devices one by one, for a line on the terminal when there are several.
    pub fn devices_line(&self) -> Option<String> {
        if self.replicas.is_empty() {
            return None;
        }
        let names: Vec<String> = std::iter::once(&self.home).chain(&self.replicas).map(|d| format!("{d:?}")).collect();
        Some(format!("every batch split across {} devices: {}", names.len(), names.join(", ")))
    }
}

impl Backend {
    pub fn name(self) -> String {
        format!("{self:?}").to_lowercase()
    }

    /// The device a one-device command computes on: the backend's first.
    pub fn device(self) -> Result<Device, Failure> {
        Ok(self.devices(1)?.remove(0))
    }

    /// `count` devices of this backend, its first GPU first. The native GPU backends exist only
    /// in a build with their feature; any other build says how to get one.
    pub fn devices(self, count: usize) -> Result<Vec<Device>, Failure> {
        let devices = match self {
            Backend::Flex if count > 1 => {
                return Err(crate::usage(
                    "--devices is for GPU backends: flex is one device, and a run on it already splits every batch \
                     over the CPU's cores",
                ));
            }
            Backend::Flex => vec![Device::flex()],
            Backend::Wgpu => {
                let first = Device::wgpu_options().init().map_err(|e| {
                    format!("no wgpu device ({e}); without a GPU install Mesa's lavapipe (apt-get install mesa-vulkan-drivers) or use --backend flex")
                })?;
                qkv_model::adapters(first, qkv_model::burn::tensor::DeviceType::Wgpu, count)
            }
            native => qkv_model::native_gpus(&native.name(), count).ok_or_else(|| {
                format!(
                    "this qkv was built without the {name} backend: build it with `cargo build --release -p qkv-cli --features {name}` \
                     (README, \"Scaling up\"), or use --backend wgpu",
                    name = native.name()
                )
            })?,
        };
        if devices.len() < count {
            return Err(format!(
                "--devices {count}: this machine has {} {} device(s); use --devices {}",
                devices.len(),
                self.name(),
                devices.len()
            )
            .into());
        }
        Ok(devices)
    }
}

/// Every device the `qkv serve` at `url` lends. Burn's remote backend runs each operation on
/// that machine; the run's home sends the model and the rows there and gets the gradients back.
fn remote_devices(url: &str) -> Result<Vec<Device>, Failure> {
    if !url.starts_with("ws://") {
        return Err(crate::usage(format!("--remote {url}: expected the WebSocket address `qkv serve` prints, such as ws://gpu-box:3000")));
    }
    #[cfg(feature = "remote")]
    {
        let host = qkv_model::burn::tensor::remote::RemoteHost::websocket(url);
        host.devices()
            .map(|devices| devices.into_vec())
            .map_err(|e| format!("--remote {url}: {e} (`qkv serve` there must come from the same qkv release as this one)").into())
    }
    #[cfg(not(feature = "remote"))]
    Err(without_remote().into())
}

/// Why a build without the `remote` feature cannot lend or borrow devices, and how to get one.
#[cfg(not(feature = "remote"))]
pub fn without_remote() -> String {
    "this qkv was built without remote devices: build it with `cargo build --release -p qkv-cli --features remote` \
     (README, \"Scaling up\")"
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(devices: usize, remote: &[&str]) -> SpreadArgs {
        SpreadArgs { devices, remote: remote.iter().map(|url| url.to_string()).collect() }
    }

    fn error(backend: Backend, spread: &SpreadArgs) -> String {
        Compute::new(backend, spread).expect_err("an error").to_string()
    }

    #[test]
    fn one_device_is_the_default_and_is_described_as_before() {
        let compute = Compute::new(Backend::Flex, &SpreadArgs::default()).unwrap();
        assert!(compute.replicas.is_empty());
        assert_eq!(compute.devices_line(), None);
        assert_eq!(compute.describe(), format!("Flex ({:?})", Device::flex()));
    }

    #[test]
    fn flex_is_one_device_and_says_so() {
        assert!(error(Backend::Flex, &spread(2, &[])).contains("--devices is for GPU backends"));
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn a_build_without_a_native_backend_says_how_to_get_it() {
        let message = Backend::Cuda.device().expect_err("no cuda in this build").to_string();
        assert!(message.contains("--features cuda"), "{message}");
    }

    #[test]
    fn a_remote_machine_is_named_by_its_websocket_address() {
        let message = error(Backend::Flex, &spread(1, &["gpu-box:3000"]));
        assert!(message.contains("--remote gpu-box:3000") && message.contains("ws://"), "{message}");
    }

    #[cfg(not(feature = "remote"))]
    #[test]
    fn a_build_without_remote_devices_says_how_to_get_them() {
        let message = error(Backend::Flex, &spread(1, &["ws://127.0.0.1:3000"]));
        assert!(message.contains("--features remote"), "{message}");
        let serve = crate::serve::run(&crate::serve::ServeArgs { port: 3000, backend: Backend::Flex, devices: 1 });
        assert!(serve.expect_err("no server").to_string().contains("--features remote"));
    }

    #[cfg(feature = "remote")]
    #[test]
    fn an_address_where_nothing_serves_is_an_error_that_names_it() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let message = error(Backend::Flex, &spread(1, &[&format!("ws://127.0.0.1:{port}")]));
        assert!(message.contains(&format!("ws://127.0.0.1:{port}")) && message.contains("qkv serve"), "{message}");
    }
}
