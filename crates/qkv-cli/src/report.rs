//! What a finished comparison writes: metrics CSV, the markdown report and the loss plot.

use std::path::Path;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use qkv_model::{ModelDiagnostics, SymmetryMeasure};
use qkv_train::papers::PAPER2_KEY_VALUE_COSINE;
use qkv_train::{Metrics, Run};

use crate::Failure;
use crate::summary::RunSummary;

pub fn fmt_loss(loss: Option<f64>) -> String {
    loss.map_or("-".into(), |l| format!("{l:.4}"))
}

fn percent(value: f64, reference: f64) -> String {
    format!("{:+.2}%", 100.0 * (value - reference) / reference)
}

/// A run's best validation loss against the reference run's, in %.
fn best_loss_change(run: &RunSummary, reference: &RunSummary) -> String {
    match (run.best_val_loss, reference.best_val_loss) {
        (Some(v), Some(r)) => percent(v, r),
        _ => "-".into(),
    }
}

/// A share (an accuracy) as a percentage, "-" where there is none.
fn fmt_share(share: Option<f64>) -> String {
    share.map_or("-".into(), |v| format!("{:.2}%", 100.0 * v))
}

/// The comparison table in markdown; the first run is the reference for the Δ columns. Vision
/// runs (`images`) have no KV cache to count and one answer an image, so their table gives images
/// a second and the held-out accuracy instead.
pub fn summary_table(summaries: &[RunSummary], images: bool) -> String {
    if images {
        return image_table(summaries);
    }
    let reference = &summaries[0];
    let synthetic = summaries.iter().any(|s| s.accuracy.is_some());
    let mut out =
        String::from("| variant | params | Δparams | KV cache / token | final val loss | best val loss | Δloss (best) | tokens/s |");
    out += if synthetic { " accuracy | sequences right | status |\n" } else { " status |\n" };
    out += "|---|---:|---:|---:|---:|---:|---:|---:|";
    out += if synthetic { "---:|---:|---|\n" } else { "---|\n" };
    for s in summaries {
        out += &format!(
            "| {} | {:.3} M | {} | {} B | {} | {} | {} | {:.0} |",
            s.name,
            s.total_params as f64 / 1e6,
            percent(s.total_params as f64, reference.total_params as f64),
            s.kv_cache_bytes_per_token,
            fmt_loss(s.final_val_loss),
            fmt_loss(s.best_val_loss),
            best_loss_change(s, reference),
            s.tokens_per_sec
        );
        if synthetic {
            out += &format!(" {} | {} |", fmt_share(s.accuracy), fmt_share(s.sequence_accuracy));
        }
        out += &format!(" {} |\n", s.status);
    }
    out
}

fn image_table(summaries: &[RunSummary]) -> String {
    let reference = &summaries[0];
    let mut out = String::from(
        "| variant | params | Δparams | final val loss | best val loss | Δloss (best) | images/s | held-out accuracy | status |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for s in summaries {
        out += &format!(
            "| {} | {:.3} M | {} | {} | {} | {} | {:.0} | {} | {} |\n",
            s.name,
            s.total_params as f64 / 1e6,
            percent(s.total_params as f64, reference.total_params as f64),
            fmt_loss(s.final_val_loss),
            fmt_loss(s.best_val_loss),
            best_loss_change(s, reference),
            s.tokens_per_sec,
            fmt_share(s.accuracy),
            s.status
        );
    }
    out
}

