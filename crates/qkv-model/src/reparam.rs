//! Paper 1's theory, carried out on a model: for any invertible Θ, attention sees its input X
//! only through XW_Q, XW_K, XW_V, so `(X, W) → (XΘ, Θ⁻¹W)` changes nothing. With Θ = W_Q the
//! query weight becomes I, and whatever writes X must write XΘ instead. Which neighbours can
//! absorb Θ depends on the architecture (docs/theory.md):
//!
//! - one layer without normalisation;
//! - many layers without normalisation whose MLPs have no skip: each layer gets its own Θ_l and
//!   the MLP of layer l−1 writes straight into layer l's basis (the construction telescopes);
//! - layers sharing one set of weights: one Θ throughout, the unembedding absorbs Θ⁻¹.
//!
//! The same algebra removes W_K or W_V instead (Graef's skipless tricks). With LayerNorm the
//! conversion can only be approximate; [`eliminate_query_approx`] does it anyway and the caller
//! measures the damage.
//!
//! The algebra runs in f64 on the host: these are d×d matrices, and exactness is the point.

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::{Device, Tensor};

use crate::config::{ModelConfig, Norm};
use crate::gpt::Gpt;
use crate::linalg::Matrix;
use crate::variant::{AttentionVariant, Projection};

/// Above this 1-norm condition number an f32 model loses too many digits to be "the same".
pub const MAX_CONDITION: f64 = 1e6;

/// Which projection to turn into the identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eliminated {
    Query,
    Key,
    Value,
}

impl Eliminated {
    /// The layer's projection in that role.
    fn projection(self) -> Projection {
        match self {
            Eliminated::Query => Projection::Query,
            Eliminated::Key => Projection::Key,
            Eliminated::Value => Projection::Value,
        }
    }

    pub fn name(self) -> &'static str {
        self.projection().name()
    }
}

/// Which of the theory's exact constructions applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReparamCase {
    /// One layer, no normalisation.
    Single,
    /// Several layers, no normalisation, no skip around the MLP: one Θ per layer.
    NoMlpSkip,
    /// Layers sharing one set of weights: one Θ for the whole network.
    Shared,
}

impl ReparamCase {
    pub fn name(self) -> &'static str {
        match self {
            ReparamCase::Single => "single",
            ReparamCase::NoMlpSkip => "no-mlp-skip",
            ReparamCase::Shared => "shared",
        }
    }

    /// The case a configuration falls under, or why none does.
    pub fn of(config: &ModelConfig) -> Result<Self, ReparamError> {
        if config.norm != Norm::None {
            return Err(ReparamError::HasLayerNorm);
        }
        if config.shared_layers {
            Ok(ReparamCase::Shared)
        } else if config.n_layer == 1 {
            Ok(ReparamCase::Single)
        } else if !config.mlp_skip {
            Ok(ReparamCase::NoMlpSkip)
        } else {
            Err(ReparamError::OneBasisForAllLayers { n_layer: config.n_layer })
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReparamError {
    #[error("cannot convert: the model is a vision transformer; paper 1's change of basis is built here for the GPT only")]
    Vision,
    #[error("cannot convert: the model has LayerNorm, and LN(XΘ) ≠ LN(X)Θ: no exact conversion exists; use the approximate mode")]
    HasLayerNorm,
    #[error("cannot convert: the model has no LayerNorm: use the exact conversion")]
    NoLayerNorm,
    #[error(
        "cannot convert: {n_layer} layers with skips around both attention and MLP keep the residual stream in one basis, \
         so one Θ would have to serve every layer: exact only when the layers share weights (shared_layers), or without \
         the MLP skip (mlp_skip false); otherwise use the approximate mode"
    )]
    OneBasisForAllLayers { n_layer: usize },
    #[error("cannot convert: {projection} is {rows}×{cols}, not square: with shared key/value heads only W_Q can be eliminated")]
    NotSquare { projection: &'static str, rows: usize, cols: usize },
    #[error("cannot convert: the model is {variant}, not standard: only a model with its own W_Q, W_K and W_V has one to eliminate")]
    NotStandard { variant: AttentionVariant },
    #[error("cannot convert: the model has biases, and {projection}'s bias cannot follow into an identity projection: train with bias off")]
    HasBias { projection: &'static str },
    #[error("cannot convert: the embeddings are tied to the LM head, which must absorb Θ⁻¹ while the embedding absorbs Θ: untie them")]
    TiedEmbeddings,
    #[error("cannot convert: layer {layer} does not exist: the model has layers 0 to {last}")]
    NoSuchLayer { layer: usize, last: usize },
    #[error(
        "cannot convert: W_Q of layer {layer} is (nearly) zero on its diagonal at channel {channel}: the LayerNorm gain \
         cannot carry it"
    )]
    ZeroOnDiagonal { layer: usize, channel: usize },
    #[error("{projection} of layer {layer} is singular: no Θ⁻¹ exists, so this model has no equivalent without it")]
    Singular { projection: &'static str, layer: usize },
    #[error(
        "{projection} of layer {layer} is badly conditioned (condition number {condition:.3e} > {MAX_CONDITION:.0e}): \
         in f32 the converted model would not compute the same logits"
    )]
    BadlyConditioned { projection: &'static str, layer: usize, condition: f64 },
}

