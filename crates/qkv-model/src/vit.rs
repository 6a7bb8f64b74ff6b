//! The vision transformer (ViT): an image cut into patches, each patch a token, a class token in
//! front, the GPT's blocks reading both ways, and a head on the class token's final state. The
//! attention is the GPT's, so every variant (and GQA/MQA) is a ViT variant too.

use burn::module::{Module, Param};
use burn::nn::{LayerNorm, Linear};
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::attention::{apply_linear, init_linear};
use crate::config::{ConfigError, ImageInput, ModelConfig};
use crate::dropout::{Dropout, SeedStream};
use crate::gpt::{Block, INIT_STD, layers, new_blocks, new_layer_norm, normalise, run_layers};
use crate::output::ModelOutput;
use crate::random::InitialWeights;

/// A ViT classifier. Built only from a validated [`ModelConfig`] with an `image` section.
#[derive(Module, Debug)]
pub struct Vit {
    /// A patch's values [patch_values] → n_embd (a linear map, as a stride-p convolution is).
    pub patch_embedding: Linear,
    /// The class token [1, n_embd], put in front of the patches: the head reads its final state.
    pub class_token: Param<Tensor<2>>,
    /// Learned positions [1 + patches, n_embd], the class token's first.
    pub positions: Param<Tensor<2>>,
    pub drop: Dropout,
    /// One block per layer, or one every layer reuses (`shared_layers`).
    pub blocks: Vec<Block>,
    pub ln_f: Option<LayerNorm>,
    /// The class token's final state → one logit per class.
    pub head: Linear,
    #[module(skip)]
    pub image: ImageInput,
    pub n_layer: usize,
}

impl Vit {
    /// Validates `config` and builds the model on `device`: the same seed gives the same weights
    /// and dropout masks, as [`crate::Gpt::new_seeded`] does.
    pub fn new_seeded(config: &ModelConfig, device: &Device, seed: u64) -> Result<Self, ConfigError> {
        config.validate()?;
        let image = config.image.ok_or(ConfigError::NotAVit)?;
        let (init, seeds) = (InitialWeights::new(seed), SeedStream::new(seed));
        let d = config.n_embd;
        Ok(Self {
            patch_embedding: init_linear(&init, "patch_embedding", image.patch_values(), d, config.bias, INIT_STD, device),
            class_token: init.normal("class_token", [1, d], INIT_STD, device),
            positions: init.normal("positions", [image.tokens(), d], INIT_STD, device),
            drop: Dropout::new(config.dropout, &seeds),
            blocks: new_blocks(config, &init, &seeds, device),
            ln_f: new_layer_norm(config, device),
            head: init_linear(&init, "head", d, config.vocab_size, config.bias, INIT_STD, device),
            image,
            n_layer: config.n_layer,
        })
    }

    pub fn seeds(&self) -> &SeedStream {
        self.drop.seeds()
    }

    /// The model drawing its dropout masks from `seeds` (see [`crate::Gpt::with_seeds`]).
    pub fn with_seeds(mut self, seeds: &SeedStream) -> Self {
        self.drop = self.drop.reseeded(seeds);
        self.blocks = self.blocks.into_iter().map(|block| block.with_seeds(seeds)).collect();
        self
    }

    /// The block applied at each layer, in order.
    pub fn layers(&self) -> impl Iterator<Item = &Block> {
        layers(&self.blocks, self.n_layer)
    }

    /// Images [batch, height·width·channels] (HWC) → patches [batch, patches, patch_values],
    /// row of patches by row, each patch's window HWC too ([`ImageInput::window_indices`]).
    pub fn patches(&self, pixels: Tensor<2>) -> Tensor<3> {
        let [batch, values] = pixels.dims();
        let ImageInput { height, width, channels, patch, overlap } = self.image;
        assert_eq!(values, self.image.values(), "an image of {height}×{width}×{channels} has {} values, not {values}", self.image.values());
        let (patches, patch_values) = (self.image.patches(), self.image.patch_values());
        if overlap == 0 {
            // Disjoint patches are a reshape: no gather, no index upload.
            return pixels.reshape([batch, height / patch, patch, width / patch, patch * channels]).swap_dims(2, 3).reshape([
                batch,
                patches,
                patch_values,
            ]);
        }
        // Overlapping windows gather from the image with one zero appended for the pixels past
        // its edge (the inputs carry no gradient, so the gather costs no backward).
        let device = pixels.device();
        let indices: Vec<i64> = self.image.window_indices().into_iter().map(|i| i as i64).collect();
        let indices = Tensor::<1, Int>::from_data(TensorData::new(indices, [patches * patch_values]), &device);
        let padded = Tensor::cat(vec![pixels, Tensor::zeros([batch, 1], &device)], 1);
        padded.select(1, indices).reshape([batch, patches, patch_values])
    }

