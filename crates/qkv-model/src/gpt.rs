//! The GPT: embeddings, pre-LN blocks, final norm, LM head (nanoGPT's `model.py`, with the
//! attention variants and the theory's options).

use burn::module::Module;
use burn::nn::{Embedding, LayerNorm, LayerNormConfig, Linear};
use burn::tensor::{Device, Int, Tensor};
use qkv_kernels::{TokenGroups, gelu, layer_norm, linear, pre_norm};

use crate::attention::{AttentionTrace, CausalSelfAttention, LayerCache, apply_linear, init_linear};
use crate::config::{ConfigError, ModelConfig, Norm};
use crate::dropout::{Dropout, SeedStream};
use crate::output::ModelOutput;
use crate::random::InitialWeights;

pub(crate) const INIT_STD: f64 = 0.02;
/// LayerNorm's ε (Burn's and PyTorch's default). Burn's module keeps its ε private, so the model
/// names it here for the fused layer norm.
const LAYER_NORM_EPSILON: f64 = 1e-5;

/// GELU MLP: n_embd → mlp_hidden → n_embd.
#[derive(Module, Debug)]
pub struct Mlp {
    pub c_fc: Linear,
    pub c_proj: Linear,
    pub dropout: Dropout,
}

impl Mlp {
    fn new(config: &ModelConfig, init: &InitialWeights, seeds: &SeedStream, device: &Device) -> Self {
        let residual_std = INIT_STD / (2.0 * config.n_layer as f64).sqrt();
        Self {
            c_fc: init_linear(init, "c_fc", config.n_embd, config.mlp_hidden, config.bias, INIT_STD, device),
            c_proj: init_linear(init, "c_proj", config.mlp_hidden, config.n_embd, config.bias, residual_std, device),
            dropout: Dropout::new(config.dropout, seeds),
        }
    }

    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        self.dropout.forward(self.before_dropout(x))
    }

    /// `residual + self.forward(x)`, the dropout and the skip one op (`Dropout::forward_added_to`).
    pub fn forward_onto(&self, residual: Tensor<3>, x: Tensor<3>) -> Tensor<3> {
        self.dropout.forward_added_to(self.before_dropout(x), residual)
    }

    fn before_dropout(&self, x: Tensor<3>) -> Tensor<3> {
        apply_linear(&self.c_proj, gelu(apply_linear(&self.c_fc, x)))
    }
}

pub(crate) fn new_layer_norm(config: &ModelConfig, device: &Device) -> Option<LayerNorm> {
    match config.norm {
        Norm::LayerNorm => Some(LayerNormConfig::new(config.n_embd).with_bias(config.bias).with_epsilon(LAYER_NORM_EPSILON).init(device)),
        Norm::None => None,
    }
}

/// The block's or the final layer norm, through the fused kernel (the module holds the weights).
pub(crate) fn normalise(norm: &Option<LayerNorm>, x: Tensor<3>) -> Tensor<3> {
    match norm {
        Some(norm) => layer_norm(x, norm.gamma.val(), norm.beta.as_ref().map(|beta| beta.val()), LAYER_NORM_EPSILON),
        None => x,
    }
}

/// [`normalise`] at the head of a branch whose input the block adds back to the branch's output
/// (`qkv_kernels::pre_norm`: the same values, one launch fewer backward on a GPU).
fn normalise_branch(norm: &Option<LayerNorm>, x: Tensor<3>) -> Tensor<3> {
    match norm {
        Some(norm) => pre_norm(x, norm.gamma.val(), norm.beta.as_ref().map(|beta| beta.val()), LAYER_NORM_EPSILON),
        None => x,
    }
}

/// One pre-LN transformer block.
#[derive(Module, Debug)]
pub struct Block {
    pub ln_1: Option<LayerNorm>,
    pub attn: CausalSelfAttention,
    pub ln_2: Option<LayerNorm>,
    pub mlp: Mlp,
    pub mlp_skip: bool,
}

