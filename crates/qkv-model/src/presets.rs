//! Named architectures: the papers' models, nanoGPT's Shakespeare recipes and QKV Lab's own
//! small setups. Architectures only; training recipes live with the trainer.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::config::{AttentionConfig, ImageInput, ModelConfig, Norm};
use crate::variant::AttentionVariant;

/// GPT-2's BPE vocabulary (50257) padded to a multiple of 64, as nanoGPT and both papers do.
const GPT2_VOCAB_PADDED: usize = 50304;
/// nanoGPT's character vocabulary of tiny Shakespeare; a trained tokenizer replaces it.
const SHAKESPEARE_CHARS: usize = 65;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Preset {
    #[serde(rename = "gpt2-small")]
    Gpt2Small,
    #[serde(rename = "gpt2-small-realloc")]
    Gpt2SmallRealloc,
    #[serde(rename = "paper2-300m")]
    Paper2_300m,
    #[serde(rename = "paper2-1.2b")]
    Paper2_1_2b,
    #[serde(rename = "shakespeare-char")]
    ShakespeareChar,
    #[serde(rename = "shakespeare-char-cpu")]
    ShakespeareCharCpu,
    #[serde(rename = "classroom")]
    Classroom,
    #[serde(rename = "synthetic")]
    Synthetic,
    #[serde(rename = "theory")]
    Theory,
    #[serde(rename = "vision-digits")]
    VisionDigits,
}

