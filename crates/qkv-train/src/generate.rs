//! Text generation: temperature and top-k sampling, with or without the KV cache.

use burn::tensor::{Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use qkv_model::{Gpt, KvCache};

use crate::rng::Rng;
use crate::run::RunError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleOptions {
    pub max_new_tokens: usize,
    /// 0 picks the most likely token every time.
    pub temperature: f64,
    /// Sample among the k most likely tokens only.
    pub top_k: Option<usize>,
    pub seed: u64,
    /// Reuse past keys and values instead of recomputing the whole context every token.
    pub use_cache: bool,
}

impl Default for SampleOptions {
    fn default() -> Self {
        Self { max_new_tokens: 200, temperature: 0.8, top_k: Some(40), seed: 1337, use_cache: true }
    }
}

/// The generated tokens (after the prompt) and the measured peak size of the KV cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub tokens: Vec<u32>,
    pub peak_cache_bytes: usize,
}

fn row_tensor(tokens: &[u32], device: &burn::tensor::Device) -> Tensor<2, Int> {
    let ids: Vec<i64> = tokens.iter().map(|&t| t as i64).collect();
    Tensor::from_data(TensorData::new(ids, [1, tokens.len()]), device)
}

async fn last_logits(logits: Tensor<3>) -> Result<Vec<f32>, RunError> {
    let [_, time, vocab] = logits.dims();
    Ok(qkv_kernels::read_floats(logits.slice([0..1, time - 1..time, 0..vocab])).await?)
}

/// Continues `prompt` with `model` (use a validation model: `run.model().valid()`). Beyond the
/// model's block_size the context slides; with the cache on, the cache is then rebuilt from the
/// window so that cached and uncached generation pick the same tokens.
pub async fn generate(model: &Gpt, prompt: &[u32], options: &SampleOptions) -> Result<Generation, RunError> {
    // Natively on the CPU every read-back is ready at once, so the whole generation can block on
    // a worker of the caller's cores, where its many short ops run far faster (`on_a_worker`).
    // The browser has one thread and no pools.
    if !cfg!(target_family = "wasm") && qkv_kernels::is_flex(&model.wte.weight.device()) {
        let threads = rayon::current_num_threads();
        return crate::threads::on_a_worker(threads, || crate::threads::block_on(generate_here(model, prompt, options)));
    }
    generate_here(model, prompt, options).await
}

/// [`generate`] on the calling thread.
async fn generate_here(model: &Gpt, prompt: &[u32], options: &SampleOptions) -> Result<Generation, RunError> {
    if prompt.is_empty() {
        return Err(RunError::EmptyPrompt);
    }
    if model.is_bidirectional() {
        return Err(RunError::NothingToContinue);
    }
    let device = model.wte.weight.device();
    let block_size = model.block_size;
    let mut tokens = prompt.to_vec();
    let mut rng = Rng::new(options.seed);
    let mut cache = KvCache::default();
    let mut peak_cache_bytes = 0;
    for _ in 0..options.max_new_tokens {
        let window = &tokens[tokens.len().saturating_sub(block_size)..];
        let logits = if !options.use_cache {
            model.forward(row_tensor(window, &device))
        } else if cache.is_empty() || cache.len() + 1 > block_size {
            cache = KvCache::default();
            model.forward_cached(row_tensor(window, &device), &mut cache)
        } else {
            model.forward_cached(row_tensor(&tokens[tokens.len() - 1..], &device), &mut cache)
        };
        peak_cache_bytes = peak_cache_bytes.max(cache.bytes());
        let next = sample(&last_logits(logits).await?, options.temperature, options.top_k, &mut rng);
        tokens.push(next);
    }
    Ok(Generation { tokens: tokens[prompt.len()..].to_vec(), peak_cache_bytes })
}

/// A synthetic-task model's answer to the digit list `x`, the most likely digit at each place: an
/// encoder answers at x's own positions in one pass; a decoder writes the answer after
/// `x SEP`, one token at a time.
pub async fn answer_list(model: &Gpt, x: &[u32]) -> Result<Vec<u32>, RunError> {
    if x.is_empty() {
        return Err(RunError::EmptyPrompt);
    }
    if !model.is_bidirectional() {
        let question: Vec<u32> = x.iter().copied().chain([crate::synthetic::SEP]).collect();
        let options = SampleOptions { max_new_tokens: x.len(), temperature: 0.0, ..SampleOptions::default() };
        return Ok(generate(model, &question, &options).await?.tokens);
    }
    let logits = model.forward(row_tensor(x, &model.wte.weight.device()));
    let [_, time, vocab] = logits.dims();
    let values = qkv_kernels::read_floats(logits).await?;
    Ok((0..time).map(|t| argmax(&values[t * vocab..(t + 1) * vocab])).collect())
}

