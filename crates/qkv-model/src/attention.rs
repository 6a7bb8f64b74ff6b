//! Self-attention in every variant of `AttentionVariant`, with optional head sharing: causal in
//! a decoder (the default), bidirectional in an encoder.
//!
//! Shapes: x is [batch, time, n_embd]; per-head tensors are [batch, heads, time, d_k].

use burn::module::{Module, Param};
use burn::nn::{Initializer, Linear};
use burn::tensor::activation::softmax;
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};
use qkv_kernels::{Mask, Projections, Sharing, packed_attention, repeat_kv_heads};

use crate::config::ModelConfig;
use crate::dropout::{Dropout, SeedStream};
use crate::random::InitialWeights;
use crate::variant::{AttentionVariant, Projection};

/// Channels of the (Q=K-V)+ positional encoding p_ij: half encode the query position i, half the
/// key position j.
pub const ASYMMETRY_CHANNELS: usize = 10;

/// `layer` applied to `x` through the fused linear op (the module holds the weights).
pub(crate) fn apply_linear(layer: &Linear, x: Tensor<3>) -> Tensor<3> {
    qkv_kernels::linear(x, layer.weight.val(), layer.bias.as_ref().map(|bias| bias.val()))
}

/// nanoGPT's initialisation: N(0, std) weights (the tensor `name.weight` of `init`), zero biases.
pub(crate) fn init_linear(init: &InitialWeights, name: &str, d_in: usize, d_out: usize, bias: bool, std: f64, device: &Device) -> Linear {
    let weight = init.within(name).normal("weight", [d_in, d_out], std, device);
    Linear { weight, bias: bias.then(|| Initializer::Zeros.init([d_out], device)) }
}

/// The learned asymmetric logit term of (Q=K-V)+ and (Q=K=V)+: `a'_ij = Linear_10→1(a_ij·1 + p_ij)`, one per
/// layer, shared by its heads. Because the map is linear this equals
/// `(Σw)·a_ij + w·p_ij + b`: a learned gain on the symmetric logits plus a positional bias.
#[derive(Module, Debug)]
pub struct AsymmetricLogits {
    /// Linear(10 → 1) with bias.
    pub mix: Linear,
}

impl AsymmetricLogits {
    fn new(device: &Device) -> Self {
        // The weights start at 1/10 so that Σw = 1: training starts from the plain symmetric
        // logits instead of from a random gain that could switch attention off.
        let weight = Initializer::Constant { value: 1.0 / ASYMMETRY_CHANNELS as f64 }.init([ASYMMETRY_CHANNELS, 1], device);
        Self { mix: Linear { weight, bias: Some(Initializer::Zeros.init([1], device)) } }
    }

    /// The gain Σw as a [1, 1, 1, 1] tensor, ready to multiply the logits (or the queries).
    fn gain(&self) -> Tensor<4> {
        self.mix.weight.val().sum().reshape([1, 1, 1, 1])
    }

    /// `w·p_ij + b` for query positions `query_offset..query_offset+t_q` and key positions
    /// `0..t_k`, shape [t_q, t_k].
    ///
    /// p_ij is separable (channels 0..5 depend on i only, 5..10 on j only), so the bias is
    /// `r_i + c_j + b`. The r_i half is constant along a softmax row and cancels; the asymmetry
    /// comes from c_j, which makes a'_ij differ from a'_ji.
    fn positional_bias(&self, query_offset: usize, t_q: usize, t_k: usize) -> Tensor<2> {
        let device = self.mix.weight.device();
        let half = ASYMMETRY_CHANNELS / 2;
        let w = self.mix.weight.val();
        let w_query = w.clone().slice([0..half, 0..1]);
        let w_key = w.slice([half..ASYMMETRY_CHANNELS, 0..1]);
        let rows = sinusoid(query_offset, t_q, half, &device).matmul(w_query); // [t_q, 1]
        let cols = sinusoid(0, t_k, half, &device).matmul(w_key).transpose(); // [1, t_k]
        let b = self.mix.bias.as_ref().expect("asymmetry mix has a bias").val().reshape([1, 1]);
        rows + cols + b
    }
}