/// A converted model and what the conversion did.
pub struct Conversion {
    pub model: Gpt,
    pub config: ModelConfig,
    pub case: Option<ReparamCase>,
    /// 1-norm condition number of each layer's Θ.
    pub conditions: Vec<f64>,
}

fn linear_weight(linear: &Linear) -> Matrix {
    Matrix::read(linear.weight.val())
}

fn set_weight(linear: &mut Linear, weight: &Matrix, device: &Device) {
    linear.weight = Param::from_tensor(weight.tensor(device));
}

/// b' = b·M for a bias written into a changed basis.
fn transform_bias(linear: &mut Linear, m: &Matrix, device: &Device) {
    if let Some(bias) = &linear.bias {
        let b = Matrix::read(bias.val()).matmul(m);
        linear.bias = Some(Param::from_tensor(b.tensor(device)));
    }
}

/// Θ of one layer with its inverse and condition number, or why it cannot serve.
fn theta(linear: &Linear, projection: &'static str, layer: usize) -> Result<(Matrix, Matrix, f64), ReparamError> {
    let t = linear_weight(linear);
    if t.rows != t.cols {
        return Err(ReparamError::NotSquare { projection, rows: t.rows, cols: t.cols });
    }
    let inverse = t.inverse().ok_or(ReparamError::Singular { projection, layer })?;
    let condition = t.norm1() * inverse.norm1();
    if !condition.is_finite() || condition > MAX_CONDITION {
        return Err(ReparamError::BadlyConditioned { projection, layer, condition });
    }
    Ok((t, inverse, condition))
}

/// `exact`: an exact conversion, which changes the residual stream's basis (so the embeddings and
/// the LM head must be separate matrices) and has no bias to give the identity projection. The
/// approximate one keeps the basis and drops W_Q's bias with the rest of the query's error.
fn check_standard(config: &ModelConfig, role: Eliminated, exact: bool) -> Result<(), ReparamError> {
    if config.attention.variant != AttentionVariant::Standard {
        return Err(ReparamError::NotStandard { variant: config.attention.variant });
    }
    if exact && config.bias {
        return Err(ReparamError::HasBias { projection: role.name() });
    }
    if exact && config.tie_embeddings {
        return Err(ReparamError::TiedEmbeddings);
    }
    Ok(())
}

/// The projection `role` of a standard layer.
fn projection_mut(attn: &mut crate::attention::CausalSelfAttention, role: Eliminated) -> &mut Linear {
    attn.slot(role.projection()).as_mut().expect("a standard layer owns W_Q, W_K and W_V")
}

