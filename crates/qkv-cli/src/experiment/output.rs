//! What `qkv experiment` writes besides the checkpoints: results.csv, the loss plots and the
//! report's frame (how it was made, with the body the findings give).

use std::path::Path;

use qkv_train::csv;

use super::catalogue::Study;
use super::findings::{diagnostics_section, pooled_diagnostics_section};
use super::seeds::Outcome;
use super::{ExperimentArgs, ExperimentKind, Settings, Trained};
use crate::Failure;
use crate::report::LossCurve;

/// Now, to the minute, as the reports write it: "2026-11-30 09:55 UTC".
pub(super) fn utc_date() -> String {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // "2026-11-30T09:55:12Z": the date, then hours and minutes.
    format!("{} {} UTC", &stamp[..10], &stamp[11..16])
}

/// results.csv: one row per run and seed, with the steps it trained and the tokens it saw (the
/// training budget's table reads them). Studies scored on a test split (images with one) end
/// their rows with the test loss and accuracy; the other reports' files keep their columns.
pub(super) fn results_csv(outcomes: &[Outcome]) -> String {
    let tested = outcomes.iter().any(|o| o.summary.test_accuracy.is_some());
    let mut header = vec![
        "study",
        "run",
        "seed",
        "variant",
        "kv_heads",
        "weight_decay",
        "total_params",
        "kv_cache_bytes_per_token",
        "final_val_loss",
        "best_val_loss",
        "accuracy",
        "sequence_accuracy",
        "steps_to_99pct",
        "symmetry",
        "status",
        "steps",
        "tokens",
    ];
    if tested {
        header.extend(["test_loss", "test_accuracy"]);
    }
    let rows = outcomes.iter().map(|o| {
        let mut row = vec![
            o.study.clone(),
            o.summary.name.clone(),
            o.seed.to_string(),
            o.summary.variant.to_string(),
            o.kv_heads.map_or(String::new(), |k| k.to_string()),
            o.weight_decay.to_string(),
            o.summary.total_params.to_string(),
            o.summary.kv_cache_bytes_per_token.to_string(),
            csv::optional(o.summary.final_val_loss),
            csv::optional(o.summary.best_val_loss),
            csv::optional(o.summary.accuracy),
            csv::optional(o.summary.sequence_accuracy),
            o.steps_to_learn().map_or(String::new(), |step| step.to_string()),
            csv::optional(o.symmetry()),
            o.summary.status.to_string(),
            o.summary.steps.to_string(),
            o.summary.tokens.to_string(),
        ];
        if tested {
            row.extend([csv::optional(o.summary.test_loss), csv::optional(o.summary.test_accuracy)]);
        }
        row
    });
    csv::table(&header, rows)
}

/// loss-STUDY.svg for each of `studies` (its first seed's curves); returns the report's links to
/// them.
pub(super) fn loss_plots(studies: &[&Study], outcomes: &[Outcome], out: &Path) -> Result<String, Failure> {
    let mut plots = String::new();
    for study in studies {
        let first_seed = study.plan.seed();
        let curves: Vec<LossCurve> =
            outcomes.iter().filter(|o| o.study == study.name && o.seed == first_seed).map(|o| o.curve.clone()).collect();
        let file = format!("loss-{}.svg", study.name);
        crate::report::loss_svg(&curves, &out.join(&file))?;
        plots += &format!("\n![{} loss curves, first seed]({file})\n", study.name);
    }
    Ok(plots)
}

/// report.md: how the study was made, the paper's findings, the plots, the diagnostics.
pub(super) fn report_markdown(
    args: &ExperimentArgs,
    invocation: &str,
    settings: &Settings,
    trained: &Trained,
    body: &str,
    plots: &str,
) -> String {
    let Trained { studies, outcomes, provenance, wall_secs, training_secs } = trained;
    let (paper, scale, compute) = (args.paper.name(), &settings.scale, settings.compute.describe());
    let seeds = match studies.iter().find(|study| study.seeds(settings.seeds) != settings.seeds) {
        Some(study) => format!("{} seeds ({} for the {} study)", settings.seeds, study.seeds(settings.seeds), study.name),
        None => format!("{} seeds", settings.seeds),
    };
    let preset = studies[0].plan.preset;
    let inputs = if args.paper == ExperimentKind::Paper2Vision { "images" } else { "text" };
    let diagnostics = match args.paper {
        ExperimentKind::Paper2Synthetic => pooled_diagnostics_section(&super::sweep::by_task(outcomes, studies), inputs),
        _ => diagnostics_section(outcomes, inputs),
    };
    let heads = studies[0].plan.model.n_head.filter(|_| args.paper == ExperimentKind::Paper2).map_or(String::new(), |n| {
        format!(" with {n} heads (d_k {}) so that GQA can share key/value heads 4 to 1 as paper 2 does", preset.config().n_embd / n)
    });
    // A study whose ViT reads overlapping windows says so beside the preset's disjoint patches.
    let overlaps: String = studies
        .iter()
        .filter_map(|study| study.plan.model.patch_overlap.filter(|&o| o > 0).map(|o| (study, o)))
        .map(|(study, o)| {
            let window = preset.config().image.map_or(0, |image| qkv_model::ImageInput { overlap: o, ..image }.window());
            let heads = study.plan.model.n_head.map_or(String::new(), |n| format!("{n} heads (d_k {}), and ", preset.config().n_embd / n));
            format!(
                "; in the {} study {heads}each patch's token reads the {window}×{window} window around its patch ({o} pixel{} beyond it each way, zeros past the image's edge)",
                study.name,
                if o == 1 { "" } else { "s" }
            )
        })
        .collect();
    let model = match super::sweep::grid_description(studies).filter(|_| args.paper == ExperimentKind::Paper2Synthetic) {
        Some(grid) => format!("the {} preset resized for each setting: {grid}", preset.name()),
        None => format!("{} ({}){heads}{overlaps}", preset.name(), preset.description()),
    };
    format!(
        "# QKV Lab: {paper} at {scale} scale\n\n\
         - command: `{invocation}`\n- date: {}\n- backend: {compute}\n- wall time: {wall_secs:.0} s this invocation (finished seeds are reported from seeds/, not trained again); {training_secs:.0} s of training in all (the runs' own clocks, across resumes)\n\
         - model: {model}, {seeds}; every run of a seed trains on the same batches and starts every tensor it has in common with another run (same name and shape) from the same values, and every seed is validated on the same batches\n\
         - recompute: `python3 scripts/recompute.py {}` (in QKV Lab's repository) rebuilds this report's tables from results.csv alone and checks them against this file\n\n\
         Losses are mean ± standard deviation over seeds of each run's validation loss.\n\n{body}\n{plots}\n{diagnostics}\
         ## Seeds\n\nEach seed's results are in `seeds/`; a rerun reports a finished seed from there.\n\n{provenance}",
        utc_date(),
        settings.out.display(),
    )
}
