//! What a model's attention has learned, as numbers the papers' explanations can be checked
//! against (definitions and their reasons in docs/diagnostics.md):
//!
//! - how alike two projections are, `cos(W_K, W_V)` and `cos(W_Q, W_K)`: paper 2 explains why
//!   keys and values can share a projection by the first being high in trained standard models;
//!   and, since a cosine of weights changes with a change of basis that leaves the model's outputs
//!   as they are, how much of the input W_K and W_V read in common, which does not;
//! - how symmetric each head's attention is: sharing W_Q and W_K forces symmetry, which paper 2
//!   blames for Q=K-V's losses (measured as fits the framing: `symmetry`);
//! - how many directions each projection uses, its effective rank;
//! - how large the logits are, which the scale 1/√d_k (or paper 1's 1/(2√d_k)) sets at the start.
//!
//! The weight figures need only the model; the logit figures need an input (tokens, or images
//! for a ViT). Every read from
//! the device is awaited, so that the browser (which cannot block on its GPU) can compute them.

mod symmetry;

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};

use crate::attention::CausalSelfAttention;
use crate::gpt::normalise;
use crate::linalg::{Matrix, dot, orthonormal_columns, singular_values};
use crate::model::{Input, Model};
use crate::variant::Projection;
pub use symmetry::{LogitParts, SymmetryMeasure, positional_share, symmetry_figures, symmetry_score};

/// One layer's diagnostics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerDiagnostics {
    /// `cos(W_K, W_V)`, the two weight matrices read as vectors; `None` where the layer has no
    /// separate W_K and W_V.
    pub key_value_cosine: Option<f64>,
    /// How much of the input the keys and the values read in common, a property of the model
    /// rather than of its weights' basis: per key/value head, the mean squared cosine of the
    /// principal angles between the spaces ΓW_K's and ΓW_V's slices read ([`subspace_overlap`];
    /// Γ the layer norm's gain, folded in because γ → Dγ with W → D⁻¹W changes no output), then
    /// the mean over heads. 1 when each head's values read exactly what its keys read, 0 when
    /// nothing; subspaces drawn at random give head_dim / n_embd. `None` as for the cosine.
    #[serde(default)]
    pub key_value_overlap: Option<f64>,
    /// `cos(W_Q, W_K)`; `None` without separate W_Q and W_K of the same shape (GQA/MQA keys
    /// have fewer heads than queries).
    pub query_key_cosine: Option<f64>,
    /// The effective rank of each projection the layer owns, by its name ("W_K", "W_QK", …);
    /// empty where they were not computed ([`Ranks::Skipped`]).
    pub effective_ranks: Vec<(String, f64)>,
    /// Per head, how symmetric its attention is, by `symmetry_measure`: the symmetric share of the
    /// content form in a decoder, the logits' score in an encoder (docs/diagnostics.md). 1 for
    /// Q=K-V in either; about 0.5 for unrelated queries and keys.
    pub symmetry: Vec<f64>,
    /// Which symmetry `symmetry` holds.
    #[serde(default)]
    pub symmetry_measure: SymmetryMeasure,
    /// Per head, the share of the visible logits the variant's positional term carries
    /// ([`positional_share`]); empty where the variant has none.
    #[serde(default)]
    pub positional_share: Vec<f64>,
    /// Root mean square of the scaled logits over the pairs a query may attend to, all heads.
    pub logit_rms: f64,
}

/// The diagnostics of every layer, in order, from the inputs they were measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelDiagnostics {
    pub layers: Vec<LayerDiagnostics>,
}

impl ModelDiagnostics {
    /// The mean over layers of a per-layer figure that some layers may lack; `None` if all do.
    pub fn mean(&self, figure: impl Fn(&LayerDiagnostics) -> Option<f64>) -> Option<f64> {
        let values: Vec<f64> = self.layers.iter().filter_map(figure).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    }

    /// The symmetry's mean over layers and heads (by [`Self::symmetry_measure`]).
    pub fn mean_symmetry(&self) -> Option<f64> {
        self.mean(|l| head_mean(&l.symmetry))
    }