    /// The class token and the embedded patches, with their positions: [batch, tokens, n_embd].
    pub fn embed(&self, pixels: Tensor<2>) -> Tensor<3> {
        let batch = pixels.dims()[0];
        let patches = apply_linear(&self.patch_embedding, self.patches(pixels));
        let [_, d] = self.class_token.dims();
        let class = self.class_token.val().reshape([1, 1, d]).expand([batch, 1, d]);
        let tokens = Tensor::cat(vec![class, patches], 1);
        self.drop.forward(tokens + self.positions.val().unsqueeze_dim(0))
    }

    fn run(&self, pixels: Tensor<2>, with_attention: bool) -> ModelOutput {
        let (x, attention, attention_logits) = run_layers(self.layers(), self.embed(pixels), with_attention);
        let [batch, _, d] = x.dims();
        let class = normalise(&self.ln_f, x.slice([0..batch, 0..1, 0..d]));
        ModelOutput { logits: apply_linear(&self.head, class), attention, attention_logits }
    }

    /// Class logits [batch, 1, classes] for images [batch, height·width·channels]: one
    /// "position" per image, so that the GPT's loss and accuracy read them unchanged.
    pub fn forward(&self, pixels: Tensor<2>) -> Tensor<3> {
        self.run(pixels, false).logits
    }

