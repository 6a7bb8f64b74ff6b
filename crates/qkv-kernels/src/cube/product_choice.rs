//! Which matrix product the linear layers take on a cubecl device: Burn's (cubek's, built for
//! GPUs) or ours (`super::product`, built for GPUs emulated on the CPU). Decided by timing both on
//! the device, once, not by the adapter's name: on SwiftShader ours was 7–10× faster, on lavapipe
//! (also a CPU) Burn's was as fast or faster, and on a real GPU Burn's is what its authors tuned.
//! On a graphics card, in a build with the `autotune` feature, Burn's is its autotuned product
//! (`Product::Tuned`); on an emulator (a device CubeCL finds no card behind), and without the
//! feature, its default kernel, whose launches the kernel table can model.
//!
//! The timing is asynchronous (in the browser nothing may block on the device), so it is made
//! where the engine can wait: [`choose_product`], before a session's first step. Until then, and
//! on a device never timed, the layers take Burn's.

use std::fmt;
use std::sync::{Mutex, OnceLock};

use burn::backend::DispatchDevice;
use burn::tensor::{Device, Tensor};
use burn_cubecl::CubeDevice;
use burn_cubecl::tensor::CubeTensor;
use web_time::Instant;

use super::burn_product::{self, Kernel};
use super::{from_cube, product::product, to_cube};
use crate::flex::{Route, route};
use crate::launches::read_back;

/// A matrix product for the linear layers on a cubecl device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Product {
    /// Burn's (cubek's), the kernel cubek picks for the device without measuring.
    Burn,
    /// Burn's, the fastest of its candidate kernels at each kind of product, timed on the device
    /// by Burn's autotune (`super::burn_product`; the `autotune` feature).
    #[cfg(feature = "autotune")]
    Tuned,
    /// Ours: a unit per 8×8 block of the output, in registers, no shared memory or barrier.
    Blocked,
}

impl fmt::Display for Product {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Product::Burn => "Burn's matrix product",
            #[cfg(feature = "autotune")]
            Product::Tuned => "Burn's matrix product, autotuned",
            Product::Blocked => "QKV Lab's blocked matrix product",
        })
    }
}

/// What [`choose_product`] decided, and on what.
#[derive(Debug, Clone, PartialEq)]
pub struct ProductChoice {
    pub product: Product,
    /// Milliseconds a probe product took with Burn's and with ours; `None` when not timed (set
    /// by `QKV_PRODUCT`, or not a cubecl device).
    pub timed_ms: Option<(f64, f64)>,
}

/// Ours must be this many times faster to be chosen: Burn's is tuned for the GPUs it knows, and
/// a probe of one size is not every size the model multiplies.
const MARGIN: f64 = 2.0;

/// The probe: a product the size of a small model's projection over a batch.
const PROBE: [usize; 3] = [1024, 128, 256];

/// The devices timed so far and what each was given.
fn chosen() -> &'static Mutex<Vec<(CubeDevice, ProductChoice)>> {
    static CHOSEN: OnceLock<Mutex<Vec<(CubeDevice, ProductChoice)>>> = OnceLock::new();
    CHOSEN.get_or_init(Default::default)
}

impl Product {
    /// How Burn picks the kernel, where the product is Burn's.
    pub(crate) fn burn_kernel(self) -> Option<Kernel> {
        match self {
            Product::Burn => Some(Kernel::Default),
            #[cfg(feature = "autotune")]
            Product::Tuned => Some(Kernel::Tuned),
            Product::Blocked => None,
        }
    }

    /// Burn's product with `kernel`.
    pub(crate) fn burn(kernel: Kernel) -> Self {
        match kernel {
            Kernel::Default => Product::Burn,
            #[cfg(feature = "autotune")]
            Kernel::Tuned => Product::Tuned,
        }
    }
}

/// `QKV_PRODUCT` names a matrix product this build does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("QKV_PRODUCT={value:?} is not a matrix product of this build: {fix}")]
pub struct UnknownProduct {
    value: String,
    fix: &'static str,
}

