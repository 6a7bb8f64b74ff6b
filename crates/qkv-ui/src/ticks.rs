//! Round axis ticks: 1, 2 or 5 times a power of ten, three to seven of them, the same rule for
//! the charts on screen and the exported figures.

use egui_plot::{GridInput, GridMark};

/// The fewest and the most ticks an axis shows (fewer read as no scale, more crowd the labels).
pub const TICKS: std::ops::RangeInclusive<usize> = 3..=7;

/// The round step for ticks from `low` to `high`, at least `least` apart (1 for steps, which
/// are whole): of the round steps near a fifth of the span, the one that puts closest to five
/// ticks within [`TICKS`].
pub fn round_step(low: f64, high: f64, least: f64) -> f64 {
    let span = (high - low).max(1e-12);
    let raw = (span / 5.0).max(least);
    let magnitude = 10f64.powf(raw.log10().floor());
    let count = |step: f64| ((high / step).floor() - (low / step).ceil() + 1.0).max(0.0) as usize;
    let candidates = [0.5, 1.0, 2.0, 5.0, 10.0, 20.0].map(|m| m * magnitude);
    candidates
        .into_iter()
        .filter(|&step| step >= least && TICKS.contains(&count(step)))
        .min_by_key(|&step| count(step).abs_diff(5))
        .unwrap_or_else(|| candidates.into_iter().find(|&step| step >= raw).unwrap_or(10.0 * magnitude))
}

/// The tick values from `low` to `high` at [`round_step`].
pub fn ticks(low: f64, high: f64, least: f64) -> Vec<f64> {
    let step = round_step(low, high, least);
    let (first, last) = ((low / step).ceil() as i64, (high / step).floor() as i64);
    (first..=last).map(|i| i as f64 * step).collect()
}

/// egui_plot's finest grid, in points: its `GridInput::base_step_size` is this many points in the
/// axis's values (the default `Plot::grid_spacing`, which the charts keep).
const FINEST_GRID_POINTS: f64 = 8.0;

/// The fewest points between two labelled ticks: egui_plot fades a y label out below 30 points
/// apart and an x label below 80 (its axes' label spacing), so a short chart gets fewer ticks
/// rather than ticks without labels.
pub const LABEL_POINTS: [f64; 2] = [80.0, 30.0];

/// A grid spacer for egui_plot: one round tick level, every tick labelled (egui_plot's default
/// divides each decade by ten and showed up to fourteen labels), at least `least` apart in
/// values and `points` apart on screen.
pub fn spacer(least: f64, points: f64) -> impl Fn(GridInput) -> Vec<GridMark> {
    move |input| {
        let (low, high) = input.bounds;
        let least = least.max(input.base_step_size * points / FINEST_GRID_POINTS);
        let step = round_step(low, high, least);
        ticks(low, high, least).into_iter().map(|value| GridMark { value, step_size: step }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::decimals;

    #[test]
    fn ticks_are_round_and_inside_the_range() {
        assert_eq!(ticks(0.0, 100.0, 1.0), [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(0.0, 1.0, 1.0), [0.0, 1.0], "whole steps only");
        let close = ticks(4.331, 4.347, 0.0);
        assert!(close.len() >= 3 && close.iter().all(|t| (4.331..=4.347).contains(t)), "{close:?}");
        assert_eq!(decimals(close[1] - close[0]), 3);
    }

    /// Loss ranges as the lessons' charts see them, from untrained (a hair apart) to a run's
    /// whole descent, and step ranges from a few steps to long runs.
    #[test]
    fn every_range_gets_three_to_seven_round_ticks_and_no_label_twice() {
        let mut ranges = Vec::new();
        for low in [0.0, 0.013, 0.9, 1.37, 2.5, 3.86, 4.1] {
            for span in [0.011, 0.05, 0.1, 0.23, 0.5, 0.77, 1.0, 1.3, 2.6, 3.3, 4.4, 7.0, 9.9] {
                ranges.push((low, low + span, 0.0));
            }
        }
        for steps in [6.0, 10.0, 37.0, 60.0, 100.0, 300.0, 500.0, 999.0, 2000.0, 12_345.0] {
            ranges.push((0.0, steps, 1.0));
        }
        for (low, high, least) in ranges {
            let marks = ticks(low, high, least);
            assert!(TICKS.contains(&marks.len()), "{low}..{high}: {marks:?}");
            let step = round_step(low, high, least);
            let mantissa = step / 10f64.powf(step.log10().floor());
            assert!([1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-9), "{low}..{high}: step {step}");
            let labels: Vec<String> = marks.iter().map(|v| format!("{v:.*}", decimals(step))).collect();
            let mut distinct = labels.clone();
            distinct.dedup();
            assert_eq!(distinct, labels, "{low}..{high}: a label repeated");
            if least >= 1.0 {
                assert!(marks.iter().all(|v| v.fract() == 0.0), "{low}..{high}: steps are whole: {marks:?}");
            }
        }
    }
}
