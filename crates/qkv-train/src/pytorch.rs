//! A model's weights in PyTorch's GPT-2 layouts, both ways: out to safetensors for PyTorch users,
//! and in from Hugging Face's `gpt2`, a nanoGPT export or one of ours.
//!
//! Names follow nanoGPT where a tensor has a nanoGPT counterpart:
//!
//! | QKV Lab (Burn)               | safetensors                            |
//! |------------------------------|----------------------------------------|
//! | `wte.weight`                 | `transformer.wte.weight`               |
//! | `wpe.weight`                 | `transformer.wpe.weight`               |
//! | `blocks.N.ln_1.gamma/beta`   | `transformer.h.N.ln_1.weight/bias`     |
//! | `blocks.N.attn.w_q/w_k/w_v` of the standard model | `transformer.h.N.attn.c_attn.*`: GPT-2's one projection, Q's rows, then K's, then V's |
//! | `blocks.N.attn.w_q.*` etc. of the other variants | `transformer.h.N.attn.w_q.*`: they own other projections, so they keep their names (`w_q`, `w_k`, `w_v`, `w_qk`, `w_kv`, `w_qkv`) |
//! | `blocks.N.attn.w_o.*`        | `transformer.h.N.attn.c_proj.*`        |
//! | `blocks.N.attn.asymmetry.mix.*` | `transformer.h.N.attn.asymmetry.mix.*` |
//! | `blocks.N.mlp.c_fc/c_proj.*` | `transformer.h.N.mlp.c_fc/c_proj.*`    |
//! | `ln_f.gamma/beta`            | `transformer.ln_f.weight/bias`         |
//! | `lm_head.weight` (untied)    | `lm_head.weight`                       |
//!
//! A tied model has no `lm_head.weight`: PyTorch code ties it to `transformer.wte.weight`.
//!
//! Shapes: nanoGPT's projections are `nn.Linear`, [out, in]; Hugging Face's GPT-2 stores the
//! same projections as `Conv1D`, [in, out] ([`Layout`]). Hugging Face's `GPT2Model` files also
//! leave out the `transformer.` prefix and keep the causal mask as a buffer (`attn.bias`), which
//! an import drops. The MLP's activation is the exact GELU, as in nanoGPT; GPT-2 was trained with
//! its tanh approximation, so an imported GPT-2's logits differ from Hugging Face's slightly.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use burn::store::{BurnToPyTorchAdapter, KeyRemapper, ModuleSnapshot, PyTorchToBurnAdapter, SafetensorsStore};
use burn::tensor::Device;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use qkv_model::{AttentionConfig, AttentionVariant, ConfigError, Gpt, ModelConfig, Norm};

use crate::{Cause, cause};

/// Burn's names to nanoGPT's, for an export.
const TO_NANOGPT_NAMES: [(&str, &str); 5] = [
    (r"^wte\.", "transformer.wte."),
    (r"^wpe\.", "transformer.wpe."),
    (r"^blocks\.(\d+)\.", "transformer.h.$1."),
    (r"\.attn\.w_o\.", ".attn.c_proj."),
    (r"^ln_f\.", "transformer.ln_f."),
];

/// nanoGPT's names to Burn's, for an import: [`TO_NANOGPT_NAMES`] backwards.
const TO_BURN_NAMES: [(&str, &str); 5] = [
    (r"^transformer\.wte\.", "wte."),
    (r"^transformer\.wpe\.", "wpe."),
    (r"^transformer\.h\.(\d+)\.", "blocks.$1."),
    (r"\.attn\.c_proj\.", ".attn.w_o."),
    (r"^transformer\.ln_f\.", "ln_f."),
];

/// Burn's key remapper for one of the tables above (constant patterns, so they compile).
fn remapper(patterns: &[(&str, &str)]) -> KeyRemapper {
    patterns.iter().fold(KeyRemapper::new(), |remapper, &(from, to)| remapper.add_pattern(from, to).expect("the patterns are valid"))
}