    /// Which symmetry the layers hold (one measure for a model).
    pub fn symmetry_measure(&self) -> SymmetryMeasure {
        self.layers.first().map(|l| l.symmetry_measure).unwrap_or_default()
    }

    /// The positional term's share, mean over layers and heads; `None` without a term.
    pub fn mean_positional_share(&self) -> Option<f64> {
        self.mean(|l| head_mean(&l.positional_share))
    }
}

fn head_mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

#[derive(Debug, thiserror::Error)]
pub enum DiagnosticsError {
    #[error("reading the model's weights or logits: {0}")]
    Read(#[from] qkv_kernels::ReadBackError),
    #[error("diagnostics need at least one input token")]
    NoTokens,
}

async fn read<const D: usize>(tensor: Tensor<D>) -> Result<Vec<f32>, DiagnosticsError> {
    Ok(qkv_kernels::read_floats(tensor).await?)
}

/// A weight matrix read from the device: its values (row-major) and its dimensions.
struct Weights {
    values: Vec<f32>,
    dims: [usize; 2],
}

async fn weights(layer: &Linear) -> Result<Weights, DiagnosticsError> {
    let weight: &Param<Tensor<2>> = &layer.weight;
    Ok(Weights { dims: weight.val().dims(), values: read(weight.val()).await? })
}

/// Diagnostics of every layer of `model`, the logit figures measured on `input`. Pass the model
/// as it is evaluated (`valid()`, without dropout), or the figures of the later layers vary with
/// dropout's masks.
pub async fn diagnose(model: &Model, input: Input) -> Result<ModelDiagnostics, DiagnosticsError> {
    diagnose_with(model, input, Ranks::Computed).await
}

/// Whether to compute the effective ranks, the one figure whose cost grows as d³ (a singular
/// value decomposition per projection): a live view of a wide model leaves them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranks {
    Computed,
    Skipped,
}

/// [`diagnose`], with the effective ranks computed or left empty.
pub async fn diagnose_with(model: &Model, input: Input, ranks: Ranks) -> Result<ModelDiagnostics, DiagnosticsError> {
    if input.is_empty() {
        return Err(DiagnosticsError::NoTokens);
    }
    let mut x = model.embed(input);
    let mut layers = Vec::new();
    for block in model.layers() {
        let attention_input = normalise(&block.ln_1, x.clone());
        let gain: Vec<f64> = match &block.ln_1 {
            Some(norm) => read(norm.gamma.val()).await?.into_iter().map(f64::from).collect(),
            None => vec![1.0; attention_input.dims()[2]],
        };
        layers.push(diagnose_layer(&block.attn, attention_input, &gain, ranks).await?);
        x = block.run(x, false).0;
    }
    Ok(ModelDiagnostics { layers })
}

