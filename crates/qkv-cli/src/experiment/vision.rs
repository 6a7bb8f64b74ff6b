//! `paper2-vision`'s findings: vision transformers of every variant on images, each seed's
//! held-out accuracy and loss paired against Q-K-V's, and paper 2's vision claim checked.

use qkv_train::DataSource;
use qkv_train::ImageSplit;
use qkv_train::baselines::Baselines;
use qkv_train::images::{ImageData, ImageSource};
use qkv_train::papers::{PAPER2_VISION_SOURCE, paper2_mnist_accuracy};

use super::catalogue::Study;
use super::findings::{by_run, pm};
use super::seeds::Outcome;
use super::stats::{Direction, Family, PairedChange, Unit, as_printed, mean_std, seeds_for_equivalence};

/// The largest accuracy change "competitive" may stand for, in points: one image in a hundred.
pub(super) const ACCURACY_MARGIN: f64 = 1.0;

/// A final validation loss this much above the run's best, and by at least [`OVERFIT_RISE`],
/// marks a run that overfit: it learned its training images at the cost of the others for the
/// last part of its training.
pub(super) const OVERFIT_RATIO: f64 = 1.1;
/// The least rise that counts: a run that solved its task moves between losses of 10⁻⁵ and 10⁻³,
/// far apart as ratios, and overfits nothing.
pub(super) const OVERFIT_RISE: f64 = 0.01;

/// The accuracy a study is decided by, as a fraction: the test split's, scored once at the end,
/// or the validation split's where the data have no test split apart.
fn decided_accuracy(outcome: &Outcome) -> Option<f64> {
    outcome.summary.test_accuracy.or(outcome.summary.accuracy)
}

/// Each seed's decided accuracy ([`decided_accuracy`]), for pairing.
fn accuracies(list: &[&Outcome]) -> Vec<(u64, f64)> {
    list.iter().filter_map(|o| Some((o.seed, decided_accuracy(o)?))).collect()
}

/// Whether `outcome`'s final validation loss is more than [`OVERFIT_RATIO`] of its best and
/// [`OVERFIT_RISE`] above it.
fn overfit(outcome: &Outcome) -> Option<bool> {
    let (last, best) = (outcome.summary.final_val_loss?, outcome.summary.best_val_loss?);
    Some(last > OVERFIT_RATIO * best && last - best > OVERFIT_RISE)
}

/// Whether paper 2's MNIST figures belong beside a study of `data`: handwritten digits.
fn beside_mnist(data: &DataSource) -> bool {
    matches!(data, DataSource::Images(ImageSource::Digits | ImageSource::Mnist(_)))
}

/// An accuracy table cell: the paired mean change in points ± its std over seeds.
fn points_cell(change: Option<&PairedChange>) -> String {
    change.map_or("-".into(), |c| match c.stats() {
        (m, s, n) if n > 1 => format!("{} ± {s:.2}", Unit::Accuracy.amount(m)),
        (m, _, _) => Unit::Accuracy.amount(m),
    })
}

/// Mean ± std over seeds of an accuracy, in percent; "-" where no seed has one.
fn percent_cell(values: impl Iterator<Item = Option<f64>>) -> String {
    mean_std(values).map_or("-".into(), |(m, s, n)| match n {
        1 => format!("{:.2}%", 100.0 * m),
        _ => format!("{:.2} ± {:.2}%", 100.0 * m, 100.0 * s),
    })
}

