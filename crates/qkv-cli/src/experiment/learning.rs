//! When the list tasks were learned, not only where the runs ended: every run reaches 100 % on
//! most settings a laptop can train, so the paired question there is which variant got to the
//! ceiling later. Also which logit term, paper 2's (Q=K-V)+ or our pairwise (Q=K-V)+rel, closes
//! Q=K-V's gap where it has one.

use qkv_model::AttentionVariant;

use super::seeds::{LEARNED, Outcome};
use super::stats::{Unit, mean_std};

/// How far, in points, a variant's accuracy must differ from the reference's, the same way in
/// every seed, for the report to say they part ways. Accuracy is bounded (a variant at the
/// ceiling has no spread at all), so no t-interval is put on it: the report counts seeds instead.
pub(super) const PARTS_BY: f64 = 1.0;

/// The step each seed first reached [`LEARNED`], "100/150/–" in seed order ("–": never).
fn steps_listed(list: &[&Outcome]) -> String {
    list.iter().map(|o| o.steps_to_learn().map_or("–".to_string(), |step| step.to_string())).collect::<Vec<_>>().join("/")
}

/// "99.20% · 100/150/– · 0.517": whole lists right (mean over seeds), the step each seed learned
/// the task at, and the logits' symmetry (mean over seeds).
pub(super) fn progress_cell(list: &[&Outcome]) -> String {
    let sequence = mean_std(list.iter().map(|o| o.summary.sequence_accuracy.map(|a| 100.0 * a)));
    let symmetry = mean_std(list.iter().map(|o| o.symmetry()));
    format!(
        "{} · {} · {}",
        sequence.map_or("-".to_string(), |(m, _, _)| format!("{m:.2}%")),
        steps_listed(list),
        symmetry.map_or("-".to_string(), |(m, _, _)| format!("{m:.3}"))
    )
}

/// The explanation above the progress tables.
pub(super) fn progress_legend(eval_interval: Option<usize>) -> String {
    format!(
        "Whole lists right (sequence accuracy, mean over seeds) · the step at which each seed first reached {:.0}% per-token \
         accuracy ({}; –: never) · the logits' symmetry score, mean over seeds (1: the softmax sees symmetric logits; \
         docs/diagnostics.md):",
        100.0 * LEARNED,
        eval_interval.map_or("at the evaluations".to_string(), |every| format!("evaluated every {every} steps"))
    )
}

/// Pairs of (run, reference) outcomes of the same seed.
fn paired<'a>(list: &[&'a Outcome], reference: &[&'a Outcome]) -> Vec<(&'a Outcome, &'a Outcome)> {
    list.iter().filter_map(|&o| Some((o, *reference.iter().find(|r| r.seed == o.seed)?))).collect()
}

/// How a run trails the reference, the same way in every seed; each says how, seed by seed.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Trail {
    /// It ends [`PARTS_BY`] points or more lower.
    EndsLower(String),
    /// It ends level but learns the task at a later evaluation (never counts as latest).
    LearnsLater(String),
}

impl std::fmt::Display for Trail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trail::EndsLower(how) | Trail::LearnsLater(how) => f.write_str(how),
        }
    }
}

/// Where a run trails the reference the same way in every seed (two or more): it ends
/// [`PARTS_BY`] points lower, or it learns the task at a later evaluation (never counts as
/// latest) while the reference learns it in every seed. None where it does not.
pub(super) fn trails(list: &[&Outcome], reference: &[&Outcome]) -> Option<Trail> {
    let pairs = paired(list, reference);
    let n = pairs.len();
    if n < 2 {
        return None;
    }
    // In points, computed and printed as the accuracy table's changes are, so that a seed's
    // change reads the same in both places.
    let changes: Option<Vec<f64>> =
        pairs.iter().map(|(o, r)| Some(Unit::Accuracy.change(o.summary.accuracy?, r.summary.accuracy?))).collect();
    if let Some(changes) = changes.filter(|c| c.iter().all(|&change| -change >= PARTS_BY)) {
        let listed: Vec<String> = changes.iter().map(|&change| Unit::Accuracy.amount(change)).collect();
        return Some(Trail::EndsLower(format!("ends lower in {n} of {n} seeds ({})", listed.join(", "))));
    }
    let learned = |o: &Outcome| o.steps_to_learn().unwrap_or(usize::MAX);
    let reference_learned = pairs.iter().all(|(_, r)| r.steps_to_learn().is_some());
    if reference_learned && pairs.iter().all(|(o, r)| learned(o) > learned(r)) {
        let listed: Vec<String> = pairs
            .iter()
            .map(|(o, r)| format!("{} against {}", o.steps_to_learn().map_or("never".into(), |s| s.to_string()), learned(r)))
            .collect();
        return Some(Trail::LearnsLater(format!("learns it later in {n} of {n} seeds (step {})", listed.join(", "))));
    }
    None
}