/// How a file stores its projections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// `nn.Linear`, [out, in]: nanoGPT's.
    #[default]
    NanoGpt,
    /// `Conv1D`, [in, out]: Hugging Face's GPT-2.
    HuggingFace,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::NanoGpt => "nanogpt",
            Layout::HuggingFace => "huggingface",
        }
    }

    /// The layout a file's `layout` metadata names.
    fn named(name: &str) -> Option<Self> {
        [Layout::NanoGpt, Layout::HuggingFace].into_iter().find(|layout| layout.name() == name)
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why weights could not go out or come in; each names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum PyTorchError {
    #[error("{name} is not a safetensors file ({source}): give a .safetensors file")]
    NotSafetensors {
        name: String,
        #[source]
        source: safetensors::SafeTensorError,
    },
    #[error("{name}: {tensor} holds {dtype} values; QKV Lab reads F32, F16 and BF16 weights")]
    DType { name: String, tensor: String, dtype: String },
    #[error("{name} has no {tensor}: only GPT-2's layout (Hugging Face's gpt2, a nanoGPT export) or a QKV Lab export imports")]
    Missing { name: String, tensor: String },
    #[error("{name}: layer {layer}'s c_attn.{leaf} has {rows} rows, not three equal parts (Q, K, V)")]
    FusedRows { name: String, layer: usize, leaf: &'static str, rows: usize },
    #[error("{name}: its config does not read: {source}")]
    ConfigUnreadable {
        name: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{name}: its layout '{layout}' is neither nanogpt nor huggingface")]
    UnknownLayout { name: String, layout: String },
    #[error(
        "{name} does not say how many attention heads its model has: put the model's config.json (with n_head) beside it, \
         or name it with --config"
    )]
    NoHeadCount { name: String },
    #[error("{name}: the model it describes cannot be built: {error}")]
    Config { name: String, error: ConfigError },
    #[error("{name}: the weights do not fit the model: {source}")]
    Mismatch {
        name: String,
        #[source]
        source: Cause,
    },
    #[error(
        "{name}: the weights do not fit the model: {errors} errors {first_error}, missing {missing:?}, not in the model {unexpected:?}"
    )]
    WeightsDiffer { name: String, errors: usize, first_error: String, missing: Vec<String>, unexpected: Vec<String> },
    #[error("cannot write the weights as safetensors: {0}")]
    Write(#[source] Cause),
    #[error("cannot write the weights as safetensors: {tensor}: {source}")]
    WriteTensor {
        tensor: String,
        #[source]
        source: Cause,
    },
}

/// One tensor on the host, row-major.
#[derive(Debug, Clone, PartialEq)]
struct HostTensor {
    shape: Vec<usize>,
    values: Vec<f32>,
}

impl HostTensor {
    /// A 2-D tensor transposed.
    fn transposed(&self) -> Self {
        let [rows, cols] = self.shape[..] else { return self.clone() };
        let values = (0..cols).flat_map(|c| (0..rows).map(move |r| (r, c))).map(|(r, c)| self.values[r * cols + c]).collect();
        Self { shape: vec![cols, rows], values }
    }
}

type Tensors = BTreeMap<String, HostTensor>;

fn read(bytes: &[u8], name: &str) -> Result<(Tensors, HashMap<String, String>), PyTorchError> {
    let not_safetensors = |source| PyTorchError::NotSafetensors { name: name.to_string(), source };
    let (_, header) = SafeTensors::read_metadata(bytes).map_err(not_safetensors)?;
    let metadata = header.metadata().clone().unwrap_or_default();
    let file = SafeTensors::deserialize(bytes).map_err(not_safetensors)?;
    let mut tensors = Tensors::new();
    for (tensor, view) in file.iter() {
        let data = view.data();
        let values: Vec<f32> = match view.dtype() {
            Dtype::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            Dtype::F16 => data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            Dtype::BF16 => data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            other => {
                return Err(PyTorchError::DType { name: name.to_string(), tensor: tensor.to_string(), dtype: format!("{other:?}") });
            }
        };
        tensors.insert(tensor.to_string(), HostTensor { shape: view.shape().to_vec(), values });
    }
    Ok((tensors, metadata))
}

