//! `qkv inspect`: what a checkpoint holds, so that a reader can check any of them (one imported
//! from PyTorch included): the model's shape, its exact parameter and KV-cache counts, and its
//! attention diagnostics on a text it reads.

use std::path::PathBuf;

use clap::Args;
use pollster::FutureExt as _;
use serde::Serialize;

use qkv_model::diagnostics::diagnose;
use qkv_model::{CacheDType, ModelConfig, ModelDiagnostics};
use qkv_train::checkpoint::Checkpoint;
use qkv_train::corpus::shakespeare;
use qkv_train::dataset::Inputs;
use qkv_train::tokenizer::Tokenizer;

use crate::Failure;
use crate::params::Counts;
use crate::sample::{DIGITS, digit_tokens};

/// Tokens the diagnostics read at most: enough for the maps' figures, few enough to be quick.
const DIAGNOSTIC_TOKENS: usize = 64;

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// A checkpoint written by `qkv train`, `qkv compare` or `qkv import`.
    #[arg(long)]
    checkpoint: PathBuf,
    /// The text the diagnostics read, up to 64 tokens [default: the start of the embedded
    /// Shakespeare for a text model, the digits of π for a synthetic-task one].
    #[arg(long)]
    text: Option<String>,
    /// Print JSON: one object, its field names a stable interface for scripts.
    #[arg(long)]
    json: bool,
}

/// A checkpoint's model and what it costs; the field names are a stable interface for scripts.
#[derive(Debug, Serialize)]
struct Inspection {
    checkpoint: String,
    /// The data it trained on, as its run named it.
    data: String,
    step: usize,
    steps: usize,
    /// Exact counts as `qkv params` gives them, the KV cache in f32.
    #[serde(flatten)]
    counts: Counts,
    model: ModelConfig,
    /// How many tokens the diagnostics read; 0 where there are none.
    diagnostic_tokens: usize,
    /// None for a vision transformer: it reads images, not text.
    diagnostics: Option<ModelDiagnostics>,
}

pub fn run(args: &InspectArgs) -> Result<(), Failure> {
    let checkpoint = Checkpoint::read(&args.checkpoint)?;
    let header = &checkpoint.header;
    let (config, data, step, steps) = (header.spec.model.clone(), header.data.clone(), header.step, header.spec.training.steps);
    let device = crate::compute::Backend::Flex.device().block_on()?;
    let tokens = if config.is_vision() { Vec::new() } else { diagnostic_tokens(header.tokenizer.as_ref(), args.text.as_deref(), &config)? };
    let model = checkpoint.into_model(&device)?;
    let diagnostics = if tokens.is_empty() {
        None
    } else {
        let input = Inputs::Tokens(tokens.iter().map(|&t| i64::from(t)).collect()).to_input(1, &device);
        Some(diagnose(&model, input).block_on()?)
    };
    let inspection = Inspection {
        checkpoint: args.checkpoint.display().to_string(),
        data,
        step,
        steps,
        counts: Counts::of(&config, CacheDType::F32),
        diagnostic_tokens: tokens.len(),
        diagnostics,
        model: config,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&inspection)?);
    } else {
        print!("{}", text_of(&inspection));
    }
    Ok(())
}

/// The token ids the diagnostics read: `text` (or the default for the model's data) through the
/// checkpoint's tokenizer, cut to the model's context and [`DIAGNOSTIC_TOKENS`].
fn diagnostic_tokens(tokenizer: Option<&Tokenizer>, text: Option<&str>, config: &ModelConfig) -> Result<Vec<u32>, Failure> {
    let tokens: Vec<u32> = match tokenizer {
        Some(tokenizer) => {
            let default = || shakespeare().chars().take(4 * DIAGNOSTIC_TOKENS).collect::<String>();
            let text = text.map_or_else(default, str::to_string);
            tokenizer.encode(&text).map_err(|e| {
                crate::usage(format!("the checkpoint's tokenizer cannot read the text the diagnostics need ({e}): give one with --text"))
            })?
        }
        // A synthetic-task model: its tokens are the digits.
        None => digit_tokens(text.unwrap_or(DIGITS))
            .map_err(|c| crate::usage(format!("a synthetic-task model reads digits only; '{c}' is not a digit")))?,
    };
    let tokens: Vec<u32> = tokens.into_iter().take(config.block_size.min(DIAGNOSTIC_TOKENS)).collect();
    if tokens.is_empty() {
        return Err(crate::usage("the text for the diagnostics is empty: give one with --text"));
    }
    if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= config.vocab_size) {
        return Err(crate::usage(format!("token {bad} is outside the model's vocabulary of {}: give another --text", config.vocab_size)));
    }
    Ok(tokens)
}

/// The inspection for a terminal.
fn text_of(i: &Inspection) -> String {
    let m = &i.model;
    let kind = if m.is_vision() { "ViT" } else { "GPT" };
    let mut out = format!(
        "{}: a {kind} trained on {} to step {} of {}\n\
         model: {} layers × {} heads × {} wide, context {}, vocabulary {}; {} ({}), {} key/value heads\n\
         parameters: {} ({} embedding, {} non-embedding, {} in attention)\n\
         KV cache: {} bytes per token of context (f32), {} for the full context of {}\n",
        i.checkpoint,
        i.data,
        i.step,
        i.steps,
        m.n_layer,
        m.n_head,
        m.n_embd,
        m.block_size,
        m.vocab_size,
        i.counts.variant.name(),
        i.counts.notation,
        i.counts.kv_heads,
        i.counts.total_params,
        i.counts.embedding_params,
        i.counts.non_embedding_params,
        i.counts.attention_params,
        i.counts.kv_cache_bytes_per_token,
        i.counts.kv_cache_bytes_per_token * m.block_size,
        m.block_size,
    );
    let Some(diagnostics) = &i.diagnostics else {
        out += "diagnostics: none for a vision transformer here (they read text); its summary.json has them\n";
        return out;
    };
    out += &format!("diagnostics on {} tokens:\n", i.diagnostic_tokens);
    let figure = |value: Option<f64>| value.map_or("-".to_string(), |v| format!("{v:.3}"));
    for (l, layer) in diagnostics.layers.iter().enumerate() {
        let by_head = |values: &[f64]| values.iter().map(|s| format!("{s:.3}")).collect::<Vec<_>>().join(", ");
        let positional = if layer.positional_share.is_empty() {
            String::new()
        } else {
            format!(", positional term's share by head [{}]", by_head(&layer.positional_share))
        };
        out += &format!(
            "  layer {l}: cos(W_K, W_V) {}, K/V overlap {}, cos(W_Q, W_K) {}, {} by head [{}]{positional}, logit rms {:.3}\n",
            figure(layer.key_value_cosine),
            figure(layer.key_value_overlap),
            figure(layer.query_key_cosine),
            layer.symmetry_measure.name(),
            by_head(&layer.symmetry),
            layer.logit_rms
        );
    }
    out
}