/// The learned pairwise logit term of (Q=K-V)+rel: each head adds `t_h[i − j]` to its logits,
/// a bias on the distance from query i back to key j (T5's and ALiBi's kind of term, learned per
/// distance). It depends on the pair, not on i and j apart, so it can prefer "the previous
/// token" to "the next", which a symmetric score and (Q=K-V)+'s key-position bias cannot.
#[derive(Module, Debug)]
pub struct RelativeBias {
    /// [n_head · distances], head by head: a causal model's distances are 0..block_size, an
    /// encoder's −(block_size − 1)..block_size, stored from the most negative. Flat, because
    /// weight decay takes matrices only: like every bias it is left alone, where decay would pull
    /// the learned preferences back towards plain Q=K-V.
    pub table: Param<Tensor<1>>,
    pub heads: usize,
    /// Where distance 0 sits in a head's row.
    pub zero: usize,
}

impl RelativeBias {
    /// Distances a model sees: a decoder only looks back.
    pub fn distances(block_size: usize, bidirectional: bool) -> usize {
        if bidirectional { 2 * block_size - 1 } else { block_size }
    }

    fn new(n_head: usize, block_size: usize, bidirectional: bool, device: &Device) -> Self {
        // Zeros: training starts from plain Q=K-V.
        let table = Initializer::Zeros.init([n_head * Self::distances(block_size, bidirectional)], device);
        Self { table, heads: n_head, zero: if bidirectional { block_size - 1 } else { 0 } }
    }

    /// The bias [n_head, t_q, t_k] for queries at `query_offset..query_offset+t_q` and keys at
    /// `0..t_k`. A key in a decoder's future has no distance in the table; it takes distance 0's
    /// entry, which the mask hides.
    fn bias(&self, query_offset: usize, t_q: usize, t_k: usize) -> Tensor<3> {
        let heads = self.heads;
        let distances = self.table.dims()[0] / heads;
        let index: Vec<i64> = (query_offset..query_offset + t_q)
            .flat_map(|i| (0..t_k).map(move |j| (self.zero + i).checked_sub(j).filter(|&d| d < distances).unwrap_or(self.zero) as i64))
            .collect();
        let index = Tensor::<1, Int>::from_data(TensorData::new(index, [t_q * t_k]), &self.table.device());
        self.table.val().reshape([heads, distances]).select(1, index).reshape([heads, t_q, t_k])
    }
}

/// Transformer sinusoids for positions `start..start+len` in `channels` channels:
/// channel 2m is sin(p·ω_m), 2m+1 is cos(p·ω_m), with ω_m = 10000^(-2m/channels).
fn sinusoid(start: usize, len: usize, channels: usize, device: &Device) -> Tensor<2> {
    let mut values = Vec::with_capacity(len * channels);
    for p in start..start + len {
        for c in 0..channels {
            let m = (c / 2) as f64;
            let angle = p as f64 * 10000f64.powf(-2.0 * m / channels as f64);
            values.push(if c % 2 == 0 { angle.sin() } else { angle.cos() } as f32);
        }
    }
    Tensor::from_data(TensorData::new(values, [len, channels]), device)
}

/// Output channels of a projection: n_head·d_k, or kv_heads·d_k for keys and values.
pub fn projection_width(config: &ModelConfig, projection: Projection) -> usize {
    let heads = if projection.serves_kv_heads_only() { config.kv_heads() } else { config.n_head };
    heads * config.head_dim()
}

/// Queries, keys and values of one forward pass, each [batch, heads, time, d_k]; keys and values
/// have `kv_heads` heads.
pub struct Projected {
    pub query: Tensor<4>,
    pub key: Tensor<4>,
    pub value: Tensor<4>,
}

/// Self-attention. Which projection fields exist depends on the variant; a shared
/// projection is one parameter tensor used for several roles, so its gradient sums both.
#[derive(Module, Debug)]
pub struct CausalSelfAttention {
    /// W_Q (standard, shared-kv).
    pub w_q: Option<Linear>,
    /// W_K (standard, wq-identity).
    pub w_k: Option<Linear>,
    /// W_V (standard, wq-identity, shared-qk, shared-qk-asym).
    pub w_v: Option<Linear>,
    /// One projection for query and key (shared-qk, shared-qk-asym).
    pub w_qk: Option<Linear>,
    /// One projection for key and value (shared-kv).
    pub w_kv: Option<Linear>,
    /// One projection for query, key and value (shared-qkv).
    pub w_qkv: Option<Linear>,
    /// W_O, back to the residual stream.
    pub w_o: Linear,
    /// The (Q=K-V)+ and (Q=K=V)+ positional logit term.
    pub asymmetry: Option<AsymmetricLogits>,
    /// The (Q=K-V)+rel and Q-K-V+rel pairwise logit term.
    pub relative: Option<RelativeBias>,
    pub resid_dropout: Dropout,
    #[module(skip)]
    pub variant: AttentionVariant,
    pub n_head: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub scale: f64,
    /// No causal mask: every position sees every other (an encoder).
    pub bidirectional: bool,
}