impl Block {
    pub(crate) fn new(config: &ModelConfig, init: &InitialWeights, seeds: &SeedStream, device: &Device) -> Self {
        Self {
            ln_1: new_layer_norm(config, device),
            attn: CausalSelfAttention::new(config, &init.within("attn"), seeds, device),
            ln_2: new_layer_norm(config, device),
            mlp: Mlp::new(config, &init.within("mlp"), seeds, device),
            mlp_skip: config.mlp_skip,
        }
    }

    /// The block drawing its dropout masks from `seeds`.
    pub(crate) fn with_seeds(mut self, seeds: &SeedStream) -> Self {
        self.attn.resid_dropout = self.attn.resid_dropout.reseeded(seeds);
        self.mlp.dropout = self.mlp.dropout.reseeded(seeds);
        self
    }

    /// The block's output and, when asked, its attention.
    pub(crate) fn run(&self, x: Tensor<3>, traced: bool) -> (Tensor<3>, Option<AttentionTrace>) {
        let (x, trace) = self.attn.forward_onto(x.clone(), normalise_branch(&self.ln_1, x), traced);
        (self.finish(x), trace)
    }

    /// The block after the attention and its skip: the MLP with or without its skip.
    fn finish(&self, x: Tensor<3>) -> Tensor<3> {
        if self.mlp_skip {
            self.mlp.forward_onto(x.clone(), normalise_branch(&self.ln_2, x))
        } else {
            self.mlp.forward(normalise(&self.ln_2, x))
        }
    }
}

/// A model's blocks: one per layer, or a single one every layer reuses (`shared_layers`); block
/// i's weights are named `blocks.i.…`.
pub(crate) fn new_blocks(config: &ModelConfig, init: &InitialWeights, seeds: &SeedStream, device: &Device) -> Vec<Block> {
    let blocks = init.within("blocks");
    (0..if config.shared_layers { 1 } else { config.n_layer }).map(|i| Block::new(config, &blocks.within(i), seeds, device)).collect()
}

/// The block applied at each of `n_layer` layers, in order.
pub(crate) fn layers(blocks: &[Block], n_layer: usize) -> impl Iterator<Item = &Block> {
    (0..n_layer).map(|layer| &blocks[layer % blocks.len()])
}

/// `x` through `layers`, and each layer's attention when asked: what the last layer wrote, then
/// every layer's probabilities and logits ([`AttentionTrace`]).
pub(crate) fn run_layers<'a>(
    layers: impl Iterator<Item = &'a Block>,
    mut x: Tensor<3>,
    traced: bool,
) -> (Tensor<3>, Vec<Tensor<4>>, Vec<Tensor<4>>) {
    let (mut attention, mut attention_logits) = (Vec::new(), Vec::new());
    for block in layers {
        let (y, trace) = block.run(x, traced);
        x = y;
        if let Some(AttentionTrace { logits, probabilities }) = trace {
            attention.push(probabilities);
            attention_logits.push(logits);
        }
    }
    (x, attention, attention_logits)
}

/// The KV cache of a whole model, one [`LayerCache`] per block.
#[derive(Debug, Clone, Default)]
pub struct KvCache {
    pub layers: Vec<LayerCache>,
}

