//! Fused training ops for QKV Lab's GPT, each with its own backward pass: causal attention,
//! layer norm, GELU, linear layers, dropout and cross-entropy; and AdamW's update as one pass per parameter.
//!
//! Under autodiff Burn composes these from small tensor ops: attention's softmax alone is five
//! ops, each allocating a tensor of [batch, heads, time, time] and recording a graph node, and the
//! backward pass doubles that. On flex, the CPU backend, every function here is one kernel forward
//! and one backward, spread over the cores, with gemm (the library flex itself multiplies with)
//! for the products. On Burn's cubecl GPUs (wgpu, WebGPU, CUDA, ...) they are CubeCL kernels
//! (`cube`), one to three launches where Burn's composed ops take a dozen or more; linear layers
//! there are a product over the rows flattened: Burn's, or on a GPU emulated on the CPU our own,
//! whichever timed faster on the device ([`choose_product`]). Everywhere else, and for other float types,
//! the same function composes Burn's ops exactly as the model did before, so every backend
//! computes the same thing. `QKV_FUSED=0` in the
//! environment turns the kernels off (for comparisons and for telling a kernel bug from a model
//! bug).
//!
//! What a GPU step costs is counted, not timed ([`LaunchCounter`]: kernel launches, compiled
//! kernels and host waits; `qkv bench --kernels`); on a GPU, [`KernelTimes`] ranks its kernels by
//! time (`qkv bench --kernels --profile`).
//!
//! These are backend extensions in Burn's sense (custom ops with their own backward, reached
//! through `Tensor::try_into_primitive`); see `docs/performance.md` for what is worth sending
//! upstream.

// The CPU kernels write disjoint slices of one buffer from several threads (`parallel`), which
// safe Rust cannot say; every unsafe block says why it is sound (workspace lint `unsafe_code`).
#![allow(unsafe_code)]
// What the browser cannot do (clippy.toml's `disallowed-methods`) is an error in its build.
#![cfg_attr(target_arch = "wasm32", warn(clippy::disallowed_methods))]

mod adamw;
mod adamw_step;
mod attention;
mod cross_entropy;
mod cube;
mod dropout;
mod embed;
mod flex;
mod gelu;
mod kernel_times;
mod launches;
mod layer_norm;
mod linear;
mod math;
mod packed_attention;
mod parallel;
mod token_groups;

pub use adamw::{AdamWUpdates, SumOfSquares, adamw_update};
pub use adamw_step::AdamWStep;
pub use attention::{Mask, attention, repeat_kv_heads};
pub use cross_entropy::cross_entropy;
pub use cube::grid_limit::LaunchTooWide;
pub use cube::product_choice::{Product, ProductChoice, UnknownProduct, choose_product, product_from_env, use_product};
pub use cube::step_size::{StepSize, check_launch_widths};
pub use dropout::{dropout, dropout_added};
pub use embed::embed;
pub use flex::{fused_kernels_enabled, is_flex};
pub use gelu::gelu;
pub use kernel_times::{KernelTime, KernelTimes};
pub use launches::{CountedLaunch, DryRun, LaunchCounter, LaunchShape, ReadBackError, Tally, read_back, read_floats, read_floats_together};
pub use layer_norm::{layer_norm, pre_norm};
pub use linear::linear;
pub use packed_attention::{Projections, Sharing, packed_attention};
pub use token_groups::TokenGroups;

#[cfg(test)]
pub(crate) mod tests {
    use burn::tensor::{Device, Tensor, TensorData};

    /// Values in [-1.5, 1.5) that differ by position and seed; tracked when `device` is.
    pub(crate) fn input<const D: usize>(shape: [usize; D], seed: u64, device: &Device) -> Tensor<D> {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n as u64).map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 1000.0 * 3.0 - 1.5).collect();
        let tensor = Tensor::from_data(TensorData::new(data, shape), device);
        if device.is_autodiff() { tensor.require_grad() } else { tensor }
    }

    /// wgpu's device: Mesa's lavapipe on a machine without a GPU (`apt-get install
    /// mesa-vulkan-drivers`). wgpu registers a device once per process; the tests share it.
    ///
    /// `None` under `QKV_TEST_CPU_ONLY=1`, for the sanitiser runs (scripts/sanitize.sh): they
    /// check our CPU code, cannot see into a GPU, and Mesa's JIT only adds noise. The
    /// comparisons on wgpu are then skipped (and say so), never run on flex in its place.
    pub(crate) fn wgpu() -> Option<Device> {
        if std::env::var_os("QKV_TEST_CPU_ONLY").is_some() {
            eprintln!("QKV_TEST_CPU_ONLY: the comparison on wgpu is skipped");
            return None;
        }
        static GPU: std::sync::OnceLock<Device> = std::sync::OnceLock::new();
        Some(
            GPU.get_or_init(|| {
                Device::wgpu_options().init().unwrap_or_else(|err| panic!("no wgpu adapter ({err}): install Mesa's lavapipe"))
            })
            .clone(),
        )
    }

    /// wgpu's device for the GPU kernels' own tests (`cube`), which scripts/sanitize.sh skips.
    pub(crate) fn gpu() -> Device {
        wgpu().expect("the GPU kernels' tests need wgpu: run them without QKV_TEST_CPU_ONLY")
    }

    /// The devices a fused op is compared on, with autodiff: flex with `on_flex`, then wgpu with
    /// `on_wgpu` unless it is skipped.
    pub(crate) fn flex_and_wgpu<T>(on_flex: T, on_wgpu: T) -> Vec<(Device, T)> {
        let mut devices = vec![(Device::flex().autodiff(), on_flex)];
        devices.extend(wgpu().map(|device| (device.autodiff(), on_wgpu)));
        devices
    }

    pub(crate) fn values<const D: usize>(tensor: Tensor<D>) -> Vec<f32> {
        tensor.into_data().try_to_vec::<f32>().unwrap()
    }

    pub(crate) fn assert_close(a: &[f32], b: &[f32], tolerance: f32, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let allowed = tolerance * (1.0 + y.abs());
            assert!((x - y).abs() <= allowed, "{what}: element {i}: {x} vs {y}");
        }
    }
}
