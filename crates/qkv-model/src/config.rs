//! `ModelConfig`: the architecture of one model, validated before anything is allocated.

use serde::{Deserialize, Serialize};

use crate::variant::AttentionVariant;

/// Normalisation before attention, before the MLP and before the LM head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Norm {
    /// Pre-LN, as in GPT-2 and both papers.
    #[default]
    LayerNorm,
    /// No normalisation at all: the setting in which paper 1's W_Q elimination is exact.
    None,
}

/// How one attention layer is built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionConfig {
    pub variant: AttentionVariant,
    /// Key/value heads: `None` or `n_head` is multi-head attention, 1 < g < n_head is GQA-g,
    /// 1 is MQA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<usize>,
    /// Multiplies q·k before the softmax; `None` takes the variant's default
    /// (see [`AttentionVariant::default_scale`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// Every position attends to every other, the future too: an encoder, which reads a whole
    /// input at once and answers at every position (the synthetic tasks' encoder framing, as
    /// in the papers' own small encoders). False is the causal decoder, the default; it is left
    /// out of saved configs so that theirs read as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bidirectional: bool,
}

impl AttentionConfig {
    pub fn new(variant: AttentionVariant) -> Self {
        Self { variant, kv_heads: None, scale: None, bidirectional: false }
    }

    /// The key/value heads where query heads share them (GQA, MQA: fewer than `n_head`); `None`
    /// where every head has its own.
    pub fn shared_kv_heads(&self, n_head: usize) -> Option<usize> {
        self.kv_heads.filter(|&k| k < n_head)
    }

    /// The papers' name for this attention in a model of `n_head` heads: the variant's notation
    /// ("Q-K=V"), with its head sharing after it ("Q-K=V + MQA"); standard attention with shared
    /// heads is named by the sharing alone ("GQA-2", "MQA"), as the papers do.
    pub fn notation(&self, n_head: usize) -> String {
        let variant = self.variant.notation();
        let heads = match self.shared_kv_heads(n_head) {
            Some(1) => "MQA".to_string(),
            Some(k) => format!("GQA-{k}"),
            None => return variant.to_string(),
        };
        if self.variant == AttentionVariant::Standard { heads } else { format!("{variant} + {heads}") }
    }
}

fn default_true() -> bool {
    true
}

/// What a vision transformer reads: images `height` × `width` with `channels` values a pixel,
/// laid out row by row and pixel by pixel (HWC), cut into square patches of `patch` × `patch`
/// pixels, one token each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageInput {
    pub height: usize,
    pub width: usize,
    pub channels: usize,
    pub patch: usize,
    /// Pixels a patch's token also reads beyond its patch on every side, zeros past the image's
    /// edge: 0 cuts the image into disjoint patches; 1 gives each token the (patch + 2)² window
    /// around its patch, overlapping its neighbours' as a convolution of that size at stride
    /// `patch` does. The tokens stay one per patch. Left out of saved configs when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overlap: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl ImageInput {
    /// Disjoint patches of `patch` pixels (no overlap).
    pub fn new(height: usize, width: usize, channels: usize, patch: usize) -> Self {
        Self { height, width, channels, patch, overlap: 0 }
    }

    /// Patches an image is cut into.
    pub fn patches(&self) -> usize {
        (self.height / self.patch) * (self.width / self.patch)
    }

    /// Side of the square a patch's token reads: the patch and its overlap each way.
    pub fn window(&self) -> usize {
        self.patch + 2 * self.overlap
    }

    /// Values in one patch's window: what the patch embedding reads.
    pub fn patch_values(&self) -> usize {
        self.window() * self.window() * self.channels
    }

    /// For each patch (row of patches by row), each value of its window (row by row, pixel by
    /// pixel, channel by channel): the index of that value in the image, or `values()` where the
    /// window reaches past the image's edge (the caller reads a zero there).
    pub fn window_indices(&self) -> Vec<usize> {
        let (patch, overlap, window, channels) = (self.patch, self.overlap, self.window(), self.channels);
        let mut indices = Vec::with_capacity(self.patches() * self.patch_values());
        for row in 0..self.height / patch {
            for column in 0..self.width / patch {
                for dy in 0..window {
                    for dx in 0..window {
                        // The window starts `overlap` pixels above and left of its patch: None
                        // where that, or its far side, lies outside the image.
                        let y = (row * patch + dy).checked_sub(overlap).filter(|&y| y < self.height);
                        let x = (column * patch + dx).checked_sub(overlap).filter(|&x| x < self.width);
                        for channel in 0..channels {
                            indices.push(match (y, x) {
                                (Some(y), Some(x)) => (y * self.width + x) * channels + channel,
                                _ => self.values(),
                            });
                        }
                    }
                }
            }
        }
        indices
    }

    /// Values in one image.
    pub fn values(&self) -> usize {
        self.height * self.width * self.channels
    }

    /// Tokens the transformer sees: the class token, then the patches.
    pub fn tokens(&self) -> usize {
        1 + self.patches()
    }
}