impl KvCache {
    /// Positions cached.
    pub fn len(&self) -> usize {
        self.layers.first().map_or(0, LayerCache::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the cache holds, measured on its tensors.
    pub fn bytes(&self) -> usize {
        self.layers.iter().map(LayerCache::bytes).sum()
    }
}

/// A decoder-only transformer. Built only from a validated [`ModelConfig`].
#[derive(Module, Debug)]
pub struct Gpt {
    /// Token embedding [vocab_size, n_embd]; also the LM head when tied.
    pub wte: Embedding,
    /// Learned position embedding [block_size, n_embd].
    pub wpe: Embedding,
    pub drop: Dropout,
    /// One block per layer, or a single block every layer reuses (`shared_layers`).
    pub blocks: Vec<Block>,
    pub ln_f: Option<LayerNorm>,
    /// The LM head [n_embd, vocab_size] when it is not tied to `wte`.
    pub lm_head: Option<Linear>,
    pub block_size: usize,
    pub n_layer: usize,
}

impl Gpt {
    /// [`Gpt::new_seeded`] with seed 0.
    pub fn new(config: &ModelConfig, device: &Device) -> Result<Self, ConfigError> {
        Self::new_seeded(config, device, 0)
    }

    /// Validates `config` and builds the model with nanoGPT's initialisation on `device`: the
    /// same seed gives the same weights (on every backend, whatever else runs beside it) and the
    /// same dropout masks in the same order. Each tensor is drawn from the seed and its name
    /// ([`InitialWeights`]), so the variants of one seed share every tensor they have in common.
    pub fn new_seeded(config: &ModelConfig, device: &Device, seed: u64) -> Result<Self, ConfigError> {
        config.validate()?;
        if config.is_vision() {
            return Err(ConfigError::NotAGpt);
        }
        let (init, seeds) = (InitialWeights::new(seed), SeedStream::new(seed));
        let embedding =
            |name: &str, rows: usize| Embedding { weight: init.within(name).normal("weight", [rows, config.n_embd], INIT_STD, device) };
        Ok(Self {
            wte: embedding("wte", config.vocab_size),
            wpe: embedding("wpe", config.block_size),
            drop: Dropout::new(config.dropout, &seeds),
            blocks: new_blocks(config, &init, &seeds, device),
            ln_f: new_layer_norm(config, device),
            lm_head: (!config.tie_embeddings)
                .then(|| init_linear(&init, "lm_head", config.n_embd, config.vocab_size, false, INIT_STD, device)),
            block_size: config.block_size,
            n_layer: config.n_layer,
        })
    }

    /// The stream the model's dropout masks are drawn from.
    pub fn seeds(&self) -> &SeedStream {
        self.drop.seeds()
    }

    /// The model drawing its dropout masks from `seeds` (e.g. [`SeedStream::shard`]'s, for the
    /// copy that trains one shard of a batch).
    pub fn with_seeds(mut self, seeds: &SeedStream) -> Self {
        self.drop = self.drop.reseeded(seeds);
        self.blocks = self.blocks.into_iter().map(|block| block.with_seeds(seeds)).collect();
        self
    }

    /// The block applied at each layer, in order (the same one throughout for shared layers).
    pub fn layers(&self) -> impl Iterator<Item = &Block> {
        layers(&self.blocks, self.n_layer)
    }

    /// Token plus position embeddings for positions `offset..offset + time`.
    pub fn embed(&self, tokens: Tensor<2, Int>, offset: usize) -> Tensor<3> {
        self.embed_grouped(tokens, offset, None)
    }

    /// [`Gpt::embed`] with the tokens grouped on the host (`qkv_kernels::TokenGroups`), for a
    /// GPU's backward.
    fn embed_grouped(&self, tokens: Tensor<2, Int>, offset: usize, groups: Option<&TokenGroups>) -> Tensor<3> {
        let [_, time] = tokens.dims();
        assert!(
            offset + time <= self.block_size,
            "a sequence of {} tokens is longer than the model's block_size {}: crop the context",
            offset + time,
            self.block_size
        );
        self.drop.forward(qkv_kernels::embed(tokens, self.wte.weight.val(), self.wpe.weight.val(), offset, groups))
    }

    /// Final norm and LM head: hidden states [batch, time, n_embd] → logits [batch, time, vocab].
    pub fn head(&self, x: Tensor<3>) -> Tensor<3> {
        let x = normalise(&self.ln_f, x);
        match &self.lm_head {
            Some(head) => apply_linear(head, x),
            None => linear(x, self.wte.weight.val().transpose(), None),
        }
    }

    fn run(&self, tokens: Tensor<2, Int>, groups: Option<&TokenGroups>, with_attention: bool) -> ModelOutput {
        let (x, attention, attention_logits) = run_layers(self.layers(), self.embed_grouped(tokens, 0, groups), with_attention);
        ModelOutput { logits: self.head(x), attention, attention_logits }
    }

    /// An encoder: every position attends to every other, so it answers a whole input at once
    /// and has nothing to continue (and no KV cache).
    pub fn is_bidirectional(&self) -> bool {
        self.blocks.first().is_some_and(|block| block.attn.bidirectional)
    }

    /// Logits for `tokens` [batch, t_new] that continue the positions in `cache`, which
    /// receives their keys and values. The total length must stay within block_size. A decoder
    /// only: an encoder's earlier positions would see the new ones.
    pub fn forward_cached(&self, tokens: Tensor<2, Int>, cache: &mut KvCache) -> Tensor<3> {
        assert!(!self.is_bidirectional(), "an encoder has no KV cache: read the whole input with forward");
        if cache.layers.len() != self.n_layer {
            cache.layers = vec![LayerCache::default(); self.n_layer];
        }
        let mut x = self.embed(tokens, cache.len());
        for (block, layer_cache) in self.layers().zip(&mut cache.layers) {
            let attended = block.attn.forward_cached(normalise(&block.ln_1, x.clone()), layer_cache);
            x = block.finish(x + attended);
        }
        self.head(x)
    }

    /// Logits [batch, time, vocab] for tokens [batch, time], through the fused attention kernel.
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        self.run(tokens, None, false).logits
    }

    /// [`Gpt::forward`] with the tokens grouped on the host too (`qkv_kernels::TokenGroups`):
    /// the same logits; on a GPU the token table's gradient is added up by the groups.
    pub fn forward_grouped(&self, tokens: Tensor<2, Int>, groups: Option<&TokenGroups>) -> Tensor<3> {
        self.run(tokens, groups, false).logits
    }

    /// Logits and every layer's attention probabilities and logits (for the attention maps).
    /// Slower than [`Gpt::forward`]: the probabilities are materialised.
    pub fn forward_with_attention(&self, tokens: Tensor<2, Int>) -> ModelOutput {
        self.run(tokens, None, true)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::accounting::ParamReport;
    use crate::config::AttentionConfig;
    use crate::variant::{AttentionVariant, Projection};

    pub(crate) fn tiny_config(variant: AttentionVariant) -> ModelConfig {
        ModelConfig {
            vocab_size: 13,
            block_size: 8,
            n_layer: 2,
            n_head: 4,
            n_embd: 16,
            mlp_hidden: 24,
            bias: true,
            tie_embeddings: true,
            dropout: 0.0,
            norm: Norm::LayerNorm,
            mlp_skip: true,
            shared_layers: false,
            attention: AttentionConfig::new(variant),
            image: None,
        }
    }

    /// Every variant with every head-sharing setting it allows, on the tiny config.
    pub(crate) fn all_tiny_configs() -> Vec<ModelConfig> {
        let mut configs = Vec::new();
        for variant in AttentionVariant::ALL {
            for kv_heads in [4, 2, 1] {
                let config = tiny_config(variant).with_kv_heads(kv_heads);
                if config.validate().is_ok() {
                    configs.push(config);
                }
            }
        }
        configs
    }

    pub(crate) fn tokens(rows: &[&[i64]], device: &Device) -> Tensor<2, Int> {
        let time = rows[0].len();
        let flat: Vec<i64> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        Tensor::from_data(burn::tensor::TensorData::new(flat, [rows.len(), time]), device)
    }

    pub(crate) fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        // NaN counts as an infinite difference: f32::max would silently drop it.
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, |m, d| if d.is_nan() { f32::INFINITY } else { m.max(d) })
    }

