//! The model's dropout: a rate, and a stream of seeds the whole model shares, so that its masks
//! are a function of the model's seed and how many masks it has drawn (see
//! `qkv_kernels::dropout`): the same seed trains the same way whatever else runs beside it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use burn::module::Module;
use burn::tensor::Tensor;

use crate::random::splitmix64;

/// Seeds for a model's dropout masks, one per mask drawn, shared by every dropout site of the
/// model (clones share the count).
#[derive(Debug, Clone)]
pub struct SeedStream {
    base: u64,
    drawn: Arc<AtomicU64>,
    /// The rows this stream's masks cover start here in the batch (non-zero in a shard).
    first_row: usize,
}

impl SeedStream {
    pub fn new(seed: u64) -> Self {
        Self { base: seed, drawn: Arc::new(AtomicU64::new(0)), first_row: 0 }
    }

    /// A stream for the shard of a batch that starts at `first_row`: it draws the seeds this
    /// stream would draw next, from a count of its own, so that shards on other threads draw the
    /// same seeds and each masks its rows as the whole batch would. [`SeedStream::catch_up`]
    /// afterwards.
    pub fn shard(&self, first_row: usize) -> Self {
        Self { base: self.base, drawn: Arc::new(AtomicU64::new(self.drawn.load(Ordering::Relaxed))), first_row }
    }

    /// Counts the draws a shard made (every shard makes the same) as this stream's own.
    pub fn catch_up(&self, shard: &SeedStream) {
        self.drawn.fetch_max(shard.drawn.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// How many masks the stream has drawn: with the seed, where its masks go on.
    pub fn drawn(&self) -> u64 {
        self.drawn.load(Ordering::Relaxed)
    }

    /// Goes on from `drawn` masks (a run restored from its checkpoint), as if it had drawn them.
    pub fn restore(&self, drawn: u64) {
        self.drawn.store(drawn, Ordering::Relaxed);
    }

    fn next(&self) -> u64 {
        splitmix64(self.base ^ splitmix64(self.drawn.fetch_add(1, Ordering::Relaxed)))
    }
}

/// Dropout with rate `prob`, applied while training (on an autodiff device) only.
#[derive(Module, Debug)]
pub struct Dropout {
    pub prob: f64,
    #[module(skip)]
    seeds: SeedStream,
}

impl Dropout {
    pub fn new(prob: f64, seeds: &SeedStream) -> Self {
        Self { prob, seeds: seeds.clone() }
    }

    /// The same rate, its masks drawn from `seeds`.
    pub fn reseeded(&self, seeds: &SeedStream) -> Self {
        Self::new(self.prob, seeds)
    }

    pub fn seeds(&self) -> &SeedStream {
        &self.seeds
    }

    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        if self.prob == 0.0 || !x.device().is_autodiff() {
            return x;
        }
        qkv_kernels::dropout(x, self.prob, self.seeds.next(), self.seeds.first_row)
    }

    /// `residual + self.forward(x)`: a residual branch's dropout and its skip, one launch of ours
    /// on a GPU in training (`qkv_kernels::dropout_added`, a plain add at rate 0); the same values.
    pub fn forward_added_to<const D: usize>(&self, x: Tensor<D>, residual: Tensor<D>) -> Tensor<D> {
        if !x.device().is_autodiff() {
            return residual + x;
        }
        // No mask at rate 0, so no seed drawn: the stream stays as a run without dropout left it.
        let seed = if self.prob == 0.0 { 0 } else { self.seeds.next() };
        qkv_kernels::dropout_added(x, residual, self.prob, seed, self.seeds.first_row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    fn mask(dropout: &Dropout, device: &Device) -> Vec<bool> {
        let x = Tensor::<2>::from_data(TensorData::new(vec![1f32; 64 * 64], [64, 64]), device).require_grad();
        dropout.forward(x).into_data().iter::<f32>().map(|v| v != 0.0).collect()
    }

    #[test]
    fn masks_follow_the_seed_and_the_count_and_evaluation_draws_none() {
        let device = Device::flex().autodiff();
        let (a, b) = (SeedStream::new(3), SeedStream::new(3));
        let (da, db) = (Dropout::new(0.3, &a), Dropout::new(0.3, &b));
        let first = mask(&da, &device);
        assert_eq!(first, mask(&db, &device), "the same seed, the same first mask");
        assert_ne!(first, mask(&da, &device), "the next draw is another mask");
        // Without autodiff (evaluation, generation) nothing is dropped and no seed is used.
        let plain = Tensor::<2>::from_data(TensorData::new(vec![1f32; 16], [4, 4]), &Device::flex());
        assert_eq!(da.forward(plain).into_data().iter::<f32>().sum::<f32>(), 16.0);
        assert_eq!(a.drawn.load(Ordering::Relaxed), 2);
    }
}
