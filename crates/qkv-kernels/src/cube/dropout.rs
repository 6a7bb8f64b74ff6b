//! Dropout on a cubecl GPU with flex's counter-based mask (`crate::dropout`): the same hash of
//! (seed, position), so a seed drops the same elements on either device, in one launch forward
//! and one backward (the mask is recomputed, not stored). Burn's dropout draws a random tensor,
//! compares and multiplies: three or four launches forward, and its mask is Burn's generator's.

use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::{contiguous, empty, note, units};

/// The mask's hash, as flex computes it (murmur3's finaliser, keyed by the seed's two halves).
#[cube]
fn hash(seed_low: u32, seed_high: u32, position: u32) -> u32 {
    let mut h = (position * 0x9E37_79B9u32) ^ seed_low;
    h ^= h >> 16u32;
    h *= 0x85EB_CA6Bu32;
    h ^= h >> 13u32;
    h *= 0xC2B2_AE35u32;
    h ^= h >> 16u32;
    h ^= seed_high;
    h *= 0x27D4_EB2Du32;
    h ^ (h >> 15u32)
}

/// y = x·scale where the hash of (seed, first + i) reaches `threshold`, else 0; plus
/// `residual` when `added` (unread otherwise).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn dropout_kernel(
    x: &Tensor<f32>,
    residual: &Tensor<f32>,
    y: &mut Tensor<f32>,
    seed_low: u32,
    seed_high: u32,
    first: u32,
    threshold: u32,
    scale: f32,
    #[comptime] added: bool,
) {
    let i = ABSOLUTE_POS;
    if i >= x.len() {
        terminate!();
    }
    let mut value = f32::new(0.0);
    if hash(seed_low, seed_high, first + i as u32) >= threshold {
        value = x[i] * scale;
    }
    if added {
        value += residual[i];
    }
    y[i] = value;
}

/// `residual + x ⊙ mask · scale` (`x ⊙ mask · scale` without a residual) in one launch: the
/// forward pass, a residual branch's dropout with its skip, and the backward pass on the gradient.
fn launch(x: CubeTensor, residual: Option<CubeTensor>, seed: u64, first: u32, threshold: u32, scale: f32) -> CubeTensor {
    let x = contiguous(x);
    let n = x.meta.shape().num_elements();
    let y = empty(&x, x.meta.shape().clone());
    let client = x.client.clone();
    let (cube_count, cube_dim) = units(&client, n);
    let added = residual.is_some();
    note(&cube_count, cube_dim, 1, if added { 2 * n } else { n }, n);
    // Unread without a residual; x fills the slot.
    let residual = residual.map_or_else(|| x.clone(), contiguous);
    dropout_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        x.into_tensor_arg(),
        residual.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        seed as u32,
        (seed >> 32) as u32,
        first,
        threshold,
        scale,
        added,
    );
    y
}

/// `residual + x ⊙ mask · scale` in one launch: a residual branch's dropout and its skip.
pub(crate) fn apply_added(x: CubeTensor, residual: CubeTensor, seed: u64, first: u32, threshold: u32, scale: f32) -> CubeTensor {
    launch(x, Some(residual), seed, first, threshold, scale)
}

/// `x ⊙ mask · scale`: the forward pass, and the backward pass on the gradient.
pub(crate) fn apply(x: CubeTensor, seed: u64, first: u32, threshold: u32, scale: f32) -> CubeTensor {
    launch(x, None, seed, first, threshold, scale)
}