    #[test]
    fn variants_of_one_seed_start_every_tensor_they_share_from_the_same_values() {
        let device = Device::flex();
        let untied = |variant| ModelConfig { tie_embeddings: false, ..tiny_config(variant) };
        let build = |config: &ModelConfig| Gpt::new_seeded(config, &device, 5).unwrap();
        let standard = build(&untied(AttentionVariant::Standard));
        let no_query = build(&untied(AttentionVariant::QueryIdentity));
        // Paper 1's wider MLP: W_Q's parameters spent on the MLP, so its tensors change shape.
        let wide = build(&ModelConfig { mlp_hidden: 32, ..untied(AttentionVariant::QueryIdentity) });
        let shared_kv = build(&untied(AttentionVariant::SharedKeyValue).with_kv_heads(2));
        let same = |a: &Linear, b: &Linear| values(a.weight.val()) == values(b.weight.val());
        let projection = |gpt: &Gpt, layer: usize, p: Projection| gpt.blocks[layer].attn.projection(p).unwrap().clone();
        assert_eq!(values(standard.wte.weight.val()), values(no_query.wte.weight.val()));
        assert_eq!(values(standard.wpe.weight.val()), values(wide.wpe.weight.val()));
        assert!(same(standard.lm_head.as_ref().unwrap(), no_query.lm_head.as_ref().unwrap()));
        for layer in 0..2 {
            let (s, n, w) = (&standard.blocks[layer], &no_query.blocks[layer], &wide.blocks[layer]);
            for p in [Projection::Key, Projection::Value] {
                assert!(same(&projection(&standard, layer, p), &projection(&no_query, layer, p)), "layer {layer}: {}", p.name());
                assert!(same(&projection(&standard, layer, p), &projection(&wide, layer, p)), "layer {layer}: {}", p.name());
            }
            assert!(same(&s.attn.w_o, &n.attn.w_o) && same(&s.attn.w_o, &w.attn.w_o), "layer {layer}: W_O");
            assert!(same(&s.mlp.c_fc, &n.mlp.c_fc) && same(&s.mlp.c_proj, &n.mlp.c_proj), "layer {layer}: the MLP");
            // Tensors of another shape are not in common: the wider MLP's, and K=V's with two
            // key/value heads.
            assert!(!same(&s.mlp.c_fc, &w.mlp.c_fc));
            assert!(same(&s.attn.w_o, &shared_kv.blocks[layer].attn.w_o));
        }
        // Each tensor is its own draw: layers differ, and so do W_K and W_V.
        assert!(!same(&projection(&standard, 0, Projection::Key), &projection(&standard, 1, Projection::Key)));
        assert!(!same(&projection(&standard, 0, Projection::Key), &projection(&standard, 0, Projection::Value)));
    }

