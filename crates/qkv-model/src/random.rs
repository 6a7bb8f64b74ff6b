//! The model's own random numbers. Burn's backends share one generator per process, so weights
//! drawn from it depend on whatever else draws at the same time (parallel tests, a second run in
//! the app); the model draws from its seed instead: the same seed gives the same weights on every
//! backend and whatever runs beside it.

use burn::module::{Param, ParamId};
use burn::tensor::{Device, Tensor, TensorData};

/// Sebastiano Vigna's SplitMix64 finaliser: well-spread seeds from consecutive numbers.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Which way initial weights are drawn: 1, tensor after tensor in the order the model asks for
/// them; 2, each from its name and shape ([`InitialWeights`]). Saved results say which they were
/// trained with, so that results from different schemes are never paired.
pub const INITIAL_WEIGHTS_SCHEME: u32 = 2;

/// A model's initial weights, each tensor drawn from the seed and its own name and shape: two
/// models of one seed start every tensor they have in common (same name, same shape) from the
/// same values, whatever else either of them has. Variants of a seed are then paired in their
/// weights as well as in their batches: removing W_Q does not move the draws of W_K, W_V, the
/// MLP or the embeddings.
#[derive(Debug, Clone)]
pub struct InitialWeights {
    seed: u64,
    /// Where in the model the tensors asked for sit ("blocks.2.attn"), before their own names.
    path: String,
}

impl InitialWeights {
    pub fn new(seed: u64) -> Self {
        Self { seed, path: String::new() }
    }

    /// The weights of the part `name` of the model: its tensors are named under it.
    pub fn within(&self, name: impl std::fmt::Display) -> Self {
        let path = if self.path.is_empty() { name.to_string() } else { format!("{}.{name}", self.path) };
        Self { seed: self.seed, path }
    }

    /// The tensor `name`: `shape` filled with N(0, std) values, on `device`. Drawn when first
    /// read (Burn's lazy parameters), not here: a checkpoint or an import loaded into a new model
    /// replaces every weight, and a model of a billion parameters need not draw them first. The
    /// values are a function of the seed, the tensor's full name and its shape only (`std`
    /// scales them), so neither the order nor the time they are drawn in changes them.
    pub fn normal<const D: usize>(&self, name: &str, shape: [usize; D], std: f64, device: &Device) -> Param<Tensor<D>> {
        let seed = splitmix64(self.seed ^ splitmix64(name_key(&self.path, name, &shape)));
        let draw = move |device: &Device, require_grad: bool| {
            let values = normal_values(seed, shape.iter().product(), std);
            Tensor::from_data(TensorData::new(values, shape), device).set_require_grad(require_grad)
        };
        Param::uninitialized(ParamId::new(), draw, device.clone(), true, shape.into())
    }
}

/// A tensor's key: FNV-1a over its full name and its shape (a fixed hash, unlike std's, so the
/// same name draws the same values in every build and on every platform).
fn name_key(path: &str, name: &str, shape: &[usize]) -> u64 {
    let mut hash = 0xCBF2_9CE4_8422_2325u64;
    let mut eat = |bytes: &[u8]| {
        for &byte in bytes {
            hash = (hash ^ byte as u64).wrapping_mul(0x0000_0100_0000_01B3);
        }
    };
    eat(path.as_bytes());
    eat(b".");
    eat(name.as_bytes());
    for &dim in shape {
        eat(&(dim as u64).to_le_bytes());
    }
    hash
}

/// Values per chunk: each chunk has a seed of its own, so chunks fill on every core and the values
/// do not depend on how many there are (a 1.2B-parameter model draws in seconds, not a minute).
const CHUNK: usize = 1 << 16;

/// `count` N(0, std) values, chunk by chunk, from `seed`.
fn normal_values(seed: u64, count: usize, std: f64) -> Vec<f32> {
    use rayon::prelude::*;
    let mut values = vec![0f32; count];
    values.par_chunks_mut(CHUNK).enumerate().for_each(|(chunk, values)| {
        // The first chunk goes on from the tensor's own seed: a tensor of one chunk is one
        // SplitMix64 sequence.
        let chunk_seed = if chunk == 0 { seed } else { splitmix64(seed ^ splitmix64(chunk as u64)) };
        fill_normal(chunk_seed, values, std)
    });
    values
}

/// Fills `values` with N(0, std) values by the Box–Muller transform of a SplitMix64 sequence.
fn fill_normal(seed: u64, values: &mut [f32], std: f64) {
    let mut state = seed;
    let mut uniform = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        // 53 random bits → [0, 1).
        (splitmix64(state) >> 11) as f64 / (1u64 << 53) as f64
    };
    for pair in values.chunks_mut(2) {
        // 1 − u lies in (0, 1], so the logarithm is finite.
        let radius = std * (-2.0 * (1.0 - uniform()).ln()).sqrt();
        let (sin, cos) = (std::f64::consts::TAU * uniform()).sin_cos();
        pair[0] = (radius * cos) as f32;
        if let Some(second) = pair.get_mut(1) {
            *second = (radius * sin) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tensor_is_a_function_of_the_seed_its_name_and_its_shape() {
        let device = Device::flex();
        let values = |weights: &InitialWeights, name: &str, shape: [usize; 2]| {
            weights.normal(name, shape, 1.0, &device).val().into_data().iter::<f32>().collect::<Vec<_>>()
        };
        let (a, b) = (InitialWeights::new(7), InitialWeights::new(7));
        let first = values(&a, "w", [3, 5]);
        // Whatever was drawn before it.
        values(&b, "other", [3, 5]);
        assert_eq!(first, values(&b, "w", [3, 5]), "the same seed, name and shape");
        assert_ne!(first, values(&a, "v", [3, 5]), "another name");
        assert_ne!(first[..5], values(&a, "w", [5, 3])[..5], "another shape");
        assert_ne!(first, values(&InitialWeights::new(8), "w", [3, 5]), "another seed");
        assert_eq!(values(&a.within("blocks").within(0), "w", [3, 5]), values(&a.within("blocks.0"), "w", [3, 5]));
        assert_ne!(values(&a.within("blocks.0"), "w", [3, 5]), values(&a.within("blocks.1"), "w", [3, 5]));
    }

    #[test]
    fn tensors_are_drawn_when_first_read() {
        let param = InitialWeights::new(7).normal("w", [3, 5], 1.0, &Device::flex());
        assert!(!param.is_initialized());
        assert_eq!(param.val().dims(), [3, 5]);
        assert!(param.is_initialized());
    }

    #[test]
    fn values_have_the_asked_mean_and_deviation() {
        // Two chunks and an odd tail.
        let values = normal_values(1, 2 * CHUNK + 1, 0.02);
        assert_eq!(values.len(), 2 * CHUNK + 1);
        assert_ne!(values[..CHUNK], values[CHUNK..2 * CHUNK], "each chunk has its own seed");
        let n = values.len() as f64;
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
        let std = (values.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
        // Standard errors: 0.02/√n ≈ 5.5e-5 for the mean, 0.02/√(2n) ≈ 4e-5 for the deviation.
        assert!(mean.abs() < 3e-4, "{mean}");
        assert!((std - 0.02).abs() < 3e-4, "{std}");
        let beyond_two = values.iter().filter(|v| v.abs() > 0.04).count() as f64 / n;
        assert!((beyond_two - 0.0455).abs() < 0.005, "{beyond_two}");
    }
}