impl CausalSelfAttention {
    /// Builds the layer of a validated config, its weights drawn from `init` (the layer's own
    /// part of the model, e.g. `blocks.0.attn`) and named after its projections (`W_K`: the
    /// same tensor in every variant that has it); its dropout draws from `seeds`.
    pub fn new(config: &ModelConfig, init: &InitialWeights, seeds: &SeedStream, device: &Device) -> Self {
        let d = config.n_embd;
        let std = 0.02;
        let variant = config.attention.variant;
        let mut layer = Self {
            w_q: None,
            w_k: None,
            w_v: None,
            w_qk: None,
            w_kv: None,
            w_qkv: None,
            // Residual projections start smaller so the residual stream's variance does not grow
            // with depth (GPT-2).
            w_o: init_linear(init, "W_O", d, d, config.bias, std / (2.0 * config.n_layer as f64).sqrt(), device),
            asymmetry: None,
            relative: None,
            resid_dropout: Dropout::new(config.dropout, seeds),
            variant,
            n_head: config.n_head,
            kv_heads: config.kv_heads(),
            head_dim: config.head_dim(),
            scale: config.attention_scale(),
            bidirectional: config.attention.bidirectional,
        };
        for &projection in variant.projections() {
            *layer.slot(projection) =
                Some(init_linear(init, projection.name(), d, projection_width(config, projection), config.bias, std, device));
        }
        if variant.has_positional_term() {
            layer.asymmetry = Some(AsymmetricLogits::new(device));
        }
        if variant.has_relative_bias() {
            layer.relative = Some(RelativeBias::new(config.n_head, config.block_size, config.attention.bidirectional, device));
        }
        layer
    }

    /// The layer's weights for `projection`, if its variant owns that projection.
    pub fn projection(&self, projection: Projection) -> Option<&Linear> {
        match projection {
            Projection::Query => self.w_q.as_ref(),
            Projection::Key => self.w_k.as_ref(),
            Projection::Value => self.w_v.as_ref(),
            Projection::QueryKey => self.w_qk.as_ref(),
            Projection::KeyValue => self.w_kv.as_ref(),
            Projection::QueryKeyValue => self.w_qkv.as_ref(),
        }
    }

    /// Where the layer keeps the weights for `projection`.
    pub(crate) fn slot(&mut self, projection: Projection) -> &mut Option<Linear> {
        match projection {
            Projection::Query => &mut self.w_q,
            Projection::Key => &mut self.w_k,
            Projection::Value => &mut self.w_v,
            Projection::QueryKey => &mut self.w_qk,
            Projection::KeyValue => &mut self.w_kv,
            Projection::QueryKeyValue => &mut self.w_qkv,
        }
    }

    /// [batch, time, heads·d_k] → [batch, heads, time, d_k].
    fn split_heads(&self, x: Tensor<3>, heads: usize) -> Tensor<4> {
        let [b, t, _] = x.dims();
        x.reshape([b, t, heads, self.head_dim]).swap_dims(1, 2)
    }

    fn apply(projection: &Option<Linear>, x: &Tensor<3>) -> Tensor<3> {
        apply_linear(projection.as_ref().expect("the variant's projections exist"), x.clone())
    }

