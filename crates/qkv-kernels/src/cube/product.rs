//! A matrix product for GPUs emulated on the CPU (SwiftShader, the browser's WebGPU where no GPU
//! is at hand): `C = A·B (+ bias)`, each unit computing a 4×4 block of C in registers.
//!
//! Why a product of our own: Burn's products (cubek's) are built for GPUs, with shared memory,
//! barriers and many units per block. An emulator runs a workgroup's units four to a SIMD
//! vector and suspends them at every barrier; there a 64×192 product took 50 ms, and the
//! products were four-fifths of a training step. A block of 4×4 in registers reads 8 values for
//! 16 multiply-adds (a unit per value reads 2 per multiply-add) and needs no barrier. Which
//! product a device gets is decided by timing both on it (`crate::cube::linear`), not by its name.
//!
//! A and B are read through their strides, so a transposed operand (the backward pass's Wᵀ and
//! xᵀ) is used as it lies; C is written row-major.

use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::{empty, note, units};

/// The side of the block of C a unit computes.
const TILE: usize = 8;

/// Block (row0.., col0..) of `c = a·b (+ bias)` over one run of k: unit u takes run u / blocks
/// (values `run`·s to `run`·(s + 1) of k) and writes that run's partial sum to c[s] (one run: c
/// itself). Rows and columns past the edge read the last row or column (so no load is out of
/// bounds and no branch is taken in the loop) and are not written.
#[cube(launch)]
fn product_kernel(a: &Tensor<f32>, b: &Tensor<f32>, bias: &Tensor<f32>, c: &mut Tensor<f32>, run: u32, #[comptime] with_bias: bool) {
    let (m, k, n) = (a.shape(0), a.shape(1), b.shape(1));
    let blocks_n = n.div_ceil(TILE);
    let blocks = m.div_ceil(TILE) * blocks_n;
    let (split, block) = (ABSOLUTE_POS / blocks, ABSOLUTE_POS % blocks);
    let k_start = split * run as usize;
    if k_start >= k {
        terminate!();
    }
    let k_end = min(k, k_start + run as usize);
    let row0 = (block / blocks_n) * TILE;
    let col0 = (block % blocks_n) * TILE;
    let (a_row, a_col) = (a.stride(0), a.stride(1));
    let (b_row, b_col) = (b.stride(0), b.stride(1));
    let mut a_at = Array::<usize>::new(TILE);
    let mut b_at = Array::<usize>::new(TILE);
    #[unroll]
    for r in 0..TILE {
        a_at[r] = min(row0 + r, m - 1) * a_row;
        b_at[r] = min(col0 + r, n - 1) * b_col;
    }
    let mut acc = Array::<f32>::new(TILE * TILE);
    #[unroll]
    for x in 0..TILE * TILE {
        acc[x] = 0.0f32;
    }
    let mut a_values = Array::<f32>::new(TILE);
    let mut b_values = Array::<f32>::new(TILE);
    for kk in k_start..k_end {
        #[unroll]
        for r in 0..TILE {
            a_values[r] = a[a_at[r] + kk * a_col];
            b_values[r] = b[b_at[r] + kk * b_row];
        }
        #[unroll]
        for r in 0..TILE {
            #[unroll]
            for s in 0..TILE {
                acc[r * TILE + s] += a_values[r] * b_values[s];
            }
        }
    }
    #[unroll]
    for s in 0..TILE {
        let col = col0 + s;
        if col < n {
            let mut add = 0.0f32;
            if with_bias {
                add = bias[col];
            }
            #[unroll]
            for r in 0..TILE {
                let row = row0 + r;
                if row < m {
                    c[split * m * n + row * n + col] = acc[r * TILE + s] + add;
                }
            }
        }
    }
}

/// `a [m, k] · b [k, n] (+ bias [n])`, row-major [m, n]; `a` and `b` in any strides.
pub(crate) fn product(a: CubeTensor, b: CubeTensor, bias: Option<CubeTensor>) -> CubeTensor {
    let [m, k] = a.meta.shape().dims();
    let n = b.meta.shape()[1];
    launch(a, b, bias, k.max(1), [m, n].into())
}

/// The partial sums of `a [m, k] · b [k, n]` over runs of `run` values of k (the last may be
/// shorter), as [⌈k / run⌉, m, n]: one launch, a unit looping over one run.
pub(crate) fn product_in_runs(a: CubeTensor, b: CubeTensor, run: usize) -> CubeTensor {
    let [m, k] = a.meta.shape().dims();
    let n = b.meta.shape()[1];
    launch(a, b, None, run, [k.div_ceil(run), m, n].into())
}

