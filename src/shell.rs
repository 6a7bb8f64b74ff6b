//! What the desktop and the browser shells share: the device eframe draws with, and the devices
//! training is offered.

use qkv_compute::{Backend, Compute, ComputeId};
use qkv_model::burn::tensor::Device;
use qkv_model::burn::tensor::wgpu::WgpuSetup;

/// Where the setup is persisted between visits.
pub const SETUP_KEY: &str = "setup";
/// Where the compute chosen by timing (or by the user) is persisted between visits.
pub const COMPUTE_KEY: &str = "compute-choice";

/// A lesson's number as people count (from 1: `--lesson 2`, `?lesson=2`), returned as its index.
pub fn lesson_index(text: &str) -> Result<usize, String> {
    let count = qkv_ui::lessons::LESSONS.len();
    match text.parse::<usize>() {
        Ok(n) if (1..=count).contains(&n) => Ok(n - 1),
        _ => Err(format!("takes a lesson number from 1 to {count}")),
    }
}

/// eframe creates the window's device; Burn trains on the same one, so it must carry what Burn's
/// kernels need (64-bit integers, subgroups, the adapter's full limits), as Burn's own device
/// request would.
pub fn shared_device_options() -> eframe::egui_wgpu::WgpuConfiguration {
    use eframe::wgpu;
    let mut options = eframe::egui_wgpu::WgpuConfiguration::default();
    if let eframe::egui_wgpu::WgpuSetup::CreateNew(create) = &mut options.wgpu_setup {
        create.device_descriptor = std::sync::Arc::new(|adapter: &wgpu::Adapter| wgpu::DeviceDescriptor {
            label: Some("QKV Lab: egui and Burn"),
            required_features: shared_features(adapter.features()),
            required_limits: adapter.limits(),
            memory_hints: wgpu::MemoryHints::MemoryUsage,
            ..Default::default()
        });
    }
    options
}

/// The adapter's features the shared device asks for: all that CubeCL reads from the adapter
/// (it takes the device to have them), less mappable primary buffers (which CubeCL's own device
/// leaves out too) and wgpu's experimental features (ray queries, cooperative matrices, mesh
/// shaders). wgpu refuses a device that asks for one of those without the caller's promise to
/// accept their bugs, and recent cards list some (wgpu-hal 30: cooperative matrices on Metal's
/// Apple7 and Mac2 families, every recent Mac; ray queries where Vulkan or DX12 has them, as on
/// NVIDIA RTX cards): asked for, they stop the window from opening. Neither egui nor the WGSL
/// that Burn compiles here uses them.
fn shared_features(available: eframe::wgpu::Features) -> eframe::wgpu::Features {
    use eframe::wgpu::Features;
    available.difference(Features::MAPPABLE_PRIMARY_BUFFERS | Features::all_experimental_mask())
}

/// Whether a software GPU adapter (lavapipe, SwiftShader) comes before the CPU.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SoftwareGpu {
    /// Natively flex multiplies matrices about ten times faster than lavapipe (measured on this
    /// project's reference machine), so a software GPU is offered second.
    Demote,
    /// In the browser flex runs on one thread without the native SIMD kernels; the page's GPU,
    /// whatever it is, goes first.
    #[cfg_attr(not(target_family = "wasm"), allow(dead_code))]
    Prefer,
}