/// One setting of the sweep: its label ("reverse, L = 64") and each run's name, variant and
/// outcomes by seed, the reference first.
pub(super) struct Setting<'a> {
    pub(super) label: String,
    pub(super) runs: Vec<(String, AttentionVariant, Vec<&'a Outcome>)>,
}

impl Setting<'_> {
    /// The run of `variant`, if the setting trains one.
    fn run(&self, variant: AttentionVariant) -> Option<&(String, AttentionVariant, Vec<&Outcome>)> {
        self.runs.iter().find(|(_, v, _)| *v == variant)
    }
}

/// Per setting, whether Q=K-V trails Q-K-V, and if it does, which of (Q=K-V)+ and (Q=K-V)+rel
/// closes the gap (its run no longer trails).
pub(super) fn gap_section(settings: &[Setting<'_>]) -> String {
    use AttentionVariant::*;
    let mut lines = Vec::new();
    for setting in settings {
        let (Some((_, _, reference)), Some((symmetric, _, list))) = (setting.runs.first(), setting.run(SharedQueryKey)) else {
            continue;
        };
        let Some(gap) = trails(list, reference) else { continue };
        let verdicts: Vec<String> = [SharedQueryKeyAsym, SharedQueryKeyRel]
            .into_iter()
            .filter_map(|variant| setting.run(variant))
            .map(|(name, _, list)| match (&gap, trails(list, reference)) {
                (_, None) => format!("{name} closes it"),
                // Level at the end, however long it took.
                (Trail::EndsLower(_), Some(later @ Trail::LearnsLater(_))) => {
                    format!("{name} closes it by the end of training, later than Q-K-V ({later})")
                }
                (_, Some(still)) => format!("{name} does not close it ({still})"),
            })
            .collect();
        lines.push(format!("- {}: {symmetric} {gap}; {}.", setting.label, verdicts.join("; ")));
    }
    let mut out = format!(
        "\n## Which term closes Q=K-V's gap\n\n(Q=K-V)+ adds paper 2's positional term to Q=K-V's logits, (Q=K-V)+rel our \
         learned bias on i − j (docs/variants.md). A run trails Q-K-V in a setting when, in every seed, it ends {PARTS_BY} \
         point or more lower, or reaches {:.0}% at a later evaluation.\n\n",
        100.0 * LEARNED
    );
    if lines.is_empty() {
        out += &format!(
            "Q=K-V trails Q-K-V in none of the {} settings, so at this budget there is no gap for either term to close.\n",
            settings.len()
        );
    } else {
        out += &(lines.join("\n") + "\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::findings::tests::finished;

    /// A run of `name` in `seed` with final accuracy `accuracy`, learned at `learned`.
    fn run(name: &str, seed: u64, accuracy: f64, learned: Option<usize>) -> Outcome {
        let mut outcome = finished(name, seed, 0.1);
        outcome.summary.accuracy = Some(accuracy);
        outcome.accuracy =
            [50, 100, 150, 200].iter().map(|&step| (step, if learned.is_some_and(|l| step >= l) { 1.0 } else { 0.5 })).collect();
        outcome
    }

    #[test]
    fn a_run_trails_when_every_seed_ends_lower_or_learns_later() {
        let reference: Vec<Outcome> = (1..=3).map(|seed| run("Q-K-V", seed, 1.0, Some(100))).collect();
        let reference: Vec<&Outcome> = reference.iter().collect();
        let of = |values: [(f64, Option<usize>); 3]| -> Vec<Outcome> {
            values.iter().zip(1..).map(|(&(accuracy, learned), seed)| run("Q=K-V", seed, accuracy, learned)).collect()
        };
        let later = of([(1.0, Some(150)), (1.0, Some(200)), (0.9, None)]);
        let text = trails(&later.iter().collect::<Vec<_>>(), &reference).expect("later in every seed");
        assert_eq!(
            text,
            Trail::LearnsLater("learns it later in 3 of 3 seeds (step 150 against 100, 200 against 100, never against 100)".into())
        );
        let lower = of([(0.9, None), (0.95, None), (0.98, None)]);
        let text = trails(&lower.iter().collect::<Vec<_>>(), &reference).expect("lower in every seed");
        assert_eq!(text, Trail::EndsLower("ends lower in 3 of 3 seeds (-10.00 pt, -5.00 pt, -2.00 pt)".into()));
        let alike = of([(1.0, Some(150)), (1.0, Some(100)), (1.0, Some(150))]);
        assert_eq!(trails(&alike.iter().collect::<Vec<_>>(), &reference), None, "one seed as fast");
        assert_eq!(trails(&later[..1].iter().collect::<Vec<_>>(), &reference), None, "one seed says nothing");
    }

    #[test]
    fn the_gap_section_says_which_term_closes_it() {
        use AttentionVariant::*;
        let runs = [
            ("Q-K-V", Standard, 1.0),
            ("Q=K-V", SharedQueryKey, 0.6),
            ("(Q=K-V)+", SharedQueryKeyAsym, 0.62),
            ("(Q=K-V)+rel", SharedQueryKeyRel, 1.0),
        ];
        let all: Vec<Vec<Outcome>> = runs
            .iter()
            .map(|&(name, _, accuracy)| (1..=2).map(|seed| run(name, seed, accuracy, (accuracy == 1.0).then_some(50))).collect())
            .collect();
        let setting = |keep: usize| Setting {
            label: "rotate, L = 4".into(),
            runs: runs
                .iter()
                .zip(&all)
                .take(keep)
                .map(|(&(name, variant, _), list)| (name.to_string(), variant, list.iter().collect()))
                .collect(),
        };
        let section = gap_section(&[setting(4)]);
        assert!(
            section.contains(
                "- rotate, L = 4: Q=K-V ends lower in 2 of 2 seeds (-40.00 pt, -40.00 pt); (Q=K-V)+ does not close it \
                 (ends lower in 2 of 2 seeds (-38.00 pt, -38.00 pt)); (Q=K-V)+rel closes it."
            ),
            "{section}"
        );
        let section = gap_section(&[setting(1)]);
        assert!(section.contains("Q=K-V trails Q-K-V in none of the 1 settings"), "{section}");

        // Level at the end, but later than Q-K-V in every seed.
        let late: Vec<Outcome> = (1..=2).map(|seed| run("(Q=K-V)+rel", seed, 1.0, Some(150))).collect();
        let mut slow = setting(4);
        slow.runs[3].2 = late.iter().collect();
        let section = gap_section(&[slow]);
        assert!(
            section.contains(
                "(Q=K-V)+rel closes it by the end of training, later than Q-K-V (learns it later in 2 of 2 seeds (step 150 \
                 against 50, 150 against 50))."
            ),
            "{section}"
        );
    }

    #[test]
    fn a_progress_cell_lists_each_seeds_step() {
        let mut first = run("Q-K-V", 1, 1.0, Some(100));
        first.summary.sequence_accuracy = Some(1.0);
        let mut second = run("Q-K-V", 2, 0.9, None);
        second.summary.sequence_accuracy = Some(0.5);
        assert_eq!(progress_cell(&[&first, &second]), "75.00% · 100/– · -");
    }
}