/// The product `QKV_PRODUCT` sets, if it sets one (unset or empty: none, the product is timed):
/// `burn`, `blocked`, or `tuned` in a build with the `autotune` feature. Read by [`choose_product`]
/// and the layers; an entry point checks it first so that a typo is an error, not a timing.
pub fn product_from_env() -> Result<Option<Product>, UnknownProduct> {
    let value = std::env::var("QKV_PRODUCT").unwrap_or_default();
    parse_product(&value)
}

fn parse_product(value: &str) -> Result<Option<Product>, UnknownProduct> {
    let unknown = |fix| Err(UnknownProduct { value: value.to_owned(), fix });
    match value {
        "" => Ok(None),
        "burn" => Ok(Some(Product::Burn)),
        "blocked" => Ok(Some(Product::Blocked)),
        #[cfg(feature = "autotune")]
        "tuned" => Ok(Some(Product::Tuned)),
        #[cfg(not(feature = "autotune"))]
        "tuned" => unknown("Burn's autotuned product needs a build with `--features autotune`"),
        _ => unknown("set it to burn or blocked (tuned in a build with `--features autotune`), or unset it"),
    }
}

/// [`product_from_env`], read once; a value this build cannot take sets nothing.
fn pinned() -> Option<Product> {
    static PINNED: OnceLock<Option<Product>> = OnceLock::new();
    *PINNED.get_or_init(|| product_from_env().ok().flatten())
}

/// The cubecl device behind `device`, if it is one.
pub(crate) fn cube_device(device: &Device) -> Option<CubeDevice> {
    match device.clone().without_autodiff().as_dispatch() {
        DispatchDevice::Cube(device) => Some(device.clone()),
        _ => None,
    }
}

/// The product the linear layers take on `device`.
pub(crate) fn product_for(device: &Device) -> Product {
    if let Some(product) = pinned() {
        return product;
    }
    cube_device(device).and_then(|device| recorded(&device)).map_or(Product::Burn, |choice| choice.product)
}

/// Whether `device` was given our product: a GPU emulated on the CPU, where a workgroup's
/// barriers cost most (the reason ours beat Burn's there), so kernels with a barrier-free form
/// take it (`super::layer_norm_serial`).
pub(crate) fn emulated(device: &CubeDevice) -> bool {
    let product = pinned().or_else(|| recorded(device).map(|choice| choice.product));
    product == Some(Product::Blocked)
}

/// What `device` was given, if it was timed or set.
fn recorded(device: &CubeDevice) -> Option<ProductChoice> {
    let chosen = chosen().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    chosen.iter().find(|(d, _)| d == device).map(|(_, choice)| choice.clone())
}

/// Times Burn's product (tuned on a card where the build has autotune, [`burn_kernel_for`]) and
/// ours on `device`, once per device, and gives the linear layers the faster (ours only by
/// [`MARGIN`]); later calls answer what the first decided. On a device without the CubeCL
/// kernels (flex, or with them turned off) there is nothing to choose.
pub async fn choose_product(device: &Device) -> ProductChoice {
    let untimed = |product| ProductChoice { product, timed_ms: None };
    let plain = device.clone().without_autodiff();
    if !matches!(route(&plain, burn::tensor::DType::F32), Route::Cube) {
        return untimed(Product::Burn);
    }
    if let Some(product) = pinned() {
        return untimed(product);
    }
    let Some(cube_device) = cube_device(&plain) else { return untimed(Product::Burn) };
    if let Some(choice) = recorded(&cube_device) {
        return choice;
    }
    let probe_a: Tensor<2> = probe([PROBE[0], PROBE[1]], &plain);
    let probe_b: Tensor<2> = probe([PROBE[1], PROBE[2]], &plain);
    let kernel = burn_kernel_for(&to_cube(probe_a.clone()));
    let burn = time(|| from_cube(burn_product::product(to_cube(probe_a.clone()), to_cube(probe_b.clone()), kernel))).await;
    let ours = time(|| from_cube(product(to_cube(probe_a.clone()), to_cube(probe_b.clone()), None))).await;
    let product = if ours * MARGIN < burn { Product::Blocked } else { Product::burn(kernel) };
    let choice = ProductChoice { product, timed_ms: Some((burn, ours)) };
    chosen().lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push((cube_device, choice.clone()));
    choice
}