/// The shape of either model QKV Lab trains, both built from the same blocks: a GPT (token and
/// learned position embeddings, `n_layer` blocks, an LM head; an encoder when its attention reads
/// both ways), or with `image` set a ViT ([`crate::Vit`]). Saved in every checkpoint under the
/// same field names whatever the type is called (a test reads one written as `GptConfig`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub vocab_size: usize,
    /// Longest context the model accepts (rows of the position embedding).
    pub block_size: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_embd: usize,
    /// Width of the MLP's hidden layer; free so that the papers' reallocation runs can move the
    /// parameters W_Q gave up into the MLP.
    pub mlp_hidden: usize,
    /// Biases in every Linear and LayerNorm.
    pub bias: bool,
    /// The LM head reuses the token embedding.
    pub tie_embeddings: bool,
    /// Dropout on the embeddings and on the attention and MLP outputs.
    #[serde(default)]
    pub dropout: f64,
    #[serde(default)]
    pub norm: Norm,
    /// The skip connection around the MLP; without it the theory's telescoping construction
    /// applies.
    #[serde(default = "default_true")]
    pub mlp_skip: bool,
    /// Every layer reuses one block's weights (ALBERT style): the theory's third case, where
    /// one change of basis serves the whole network.
    #[serde(default)]
    pub shared_layers: bool,
    pub attention: AttentionConfig,
    /// Set, the model is a vision transformer ([`crate::Vit`]) reading images of this shape: its
    /// vocab_size counts the classes it tells apart, its block_size the tokens it sees (the
    /// class token and the patches), and its attention reads both ways. Left out of a GPT's
    /// saved config, so that theirs read as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageInput>,
}

/// Why a configuration cannot be built, with the field at fault and how to fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("{field} is 0: it must be at least 1")]
    Zero { field: &'static str },
    #[error(
        "n_embd ({n_embd}) is not divisible by n_head ({n_head}): every head gets n_embd / n_head \
         channels, so choose n_head among the divisors of n_embd or change n_embd"
    )]
    EmbdNotDivisibleByHeads { n_embd: usize, n_head: usize },
    #[error("attention.kv_heads is 0: use 1 for MQA, a divisor of n_head for GQA, or n_head for MHA")]
    ZeroKvHeads,
    #[error(
        "attention.kv_heads ({kv_heads}) is more than n_head ({n_head}): each key/value head serves \
         at least one query head, so use at most {n_head}"
    )]
    MoreKvHeadsThanHeads { kv_heads: usize, n_head: usize },
    #[error(
        "n_head ({n_head}) is not divisible by attention.kv_heads ({kv_heads}): every key/value head \
         serves the same number of query heads, so use a divisor of {n_head}"
    )]
    HeadsNotDivisibleByKvHeads { n_head: usize, kv_heads: usize },
    #[error(
        "attention.variant {variant} {reason}, so it cannot share key/value heads (kv_heads \
         {kv_heads} < n_head {n_head}): set kv_heads to {n_head} or pick standard, wq-identity or \
         shared-kv for GQA/MQA"
    )]
    VariantCannotShareHeads { variant: AttentionVariant, reason: &'static str, kv_heads: usize, n_head: usize },
    #[error("dropout ({0}) must be in [0, 1)")]
    Dropout(f64),
    #[error("attention.scale ({0}) must be a positive finite number, or left out for the variant's default")]
    Scale(f64),
    #[error(
        "image.{side} ({pixels}) is not divisible by image.patch ({patch}): the image is cut into whole patches, \
         so choose a patch size that divides both sides"
    )]
    ImageNotDivisible { side: &'static str, pixels: usize, patch: usize },
    #[error(
        "block_size ({block_size}) is not the vision transformer's {tokens} tokens (the class token and one \
         per patch): set block_size to {tokens}"
    )]
    ImageTokens { block_size: usize, tokens: usize },
    #[error(
        "image.overlap ({overlap}) reaches past the neighbouring patches (patch {patch}): a patch's token reads at most \
         one patch beyond it each way, so choose an overlap from 0 to {patch}"
    )]
    ImageOverlap { overlap: usize, patch: usize },
    #[error("a vision transformer reads its patches both ways: set attention.bidirectional to true")]
    ImageNeedsBothWays,
    #[error("a vision transformer has no token embedding to tie its class head to: set tie_embeddings to false")]
    ImageTied,
    #[error("this configuration has no image section: a vision transformer needs the shape of the images it reads")]
    NotAVit,
    #[error(
        "this is a vision transformer's configuration (it has an image section): it reads images, not text, so it cannot be used as a GPT"
    )]
    NotAGpt,
    #[error("the configuration is not valid JSON for a ModelConfig: {0}")]
    Json(#[source] JsonError),
}

