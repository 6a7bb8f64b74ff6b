//! Parameter and KV-cache accounting, computed from a config alone: a 1.2B model is counted
//! without allocating a single weight. Tests check every figure against instantiated modules.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::attention::{ASYMMETRY_CHANNELS, RelativeBias, projection_width};
use crate::config::{ModelConfig, Norm};

/// Parameters of one part of the model, summed over all layers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    pub name: String,
    pub params: usize,
    /// Per-layer parts say how much of `params` one layer holds.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub per_layer: Option<usize>,
    /// Counted in the attention total.
    #[serde(skip)]
    pub attention: bool,
    /// Counted in the embedding total.
    #[serde(skip)]
    pub embedding: bool,
}

/// Every component name, in the order reports list them.
pub const COMPONENT_NAMES: [&str; 20] = [
    "token embedding",
    "patch embedding",
    "class token",
    "position embedding",
    "W_Q",
    "W_K",
    "W_V",
    "W_QK",
    "W_KV",
    "W_QKV",
    "W_O",
    "attention biases",
    "asymmetry term",
    "MLP in",
    "MLP out",
    "MLP biases",
    "block norms",
    "final norm",
    "LM head",
    "class head",
];

/// Position of a component name in [`COMPONENT_NAMES`] (unknown names sort last).
pub fn component_rank(name: &str) -> usize {
    COMPONENT_NAMES.iter().position(|n| *n == name).unwrap_or(COMPONENT_NAMES.len())
}

/// Where a model's parameters are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamReport {
    pub components: Vec<Component>,
    pub total_params: usize,
    /// Token and position embeddings (an untied LM head counts as non-embedding).
    pub embedding_params: usize,
    pub non_embedding_params: usize,
    /// Attention projections, W_O, their biases and the (Q=K-V)+ term, all layers.
    pub attention_params: usize,
}

impl ParamReport {
    pub fn new(config: &ModelConfig) -> Self {
        let d = config.n_embd;
        // Shared layers hold one block's weights, however often it is applied.
        let layers = if config.shared_layers { 1 } else { config.n_layer };
        let bias = usize::from(config.bias);
        let mut components = Vec::new();
        let mut push = |name: &str, per_layer: Option<usize>, params: usize, attention: bool, embedding: bool| {
            if params > 0 {
                components.push(Component { name: name.to_string(), params, per_layer, attention, embedding });
            }
        };
        let layered = |per_layer: usize| (Some(per_layer), per_layer * layers);

        match &config.image {
            None => push("token embedding", None, config.vocab_size * d, false, true),
            Some(image) => {
                push("patch embedding", None, (image.patch_values() + bias) * d, false, true);
                push("class token", None, d, false, true);
            }
        }
        push("position embedding", None, config.block_size * d, false, true);

        let mut attention_biases = d * bias; // W_O's bias
        for &projection in config.attention.variant.projections() {
            let width = projection_width(config, projection);
            let (per, all) = layered(d * width);
            push(projection.name(), per, all, true, false);
            attention_biases += width * bias;
        }
        let (per, all) = layered(d * d);
        push("W_O", per, all, true, false);
        let (per, all) = layered(attention_biases);
        push("attention biases", per, all, true, false);
        let asymmetry = match config.attention.variant {
            v if v.has_positional_term() => ASYMMETRY_CHANNELS + 1,
            v if v.has_relative_bias() => config.n_head * RelativeBias::distances(config.block_size, config.attention.bidirectional),
            _ => 0,
        };
        let (per, all) = layered(asymmetry);
        push("asymmetry term", per, all, true, false);

        let (per, all) = layered(d * config.mlp_hidden);
        push("MLP in", per, all, false, false);
        let (per, all) = layered(config.mlp_hidden * d);
        push("MLP out", per, all, false, false);
        let (per, all) = layered((config.mlp_hidden + d) * bias);
        push("MLP biases", per, all, false, false);

        let norm = match config.norm {
            Norm::LayerNorm => d * (1 + bias),
            Norm::None => 0,
        };
        let (per, all) = layered(2 * norm);
        push("block norms", per, all, false, false);
        push("final norm", None, norm, false, false);
        if config.is_vision() {
            push("class head", None, (d + bias) * config.vocab_size, false, false);
        } else if !config.tie_embeddings {
            push("LM head", None, d * config.vocab_size, false, false);
        }

        components.sort_by_key(|c| component_rank(&c.name));
        let sum = |keep: fn(&Component) -> bool| components.iter().filter(|c| keep(c)).map(|c| c.params).sum();
        let total_params: usize = sum(|_| true);
        let embedding_params: usize = sum(|c| c.embedding);
        Self {
            attention_params: sum(|c| c.attention),
            non_embedding_params: total_params - embedding_params,
            embedding_params,
            total_params,
            components,
        }
    }