    #[test]
    fn changing_a_later_token_leaves_earlier_logits_unchanged() {
        let device = Device::flex();
        for config in all_tiny_configs() {
            let model = Gpt::new_seeded(&config, &device, 1).unwrap();
            let a = values(model.forward(tokens(&[&[1, 2, 3, 4, 5, 6]], &device)));
            let b = values(model.forward(tokens(&[&[1, 2, 3, 4, 12, 0]], &device)));
            let vocab = config.vocab_size;
            let prefix = 4 * vocab;
            assert!(
                max_abs_diff(&a[..prefix], &b[..prefix]) == 0.0,
                "{} kv_heads {}: earlier logits moved",
                config.attention.variant,
                config.kv_heads()
            );
            assert!(max_abs_diff(&a[prefix..], &b[prefix..]) > 1e-6, "later logits must react");
        }
    }

    #[test]
    fn fused_and_explicit_attention_give_the_same_logits() {
        let device = Device::flex();
        for config in all_tiny_configs() {
            let model = Gpt::new_seeded(&config, &device, 2).unwrap();
            let input = tokens(&[&[3, 1, 4, 1, 5, 9, 2, 6], &[2, 7, 1, 8, 2, 8, 1, 8]], &device);
            let fused = values(model.forward(input.clone()));
            let output = model.forward_with_attention(input);
            let diff = max_abs_diff(&fused, &values(output.logits));
            assert!(diff < 1e-5, "{}: fused vs explicit differ by {diff}", config.attention.variant);
        }
    }