/// The most likely token (the first of equals).
fn argmax(logits: &[f32]) -> u32 {
    logits.iter().enumerate().fold((0, f32::NEG_INFINITY), |best, (i, &l)| if l > best.1 { (i, l) } else { best }).0 as u32
}

/// Draws a token from `logits` at `temperature`, among the `top_k` most likely.
pub fn sample(logits: &[f32], temperature: f64, top_k: Option<usize>, rng: &mut Rng) -> u32 {
    if temperature <= 0.0 {
        return argmax(logits);
    }
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    order.truncate(top_k.unwrap_or(logits.len()).clamp(1, logits.len()));
    let max = logits[order[0]] as f64;
    let weights: Vec<f64> = order.iter().map(|&i| ((logits[i] as f64 - max) / temperature).exp()).collect();
    let mut target = rng.unit() * weights.iter().sum::<f64>();
    for (&i, w) in order.iter().zip(&weights) {
        if target < *w {
            return i as u32;
        }
        target -= w;
    }
    order[order.len() - 1] as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::module::Module;
    use burn::tensor::Device;
    use pollster::FutureExt as _;
    use qkv_model::accounting::kv_cache_bytes_per_token;
    use qkv_model::{AttentionVariant, CacheDType, Preset};

    #[test]
    fn greedy_and_top_1_pick_the_argmax_and_temperature_spreads() {
        let logits = [0.1f32, 2.0, 0.3, 1.9];
        let mut rng = Rng::new(0);
        assert_eq!(sample(&logits, 0.0, None, &mut rng), 1);
        assert_eq!(sample(&logits, 1.0, Some(1), &mut rng), 1);
        let picks: std::collections::HashSet<u32> = (0..200).map(|_| sample(&logits, 1.0, Some(2), &mut rng)).collect();
        assert_eq!(picks, [1, 3].into_iter().collect());
    }

    #[test]
    fn cached_and_uncached_generation_give_identical_tokens_past_the_context() {
        let device = Device::flex();
        for variant in AttentionVariant::ALL {
            for kv_heads in [4, 1] {
                let mut config = Preset::Classroom.config().with_variant(variant).with_kv_heads(kv_heads);
                if config.validate().is_err() {
                    continue;
                }
                config.block_size = 12;
                let model = Gpt::new_seeded(&config, &device, 9).unwrap().valid();
                let options = SampleOptions { max_new_tokens: 20, temperature: 1.0, top_k: Some(10), seed: 5, use_cache: true };
                let cached = generate(&model, &[1, 2, 3], &options).block_on().unwrap();
                let plain = generate(&model, &[1, 2, 3], &SampleOptions { use_cache: false, ..options }).block_on().unwrap();
                assert_eq!(cached.tokens, plain.tokens, "{variant} kv_heads {kv_heads}");
                let per_token = kv_cache_bytes_per_token(&config, CacheDType::F32);
                assert_eq!(cached.peak_cache_bytes, per_token * config.block_size, "{variant}");
            }
        }
    }

    #[test]
    fn an_encoder_answers_a_list_in_one_pass_and_continues_nothing() {
        let device = Device::flex();
        let mut config = Preset::Classroom.config();
        config.vocab_size = crate::synthetic::VOCAB_SIZE;
        let decoder = Gpt::new_seeded(&config, &device, 3).unwrap().valid();
        config.attention.bidirectional = true;
        let encoder = Gpt::new_seeded(&config, &device, 3).unwrap().valid();
        let error = generate(&encoder, &[1, 2], &SampleOptions::default()).block_on().unwrap_err();
        assert!(matches!(error, RunError::NothingToContinue), "{error}");
        // The encoder's answer is the argmax at each of the list's own positions.
        let list = [3, 1, 4, 1];
        let logits = encoder.forward(row_tensor(&list, &device));
        let values = qkv_kernels::read_floats(logits).block_on().unwrap();
        let expected: Vec<u32> = values.chunks(config.vocab_size).map(argmax).collect();
        assert_eq!(answer_list(&encoder, &list).block_on().unwrap(), expected);
        // The decoder writes as many digits after the separator, greedily.
        let greedy = SampleOptions { max_new_tokens: 4, temperature: 0.0, ..SampleOptions::default() };
        let written = generate(&decoder, &[3, 1, 4, 1, crate::synthetic::SEP], &greedy).block_on().unwrap().tokens;
        assert_eq!(answer_list(&decoder, &list).block_on().unwrap(), written);
    }

    #[test]
    fn an_empty_prompt_is_refused() {
        let model = Gpt::new(&Preset::Classroom.config(), &Device::flex()).unwrap();
        assert!(generate(&model, &[], &SampleOptions::default()).block_on().unwrap_err().to_string().contains("prompt is empty"));
    }
}
