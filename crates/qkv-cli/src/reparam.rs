//! `qkv reparam`: train a standard model, eliminate its W_Q by a change of basis (paper 1's
//! theory), and show that the converted model computes the same logits with fewer parameters.

use clap::Args;

use crate::Failure;
use crate::train::{headless_session, started_or_failed};
use pollster::FutureExt as _;
use qkv_compute::Compute;
use qkv_model::Preset;
use qkv_model::burn::module::Module;
use qkv_session::{Command, Message, Session};
use qkv_train::experiment::Experiment;
use qkv_train::recipe::TrainingConfig;
use qkv_train::run::RunSpec;
use qkv_train::theory::{ReparamReport, TheoryCase, continue_converted, convert_and_measure};
use qkv_train::{DataSource, Dataset, RunEvent, TokenizerKind};

#[derive(Args, Debug)]
pub struct ReparamArgs {
    /// Architecture preset; the case then removes its normalisation, MLP skip or layer count as needed.
    #[arg(long, default_value = "theory")]
    pub preset: Preset,
    /// Training steps before the conversion.
    #[arg(long, default_value_t = 300)]
    pub steps: usize,
    /// single (one layer), no-mlp-skip (one Θ per layer), shared (shared layers, one Θ), deep
    /// (skips around attention and MLP: the middle layer's W_Q, the whole stream in its basis), or
    /// layernorm (the approximate mode: keys and values exact, the query approximate).
    #[arg(long, default_value = "single")]
    pub case: TheoryCase,
    /// Fine-tuning steps after an approximate conversion, to show the recovery.
    #[arg(long, default_value_t = 100)]
    pub finetune: usize,
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long)]
    pub json: bool,
}

/// `steps` steps of the session's run, reporting progress (counted from `offset`) every 50.
fn step_with_progress(session: &mut Session, label: &str, offset: usize, steps: usize) -> Result<(), Failure> {
    for _ in 0..steps {
        let messages = session.handle(Command::Step).block_on();
        for message in &messages {
            match message {
                Message::Run(RunEvent::Stepped { record, .. }) => {
                    let step = record.step - offset;
                    if step.is_multiple_of(50) || step == steps {
                        eprintln!("{label} step {step}/{steps}: loss {:.4}", record.train_loss);
                    }
                }
                Message::Run(RunEvent::Stopped { error, .. }) | Message::Failed(error) => {
                    return Err(format!("{label} failed: {error}").into());
                }
                _ => {}
            }
        }
    }
    Ok(())
}

pub fn run(args: &ReparamArgs) -> Result<(), Failure> {
    if args.steps == 0 {
        return Err(crate::usage("--steps must be at least 1: the conversion needs a trained model"));
    }
    let mut training = TrainingConfig::for_preset(args.preset);
    training.steps = args.steps + args.finetune;
    training.decay_steps = training.steps;
    training.warmup_steps = training.warmup_steps.min(args.steps / 10);
    training.eval_interval = training.steps;
    if let Some(seed) = args.seed {
        training.seed = seed;
    }
    let dataset = Dataset::load(&DataSource::Shakespeare, &TokenizerKind::Char, training.seed)?;
    let model = args.case.config(args.preset, dataset.vocab_size());
    model.validate()?;
    let spec = RunSpec { name: "standard".into(), model, training };
    let compute = Compute::cpu();
    let device = compute.home.clone();
    let mut session = headless_session(&compute);
    started_or_failed(session.start(Experiment::new(dataset.clone(), vec![spec], &device)?, DataSource::Shakespeare).block_on())?;
    step_with_progress(&mut session, "train", 0, args.steps)?;
    let experiment = session.experiment().expect("trained");
    let trained = &experiment.runs[0];
    let (conversion, mut report) = convert_and_measure(args.case, trained, &trained.model().valid(), experiment.val_batches())?;
    if !args.case.is_exact() && args.finetune > 0 {
        let converted = continue_converted(trained, conversion, "converted", &dataset)?;
        started_or_failed(session.start(Experiment::from_runs(dataset, vec![converted])?, DataSource::Shakespeare).block_on())?;
        step_with_progress(&mut session, "fine-tune", args.steps, args.finetune)?;
        let mut finetune = session.into_experiment().expect("fine-tuned");
        let val = finetune.val_batches().to_vec();
        let eval = finetune.runs[0].evaluate(&val).block_on()?;
        report.finetune_steps = Some(args.finetune);
        report.val_loss_after_finetune = Some(eval.val_loss);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", text(&report));
    }
    Ok(())
}

fn text(r: &ReparamReport) -> String {
    let mut out = format!(
        "case {} ({}): standard model trained {} steps, then {}\n",
        r.case,
        if r.exact { "exact" } else { "approximate: LayerNorm" },
        r.steps,
        match r.layer {
            Some(layer) => format!("layer {layer}'s W_Q eliminated (stored as I: the other layers keep theirs)"),
            None => "W_Q eliminated".into(),
        }
    );
    out += &format!(
        "parameters        {} → {} ({:+.2}%)\n",
        r.params_before,
        r.params_after,
        100.0 * (r.params_after as f64 - r.params_before as f64) / r.params_before as f64
    );
    let conditions: Vec<String> = r.condition_numbers.iter().map(|c| format!("{c:.1}")).collect();
    out += &format!("cond₁(W_Q)        {}\n", conditions.join(", "));
    out += &format!("max |Δ logit|     {:.3e} (mean {:.3e}) on the val batches\n", r.max_abs_logit_diff, r.mean_abs_logit_diff);
    out += &format!("val loss          {:.4} → {:.4}\n", r.val_loss_before, r.val_loss_after);
    if let Some(plain) = &r.without_fit {
        out += &format!(
            "without the fit   {:.4} (max |Δ logit| {:.3e}): each head's basis fitted first brings W_Q nearer the identity\n",
            plain.val_loss_after, plain.max_abs_logit_diff
        );
    }
    if let (Some(steps), Some(loss)) = (r.finetune_steps, r.val_loss_after_finetune) {
        out += &format!("after fine-tune   {loss:.4} ({steps} steps)\n");
    }
    out
}
