//! `qkv experiment paper2-synthetic`: paper 2's list tasks swept over models and list lengths, as
//! its authors sweep theirs, each setting a study. Per task, a table of every setting, where a
//! variant parts from Q-K-V, and which logit term closes Q=K-V's gap; the sweep pooled beside the
//! authors' table is `synthetic_paper`'s.

use std::path::Path;

use plotters::prelude::*;

use qkv_train::papers::SyntheticSetting;
use qkv_train::{DataSource, Framing, SyntheticTask};

use super::catalogue::Study;
use super::learning::{PARTS_BY, Setting, gap_section, progress_cell, progress_legend, trails};
use super::seeds::{LEARNED, Outcome};
use super::stats::{PairedChange, Unit, mean_std};
use crate::Failure;

/// The task and list length a study trains on.
pub(super) fn setting(study: &Study) -> Option<(SyntheticTask, usize)> {
    match study.plan.data {
        DataSource::Synthetic { task, length, .. } => Some((task, length)),
        _ => None,
    }
}

/// A study of the sweep's grid: its model and list length as the authors' sweeps name them; None
/// for a study with a model of its own (the symmetry probe).
pub(super) fn grid_setting(study: &Study) -> Option<SyntheticSetting> {
    let (_, length) = setting(study)?;
    let model = &study.plan.model;
    let config = model.applied_to(study.plan.preset.config());
    model.n_embd.map(|_| SyntheticSetting { n_embd: config.n_embd, n_layer: config.n_layer, n_head: config.n_head, length })
}

/// How the grid's models are built and trained, from the first grid study's own runs: for the
/// report's header.
pub(super) fn grid_description(studies: &[Study]) -> Option<String> {
    let study = studies.iter().find(|s| grid_setting(s).is_some())?;
    let spec = study.plan.specs(&study.plan.dataset().ok()?).ok()?.into_iter().next()?;
    let (model, t) = (&spec.model, &spec.training);
    Some(format!(
        "lists read whole by encoders (attention both ways, learned positions, pre-LN, {}) of the sizes each column \
         names (layers × heads × width, a {}× MLP), each list in a context of its length L; paper 2's synthetic recipe: {} \
         steps of {} lists, Adam at {} (β₁ {}, β₂ {}, weight decay {}), {} warm-up steps, then a cosine to {}, gradients \
         clipped at a norm of {}",
        if model.tie_embeddings { "the output head tied to the embedding" } else { "an output head of their own" },
        model.mlp_hidden / model.n_embd.max(1),
        t.steps,
        t.batch_size,
        t.lr,
        t.beta1,
        t.beta2,
        t.weight_decay,
        t.warmup_steps,
        t.min_lr,
        t.grad_clip.map_or("none (off)".to_string(), |clip| clip.to_string()),
    ))
}

/// The outcomes with each study's name replaced by its task's: a sweep's settings pooled.
pub(super) fn by_task(outcomes: &[Outcome], studies: &[Study]) -> Vec<Outcome> {
    outcomes
        .iter()
        .map(|o| {
            let task = studies.iter().find(|s| s.name == o.study).and_then(setting).map(|(task, _)| task.name().to_string());
            Outcome { study: task.unwrap_or_else(|| o.study.clone()), ..o.clone() }
        })
        .collect()
}

/// The studies whose loss curves a sweep's report draws: at each task and length the grid's
/// largest model (the last), and every study outside the grid.
pub(super) fn plotted(studies: &[Study]) -> Vec<&Study> {
    let last_of_its_length = |i: usize| {
        let next = studies.get(i + 1).and_then(setting);
        next.is_none() || next != setting(&studies[i])
    };
    studies.iter().enumerate().filter(|&(i, s)| grid_setting(s).is_none() || last_of_its_length(i)).map(|(_, s)| s).collect()
}

/// A table column's heading: "L = 16, 2×4×64" (layers × heads × width) for the grid's studies,
/// "L = 4" for one whose model the task's note gives.
fn column(study: &Study) -> String {
    match (grid_setting(study), setting(study)) {
        (Some(s), _) => format!("L = {}, {}×{}×{}", s.length, s.n_layer, s.n_head, s.n_embd),
        (None, Some((_, length))) => format!("L = {length}"),
        (None, None) => String::new(),
    }
}

