//! Paper 1's headline at several training lengths: W_Q = I against standard, each length a full
//! run of its own (its cosine ends at its last step), the gap and its 95% interval set against the
//! tokens the runs saw. At one length the gap is a point on a curve; the curve says whether it
//! closes with training.

use std::path::Path;

use plotters::prelude::*;

use super::catalogue::{PAPER1_HEADLINE_STUDY, Study, budget_run, budget_study};
use super::findings::{best_losses, pm};
use super::seeds::Outcome;
use super::stats::{Direction, PairedChange, Unit, mean_std};
use crate::Failure;

/// One training length: its steps, the tokens each run saw, and the two runs' outcomes.
struct Budget<'a> {
    steps: usize,
    tokens: f64,
    standard: Vec<&'a Outcome>,
    identity: Vec<&'a Outcome>,
}

impl Budget<'_> {
    /// W_Q = I's best validation loss against standard's, paired by seed, in %.
    fn gap(&self) -> Option<PairedChange> {
        PairedChange::of(Unit::Loss, &best_losses(&self.identity), &best_losses(&self.standard))
    }
}

/// The headline and every budget study that has outcomes, shortest first.
fn budgets<'a>(outcomes: &'a [Outcome], studies: &[Study]) -> Vec<Budget<'a>> {
    let runs =
        |study: &str, name: &str| -> Vec<&'a Outcome> { outcomes.iter().filter(|o| o.study == study && o.summary.name == name).collect() };
    let mut budgets: Vec<Budget> = Vec::new();
    let mut add = |standard: Vec<&'a Outcome>, identity: Vec<&'a Outcome>| {
        // The planned length: the longest any seed trained (a diverged run stops early).
        let Some(longest) = standard.iter().max_by_key(|o| o.summary.steps) else { return };
        let (steps, tokens) = (longest.summary.steps, longest.summary.tokens as f64);
        budgets.push(Budget { steps, tokens, standard, identity });
    };
    add(runs(PAPER1_HEADLINE_STUDY, "standard"), runs(PAPER1_HEADLINE_STUDY, "wq-identity"));
    for study in studies {
        let Some(steps) = study.plan.training.steps.filter(|&steps| study.name == budget_study(steps)) else { continue };
        add(runs(&study.name, &budget_run("standard", steps)), runs(&study.name, &budget_run("wq-identity", steps)));
    }
    budgets.sort_by_key(|b| b.steps);
    budgets
}

/// "-1.20% to +0.40%", or "-" with one seed.
fn interval_cell(gap: Option<&PairedChange>) -> String {
    gap.and_then(PairedChange::interval_text).unwrap_or_else(|| "-".into())
}

/// What the shortest and longest lengths support about the gap's trend: the change of the gap
/// from one to the other, seed by seed (the lengths share their first seeds), with its interval.
fn trend(budgets: &[Budget]) -> String {
    let (Some(first), Some(last)) = (budgets.first(), budgets.last()) else { return String::new() };
    let (Some(a), Some(b)) = (first.gap(), last.gap()) else { return String::new() };
    let per_seed: Vec<(u64, f64)> =
        b.per_seed.iter().filter_map(|&(seed, late)| Some((seed, late - a.per_seed.iter().find(|(s, _)| *s == seed)?.1))).collect();
    let ends = format!(
        "W_Q = I's gap is {} at {} steps and {} at {} steps",
        Unit::Loss.amount(a.stats().0),
        first.steps,
        Unit::Loss.amount(b.stats().0),
        last.steps
    );
    let verdict = match (!per_seed.is_empty()).then_some(PairedChange { unit: Unit::Loss, per_seed }) {
        None => "no seed trained both, so the curve cannot be read".to_string(),
        Some(change) => format!(
            "from one to the other, seed by seed, it moves by {change}: {}",
            match change.direction() {
                Direction::Lower => "it falls with training",
                Direction::Higher => "it grows with training",
                Direction::Undecided => "these seeds cannot say that it changes with training",
            }
        ),
    };
    let above = budgets.iter().filter(|b| b.gap().and_then(|g| g.interval()).is_some_and(|(low, _)| low > 0.0)).count();
    format!(
        "{ends}; {verdict}. At {above} of {} lengths the whole interval of the gap is above 0 (W_Q = I's loss is higher).",
        budgets.len()
    )
}

/// The section: a row per training length, the gap's trend, and the plot's link.
pub(super) fn budget_section(outcomes: &[Outcome], studies: &[Study]) -> String {
    let budgets = budgets(outcomes, studies);
    if budgets.iter().filter(|b| b.gap().is_some()).count() < 2 {
        return String::new();
    }
    let mut out = String::from(
        "\n## Training budget\n\n\
         The headline's two runs trained for other numbers of steps, each a run of its own (warm-up, then a cosine that ends \
         at its last step), on the same batches seed by seed. The gap is wq-identity's best validation loss against \
         standard's, paired by seed, with its 95% Student-t interval.\n\n\
         | steps | tokens per run | seeds | standard, best val loss | wq-identity, best val loss | gap, paired | 95% interval |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for budget in &budgets {
        let gap = budget.gap();
        let loss = |list: &[&Outcome]| pm(mean_std(list.iter().map(|o| o.summary.best_val_loss)));
        out += &format!(
            "| {} | {:.2}M | {} | {} | {} | {} | {} |\n",
            budget.steps,
            budget.tokens / 1e6,
            gap.as_ref().map_or(0, PairedChange::seeds),
            loss(&budget.standard),
            loss(&budget.identity),
            super::findings::paired_cell(gap.as_ref()),
            interval_cell(gap.as_ref())
        );
    }
    out + "\n" + &trend(&budgets) + "\n\n![the gap against tokens seen](budget.svg)\n"
}