    /// Queries, keys and values for the input `x`, keys and values with `kv_heads` heads.
    pub fn project(&self, x: Tensor<3>) -> Projected {
        use AttentionVariant::*;
        let (h, g) = (self.n_head, self.kv_heads);
        let (query, key, value) = match self.variant {
            Standard | StandardRel => (Self::apply(&self.w_q, &x), Self::apply(&self.w_k, &x), Self::apply(&self.w_v, &x)),
            // The query is the attention input itself: head h reads channels [h·d_k, (h+1)·d_k).
            QueryIdentity => {
                let (key, value) = (Self::apply(&self.w_k, &x), Self::apply(&self.w_v, &x));
                (x, key, value)
            }
            // Paper 1's ablations: the key, or the value, is the input itself, head by head.
            KeyIdentity => {
                let (query, value) = (Self::apply(&self.w_q, &x), Self::apply(&self.w_v, &x));
                (query, x, value)
            }
            ValueIdentity => {
                let (query, key) = (Self::apply(&self.w_q, &x), Self::apply(&self.w_k, &x));
                (query, key, x)
            }
            SharedQueryKey | SharedQueryKeyAsym | SharedQueryKeyRel => {
                let qk = Self::apply(&self.w_qk, &x);
                (qk.clone(), qk, Self::apply(&self.w_v, &x))
            }
            SharedKeyValue => {
                let kv = Self::apply(&self.w_kv, &x);
                (Self::apply(&self.w_q, &x), kv.clone(), kv)
            }
            SharedAll | SharedAllAsym => {
                let qkv = Self::apply(&self.w_qkv, &x);
                (qkv.clone(), qkv.clone(), qkv)
            }
        };
        Projected { query: self.split_heads(query, h), key: self.split_heads(key, g), value: self.split_heads(value, g) }
    }

    /// The learned logit terms for queries at `query_offset..` and `t_k` keys: (Q=K-V)+'s scales
    /// the queries by its gain (the same as scaling every logit) and adds its positional bias
    /// [1, t_q, t_k]; (Q=K-V)+rel's adds its bias by distance, [n_head, t_q, t_k]. Other
    /// variants' queries pass unchanged, without a bias.
    fn with_asymmetry(&self, query: Tensor<4>, query_offset: usize, t_k: usize) -> (Tensor<4>, Option<Tensor<3>>) {
        let t_q = query.dims()[2];
        match (&self.asymmetry, &self.relative) {
            (Some(asymmetry), _) => (query * asymmetry.gain(), Some(asymmetry.positional_bias(query_offset, t_q, t_k).unsqueeze_dim(0))),
            (None, Some(relative)) => (query, Some(relative.bias(query_offset, t_q, t_k))),
            (None, None) => (query, None),
        }
    }

    /// The attention logits [batch, n_head, t_q, t_k] before any causal mask: the scaled
    /// query-key products, with (Q=K-V)+'s or (Q=K-V)+rel's learned term; queries at positions
    /// `query_offset..query_offset + t_q`.
    pub fn logits(&self, projected: &Projected, query_offset: usize) -> Tensor<4> {
        match self.logit_parts(projected, query_offset) {
            (content, Some(term)) => content + term.unsqueeze_dim(0),
            (content, None) => content,
        }
    }

    /// [`Self::logits`] in its two parts: what the queries and keys give, [batch, n_head, t_q,
    /// t_k] (scaled, and with (Q=K-V)+'s gain), and the variant's learned positional term, if it
    /// has one ([1 or n_head, t_q, t_k]), which the logits add.
    pub fn logit_parts(&self, projected: &Projected, query_offset: usize) -> (Tensor<4>, Option<Tensor<3>>) {
        let t_k = projected.key.dims()[2];
        let (query, term) = self.with_asymmetry(projected.query.clone(), query_offset, t_k);
        // GQA/MQA: each key/value head serves n_head / kv_heads consecutive query heads.
        let key = repeat_kv_heads(projected.key.clone(), self.n_head);
        (query.matmul(key.swap_dims(2, 3)) * self.scale, term)
    }

    /// Whether a query sees every key (an encoder) or only those up to its own position.
    pub fn mask(&self) -> Mask {
        if self.bidirectional { Mask::Bidirectional } else { Mask::Causal }
    }

    /// Attention over projected tensors whose queries sit at positions
    /// `query_offset..query_offset + t_q` and keys at `0..t_k` (query_offset > 0 when decoding
    /// with a KV cache). Returns the output [batch, time, n_embd] and, when asked, the attention
    /// itself ([`AttentionTrace`]).
    pub fn attend(&self, projected: Projected, query_offset: usize, traced: bool) -> (Tensor<3>, Option<AttentionTrace>) {
        let (context, trace) = self.context(projected, query_offset, traced);
        (self.resid_dropout.forward(self.project_out(context)), trace)
    }

