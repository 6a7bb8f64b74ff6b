//! Next-token cross-entropy, optionally restricted to some positions, and token accuracy.

use burn::tensor::{Int, Tensor};

/// Mean negative log-likelihood of `targets` [batch, time] under `logits` [batch, time, vocab],
/// over the positions where `mask` [batch, time] is 1 (all positions without a mask): one fused
/// op with its own backward on flex, Burn's log-softmax and gather elsewhere.
pub use qkv_kernels::cross_entropy;

/// Per-token and whole-sequence correctness of greedy predictions where `mask` is 1:
/// [correct tokens, counted tokens, fully correct rows, rows], as one tensor so that it is read
/// back in one transfer.
pub fn accuracy_counts(logits: Tensor<3>, targets: Tensor<2, Int>, mask: Tensor<2>) -> Tensor<1> {
    let [batch, time, _] = logits.dims();
    let predicted = logits.argmax(2).reshape([batch, time]);
    let correct = predicted.equal(targets).float() * mask.clone();
    let wrong_per_row = (mask.clone() - correct.clone()).sum_dim(1); // [batch, 1]
    let perfect_rows = wrong_per_row.lower_equal_scalar(0.5).float().sum();
    let device = correct.device();
    Tensor::cat(vec![correct.sum(), mask.sum(), perfect_rows, Tensor::from_floats([batch as f32], &device)], 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    #[test]
    fn uniform_logits_give_log_vocab_and_the_mask_selects_positions() {
        let device = Device::flex();
        let logits = Tensor::<3>::zeros([1, 2, 4], &device);
        let targets = Tensor::<2, Int>::from_data(TensorData::new(vec![1i64, 2], [1, 2]), &device);
        let loss: f32 = cross_entropy(logits, targets.clone(), None).into_scalar();
        assert!((loss - 4f32.ln()).abs() < 1e-6);

        // Position 0 predicts its target with certainty; masked out, only position 1 counts.
        let logits = Tensor::<3>::from_data(TensorData::new(vec![0.0f32, 50.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1, 2, 4]), &device);
        let all: f32 = cross_entropy(logits.clone(), targets.clone(), None).into_scalar();
        let mask = Tensor::<2>::from_data(TensorData::new(vec![0.0f32, 1.0], [1, 2]), &device);
        let second: f32 = cross_entropy(logits.clone(), targets.clone(), Some(mask.clone())).into_scalar();
        assert!((second - 4f32.ln()).abs() < 1e-5);
        assert!((all - 4f32.ln() / 2.0).abs() < 1e-4);

        let counts = accuracy_counts(logits, targets, mask).into_data().try_into_vec_as::<f32>().unwrap();
        // The masked position's argmax is channel 0, target 2: wrong; its row is not perfect.
        assert_eq!(counts, vec![0.0, 1.0, 0.0, 1.0]);
    }
}
