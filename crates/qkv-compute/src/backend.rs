//! Burn's backends by name (their devices: `devices.rs`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A backend of Burn that trains: the CPU's, wgpu (every GPU, and WebGPU in the browser), and
/// the native GPU backends, each in a build with its cargo feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The CPU, through Burn's flex.
    Flex,
    /// The GPU through wgpu (Vulkan, Metal, DirectX 12; WebGPU in the browser).
    Wgpu,
    /// NVIDIA's GPU through Burn's CUDA backend (a build with `--features cuda`).
    Cuda,
    /// AMD's GPU through Burn's ROCm backend (`--features rocm`).
    Rocm,
    /// Apple's GPU through Burn's Metal backend (`--features metal`).
    Metal,
    /// The GPU through Burn's Vulkan backend with SPIR-V shaders (`--features vulkan`).
    Vulkan,
}

impl Backend {
    /// The native GPU backends, in the order a shell offers them.
    pub const NATIVE_GPUS: [Backend; 4] = [Backend::Cuda, Backend::Rocm, Backend::Metal, Backend::Vulkan];

    /// Every backend.
    pub const ALL: [Backend; 6] = [Backend::Flex, Backend::Wgpu, Backend::Cuda, Backend::Rocm, Backend::Metal, Backend::Vulkan];

    /// The backend `name` names: its [`Self::name`], or `webgpu`, the page's word for wgpu in
    /// its address (`?compute=webgpu`). The one table of backend names; `None` for any other.
    pub fn from_name(name: &str) -> Option<Backend> {
        match name {
            "webgpu" => Some(Backend::Wgpu),
            name => Self::ALL.into_iter().find(|backend| backend.name() == name),
        }
    }

    /// Its name on command lines and in addresses, which is also its cargo feature.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Flex => "flex",
            Backend::Wgpu => "wgpu",
            Backend::Cuda => "cuda",
            Backend::Rocm => "rocm",
            Backend::Metal => "metal",
            Backend::Vulkan => "vulkan",
        }
    }

    /// Whether this build has the backend (flex and wgpu always; the others with their feature).
    pub fn is_built(self) -> bool {
        match self {
            Backend::Flex | Backend::Wgpu => true,
            Backend::Cuda => cfg!(feature = "cuda"),
            Backend::Rocm => cfg!(feature = "rocm"),
            Backend::Metal => cfg!(feature = "metal"),
            Backend::Vulkan => cfg!(feature = "vulkan"),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_cargo_features_and_read_back() {
        for backend in [Backend::Flex, Backend::Wgpu].into_iter().chain(Backend::NATIVE_GPUS) {
            let json = serde_json::to_string(&backend).unwrap();
            assert_eq!(json, format!("\"{}\"", backend.name()));
            assert_eq!(serde_json::from_str::<Backend>(&json).unwrap(), backend);
            assert_eq!(Backend::from_name(backend.name()), Some(backend));
        }
        assert_eq!(Backend::from_name("webgpu"), Some(Backend::Wgpu), "the page's address word");
        assert_eq!(Backend::from_name("tpu"), None);
    }
}
