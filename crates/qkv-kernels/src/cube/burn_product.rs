//! Burn's matrix product, its launch shape noted (`crate::launches::note_product_shape`) as
//! cubek-matmul configures it, so that a step's table of parallel shapes covers the products
//! too. Read from cubek-matmul
//! 0.3.1's source (the version Cargo.lock pins), not measured: without autotune and without
//! cooperative-matrix instructions (WGSL has none), Burn's `float_matmul` takes cubek's "simple
//! unit" matmul. Each unit computes a register tile of C; a workgroup of 8 planes stages a block
//! of A and B in workgroup memory, Ek values of k at a time, and loops over the whole of k (no
//! split over k):
//!
//! ```text
//! tile       4·p_m × 8 values of C a unit    p_m = 2 below m = 512, else 4
//! stage      Ek = 4·p_k                       p_k = 2 below k = 512, else 4
//! units      8 planes of the device's plane (subgroup) size, as a near-square grid
//! trips      ⌈k / Ek⌉ stages of Ek steps
//! ```
//!
//! A weight's gradient xᵀ·dy has k = the batch's rows: `super::weight_gradient` cuts them into
//! runs, a batch of products, so that its units' loops do not grow with the batch.

use burn::backend::ops::FloatTensorOps;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;

/// `a` [m, k] · `b` [k, n] by Burn, the launch's shape noted first.
pub(crate) fn product(a: CubeTensor, b: CubeTensor) -> CubeTensor {
    let [m, k] = a.meta.shape().dims();
    let n = b.meta.shape()[1];
    note(1, m, n, k, &a);
    Cube::float_matmul(a, b)
}

/// `a` [batches, m, k] · `b` [batches, k, n] by Burn, the launch's shape noted first: one launch,
/// a product a batch (cubek launches the batches as a third axis of workgroups).
pub(crate) fn batched_product(a: CubeTensor, b: CubeTensor) -> CubeTensor {
    let [batches, m, k] = a.meta.shape().dims();
    let n = b.meta.shape()[2];
    note(batches, m, n, k, &a);
    Cube::float_matmul(a, b)
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