    /// An encoder's attention reads both ways: every row is a distribution over the whole input,
    /// the future included, and the fused kernel computes what the explicit maps say.
    #[test]
    fn an_encoder_attends_both_ways_fused_and_explicit() {
        let device = Device::flex();
        for mut config in all_tiny_configs() {
            config.attention.bidirectional = true;
            let model = Gpt::new_seeded(&config, &device, 2).unwrap();
            assert!(model.is_bidirectional());
            let input = tokens(&[&[3, 1, 4, 1, 5], &[2, 7, 1, 8, 2]], &device);
            let fused = values(model.forward(input.clone()));
            let output = model.forward_with_attention(input.clone());
            let diff = max_abs_diff(&fused, &values(output.logits));
            assert!(diff < 1e-5, "{}: fused vs explicit differ by {diff}", config.attention.variant);
            for map in output.attention {
                let p = values(map);
                for row in p.chunks(5) {
                    assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
                    assert!(row.iter().all(|&x| x > 0.0), "{}: a row that does not see every position", config.attention.variant);
                }
            }
            // The first position's output depends on the last token, as no decoder's does.
            let changed = values(model.forward(tokens(&[&[3, 1, 4, 1, 6], &[2, 7, 1, 8, 3]], &device)));
            let vocab = config.vocab_size;
            assert!(max_abs_diff(&fused[..vocab], &changed[..vocab]) > 1e-6, "{}", config.attention.variant);
        }
    }

    #[test]
    fn cached_forward_matches_full_forward_and_measures_the_accounted_bytes() {
        let device = Device::flex();
        let sequence: [i64; 7] = [3, 1, 4, 1, 5, 9, 2];
        for config in all_tiny_configs() {
            let model = Gpt::new_seeded(&config, &device, 4).unwrap();
            let full = values(model.forward(tokens(&[&sequence, &sequence], &device)));
            let mut cache = KvCache::default();
            let mut cached = values(model.forward_cached(tokens(&[&sequence[..3], &sequence[..3]], &device), &mut cache));
            for t in 3..sequence.len() {
                let step = model.forward_cached(tokens(&[&sequence[t..t + 1], &sequence[t..t + 1]], &device), &mut cache);
                cached.extend(values(step));
            }
            // Cached logits come position by position; reorder the full ones the same way.
            let vocab = config.vocab_size;
            let row = |r: usize, from: usize, to: usize| full[(r * 7 + from) * vocab..(r * 7 + to) * vocab].to_vec();
            let mut expected = [row(0, 0, 3), row(1, 0, 3)].concat();
            for t in 3..7 {
                expected.extend([row(0, t, t + 1), row(1, t, t + 1)].concat());
            }
            let diff = max_abs_diff(&expected, &cached);
            assert!(diff < 1e-4, "{} kv_heads {}: cached logits differ by {diff}", config.attention.variant, config.kv_heads());
            assert_eq!(cache.len(), 7);
            let per_token = crate::accounting::kv_cache_bytes_per_token(&config, crate::CacheDType::F32);
            assert_eq!(cache.bytes(), per_token * 7 * 2, "{}", config.attention.variant);
        }
    }