/// "lower in 3 of 3 seeds (per seed: -55.20 pt, …)", and whether the change is the same way, by
/// [`PARTS_BY`] points or more, in every seed of two or more.
fn per_seed_counts(change: &PairedChange) -> (String, bool) {
    let n = change.seeds();
    let lower = change.per_seed.iter().filter(|(_, c)| *c <= -PARTS_BY).count();
    let higher = change.per_seed.iter().filter(|(_, c)| *c >= PARTS_BY).count();
    let (way, count) = if lower >= higher { ("lower", lower) } else { ("higher", higher) };
    let text = format!(
        "{} on average, {way} by {PARTS_BY} point or more in {count} of {n} seeds (per seed: {})",
        change.unit.amount(change.stats().0),
        change.listed()
    );
    (text, n >= 2 && count == n)
}

/// Each run's final accuracy by seed.
fn accuracies(list: &[&Outcome]) -> Vec<(u64, f64)> {
    list.iter().filter_map(|o| Some((o.seed, o.summary.accuracy?))).collect()
}

/// Tasks in the order of the studies, each with its studies' lengths (a length once per model).
fn tasks(studies: &[Study]) -> Vec<(SyntheticTask, Vec<(usize, &Study)>)> {
    let mut tasks: Vec<(SyntheticTask, Vec<(usize, &Study)>)> = Vec::new();
    for study in studies {
        let Some((task, length)) = setting(study) else { continue };
        match tasks.iter_mut().find(|(t, _)| *t == task) {
            Some((_, lengths)) => lengths.push((length, study)),
            None => tasks.push((task, vec![(length, study)])),
        }
    }
    tasks
}

/// The model of a study outside the sweep's grid (the symmetry probe's), said under its task's
/// heading; empty for the grid's own settings, whose columns name their models.
fn setting_note(study: &Study) -> String {
    let Some((task, length)) = setting(study) else { return String::new() };
    let encoder = matches!(study.plan.data, DataSource::Synthetic { framing: Framing::Encoder, .. });
    let model = &study.plan.model;
    if grid_setting(study).is_some() {
        return String::new();
    }
    let config = model.applied_to(study.plan.preset.config());
    format!(
        "Lists of {length} read {} by a model of {} and {} (the {} preset{}){}\n\n",
        if encoder { "whole, with attention both ways," } else { "left to right" },
        count(config.n_layer, "layer"),
        count(config.n_head, "head"),
        study.plan.preset,
        study.plan.training.batch_size.map_or(String::new(), |batch| format!(", batches of {batch}")),
        if task == SyntheticTask::Rotate && encoder {
            ": each place reads its left neighbour around a cycle, an order that symmetric logits cannot give."
        } else {
            "."
        }
    )
}

/// "1 layer", "2 layers".
fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// A table's header row and separator: the variant column, then one column per setting.
fn length_header(lengths: &[(usize, &Study)]) -> String {
    let columns: String = lengths.iter().map(|(_, study)| format!(" {} |", column(study))).collect();
    format!("| variant |{columns}\n|---|{}\n", "---:|".repeat(lengths.len()))
}

/// A run's outcomes in a study, in the order of their seeds.
fn runs_of<'a>(outcomes: &'a [Outcome], study: &Study, name: &str) -> Vec<&'a Outcome> {
    outcomes.iter().filter(|o| o.study == study.name && o.summary.name == name).collect()
}

/// What the per-setting tables hold.
fn intro(studies: &[Study]) -> String {
    let columns = if studies.iter().any(|s| grid_setting(s).is_some()) {
        " Each column names a setting's list length L and model (layers × heads × width)."
    } else {
        ""
    };
    format!(
        "## Each setting\n\nAccuracy is per answer token on the 1,000 validation lists (the same for every seed), at the end \
         of training: mean ± std over seeds. Δ is each seed's accuracy minus Q-K-V's in the same seed (same batches), in \
         percentage points, mean over seeds.{columns}\n"
    )
}

