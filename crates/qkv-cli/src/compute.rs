//! Where a command computes, as its flags say: `--backend` names a [`Backend`], and
//! [`SpreadArgs`] the devices that share every batch of a run (`--devices N` of that backend,
//! `--remote ws://HOST:PORT` for the devices another machine lends with `qkv serve`). The
//! backends and their devices are `qkv_compute`'s.

use clap::Args;

pub use qkv_compute::{Adapter, Backend, Compute};

use crate::Failure;

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

impl SpreadArgs {
    /// The compute these flags name beside `backend` (found before the command starts, so the
    /// command line waits for it).
    pub fn compute(&self, backend: Backend) -> Result<Compute, Failure> {
        Ok(pollster::block_on(Compute::spread(backend, self.devices, &self.remote))?)
    }
}

/// Refuses a software adapter unless `allowed`: a figure from it is not a GPU's.
pub fn refuse_software(adapter: &Adapter, allowed: bool) -> Result<(), Failure> {
    if adapter.software && !allowed {
        return Err(format!(
            "the adapter is {}, a software rasterizer on the CPU, not a GPU: its figures are no GPU's. Pass \
             --allow-software to measure it anyway, or run where a GPU and its Vulkan driver are installed",
            adapter.name
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_name_one_device_by_default() {
        let compute = SpreadArgs::default().compute(Backend::Flex).unwrap();
        assert!(compute.replicas.is_empty());
    }

    #[test]
    fn several_flex_devices_are_a_usage_error() {
        let spread = SpreadArgs { devices: 2, remote: Vec::new() };
        let failure = spread.compute(Backend::Flex).expect_err("flex is one device");
        assert_eq!(crate::failure::exit_code(&failure), 2, "{failure}");
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn a_build_without_a_native_backend_fails_the_run_and_says_how_to_get_it() {
        let failure = SpreadArgs::default().compute(Backend::Cuda).expect_err("no cuda in this build");
        assert!(failure.to_string().contains("--features cuda"), "{failure}");
        assert_eq!(crate::failure::exit_code(&failure), 1);
    }

    #[test]
    fn a_software_adapter_is_refused_unless_allowed() {
        let lavapipe = Adapter { name: "llvmpipe (LLVM 15.0.7, 256 bits)".into(), software: true };
        assert!(refuse_software(&lavapipe, false).expect_err("software").to_string().contains("--allow-software"));
        assert!(refuse_software(&lavapipe, true).is_ok());
    }

    #[cfg(not(feature = "remote"))]
    #[test]
    fn serving_without_remote_devices_says_how_to_get_them() {
        let serve = crate::serve::run(&crate::serve::ServeArgs { port: 3000, backend: Backend::Flex, devices: 1 });
        assert!(serve.expect_err("no server").to_string().contains("--features remote"));
    }
}