impl Preset {
    pub const ALL: [Preset; 10] = [
        Preset::Gpt2Small,
        Preset::Gpt2SmallRealloc,
        Preset::Paper2_300m,
        Preset::Paper2_1_2b,
        Preset::ShakespeareChar,
        Preset::ShakespeareCharCpu,
        Preset::Classroom,
        Preset::Synthetic,
        Preset::Theory,
        Preset::VisionDigits,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Gpt2Small => "gpt2-small",
            Preset::Gpt2SmallRealloc => "gpt2-small-realloc",
            Preset::Paper2_300m => "paper2-300m",
            Preset::Paper2_1_2b => "paper2-1.2b",
            Preset::ShakespeareChar => "shakespeare-char",
            Preset::ShakespeareCharCpu => "shakespeare-char-cpu",
            Preset::Classroom => "classroom",
            Preset::Synthetic => "synthetic",
            Preset::Theory => "theory",
            Preset::VisionDigits => "vision-digits",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Preset::Gpt2Small => "paper 1's baseline: GPT-2 small, 12×12×768, context 1024, no biases, tied (124M)",
            Preset::Gpt2SmallRealloc => "paper 1's reallocation run: W_Q = I and the MLP widened to 3456, matching GPT-2 small's count",
            Preset::Paper2_300m => "paper 2's 300M model: 20×16×1024, MLP 4096, context 2048, biases, tied",
            Preset::Paper2_1_2b => "paper 2's 1.2B model: 22×32×2048, MLP 8192, context 2048, biases, tied",
            Preset::ShakespeareChar => "nanoGPT's GPU Shakespeare recipe: 6×6×384, context 256, dropout 0.2",
            Preset::ShakespeareCharCpu => "nanoGPT's CPU Shakespeare recipe: 4×4×128, context 64",
            Preset::Classroom => "2×4×64, context 64: shows learning within seconds, even in a browser",
            Preset::Synthetic => "2×4×128, context 128: the digit-list tasks (copy, reverse, sort, swap, sub)",
            Preset::Theory => "2×2×32, no normalisation, untied: the setting of paper 1's exact W_Q elimination",
            Preset::VisionDigits => "a ViT for the 8×8 digits: 2×2 patches, 3×4×64, class token, 10 classes",
        }
    }

    /// Whether the preset is a vision transformer's.
    pub fn is_vision(self) -> bool {
        self.config().is_vision()
    }

    /// The preset's architecture (with its own default variant).
    pub fn config(self) -> ModelConfig {
        let gpt = |vocab_size, block_size, n_layer, n_head, n_embd, bias, dropout| ModelConfig {
            vocab_size,
            block_size,
            n_layer,
            n_head,
            n_embd,
            mlp_hidden: 4 * n_embd,
            bias,
            tie_embeddings: true,
            dropout,
            norm: Norm::LayerNorm,
            mlp_skip: true,
            shared_layers: false,
            attention: AttentionConfig::new(AttentionVariant::Standard),
            image: None,
        };
        match self {
            Preset::Gpt2Small => gpt(GPT2_VOCAB_PADDED, 1024, 12, 12, 768, false, 0.0),
            Preset::Gpt2SmallRealloc => {
                let standard = Preset::Gpt2Small.config();
                // W_Q's d² per layer moves into the MLP: 2·d·Δhidden = d², so Δhidden = d/2.
                ModelConfig {
                    mlp_hidden: standard.mlp_hidden + standard.n_embd / 2,
                    ..standard.with_variant(AttentionVariant::QueryIdentity)
                }
            }
            Preset::Paper2_300m => gpt(GPT2_VOCAB_PADDED, 2048, 20, 16, 1024, true, 0.1),
            Preset::Paper2_1_2b => gpt(GPT2_VOCAB_PADDED, 2048, 22, 32, 2048, true, 0.1),
            Preset::ShakespeareChar => gpt(SHAKESPEARE_CHARS, 256, 6, 6, 384, false, 0.2),
            Preset::ShakespeareCharCpu => gpt(SHAKESPEARE_CHARS, 64, 4, 4, 128, false, 0.0),
            Preset::Classroom => gpt(SHAKESPEARE_CHARS, 64, 2, 4, 64, false, 0.0),
            // Digits 0-9 and the separator.
            Preset::Synthetic => gpt(11, 128, 2, 4, 128, true, 0.0),
            Preset::Theory => ModelConfig { norm: Norm::None, tie_embeddings: false, ..gpt(SHAKESPEARE_CHARS, 32, 2, 2, 32, false, 0.0) },
            Preset::VisionDigits => {
                let image = ImageInput::new(8, 8, 1, 2);
                let mut config = ModelConfig {
                    tie_embeddings: false,
                    image: Some(image),
                    mlp_hidden: 128,
                    ..gpt(10, image.tokens(), 3, 4, 64, true, 0.1)
                };
                config.attention.bidirectional = true;
                config
            }
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown preset '{0}': use one of {names}", names = Preset::ALL.map(Preset::name).join(", "))]
pub struct UnknownPreset(pub String);

impl FromStr for Preset {
    type Err = UnknownPreset;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Preset::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(s.trim())).ok_or_else(|| UnknownPreset(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::ParamReport;

    fn millions(preset: Preset, variant: Option<AttentionVariant>) -> f64 {
        let mut config = preset.config();
        if let Some(variant) = variant {
            config = config.with_variant(variant);
        }
        ParamReport::new(&config).total_params as f64 / 1e6
    }

    #[test]
    fn every_preset_is_valid_and_parses_by_name() {
        for preset in Preset::ALL {
            preset.config().validate().unwrap();
            assert_eq!(preset.name().parse::<Preset>().unwrap(), preset);
        }
        let err = "gpt3".parse::<Preset>().unwrap_err().to_string();
        assert!(err.contains("gpt2-small") && err.contains("theory"), "{err}");
    }

    #[test]
    fn paper_1_reports_124m_original_and_117m_identity() {
        assert_eq!(millions(Preset::Gpt2Small, None).round(), 124.0);
        assert_eq!(millions(Preset::Gpt2Small, Some(AttentionVariant::QueryIdentity)).round(), 117.0);
    }

    #[test]
    fn reallocation_run_matches_the_original_count() {
        let original = ParamReport::new(&Preset::Gpt2Small.config()).total_params;
        let realloc = ParamReport::new(&Preset::Gpt2SmallRealloc.config()).total_params;
        assert_eq!(Preset::Gpt2SmallRealloc.config().mlp_hidden, 3456);
        assert_eq!(realloc, original);
    }

    #[test]
    fn paper_1_removes_25_percent_of_attention_projections() {
        let standard = ParamReport::new(&Preset::Gpt2Small.config());
        let identity = ParamReport::new(&Preset::Gpt2Small.config().with_variant(AttentionVariant::QueryIdentity));
        assert_eq!(identity.attention_params * 4, standard.attention_params * 3);
    }

    #[test]
    fn paper_2_sizes_are_the_300m_and_1_2b_models() {
        // The papers name their models by rounded size: 305.5M is "300M", 1.21B is "1.2B".
        assert_eq!((millions(Preset::Paper2_300m, None) / 100.0).round(), 3.0);
        assert_eq!((millions(Preset::Paper2_1_2b, None) / 100.0).round(), 12.0);
    }
}
