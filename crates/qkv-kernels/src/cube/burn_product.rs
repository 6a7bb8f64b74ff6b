//! Burn's matrix product, with one of two of Burn's ways to pick its kernel ([`Kernel`]):
//!
//! - **Default**: the kernel cubek picks for the device without measuring. Its launch shape is
//!   noted (`crate::launches::note_product_shape`) as cubek-matmul configures it, so that a
//!   step's table of parallel shapes covers the products too. Read from cubek-matmul 0.3.1's
//!   source (the version Cargo.lock pins), not measured: without cooperative-matrix instructions
//!   (WGSL has none), cubek takes its "simple unit" matmul. Each unit computes a register tile of
//!   C; a workgroup of 8 planes stages a block of A and B in workgroup memory, Ek values of k at
//!   a time, and loops over the whole of k (no split over k):
//!
//!   ```text
//!   tile       4·p_m × 8 values of C a unit    p_m = 2 below m = 512, else 4
//!   stage      Ek = 4·p_k                       p_k = 2 below k = 512, else 4
//!   units      8 planes of the device's plane (subgroup) size, as a near-square grid
//!   trips      ⌈k / Ek⌉ stages of Ek steps
//!   ```
//!
//! - **Tuned** (the `autotune` feature): Burn's autotune. The first product of a kind (its sizes
//!   rounded to powers of two, its layouts and types) times Burn's candidate kernels on the device
//!   and keeps the fastest; later ones of that kind launch it. CubeCL keeps the choices in memory, a
//!   process and device at a time (its on-disk cache is a feature this build leaves off), so each
//!   run tunes again at its first step. Which kernel won is the device's, so its launches are
//!   counted without a shape; so are the default kernel's on a device with cooperative-matrix
//!   instructions (the `vulkan` and `metal` builds on a card that has them), where cubek takes
//!   its tensor-core kernel instead.
//!
//! A weight's gradient xᵀ·dy has k = the batch's rows: `super::weight_gradient` cuts them into
//! runs, a batch of products, so that its units' loops do not grow with the batch.

use burn_cubecl::kernel::matmul::{MatmulStrategy, matmul};
use burn_cubecl::tensor::CubeTensor;

/// How Burn picks the kernel of a product (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// cubek's pick for the device, unmeasured; its launch shape is modelled.
    Default,
    /// The fastest of Burn's candidates on the device, timed by Burn's autotune.
    #[cfg(feature = "autotune")]
    Tuned,
}

impl Kernel {
    fn strategy(self) -> MatmulStrategy {
        match self {
            Kernel::Default => MatmulStrategy::Cube,
            #[cfg(feature = "autotune")]
            Kernel::Tuned => MatmulStrategy::Autotune,
        }
    }
}

/// `a` [m, k] · `b` [k, n] by Burn with `kernel`, the launch's shape noted first where it is known.
pub(crate) fn product(a: CubeTensor, b: CubeTensor, kernel: Kernel) -> CubeTensor {
    let [m, k] = a.meta.shape().dims();
    let n = b.meta.shape()[1];
    multiply(a, b, kernel, [1, m, n, k])
}

/// `a` [batches, m, k] · `b` [batches, k, n] by Burn with `kernel`, the launch's shape noted first
/// where it is known: one launch, a product a batch (cubek launches the batches as a third axis of
/// workgroups).
pub(crate) fn batched_product(a: CubeTensor, b: CubeTensor, kernel: Kernel) -> CubeTensor {
    let [batches, m, k] = a.meta.shape().dims();
    let n = b.meta.shape()[2];
    multiply(a, b, kernel, [batches, m, n, k])
}

/// The product of `[batches, m, n, k]`, its shape noted where the kernel is the modelled one.
fn multiply(a: CubeTensor, b: CubeTensor, kernel: Kernel, [batches, m, n, k]: [usize; 4]) -> CubeTensor {
    if kernel == Kernel::Default && a.client.properties().features.matmul.cmma.is_empty() {
        note(batches, m, n, k, &a);
    } else {
        crate::launches::unknown_product_shape();
    }
    let dtype = a.dtype;
    // The same call as Burn's `float_matmul`, with the strategy named rather than the build's
    // default (which is autotune where the build has it).
    matmul(a, b, None, kernel.strategy(), dtype).expect("every strategy takes plain f32 operands")
}

/// Notes the launch of `batches` [m, k] · [k, n] products on `like`'s device.
fn note(batches: usize, m: usize, n: usize, k: usize, like: &CubeTensor) {
    let plane = like.client.properties().hardware.plane_size_min.max(1) as usize;
    let shape = UnitLaunch::of(m, n, k, plane);
    crate::launches::note_product_shape(crate::launches::LaunchShape {
        threads: (batches * shape.workgroups * shape.units) as u64,
        serial_trips: shape.trips as u64,
        bytes_read: 4 * (batches * (m * k + k * n)) as u64,
        bytes_written: 4 * (batches * m * n) as u64,
    });
}

/// How cubek-matmul's simple unit matmul launches an [m, k] · [k, n] product (see the module);
/// noted as a `crate::launches::LaunchShape`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UnitLaunch {
    workgroups: usize,
    units: usize,
    trips: usize,
}

impl UnitLaunch {
    fn of(m: usize, n: usize, k: usize, plane: usize) -> Self {
        let scale = |axis: usize| if axis < 512 { 2 } else { 4 };
        let units = 8 * plane;
        let (rows, columns) = near_square(units);
        let (block_m, block_n, stage_k) = (rows * 4 * scale(m), columns * 8, 4 * scale(k));
        Self { workgroups: m.div_ceil(block_m) * n.div_ceil(block_n), units, trips: k.div_ceil(stage_k) * stage_k }
    }
}

/// The factor pair of `n` nearest a square, the larger first.
fn near_square(n: usize) -> (usize, usize) {
    let mut a = n.isqrt().max(1);
    while !n.is_multiple_of(a) {
        a -= 1;
    }
    (n / a, a)
}

#[cfg(test)]
mod tests {
    use super::{UnitLaunch, near_square};

    /// Planes of 32 make 256 units in 16 × 16; a tile of 8 × 8 (m < 512) or 16 × 8 values, so a
    /// workgroup covers 128 or 256 rows and 128 columns; stages of 8 or 16 values of k.
    #[test]
    fn the_launch_follows_cubek_s_selection() {
        assert_eq!(near_square(256), (16, 16));
        assert_eq!(near_square(32), (8, 4));
        assert_eq!(UnitLaunch::of(384, 1152, 16_384, 32), UnitLaunch { workgroups: 3 * 9, units: 256, trips: 16_384 });
        assert_eq!(UnitLaunch::of(16_384, 384, 384, 32), UnitLaunch { workgroups: 64 * 3, units: 256, trips: 384 });
        assert_eq!(UnitLaunch::of(100, 100, 100, 32), UnitLaunch { workgroups: 1, units: 256, trips: 104 });
    }
}