/// Per task, a table of accuracy by variant and length, with each variant's paired change against
/// Q-K-V, and one of whole lists, when each seed learned the task and the logits' symmetry; then
/// every setting where a variant parts from Q-K-V (or learns later) the same way in every seed,
/// or the evidence that none does; then which logit term closes Q=K-V's gap.
pub(super) fn sweep_report(outcomes: &[Outcome], studies: &[Study]) -> String {
    let mut out = intro(studies);
    let mut parted = Vec::new();
    let mut later = Vec::new();
    let mut settings_seen: Vec<Setting> = Vec::new();
    let mut reference_range = (f64::INFINITY, f64::NEG_INFINITY);
    let mut settings = 0;
    // Variant-settings paired against Q-K-V.
    let mut compared = 0;
    for (task, lengths) in tasks(studies) {
        let note = lengths.first().map_or(String::new(), |(_, study)| setting_note(study));
        out += &format!("\n### {task}\n\n{note}{}", length_header(&lengths));
        let names: Vec<String> = lengths.first().map_or(vec![], |(_, s)| s.plan.runs.iter().map(|r| r.name.clone()).collect());
        for (row, name) in names.iter().enumerate() {
            out += &format!("| {name} |");
            for (_, study) in &lengths {
                let of = |name: &str| runs_of(outcomes, study, name);
                let list = of(name);
                let cell = match mean_std(list.iter().map(|o| o.summary.accuracy.map(|a| 100.0 * a))) {
                    Some((m, s, n)) if n > 1 => format!("{m:.2}% ± {s:.2}"),
                    Some((m, _, _)) => format!("{m:.2}%"),
                    None => "-".into(),
                };
                let reference = accuracies(&of(&names[0]));
                let change = PairedChange::of(Unit::Accuracy, &accuracies(&list), &reference);
                if row == 0 {
                    settings += 1;
                    if let Some((m, _, _)) = mean_std(reference.iter().map(|(_, a)| Some(100.0 * a))) {
                        reference_range = (reference_range.0.min(m), reference_range.1.max(m));
                    }
                    out += &format!(" {cell} |");
                    continue;
                }
                match change {
                    Some(change) => {
                        compared += 1;
                        out += &format!(" {cell} (Δ {}) |", Unit::Accuracy.amount(change.stats().0));
                        let (counts, parts) = per_seed_counts(&change);
                        if parts {
                            parted.push(format!("- {task}, {}: {name} against Q-K-V: {counts}", column(study)));
                        } else if let Some(how) = trails(&list, &of(&names[0])) {
                            later.push(format!("- {task}, {}: {name} {how}", column(study)));
                        }
                    }
                    None => out += &format!(" {cell} |"),
                }
            }
            out += "\n";
        }
        let every = lengths.first().and_then(|(_, study)| study.plan.training.eval_interval);
        out += &format!("\n{}\n\n{}", progress_legend(every), length_header(&lengths));
        for name in &names {
            let cells: Vec<String> = lengths.iter().map(|(_, study)| progress_cell(&runs_of(outcomes, study, name))).collect();
            out += &format!("| {name} | {} |\n", cells.join(" | "));
        }
        for (_, study) in &lengths {
            let runs = study.plan.runs.iter().map(|r| (r.name.clone(), r.variant, runs_of(outcomes, study, &r.name))).collect();
            settings_seen.push(Setting { label: format!("{task}, {}", column(study)), runs });
        }
    }
    out += "\n## Where the variants part ways\n\n";
    if parted.is_empty() {
        let (low, high) = reference_range;
        out += &format!(
            "No setting separates them at this budget: in each of the {settings} settings, no variant's \
             accuracy is {PARTS_BY} point or more from Q-K-V's the same way in every seed. Q-K-V's own accuracy ranges over \
             {low:.2}% to {high:.2}%: {}\n",
            if low >= 99.0 {
                "it is at the ceiling everywhere, so longer lists, a smaller model or fewer steps would be needed to see a difference."
            } else if high < 50.0 {
                "it has not learned the tasks either, so more steps or a larger model would be needed to see a difference."
            } else {
                "below the ceiling somewhere, so at this scale the variants learn these tasks alike."
            }
        );
    } else {
        out += &format!(
            "In these settings a variant's accuracy differs from Q-K-V's by {PARTS_BY} point or more the same way in every \
             seed (accuracy is bounded, so seeds are counted rather than given a t-interval); {} of {} variant-settings in \
             all:\n\n{}\n",
            parted.len(),
            compared,
            parted.join("\n")
        );
    }
    if !later.is_empty() {
        out += &format!(
            "\nWhere the final accuracies do not part, a variant learned the task ({:.0}% per token) at a later evaluation \
             than Q-K-V, or not at all, in every seed; {} of {compared} variant-settings:\n\n{}\n",
            100.0 * LEARNED,
            later.len(),
            later.join("\n")
        );
    }
    out + &gap_section(&settings_seen)
}