/// The title and explanation of a report's diagnostics section, its logits measured on
/// validation `inputs` ("text", "images"), for runs whose diagnostics are `measured`.
pub fn diagnostics_heading<'a>(inputs: &str, measured: impl Iterator<Item = &'a ModelDiagnostics>) -> String {
    let content_form = measured.into_iter().any(|d| d.symmetry_measure() == SymmetryMeasure::ContentForm);
    let symmetry = if content_form {
        "the symmetric share of each head's content form (W_Q W_Kᵀ with the layer norm's gain) in a \
         decoder, whose softmax never sees a masked logit, and of the logits in an encoder (1 for \
         Q=K-V, about 0.5 for unrelated queries and keys)"
    } else {
        "the share of the logits' energy in their symmetric part (1: attention cannot tell i→j from j→i)"
    };
    format!(
        "## Attention diagnostics\n\n\
    Of the trained models, means over layers, logits measured on validation {inputs}: the cosine of \
    two projections' weights (paper 2 reports cos(W_K, W_V) = {PAPER2_KEY_VALUE_COSINE} in trained standard models), \
    which a change of basis that leaves every output as it is can move; the K/V overlap, how much \
    of the input each head's keys and values read in common, which it cannot (1: the same \
    subspace, head_dim / n_embd: chance); {symmetry} and the logits' root mean square. Definitions: \
    docs/diagnostics.md in QKV Lab."
    )
}

/// The symmetry column's heading: the measure the runs' diagnostics hold, named for what it is
/// (docs/diagnostics.md), or both where a report holds decoders and encoders.
pub fn symmetry_heading<'a>(measured: impl Iterator<Item = &'a ModelDiagnostics>) -> String {
    let mut names: Vec<&str> = Vec::new();
    for d in measured {
        let name = d.symmetry_measure().name();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    match names.as_slice() {
        [] => SymmetryMeasure::default().name().to_string(),
        [one] => (*one).to_string(),
        _ => "symmetry (decoders: content form; encoders: logits)".to_string(),
    }
}

/// The trained models' attention diagnostics in markdown, means over layers (over heads too for
/// the symmetry); `None` if no run has them.
pub fn diagnostics_table(summaries: &[RunSummary]) -> Option<String> {
    summaries.iter().find(|s| s.diagnostics.is_some())?;
    let figure = |value: Option<f64>| value.map_or("-".into(), |v| format!("{v:.3}"));
    let mut out = format!(
        "| variant | cos(W_K, W_V) | K/V overlap | cos(W_Q, W_K) | {} | logit RMS |\n|---|---:|---:|---:|---:|---:|\n",
        symmetry_heading(summaries.iter().filter_map(|s| s.diagnostics.as_ref()))
    );
    for s in summaries {
        let Some(d) = &s.diagnostics else {
            out += &format!("| {} | - | - | - | - | - |\n", s.name);
            continue;
        };
        out += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            s.name,
            figure(d.mean(|l| l.key_value_cosine)),
            figure(d.mean(|l| l.key_value_overlap)),
            figure(d.mean(|l| l.query_key_cosine)),
            figure(d.mean_symmetry()),
            figure(d.mean(|l| Some(l.logit_rms)))
        );
    }
    Some(out)
}

pub struct ReportContext {
    pub command: String,
    pub backend: String,
    pub data: String,
    pub wall_secs: f64,
    /// The runs are vision transformers.
    pub images: bool,
}

pub fn report_markdown(summaries: &[RunSummary], context: &ReportContext) -> String {
    let inputs = if context.images { "images" } else { "text" };
    let diagnostics = diagnostics_table(summaries).map_or(String::new(), |table| {
        format!("\n{}\n\n{table}", diagnostics_heading(inputs, summaries.iter().filter_map(|s| s.diagnostics.as_ref())))
    });
    format!(
        "# QKV Lab comparison\n\n\
         - command: `{}`\n- data: {}\n- backend: {}\n- wall time: {:.1} s\n\n\
         Every variant trained on the same batches in the same order. Δ columns are relative to \
         the first variant ({}); Δloss compares the best validation losses.\n\n{}\n\
         ![loss curves](loss.svg)\n{}",
        context.command,
        context.data,
        context.backend,
        context.wall_secs,
        summaries[0].name,
        summary_table(summaries, context.images),
        diagnostics
    )
}