    #[test]
    fn attention_maps_are_causal_distributions_per_layer_and_head() {
        let device = Device::flex();
        for config in all_tiny_configs() {
            let model = Gpt::new_seeded(&config, &device, 3).unwrap();
            let output = model.forward_with_attention(tokens(&[&[1, 2, 3, 4, 5]], &device));
            assert_eq!(output.attention.len(), config.n_layer);
            assert_eq!(output.attention_logits.len(), config.n_layer);
            for (map, logits) in output.attention.into_iter().zip(output.attention_logits) {
                assert_eq!(map.dims(), [1, config.n_head, 5, 5]);
                assert_eq!(logits.dims(), [1, config.n_head, 5, 5]);
                let (p, logits) = (values(map), values(logits));
                for (row, (p, logits)) in p.chunks(5).zip(logits.chunks(5)).enumerate() {
                    let i = row % 5;
                    assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
                    assert!(p[i + 1..].iter().all(|&x| x == 0.0), "row {i} attends to the future");
                    // The probabilities are the softmax of the logits the query may read.
                    let total: f32 = logits[..=i].iter().map(|l| l.exp()).sum();
                    for j in 0..=i {
                        assert!((p[j] - logits[j].exp() / total).abs() < 1e-5, "row {i}, key {j}");
                    }
                }
            }
        }
    }