/// The devices to offer, preferred first, and why the GPU is missing when it is.
pub fn computes(cc: &eframe::CreationContext<'_>, software: SoftwareGpu) -> (Vec<Compute>, Option<String>) {
    let flex = Compute::cpu();
    let Some(render) = &cc.wgpu_render_state else {
        return (vec![flex], Some("no GPU renderer started".into()));
    };
    let info = render.adapter.get_info();
    if info.backend == eframe::wgpu::Backend::Gl {
        // wgpu fell back to OpenGL, which has no compute shaders: in a browser, WebGL for want of
        // WebGPU; on a desktop, for want of a Vulkan, Metal or DX12 driver (a virtual machine).
        let why = if cfg!(target_family = "wasm") {
            "this browser has no WebGPU (the page draws with WebGL)"
        } else {
            "no Vulkan, Metal or DX12 driver answered (the window draws with OpenGL, which cannot train)"
        };
        return (vec![flex], Some(why.into()));
    }
    if info.backend == eframe::wgpu::Backend::Vulkan && Backend::Vulkan.is_built() {
        // A build with Burn's vulkan backend compiles SPIR-V for every Vulkan device, written for
        // the Vulkan features CubeCL turns on in the devices it creates itself (cubecl-wgpu's
        // `request_vulkan_device`: cooperative matrices, 16-bit floats, ...), which eframe's device
        // lacks. Training takes CubeCL's own device on this GPU instead (`Compute::native_gpus`,
        // offered first); the window draws with its own.
        return (vec![flex], None);
    }
    let setup = WgpuSetup {
        instance: render.instance.clone(),
        adapter: render.adapter.clone(),
        device: render.device.clone(),
        queue: render.queue.clone(),
        backend: info.backend,
    };
    match Device::wgpu_options().setup(setup).init() {
        Ok(device) => {
            let gpu = Compute::on(ComputeId::on(Backend::Wgpu, format!("{} ({})", info.name, info.backend)), device);
            let demote = software == SoftwareGpu::Demote && info.device_type == eframe::wgpu::DeviceType::Cpu;
            (if demote { vec![flex, gpu] } else { vec![gpu, flex] }, None)
        }
        Err(e) => (vec![flex], Some(format!("the GPU device cannot train ({e})"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A card that lists experimental features (most desktop cards list ray queries) still gets
    /// a device, with what Burn's kernels read from the adapter.
    #[test]
    fn the_shared_device_asks_for_no_experimental_feature_and_keeps_what_burn_reads() {
        use eframe::wgpu::Features;
        let asked = shared_features(Features::all());
        assert!(!asked.intersects(Features::all_experimental_mask()), "{:?}", asked & Features::all_experimental_mask());
        assert!(!asked.contains(Features::MAPPABLE_PRIMARY_BUFFERS));
        for kept in [Features::SHADER_INT64, Features::SUBGROUP, Features::TIMESTAMP_QUERY, Features::SHADER_FLOAT32_ATOMIC] {
            assert!(asked.contains(kept), "{kept:?}");
        }
    }

    /// The page's options docs/teaching.md may use in its links.
    const OPTIONS: [&str; 8] = ["lesson", "present", "autotrain", "hide", "compute", "worker", "workers", "render"];

    /// Every link in the teacher's page opens what it says: a lesson that exists, options the
    /// page knows, controls `hide=` can hide; its table of keys has every key.
    #[test]
    fn the_teaching_page_links_only_lessons_and_options_the_page_has_and_every_key() {
        let page = include_str!("../docs/teaching.md");
        for (key, what) in qkv_ui::shortcuts::KEYS {
            assert!(page.contains(&format!("| {key} |")), "the keys' table lacks {key} ({what})");
        }
        let links: Vec<&str> = page.split("](").skip(1).filter_map(|rest| rest.split(')').next()).filter(|l| l.contains('?')).collect();
        assert!(links.len() >= qkv_ui::lessons::LESSONS.len(), "a link per lesson: {links:?}");
        for link in links {
            let query = link.split_once('?').map_or("", |(_, q)| q).split('#').next().unwrap_or_default();
            for pair in query.split('&') {
                let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                assert!(OPTIONS.contains(&name), "{link}: the page has no option {name:?}");
                match name {
                    "lesson" => assert!(lesson_index(value).is_ok(), "{link}: no lesson {value}"),
                    "hide" => assert!(qkv_ui::hidden::Hidden::parse(value).is_ok(), "{link}: hide={value}"),
                    _ => {}
                }
            }
        }
    }
}