/// Exactly equivalent model whose `role` projection is the identity. For W_Q the result is the
/// `wq-identity` variant (no query parameters, the original attention scale kept); W_K or W_V
/// stay in the standard layout with an identity matrix in their place, since QKV Lab has no
/// model-wide conversion into `wk-identity` or `wv-identity`.
pub fn eliminate(model: &Gpt, config: &ModelConfig, role: Eliminated) -> Result<Conversion, ReparamError> {
    check_standard(config, role, true)?;
    let case = ReparamCase::of(config)?;
    let device = model.wte.weight.device();
    let n_layer = config.n_layer;

    // Θ_l for every layer as applied (one unique block when shared).
    let mut thetas = Vec::new();
    for (layer, block) in model.layers().enumerate() {
        thetas.push(theta(projection(&block.attn, role), role.name(), layer)?);
    }
    // basis[l]: the residual stream's basis entering layer l; basis[n_layer]: after the last.
    let mut basis: Vec<(Matrix, Matrix)> = Vec::with_capacity(n_layer + 1);
    basis.push((thetas[0].0.clone(), thetas[0].1.clone()));
    for layer in 0..n_layer {
        let next = if layer + 1 < n_layer {
            (thetas[layer + 1].0.clone(), thetas[layer + 1].1.clone())
        } else if case == ReparamCase::Shared || config.mlp_skip {
            // The MLP's skip carries the current basis to the end; the LM head absorbs it.
            basis[layer].clone()
        } else {
            let identity = Matrix::identity(config.n_embd);
            (identity.clone(), identity)
        };
        basis.push(next);
    }
    let mut converted = change_basis(model, &basis);
    for block in converted.blocks.iter_mut() {
        let attn = &mut block.attn;
        if role == Eliminated::Query {
            attn.w_q = None;
            attn.variant = AttentionVariant::QueryIdentity;
        } else {
            // Θ⁻¹Θ in f64 is I up to rounding; store the exact identity.
            set_weight(projection_mut(attn, role), &Matrix::identity(config.n_embd), &device);
        }
    }
    let mut converted_config = config.clone();
    if role == Eliminated::Query {
        converted_config.attention.variant = AttentionVariant::QueryIdentity;
        // The identity variant's default scale is halved; the converted model keeps the original's.
        converted_config.attention.scale = Some(config.attention_scale());
    }
    Ok(Conversion { model: converted, config: converted_config, case: Some(case), conditions: thetas.iter().map(|t| t.2).collect() })
}

/// Exactly equivalent model in which one layer's `role` projection is the identity: paper 1's
/// statement about a single layer inside a deep network. It holds at any depth without
/// normalisation, skips included, because the whole residual stream moves into that layer's basis
/// Θ = W^(layer): the embeddings absorb Θ, every layer reads through Θ⁻¹ and writes through Θ,
/// and the LM head absorbs Θ⁻¹. The other layers keep their projection (in the new basis), so the
/// model stays standard, with the identity stored in that layer's place.
pub fn eliminate_in_layer(model: &Gpt, config: &ModelConfig, role: Eliminated, layer: usize) -> Result<Conversion, ReparamError> {
    check_standard(config, role, true)?;
    if config.norm != Norm::None {
        return Err(ReparamError::HasLayerNorm);
    }
    if layer >= config.n_layer {
        return Err(ReparamError::NoSuchLayer { layer, last: config.n_layer - 1 });
    }
    let block = model.layers().nth(layer).expect("the layer exists");
    let (t, t_inv, condition) = theta(projection(&block.attn, role), role.name(), layer)?;
    let basis = vec![(t, t_inv); config.n_layer + 1];
    let mut converted = change_basis(model, &basis);
    let unique = converted.blocks.len();
    let device = model.wte.weight.device();
    set_weight(projection_mut(&mut converted.blocks[layer % unique].attn, role), &Matrix::identity(config.n_embd), &device);
    Ok(Conversion { model: converted, config: config.clone(), case: None, conditions: vec![condition] })
}

/// The projection `role` of a standard layer.
fn projection(attn: &crate::attention::CausalSelfAttention, role: Eliminated) -> &Linear {
    attn.projection(role.projection()).expect("a standard layer owns W_Q, W_K and W_V")
}

