//! The live verdict beside the loss chart: each run against the reference run (the first
//! standard one, as the cost columns have it), in the one measure its data is judged by
//! (validation loss for text, accuracy for a synthetic task or images), next to the paper's
//! figure for the same comparison in the same measure (`qkv_train::papers`, docs/papers.md), so a
//! class sees how a toy compares with the papers' models.

use egui::Color32;
use qkv_model::AttentionVariant;
use qkv_train::EvalRecord;
use qkv_train::papers::{PAPER1_SOURCE, PAPER2_SOURCE, paper2_loss_change, paper2_name};

use crate::view::{RunView, SessionView};

/// What the runs are judged by: one measure per data, the same in a lesson's text, its verdict
/// and the paper line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Text: the change in validation loss, in percent (lower is better).
    ValidationLoss,
    /// A synthetic task: the share of answers right, in points (higher is better).
    Accuracy,
    /// Images: the share of held-out images classified right, in points.
    HeldOutAccuracy,
}

impl Measure {
    /// The measure `view`'s runs are judged by.
    pub fn of(view: &SessionView) -> Self {
        let runs = &view.runs;
        if runs.first().is_some_and(|run| run.info.spec.model.is_vision()) {
            Measure::HeldOutAccuracy
        } else if runs.iter().any(|run| run.evals.iter().any(|e| e.accuracy.is_some())) {
            Measure::Accuracy
        } else {
            Measure::ValidationLoss
        }
    }

    /// `ours` against `theirs`: a relative change of the loss, or a difference of accuracies
    /// (both as fractions: 0.05 is +5% or +5 points).
    fn change(self, ours: &EvalRecord, theirs: &EvalRecord) -> Option<f64> {
        let change = match self {
            Measure::ValidationLoss => ours.val_loss / theirs.val_loss - 1.0,
            Measure::Accuracy | Measure::HeldOutAccuracy => ours.accuracy? - theirs.accuracy?,
        };
        change.is_finite().then_some(change)
    }

    /// A change as the verdict writes it.
    pub fn format(self, change: f64) -> String {
        match self {
            Measure::ValidationLoss => format!("{:+.1}%", 100.0 * change),
            Measure::Accuracy | Measure::HeldOutAccuracy => format!("{:+.1} points", 100.0 * change),
        }
    }

    /// The verdict's heading: the measure, its baseline and which way is better.
    fn heading(self, reference: &str) -> String {
        match self {
            Measure::ValidationLoss => format!("validation loss against {reference} (lower is better)"),
            Measure::Accuracy => format!("accuracy against {reference}, in points (higher is better)"),
            Measure::HeldOutAccuracy => format!("held-out accuracy against {reference}, in points (higher is better)"),
        }
    }
}

/// One run's line of the verdict, in its colour.
pub struct VerdictLine {
    pub colour: Color32,
    /// The run's label (the papers' notation) and its name (the command line's, on hover).
    pub run: String,
    pub name: String,
    /// Its change against the reference in the verdict's measure, as a fraction.
    pub change: f64,
    /// The step both were last evaluated at.
    pub step: usize,
    /// The paper's figure for the same comparison in the same measure, and where it comes from.
    pub paper: Option<(String, String)>,
}

/// Every run against the reference, in one measure.
pub struct Verdict {
    pub measure: Measure,
    /// The reference run's label.
    pub reference: String,
    pub lines: Vec<VerdictLine>,
}

impl Verdict {
    pub fn heading(&self) -> String {
        self.measure.heading(&self.reference)
    }
}