/// The kernel Burn's product takes on `like`'s device: tuned on a card where the build has
/// autotune; the default elsewhere, and where CubeCL finds no card behind the device (lavapipe,
/// SwiftShader: an emulator, judged by its counts, where tuning compiles every candidate on the
/// CPU).
#[cfg_attr(not(feature = "autotune"), allow(unused_variables))]
fn burn_kernel_for(like: &CubeTensor) -> Kernel {
    #[cfg(feature = "autotune")]
    if like.client.properties().identity.physical.is_some() {
        return Kernel::Tuned;
    }
    Kernel::Default
}

/// A probe operand of `shape` on `device`: values that vary, written from the host.
fn probe(shape: [usize; 2], device: &Device) -> Tensor<2> {
    let values = (0..shape[0] * shape[1]).map(|i| (i % 17) as f32 / 17.0 - 0.5).collect::<Vec<_>>();
    Tensor::from_data(burn::tensor::TensorData::new(values, shape), device)
}

/// Gives the linear layers on `device` `product` without timing (comparisons, tests), replacing
/// what was chosen before; nothing on a device that is not a cubecl one.
pub fn use_product(device: &Device, product: Product) {
    let Some(device) = cube_device(device) else { return };
    let mut chosen = chosen().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    chosen.retain(|(d, _)| *d != device);
    chosen.push((device, ProductChoice { product, timed_ms: None }));
}

/// Milliseconds one `multiply` takes, after a first one (its kernel compiled): the mean of three,
/// waited for together.
async fn time(multiply: impl Fn() -> Tensor<2>) -> f64 {
    const ROUNDS: usize = 3;
    wait_for(multiply()).await;
    let start = Instant::now();
    let mut last = multiply();
    for _ in 1..ROUNDS {
        last = multiply();
    }
    wait_for(last).await;
    start.elapsed().as_secs_f64() * 1e3 / ROUNDS as f64
}

/// Waits until `tensor` is computed. Its values are taken out of the data read back: the data
/// can come back before the device has written them, and only reading them waits.
async fn wait_for(tensor: Tensor<2>) {
    if let Ok(data) = read_back(tensor).await {
        let _ = data.try_to_vec::<f32>();
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::{Product, ProductChoice, choose_product, parse_product, product_for};
    use crate::tests::gpu;

    /// `QKV_PRODUCT` sets a product this build has; unset or empty, none; anything else is an error
    /// that says how to mend it, `tuned` too where the build has no autotune.
    #[test]
    fn the_products_environment_names_only_this_build_s_products() {
        assert_eq!(parse_product(""), Ok(None));
        assert_eq!(parse_product("burn"), Ok(Some(Product::Burn)));
        assert_eq!(parse_product("blocked"), Ok(Some(Product::Blocked)));
        let typo = parse_product("fastest").expect_err("not a product").to_string();
        assert!(typo.contains("QKV_PRODUCT=\"fastest\"") && typo.contains("burn or blocked"), "{typo}");
        #[cfg(feature = "autotune")]
        assert_eq!(parse_product("tuned"), Ok(Some(Product::Tuned)));
        #[cfg(not(feature = "autotune"))]
        assert!(parse_product("tuned").expect_err("no autotune").to_string().contains("--features autotune"));
    }

    #[test]
    fn a_cubecl_device_is_timed_once_and_keeps_its_product() {
        let device = gpu().autodiff();
        let first = pollster::block_on(choose_product(&device));
        if super::pinned().is_none() {
            let (burn, ours) = first.timed_ms.expect("timed");
            assert!(burn > 0.0 && ours > 0.0, "{first:?}");
        }
        assert_eq!(pollster::block_on(choose_product(&device)), first, "the first choice stays");
        assert_eq!(product_for(&device), first.product);
        // Flex multiplies with its own kernels: nothing to choose.
        let flex = pollster::block_on(choose_product(&Device::flex()));
        assert_eq!(flex, ProductChoice { product: super::Product::Burn, timed_ms: None });
    }
}