/// `model` with its residual stream in `basis[l] = (B_l, B_l⁻¹)` entering layer l (and
/// `basis[n_layer]` after the last): the embeddings absorb B_0, each layer reads through B_l⁻¹
/// and writes its attention through B_l and its MLP through B_(l+1), and the LM head absorbs the
/// last inverse. The function the model computes does not change.
fn change_basis(model: &Gpt, basis: &[(Matrix, Matrix)]) -> Gpt {
    let device = model.wte.weight.device();
    let mut converted = model.clone();
    let n_layer = basis.len() - 1;
    let embedding = |weight: &Param<Tensor<2>>| Param::from_tensor(Matrix::read(weight.val()).matmul(&basis[0].0).tensor(&device));
    converted.wte.weight = embedding(&model.wte.weight);
    converted.wpe.weight = embedding(&model.wpe.weight);

    let unique_blocks = converted.blocks.len();
    for (layer, block) in converted.blocks.iter_mut().enumerate() {
        debug_assert!(unique_blocks == n_layer || layer == 0);
        let (b, b_inv) = &basis[layer];
        let (next, _) = &basis[layer + 1];
        let attn = &mut block.attn;
        for role in [Eliminated::Query, Eliminated::Key, Eliminated::Value] {
            let linear = projection_mut(attn, role);
            let w = b_inv.matmul(&linear_weight(linear));
            set_weight(linear, &w, &device);
        }
        let w_o = linear_weight(&attn.w_o).matmul(b);
        set_weight(&mut attn.w_o, &w_o, &device);
        transform_bias(&mut attn.w_o, b, &device);
        let mlp = &mut block.mlp;
        let w_in = b_inv.matmul(&linear_weight(&mlp.c_fc));
        set_weight(&mut mlp.c_fc, &w_in, &device);
        let w_out = linear_weight(&mlp.c_proj).matmul(next);
        set_weight(&mut mlp.c_proj, &w_out, &device);
        transform_bias(&mut mlp.c_proj, next, &device);
    }
    let (_, last_inv) = &basis[n_layer];
    let head = converted.lm_head.as_mut().expect("untied models have an LM head");
    let w_head = last_inv.matmul(&linear_weight(head));
    set_weight(head, &w_head, &device);
    converted
}

/// [`eliminate`] for W_Q.
pub fn eliminate_query(model: &Gpt, config: &ModelConfig) -> Result<Conversion, ReparamError> {
    eliminate(model, config, Eliminated::Query)
}

