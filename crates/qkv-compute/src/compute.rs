//! The compute a run trains on: its backend, its devices, and its name for people.

use burn::tensor::Device;
use serde::Serialize;

use crate::{Backend, ComputeError, ComputeId};

/// Where a run trains: `home`, where its model lives and the optimiser steps, and `replicas`,
/// which each train a share of every batch on a copy of the model (none in the app).
#[derive(Debug, Clone)]
pub struct Compute {
    /// Which compute it is (its backend, its adapter), as the protocol and the saved choice
    /// name it.
    pub id: ComputeId,
    pub home: Device,
    pub replicas: Vec<Device>,
}

/// A GPU adapter: its name, and whether it is a software rasterizer (wgpu on the CPU), whose
/// figures are not a GPU's.
#[derive(Debug, Clone, Serialize)]
pub struct Adapter {
    pub name: String,
    pub software: bool,
}

impl Compute {
    /// A device a shell made itself (the window's GPU, shared with egui), as `id` names it.
    pub fn on(id: ComputeId, device: Device) -> Self {
        Self { id, home: device, replicas: Vec::new() }
    }

    /// The CPU's compute, as the shells offer it.
    pub fn cpu() -> Self {
        Self::on(ComputeId::cpu(), Device::flex())
    }

    pub fn backend(&self) -> Backend {
        self.id.backend
    }

    /// Its name for people, as the compute list shows it.
    pub fn label(&self) -> String {
        self.id.to_string()
    }

    /// The backend's first device.
    pub async fn first(backend: Backend) -> Result<Self, ComputeError> {
        Self::spread(backend, 1, &[]).await
    }

    /// `count` devices of `backend`, then every device the `qkv serve` at each of `remote` lends
    /// (Burn's remote backend runs each operation on that machine; the home sends the model and
    /// the rows there and gets the gradients back).
    pub async fn spread(backend: Backend, count: usize, remote: &[String]) -> Result<Self, ComputeError> {
        let mut devices = backend.devices(count).await?;
        for url in remote {
            devices.extend(remote_devices(url)?);
        }
        let home = devices.remove(0);
        let id = match backend {
            Backend::Flex => ComputeId::cpu(),
            gpu => ComputeId::first(gpu),
        };
        Ok(Self { id, home, replicas: devices })
    }

    /// The first device of every native GPU backend this build has: a build with one is made
    /// for that GPU, so a shell offers these first.
    pub async fn native_gpus() -> Vec<Compute> {
        let mut computes = Vec::new();
        for backend in Backend::NATIVE_GPUS.into_iter().filter(|backend| backend.is_built()) {
            computes.extend(Self::first(backend).await.ok());
        }
        computes
    }

    /// The backend and its first device for reports, with the others counted.
    pub fn describe(&self) -> String {
        let Self { id, home, replicas } = self;
        let backend = id.backend;
        match replicas.len() {
            0 => format!("{backend:?} ({home:?})"),
            others => format!("{backend:?} ({home:?} and {others} more, every batch split across them)"),
        }
    }

    /// The adapter the first device computes on, as it names itself; `None` for flex (the
    /// CPU), which has none.
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

/// Every device the `qkv serve` at `url` lends.
fn remote_devices(url: &str) -> Result<Vec<Device>, ComputeError> {
    if !url.starts_with("ws://") {
        return Err(ComputeError::RemoteAddress { url: url.to_string() });
    }
    #[cfg(feature = "remote")]
    {
        let host = burn::tensor::remote::RemoteHost::websocket(url);
        host.devices().map(|devices| devices.into_vec()).map_err(|cause| ComputeError::Remote { url: url.to_string(), cause })
    }
    #[cfg(not(feature = "remote"))]
    Err(ComputeError::NoRemote)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_device_is_the_default_and_is_described_as_before() {
        let compute = pollster::block_on(Compute::first(Backend::Flex)).unwrap();
        assert!(compute.replicas.is_empty());
        assert_eq!(compute.label(), "flex (CPU)");
        assert_eq!(compute.devices_line(), None);
        assert_eq!(compute.describe(), format!("Flex ({:?})", Device::flex()));
        assert!(compute.adapter().is_none(), "the CPU has no adapter");
    }

    #[test]
    fn a_remote_machine_is_named_by_its_websocket_address() {
        let error = pollster::block_on(Compute::spread(Backend::Flex, 1, &["gpu-box:3000".into()])).expect_err("not a WebSocket address");
        let message = error.to_string();
        assert!(error.is_usage() && message.contains("gpu-box:3000") && message.contains("ws://"), "{message}");
    }

    #[cfg(not(feature = "remote"))]
    #[test]
    fn a_build_without_remote_devices_says_how_to_get_them() {
        let error = pollster::block_on(Compute::spread(Backend::Flex, 1, &["ws://127.0.0.1:3000".into()])).expect_err("no remote devices");
        assert!(error.to_string().contains("--features remote"), "{error}");
    }

    #[cfg(feature = "remote")]
    #[test]
    fn an_address_where_nothing_serves_is_an_error_that_names_it() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let error = pollster::block_on(Compute::spread(Backend::Flex, 1, &[format!("ws://127.0.0.1:{port}")])).expect_err("nothing serves");
        let message = error.to_string();
        assert!(message.contains(&format!("ws://127.0.0.1:{port}")) && message.contains("qkv serve"), "{message}");
    }
}