/// Each study's table: parameters; best and final validation loss and how many runs overfit;
/// validation and test accuracy, the decided one paired by seed with Q-K-V (the study's first
/// run); paper 2's MNIST figure beside it; then the trivial baselines.
pub(super) fn vision_report(outcomes: &[Outcome], studies: &[Study]) -> String {
    let mut out = format!(
        "\nEvery run is selected and watched on the validation images only; the test images are scored once, by the model \
         each run ends with. Changes are against Q-K-V, paired by seed: mean ± std over seeds of each seed's change in test \
         accuracy (validation accuracy where the set has no test split), in points. A run overfit when its final validation \
         loss is more than {:.0}% and {OVERFIT_RISE} above its best. The last column is paper 2's accuracy on MNIST, beside \
         handwritten digits only: another dataset (28×28 digits, 60,000 to train), for the direction of each change, not \
         its level. The last two rows are trivial \
         classifiers trained on the same training images and scored on the same validation and test ones, no seeds: each \
         image given the label of the nearest training image, and a multinomial logistic regression on the pixels.\n",
        100.0 * (OVERFIT_RATIO - 1.0)
    );
    for study in studies {
        let rows = by_run(outcomes, &study.name);
        let Some((_, reference)) = rows.first() else { continue };
        let reference_accuracies = accuracies(reference);
        out += &format!("\n### {} ({})\n\n", study.name, study.plan.data);
        out += "| variant | params | best val loss | final val loss | runs that overfit | validation accuracy | test accuracy \
                | Δ accuracy, paired | paper 2, MNIST |\n";
        out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (i, (name, list)) in rows.iter().enumerate() {
            let change = match i {
                0 => "reference".into(),
                _ => points_cell(PairedChange::of(Unit::Accuracy, &accuracies(list), &reference_accuracies).as_ref()),
            };
            let judged: Vec<bool> = list.iter().filter_map(|o| overfit(o)).collect();
            let mnist =
                paper2_mnist_accuracy(name).filter(|_| beside_mnist(&study.plan.data)).map_or("-".into(), |a| format!("{:.1}%", 100.0 * a));
            out += &format!(
                "| {name} | {} | {} | {} | {} of {} | {} | {} | {change} | {mnist} |\n",
                list[0].summary.total_params,
                pm(mean_std(list.iter().map(|o| o.summary.best_val_loss))),
                pm(mean_std(list.iter().map(|o| o.summary.final_val_loss))),
                judged.iter().filter(|&&overfit| overfit).count(),
                judged.len(),
                percent_cell(list.iter().map(|o| o.summary.accuracy)),
                percent_cell(list.iter().map(|o| o.summary.test_accuracy)),
            );
        }
        out += &baseline_rows(&study.plan.data);
    }
    out
}

/// The trivial classifiers' rows on the study's own splits (`qkv_train::baselines`): nearest
/// neighbour, which has no parameters, and a linear classifier (a weight per pixel and class,
/// and a bias per class), each scored on the validation and the test images. Empty where the
/// data are not images, or cannot be read.
fn baseline_rows(data: &DataSource) -> String {
    let DataSource::Images(source) = data else { return String::new() };
    let Ok(images) = ImageData::load(source) else { return String::new() };
    let splits: Vec<&ImageSplit> = std::iter::once(&images.val).chain(images.test.as_ref()).collect();
    let scored = Baselines::of(&images.train, &splits, images.classes);
    let (on_val, on_test) = (scored[0], scored.get(1).copied());
    let cell = |accuracy: Option<f64>| accuracy.map_or("-".into(), |a| format!("{:.2}%", 100.0 * a));
    let linear_params = images.classes * (images.shape.values() + 1);
    let row = |name: &str, params: usize, val: f64, test: Option<f64>| {
        format!("| *{name} (baseline)* | {params} | - | - | - | {} | {} | - | - |\n", cell(Some(val)), cell(test))
    };
    row("nearest neighbour", 0, on_val.nearest_neighbour, on_test.map(|b| b.nearest_neighbour))
        + &row("linear classifier", linear_params, on_val.linear, on_test.map(|b| b.linear))
}

