//! `qkv export`: a checkpoint's weights as safetensors with nanoGPT's names and PyTorch's shapes,
//! for PyTorch users (the names are listed in `qkv_train::export`).

use std::path::PathBuf;

use clap::Args;

use qkv_model::burn::tensor::Device;
use qkv_train::checkpoint::{Checkpoint, write_atomically};
use qkv_train::export::to_safetensors;

use crate::Failure;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Checkpoint written by `qkv train`, `qkv compare` or the app's export.
    #[arg(long)]
    checkpoint: PathBuf,
    /// The safetensors file to write [default: the checkpoint's path with .safetensors].
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: &ExportArgs) -> Result<(), Failure> {
    let checkpoint = Checkpoint::read(&args.checkpoint)?;
    // The config travels as metadata, so that a reader can rebuild the model around the weights.
    let config = serde_json::to_string(&checkpoint.header.spec.model)?;
    let model = checkpoint.into_model(&Device::flex())?;
    let bytes = to_safetensors(&model, &[("config", config)])?;
    let out = args.out.clone().unwrap_or_else(|| args.checkpoint.with_extension("safetensors"));
    write_atomically(&out, &bytes)?;
    println!("wrote {} ({} bytes)", out.display(), bytes.len());
    Ok(())
}