/// The lengths among a task's studies, each once, in order.
fn distinct_lengths(lengths: &[(usize, &Study)]) -> Vec<usize> {
    let mut distinct: Vec<usize> = Vec::new();
    for (length, _) in lengths {
        if !distinct.contains(length) {
            distinct.push(*length);
        }
    }
    distinct
}

/// accuracy-TASK.svg for each task: accuracy against list length, a line per variant (mean over
/// seeds); returns the report's links to them.
pub(super) fn accuracy_plots(outcomes: &[Outcome], studies: &[Study], out: &Path) -> Result<String, Failure> {
    let mut links = String::new();
    for (task, lengths) in tasks(studies) {
        let file = format!("accuracy-{task}.svg");
        let path = out.join(&file);
        let failed = |e: String| format!("cannot draw {}: {e}", path.display());
        let names: Vec<String> = lengths.first().map_or(vec![], |(_, s)| s.plan.runs.iter().map(|r| r.name.clone()).collect());
        let lines: Vec<(String, Vec<(f64, f64)>)> = names
            .iter()
            .map(|name| {
                let points = distinct_lengths(&lengths)
                    .into_iter()
                    .filter_map(|length| {
                        let at = |o: &&Outcome| lengths.iter().any(|(l, study)| *l == length && o.study == study.name);
                        let list = outcomes.iter().filter(at).filter(|o| o.summary.name == *name);
                        let (m, _, _) = mean_std(list.map(|o| o.summary.accuracy.map(|a| 100.0 * a)))?;
                        Some((length as f64, m))
                    })
                    .collect();
                (name.clone(), points)
            })
            .collect();
        let max_x = lengths.iter().map(|(l, _)| *l as f64).fold(1.0, f64::max);
        let min_y = lines.iter().flat_map(|(_, p)| p.iter().map(|p| p.1)).fold(100.0, f64::min);
        let root = SVGBackend::new(&path, (720, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| failed(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{task}: accuracy by list length (mean over models and seeds)"), ("sans-serif", 20))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..max_x * 1.05, (min_y - 5.0).max(0.0)..100.5)
            .map_err(|e| failed(e.to_string()))?;
        chart.configure_mesh().x_desc("list length L").y_desc("accuracy (%)").draw().map_err(|e| failed(e.to_string()))?;
        for (index, (name, points)) in lines.into_iter().enumerate() {
            let color = Palette99::pick(index).to_rgba();
            chart.draw_series(points.iter().map(|&point| Circle::new(point, 4, color.filled()))).map_err(|e| failed(e.to_string()))?;
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| failed(e.to_string()))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw().map_err(|e| failed(e.to_string()))?;
        root.present().map_err(|e| failed(e.to_string()))?;
        links += &format!("\n![{task}: accuracy by list length]({file})\n");
    }
    Ok(links)
}

#[cfg(test)]
pub(super) mod tests {
    use qkv_model::Preset;
    use qkv_train::TokenizerKind;
    use qkv_train::plan::ExperimentPlan;

    use super::*;
    use crate::experiment::catalogue::{SweepModel, paper2_projection_runs, paper2_synthetic_training, study_name};
    use crate::experiment::findings::tests::finished;

    /// A study of the grid: lists of `length` read by an encoder of 2 layers, 2 heads, width 32.
    pub(in crate::experiment) fn grid_study(task: SyntheticTask, length: usize, model: SweepModel) -> Study {
        let plan = ExperimentPlan {
            preset: Preset::Synthetic,
            data: DataSource::Synthetic { task, length, framing: qkv_train::Framing::Encoder },
            tokenizer: TokenizerKind::Char,
            model: qkv_train::plan::ModelOverrides {
                n_layer: Some(model.n_layer),
                n_head: Some(model.n_head),
                n_embd: Some(model.n_embd),
                block_size: Some(length),
                ..Default::default()
            },
            training: paper2_synthetic_training(None),
            runs: paper2_projection_runs(),
        };
        Study::new(study_name(task, length, model), plan)
    }

    fn study(task: SyntheticTask, length: usize) -> Study {
        grid_study(task, length, SweepModel { n_layer: 2, n_head: 2, n_embd: 32 })
    }

    /// Every variant's accuracy in three seeds, Q-K-V's `reference`; `symmetric` is subtracted
    /// from Q=K-V's.
    pub(in crate::experiment) fn outcomes(study: &Study, reference: [f64; 3], symmetric: f64) -> Vec<Outcome> {
        let mut outcomes = Vec::new();
        for run in &study.plan.runs {
            for (i, seed) in [1, 2, 3].into_iter().enumerate() {
                let mut outcome = finished(&run.name, seed, 0.1);
                outcome.study = study.name.clone();
                // A tenth of a point of noise, which no interval can tell from 0.
                let own = match run.name.as_str() {
                    "Q-K-V" => 0.0,
                    "Q=K-V" => symmetric + [0.0, 0.001, -0.001][i],
                    _ => [0.001, -0.001, 0.0][i],
                };
                outcome.summary.accuracy = Some(reference[i] - own);
                outcomes.push(outcome);
            }
        }
        outcomes
    }

    #[test]
    fn the_sweep_names_the_settings_where_a_variant_parts_from_standard() {
        let studies = [study(SyntheticTask::Reverse, 16), study(SyntheticTask::Reverse, 64)];
        let mut all = outcomes(&studies[0], [1.0, 1.0, 1.0], 0.0);
        all.extend(outcomes(&studies[1], [0.60, 0.62, 0.58], 0.20));
        let report = sweep_report(&all, &studies);
        assert!(report.contains("| variant | L = 16, 2×2×32 | L = 64, 2×2×32 |"), "{report}");
        assert!(report.contains("| Q-K-V | 100.00% ± 0.00 | 60.00% ± 2.00 |"), "{report}");
        assert!(report.contains("| Q=K-V | 100.00% ± 0.10 (Δ +0.00 pt) | 40.00% ± 1.90 (Δ -20.00 pt) |"), "{report}");
        let parted: Vec<&str> = report.lines().filter(|l| l.starts_with("- reverse") && l.contains("against Q-K-V:")).collect();
        assert_eq!(parted.len(), 1, "{report}");
        assert!(
            parted[0].starts_with(
                "- reverse, L = 64, 2×2×32: Q=K-V against Q-K-V: -20.00 pt on average, lower by 1 point or more in 3 of 3 seeds"
            ),
            "{report}"
        );
        assert!(!report.contains("95% interval"), "no t-interval on a bounded accuracy: {report}");
        assert!(report.contains("1 of 10 variant-settings"), "{report}");
        assert!(
            report.contains(
                "- reverse, L = 64, 2×2×32: Q=K-V ends lower in 3 of 3 seeds (-20.00 pt, -20.10 pt, -19.90 pt); (Q=K-V)+ \
                 closes it; (Q=K-V)+rel closes it."
            ),
            "{report}"
        );
    }

    #[test]
    fn a_variant_parts_only_when_every_seed_says_so() {
        let reference = [(1, 0.9), (2, 0.9), (3, 0.9)];
        let of = |values: [f64; 3]| {
            let values: Vec<(u64, f64)> = values.iter().zip(1..).map(|(v, s)| (s, *v)).collect();
            PairedChange::of(Unit::Accuracy, &values, &reference).unwrap()
        };
        let (text, parts) = per_seed_counts(&of([0.85, 0.86, 0.905]));
        assert!(!parts && text.contains("lower by 1 point or more in 2 of 3 seeds"), "{text}");
        assert!(per_seed_counts(&of([0.95, 0.92, 0.93])).1, "higher in every seed");
        assert!(!per_seed_counts(&PairedChange::of(Unit::Accuracy, &[(1, 0.5)], &reference).unwrap()).1, "one seed says nothing");
    }

    #[test]
    fn a_sweep_at_the_ceiling_says_that_nothing_separates() {
        let studies = [study(SyntheticTask::Swap, 16)];
        let all = outcomes(&studies[0], [1.0, 0.999, 1.0], 0.0);
        let report = sweep_report(&all, &studies);
        assert!(report.contains("No setting separates them at this budget"), "{report}");
        assert!(report.contains("it is at the ceiling everywhere"), "{report}");
    }
}