/// What the papers report for `run` against `reference`, in validation loss, where they report
/// that comparison: (the figure, its source).
fn paper_figure(run: &RunView, reference: &RunView, measure: Measure) -> Option<(String, String)> {
    fn model(run: &RunView) -> &qkv_model::ModelConfig {
        &run.info.spec.model
    }
    let full_heads = |r: &RunView| model(r).attention.shared_kv_heads(model(r).n_head).is_none();
    // The papers trained each variant at its own scale: a run with another (a model converted
    // from a trained one keeps the original's) is not their comparison.
    let own_scale = |r: &RunView| model(r).attention.scale.is_none();
    if !reference.is_standard() || !own_scale(run) || !own_scale(reference) {
        return None;
    }
    let variant = model(run).attention.variant;
    match measure {
        // The papers' figures are of language models; on vision paper 2 reports one finding.
        Measure::HeldOutAccuracy => (variant == AttentionVariant::SharedKeyValue && full_heads(run))
            .then(|| ("paper 2: competitive".to_string(), format!("{PAPER2_SOURCE}; on vision it reports Q-K=V as competitive"))),
        // Neither paper reports these toy tasks' accuracy.
        Measure::Accuracy => None,
        Measure::ValidationLoss if variant == AttentionVariant::QueryIdentity && full_heads(run) => {
            Some(("paper 1: on par".to_string(), format!("{PAPER1_SOURCE}: on par with the original in validation loss")))
        }
        Measure::ValidationLoss => {
            let (name, change) = paper2_loss_change(paper2_name(&model(run).attention, model(run).n_head)?)?;
            let source =
                format!("{PAPER2_SOURCE}: {name}'s perplexity against the standard model's, as validation loss (the log of perplexity)");
            Some((format!("paper 2: {}", measure.format(change)), source))
        }
    }
}

/// Each run but the reference, at the latest step both it and the reference were evaluated at
/// (runs in separate workers keep their own pace), against the reference; `None` before there
/// is a reference.
pub fn verdict(view: &SessionView) -> Option<Verdict> {
    let reference = view.reference()?;
    let measure = Measure::of(view);
    let lines = view
        .runs
        .iter()
        .filter(|run| run.info.id != reference.info.id)
        .filter_map(|run| {
            let (ours, theirs) = run.evals.iter().rev().find_map(|e| Some((e, reference.evals.iter().find(|r| r.step == e.step)?)))?;
            if ours.step == 0 {
                return None;
            }
            Some(VerdictLine {
                colour: run.colour,
                run: run.label().to_string(),
                name: run.name().to_string(),
                change: measure.change(ours, theirs)?,
                step: ours.step,
                paper: paper_figure(run, reference, measure),
            })
        })
        .collect();
    Some(Verdict { measure, reference: reference.label().to_string(), lines })
}