fn write(tensors: &Tensors, metadata: HashMap<String, String>) -> Result<Vec<u8>, PyTorchError> {
    let bytes: Vec<(&String, Vec<u8>)> =
        tensors.iter().map(|(name, t)| (name, t.values.iter().flat_map(|v| v.to_le_bytes()).collect())).collect();
    let views = bytes
        .iter()
        .map(|(name, data)| Ok((name.as_str(), TensorView::new(Dtype::F32, tensors[*name].shape.clone(), data)?)))
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()
        .map_err(|e| PyTorchError::Write(cause(e)))?;
    safetensors::serialize(views, Some(metadata)).map_err(|e| PyTorchError::Write(cause(e)))
}

/// The projections that Hugging Face stores as `Conv1D`: every matrix of attention and the MLP.
fn is_projection(name: &str, tensor: &HostTensor) -> bool {
    name.starts_with("transformer.h.")
        && (name.contains(".attn.") || name.contains(".mlp."))
        && !name.contains(".asymmetry.")
        && name.ends_with(".weight")
        && tensor.shape.len() == 2
}

fn switch_layout(tensors: &mut Tensors) {
    for (name, tensor) in tensors.iter_mut() {
        if is_projection(name, tensor) {
            *tensor = tensor.transposed();
        }
    }
}

/// The block indices a file has (one for a model whose layers share a block).
fn layers(tensors: &Tensors) -> Vec<usize> {
    let mut layers: Vec<usize> =
        tensors.keys().filter_map(|name| name.strip_prefix("transformer.h.")?.split('.').next()?.parse().ok()).collect();
    layers.sort_unstable();
    layers.dedup();
    layers
}

/// Whether the model's attention is GPT-2's: three full projections, fused as `c_attn`.
fn has_gpt2_attention(config: &ModelConfig) -> bool {
    config.attention.variant == AttentionVariant::Standard && config.kv_heads() == config.n_head
}

/// Q, K and V of each layer as one `c_attn`, their rows stacked in that order (nn.Linear layout).
fn fuse_qkv(tensors: &mut Tensors) {
    for layer in layers(tensors) {
        for leaf in ["weight", "bias"] {
            let parts: Option<Vec<HostTensor>> =
                ["w_q", "w_k", "w_v"].iter().map(|p| tensors.remove(&format!("transformer.h.{layer}.attn.{p}.{leaf}"))).collect();
            let Some(parts) = parts else { continue };
            let mut shape = parts[0].shape.clone();
            shape[0] *= 3;
            let values = parts.into_iter().flat_map(|part| part.values).collect();
            tensors.insert(format!("transformer.h.{layer}.attn.c_attn.{leaf}"), HostTensor { shape, values });
        }
    }
}

/// Each layer's `c_attn` as Q, K and V again (nn.Linear layout).
fn split_qkv(tensors: &mut Tensors, name: &str) -> Result<(), PyTorchError> {
    for layer in layers(tensors) {
        for leaf in ["weight", "bias"] {
            let Some(fused) = tensors.remove(&format!("transformer.h.{layer}.attn.c_attn.{leaf}")) else { continue };
            if fused.shape[0] % 3 != 0 {
                return Err(PyTorchError::FusedRows { name: name.to_string(), layer, leaf, rows: fused.shape[0] });
            }
            let mut shape = fused.shape.clone();
            shape[0] /= 3;
            let part = fused.values.len() / 3;
            for (index, projection) in ["w_q", "w_k", "w_v"].iter().enumerate() {
                let values = fused.values[index * part..(index + 1) * part].to_vec();
                tensors.insert(format!("transformer.h.{layer}.attn.{projection}.{leaf}"), HostTensor { shape: shape.clone(), values });
            }
        }
    }
    Ok(())
}