/// One launch of [`product_kernel`] into a new tensor of `shape` (⌈k / run⌉·m·n values).
fn launch(a: CubeTensor, b: CubeTensor, bias: Option<CubeTensor>, run: usize, shape: burn::tensor::Shape) -> CubeTensor {
    let [m, k] = a.meta.shape().dims();
    let [k_b, n] = b.meta.shape().dims();
    assert_eq!(k, k_b, "product: [{m}, {k}] · [{k_b}, {n}]");
    assert!(run > 0, "a product in runs of 0");
    let runs = k.div_ceil(run).max(1);
    let c = empty(&a, shape);
    let with_bias = bias.is_some();
    // Unread without a bias: a one-value buffer fills the slot.
    let bias = bias.map(super::contiguous).unwrap_or_else(|| empty(&a, [1]));
    let client = a.client.clone();
    let (cube_count, cube_dim) = units(&client, runs * m.div_ceil(TILE) * n.div_ceil(TILE));
    // A unit loops over its run of k, reading a row of its block of A and of B each trip.
    note(&cube_count, cube_dim, run.min(k), m * k + k * n + if with_bias { n } else { 0 }, runs * m * n);
    product_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        a.into_tensor_arg(),
        b.into_tensor_arg(),
        bias.into_tensor_arg(),
        c.clone().into_tensor_arg(),
        run as u32,
        with_bias,
    );
    c
}

#[cfg(test)]
mod tests {
    use burn::tensor::Tensor;

    use super::product;
    use crate::cube::{from_cube, to_cube};
    use crate::tests::{assert_close, gpu, input, values};

    #[test]
    fn products_match_burns() {
        let device = gpu();
        // Edges not a multiple of the block, a transposed left and right operand, a bias.
        for (m, k, n) in [(1, 1, 1), (5, 7, 9), (33, 64, 65), (64, 3, 8)] {
            let a: Tensor<2> = input([m, k], 1, &device);
            let b: Tensor<2> = input([k, n], 2, &device);
            let bias: Tensor<1> = input([n], 3, &device);
            let expected = values(a.clone().matmul(b.clone()) + bias.clone().unsqueeze());
            let ours: Tensor<2> = from_cube(product(to_cube(a.clone()), to_cube(b.clone()), Some(to_cube(bias))));
            assert_close(&values(ours), &expected, 1e-5, &format!("[{m}, {k}]·[{k}, {n}] + bias"));
            let a_t: Tensor<2> = input([k, m], 4, &device);
            let b_t: Tensor<2> = input([n, k], 5, &device);
            let expected = values(a_t.clone().transpose().matmul(b_t.clone().transpose()));
            let ours: Tensor<2> = from_cube(product(to_cube(a_t.transpose()), to_cube(b_t.transpose()), None));
            assert_close(&values(ours), &expected, 1e-5, &format!("[{k}, {m}]ᵀ·[{n}, {k}]ᵀ"));
        }
    }

    /// Times Burn's product and ours on the classroom model's shapes, on whatever adapter wgpu
    /// finds (`VK_DRIVER_FILES` picks one): `cargo test -p qkv-kernels --lib product_timing --
    /// --ignored --nocapture`.
    #[test]
    #[ignore = "a timing, for choosing: prints, asserts nothing"]
    fn product_timing() {
        let device = gpu();
        for (m, k, n, transposed) in [(1024, 64, 192, false), (1024, 256, 64, false), (1024, 64, 65, false), (64, 1024, 192, true)] {
            let a: Tensor<2> = if transposed { input([k, m], 1, &device).transpose() } else { input([m, k], 1, &device) };
            let b: Tensor<2> = input([k, n], 2, &device);
            let time = |f: &dyn Fn() -> Tensor<2>| {
                values(f());
                let start = std::time::Instant::now();
                let rounds = 5;
                let mut last = None;
                for _ in 0..rounds {
                    last = Some(f());
                }
                values(last.unwrap());
                start.elapsed().as_secs_f64() * 1e3 / rounds as f64
            };
            let burn = time(&|| a.clone().matmul(b.clone()));
            let ours = time(&|| from_cube(product(to_cube(a.clone()), to_cube(b.clone()), None)));
            println!("[{m}x{k}]{}·[{k}x{n}]: burn {burn:.2} ms, ours {ours:.2} ms", if transposed { "ᵀ" } else { "" });
        }
    }
}