/// The same model with each head's queries and keys in a basis of their own choosing: W_Q^h A_h
/// and W_K^h A_h^-T (their biases alike), which leaves every logit q·k as it was, LayerNorm or
/// not, since it acts after the norm and inside the head.
///
/// Which A_h: once W_Q is eliminated, head h's query can only read its own channels, through
/// some d_k×d_k matrix M (its query weight is E_h M, E_h the head's slice of the identity, and the
/// LayerNorm gain and W_K absorb the rest). The M nearest W_Q^h in least squares,
/// argmin ‖W_Q^h − E_h M‖, is W_Q^h's own rows for those channels, S_h; A_h = S_h⁻¹ turns that block
/// into the identity, which the elimination then keeps exactly, and leaves in W_Q^h A_h only the
/// rows that read other heads' channels: what no change of basis inside the head can move.
pub fn fit_query_heads(model: &Gpt, config: &ModelConfig) -> Result<Gpt, ReparamError> {
    check_standard(config, Eliminated::Query, false)?;
    let (d, d_k) = (config.n_embd, config.head_dim());
    if config.kv_heads() != config.n_head {
        // A key head serves several query heads, each of which would want a basis of its own.
        return Err(ReparamError::NotSquare { projection: "W_K", rows: d, cols: config.kv_heads() * d_k });
    }
    let device = model.wte.weight.device();
    let mut fitted = model.clone();
    for (layer, block) in fitted.blocks.iter_mut().enumerate() {
        let attn = &mut block.attn;
        let (mut w_q, mut w_k) = (linear_weight(attn.w_q.as_ref().expect("standard")), linear_weight(attn.w_k.as_ref().expect("standard")));
        let bias = |linear: &Option<Linear>| linear.as_ref().and_then(|l| l.bias.as_ref()).map(|b| Matrix::read(b.val()));
        let (mut b_q, mut b_k) = (bias(&attn.w_q), bias(&attn.w_k));
        for head in 0..config.n_head {
            let from = head * d_k;
            let q = w_q.columns(from, d_k);
            let own_rows = q.rows_of(from, d_k);
            let a = own_rows.inverse().ok_or(ReparamError::Singular { projection: "W_Q", layer })?;
            let a_inverse_t = own_rows.transpose();
            w_q.set_columns(from, &q.matmul(&a));
            w_k.set_columns(from, &w_k.columns(from, d_k).matmul(&a_inverse_t));
            if let Some(b) = &mut b_q {
                b.set_columns(from, &b.columns(from, d_k).matmul(&a));
            }
            if let Some(b) = &mut b_k {
                b.set_columns(from, &b.columns(from, d_k).matmul(&a_inverse_t));
            }
        }
        for (slot, weight, bias) in [(&mut attn.w_q, w_q, b_q), (&mut attn.w_k, w_k, b_k)] {
            let linear = slot.as_mut().expect("standard");
            set_weight(linear, &weight, &device);
            if let Some(bias) = bias {
                linear.bias = Some(Param::from_tensor(bias.tensor(&device)));
            }
        }
    }
    Ok(fitted)
}

/// [`eliminate_query_approx`] after [`fit_query_heads`]: the query loses only what no change of
/// basis inside its heads could move onto the identity's slices.
/// With shared key/value heads there is no basis per head to fit: the plain approximation.
pub fn eliminate_query_fitted(model: &Gpt, config: &ModelConfig) -> Result<Conversion, ReparamError> {
    if config.kv_heads() != config.n_head {
        return eliminate_query_approx(model, config);
    }
    eliminate_query_approx(&fit_query_heads(model, config)?, config)
}