    pub fn component(&self, name: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.name == name)
    }
}

/// Element type of a KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CacheDType {
    #[default]
    F32,
    F16,
    Bf16,
}

impl CacheDType {
    pub fn bytes(self) -> usize {
        match self {
            CacheDType::F32 => 4,
            CacheDType::F16 | CacheDType::Bf16 => 2,
        }
    }
}

impl fmt::Display for CacheDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CacheDType::F32 => "f32",
            CacheDType::F16 => "f16",
            CacheDType::Bf16 => "bf16",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype '{0}': use f32, f16 or bf16")]
pub struct UnknownDType(pub String);

impl FromStr for CacheDType {
    type Err = UnknownDType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Ok(CacheDType::F32),
            "f16" => Ok(CacheDType::F16),
            "bf16" => Ok(CacheDType::Bf16),
            _ => Err(UnknownDType(s.to_string())),
        }
    }
}

/// Bytes the KV cache holds per token: every layer caches K and V (one tensor when K = V),
/// each with kv_heads·d_k channels.
pub fn kv_cache_bytes_per_token(config: &ModelConfig, dtype: CacheDType) -> usize {
    config.n_layer * config.attention.variant.cached_tensors() * config.kv_heads() * config.head_dim() * dtype.bytes()
}

/// Floating-point operations of one training step per token (a ViT's tokens are its class token
/// and patches), matrix products only (the
/// convention of nanoGPT's MFU estimate and of the papers' compute figures): a product of an m×k
/// by a k×n matrix is 2mkn, and the backward pass costs twice the forward. Attention counts the
/// full T×T score and value products, as the kernels compute them, at a context of
/// `block_size`. Each projection the variant has is computed once, whatever roles it serves, so
/// dropping W_Q, sharing a projection or sharing key/value heads all lower it.
pub fn training_flops_per_token(config: &ModelConfig) -> f64 {
    let d = config.n_embd as f64;
    let projections: f64 = config.attention.variant.projections().iter().map(|&p| projection_width(config, p) as f64).sum();
    let matmuls = projections + d + 2.0 * config.mlp_hidden as f64; // W_Q·K·V as present, W_O, MLP
    let attention = 4.0 * config.block_size as f64 * d; // Q Kᵀ and P V over every head
    let per_layer = 2.0 * d * matmuls + attention;
    let (input, head) = match &config.image {
        // A ViT embeds its patches (not its class token) by a product, and reads one token of
        // each image's block_size into its head.
        Some(image) => {
            let tokens = image.tokens() as f64;
            (2.0 * image.patch_values() as f64 * d * image.patches() as f64 / tokens, 2.0 * d * config.vocab_size as f64 / tokens)
        }
        None => (0.0, 2.0 * d * config.vocab_size as f64),
    };
    3.0 * (config.n_layer as f64 * per_layer + input + head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::Preset;
    use crate::variant::AttentionVariant;

    #[test]
    fn gpt2_small_matches_the_hand_count() {
        // 50304·768 + 1024·768 + 12·(4·768² + 2·768·3072 + 2·768) + 768, no biases, tied.
        let config = Preset::Gpt2Small.config();
        let report = ParamReport::new(&config);
        let per_layer = 4 * 768 * 768 + 2 * 768 * 3072 + 2 * 768;
        assert_eq!(report.total_params, 50304 * 768 + 1024 * 768 + 12 * per_layer + 768);
        assert_eq!(report.attention_params, 12 * 4 * 768 * 768);
        assert_eq!(report.embedding_params, 50304 * 768 + 1024 * 768);
    }

    #[test]
    fn training_flops_follow_nanogpts_estimate() {
        // nanoGPT: 6N + 12·L·C·T, N the weights of every product (layers and the tied head).
        let config = Preset::Gpt2Small.config();
        let (l, c, t, v) = (12.0, 768.0, 1024.0, 50304.0);
        let n = l * 12.0 * c * c + v * c;
        assert_eq!(training_flops_per_token(&config), 6.0 * n + 12.0 * l * c * t);
        // No W_Q: one C×C product less per layer, three times over.
        let identity = config.clone().with_variant(AttentionVariant::QueryIdentity);
        assert_eq!(training_flops_per_token(&config) - training_flops_per_token(&identity), 3.0 * l * 2.0 * c * c);
    }

    #[test]
    fn any_identity_projection_saves_one_matrix_per_layer() {
        let config = Preset::Gpt2Small.config();
        let standard = ParamReport::new(&config);
        for variant in [AttentionVariant::QueryIdentity, AttentionVariant::KeyIdentity, AttentionVariant::ValueIdentity] {
            let report = ParamReport::new(&config.clone().with_variant(variant));
            assert_eq!(standard.total_params - report.total_params, 12 * 768 * 768, "{variant}");
            // Keys and values are still two tensors to cache.
            let cache = |c: &ModelConfig| kv_cache_bytes_per_token(c, CacheDType::F32);
            assert_eq!(cache(&config.clone().with_variant(variant)), cache(&config), "{variant}");
        }
    }

    #[test]
    fn the_fully_shared_variants_count_one_matrix_and_the_plus_term_eleven_more() {
        // GPT-2 small with one d×d projection a layer, no biases: (Q=K=V)+ adds its Linear(10 → 1)
        // with a bias to every layer, and caches what Q=K=V caches.
        let config = Preset::Gpt2Small.config();
        let standard = ParamReport::new(&config);
        let all = ParamReport::new(&config.clone().with_variant(AttentionVariant::SharedAll));
        let plus = ParamReport::new(&config.clone().with_variant(AttentionVariant::SharedAllAsym));
        assert_eq!(standard.total_params - all.total_params, 12 * 2 * 768 * 768);
        assert_eq!(plus.total_params - all.total_params, 12 * (10 + 1));
        assert_eq!(plus.attention_params, 12 * 2 * 768 * 768 + 12 * 11);
        let cache = |variant| kv_cache_bytes_per_token(&config.clone().with_variant(variant), CacheDType::F32);
        assert_eq!(cache(AttentionVariant::SharedAllAsym), cache(AttentionVariant::SharedAll));
        assert_eq!(2 * cache(AttentionVariant::SharedAllAsym), cache(AttentionVariant::Standard));
    }

    #[test]
    fn the_relative_bias_control_is_standard_plus_a_table_per_head() {
        // GPT-2 small, a decoder: 12 heads × 1024 distances (0 to 1023) a layer.
        let config = Preset::Gpt2Small.config();
        let standard = ParamReport::new(&config);
        let control = ParamReport::new(&config.clone().with_variant(AttentionVariant::StandardRel));
        assert_eq!(control.total_params - standard.total_params, 12 * 12 * 1024);
        let shared = ParamReport::new(&config.clone().with_variant(AttentionVariant::SharedQueryKeyRel));
        assert_eq!(control.total_params - shared.total_params, 12 * 768 * 768, "Q=K-V+rel without W_Q's matrix");
        // An encoder sees distances both ways: 2·1024 − 1 of them.
        let mut encoder = config.with_variant(AttentionVariant::StandardRel);
        encoder.attention.bidirectional = true;
        assert_eq!(ParamReport::new(&encoder).total_params - standard.total_params, 12 * 12 * 2047);
    }

    #[test]
    fn kv_cache_reductions_match_paper_2() {
        // Paper 2, 16 heads: Q-K=V 50%, GQA-4 75%, MQA 93.75%, Q-GQA-4 87.5%, Q-MQA 96.875%.
        let base = Preset::Paper2_300m.config();
        let full = kv_cache_bytes_per_token(&base, CacheDType::F32) as f64;
        let reduction = |variant: AttentionVariant, kv_heads: usize| {
            let c = base.clone().with_variant(variant).with_kv_heads(kv_heads);
            100.0 * (1.0 - kv_cache_bytes_per_token(&c, CacheDType::F32) as f64 / full)
        };
        assert_eq!(reduction(AttentionVariant::SharedKeyValue, 16), 50.0);
        assert_eq!(reduction(AttentionVariant::Standard, 4), 75.0);
        assert_eq!(reduction(AttentionVariant::Standard, 1), 93.75);
        assert_eq!(reduction(AttentionVariant::SharedKeyValue, 4), 87.5);
        assert_eq!(reduction(AttentionVariant::SharedKeyValue, 1), 96.875);
        assert_eq!(reduction(AttentionVariant::SharedQueryKey, 16), 0.0);
    }

    #[test]
    fn dtype_halves_the_cache() {
        let c = Preset::Gpt2Small.config();
        assert_eq!(kv_cache_bytes_per_token(&c, CacheDType::F32), 2 * kv_cache_bytes_per_token(&c, CacheDType::Bf16));
        assert_eq!("BF16".parse::<CacheDType>().unwrap(), CacheDType::Bf16);
        assert!("f8".parse::<CacheDType>().unwrap_err().to_string().contains("f32, f16 or bf16"));
    }
}