    /// Logits and every layer's attention over the class token and the patches.
    pub fn forward_with_attention(&self, pixels: Tensor<2>) -> ModelOutput {
        self.run(pixels, true)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use burn::tensor::TensorData;

    use super::*;
    use crate::accounting::ParamReport;
    use crate::gpt::tests::{tiny_config, values};
    use crate::variant::AttentionVariant;

    /// A 4×6 image in 2 channels, 2×2 patches: 6 patches, 7 tokens; 10 classes.
    pub(crate) fn tiny_vision(variant: AttentionVariant) -> ModelConfig {
        let image = ImageInput::new(4, 6, 2, 2);
        let mut config =
            ModelConfig { vocab_size: 10, block_size: image.tokens(), tie_embeddings: false, image: Some(image), ..tiny_config(variant) };
        config.attention.bidirectional = true;
        config
    }

    /// Every variant with every head-sharing setting it allows, as a ViT.
    pub(crate) fn all_tiny_vision_configs() -> Vec<ModelConfig> {
        let mut configs = Vec::new();
        for variant in AttentionVariant::ALL {
            for kv_heads in [4, 2, 1] {
                let config = tiny_vision(variant).with_kv_heads(kv_heads);
                if config.validate().is_ok() {
                    configs.push(config);
                }
            }
        }
        configs
    }

    fn images(rows: usize, config: &ModelConfig, device: &Device) -> Tensor<2> {
        let values = config.image.unwrap().values();
        let pixels: Vec<f32> = (0..rows * values).map(|i| ((i * 7919) % 17) as f32 / 16.0).collect();
        Tensor::from_data(TensorData::new(pixels, [rows, values]), device)
    }

    #[test]
    fn patches_are_the_image_cut_in_squares_row_by_row() {
        let config = tiny_vision(AttentionVariant::Standard);
        let model = Vit::new_seeded(&config, &Device::flex(), 1).unwrap();
        // Pixel (y, x) channel c holds 100·y + 10·x + c.
        let pixels: Vec<f32> = (0..4).flat_map(|y| (0..6).flat_map(move |x| (0..2).map(move |c| (100 * y + 10 * x + c) as f32))).collect();
        let patches = values(model.patches(Tensor::from_data(TensorData::new(pixels, [1, 48]), &Device::flex())));
        assert_eq!(patches.len(), 6 * 8);
        // Patch 4 is the second row of patches' middle one: pixels y 2..4, x 2..4.
        assert_eq!(&patches[4 * 8..5 * 8], &[220.0, 221.0, 230.0, 231.0, 320.0, 321.0, 330.0, 331.0]);
    }

    #[test]
    fn overlapping_windows_read_their_neighbours_and_zeros_past_the_edge() {
        let device = Device::flex();
        let pixels: Vec<f32> = (0..4).flat_map(|y| (0..6).flat_map(move |x| (0..2).map(move |c| (100 * y + 10 * x + c) as f32))).collect();
        let image = || Tensor::<2>::from_data(TensorData::new(pixels.clone(), [1, 48]), &device);
        // The gather's order is the reshape's: overlap 0 read through the indices is the same cut.
        let disjoint = tiny_vision(AttentionVariant::Standard);
        let cut = values(Vit::new_seeded(&disjoint, &device, 1).unwrap().patches(image()));
        let gathered: Vec<f32> = disjoint.image.unwrap().window_indices().into_iter().map(|i| pixels[i]).collect();
        assert_eq!(cut, gathered);

        let mut config = disjoint.clone();
        config.image.as_mut().unwrap().overlap = 1;
        let model = Vit::new_seeded(&config, &device, 1).unwrap();
        assert_eq!(ParamReport::new(&config).total_params, model.num_params(), "a 4×4 window of 2 channels: 32 inputs");
        let windows = values(model.patches(image()));
        assert_eq!(windows.len(), 6 * 32);
        // Patch 4 (pixels y 2..4, x 2..4) reads y 1..5 and x 1..5: row y = 4 is past the edge.
        let window = &windows[4 * 32..5 * 32];
        assert_eq!(&window[..8], &[110.0, 111.0, 120.0, 121.0, 130.0, 131.0, 140.0, 141.0]);
        assert_eq!(&window[24..], &[0.0; 8]);
        // Patch 0's window starts above and left of the image.
        assert_eq!(&windows[..10], &[0.0; 10]);
        assert_eq!(&windows[10..12], &[0.0, 1.0]);
    }

    #[test]
    fn every_variant_classifies_fused_as_explicit_and_counts_as_accounted() {
        let device = Device::flex();
        for config in all_tiny_vision_configs() {
            let model = Vit::new_seeded(&config, &device, 2).unwrap();
            let name = format!("{} kv_heads {}", config.attention.variant, config.kv_heads());
            assert_eq!(ParamReport::new(&config).total_params, model.num_params(), "{name}");
            let input = images(3, &config, &device);
            let fused = model.forward(input.clone());
            assert_eq!(fused.dims(), [3, 1, 10]);
            let output = model.forward_with_attention(input);
            let difference = values(fused).iter().zip(values(output.logits)).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(difference < 1e-5, "{name}: fused and explicit differ by {difference}");
            assert_eq!(output.attention.len(), config.n_layer);
            for map in output.attention {
                assert_eq!(map.dims(), [3, config.n_head, 7, 7]);
                // Every token sees every other, the class token the whole image.
                assert!(values(map).iter().all(|&p| p > 0.0), "{name}");
            }
        }
    }

    #[test]
    fn the_class_reads_every_patch() {
        let device = Device::flex();
        let config = tiny_vision(AttentionVariant::QueryIdentity);
        let model = Vit::new_seeded(&config, &device, 3).unwrap();
        let before = values(model.forward(images(1, &config, &device)));
        let mut pixels = values(images(1, &config, &device));
        let last = pixels.len() - 1;
        pixels[last] += 1.0;
        let after = values(model.forward(Tensor::from_data(TensorData::new(pixels, [1, 48]), &device)));
        assert!(before.iter().zip(&after).any(|(a, b)| (a - b).abs() > 1e-6), "the last pixel moves the logits");
    }

    #[test]
    fn a_gpt_config_builds_no_vit() {
        assert_eq!(Vit::new_seeded(&tiny_config(AttentionVariant::Standard), &Device::flex(), 0).unwrap_err(), ConfigError::NotAVit);
    }
}
