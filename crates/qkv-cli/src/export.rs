//! `qkv export`: a checkpoint's weights as safetensors for PyTorch users, with nanoGPT's names
//! (listed in `qkv_train::pytorch`) and Hugging Face's `config.json` beside them.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use qkv_model::burn::tensor::Device;
use qkv_train::checkpoint::{Checkpoint, write_atomically};
use qkv_train::pytorch::{Layout, gpt2_config_json, to_safetensors};

use crate::Failure;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Checkpoint written by `qkv train`, `qkv compare`, `qkv import` or the app's export.
    #[arg(long)]
    checkpoint: PathBuf,
    /// The file format.
    #[arg(long, value_enum, default_value = "safetensors")]
    format: Format,
    /// How projections are stored: nanogpt (nn.Linear, [out, in]) or huggingface (GPT-2's Conv1D, [in, out]).
    #[arg(long, value_enum, default_value = "nanogpt")]
    layout: LayoutArg,
    /// The safetensors file to write [default: the checkpoint's path with .safetensors]; config.json goes beside it.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Safetensors,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LayoutArg {
    Nanogpt,
    Huggingface,
}

pub fn run(args: &ExportArgs) -> Result<(), Failure> {
    let Format::Safetensors = args.format;
    let layout = match args.layout {
        LayoutArg::Nanogpt => Layout::NanoGpt,
        LayoutArg::Huggingface => Layout::HuggingFace,
    };
    let checkpoint = Checkpoint::read(&args.checkpoint)?;
    if checkpoint.header.spec.model.is_vision() {
        return Err(crate::usage(format!(
            "{} holds a vision transformer: nanoGPT's and Hugging Face's GPT-2 layouts have no place for its patch embedding, class token and class head, so `qkv export` writes GPTs only",
            args.checkpoint.display()
        )));
    }
    let config = checkpoint.header.spec.model.clone();
    let model = checkpoint.into_model(&Device::flex())?;
    let bytes = to_safetensors(&model.into_gpt()?, &config, layout)?;
    let out = args.out.clone().unwrap_or_else(|| args.checkpoint.with_extension("safetensors"));
    if let Some(folder) = out.parent().filter(|folder| !folder.as_os_str().is_empty()) {
        std::fs::create_dir_all(folder).map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
    }
    write_atomically(&out, &bytes)?;
    let config_path = out.with_file_name("config.json");
    write_atomically(&config_path, serde_json::to_string_pretty(&gpt2_config_json(&config))?.as_bytes())?;
    println!("wrote {} ({} bytes, {layout} layout) and {}", out.display(), bytes.len(), config_path.display());
    Ok(())
}