/// W_Q = I for a model with LayerNorm, where no exact conversion exists. Each layer's attention
/// input LN(x) would have to become LN(x)·Θ_l, which LayerNorm's elementwise gain and bias cannot
/// hold. They can hold its diagonal d = diag(Θ_l): with gain γ∘d and bias β∘d the attention input
/// is exactly LN(x)·diag(d), and W_K, W_V take diag(d)⁻¹ so that keys and values stay exact. Only
/// the query, LN(x)·diag(d) in place of LN(x)·Θ_l, loses Θ_l's off-diagonal part (and W_Q's bias,
/// in a model with biases: GPT-2's). The residual stream keeps its basis, so tied embeddings stay
/// tied. The caller measures the error; a short fine-tune recovers it.
pub fn eliminate_query_approx(model: &Gpt, config: &ModelConfig) -> Result<Conversion, ReparamError> {
    check_standard(config, Eliminated::Query, false)?;
    if config.norm != Norm::LayerNorm {
        return Err(ReparamError::NoLayerNorm);
    }
    let device = model.wte.weight.device();
    let mut converted = model.clone();
    let mut conditions = Vec::new();
    for (layer, block) in converted.blocks.iter_mut().enumerate() {
        let attn = &mut block.attn;
        let (t, _, condition) = theta(attn.w_q.as_ref().expect("standard"), "W_Q", layer)?;
        conditions.push(condition);
        let d: Vec<f64> = (0..t.rows).map(|i| t.data[i * t.cols + i]).collect();
        let largest = d.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if let Some(channel) = d.iter().position(|v| v.abs() <= largest / MAX_CONDITION) {
            return Err(ReparamError::ZeroOnDiagonal { layer, channel });
        }
        let inverse: Vec<f64> = d.iter().map(|v| 1.0 / v).collect();
        for projection in [Eliminated::Key, Eliminated::Value] {
            let linear = projection_mut(attn, projection);
            // Row i of W reads input channel i, which now arrives d_i times larger.
            let w = linear_weight(linear).scale_rows(&inverse);
            set_weight(linear, &w, &device);
        }
        attn.w_q = None;
        attn.variant = AttentionVariant::QueryIdentity;
        let norm = block.ln_1.as_mut().expect("LayerNorm models have ln_1");
        norm.gamma = Param::from_tensor(Matrix::read(norm.gamma.val()).scale_columns(&d).tensor(&device));
        if let Some(beta) = &norm.beta {
            norm.beta = Some(Param::from_tensor(Matrix::read(beta.val()).scale_columns(&d).tensor(&device)));
        }
    }
    let mut converted_config = config.clone();
    converted_config.attention.variant = AttentionVariant::QueryIdentity;
    converted_config.attention.scale = Some(config.attention_scale());
    Ok(Conversion { model: converted, config: converted_config, case: None, conditions })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpt::tests::{tokens, values};
    use burn::module::Module;

    fn theory_config(n_layer: usize, mlp_skip: bool, shared_layers: bool) -> ModelConfig {
        let mut config = crate::Preset::Theory.config();
        config.vocab_size = 13;
        config.block_size = 8;
        config.n_layer = n_layer;
        config.mlp_skip = mlp_skip;
        config.shared_layers = shared_layers;
        config
    }

    fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    fn logits(model: &Gpt, device: &Device) -> Vec<f32> {
        values(model.forward(tokens(&[&[1, 2, 3, 4, 5, 6, 7, 8], &[8, 3, 3, 0, 12, 5, 1, 2]], device)))
    }

    #[test]
    fn every_exact_case_keeps_the_logits_and_drops_the_query() {
        let device = Device::flex();
        for (config, case) in [
            (theory_config(1, true, false), ReparamCase::Single),
            (theory_config(1, false, false), ReparamCase::Single),
            (theory_config(3, false, false), ReparamCase::NoMlpSkip),
            (theory_config(3, true, true), ReparamCase::Shared),
            (theory_config(3, false, true), ReparamCase::Shared),
        ] {
            let model = Gpt::new_seeded(&config, &device, 7).unwrap();
            let conversion = eliminate_query(&model, &config).unwrap();
            assert_eq!(conversion.case, Some(case));
            let diff = max_abs_diff(&logits(&model, &device), &logits(&conversion.model, &device));
            assert!(diff < 1e-4, "{case:?}: logits differ by {diff}");
            assert!(conversion.model.blocks.iter().all(|b| b.attn.w_q.is_none()));
            let saved = crate::ParamReport::new(&conversion.config).total_params;
            assert_eq!(saved, conversion.model.num_params(), "the converted config describes the converted model");
            assert_eq!(crate::ParamReport::new(&config).total_params - saved, config.n_embd * config.n_embd * model.blocks.len());
            // The converted config rebuilds the same architecture.
            let rebuilt = Gpt::new(&conversion.config, &device).unwrap();
            assert_eq!(rebuilt.blocks[0].attn.scale, conversion.model.blocks[0].attn.scale);
        }
    }

    #[test]
    fn keys_or_values_can_go_instead() {
        let device = Device::flex();
        let config = theory_config(3, false, false);
        let model = Gpt::new_seeded(&config, &device, 11).unwrap();
        for role in [Eliminated::Key, Eliminated::Value] {
            let conversion = eliminate(&model, &config, role).unwrap();
            let diff = max_abs_diff(&logits(&model, &device), &logits(&conversion.model, &device));
            assert!(diff < 1e-4, "{role:?}: {diff}");
            let attn = &conversion.model.blocks[1].attn;
            let w = Matrix::read(match role {
                Eliminated::Key => attn.w_k.as_ref().unwrap().weight.val(),
                _ => attn.w_v.as_ref().unwrap().weight.val(),
            });
            assert_eq!(w, Matrix::identity(config.n_embd));
        }
    }

    #[test]
    fn preconditions_are_named() {
        let device = Device::flex();
        let both_skips = theory_config(2, true, false);
        let model = Gpt::new(&both_skips, &device).unwrap();
        let err = eliminate_query(&model, &both_skips).err().unwrap().to_string();
        assert!(err.contains("shared_layers"), "{err}");

        let mut layer_norm = theory_config(1, true, false);
        layer_norm.norm = Norm::LayerNorm;
        let err = eliminate_query(&Gpt::new(&layer_norm, &device).unwrap(), &layer_norm).err().unwrap().to_string();
        assert!(err.contains("approximate"), "{err}");

        let mut tied = theory_config(1, true, false);
        tied.tie_embeddings = true;
        let err = eliminate_query(&Gpt::new(&tied, &device).unwrap(), &tied).err().unwrap().to_string();
        assert!(err.contains("untie"), "{err}");

        // A singular W_Q: zero its first column.
        let config = theory_config(1, true, false);
        let mut model = Gpt::new(&config, &device).unwrap();
        let q = model.blocks[0].attn.w_q.as_mut().unwrap();
        let mut w = linear_weight(q);
        (0..w.rows).for_each(|i| w.data[i * w.cols] = 0.0);
        set_weight(q, &w, &device);
        let err = eliminate_query(&model, &config).err().unwrap();
        assert!(matches!(err, ReparamError::Singular { layer: 0, .. }), "{err}");
    }

    #[test]
    fn one_layer_of_a_deep_residual_model_loses_its_projection_exactly() {
        let device = Device::flex();
        // Skips around attention and MLP, three layers: no model-wide case applies.
        let config = theory_config(3, true, false);
        let model = Gpt::new_seeded(&config, &device, 5).unwrap();
        assert!(ReparamCase::of(&config).is_err());
        for (role, layer) in
            [(Eliminated::Query, 0), (Eliminated::Query, 1), (Eliminated::Query, 2), (Eliminated::Key, 1), (Eliminated::Value, 2)]
        {
            let conversion = eliminate_in_layer(&model, &config, role, layer).unwrap();
            let diff = max_abs_diff(&logits(&model, &device), &logits(&conversion.model, &device));
            assert!(diff < 1e-4, "{role:?} of layer {layer}: logits differ by {diff}");
            for (l, block) in conversion.model.blocks.iter().enumerate() {
                let is_identity = linear_weight(projection(&block.attn, role)) == Matrix::identity(config.n_embd);
                assert_eq!(is_identity, l == layer, "{role:?} of layer {l} after eliminating layer {layer}'s");
            }
            assert_eq!(conversion.config, config, "the other layers keep theirs: still a standard model");
            assert_eq!(conversion.conditions.len(), 1);
        }
        let err = eliminate_in_layer(&model, &config, Eliminated::Query, 3).err().unwrap().to_string();
        assert!(err.contains("layers 0 to 2"), "{err}");
        let mut layer_norm = config.clone();
        layer_norm.norm = Norm::LayerNorm;
        let err = eliminate_in_layer(&Gpt::new(&layer_norm, &device).unwrap(), &layer_norm, Eliminated::Query, 0).err().unwrap();
        assert!(err.to_string().contains("approximate"), "{err}");
    }

    /// The fit changes no logit, with LayerNorm and biases; and where each head's W_Q reads its
    /// own channels only (block diagonal), it brings W_Q onto the identity, so that the
    /// elimination after it is exact where the one without it is not.
    #[test]
    fn fitting_each_heads_basis_keeps_the_logits_and_can_make_the_elimination_exact() {
        let device = Device::flex();
        let mut config = theory_config(2, true, false);
        (config.norm, config.bias, config.tie_embeddings) = (Norm::LayerNorm, true, true);
        let model = Gpt::new_seeded(&config, &device, 5).unwrap();
        let fitted = fit_query_heads(&model, &config).unwrap();
        let difference = max_abs_diff(&logits(&model, &device), &logits(&fitted, &device));
        assert!(difference < 1e-4, "the fit moved the logits by {difference}");

        // Each head's W_Q a random invertible block on its own channels, every other entry 0;
        // weights 50 times larger than at initialisation, so that the logits are of order 1.
        let (d, d_k) = (config.n_embd, config.head_dim());
        let mut block_diagonal = model.clone();
        for block in &mut block_diagonal.blocks {
            let w_q = block.attn.w_q.as_mut().unwrap();
            let random = Matrix::read(w_q.weight.val());
            let mut weight = Matrix { rows: d, cols: d, data: vec![0.0; d * d] };
            for i in 0..d {
                for j in (i / d_k) * d_k..(i / d_k + 1) * d_k {
                    weight.data[i * d + j] = 50.0 * random.data[i * d + j] + if i == j { 1.0 } else { 0.0 };
                }
            }
            set_weight(w_q, &weight, &device);
            let w_k = block.attn.w_k.as_mut().unwrap();
            let larger = Matrix::read(w_k.weight.val()).scale_rows(&vec![50.0; d]);
            set_weight(w_k, &larger, &device);
        }
        // Each layer's attention logits on the same input, before and after.
        let x = model.embed(tokens(&[&[1, 2, 3, 4, 5, 6, 7, 8]], &device), 0);
        let layer_logits = |model: &Gpt| -> Vec<f32> {
            model.blocks.iter().flat_map(|b| values(b.attn.logits(&b.attn.project(crate::gpt::normalise(&b.ln_1, x.clone())), 0))).collect()
        };
        let original = layer_logits(&block_diagonal);
        let plain = eliminate_query_approx(&block_diagonal, &config).unwrap();
        let fitted = eliminate_query_fitted(&block_diagonal, &config).unwrap();
        let (plain_error, fitted_error) =
            (max_abs_diff(&original, &layer_logits(&plain.model)), max_abs_diff(&original, &layer_logits(&fitted.model)));
        let largest = original.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(largest > 0.5 && plain_error > 0.05 * largest, "without the fit the off-diagonal part is lost: {plain_error} of {largest}");
        // (W_Q's bias, dropped by either, starts at zero.)
        assert!(fitted_error < 1e-4 * largest, "with it nothing is: {fitted_error} of {largest}");

        let mut gqa = config.clone();
        gqa.attention.kv_heads = Some(1);
        let model = Gpt::new_seeded(&gqa, &device, 5).unwrap();
        assert!(matches!(fit_query_heads(&model, &gqa), Err(ReparamError::NotSquare { projection: "W_K", .. })));
    }

    #[test]
    fn the_approximate_mode_keeps_keys_and_values_exact() {
        let device = Device::flex();
        // The theory's LayerNorm model, and GPT-2's: biases and tied embeddings.
        for (bias, tie_embeddings) in [(false, false), (true, true)] {
            let mut config = theory_config(2, true, false);
            (config.norm, config.bias, config.tie_embeddings) = (Norm::LayerNorm, bias, tie_embeddings);
            let model = Gpt::new_seeded(&config, &device, 3).unwrap();
            let conversion = eliminate_query_approx(&model, &config).unwrap();
            assert!(conversion.model.blocks.iter().all(|b| b.attn.w_q.is_none()));
            let converted = logits(&conversion.model, &device);
            assert!(converted.iter().all(|v| v.is_finite()));
            // Any input to any layer: its keys and values are the original's; its query is not.
            let x = model.embed(tokens(&[&[1, 2, 3, 4, 5, 6, 7, 8]], &device), 0);
            for (before, after) in model.blocks.iter().zip(&conversion.model.blocks) {
                let original = before.attn.project(crate::gpt::normalise(&before.ln_1, x.clone()));
                let approximate = after.attn.project(crate::gpt::normalise(&after.ln_1, x.clone()));
                assert!(max_abs_diff(&values(original.key), &values(approximate.key)) < 1e-4, "bias {bias}");
                assert!(max_abs_diff(&values(original.value), &values(approximate.value)) < 1e-4, "bias {bias}");
                assert!(max_abs_diff(&values(original.query), &values(approximate.query)) > 1e-3, "only the query is approximate");
            }
        }
    }
}