async fn diagnose_layer(
    attn: &CausalSelfAttention,
    attention_input: Tensor<3>,
    gain: &[f64],
    ranks: Ranks,
) -> Result<LayerDiagnostics, DiagnosticsError> {
    let mut owned = Vec::new();
    for &projection in attn.variant.projections() {
        if let Some(layer) = attn.projection(projection) {
            owned.push((projection, weights(layer).await?));
        }
    }
    let find = |wanted: Projection| owned.iter().find(|(p, _)| *p == wanted).map(|(_, w)| w);
    let same_shape_cosine = |a: Projection, b: Projection| match (find(a), find(b)) {
        (Some(a), Some(b)) if a.dims == b.dims => Some(cosine(&a.values, &b.values)),
        _ => None,
    };
    let effective_ranks = match ranks {
        Ranks::Computed => owned
            .iter()
            .map(|(projection, w)| (projection.name().to_string(), effective_rank(&singular_values(&w.values, w.dims[0], w.dims[1]))))
            .collect(),
        Ranks::Skipped => Vec::new(),
    };
    // What each projection reads of the normalised input before its gain: γ → Dγ with every
    // W → D⁻¹W changes no output, and leaves ΓW as it is (docs/diagnostics.md).
    let folded: Vec<(Projection, Matrix)> =
        owned.iter().map(|(projection, w)| (*projection, Matrix::from_f32(&w.values, w.dims[0], w.dims[1]).scale_rows(gain))).collect();
    let find_folded = |wanted: Projection| folded.iter().find(|(p, _)| *p == wanted).map(|(_, w)| w);
    let key_value_overlap = match (find_folded(Projection::Key), find_folded(Projection::Value)) {
        (Some(k), Some(v)) if k.cols == v.cols => Some(subspace_overlap(k, v, k.cols / attn.head_dim)),
        _ => None,
    };

    let (content, term) = attn.logit_parts(&attn.project(attention_input), 0);
    let [batch, heads, time, _] = content.dims();
    let term = match term {
        Some(term) => Some(read(term).await?),
        None => None,
    };
    let parts = LogitParts { content: read(content).await?, term, batch, heads, time };
    let content_form = symmetry::content_form_symmetry(attn, &folded, gain);
    let (symmetry_measure, symmetry, positional_share) = symmetry_figures(&parts, attn.mask(), content_form);
    let logits: Vec<Vec<f32>> = (0..batch * heads).map(|m| parts.logits(m / heads, m % heads)).collect();
    let matrices: Vec<&[f32]> = logits.iter().map(Vec::as_slice).collect();
    Ok(LayerDiagnostics {
        key_value_cosine: same_shape_cosine(Projection::Key, Projection::Value),
        key_value_overlap,
        query_key_cosine: same_shape_cosine(Projection::Query, Projection::Key),
        effective_ranks,
        symmetry,
        symmetry_measure,
        positional_share,
        logit_rms: causal_rms(&matrices, time),
    })
}

/// How much two projections of the same shape read the same part of their input, head by head:
/// `a` and `b` are `[inputs, heads · head_dim]` (Burn's `Linear` layout, y = x W), and
/// each head reads the span of its `head_dim` columns. Per head, the mean of cos² over the
/// principal angles between the two spans (`‖Q_aᵀ Q_b‖²_F / min(rank_a, rank_b)` for orthonormal
/// bases Q), then the mean over heads.
///
/// Replacing a head's W_V slice by W_V R and its rows of W_O by R⁻¹ W_O, for any invertible R,
/// changes no output of the model, and changes `cos(W_K, W_V)`; it leaves the span, and so this
/// figure, as it was.
pub(crate) fn subspace_overlap(a: &Matrix, b: &Matrix, heads: usize) -> f64 {
    let head_dim = a.cols / heads.max(1);
    if head_dim == 0 {
        return 0.0;
    }
    let overlaps: Vec<f64> = (0..heads)
        .map(|h| {
            let span = |w: &Matrix| orthonormal_columns(w, h * head_dim..(h + 1) * head_dim);
            let (qa, qb) = (span(a), span(b));
            let rank = qa.len().min(qb.len());
            if rank == 0 {
                return 0.0;
            }
            let squared: f64 = qa.iter().flat_map(|u| qb.iter().map(move |v| dot(u, v).powi(2))).sum();
            squared / rank as f64
        })
        .collect();
    overlaps.iter().sum::<f64>() / overlaps.len() as f64
}

/// The cosine of two equally long vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 { 0.0 } else { dot / (aa.sqrt() * bb.sqrt()) }
}

/// Root mean square of the entries with key position ≤ query position (the causal ones) of
/// `time × time` matrices.
pub fn causal_rms(matrices: &[&[f32]], time: usize) -> f64 {
    let (mut sum, mut count) = (0.0f64, 0usize);
    for a in matrices {
        for i in 0..time {
            for &value in &a[i * time..i * time + i + 1] {
                sum += f64::from(value).powi(2);
                count += 1;
            }
        }
    }
    (sum / count.max(1) as f64).sqrt()
}

