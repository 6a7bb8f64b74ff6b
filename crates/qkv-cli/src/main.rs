//! `qkv`: QKV Lab from the command line.

mod bench;
mod compute;
mod experiment;
mod export;
mod failure;
mod import;
mod inspect;
mod interrupt;
mod params;
mod play;
mod reparam;
mod report;
mod sample;
mod serve;
mod summary;
mod train;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use failure::{Failure, Usage, usage};

/// Training allocates and frees the same large tensors every step; see `qkv_allocator`.
#[global_allocator]
static ALLOCATOR: qkv_allocator::Allocator = qkv_allocator::Allocator;

#[derive(Parser)]
#[command(name = "qkv", version, about = "QKV Lab: train and compare attention variants (does a transformer need W_Q?)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Count parameters per component and KV-cache bytes, for one variant or all side by side.
    Params(params::ParamsArgs),
    /// Train one variant; writes metrics.csv, summary.json and checkpoint.qkv.
    Train(train::TrainCommand),
    /// Train several variants on identical batches; writes report.md, loss.svg, metrics and checkpoints.
    Compare(train::CompareCommand),
    /// Continue a stopped `train` or `compare` from its folder's checkpoints, to the same losses.
    Resume(train::ResumeCommand),
    /// Generate text from a checkpoint.
    Sample(sample::SampleArgs),
    /// Show a checkpoint's model: its shape, exact parameter and KV-cache counts, and its attention diagnostics.
    Inspect(inspect::InspectArgs),
    /// Measure training and generation throughput per variant.
    Bench(bench::BenchArgs),
    /// Train a standard model, eliminate its W_Q by a change of basis, compare logits and loss.
    Reparam(reparam::ReparamArgs),
    /// Write a checkpoint's weights as safetensors for PyTorch (nanoGPT's names; Hugging Face's config.json beside).
    Export(export::ExportArgs),
    /// Read a GPT-2-layout safetensors file (Hugging Face's gpt2, a nanoGPT export) into a QKV Lab checkpoint.
    Import(import::ImportArgs),
    /// Lend this machine's devices to runs elsewhere (`--remote ws://HOST:PORT`); needs `--features remote`.
    Serve(serve::ServeArgs),
    /// Reproduce a paper's comparison (paper1: W_Q = I; paper2: shared projections, GQA/MQA) with a report.
    Experiment(experiment::ExperimentArgs),
}

fn main() -> ExitCode {
    qkv_allocator::keep_freed_pages();
    let cli = Cli::parse();
    // Reports quote this command, and they are read on other machines: the program is named
    // by its file name, not by the path it was started from on this one.
    let mut args = std::env::args();
    let program = args.next().map(|path| program_name(&path)).unwrap_or_else(|| "qkv".into());
    let invocation = std::iter::once(program).chain(args).collect::<Vec<_>>().join(" ");
    match run(&cli.command, &invocation) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => match failure.downcast_ref::<interrupt::Interrupted>() {
            // Stopped by a signal: not an error, and the run so far is kept.
            Some(stopped) => {
                eprintln!("qkv: {stopped}");
                ExitCode::from(stopped.signal.exit_code())
            }
            None => {
                eprintln!("{}", failure::report(failure.as_ref()));
                ExitCode::from(failure::exit_code(&failure))
            }
        },
    }
}

/// `command`, quoted in reports as `invocation`.
fn run(command: &Command, invocation: &str) -> Result<(), Failure> {
    // A setting the GPU path reads later, checked before any work: a typo is an error, not a timing.
    qkv_kernels::product_from_env()?;
    match command {
        Command::Params(args) => params::run(args),
        Command::Train(command) => train::run_train(command),
        Command::Compare(command) => train::run_compare(command, invocation),
        Command::Resume(command) => train::run_resume(command, invocation),
        Command::Sample(args) => sample::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Reparam(args) => reparam::run(args),
        Command::Export(args) => export::run(args),
        Command::Import(args) => import::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Experiment(args) => experiment::run(args, invocation),
    }
}

/// `path`'s file name (`qkv` for `target/release/qkv`), or `path` itself when it has none.
fn program_name(path: &str) -> String {
    std::path::Path::new(path).file_name().map_or_else(|| path.to_owned(), |name| name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::program_name;

    #[test]
    fn reports_name_the_program_not_the_path_it_ran_from() {
        assert_eq!(program_name("/root/.cache/target/debug/qkv"), "qkv");
        assert_eq!(program_name("qkv"), "qkv");
        assert_eq!(program_name("/"), "/");
    }
}