/// budget.svg: the gap in % of loss, with its 95% interval, against the tokens each run saw (a
/// log scale: the lengths double).
pub(super) fn budget_plot(outcomes: &[Outcome], studies: &[Study], out: &Path) -> Result<(), Failure> {
    let budgets = budgets(outcomes, studies);
    // The section links the plot exactly when it has two lengths to compare.
    if budgets.iter().filter(|b| b.gap().is_some()).count() < 2 {
        return Ok(());
    }
    let path = out.join("budget.svg");
    let failed = |e: String| format!("cannot draw {}: {e}", path.display());
    let points: Vec<(f64, f64, f64, f64)> = budgets
        .iter()
        .filter_map(|b| {
            let gap = b.gap()?;
            let (low, high) = gap.interval().unwrap_or((gap.stats().0, gap.stats().0));
            Some((b.tokens.max(1.0), gap.stats().0, low, high))
        })
        .collect();
    let (x_min, x_max) = points.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let (y_min, y_max) = points.iter().fold((0.0_f64, 0.0_f64), |(lo, hi), p| (lo.min(p.2), hi.max(p.3)));
    let pad = 0.1 * (y_max - y_min).max(0.1);
    let root = SVGBackend::new(&path, (720, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("wq-identity against standard: gap in best val loss (95% interval)", ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x_min / 1.5..x_max * 1.5).log_scale(), y_min - pad..y_max + pad)
        .map_err(|e| failed(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("tokens per run")
        .y_desc("gap (% of loss)")
        .x_label_formatter(&|x| format!("{:.1}M", x / 1e6))
        .draw()
        .map_err(|e| failed(e.to_string()))?;
    chart.draw_series(LineSeries::new([(x_min / 1.5, 0.0), (x_max * 1.5, 0.0)], BLACK.mix(0.4))).map_err(|e| failed(e.to_string()))?;
    let color = Palette99::pick(0).to_rgba();
    chart
        .draw_series(points.iter().map(|&(x, _, low, high)| PathElement::new(vec![(x, low), (x, high)], color.stroke_width(2))))
        .map_err(|e| failed(e.to_string()))?;
    chart
        .draw_series(points.iter().map(|&(x, mean, _, _)| Circle::new((x, mean), 4, color.filled())))
        .map_err(|e| failed(e.to_string()))?;
    chart.draw_series(LineSeries::new(points.iter().map(|p| (p.0, p.1)), color.stroke_width(2))).map_err(|e| failed(e.to_string()))?;
    root.present().map_err(|e| failed(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::findings::tests::finished;

    fn outcome(study: &str, name: &str, seed: u64, steps: usize, loss: f64) -> Outcome {
        let mut o = Outcome { study: study.into(), ..finished(name, seed, loss) };
        (o.summary.steps, o.summary.tokens) = (steps, steps * 768);
        o
    }

    /// The headline at 2,000 steps and budgets at 1,000 and 8,000, W_Q = I's gap `gaps` (in %
    /// of loss) at each, ±0.1 between seeds.
    fn outcomes(gaps: [f64; 3]) -> (Vec<Outcome>, Vec<Study>) {
        let mut outcomes = Vec::new();
        let mut studies = Vec::new();
        for (&steps, gap) in [1000, 2000, 8000].iter().zip(gaps) {
            let study = if steps == 2000 { PAPER1_HEADLINE_STUDY.to_string() } else { budget_study(steps) };
            let name = |n: &str| if steps == 2000 { n.to_string() } else { budget_run(n, steps) };
            for (seed, noise) in [(1, 0.1), (2, -0.1), (3, 0.0)] {
                let base = 2.0 - 0.05 * (steps as f64).log2();
                outcomes.push(outcome(&study, &name("standard"), seed, steps, base));
                outcomes.push(outcome(&study, &name("wq-identity"), seed, steps, base * (1.0 + (gap + noise) / 100.0)));
            }
            if steps != 2000 {
                let mut plan = qkv_train::plan::ExperimentPlan::default();
                plan.training.steps = Some(steps);
                studies.push(Study::new(budget_study(steps), plan));
            }
        }
        (outcomes, studies)
    }

    #[test]
    fn the_budget_table_has_a_row_per_length_and_reads_the_trend_from_the_ends() {
        let (all, studies) = outcomes([2.5, 1.9, 0.8]);
        let section = budget_section(&all, &studies);
        let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| steps")).collect();
        assert_eq!(rows.len(), 3, "{section}");
        assert!(rows[0].starts_with("| 1000 | 0.77M | 3 |") && rows[0].contains("| +2.50 ± 0.10% |"), "{section}");
        assert!(rows[2].starts_with("| 8000 | 6.14M | 3 |") && rows[2].contains("| +0.80 ± 0.10% |"), "{section}");
        assert!(section.contains("seed by seed, it moves by -1.70 ± 0.00% in loss"), "{section}");
        assert!(section.contains("it falls with training"), "{section}");
        assert!(section.contains("At 3 of 3 lengths the whole interval of the gap is above 0"), "{section}");
        // A gap that crosses 0 falls.
        let (all, studies) = outcomes([1.0, 0.5, -1.0]);
        assert!(budget_section(&all, &studies).contains("it falls with training"));

        let (all, studies) = outcomes([1.0, 1.0, 1.05]);
        let section = budget_section(&all, &studies);
        assert!(section.contains("it moves by +0.05 ± 0.00% in loss"), "{section}");
        assert_eq!(budget_section(&all, &[]).lines().filter(|l| l.starts_with("| 2000")).count(), 0, "the headline alone: no curve");
    }
}
