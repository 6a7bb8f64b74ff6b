//! Why a backend has no device to give.

use crate::Backend;

#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    /// Several devices of the CPU backend were asked for.
    #[error(
        "{backend} is one device, and a run on it already splits every batch over the CPU's cores: several devices \
         (--devices) are for GPU backends"
    )]
    OneDevice { backend: Backend },
    /// wgpu found no adapter, or could not open it.
    #[error(
        "no wgpu device ({cause}); without a GPU install Mesa's lavapipe (apt-get install mesa-vulkan-drivers) or \
         use the flex backend"
    )]
    NoWgpu {
        #[source]
        cause: burn::tensor::wgpu::WgpuInitError,
    },
    /// A native GPU backend this build was made without.
    #[error(
        "this build has no {backend} backend: build it with `--features {backend}` (docs/scaling.md), or use \
         wgpu"
    )]
    NotBuilt { backend: Backend },
    /// Fewer devices than asked for.
    #[error("{asked} {backend} devices asked for, but this machine has {found}: ask for {found}")]
    TooFew { backend: Backend, asked: usize, found: usize },
    /// A remote machine named by something other than a WebSocket address.
    #[error("remote devices at {url}: expected the WebSocket address `qkv serve` prints, such as ws://gpu-box:3000")]
    RemoteAddress { url: String },
    /// The remote machine did not answer, or refused.
    #[cfg(feature = "remote")]
    #[error("remote devices at {url}: {cause} (`qkv serve` there must come from the same qkv release as this one)")]
    Remote {
        url: String,
        #[source]
        cause: burn::tensor::remote::ConnectError,
    },
    /// Remote devices asked of a build without them.
    #[error(
        "this build has no remote devices: build it with `--features remote` (docs/scaling.md), e.g. \
         `cargo build --release -p qkv-cli --features remote`"
    )]
    NoRemote,
}

impl ComputeError {
    /// Whether the request itself cannot be (a CLI exits 2 for it), as opposed to this machine
    /// or build lacking what it asks for.
    pub fn is_usage(&self) -> bool {
        matches!(self, ComputeError::OneDevice { .. } | ComputeError::RemoteAddress { .. })
    }
}