    /// [`Self::attend`]'s attention itself, [batch, heads, t_q, d], before W_O.
    fn context(&self, projected: Projected, query_offset: usize, traced: bool) -> (Tensor<4>, Option<AttentionTrace>) {
        let [b, _, t_q, _] = projected.query.dims();
        let t_k = projected.key.dims()[2];
        if traced {
            let logits = self.logits(&projected, query_offset);
            let masked = match self.mask() {
                Mask::Causal => {
                    let future =
                        causal_mask(query_offset, t_q, t_k, &logits.device()).reshape([1, 1, t_q, t_k]).expand([b, self.n_head, t_q, t_k]);
                    logits.clone().mask_fill(future, f32::NEG_INFINITY)
                }
                Mask::Bidirectional => logits.clone(),
            };
            let probabilities = softmax(masked, 3);
            let value = repeat_kv_heads(projected.value, self.n_head);
            (probabilities.clone().matmul(value), Some(AttentionTrace { logits, probabilities }))
        } else {
            // One fused op (on flex: one kernel each way); queries are the newest t_q of the
            // t_k positions, exactly the kernel's causal alignment.
            let (query, bias) = self.with_asymmetry(projected.query, query_offset, t_k);
            (qkv_kernels::attention(query, projected.key, projected.value, bias, self.scale, self.mask()), None)
        }
    }

    /// W_O over the attention's [batch, heads, t_q, d], its heads merged.
    fn project_out(&self, context: Tensor<4>) -> Tensor<3> {
        let [b, _, t_q, _] = context.dims();
        let y = context.swap_dims(1, 2).reshape([b, t_q, self.n_head * self.head_dim]);
        apply_linear(&self.w_o, y)
    }

    /// `residual` plus the layer's output for its (normalised) input `x`, and its attention when
    /// `traced`: the layer in a residual block, its dropout and the skip one op
    /// (`Dropout::forward_added_to`). Where the device takes it, the projections run as one
    /// product (`qkv_kernels::packed_attention`): a GPU, for layers whose queries, keys and values
    /// each have a projection of their own, the queries none (standard, W_Q = I), or share one
    /// without a learned asymmetry (Q=K, K=V, Q=K=V), without biases. The values are those of
    /// [`Self::attend`] added to `residual`.
    pub fn forward_onto(&self, residual: Tensor<3>, x: Tensor<3>, traced: bool) -> (Tensor<3>, Option<AttentionTrace>) {
        let packed = if traced { None } else { self.packed_context(&x) };
        let (context, trace) = match packed {
            Some(context) => (context, None),
            None => self.context(self.project(x), 0, traced),
        };
        (self.resid_dropout.forward_added_to(self.project_out(context), residual), trace)
    }

    /// [`Self::forward_onto`]'s attention with packed projections, where the layer and the device
    /// take them.
    fn packed_context(&self, x: &Tensor<3>) -> Option<Tensor<4>> {
        let weight = |projection: &Option<Linear>| projection.as_ref().filter(|layer| layer.bias.is_none()).map(|layer| layer.weight.val());
        let projections = match self.variant {
            AttentionVariant::Standard => {
                Projections { query: Some(weight(&self.w_q)?), key: weight(&self.w_k)?, value: weight(&self.w_v)?, sharing: Sharing::None }
            }
            AttentionVariant::QueryIdentity => {
                Projections { query: None, key: weight(&self.w_k)?, value: weight(&self.w_v)?, sharing: Sharing::None }
            }
            AttentionVariant::SharedQueryKey => {
                let shared = weight(&self.w_qk)?;
                Projections { query: Some(shared.clone()), key: shared, value: weight(&self.w_v)?, sharing: Sharing::QueryKey }
            }
            AttentionVariant::SharedKeyValue => {
                let shared = weight(&self.w_kv)?;
                Projections { query: Some(weight(&self.w_q)?), key: shared.clone(), value: shared, sharing: Sharing::KeyValue }
            }
            AttentionVariant::SharedAll => {
                let shared = weight(&self.w_qkv)?;
                Projections { query: Some(shared.clone()), key: shared.clone(), value: shared, sharing: Sharing::All }
            }
            _ => return None,
        };
        packed_attention(x, &projections, self.n_head, self.kv_heads, self.scale, self.mask())
    }

    pub fn forward_with_probabilities(&self, x: Tensor<3>) -> (Tensor<3>, Tensor<4>) {
        let (y, trace) = self.attend(self.project(x), 0, true);
        (y, trace.expect("the trace was requested").probabilities)
    }
}