    /// Parameter counts of the instantiated module, component by component, in the accounting's
    /// names.
    fn instantiated_components(model: &Gpt) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        let mut add = |name: &str, n: usize| {
            if n == 0 {
                return;
            }
            match counts.iter_mut().find(|(existing, _)| existing == name) {
                Some((_, total)) => *total += n,
                None => counts.push((name.to_string(), n)),
            }
        };
        let weight = |l: &Option<Linear>| l.as_ref().map_or(0, |l| l.weight.num_params());
        let bias = |l: &Linear| l.bias.as_ref().map_or(0, |b| b.num_params());
        let opt_bias = |l: &Option<Linear>| l.as_ref().map_or(0, bias);
        add("token embedding", model.wte.num_params());
        add("position embedding", model.wpe.num_params());
        for block in &model.blocks {
            let a = &block.attn;
            for (name, proj) in
                [("W_Q", &a.w_q), ("W_K", &a.w_k), ("W_V", &a.w_v), ("W_QK", &a.w_qk), ("W_KV", &a.w_kv), ("W_QKV", &a.w_qkv)]
            {
                add(name, weight(proj));
            }
            add("W_O", a.w_o.weight.num_params());
            let biases: usize = [&a.w_q, &a.w_k, &a.w_v, &a.w_qk, &a.w_kv, &a.w_qkv].into_iter().map(opt_bias).sum();
            add("attention biases", biases + bias(&a.w_o));
            add("asymmetry term", a.asymmetry.as_ref().map_or(0, |t| t.num_params()) + a.relative.as_ref().map_or(0, |t| t.num_params()));
            add("MLP in", block.mlp.c_fc.weight.num_params());
            add("MLP out", block.mlp.c_proj.weight.num_params());
            add("MLP biases", bias(&block.mlp.c_fc) + bias(&block.mlp.c_proj));
            add("block norms", block.ln_1.num_params() + block.ln_2.num_params());
        }
        add("final norm", model.ln_f.num_params());
        add("LM head", model.lm_head.num_params());
        counts
    }

    #[test]
    fn shared_layers_apply_one_block_at_every_layer() {
        let device = Device::flex();
        let mut config = tiny_config(AttentionVariant::Standard);
        config.n_layer = 3;
        config.shared_layers = true;
        let model = Gpt::new_seeded(&config, &device, 3).unwrap();
        assert_eq!(model.blocks.len(), 1);
        let input = tokens(&[&[1, 2, 3, 4]], &device);
        let mut x = model.embed(input.clone(), 0);
        for _ in 0..3 {
            x = model.blocks[0].run(x, false).0;
        }
        let by_hand = values(model.head(x));
        assert_eq!(max_abs_diff(&values(model.forward(input.clone())), &by_hand), 0.0);
        let output = model.forward_with_attention(input);
        assert_eq!(output.attention.len(), 3, "one map per layer applied");
    }

    #[test]
    fn analytic_counts_equal_instantiated_counts() {
        let device = Device::flex();
        let mut configs = all_tiny_configs();
        for variant in AttentionVariant::ALL {
            let mut untied_no_bias = tiny_config(variant);
            untied_no_bias.tie_embeddings = false;
            untied_no_bias.bias = false;
            untied_no_bias.mlp_hidden = 40;
            configs.push(untied_no_bias);
            let mut no_norm = tiny_config(variant);
            no_norm.norm = Norm::None;
            no_norm.n_layer = 3;
            no_norm.mlp_skip = false;
            configs.push(no_norm.clone());
            let mut shared = no_norm;
            shared.shared_layers = true;
            shared.mlp_skip = true;
            configs.push(shared);
        }
        for config in configs {
            let model = Gpt::new(&config, &device).unwrap();
            let report = ParamReport::new(&config);
            assert_eq!(report.total_params, model.num_params(), "{config:?}");
            let mut analytic: Vec<(String, usize)> = report.components.iter().map(|c| (c.name.clone(), c.params)).collect();
            let mut instantiated = instantiated_components(&model);
            analytic.sort();
            instantiated.sort();
            assert_eq!(analytic, instantiated, "{config:?}");
            let attention: usize = model.blocks.iter().map(|b| b.attn.num_params()).sum();
            assert_eq!(report.attention_params, attention);
        }
    }

    #[test]
    fn query_identity_has_no_query_parameter() {
        let device = Device::flex();
        let model = Gpt::new(&tiny_config(AttentionVariant::QueryIdentity), &device).unwrap();
        for block in &model.blocks {
            let a = &block.attn;
            assert!(a.w_q.is_none() && a.w_qk.is_none() && a.w_qkv.is_none());
            assert!(a.w_k.is_some() && a.w_v.is_some());
        }
    }

    #[test]
    fn shared_variants_own_one_tensor_for_the_shared_roles() {
        let device = Device::flex();
        let present = |a: &crate::CausalSelfAttention| [&a.w_q, &a.w_k, &a.w_v, &a.w_qk, &a.w_kv, &a.w_qkv].map(|p| p.is_some());
        let expect = [
            (AttentionVariant::Standard, [true, true, true, false, false, false]),
            (AttentionVariant::SharedQueryKey, [false, false, true, true, false, false]),
            (AttentionVariant::SharedQueryKeyAsym, [false, false, true, true, false, false]),
            (AttentionVariant::SharedQueryKeyRel, [false, false, true, true, false, false]),
            (AttentionVariant::SharedKeyValue, [true, false, false, false, true, false]),
            (AttentionVariant::SharedAll, [false, false, false, false, false, true]),
            (AttentionVariant::SharedAllAsym, [false, false, false, false, false, true]),
            (AttentionVariant::StandardRel, [true, true, true, false, false, false]),
        ];
        for (variant, fields) in expect {
            let model = Gpt::new(&tiny_config(variant), &device).unwrap();
            assert_eq!(present(&model.blocks[0].attn), fields, "{variant}");
            assert_eq!(model.blocks[0].attn.asymmetry.is_some(), variant.has_positional_term());
            assert_eq!(model.blocks[0].attn.relative.is_some(), variant.has_relative_bias());
        }
    }

    #[test]
    fn untied_head_and_no_norm_build_what_they_say() {
        let device = Device::flex();
        let mut config = tiny_config(AttentionVariant::Standard);
        config.tie_embeddings = false;
        config.norm = Norm::None;
        let model = Gpt::new(&config, &device).unwrap();
        assert!(model.lm_head.is_some() && model.ln_f.is_none());
        assert!(model.blocks.iter().all(|b| b.ln_1.is_none() && b.ln_2.is_none()));
    }

    #[test]
    fn an_invalid_config_is_refused_before_allocation() {
        let mut config = tiny_config(AttentionVariant::SharedAll);
        config.attention.kv_heads = Some(2);
        assert!(matches!(Gpt::new(&config, &Device::flex()), Err(ConfigError::VariantCannotShareHeads { .. })));
    }
}