/// serde_json's error, shared (so that [`ConfigError`] stays cloneable) and compared by what
/// it says.
#[derive(Debug, Clone)]
pub struct JsonError(std::sync::Arc<serde_json::Error>);

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for JsonError {}

impl PartialEq for JsonError {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl ModelConfig {
    /// Checks every constraint the model relies on; a model is only built from a config that
    /// passed this.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, value) in [
            ("vocab_size", self.vocab_size),
            ("block_size", self.block_size),
            ("n_layer", self.n_layer),
            ("n_head", self.n_head),
            ("n_embd", self.n_embd),
            ("mlp_hidden", self.mlp_hidden),
        ] {
            if value == 0 {
                return Err(ConfigError::Zero { field });
            }
        }
        if !self.n_embd.is_multiple_of(self.n_head) {
            return Err(ConfigError::EmbdNotDivisibleByHeads { n_embd: self.n_embd, n_head: self.n_head });
        }
        let kv_heads = self.kv_heads();
        if kv_heads == 0 {
            return Err(ConfigError::ZeroKvHeads);
        }
        if kv_heads > self.n_head {
            return Err(ConfigError::MoreKvHeadsThanHeads { kv_heads, n_head: self.n_head });
        }
        if !self.n_head.is_multiple_of(kv_heads) {
            return Err(ConfigError::HeadsNotDivisibleByKvHeads { n_head: self.n_head, kv_heads });
        }
        let variant = self.attention.variant;
        if let Some(reason) = variant.needs_every_kv_head()
            && kv_heads != self.n_head
        {
            return Err(ConfigError::VariantCannotShareHeads { variant, reason, kv_heads, n_head: self.n_head });
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(ConfigError::Dropout(self.dropout));
        }
        if let Some(scale) = self.attention.scale
            && !(scale.is_finite() && scale > 0.0)
        {
            return Err(ConfigError::Scale(scale));
        }
        if let Some(image) = &self.image {
            self.validate_image(image)?;
        }
        Ok(())
    }

    fn validate_image(&self, image: &ImageInput) -> Result<(), ConfigError> {
        for (field, value) in
            [("image.height", image.height), ("image.width", image.width), ("image.channels", image.channels), ("image.patch", image.patch)]
        {
            if value == 0 {
                return Err(ConfigError::Zero { field });
            }
        }
        for (side, pixels) in [("height", image.height), ("width", image.width)] {
            if !pixels.is_multiple_of(image.patch) {
                return Err(ConfigError::ImageNotDivisible { side, pixels, patch: image.patch });
            }
        }
        if image.overlap > image.patch {
            return Err(ConfigError::ImageOverlap { overlap: image.overlap, patch: image.patch });
        }
        if self.block_size != image.tokens() {
            return Err(ConfigError::ImageTokens { block_size: self.block_size, tokens: image.tokens() });
        }
        if !self.attention.bidirectional {
            return Err(ConfigError::ImageNeedsBothWays);
        }
        if self.tie_embeddings {
            return Err(ConfigError::ImageTied);
        }
        Ok(())
    }

    /// Whether this is a vision transformer's config.
    pub fn is_vision(&self) -> bool {
        self.image.is_some()
    }

    /// Parses and validates a JSON configuration.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let config: ModelConfig = serde_json::from_str(text).map_err(|e| ConfigError::Json(JsonError(std::sync::Arc::new(e))))?;
        config.validate()?;
        Ok(config)
    }

    /// Channels per head (d_k).
    pub fn head_dim(&self) -> usize {
        self.n_embd / self.n_head
    }

    pub fn kv_heads(&self) -> usize {
        self.attention.kv_heads.unwrap_or(self.n_head)
    }

    /// The scale actually applied to q·k.
    pub fn attention_scale(&self) -> f64 {
        self.attention.scale.unwrap_or_else(|| self.attention.variant.default_scale(self.head_dim()))
    }

    /// The same architecture with another attention variant (its default scale, same kv_heads).
    pub fn with_variant(mut self, variant: AttentionVariant) -> Self {
        self.attention.variant = variant;
        self
    }

    pub fn with_kv_heads(mut self, kv_heads: usize) -> Self {
        self.attention.kv_heads = Some(kv_heads);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> ModelConfig {
        ModelConfig {
            vocab_size: 11,
            block_size: 8,
            n_layer: 2,
            n_head: 4,
            n_embd: 16,
            mlp_hidden: 32,
            bias: true,
            tie_embeddings: true,
            dropout: 0.0,
            norm: Norm::LayerNorm,
            mlp_skip: true,
            shared_layers: false,
            attention: AttentionConfig::new(AttentionVariant::Standard),
            image: None,
        }
    }

    fn vision() -> ModelConfig {
        let image = ImageInput::new(8, 8, 1, 2);
        let mut config = ModelConfig { vocab_size: 10, block_size: image.tokens(), tie_embeddings: false, image: Some(image), ..tiny() };
        config.attention.bidirectional = true;
        config
    }

    #[test]
    fn attention_is_named_in_the_papers_notation_with_its_head_sharing() {
        let named = |variant, kv_heads| AttentionConfig { kv_heads, ..AttentionConfig::new(variant) }.notation(4);
        assert_eq!(named(AttentionVariant::Standard, None), "Q-K-V");
        assert_eq!(named(AttentionVariant::Standard, Some(4)), "Q-K-V", "a key/value head per head is no sharing");
        assert_eq!(named(AttentionVariant::Standard, Some(2)), "GQA-2");
        assert_eq!(named(AttentionVariant::Standard, Some(1)), "MQA");
        assert_eq!(named(AttentionVariant::SharedKeyValue, Some(1)), "Q-K=V + MQA");
        assert_eq!(named(AttentionVariant::QueryIdentity, Some(2)), "Q=I + GQA-2");
        assert_eq!(named(AttentionVariant::SharedQueryKeyRel, None), "(Q=K-V)+rel");
    }

    #[test]
    fn a_vision_config_is_checked_for_what_a_vit_needs() {
        vision().validate().unwrap();
        assert_eq!(vision().block_size, 17, "the class token and 16 patches");
        let mut c = vision();
        c.image.as_mut().unwrap().patch = 3;
        let err = c.validate().unwrap_err();
        assert_eq!(err, ConfigError::ImageNotDivisible { side: "height", pixels: 8, patch: 3 });
        assert!(err.to_string().contains("divides both sides"), "{err}");
        let mut c = vision();
        c.block_size = 16;
        assert!(c.validate().unwrap_err().to_string().contains("set block_size to 17"));
        let mut c = vision();
        c.attention.bidirectional = false;
        assert_eq!(c.validate(), Err(ConfigError::ImageNeedsBothWays));
        let mut c = vision();
        c.tie_embeddings = true;
        assert_eq!(c.validate(), Err(ConfigError::ImageTied));
        let mut c = vision();
        c.image.as_mut().unwrap().channels = 0;
        assert_eq!(c.validate(), Err(ConfigError::Zero { field: "image.channels" }));
        let mut c = vision();
        c.image.as_mut().unwrap().overlap = 3;
        assert!(c.validate().unwrap_err().to_string().contains("from 0 to 2"));
        // A GPT's saved config says nothing of images, and reads back without them.
        assert!(!serde_json::to_string(&tiny()).unwrap().contains("image"));
        let text = serde_json::to_string(&vision()).unwrap();
        assert_eq!(ModelConfig::from_json(&text).unwrap(), vision());
    }

    #[test]
    fn a_sound_config_passes() {
        tiny().validate().unwrap();
        tiny().with_variant(AttentionVariant::SharedKeyValue).with_kv_heads(1).validate().unwrap();
        tiny().with_variant(AttentionVariant::QueryIdentity).with_kv_heads(2).validate().unwrap();
    }

    #[test]
    fn each_zero_field_is_named() {
        for field in ["vocab_size", "block_size", "n_layer", "n_head", "n_embd", "mlp_hidden"] {
            let mut c = tiny();
            match field {
                "vocab_size" => c.vocab_size = 0,
                "block_size" => c.block_size = 0,
                "n_layer" => c.n_layer = 0,
                "n_head" => c.n_head = 0,
                "n_embd" => c.n_embd = 0,
                _ => c.mlp_hidden = 0,
            }
            assert_eq!(c.validate(), Err(ConfigError::Zero { field }));
        }
    }

    #[test]
    fn embd_must_split_into_heads() {
        let mut c = tiny();
        c.n_head = 3;
        let err = c.validate().unwrap_err();
        assert_eq!(err, ConfigError::EmbdNotDivisibleByHeads { n_embd: 16, n_head: 3 });
        assert!(err.to_string().contains("divisors of n_embd"));
    }

    #[test]
    fn kv_heads_errors() {
        assert_eq!(tiny().with_kv_heads(0).validate(), Err(ConfigError::ZeroKvHeads));
        assert_eq!(tiny().with_kv_heads(8).validate(), Err(ConfigError::MoreKvHeadsThanHeads { kv_heads: 8, n_head: 4 }));
        let mut c = tiny();
        c.n_head = 8;
        c.n_embd = 24;
        assert_eq!(c.with_kv_heads(3).validate(), Err(ConfigError::HeadsNotDivisibleByKvHeads { n_head: 8, kv_heads: 3 }));
    }

    #[test]
    fn query_sharing_and_identity_key_value_variants_refuse_gqa() {
        use AttentionVariant::*;
        for variant in [SharedQueryKey, SharedQueryKeyAsym, SharedAll, KeyIdentity, ValueIdentity] {
            let err = tiny().with_variant(variant).with_kv_heads(2).validate().unwrap_err();
            assert!(matches!(err, ConfigError::VariantCannotShareHeads { kv_heads: 2, n_head: 4, .. }), "{err}");
            assert!(err.to_string().contains("shared-kv") && err.to_string().contains(variant.name()), "{err}");
        }
        let err = tiny().with_variant(KeyIdentity).with_kv_heads(1).validate().unwrap_err().to_string();
        assert!(err.contains("reads its keys or values from the input itself"), "{err}");
        for variant in [Standard, QueryIdentity, SharedKeyValue] {
            assert_eq!(tiny().with_variant(variant).with_kv_heads(2).validate(), Ok(()), "{variant}");
        }
    }

    #[test]
    fn dropout_and_scale_ranges() {
        let mut c = tiny();
        c.dropout = 1.0;
        assert_eq!(c.validate(), Err(ConfigError::Dropout(1.0)));
        let mut c = tiny();
        c.attention.scale = Some(0.0);
        assert_eq!(c.validate(), Err(ConfigError::Scale(0.0)));
        c.attention.scale = Some(f64::NAN);
        assert!(matches!(c.validate(), Err(ConfigError::Scale(_))));
    }

    #[test]
    fn json_round_trip_and_malformed_json() {
        let c = tiny().with_variant(AttentionVariant::QueryIdentity);
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(ModelConfig::from_json(&text).unwrap(), c);
        let err = ModelConfig::from_json("{\"vocab_size\": 3").unwrap_err();
        assert!(matches!(err, ConfigError::Json(_)), "{err}");
        let err = ModelConfig::from_json(&text.replace("\"n_head\":4", "\"n_head\":5")).unwrap_err();
        assert!(matches!(err, ConfigError::EmbdNotDivisibleByHeads { .. }), "{err}");
    }

    #[test]
    fn identity_default_scale_and_override() {
        let c = tiny().with_variant(AttentionVariant::QueryIdentity);
        assert_eq!(c.attention_scale(), 1.0 / (2.0 * 2.0));
        let mut c = c;
        c.attention.scale = Some(0.3);
        assert_eq!(c.attention_scale(), 0.3);
    }
}