/// One layer's attention as the maps show it, [batch, n_head, t_q, t_k] each.
#[derive(Debug, Clone)]
pub struct AttentionTrace {
    /// What the softmax reads: the scaled query-key products with any learned term
    /// ([`CausalSelfAttention::logits`]), before the causal mask (a decoder's future pairs hold
    /// what they would score, though no query reads them).
    pub logits: Tensor<4>,
    /// The softmax of the masked logits: what each query reads from each key.
    pub probabilities: Tensor<4>,
}

/// The keys and values one layer has seen, in the variant's layout: `value` stays empty when
/// keys are values (shared-kv, shared-qkv), and both hold `kv_heads` heads.
#[derive(Debug, Clone, Default)]
pub struct LayerCache {
    pub key: Option<Tensor<4>>,
    pub value: Option<Tensor<4>>,
}

impl LayerCache {
    /// Positions cached.
    pub fn len(&self) -> usize {
        self.key.as_ref().map_or(0, |k| k.dims()[2])
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held, from the tensors themselves.
    pub fn bytes(&self) -> usize {
        [&self.key, &self.value].into_iter().flatten().map(|t| t.shape().num_elements() * t.dtype().size()).sum()
    }
}

fn append(cached: Option<Tensor<4>>, new: Tensor<4>) -> Tensor<4> {
    match cached {
        Some(cached) => Tensor::cat(vec![cached, new], 2),
        None => new,
    }
}

impl CausalSelfAttention {
    /// Attention for new positions `x` [batch, t_new, n_embd] that follow the cached ones,
    /// appending their keys and values to `cache`.
    pub fn forward_cached(&self, x: Tensor<3>, cache: &mut LayerCache) -> Tensor<3> {
        let offset = cache.len();
        let Projected { query, key, value } = self.project(x);
        let key = append(cache.key.take(), key);
        cache.key = Some(key.clone());
        let value = if self.variant.key_is_value() {
            key.clone()
        } else {
            let value = append(cache.value.take(), value);
            cache.value = Some(value.clone());
            value
        };
        self.attend(Projected { query, key, value }, offset, false).0
    }
}

/// True where key position j lies in the future of query position `query_offset + i`.
fn causal_mask(query_offset: usize, t_q: usize, t_k: usize, device: &Device) -> Tensor<2, Bool> {
    debug_assert_eq!(query_offset + t_q, t_k, "queries are the newest positions");
    // tril_mask is true above the diagonal shifted by the offset: j > i + query_offset.
    Tensor::<2, Bool>::tril_mask([t_q, t_k], query_offset as i64, device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpt::tests::{tiny_config, values};

    fn input(device: &Device) -> Tensor<3> {
        let data: Vec<f32> = (0..2 * 5 * 16).map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0).collect();
        Tensor::from_data(TensorData::new(data, [2, 5, 16]), device)
    }

    #[test]
    fn an_identity_projection_is_exactly_the_input_head_slices() {
        let device = Device::flex();
        let x = input(&device);
        for (variant, scale) in [
            (AttentionVariant::QueryIdentity, 1.0 / (2.0 * 2.0)),
            (AttentionVariant::KeyIdentity, 1.0 / (2.0 * 2.0)),
            (AttentionVariant::ValueIdentity, 1.0 / 2.0),
        ] {
            let layer = CausalSelfAttention::new(&tiny_config(variant), &InitialWeights::new(0), &SeedStream::new(0), &device);
            let Projected { query, key, value } = layer.project(x.clone());
            let identity = match variant {
                AttentionVariant::QueryIdentity => query,
                AttentionVariant::KeyIdentity => key,
                _ => value,
            };
            assert_eq!(identity.dims(), [2, 4, 5, 4]);
            let (p, x) = (values(identity), values(x.clone()));
            for b in 0..2 {
                for h in 0..4 {
                    for t in 0..5 {
                        for c in 0..4 {
                            assert_eq!(p[((b * 4 + h) * 5 + t) * 4 + c], x[(b * 5 + t) * 16 + h * 4 + c], "{variant}");
                        }
                    }
                }
            }
            assert_eq!(layer.scale, scale, "{variant}");
            assert_eq!(layer.w_q.is_none(), variant == AttentionVariant::QueryIdentity);
            assert_eq!(layer.w_k.is_none(), variant == AttentionVariant::KeyIdentity);
            assert_eq!(layer.w_v.is_none(), variant == AttentionVariant::ValueIdentity);
        }
    }

    #[test]
    fn gqa_and_mqa_project_kv_heads_and_serve_all_query_heads() {
        let device = Device::flex();
        for variant in [AttentionVariant::Standard, AttentionVariant::QueryIdentity, AttentionVariant::SharedKeyValue] {
            for kv_heads in [4, 2, 1] {
                let config = tiny_config(variant).with_kv_heads(kv_heads);
                let layer = CausalSelfAttention::new(&config, &InitialWeights::new(0), &SeedStream::new(0), &device);
                let projected = layer.project(input(&device));
                assert_eq!(projected.query.dims(), [2, 4, 5, 4], "{variant}");
                assert_eq!(projected.key.dims(), [2, kv_heads, 5, 4], "{variant}");
                assert_eq!(projected.value.dims(), [2, kv_heads, 5, 4], "{variant}");
                let kv_weight = layer.w_k.as_ref().or(layer.w_kv.as_ref()).unwrap();
                assert_eq!(kv_weight.weight.dims(), [16, kv_heads * 4]);
                let (y, p) = layer.forward_with_probabilities(input(&device));
                assert_eq!(y.dims(), [2, 5, 16]);
                assert_eq!(p.dims(), [2, 4, 5, 5]);
            }
        }
    }

    #[test]
    fn mqa_heads_read_the_same_keys() {
        // With one key/value head, heads differ only through their queries: with the identity
        // query and an input equal across head slices, every head's map is the same.
        let device = Device::flex();
        let config = tiny_config(AttentionVariant::QueryIdentity).with_kv_heads(1);
        let layer = CausalSelfAttention::new(&config, &InitialWeights::new(0), &SeedStream::new(0), &device);
        let slice: Vec<f32> = (0..5 * 4).map(|i| (i as f32 * 0.37).sin()).collect();
        let data: Vec<f32> = (0..5).flat_map(|t| (0..4).flat_map(|_| slice[t * 4..t * 4 + 4].to_vec()).collect::<Vec<_>>()).collect();
        let x = Tensor::from_data(TensorData::new(data, [1, 5, 16]), &device);
        let p = values(layer.forward_with_probabilities(x).1);
        let head = |h: usize| p[h * 25..(h + 1) * 25].to_vec();
        for h in 1..4 {
            assert_eq!(head(h), head(0));
        }
    }

    #[test]
    fn shared_qk_logits_are_symmetric_and_the_asymmetric_term_breaks_them() {
        let device = Device::flex();
        let logits = |variant| {
            let layer = CausalSelfAttention::new(&tiny_config(variant), &InitialWeights::new(0), &SeedStream::new(0), &device);
            let Projected { query, key, .. } = layer.project(input(&device));
            let mut logits = query.matmul(key.swap_dims(2, 3));
            if let Some(asymmetry) = &layer.asymmetry {
                // Move the weights off their symmetric start so that the positional term shows.
                let trained =
                    Tensor::from_data(TensorData::new((0..10).map(|i| 0.1 + 0.05 * i as f32).collect::<Vec<_>>(), [10, 1]), &device);
                let asymmetry = AsymmetricLogits {
                    mix: Linear { weight: burn::module::Param::from_tensor(trained), bias: asymmetry.mix.bias.clone() },
                };
                logits = logits * asymmetry.gain() + asymmetry.positional_bias(0, 5, 5).reshape([1, 1, 5, 5]);
            }
            values(logits)
        };
        let is_symmetric =
            |l: &[f32]| (0..2 * 4).all(|m| (0..5).all(|i| (0..5).all(|j| (l[m * 25 + i * 5 + j] - l[m * 25 + j * 5 + i]).abs() < 1e-5)));
        assert!(is_symmetric(&logits(AttentionVariant::SharedQueryKey)));
        assert!(is_symmetric(&logits(AttentionVariant::SharedAll)));
        assert!(!is_symmetric(&logits(AttentionVariant::SharedQueryKeyAsym)));
        assert!(!is_symmetric(&logits(AttentionVariant::Standard)));
    }

    /// In an encoder, where the softmax reads every logit, Q=K=V's logits (the layer's own, as its
    /// attention takes them) are symmetric and (Q=K=V)+'s positional term makes them not. Its
    /// term is a row constant plus a key bias, so a score that lets each row shift still finds
    /// the attention symmetric (docs/diagnostics.md, "Symmetry").
    #[test]
    fn the_plus_term_breaks_the_symmetry_of_q_equals_k_equals_v_s_logits_in_an_encoder() {
        let device = Device::flex();
        for variant in [AttentionVariant::SharedAll, AttentionVariant::SharedAllAsym] {
            let mut config = tiny_config(variant);
            config.attention.bidirectional = true;
            let mut layer = CausalSelfAttention::new(&config, &InitialWeights::new(0), &SeedStream::new(0), &device);
            if let Some(asymmetry) = &mut layer.asymmetry {
                // The term starts symmetric (equal weights on the query's and the key's
                // channels, r_i = c_i); training moves it off, as here.
                let trained = (0..10).map(|i| 0.1 + 0.05 * i as f32).collect::<Vec<_>>();
                asymmetry.mix.weight = Param::from_tensor(Tensor::from_data(TensorData::new(trained, [10, 1]), &device));
            }
            let logits = values(layer.logits(&layer.project(input(&device)), 0));
            let largest_asymmetry = (0..2 * 4)
                .flat_map(|m| (0..5).flat_map(move |i| (0..5).map(move |j| (m, i, j))))
                .map(|(m, i, j)| (logits[m * 25 + i * 5 + j] - logits[m * 25 + j * 5 + i]).abs())
                .fold(0.0f32, f32::max);
            match variant {
                AttentionVariant::SharedAll => assert!(largest_asymmetry < 1e-5, "{largest_asymmetry}"),
                _ => assert!(largest_asymmetry > 1e-2, "the term breaks it: {largest_asymmetry}"),
            }
        }
    }

    /// (Q=K-V)+rel's bias is the table's entry for the distance i − j, in a decoder (distances
    /// 0.., queries offset when decoding with a cache) and in an encoder (negative ones too); it
    /// makes the logits asymmetric, and the fused kernel trains the table.
    #[test]
    fn the_relative_bias_reads_each_pair_s_distance_and_trains() {
        let device = Device::flex();
        for bidirectional in [false, true] {
            let mut config = tiny_config(AttentionVariant::SharedQueryKeyRel);
            config.attention.bidirectional = bidirectional;
            let mut layer = CausalSelfAttention::new(&config, &InitialWeights::new(0), &SeedStream::new(0), &device);
            let relative = layer.relative.as_mut().expect("the variant's term");
            let (heads, distances) = (4, if bidirectional { 15 } else { 8 });
            assert_eq!(relative.table.dims(), [heads * distances]);
            let table: Vec<f32> = (0..heads * distances).map(|v| v as f32).collect();
            relative.table = Param::from_tensor(Tensor::from_data(TensorData::new(table.clone(), [heads * distances]), &device));
            let (offset, t_q, t_k) = if bidirectional { (0, 5, 5) } else { (2, 3, 5) };
            let bias = values(relative.bias(offset, t_q, t_k).unsqueeze_dim::<4>(0));
            for h in 0..heads {
                for i in 0..t_q {
                    for j in (0..t_k).filter(|&j| bidirectional || j <= offset + i) {
                        let distance = (offset + i) as i64 - j as i64;
                        let expected = table[h * distances + (relative.zero as i64 + distance) as usize];
                        assert_eq!(bias[(h * t_q + i) * t_k + j], expected, "head {h}, query {}, key {j}", offset + i);
                    }
                }
            }
            let projected = layer.project(input(&device));
            let logits = values(layer.logits(&projected, 0));
            assert!((0..5).any(|i| (0..5).any(|j| (logits[i * 5 + j] - logits[j * 5 + i]).abs() > 1e-3)), "asymmetric");

            let layer = CausalSelfAttention::new(&config, &InitialWeights::new(0), &SeedStream::new(0), &device.clone().autodiff());
            let (output, _) = layer.attend(layer.project(input(&device.clone().autodiff())), 0, false);
            let grads = (output.clone() * output).sum().backward();
            let table = layer.relative.as_ref().unwrap().table.grad(&grads).expect("a gradient for the table");
            assert!(values(table).iter().any(|g| g.abs() > 0.0), "the table trains");
        }
    }
}
