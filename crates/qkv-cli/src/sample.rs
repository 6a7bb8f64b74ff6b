//! `qkv sample`: continue a prompt with a trained checkpoint.

use std::path::PathBuf;

use clap::Args;

use qkv_train::checkpoint::Checkpoint;
use qkv_train::generate::{SampleOptions, answer_list, generate};
use qkv_train::synthetic::SEP;

use crate::Failure;
use crate::compute::Backend;
use pollster::FutureExt as _;

#[derive(Args, Debug)]
pub struct SampleArgs {
    /// Checkpoint written by `qkv train` or `qkv compare`.
    #[arg(long)]
    checkpoint: PathBuf,
    /// Text to continue (digits for a synthetic-task checkpoint; token ids for one trained on token files without a
    /// tokenizer) [default: a new line, or token 0].
    #[arg(long)]
    prompt: Option<String>,
    /// Tokens to generate.
    #[arg(long, default_value_t = 300)]
    tokens: usize,
    /// Sampling temperature; 0 always picks the most likely token.
    #[arg(long, default_value_t = 0.8)]
    temperature: f64,
    /// Sample among the k most likely tokens.
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    #[arg(long, default_value_t = 1337)]
    seed: u64,
    #[arg(long, default_value = "flex")]
    backend: Backend,
}

/// What a synthetic-task model reads when given no prompt: a list of digits (π's).
pub(crate) const DIGITS: &str = "3141592653589793";

/// A synthetic-task model's tokens for `text`, which are its digits; the first character that is
/// not one, where there is one.
pub(crate) fn digit_tokens(text: &str) -> Result<Vec<u32>, char> {
    text.chars().map(|c| c.to_digit(10).ok_or(c)).collect()
}

pub fn run(args: &SampleArgs) -> Result<(), Failure> {
    if !(args.temperature.is_finite() && args.temperature >= 0.0) {
        return Err(crate::usage(format!("--temperature {} must be ≥ 0", args.temperature)));
    }
    let checkpoint = Checkpoint::read(&args.checkpoint)?;
    if checkpoint.header.spec.model.is_vision() {
        return Err(crate::usage(format!(
            "{} holds a vision transformer: it classifies images and continues no text. Its held-out accuracy is in the summary.json beside it; `qkv sample` takes a GPT's checkpoint",
            args.checkpoint.display()
        )));
    }
    let tokenizer = checkpoint.header.tokenizer.clone();
    let device = pollster::block_on(args.backend.device())?;
    let model = checkpoint.into_model(&device)?.into_gpt()?;
    let options = SampleOptions {
        max_new_tokens: args.tokens,
        temperature: args.temperature,
        top_k: Some(args.top_k),
        seed: args.seed,
        use_cache: true,
    };
    match tokenizer {
        Some(tokenizer) => {
            let prompt = args.prompt.clone().unwrap_or_else(|| tokenizer.default_prompt().into());
            let ids = tokenizer.encode(&prompt)?;
            let generation = generate(&model, &ids, &options).block_on()?;
            println!("{}", tokenizer.continued(&prompt, &generation.tokens));
        }
        None => {
            // A synthetic-task model: digits in, the model's answer out.
            let prompt = args.prompt.clone().unwrap_or_else(|| DIGITS.into());
            let ids = digit_tokens(&prompt).map_err(|c| format!("a synthetic-task prompt is digits only; '{c}' is not a digit"))?;
            let answer = answer_list(&model, &ids).block_on()?;
            let answer: String = answer.iter().map(|&t| if t == SEP { '|' } else { char::from(b'0' + t as u8) }).collect();
            println!("{prompt} → {answer}");
        }
    }
    Ok(())
}