/// Paper 2's vision claim, Q-K=V stays competitive, checked in the first study: its decided
/// accuracy against Q-K-V's, within ±[`ACCURACY_MARGIN`] points by two one-sided tests, with the
/// seeds that test needs at the spread seen; then every variant's accuracy change, each test
/// corrected together with the others (Holm).
pub(super) fn vision_against_paper(outcomes: &[Outcome], studies: &[Study]) -> String {
    let Some(study) = studies.first() else { return String::new() };
    let rows = by_run(outcomes, &study.name);
    let Some((reference_name, reference)) = rows.first() else { return String::new() };
    let reference_accuracies = accuracies(reference);
    let on_test = reference.iter().all(|o| o.summary.test_accuracy.is_some());
    let tested = if on_test { "test" } else { "validation" };
    let images = ImageData::load(match &study.plan.data {
        DataSource::Images(source) => source,
        _ => return String::new(),
    });
    let count = images.as_ref().ok().map(|images| if on_test { images.test.as_ref().map_or(0, ImageSplit::len) } else { images.val.len() });
    let per_point =
        count.map_or(String::new(), |count| format!(" ({:.0} of the {count} {tested} images)", ACCURACY_MARGIN * count as f64 / 100.0));
    let mut family = Family::default();
    let mut out = format!(
        "\n## Against the paper (vision)\n\n\
         Paper 2 trains ViT-style encoders on MNIST up to TinyImageNet and finds that Q-K=V stays competitive on vision. \
         Here \"competitive\" is read as within ±{ACCURACY_MARGIN} point of Q-K-V's {tested} accuracy{per_point}, by two \
         one-sided tests.\n\n"
    );
    let mut directions = Vec::new();
    for (name, list) in rows.iter().skip(1) {
        let Some(change) = PairedChange::of(Unit::Accuracy, &accuracies(list), &reference_accuracies) else { continue };
        directions.extend(direction_against_mnist(name, reference_name, &change));
        let differs = family.difference(name, reference_name, &change);
        if name == "Q-K=V" {
            let within = family.equivalence(name, reference_name, &change, ACCURACY_MARGIN);
            out += &format!(
                "Q-K=V against {reference_name} in {tested} accuracy: {change}: {}{differs}{within}.\n\n{}\n",
                competitive(&change),
                power(&change)
            );
        }
    }
    if !directions.is_empty() {
        out += &format!(
            "\nEach change beside the same change in {PAPER2_VISION_SOURCE} (another dataset; one figure a variant there, \
             the mean over seeds here): {}.\n",
            directions.join("; ")
        );
    }
    family.settle(&out) + &family.holm_section()
}

/// `name`'s change against `reference` here beside paper 2's on MNIST, and whether the two point
/// the same way; None where the paper has no figure for either.
fn direction_against_mnist(name: &str, reference: &str, change: &PairedChange) -> Option<String> {
    let theirs = 100.0 * (paper2_mnist_accuracy(name)? - paper2_mnist_accuracy(reference)?);
    let (ours, _, _) = change.stats();
    // Each side judged on its figure as printed: 0.1 point there, 0.01 here.
    let agree = if as_printed(theirs, 1) == 0.0 {
        "no change there"
    } else if as_printed(ours, 2) == 0.0 {
        "no change here"
    } else if ours.signum() == theirs.signum() {
        "the same direction"
    } else {
        "opposite directions"
    };
    Some(format!("{name} {theirs:+.1} pt there, {} here ({agree})", Unit::Accuracy.amount(ours)))
}

/// The power calculation behind the report's seeds: how many the ±[`ACCURACY_MARGIN`] test needs
/// at the spread its seeds show, against how many it has.
fn power(change: &PairedChange) -> String {
    let (_, std, n) = change.stats();
    match seeds_for_equivalence(std, ACCURACY_MARGIN) {
        Some(needed) if n >= 2 && std > 0.0 => format!(
            "Seeds: at the spread these {n} seeds show (std {std:.2} points), {needed} seeds give the ±{ACCURACY_MARGIN} point test an \
             80% chance to pass when there is no change; this report has {n}{}.",
            if n >= needed { "" } else { ", too few to expect a decision" }
        ),
        _ => format!("Seeds: {n}, too few to estimate the spread a power calculation needs."),
    }
}

