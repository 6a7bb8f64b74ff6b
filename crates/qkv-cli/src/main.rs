//! `qkv`: QKV Lab from the command line.

mod params;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Params(args) => params::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
