//! `qkv import`: a GPT-2-layout safetensors file (Hugging Face's `gpt2`, a nanoGPT export, or
//! `qkv export`'s) as a QKV Lab checkpoint that samples, trains on, shows its attention and can
//! lose its W_Q in the app.

use std::path::{Path, PathBuf};

use clap::Args;

use qkv_model::Preset;
use qkv_model::burn::tensor::Device;
use qkv_train::checkpoint::{to_bytes, write_atomically};
use qkv_train::pytorch::from_safetensors;
use qkv_train::{DataSource, Dataset, Run, RunSpec, TokenizerKind, TrainingConfig};

use crate::Failure;
use pollster::FutureExt as _;

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The safetensors file, e.g. Hugging Face's gpt2 model.safetensors.
    file: PathBuf,
    /// Hugging Face's config.json, for the head count [default: config.json beside the file].
    #[arg(long)]
    config: Option<PathBuf>,
    /// The model's tokenizer: a tokenizer.json, or char / bpe:N trained on --data [default: tokenizer.json beside the
    /// file if there is one, else char].
    #[arg(long)]
    tokenizer: Option<TokenizerKind>,
    /// What the run trains on when it continues (in the app, or exported again).
    #[arg(long, default_value = "shakespeare")]
    data: DataSource,
    /// The recipe the run continues with (learning rate, schedule, batch).
    #[arg(long, default_value = "gpt2-small")]
    preset: Preset,
    /// The checkpoint to write [default: the file's path with .qkv].
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `explicit`, or `name` beside `file` when it exists there.
fn beside(file: &Path, explicit: Option<&PathBuf>, name: &str) -> Option<PathBuf> {
    explicit.cloned().or_else(|| Some(file.with_file_name(name)).filter(|path| path.exists()))
}

pub fn run(args: &ImportArgs) -> Result<(), Failure> {
    let name = args.file.display().to_string();
    let bytes = std::fs::read(&args.file).map_err(|e| format!("cannot read {name}: {e}"))?;
    let config_json = match beside(&args.file, args.config.as_ref(), "config.json") {
        Some(path) => Some(std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?),
        None => None,
    };
    let device = Device::flex();
    let (config, model) = from_safetensors(&bytes, &name, config_json.as_deref(), &device)?;

    let tokenizer = match &args.tokenizer {
        Some(kind) => kind.clone(),
        None => {
            beside(&args.file, None, "tokenizer.json").map_or(TokenizerKind::Char, |path| TokenizerKind::File(path.display().to_string()))
        }
    };
    let training = TrainingConfig::for_preset(args.preset).for_variant(config.attention.variant);
    training.validate()?;
    let dataset = Dataset::load(&args.data, &tokenizer, training.seed)?;
    if dataset.vocab_size() > config.vocab_size {
        return Err(format!(
            "{} tokenised with {tokenizer} has {} tokens, more than the model's {}: give the model's own tokenizer with --tokenizer \
             path/to/tokenizer.json",
            args.data,
            dataset.vocab_size(),
            config.vocab_size
        )
        .into());
    }
    let stem = args.file.file_stem().map_or("imported".into(), |s| s.to_string_lossy().into_owned());
    let spec = RunSpec { name: stem, model: config.clone(), training };
    let run = Run::starting_from(spec, qkv_model::Model::Gpt(model), &dataset, &device)?;
    let checkpoint = to_bytes(&run, &dataset, &args.data.to_string()).block_on()?;
    let out = args.out.clone().unwrap_or_else(|| args.file.with_extension("qkv"));
    write_atomically(&out, &checkpoint)?;
    println!(
        "wrote {}: {} ({} layers, {} heads, {} wide, context {}, vocabulary {}), tokenizer {tokenizer}, data {}",
        out.display(),
        config.attention.variant,
        config.n_layer,
        config.n_head,
        config.n_embd,
        config.block_size,
        config.vocab_size,
        args.data
    );
    Ok(())
}