/// Whether `change`, in points of accuracy, bears out "stays competitive".
fn competitive(change: &PairedChange) -> String {
    let Some(p) = change.equivalence_p(ACCURACY_MARGIN) else { return "one seed cannot say whether this holds".into() };
    if p < 0.05 {
        return format!("competitive here too: within ±{ACCURACY_MARGIN} point by two one-sided tests (p = {p:.3})");
    }
    match change.direction() {
        Direction::Lower => "not competitive here: lower in every part of the interval".into(),
        Direction::Higher => "better than Q-K-V here, the interval excluding 0".into(),
        Direction::Undecided => format!(
            "cannot tell: the interval includes 0, but the seeds do not place the change within ±{ACCURACY_MARGIN} point \
             (two one-sided tests, p = {p:.3})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::findings::tests::finished;

    fn run(name: &str, seed: u64, loss: f64, accuracy: f64) -> Outcome {
        let mut outcome = finished(name, seed, loss);
        outcome.study = "digits".into();
        outcome.summary.accuracy = Some(accuracy);
        outcome.summary.test_accuracy = Some(accuracy);
        outcome
    }

    fn study() -> Study {
        let plan = qkv_train::ExperimentPlan { data: "digits".parse().unwrap(), ..Default::default() };
        Study::new("digits", plan)
    }

    #[test]
    fn the_table_pairs_test_accuracy_with_q_k_v_and_counts_the_runs_that_overfit() {
        let mut outcomes: Vec<Outcome> = [(1, 0.10, 0.97, 0.11, 0.96), (2, 0.12, 0.98, 0.12, 0.97), (3, 0.08, 0.96, 0.10, 0.96)]
            .into_iter()
            .flat_map(|(seed, a, acc_a, b, acc_b)| [run("Q-K-V", seed, a, acc_a), run("Q-K=V", seed, b, acc_b)])
            .collect();
        // Q-K=V's second seed ends 15% (0.018) above its best validation loss: it overfit. Its
        // third ends 20% above a best of 0.001, a rise too small to count.
        outcomes[3].summary.final_val_loss = Some(0.12 * 1.15);
        outcomes[5].summary.best_val_loss = Some(0.001);
        outcomes[5].summary.final_val_loss = Some(0.0012);
        let report = vision_report(&outcomes, &[study()]);
        let rows: Vec<&str> = report.lines().filter(|l| l.starts_with("| Q-K")).collect();
        assert!(rows[0].ends_with("| 0 of 3 | 97.00 ± 1.00% | 97.00 ± 1.00% | reference | 98.1% |"), "{report}");
        // Accuracy changes -1, -1, 0 points: mean -0.67 ± 0.58. Paper 2 has Q-K=V at 97.6% on MNIST.
        assert!(rows[1].ends_with("| 1 of 3 | 96.33 ± 0.58% | 96.33 ± 0.58% | -0.67 pt ± 0.58 | 97.6% |"), "{report}");
        // The baselines are scored on both splits of the embedded digits.
        let baseline = report.lines().find(|l| l.starts_with("| *nearest neighbour")).unwrap();
        assert_eq!(baseline.matches('%').count(), 2, "{baseline}");
    }

    #[test]
    fn competitive_needs_the_interval_inside_the_margin() {
        let outcomes = |changes: [f64; 3]| -> Vec<Outcome> {
            (0..3u64)
                .flat_map(|seed| [run("Q-K-V", seed, 0.1, 0.97), run("Q-K=V", seed, 0.1, 0.97 + changes[seed as usize] / 100.0)])
                .collect()
        };
        let close = vision_against_paper(&outcomes([0.1, -0.1, 0.0]), &[study()]);
        assert!(close.contains("competitive here too"), "{close}");
        assert!(close.contains("Q-K=V -0.5 pt there, +0.00 pt here (no change here)"), "{close}");
        assert!(close.contains("| Q-K=V against Q-K-V | within ±1 pt |"), "{close}");
        let loose = vision_against_paper(&outcomes([2.0, -2.5, 0.3]), &[study()]);
        assert!(loose.contains("cannot tell"), "{loose}");
        // Changes of +2.0, -2.5 and +0.3 points scatter with a std of 2.27 points: 46 seeds (the normal
        // approximation, (2.27 · (1.645 + 1.282))², gives 44; t with few degrees of freedom, a few more).
        assert!(loose.contains("(std 2.27 points), 46 seeds give the ±1 point test an 80% chance"), "{loose}");
        assert!(loose.contains("this report has 3, too few to expect a decision"), "{loose}");
        assert!(loose.contains("Q-K-V's test accuracy (3 of the 299 test images)"), "{loose}");
        let worse = vision_against_paper(&outcomes([-3.0, -3.3, -2.8]), &[study()]);
        assert!(worse.contains("not competitive here"), "{worse}");
        // Paper 2 has Q-K=V 0.5 points below Q-K-V on MNIST (97.6% against 98.1%).
        assert!(worse.contains("Q-K=V -0.5 pt there, -3.03 pt here (the same direction)"), "{worse}");
        assert!(loose.contains("Q-K=V -0.5 pt there, -0.07 pt here (the same direction)"), "{loose}");
    }
}