/// The model's weights as a safetensors file in `layout`, its config in the metadata (`config`,
/// as QKV Lab writes it; [`gpt2_config_json`] gives Hugging Face's `config.json`).
pub fn to_safetensors(model: &Gpt, config: &ModelConfig, layout: Layout) -> Result<Vec<u8>, PyTorchError> {
    // The model's tensors as PyTorch names and lays them out (what a `SafetensorsStore` with
    // this adapter and remapper would write), taken straight to the host: they are fused and
    // transposed below before the one file is written.
    let collected = model.collect(None, Some(Box::new(BurnToPyTorchAdapter)), false);
    let (collected, _) = remapper(&TO_NANOGPT_NAMES).remap(collected);
    let mut tensors = Tensors::new();
    for tensor in collected {
        let name = tensor.name.clone();
        let failed = |source: Cause| PyTorchError::WriteTensor { tensor: name.clone(), source };
        let data = burn::store::bridge::into_data(tensor).map_err(|e| failed(cause(e)))?;
        let shape = data.shape().to_vec();
        let values = data.try_into_vec::<f32>().map_err(|e| failed(cause(e)))?;
        tensors.insert(name, HostTensor { shape, values });
    }
    if has_gpt2_attention(config) {
        fuse_qkv(&mut tensors);
    }
    if layout == Layout::HuggingFace {
        switch_layout(&mut tensors);
    }
    let config_json = serde_json::to_string(config).map_err(|e| PyTorchError::Write(cause(e)))?;
    // "format: pt" is what Hugging Face's loaders look for in a PyTorch model's file.
    let metadata = HashMap::from([
        ("format".to_string(), "pt".to_string()),
        ("producer".to_string(), "qkv-lab".to_string()),
        ("layout".to_string(), layout.name().to_string()),
        ("config".to_string(), config_json),
    ]);
    write(&tensors, metadata)
}

/// Hugging Face's `config.json` for a GPT-2 with this architecture, QKV Lab's own config beside
/// it (`qkv_lab`) so that every variant comes back whole.
pub fn gpt2_config_json(config: &ModelConfig) -> serde_json::Value {
    serde_json::json!({
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": config.vocab_size,
        "n_positions": config.block_size,
        "n_ctx": config.block_size,
        "n_embd": config.n_embd,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "n_inner": config.mlp_hidden,
        "activation_function": "gelu",
        "layer_norm_epsilon": 1e-5,
        "tie_word_embeddings": config.tie_embeddings,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "qkv_lab": config,
    })
}

/// Which layout a file without QKV Lab's metadata has, from its MLP's or attention's shapes
/// (an [in, out] first projection is Conv1D); Hugging Face's when nothing tells them apart.
fn detect_layout(tensors: &Tensors, n_embd: usize) -> Layout {
    for (tensor, widen) in [("transformer.h.0.mlp.c_fc.weight", None), ("transformer.h.0.attn.c_attn.weight", Some(3))] {
        if let Some([rows, cols]) = tensors.get(tensor).map(|t| &t.shape[..]) {
            let other = widen.map(|w| w * n_embd);
            match (*rows == n_embd, *cols == n_embd) {
                (true, false) if other.is_none_or(|o| *cols == o) => return Layout::HuggingFace,
                (false, true) if other.is_none_or(|o| *rows == o) => return Layout::NanoGpt,
                _ => {}
            }
        }
    }
    Layout::HuggingFace
}

/// A GPT-2's architecture from its tensors' shapes; the head count (which no shape shows) from
/// Hugging Face's `config.json`. Not validated here: the caller validates every config.
fn infer_config(tensors: &Tensors, gpt2_config: Option<&str>, name: &str) -> Result<ModelConfig, PyTorchError> {
    let get =
        |tensor: &str| tensors.get(tensor).ok_or_else(|| PyTorchError::Missing { name: name.to_string(), tensor: tensor.to_string() });
    let wte = get("transformer.wte.weight")?;
    let wpe = get("transformer.wpe.weight")?;
    let c_fc = get("transformer.h.0.mlp.c_fc.weight")?;
    get("transformer.h.0.attn.c_attn.weight")?;
    let (vocab_size, n_embd) = (wte.shape[0], wte.shape[1]);
    let mlp_hidden = if c_fc.shape[0] == n_embd { c_fc.shape[1] } else { c_fc.shape[0] };
    let n_head = gpt2_config
        .and_then(|json| serde_json::from_str::<serde_json::Value>(json).ok())
        .and_then(|json| json.get("n_head").or(json.get("num_attention_heads")).and_then(|n| n.as_u64()))
        .ok_or_else(|| PyTorchError::NoHeadCount { name: name.to_string() })?;
    Ok(ModelConfig {
        vocab_size,
        block_size: wpe.shape[0],
        n_layer: layers(tensors).len(),
        n_head: n_head as usize,
        n_embd,
        mlp_hidden,
        bias: tensors.contains_key("transformer.h.0.attn.c_attn.bias"),
        tie_embeddings: true,
        dropout: 0.0,
        norm: Norm::LayerNorm,
        mlp_skip: true,
        shared_layers: false,
        attention: AttentionConfig::new(AttentionVariant::Standard),
        image: None,
    })
}