/// Roy and Vetterli's effective rank: `exp(H(p))` with `p_i = σ_i / Σσ`, between 1 (one
/// direction) and the number of singular values (all equal).
pub fn effective_rank(singular_values: &[f64]) -> f64 {
    let total: f64 = singular_values.iter().sum();
    if total <= 0.0 {
        return 0.0;
    }
    let entropy: f64 = singular_values.iter().map(|s| s / total).filter(|&p| p > 0.0).map(|p| -p * p.ln()).sum();
    entropy.exp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpt::Gpt;
    use crate::gpt::tests::tiny_config;
    use crate::variant::AttentionVariant;
    use burn::tensor::Device;
    use burn::tensor::Int;

    fn tokens(device: &Device) -> Tensor<2, Int> {
        Tensor::from_data(burn::tensor::TensorData::new((0..16).map(|i| (i * 5 % 13) as i64).collect::<Vec<_>>(), [2, 8]), device)
    }

    fn diagnose_gpt(model: &Gpt, device: &Device) -> ModelDiagnostics {
        pollster::block_on(diagnose(&Model::Gpt(model.clone()), Input::Tokens(tokens(device), None))).unwrap()
    }

    fn diagnose_config(variant: AttentionVariant, edit: impl FnOnce(&mut Gpt)) -> ModelDiagnostics {
        let device = Device::flex();
        let mut model = Gpt::new_seeded(&tiny_config(variant), &device, 3).unwrap();
        edit(&mut model);
        diagnose_gpt(&model, &device)
    }

    #[test]
    fn equal_key_and_value_weights_have_cosine_one_and_opposite_ones_minus_one() {
        let same = diagnose_config(AttentionVariant::Standard, |model| {
            for block in &mut model.blocks {
                block.attn.w_v = block.attn.w_k.clone();
            }
        });
        let opposite = diagnose_config(AttentionVariant::Standard, |model| {
            for block in &mut model.blocks {
                let w_k = block.attn.w_k.as_ref().unwrap().weight.val();
                block.attn.w_v.as_mut().unwrap().weight = Param::from_tensor(w_k.neg());
            }
        });
        for layer in &same.layers {
            assert!((layer.key_value_cosine.unwrap() - 1.0).abs() < 1e-9, "{layer:?}");
        }
        for layer in &opposite.layers {
            assert!((layer.key_value_cosine.unwrap() + 1.0).abs() < 1e-9, "{layer:?}");
        }
        // Independent random initialisations are nearly orthogonal.
        let fresh = diagnose_config(AttentionVariant::Standard, |_| {});
        assert!(
            fresh.layers.iter().all(|l| l.key_value_cosine.unwrap().abs() < 0.2 && l.query_key_cosine.unwrap().abs() < 0.2),
            "{fresh:?}"
        );
    }

    /// R: for each of `heads` blocks of `head_dim`, reverse the columns and add twice the first
    /// to the second (a shear), so that every head's columns mix; and R⁻¹.
    fn mixing_basis(heads: usize, head_dim: usize, device: &Device) -> (Tensor<2>, Tensor<2>) {
        let n = heads * head_dim;
        let (mut r, mut inverse) = (vec![0.0f32; n * n], vec![0.0f32; n * n]);
        for h in 0..heads {
            let at = |i: usize, j: usize| (h * head_dim + i) * n + h * head_dim + j;
            // R = S P, S = I + 2 E_01, P reverses: R⁻¹ = P⁻¹ S⁻¹ = P (I − 2 E_01).
            for i in 0..head_dim {
                r[at(i, head_dim - 1 - i)] = 1.0;
                inverse[at(head_dim - 1 - i, i)] = 1.0;
            }
            r[at(0, head_dim - 2)] = 2.0;
            inverse[at(head_dim - 1, 1)] = -2.0;
        }
        let tensor = |values: Vec<f32>| Tensor::from_data(burn::tensor::TensorData::new(values, [n, n]), device);
        (tensor(r), tensor(inverse))
    }

    #[test]
    fn the_key_value_overlap_survives_a_change_of_basis_that_moves_the_cosine() {
        let device = Device::flex();
        let config = tiny_config(AttentionVariant::Standard);
        let fresh = Gpt::new_seeded(&config, &device, 3).unwrap();
        for layer in &diagnose_gpt(&fresh, &device).layers {
            // Independently drawn 4-dimensional subspaces of 16 dimensions: about 4/16.
            let overlap = layer.key_value_overlap.unwrap();
            assert!((0.1..0.45).contains(&overlap), "near chance at initialisation: {overlap}");
        }
        // A model whose values read exactly what its keys read (W_V = W_K: cosine 1), so that
        // the change of basis below moves the cosine by far more than chance would.
        let mut model = fresh.clone();
        for block in &mut model.blocks {
            let w_k = block.attn.w_k.clone().unwrap();
            block.attn.w_v = Some(w_k);
        }
        let mut changed = model.clone();
        let head_dim = config.n_embd / config.n_head;
        let (r, inverse) = mixing_basis(config.n_head, head_dim, &device);
        for block in &mut changed.blocks {
            // W_V → W_V R (its bias too) and W_O → R⁻¹ W_O: every output stays as it was.
            let w_v = block.attn.w_v.as_mut().unwrap();
            w_v.weight = Param::from_tensor(w_v.weight.val().matmul(r.clone()));
            if let Some(bias) = &mut w_v.bias {
                *bias = Param::from_tensor(bias.val().unsqueeze::<2>().matmul(r.clone()).squeeze_dim(0));
            }
            let w_o = &mut block.attn.w_o;
            w_o.weight = Param::from_tensor(inverse.clone().matmul(w_o.weight.val()));
        }
        let logits = |m: &Gpt| m.forward(tokens(&device)).into_data().try_to_vec::<f32>().unwrap();
        let largest = logits(&model).iter().zip(logits(&changed)).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(largest < 1e-4, "the change of basis changes no output: {largest}");
        let (before, after) = (diagnose_gpt(&model, &device), diagnose_gpt(&changed, &device));
        for (b, a) in before.layers.iter().zip(&after.layers) {
            let (overlap_before, overlap_after) = (b.key_value_overlap.unwrap(), a.key_value_overlap.unwrap());
            // The same up to the rounding of the changed weights to f32.
            assert!((overlap_before - overlap_after).abs() < 1e-6, "{overlap_before} → {overlap_after}");
            assert!((overlap_before - 1.0).abs() < 1e-6, "values read what keys read: {overlap_before}");
            let (cosine_before, cosine_after) = (b.key_value_cosine.unwrap(), a.key_value_cosine.unwrap());
            assert!((cosine_before - 1.0).abs() < 1e-6 && cosine_after.abs() < 0.5, "the raw cosine moves: {b:?} {a:?}");
        }
    }

    #[test]
    fn the_overlap_is_one_for_the_same_span_and_zero_for_orthogonal_ones() {
        // Two heads of 2 columns reading 6 inputs, row-major [6, 4].
        let inputs = 6;
        let w_k: Vec<f32> = (0..24).map(|i| ((i * 7 % 11) as f32) - 5.0).collect();
        // W_V = W_K R per head, R = [[1, 3], [2, -1]]: the same spans, another basis.
        let mut w_v = vec![0.0f32; 24];
        for row in 0..inputs {
            for head in 0..2 {
                let (a, b) = (w_k[row * 4 + 2 * head], w_k[row * 4 + 2 * head + 1]);
                w_v[row * 4 + 2 * head] = a + 2.0 * b;
                w_v[row * 4 + 2 * head + 1] = 3.0 * a - b;
            }
        }
        let overlap = |a: &[f32], b: &[f32]| subspace_overlap(&Matrix::from_f32(a, inputs, 4), &Matrix::from_f32(b, inputs, 4), 2);
        assert!((overlap(&w_k, &w_v) - 1.0).abs() < 1e-9);
        assert!(cosine(&w_k, &w_v) < 0.9, "while their cosine is not 1");
        // Keys read inputs 0-1 (head 0) and 2-3 (head 1); values read 4-5 in both heads.
        let unit = |rows: [[usize; 2]; 2]| {
            let mut w = vec![0.0f32; 24];
            for (head, pair) in rows.iter().enumerate() {
                for (j, &row) in pair.iter().enumerate() {
                    w[row * 4 + 2 * head + j] = 1.0;
                }
            }
            w
        };
        let (keys, values) = (unit([[0, 1], [2, 3]]), unit([[4, 5], [4, 5]]));
        assert!(overlap(&keys, &values).abs() < 1e-12);
        // Head 0 shares one of its two directions, head 1 none: (1/2 + 0) / 2.
        let half = unit([[0, 4], [4, 5]]);
        assert!((overlap(&keys, &half) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn only_layers_with_both_matrices_have_a_cosine() {
        let shared = diagnose_config(AttentionVariant::SharedKeyValue, |_| {});
        assert!(shared.layers.iter().all(|l| l.key_value_cosine.is_none() && l.query_key_cosine.is_none()));
        let identity = diagnose_config(AttentionVariant::QueryIdentity, |_| {});
        assert!(identity.layers.iter().all(|l| l.key_value_cosine.is_some() && l.query_key_cosine.is_none()));
        assert_eq!(identity.mean(|l| l.query_key_cosine), None);
        let names: Vec<&str> = identity.layers[0].effective_ranks.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["W_K", "W_V"]);
    }

    #[test]
    fn a_decoder_scores_the_content_form_and_q_equals_k_gives_one() {
        let shared = diagnose_config(AttentionVariant::SharedQueryKey, |_| {});
        assert_eq!(shared.symmetry_measure(), SymmetryMeasure::ContentForm);
        for layer in &shared.layers {
            assert_eq!(layer.symmetry.len(), 4);
            assert!(layer.symmetry.iter().all(|s| (s - 1.0).abs() < 1e-9), "{layer:?}");
            assert!(layer.positional_share.is_empty(), "no positional term");
        }
        let standard = diagnose_config(AttentionVariant::Standard, |_| {});
        assert!(standard.layers.iter().flat_map(|l| &l.symmetry).all(|&s| s < 0.9), "{standard:?}");
        // W_Q = I: the query reads the head's own channels; a random W_K is not their mirror.
        let identity = diagnose_config(AttentionVariant::QueryIdentity, |_| {});
        assert!(identity.layers.iter().flat_map(|l| &l.symmetry).all(|&s| s < 0.9), "{identity:?}");
        // (Q=K-V)+: a symmetric content form, and a positional term that carries some of the
        // visible logits.
        let plus = diagnose_config(AttentionVariant::SharedQueryKeyAsym, |_| {});
        for layer in &plus.layers {
            assert!(layer.symmetry.iter().all(|s| (s - 1.0).abs() < 1e-9), "{layer:?}");
            assert!(layer.positional_share.len() == 4 && layer.positional_share.iter().all(|&s| s > 0.0 && s < 1.0), "{layer:?}");
        }
    }

    #[test]
    fn an_encoder_scores_its_logits_as_before() {
        let encoder = |variant| {
            let device = Device::flex();
            let mut config = tiny_config(variant);
            config.attention.bidirectional = true;
            diagnose_gpt(&Gpt::new_seeded(&config, &device, 3).unwrap(), &device)
        };
        let shared = encoder(AttentionVariant::SharedQueryKey);
        assert_eq!(shared.symmetry_measure(), SymmetryMeasure::VisibleLogits);
        assert!(shared.layers.iter().flat_map(|l| &l.symmetry).all(|s| (s - 1.0).abs() < 1e-6), "{shared:?}");
        let standard = encoder(AttentionVariant::Standard);
        assert!(standard.layers.iter().flat_map(|l| &l.symmetry).all(|&s| s < 0.99), "{standard:?}");
    }

    #[test]
    fn the_overlap_survives_moving_the_layer_norm_s_gain_into_the_projections() {
        let device = Device::flex();
        let config = tiny_config(AttentionVariant::Standard);
        let n = config.n_embd;
        let vector = |values: Vec<f32>| Tensor::<1>::from_data(burn::tensor::TensorData::new(values, [n]), &device);
        let mut model = Gpt::new_seeded(&config, &device, 3).unwrap();
        // A trained-looking gain first, so that the model's own Γ is not the identity.
        for block in &mut model.blocks {
            let norm = block.ln_1.as_mut().unwrap();
            norm.gamma = Param::from_tensor(vector((0..n).map(|i| 0.5 + (i * 7 % 5) as f32 * 0.3).collect()));
        }
        // γ → Dγ, β → Dβ and W → D⁻¹W for W_Q, W_K, W_V: this norm feeds only attention.
        let d: Vec<f32> = (0..n).map(|i| [0.25f32, 4.0, 1.5, 0.6][i % 4] * if i < n / 2 { 3.0 } else { 1.0 }).collect();
        let mut changed = model.clone();
        for block in &mut changed.blocks {
            let norm = block.ln_1.as_mut().unwrap();
            norm.gamma = Param::from_tensor(norm.gamma.val() * vector(d.clone()));
            if let Some(beta) = &mut norm.beta {
                *beta = Param::from_tensor(beta.val() * vector(d.clone()));
            }
            let inverse = vector(d.iter().map(|v| 1.0 / v).collect()).reshape([n, 1]);
            for w in [&mut block.attn.w_q, &mut block.attn.w_k, &mut block.attn.w_v] {
                let w = w.as_mut().unwrap();
                w.weight = Param::from_tensor(w.weight.val() * inverse.clone());
            }
        }
        let logits = |m: &Gpt| m.forward(tokens(&device)).into_data().try_to_vec::<f32>().unwrap();
        let largest = logits(&model).iter().zip(logits(&changed)).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(largest < 1e-4, "the rescaling changes no output: {largest}");
        let (before, after) = (diagnose_gpt(&model, &device), diagnose_gpt(&changed, &device));
        for (b, a) in before.layers.iter().zip(&after.layers) {
            let (overlap_before, overlap_after) = (b.key_value_overlap.unwrap(), a.key_value_overlap.unwrap());
            assert!((overlap_before - overlap_after).abs() < 1e-6, "{overlap_before} → {overlap_after}");
            for (s, t) in b.symmetry.iter().zip(&a.symmetry) {
                assert!((s - t).abs() < 1e-6, "the content form folds the gain in too: {s} → {t}");
            }
        }
        // The overlap of the raw weights, without the gain, is what moved.
        let raw = |m: &Gpt| {
            let read = |w: &Option<Linear>| Matrix::read(w.as_ref().unwrap().weight.val());
            subspace_overlap(&read(&m.blocks[0].attn.w_k), &read(&m.blocks[0].attn.w_v), config.n_head)
        };
        assert!((raw(&model) - raw(&changed)).abs() > 0.01, "{} {}", raw(&model), raw(&changed));
    }

    #[test]
    fn the_logit_rms_counts_only_causal_pairs() {
        // Causal entries 1, 2, 2 (rms √3); the future entry 100 is ignored.
        let a = [1.0f32, 100.0, 2.0, 2.0];
        assert!((causal_rms(&[&a[..]], 2) - 3f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn a_model_with_larger_logits_measures_larger() {
        let base = diagnose_config(AttentionVariant::Standard, |_| {});
        let doubled = diagnose_config(AttentionVariant::Standard, |model| {
            for block in &mut model.blocks {
                block.attn.scale *= 2.0;
            }
        });
        // The first layer sees the same input; later ones see what the changed attention made.
        let (a, b) = (&base.layers[0], &doubled.layers[0]);
        assert!((b.logit_rms / a.logit_rms - 2.0).abs() < 1e-3, "{a:?} {b:?}");
    }

    #[test]
    fn effective_ranks_of_known_spectra() {
        assert!((effective_rank(&[1.0, 1.0, 1.0, 1.0]) - 4.0).abs() < 1e-12);
        assert!((effective_rank(&[5.0, 0.0, 0.0]) - 1.0).abs() < 1e-12);
        // p = (3/4, 1/4): exp(-(0.75 ln 0.75 + 0.25 ln 0.25)).
        let expected = (-(0.75f64 * 0.75f64.ln() + 0.25 * 0.25f64.ln())).exp();
        assert!((effective_rank(&[3.0, 1.0]) - expected).abs() < 1e-12);
    }
}
