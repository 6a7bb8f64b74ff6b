//! A model the trainer can train: the GPT, or the ViT when its config has an image section. Both
//! answer with logits [batch, time, outputs] (a ViT's time is 1, one answer per image), so the
//! loss, the accuracy and the optimiser treat them alike.

use std::sync::Arc;

use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};
use qkv_kernels::TokenGroups;

use crate::config::{ConfigError, ModelConfig};
use crate::dropout::SeedStream;
use crate::gpt::{Block, Gpt};
use crate::output::ModelOutput;
use crate::vit::Vit;

#[derive(Module, Debug)]
pub enum Model {
    Gpt(Gpt),
    Vit(Vit),
}

/// What a model reads: token ids [batch, time], or images [batch, height·width·channels].
#[derive(Debug, Clone)]
pub enum Input {
    /// The ids, and the same grouped by token where the host that made the batch grouped them
    /// (a GPU's backward adds up the token table's gradient by them: `qkv_kernels::TokenGroups`).
    Tokens(Tensor<2, Int>, Option<Arc<TokenGroups>>),
    Pixels(Tensor<2>),
}

impl Model {
    /// Validates `config` and builds its model: a ViT when it has an image section, a GPT
    /// otherwise; the same seed gives the same weights.
    pub fn new_seeded(config: &ModelConfig, device: &Device, seed: u64) -> Result<Self, ConfigError> {
        Ok(match config.is_vision() {
            true => Model::Vit(Vit::new_seeded(config, device, seed)?),
            false => Model::Gpt(Gpt::new_seeded(config, device, seed)?),
        })
    }

    /// The GPT, unless this is a ViT.
    pub fn gpt(&self) -> Option<&Gpt> {
        match self {
            Model::Gpt(gpt) => Some(gpt),
            Model::Vit(_) => None,
        }
    }

    /// The GPT, or why a ViT is not one.
    pub fn into_gpt(self) -> Result<Gpt, ConfigError> {
        match self {
            Model::Gpt(gpt) => Ok(gpt),
            Model::Vit(_) => Err(ConfigError::NotAGpt),
        }
    }

    pub fn seeds(&self) -> &SeedStream {
        match self {
            Model::Gpt(gpt) => gpt.seeds(),
            Model::Vit(vit) => vit.seeds(),
        }
    }

    pub fn with_seeds(self, seeds: &SeedStream) -> Self {
        match self {
            Model::Gpt(gpt) => Model::Gpt(gpt.with_seeds(seeds)),
            Model::Vit(vit) => Model::Vit(vit.with_seeds(seeds)),
        }
    }

    /// The block applied at each layer, in order.
    pub fn layers(&self) -> Box<dyn Iterator<Item = &Block> + '_> {
        match self {
            Model::Gpt(gpt) => Box::new(gpt.layers()),
            Model::Vit(vit) => Box::new(vit.layers()),
        }
    }

    /// The first block's input: embedded tokens at positions 0.., or the class token and the
    /// embedded patches.
    pub fn embed(&self, input: Input) -> Tensor<3> {
        match (self, input) {
            (Model::Gpt(gpt), Input::Tokens(tokens, _)) => gpt.embed(tokens, 0),
            (Model::Vit(vit), Input::Pixels(pixels)) => vit.embed(pixels),
            (model, input) => panic!("{} given {}", model.reads(), input.kind()),
        }
    }

    /// Logits [batch, time, outputs] for `input`, through the fused attention.
    ///
    /// # Panics
    /// When `input` is not what the model reads (tokens for a GPT, pixels for a ViT): the
    /// trainer checks its data against the config before it builds a model.
    pub fn forward(&self, input: Input) -> Tensor<3> {
        match (self, input) {
            (Model::Gpt(gpt), Input::Tokens(tokens, groups)) => gpt.forward_grouped(tokens, groups.as_deref()),
            (Model::Vit(vit), Input::Pixels(pixels)) => vit.forward(pixels),
            (model, input) => panic!("{} given {}", model.reads(), input.kind()),
        }
    }

    /// Logits and every layer's attention (for the maps).
    pub fn forward_with_attention(&self, input: Input) -> ModelOutput {
        match (self, input) {
            (Model::Gpt(gpt), Input::Tokens(tokens, _)) => gpt.forward_with_attention(tokens),
            (Model::Vit(vit), Input::Pixels(pixels)) => vit.forward_with_attention(pixels),
            (model, input) => panic!("{} given {}", model.reads(), input.kind()),
        }
    }

    fn reads(&self) -> &'static str {
        match self {
            Model::Gpt(_) => "a GPT reads tokens, not images: it was",
            Model::Vit(_) => "a ViT reads images, not tokens: it was",
        }
    }
}

impl Input {
    /// No rows, or rows of nothing.
    pub fn is_empty(&self) -> bool {
        match self {
            Input::Tokens(tokens, _) => tokens.dims().contains(&0),
            Input::Pixels(pixels) => pixels.dims().contains(&0),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Input::Tokens(..) => "tokens",
            Input::Pixels(_) => "pixels",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpt::tests::tiny_config;
    use crate::variant::AttentionVariant;
    use crate::vit::tests::tiny_vision;

    #[test]
    fn the_config_says_which_model_it_builds() {
        let device = Device::flex();
        let gpt = Model::new_seeded(&tiny_config(AttentionVariant::Standard), &device, 1).unwrap();
        assert!(gpt.gpt().is_some());
        let vit = Model::new_seeded(&tiny_vision(AttentionVariant::Standard), &device, 1).unwrap();
        assert!(vit.gpt().is_none());
        assert_eq!(vit.into_gpt().unwrap_err(), ConfigError::NotAGpt);
        assert_eq!(Gpt::new(&tiny_vision(AttentionVariant::Standard), &device).unwrap_err(), ConfigError::NotAGpt);
    }
}