/// The verdict as a table under the chart: its heading, then a row per run; the step and the
/// paper's source on hover.
pub fn verdict_ui(ui: &mut egui::Ui, view: &SessionView) {
    let Some(verdict) = verdict(view).filter(|v| !v.lines.is_empty()) else { return };
    ui.label(egui::RichText::new(verdict.heading()).weak());
    egui::Grid::new("verdict").num_columns(3).spacing([12.0, 2.0]).show(ui, |ui| {
        for line in &verdict.lines {
            crate::widgets::coloured(ui, line.colour, &line.run).on_hover_text(&line.name);
            ui.label(verdict.measure.format(line.change)).on_hover_text(format!("at step {}", line.step));
            match &line.paper {
                Some((figure, source)) => ui.label(figure).on_hover_text(source),
                None => ui.weak("no paper figure"),
            };
            ui.end_row();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use qkv_model::Preset;
    use qkv_session::{RunId, RunInfo};
    use qkv_train::recipe::TrainingConfig;
    use qkv_train::run::RunSpec;

    fn run(id: usize, name: &str, variant: AttentionVariant, kv_heads: Option<usize>, losses: &[(usize, f64)]) -> RunView {
        let mut model = Preset::Classroom.config().with_variant(variant);
        model.attention.kv_heads = kv_heads;
        let spec = RunSpec { name: name.into(), model: model.clone(), training: TrainingConfig::for_preset(Preset::Classroom) };
        let evals = losses
            .iter()
            .map(|&(step, val_loss)| EvalRecord { step, tokens: 0, wall_secs: 0.0, val_loss, accuracy: None, sequence_accuracy: None })
            .collect();
        let info = RunInfo { id: RunId(id), params: qkv_model::ParamReport::new(&model), spec, steps: Vec::new(), evals };
        RunView::new(info, Color32::RED)
    }

    #[test]
    fn each_run_is_set_against_the_standard_one_in_validation_loss_beside_the_paper_in_the_same_unit() {
        let view = SessionView {
            runs: vec![
                run(0, "wq-identity", AttentionVariant::QueryIdentity, None, &[(0, 4.3), (10, 2.1)]),
                run(1, "standard", AttentionVariant::Standard, None, &[(0, 4.3), (10, 2.0), (20, 1.8)]),
                run(2, "shared-kv+mqa", AttentionVariant::SharedKeyValue, Some(1), &[(0, 4.3), (10, 2.2), (20, 1.9)]),
                run(3, "shared-qk-asym", AttentionVariant::SharedQueryKeyAsym, None, &[(0, 4.3)]),
            ],
            ..SessionView::default()
        };
        let verdict = verdict(&view).unwrap();
        assert_eq!(verdict.heading(), "validation loss against Q-K-V (lower is better)", "the standard run, though not the first");
        let lines = &verdict.lines;
        assert_eq!(lines.len(), 2, "the asymmetric run has only its untrained point");
        assert_eq!((lines[0].run.as_str(), verdict.measure.format(lines[0].change), lines[0].step), ("Q=I", "+5.0%".into(), 10));
        assert_eq!(lines[0].paper.as_ref().map(|p| p.0.as_str()), Some("paper 1: on par"));
        assert_eq!((lines[1].run.as_str(), verdict.measure.format(lines[1].change)), ("Q-K=V + MQA", "+5.6%".into()));
        // ln 5.36 / ln 5.11 − 1, the paper's perplexities as a change in loss.
        assert_eq!(lines[1].paper.as_ref().map(|p| p.0.as_str()), Some("paper 2: +2.9%"));
    }

    /// A synthetic task is judged in accuracy points, with no paper figure (neither paper reports it).
    #[test]
    fn a_task_with_answers_is_judged_in_accuracy_points() {
        let with_accuracy = |mut view: RunView, accuracy: f64| {
            view.evals[1].accuracy = Some(accuracy);
            view.evals[0].accuracy = Some(0.1);
            view
        };
        let view = SessionView {
            runs: vec![
                with_accuracy(run(0, "shared-qk", AttentionVariant::SharedQueryKey, None, &[(0, 2.3), (300, 1.2)]), 0.55),
                with_accuracy(run(1, "standard", AttentionVariant::Standard, None, &[(0, 2.3), (300, 0.01)]), 1.0),
            ],
            ..SessionView::default()
        };
        let verdict = verdict(&view).unwrap();
        assert_eq!(verdict.heading(), "accuracy against Q-K-V, in points (higher is better)");
        let line = &verdict.lines[0];
        assert_eq!((line.run.as_str(), verdict.measure.format(line.change), line.paper.is_none()), ("Q=K-V", "-45.0 points".into(), true));
    }

    /// ViTs are set against each other by held-out accuracy, beside paper 2's vision finding.
    #[test]
    fn vision_runs_compare_accuracy_and_only_q_k_v_shared_has_a_paper_finding() {
        let vit = |id: usize, name: &str, variant: AttentionVariant, accuracy: f64| {
            let mut view = run(id, name, variant, None, &[(0, 2.3), (100, 0.2)]);
            view.info.spec.model = Preset::VisionDigits.config().with_variant(variant);
            view.evals[1].accuracy = Some(accuracy);
            view.evals[0].accuracy = Some(0.1);
            view
        };
        let view = SessionView {
            runs: vec![
                vit(0, "standard", AttentionVariant::Standard, 0.97),
                vit(1, "shared-kv", AttentionVariant::SharedKeyValue, 0.955),
                vit(2, "wq-identity", AttentionVariant::QueryIdentity, 0.98),
            ],
            ..SessionView::default()
        };
        let verdict = verdict(&view).unwrap();
        assert_eq!(verdict.measure, Measure::HeldOutAccuracy);
        let format = |line: &VerdictLine| verdict.measure.format(line.change);
        assert_eq!(format(&verdict.lines[0]), "-1.5 points");
        assert_eq!(verdict.lines[0].paper.as_ref().map(|p| p.0.as_str()), Some("paper 2: competitive"));
        assert_eq!((format(&verdict.lines[1]), verdict.lines[1].paper.is_none()), ("+1.0 points".into(), true), "paper 1 is of language");
    }
}