/// What the loss plot draws of a run: kept after the run itself is gone, so that a report can
/// be drawn from a finished seed's results without its checkpoints. Single precision is plenty
/// for a plot and halves the size of the results files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossCurve {
    pub name: String,
    /// (step, training loss) at every step.
    pub train: Vec<(usize, f32)>,
    /// (step, validation loss) at every evaluation.
    pub val: Vec<(usize, f32)>,
}

impl LossCurve {
    pub fn of(run: &Run) -> Self {
        Self::new(&run.spec.name, &run.metrics)
    }

    /// Only finite points: a diverged run's NaN would not survive JSON (it becomes null), and
    /// the plot leaves such points out anyway.
    pub fn new(name: &str, metrics: &Metrics) -> Self {
        let finite = |&(_, loss): &(usize, f32)| loss.is_finite();
        Self {
            name: name.to_string(),
            train: metrics.steps.iter().map(|s| (s.step, s.train_loss as f32)).filter(finite).collect(),
            val: metrics.evals.iter().map(|e| (e.step, e.val_loss as f32)).filter(finite).collect(),
        }
    }
}

/// (step, loss) points of one curve, as the plot takes them.
type Points = Vec<(f64, f64)>;

/// Train (thin, smoothed) and validation (thick) loss against step, one colour per run.
pub fn loss_svg(curves: &[LossCurve], path: &Path) -> Result<(), Failure> {
    let failed = |e: String| format!("cannot draw {}: {e}", path.display());
    let smooth = |values: &[(f64, f64)]| -> Points {
        // Exponential moving average: single-batch losses are noisy.
        let mut average = None;
        values
            .iter()
            .map(|&(x, y)| {
                let a = average.map_or(y, |a: f64| 0.9 * a + 0.1 * y);
                average = Some(a);
                (x, a)
            })
            .collect()
    };
    let curves: Vec<(String, Points, Points)> = curves
        .iter()
        .map(|curve| {
            let train: Points = curve.train.iter().map(|&(step, loss)| (step as f64, f64::from(loss))).collect();
            let val = curve.val.iter().map(|&(step, loss)| (step as f64, f64::from(loss))).collect();
            (curve.name.clone(), smooth(&train), val)
        })
        .collect();
    let finite = |p: &&(f64, f64)| p.1.is_finite();
    let all: Vec<(f64, f64)> = curves.iter().flat_map(|c| c.1.iter().chain(&c.2)).filter(finite).copied().collect();
    let max_x = all.iter().map(|p| p.0).fold(1.0, f64::max);
    let (min_y, max_y) = all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let (min_y, max_y) = if min_y.is_finite() { (min_y * 0.95, max_y * 1.02) } else { (0.0, 1.0) };

    let root = SVGBackend::new(path, (960, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("loss (thin: train, smoothed; thick: validation)", ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..max_x, min_y..max_y)
        .map_err(|e| failed(e.to_string()))?;
    chart.configure_mesh().x_desc("step").y_desc("loss").draw().map_err(|e| failed(e.to_string()))?;
    for (index, (name, train, val)) in curves.into_iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        chart
            .draw_series(LineSeries::new(train.into_iter().filter(|p| p.1.is_finite()), color.stroke_width(1)))
            .map_err(|e| failed(e.to_string()))?;
        chart
            .draw_series(LineSeries::new(val.into_iter().filter(|p| p.1.is_finite()), color.stroke_width(3)))
            .map_err(|e| failed(e.to_string()))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw().map_err(|e| failed(e.to_string()))?;
    root.present().map_err(|e| failed(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use qkv_model::{AttentionVariant, LayerDiagnostics, ModelDiagnostics};
    use qkv_train::{RunStatus, StepRecord};

    use super::*;

    fn summary(name: &str, diagnostics: Option<ModelDiagnostics>) -> RunSummary {
        RunSummary {
            variant: AttentionVariant::Standard,
            name: name.into(),
            steps: 10,
            tokens: 640,
            final_train_loss: Some(2.0),
            final_val_loss: Some(2.1),
            best_val_loss: Some(2.1),
            tokens_per_sec: 1000.0,
            wall_secs: 0.64,
            total_params: 1000,
            kv_cache_bytes_per_token: 64,
            accuracy: None,
            sequence_accuracy: None,
            test_loss: None,
            test_accuracy: None,
            status: RunStatus::Finished,
            diagnostics,
        }
    }

    fn layer(key_value_cosine: Option<f64>, query_key_cosine: Option<f64>, symmetry: Vec<f64>, logit_rms: f64) -> LayerDiagnostics {
        // The overlap as half the cosine: a figure of its own column.
        let key_value_overlap = key_value_cosine.map(|c| c / 2.0);
        LayerDiagnostics {
            key_value_cosine,
            key_value_overlap,
            query_key_cosine,
            effective_ranks: vec![],
            symmetry,
            symmetry_measure: SymmetryMeasure::EveryLogit,
            positional_share: vec![],
            logit_rms,
        }
    }

    #[test]
    fn the_diagnostics_table_gives_means_over_layers_and_dashes_for_what_a_run_lacks() {
        let standard = ModelDiagnostics {
            layers: vec![layer(Some(0.5), Some(0.1), vec![0.5, 0.7], 2.0), layer(Some(0.7), Some(0.3), vec![0.6, 0.6], 4.0)],
        };
        let shared = ModelDiagnostics { layers: vec![layer(None, None, vec![1.0, 1.0], 1.5)] };
        let summaries = [summary("standard", Some(standard)), summary("shared-qk", Some(shared)), summary("old", None)];
        let table = diagnostics_table(&summaries).unwrap();
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(
            rows,
            [
                "| standard | 0.600 | 0.300 | 0.200 | 0.600 | 3.000 |",
                "| shared-qk | - | - | - | 1.000 | 1.500 |",
                "| old | - | - | - | - | - |"
            ]
        );
        let mut context =
            ReportContext { command: "qkv compare".into(), backend: "flex".into(), data: "text".into(), wall_secs: 1.0, images: false };
        assert!(report_markdown(&summaries, &context).contains("## Attention diagnostics"));
        assert!(!report_markdown(&summaries[2..], &context).contains("diagnostics"), "no section without figures");

        // Vision runs: no KV cache column, their held-out accuracy, logits on images.
        context.images = true;
        let mut vision = summaries.clone();
        vision[0].accuracy = Some(0.9866);
        let markdown = report_markdown(&vision, &context);
        assert!(markdown.contains("| images/s | held-out accuracy |") && markdown.contains("| 98.66% |"), "{markdown}");
        assert!(!markdown.contains("KV cache") && markdown.contains("measured on validation images"), "{markdown}");
    }

    #[test]
    fn summaries_written_before_diagnostics_still_read() {
        let mut json: serde_json::Value = serde_json::to_value(summary("old", None)).unwrap();
        assert!(json.get("diagnostics").is_none(), "absent, not null");
        json.as_object_mut().unwrap().remove("diagnostics");
        assert_eq!(serde_json::from_value::<RunSummary>(json).unwrap(), summary("old", None));
    }

    #[test]
    fn a_diverged_runs_curve_survives_json() {
        let step = |step: usize, train_loss: f64| StepRecord {
            step,
            train_loss,
            lr: 1e-3,
            grad_norm: 1.0,
            tokens: 64 * step,
            tokens_per_sec: 1000.0,
            wall_secs: 0.1 * step as f64,
        };
        let metrics = Metrics { steps: vec![step(1, 4.2), step(2, 3.9), step(3, f64::NAN)], evals: Vec::new() };
        let curve = LossCurve::new("diverged", &metrics);
        assert_eq!(curve.train, vec![(1, 4.2), (2, 3.9)]);
        let json = serde_json::to_string(&curve).unwrap();
        assert_eq!(serde_json::from_str::<LossCurve>(&json).unwrap(), curve);
    }
}