/// A model read from a safetensors file: Hugging Face's GPT-2 (`gpt2_config` is its
/// `config.json`, for the head count), a nanoGPT export, or one of ours (any variant; its config
/// travels in the file).
pub fn from_safetensors(bytes: &[u8], name: &str, gpt2_config: Option<&str>, device: &Device) -> Result<(ModelConfig, Gpt), PyTorchError> {
    let (tensors, metadata) = read(bytes, name)?;
    // Hugging Face's GPT2Model has no "transformer." prefix and keeps its causal masks as buffers.
    let mut tensors: Tensors = tensors
        .into_iter()
        .filter(|(tensor, _)| !tensor.ends_with(".attn.bias") && !tensor.ends_with(".attn.masked_bias"))
        .map(|(tensor, values)| match tensor.starts_with("transformer.") || tensor.starts_with("lm_head.") {
            true => (tensor, values),
            false => (format!("transformer.{tensor}"), values),
        })
        .collect();
    let mut config = match metadata.get("config") {
        Some(json) => {
            serde_json::from_str::<ModelConfig>(json).map_err(|source| PyTorchError::ConfigUnreadable { name: name.to_string(), source })?
        }
        None => infer_config(&tensors, gpt2_config, name)?,
    };
    config.validate().map_err(|error| PyTorchError::Config { name: name.to_string(), error })?;
    let layout = match metadata.get("layout") {
        Some(layout) => {
            Layout::named(layout).ok_or_else(|| PyTorchError::UnknownLayout { name: name.to_string(), layout: layout.clone() })?
        }
        None => detect_layout(&tensors, config.n_embd),
    };
    if layout == Layout::HuggingFace {
        switch_layout(&mut tensors);
    }
    split_qkv(&mut tensors, name)?;
    // A file may carry its tied head anyway; it is the embedding again.
    if tensors.get("lm_head.weight").is_some_and(|head| Some(head) == tensors.get("transformer.wte.weight")) {
        tensors.remove("lm_head.weight");
    }
    if !metadata.contains_key("config") {
        config.tie_embeddings = !tensors.contains_key("lm_head.weight");
    }

    let bytes = write(&tensors, HashMap::new())?;
    let mut store = SafetensorsStore::from_bytes(Some(bytes)).with_from_adapter(PyTorchToBurnAdapter).remap(remapper(&TO_BURN_NAMES));
    let mut model = Gpt::new(&config, device).map_err(|error| PyTorchError::Config { name: name.to_string(), error })?;
    let applied = model.load_from(&mut store).map_err(|e| PyTorchError::Mismatch { name: name.to_string(), source: cause(e) })?;
    if !applied.is_success() || !applied.missing.is_empty() || !applied.unused.is_empty() {
        return Err(PyTorchError::WeightsDiffer {
            name: name.to_string(),
            errors: applied.errors.len(),
            first_error: format!("{:?}", applied.errors.first()),
            missing: applied.missing.iter().map(|m| m.0.clone()).collect(),
            unexpected: applied.unused.clone(),
        });
    }
    Ok((config, model))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::module::Module;
    use burn::tensor::{Int, Tensor, TensorData};
    use qkv_model::Preset;

    fn logits(model: &Gpt, device: &Device) -> Vec<f32> {
        let tokens: Vec<i64> = (0..16).map(|i| (i * 5 % 60) as i64).collect();
        let input = Tensor::<2, Int>::from_data(TensorData::new(tokens, [2, 8]), device);
        model.forward(input).into_data().try_to_vec::<f32>().unwrap()
    }

    fn names(bytes: &[u8]) -> Vec<String> {
        let mut names: Vec<String> = SafeTensors::deserialize(bytes).unwrap().names().into_iter().map(String::from).collect();
        names.sort();
        names
    }

    #[test]
    fn the_export_has_nanogpt_names_and_pytorch_shapes() {
        let device = Device::flex();
        let mut config = Preset::Classroom.config().with_variant(AttentionVariant::SharedKeyValue);
        config.tie_embeddings = false;
        let model = Gpt::new(&config, &device).unwrap();
        let bytes = to_safetensors(&model, &config, Layout::NanoGpt).unwrap();
        let names = names(&bytes);
        for expected in [
            "transformer.wte.weight",
            "transformer.wpe.weight",
            "transformer.h.0.ln_1.weight",
            "transformer.h.0.attn.w_q.weight",
            "transformer.h.1.attn.w_kv.weight",
            "transformer.h.0.attn.c_proj.weight",
            "transformer.h.0.mlp.c_fc.weight",
            "transformer.ln_f.weight",
            "lm_head.weight",
        ] {
            assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
        }
        // nn.Linear stores [out, in]; Burn stores [in, out].
        let file = SafeTensors::deserialize(&bytes).unwrap();
        let c_fc = file.tensor("transformer.h.0.mlp.c_fc.weight").unwrap();
        assert_eq!(c_fc.shape(), [config.mlp_hidden, config.n_embd]);
        let exported: Vec<f32> = c_fc.data().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        let burn = model.blocks[0].mlp.c_fc.weight.val().transpose().into_data().try_into_vec_as::<f32>().unwrap();
        assert_eq!(exported, burn);
        struct CountTensors(usize);
        impl burn::module::ModuleVisitor for CountTensors {
            fn visit_float<const D: usize>(&mut self, _: &burn::module::Param<burn::tensor::Tensor<D>>) {
                self.0 += 1;
            }
        }
        let mut count = CountTensors(0);
        model.visit(&mut count);
        assert_eq!(names.len(), count.0, "every parameter is exported once");
    }

    #[test]
    fn every_variant_comes_back_with_the_same_logits_in_either_layout() {
        let device = Device::flex();
        for variant in AttentionVariant::ALL {
            for tie_embeddings in [true, false] {
                let mut config = Preset::Classroom.config().with_variant(variant);
                config.tie_embeddings = tie_embeddings;
                config.vocab_size = 60;
                let model = Gpt::new_seeded(&config, &device, 4).unwrap();
                for layout in [Layout::NanoGpt, Layout::HuggingFace] {
                    let bytes = to_safetensors(&model, &config, layout).unwrap();
                    let gpt2 = names(&bytes).iter().any(|n| n.ends_with("attn.c_attn.weight"));
                    assert_eq!(gpt2, variant == AttentionVariant::Standard, "{variant}: Q, K, V fused as GPT-2's c_attn");
                    let (back, imported) = from_safetensors(&bytes, "exported.safetensors", None, &device).unwrap();
                    assert_eq!(back, config, "{variant} {layout}");
                    assert_eq!(logits(&imported, &device), logits(&model, &device), "{variant} {layout} tied {tie_embeddings}");
                    if variant == AttentionVariant::Standard {
                        // As PyTorch code would save it: no QKV Lab metadata, the layout told by
                        // the shapes, the head count by Hugging Face's config.json.
                        let (tensors, _) = read(&bytes, "exported").unwrap();
                        let plain = write(&tensors, HashMap::new()).unwrap();
                        let gpt2 = gpt2_config_json(&config).to_string();
                        let (_, imported) = from_safetensors(&plain, "plain.safetensors", Some(&gpt2), &device).unwrap();
                        assert_eq!(logits(&imported, &device), logits(&model, &device), "{layout} without metadata");
                    }
                }
            }
        }
    }

    /// A file as Hugging Face's `gpt2` repository has it, made here with known values: no
    /// `transformer.` prefix, Conv1D [in, out] projections, the causal mask buffers, no head.
    #[test]
    fn a_hugging_face_gpt2_file_loads_tensor_by_tensor() {
        let (vocab, context, width, hidden, n_layer) = (50, 16, 8, 32, 2);
        let counter = std::cell::Cell::new(0.0f32);
        let next = |shape: &[usize]| {
            let values = (0..shape.iter().product()).map(|_| {
                counter.set(counter.get() + 1.0);
                (counter.get() * 0.618).sin() * 0.1
            });
            HostTensor { shape: shape.to_vec(), values: values.collect() }
        };
        let mut file = Tensors::new();
        file.insert("wte.weight".into(), next(&[vocab, width]));
        file.insert("wpe.weight".into(), next(&[context, width]));
        for layer in 0..n_layer {
            let h = |leaf: &str| format!("h.{layer}.{leaf}");
            for (leaf, shape) in [
                ("ln_1.weight", vec![width]),
                ("ln_1.bias", vec![width]),
                ("attn.c_attn.weight", vec![width, 3 * width]),
                ("attn.c_attn.bias", vec![3 * width]),
                ("attn.c_proj.weight", vec![width, width]),
                ("attn.c_proj.bias", vec![width]),
                ("ln_2.weight", vec![width]),
                ("ln_2.bias", vec![width]),
                ("mlp.c_fc.weight", vec![width, hidden]),
                ("mlp.c_fc.bias", vec![hidden]),
                ("mlp.c_proj.weight", vec![hidden, width]),
                ("mlp.c_proj.bias", vec![width]),
                ("attn.bias", vec![1, 1, context, context]),
            ] {
                file.insert(h(leaf), next(&shape));
            }
        }
        file.insert("ln_f.weight".into(), next(&[width]));
        file.insert("ln_f.bias".into(), next(&[width]));
        let bytes = write(&file, HashMap::from([("format".to_string(), "pt".to_string())])).unwrap();

        let device = Device::flex();
        let error = from_safetensors(&bytes, "gpt2.safetensors", None, &device).unwrap_err();
        assert!(matches!(error, PyTorchError::NoHeadCount { .. }), "{error}");
        let (config, model) = from_safetensors(&bytes, "gpt2.safetensors", Some(r#"{"n_head": 2, "n_layer": 2}"#), &device).unwrap();
        assert_eq!(
            (config.vocab_size, config.block_size, config.n_embd, config.mlp_hidden, config.n_layer),
            (vocab, context, width, hidden, 2)
        );
        assert!(config.bias && config.tie_embeddings && config.n_head == 2);

        let burn = |tensor: Tensor<2>| HostTensor { shape: tensor.dims().to_vec(), values: tensor.into_data().try_to_vec().unwrap() };
        let values = |tensor: Tensor<1>| tensor.into_data().try_to_vec::<f32>().unwrap();
        let block = &model.blocks[1];
        let c_attn = &file["h.1.attn.c_attn.weight"];
        // Conv1D's [in, out] is Burn's layout: Q is the first `width` columns, V the last.
        let columns = |from: usize| HostTensor {
            shape: vec![width, width],
            values: (0..width).flat_map(|r| c_attn.values[r * 3 * width + from..r * 3 * width + from + width].to_vec()).collect(),
        };
        assert_eq!(burn(block.attn.w_q.as_ref().unwrap().weight.val()), columns(0));
        assert_eq!(burn(block.attn.w_v.as_ref().unwrap().weight.val()), columns(2 * width));
        assert_eq!(
            values(block.attn.w_k.as_ref().unwrap().bias.as_ref().unwrap().val()),
            file["h.1.attn.c_attn.bias"].values[width..2 * width]
        );
        assert_eq!(burn(block.attn.w_o.weight.val()), file["h.1.attn.c_proj.weight"]);
        assert_eq!(burn(block.mlp.c_fc.weight.val()), file["h.1.mlp.c_fc.weight"]);
        assert_eq!(values(block.ln_2.as_ref().unwrap().gamma.val()), file["h.1.ln_2.weight"].values);
        assert_eq!(burn(model.wte.weight.val()), file["wte.weight"]);
        assert_eq!(burn(model.wpe.weight.val()), file["wpe.weight"]);
        assert_eq!(values(model.ln_f.as_ref().unwrap().beta.as_ref().unwrap().val()), file["ln_f.bias"].values);

        let error = from_safetensors(b"not a model", "notes.txt", None, &device).unwrap_err();
        assert!(error.to_string().contains("notes.txt is not a safetensors file"), "{error}");
    }
}
