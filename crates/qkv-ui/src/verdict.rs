//! The live verdict beside the loss chart: each run's latest validation loss against the first
//! run's, as a change in loss and in perplexity, next to the paper's figure for the same
//! comparison (`qkv_train::papers`, docs/papers.md), so a class sees how a toy compares with the
//! papers' models.

use egui::Color32;
use qkv_model::AttentionVariant;
use qkv_train::papers::{PAPER1_SOURCE, PAPER2_SOURCE, paper2_change, paper2_name};

use crate::view::{RunView, SessionView};

/// One run's line of the verdict, in its colour.
pub struct VerdictLine {
    pub colour: Color32,
    pub run: String,
    /// Its change in validation perplexity against the first run, as the papers report theirs.
    pub here: String,
    /// The same in loss, the first run's name and the step both were last evaluated at.
    pub against: String,
    /// The paper's figure for the same comparison, and where it comes from.
    pub paper: Option<(String, &'static str)>,
}

/// What the papers report for `run` against `reference`, where they report that comparison.
fn paper_figure(run: &RunView, reference: &RunView) -> Option<(String, &'static str)> {
    fn model(run: &RunView) -> &qkv_model::GptConfig {
        &run.info.spec.model
    }
    let full_heads = |r: &RunView| model(r).attention.kv_heads.is_none_or(|k| k == model(r).n_head);
    // The papers trained each variant at its own scale: a run with another (a model converted
    // from a trained one keeps the original's) is not their comparison.
    let own_scale = |r: &RunView| model(r).attention.scale.is_none();
    if model(reference).attention.variant != AttentionVariant::Standard
        || !full_heads(reference)
        || !own_scale(run)
        || !own_scale(reference)
    {
        return None;
    }
    // The papers' figures are of language models; on vision paper 2 reports one finding.
    if model(run).is_vision() {
        let shares_key_value = model(run).attention.variant == AttentionVariant::SharedKeyValue && full_heads(run);
        return shares_key_value.then(|| ("paper 2: competitive on vision".to_string(), PAPER2_SOURCE));
    }
    if model(run).attention.variant == AttentionVariant::QueryIdentity && full_heads(run) {
        return Some(("paper 1: on par".to_string(), PAPER1_SOURCE));
    }
    let (name, change) = paper2_change(paper2_name(&model(run).attention, model(run).n_head)?)?;
    Some((format!("paper 2: {:+.1}% ({name})", 100.0 * change), PAPER2_SOURCE))
}

/// A line per run after the first: its validation loss at the latest step both it and the first
/// run were evaluated at, against the first run's, and the paper's figure.
pub fn verdict(view: &SessionView) -> Vec<VerdictLine> {
    let Some((reference, others)) = view.runs.split_first() else { return Vec::new() };
    others
        .iter()
        .filter_map(|run| {
            let (ours, theirs) = run.evals.iter().rev().find_map(|e| Some((e, reference.evals.iter().find(|r| r.step == e.step)?)))?;
            if !(ours.val_loss.is_finite() && theirs.val_loss.is_finite()) || ours.step == 0 {
                return None;
            }
            let loss = 100.0 * (ours.val_loss / theirs.val_loss - 1.0);
            let perplexity = 100.0 * ((ours.val_loss - theirs.val_loss).exp() - 1.0);
            // A classifier is judged by how many images it gets right, not by a perplexity.
            let here = match (run.info.spec.model.is_vision(), ours.accuracy, theirs.accuracy) {
                (true, Some(ours), Some(theirs)) => format!("{:+.1} pt held-out accuracy", 100.0 * (ours - theirs)),
                _ => format!("{perplexity:+.1}% perplexity"),
            };
            Some(VerdictLine {
                colour: run.colour,
                run: run.name().to_string(),
                here,
                against: format!("{loss:+.1}% in validation loss against {} at step {}", reference.name(), ours.step),
                paper: paper_figure(run, reference),
            })
        })
        .collect()
}

/// The verdict as a table under the chart: a row per run, the paper's source on hover.
pub fn verdict_ui(ui: &mut egui::Ui, view: &SessionView) {
    let lines = verdict(view);
    if lines.is_empty() {
        return;
    }
    egui::Grid::new("verdict").num_columns(3).spacing([12.0, 2.0]).show(ui, |ui| {
        for line in lines {
            ui.colored_label(line.colour, &line.run);
            ui.label(&line.here).on_hover_text(&line.against);
            match &line.paper {
                Some((figure, source)) => ui.label(figure).on_hover_text(*source),
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
    use qkv_train::EvalRecord;
    use qkv_train::recipe::TrainingConfig;
    use qkv_train::run::RunSpec;

    fn run(name: &str, variant: AttentionVariant, kv_heads: Option<usize>, losses: &[(usize, f64)]) -> RunView {
        let mut model = Preset::Classroom.config().with_variant(variant);
        model.attention.kv_heads = kv_heads;
        let spec = RunSpec { name: name.into(), model: model.clone(), training: TrainingConfig::for_preset(Preset::Classroom) };
        let evals = losses
            .iter()
            .map(|&(step, val_loss)| EvalRecord { step, tokens: 0, wall_secs: 0.0, val_loss, accuracy: None, sequence_accuracy: None })
            .collect();
        let info = RunInfo { id: RunId(0), params: qkv_model::ParamReport::new(&model), spec, steps: Vec::new(), evals };
        RunView::new(info, Color32::RED)
    }

    #[test]
    fn each_run_is_set_against_the_first_at_their_latest_common_step_beside_the_paper() {
        let view = SessionView {
            runs: vec![
                run("standard", AttentionVariant::Standard, None, &[(0, 4.3), (10, 2.0), (20, 1.8)]),
                run("wq-identity", AttentionVariant::QueryIdentity, None, &[(0, 4.3), (10, 2.1)]),
                run("K=V + MQA", AttentionVariant::SharedKeyValue, Some(1), &[(0, 4.3), (10, 2.2), (20, 1.9)]),
                run("asym", AttentionVariant::SharedQueryKeyAsym, None, &[(0, 4.3)]),
            ],
            ..SessionView::default()
        };
        let lines = verdict(&view);
        assert_eq!(lines.len(), 2, "the asymmetric run has only its untrained point");
        assert_eq!((lines[0].run.as_str(), lines[0].here.as_str()), ("wq-identity", "+10.5% perplexity"));
        assert_eq!(lines[0].against, "+5.0% in validation loss against standard at step 10");
        assert_eq!(lines[0].paper.as_ref().map(|p| p.0.as_str()), Some("paper 1: on par"));
        assert!(lines[1].against.starts_with("+5.6% in validation loss") && lines[1].against.ends_with("step 20"), "{}", lines[1].against);
        assert_eq!(lines[1].paper.as_ref().map(|p| p.0.as_str()), Some("paper 2: +4.9% (Q-K=V + MQA 1/16)"));
    }

    /// ViTs are set against each other by held-out accuracy, beside paper 2's vision finding.
    #[test]
    fn vision_runs_compare_accuracy_and_only_q_k_v_shared_has_a_paper_finding() {
        let vit = |name: &str, variant: AttentionVariant, accuracy: f64| {
            let mut view = run(name, variant, None, &[(0, 2.3), (100, 0.2)]);
            view.info.spec.model = Preset::VisionDigits.config().with_variant(variant);
            view.evals[1].accuracy = Some(accuracy);
            view.evals[0].accuracy = Some(0.1);
            view
        };
        let view = SessionView {
            runs: vec![
                vit("standard", AttentionVariant::Standard, 0.97),
                vit("shared-kv", AttentionVariant::SharedKeyValue, 0.955),
                vit("wq-identity", AttentionVariant::QueryIdentity, 0.98),
            ],
            ..SessionView::default()
        };
        let lines = verdict(&view);
        assert_eq!(lines[0].here, "-1.5 pt held-out accuracy");
        assert_eq!(lines[0].paper.as_ref().map(|p| p.0.as_str()), Some("paper 2: competitive on vision"));
        assert_eq!((lines[1].here.as_str(), lines[1].paper.is_none()), ("+1.0 pt held-out accuracy", true), "paper 1 is of language");
    }
}
