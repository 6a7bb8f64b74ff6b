//! Whether the models were still improving when training stopped: a comparison of models that
//! are still learning is a comparison of how fast they learn, not of where they end, and a
//! reviewer needs to know which one a report makes.

use crate::report::LossCurve;

use super::seeds::{Outcome, studies_of};
use super::stats::median;

/// A run counts as still improving when its validation loss fell by more than this share over
/// the last fifth of its training, and by more than [`STILL_FALLING_LOSS`].
const STILL_FALLING: f64 = 0.005;
/// The least fall that counts: a run that solved its task halves a loss of 10⁻⁵ and learns
/// nothing more.
const STILL_FALLING_LOSS: f64 = 0.001;

/// How the validation loss fell over the last fifth of training, from the last evaluation at or
/// before 80 % of the steps to the last one: as a share, and in loss. None without two such
/// evaluations.
fn late_fall(curve: &LossCurve) -> Option<(f64, f64)> {
    let &(last_step, last) = curve.val.last()?;
    let &(_, earlier) = curve.val.iter().rev().find(|(step, _)| *step <= last_step * 4 / 5)?;
    let (earlier, last) = (f64::from(earlier), f64::from(last));
    (earlier > 0.0 && earlier.is_finite() && last.is_finite()).then(|| ((earlier - last) / earlier, earlier - last))
}

/// Per study, how many runs were still improving at the end, and the median late fall; a
/// section of the report.
pub(super) fn convergence_section(outcomes: &[Outcome]) -> String {
    let mut lines = Vec::new();
    for study in studies_of(outcomes) {
        let late: Vec<(f64, f64)> = outcomes.iter().filter(|o| o.study == study).filter_map(|o| late_fall(&o.curve)).collect();
        let improving = late.iter().filter(|&&(share, loss)| share > STILL_FALLING && loss > STILL_FALLING_LOSS).count();
        let mut falls: Vec<f64> = late.iter().map(|&(share, _)| share).collect();
        let Some(median) = median(&mut falls).map(|fall| 100.0 * fall) else { continue };
        lines.push(format!(
            "- {study}: {improving} of {} runs still improving (median fall {median:.1}%){}",
            falls.len(),
            match improving {
                0 => ": they had levelled off, so the comparison is of where they end.",
                n if n == falls.len() =>
                    ": every run was still learning, so the comparison is of the models after this budget, not of where they would end.",
                _ => ": some were still learning, so a longer run could change the comparison.",
            }
        ));
    }
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "\n## Were the models still improving?\n\nA run counts as still improving when its validation loss fell by more than \
         {:.1}% and {STILL_FALLING_LOSS} over the last fifth of its training (from the last evaluation at or before 80% of its \
         steps to the last).\n\n{}\n",
        100.0 * STILL_FALLING,
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::findings::tests::finished;

    fn with_curve(mut outcome: Outcome, val: &[(usize, f32)]) -> Outcome {
        outcome.curve.val = val.to_vec();
        outcome
    }

    #[test]
    fn runs_whose_loss_still_falls_at_the_end_are_counted_as_improving() {
        let falling = [(0, 4.0), (800, 2.0), (1000, 1.9)];
        let flat = [(0, 4.0), (800, 2.0), (900, 1.999), (1000, 1.996)];
        assert!((late_fall(&with_curve(finished("a", 1, 1.9), &falling).curve).unwrap().0 - 0.05).abs() < 1e-6);
        assert!(late_fall(&with_curve(finished("a", 1, 1.9), &[(1000, 1.9)]).curve).is_none(), "one evaluation: no fall");

        let mixed = [with_curve(finished("a", 1, 1.9), &falling), with_curve(finished("b", 1, 2.0), &flat)];
        let section = convergence_section(&mixed);
        assert!(section.contains("- text: 1 of 2 runs still improving") && section.contains("a longer run could change"), "{section}");
        let levelled = [with_curve(finished("b", 1, 2.0), &flat)];
        assert!(convergence_section(&levelled).contains("0 of 1 runs still improving (median fall 0.2%): they had levelled off"));
        let all = [with_curve(finished("a", 1, 1.9), &falling)];
        assert!(convergence_section(&all).contains("every run was still learning"));
        assert_eq!(convergence_section(&[with_curve(finished("a", 1, 1.9), &[])]), "", "no curve: no section");
        // Two runs, falls of 5% and 0.2%: the median is between them, not the upper one.
        assert!(convergence_section(&mixed).contains("(median fall 2.6%)"), "{}", convergence_section(&mixed));
        // A solved run halving a loss of 2e-5 learns nothing more.
        let solved = [with_curve(finished("c", 1, 1e-5), &[(0, 2.0), (800, 2e-5), (1000, 1e-5)])];
        assert!(
            convergence_section(&solved).contains("0 of 1 runs still improving (median fall 50.0%)"),
            "{}",
            convergence_section(&solved)
        );
    }
}
