//! The reports' statistics: mean ± std over seeds, and paired per-seed changes with a Student-t
//! interval. Runs of one seed train on the same batches and every seed is validated on the same
//! batches, so a run's change against the reference within each seed is the sharp comparison: the
//! seed-to-seed spread of the losses themselves also holds how lucky each seed's initialisation
//! and batch order were.

use std::fmt;

/// Mean and sample standard deviation of the finite values present, and how many there were.
pub(super) fn mean_std(values: impl Iterator<Item = Option<f64>>) -> Option<(f64, f64, usize)> {
    let v: Vec<f64> = values.flatten().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = if v.len() > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64 } else { 0.0 };
    Some((mean, var.sqrt(), v.len()))
}

/// The median of `values` (sorted here): the middle one, or the mean of the two middle ones when
/// there are an even number. None for none.
pub(crate) fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 1 => Some(values[middle]),
        _ => Some((values[middle - 1] + values[middle]) / 2.0),
    }
}

/// `value` as a report prints it to `digits` decimals, so that a verdict read from the figure
/// (its sign, whether it is 0) is the one the reader sees.
pub(super) fn as_printed(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

/// "+2.06", two decimals with a sign; a change that rounds to zero is "+0.00", never "-0.00".
pub(super) fn signed(value: f64) -> String {
    let rounded = as_printed(value, 2);
    format!("{:+.2}", if rounded == 0.0 { 0.0 } else { rounded })
}

/// What a change is measured in. At the character level a loss change of x % is a perplexity
/// change of about 2x %, so every figure says which it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    /// 100 · (a − b) / b of the validation losses.
    Loss,
    /// 100 · (exp(a − b) − 1): the change of the validation perplexity exp(loss).
    Perplexity,
    /// 100 · (a − b) of accuracies given as fractions: percentage points.
    Accuracy,
}

impl Unit {
    pub(super) fn change(self, value: f64, reference: f64) -> f64 {
        match self {
            Unit::Loss => 100.0 * (value - reference) / reference,
            Unit::Perplexity => 100.0 * ((value - reference).exp() - 1.0),
            Unit::Accuracy => 100.0 * (value - reference),
        }
    }

    /// A change with its sign and unit: "+2.06%", or "+2.06 pt" for accuracy.
    pub(super) fn amount(self, change: f64) -> String {
        match self {
            Unit::Accuracy => format!("{} pt", signed(change)),
            _ => format!("{}%", signed(change)),
        }
    }

    /// What the changes are of, after the mean ± std: "% in loss", " points of accuracy".
    fn of_what(self) -> &'static str {
        match self {
            Unit::Loss => "% in loss",
            Unit::Perplexity => "% in perplexity",
            Unit::Accuracy => " points of accuracy",
        }
    }
}

/// A run's change against a reference run, seed by seed (seeds where both have a value).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PairedChange {
    pub(super) unit: Unit,
    /// (seed, change in %), in the order of the run's seeds.
    pub(super) per_seed: Vec<(u64, f64)>,
}

/// Which side of zero a change's 95 % interval lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    /// The whole interval is below zero: lower loss than the reference.
    Lower,
    /// The whole interval is above zero.
    Higher,
    /// The interval contains zero, or one seed gives no interval: the seeds cannot tell.
    Undecided,
}

impl PairedChange {
    /// The change of `values` against `reference`, both as (seed, validation loss); None where no
    /// seed has both.
    pub(super) fn of(unit: Unit, values: &[(u64, f64)], reference: &[(u64, f64)]) -> Option<Self> {
        let per_seed: Vec<(u64, f64)> = values
            .iter()
            .filter_map(|&(seed, value)| {
                let &(_, base) = reference.iter().find(|(s, _)| *s == seed)?;
                let change = unit.change(value, base);
                change.is_finite().then_some((seed, change))
            })
            .collect();
        (!per_seed.is_empty()).then_some(Self { unit, per_seed })
    }

    pub(super) fn seeds(&self) -> usize {
        self.per_seed.len()
    }

    /// Mean and std over seeds of the change, and the number of seeds.
    pub(super) fn stats(&self) -> (f64, f64, usize) {
        mean_std(self.per_seed.iter().map(|(_, c)| Some(*c))).expect("at least one seed")
    }

    /// The 95 % Student-t interval of the mean change; None with one seed.
    pub(super) fn interval(&self) -> Option<(f64, f64)> {
        let (mean, std, n) = self.stats();
        if n < 2 {
            return None;
        }
        let half = t_quantile_975(n - 1) * std / (n as f64).sqrt();
        Some((mean - half, mean + half))
    }

    /// The 95 % interval as the reports print it, "-1.20% to +0.40%"; None with one seed.
    pub(super) fn interval_text(&self) -> Option<String> {
        self.interval().map(|(low, high)| format!("{} to {}", self.unit.amount(low), self.unit.amount(high)))
    }

    /// The t-statistic mean / (std / √n); None with one seed or no spread.
    pub(super) fn t(&self) -> Option<f64> {
        let (mean, std, n) = self.stats();
        (n > 1 && std > 0.0).then(|| mean / (std / (n as f64).sqrt()))
    }

    /// The two-sided p-value of "the mean change is 0"; None with one seed.
    pub(super) fn p_value(&self) -> Option<f64> {
        let (mean, _, n) = self.stats();
        if n < 2 {
            return None;
        }
        // Without spread (no t), every seed says the same: 0, or not 0.
        Some(match self.t() {
            Some(t) => 2.0 * t_upper_tail(t.abs(), n - 1),
            None => {
                if mean == 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
        })
    }

    /// Two one-sided tests (TOST) of "the change lies at −margin or below, or at +margin or
    /// above": its p-value, the larger of the two one-sided ones. Below 0.05 exactly when the 90 %
    /// interval lies inside ±margin, which is what "on par within ±margin" may claim; None with
    /// one seed.
    pub(super) fn equivalence_p(&self, margin: f64) -> Option<f64> {
        let (mean, std, n) = self.stats();
        if n < 2 {
            return None;
        }
        if std == 0.0 {
            return Some(if mean.abs() < margin { 0.0 } else { 1.0 });
        }
        let error = std / (n as f64).sqrt();
        let (above_low, below_high) = (t_upper_tail((mean + margin) / error, n - 1), t_upper_tail((margin - mean) / error, n - 1));
        Some(above_low.max(below_high))
    }

    /// How many seeds would decide "within ±margin" at the spread these seeds show: a sentence
    /// for a verdict that could not ([`seeds_for_equivalence`]); empty with fewer than two seeds
    /// or no spread.
    pub(super) fn seeds_needed(&self, margin: f64) -> String {
        let (_, std, n) = self.stats();
        if n < 2 || std == 0.0 {
            return String::new();
        }
        let amount = |x: f64| self.unit.amount(x).trim_start_matches('+').to_string();
        match seeds_for_equivalence(std, margin) {
            Some(seeds) => format!(
                "; at this spread between seeds (std {}), {seeds} seeds would give the test an 80% chance to pass if there is \
                 no change",
                amount(std)
            ),
            None => format!("; at this spread between seeds (std {}), no number of seeds up to 1,000 would", amount(std)),
        }
    }

    pub(super) fn direction(&self) -> Direction {
        match self.interval() {
            Some((low, _)) if low > 0.0 => Direction::Higher,
            Some((_, high)) if high < 0.0 => Direction::Lower,
            _ => Direction::Undecided,
        }
    }

    /// The seeds' changes, "+2.20%, +2.54%, +1.45%".
    pub(super) fn listed(&self) -> String {
        self.per_seed.iter().map(|(_, c)| self.unit.amount(*c)).collect::<Vec<_>>().join(", ")
    }
}

/// "+2.06 ± 0.56% in loss (95% interval +0.67% to +3.45%, t = 6.4; per seed: ...)".
impl fmt::Display for PairedChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mean, std, n) = self.stats();
        let what = self.unit.of_what();
        if n < 2 {
            return write!(f, "{}{what} (one seed: no interval)", signed(mean));
        }
        let interval = self.interval_text().expect("two or more seeds");
        write!(f, "{} ± {std:.2}{what} (95% interval {interval}", signed(mean))?;
        if let Some(t) = self.t() {
            write!(f, ", t = {t:.1}")?;
        }
        write!(f, "; per seed: {})", self.listed())
    }
}

/// The seeds a paired test of "within ±`margin`" (two one-sided tests at 5 %) needs to pass with
/// an 80 % chance when the true change is 0 and the seeds' changes scatter with standard
/// deviation `std`: the least n with √n · margin / std ≥ t₀.₉₅(n − 1) + t₀.₉₀(n − 1), the usual
/// approximation; `None` beyond 1,000 seeds.
pub(super) fn seeds_for_equivalence(std: f64, margin: f64) -> Option<usize> {
    (2..=1000).find(|&n| {
        let df = n - 1;
        (n as f64).sqrt() * margin / std >= t_central_quantile(0.90, df) + t_central_quantile(0.80, df)
    })
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom: the half-width of a 95 %
/// interval in standard errors.
pub(super) fn t_quantile_975(df: usize) -> f64 {
    t_central_quantile(0.95, df)
}

/// The t with P(|T| < t) = `central`: the half-width, in standard errors, of the interval that
/// holds that share. Solved by bisection on the exact distribution function.
fn t_central_quantile(central: f64, df: usize) -> f64 {
    let (mut low, mut high) = (0.0, 1000.0);
    for _ in 0..100 {
        let mid = 0.5 * (low + high);
        if t_central_probability(mid, df) < central { low = mid } else { high = mid }
    }
    0.5 * (low + high)
}

/// P(T ≥ x) for Student's t with `df` degrees of freedom.
fn t_upper_tail(x: f64, df: usize) -> f64 {
    let outside = 1.0 - t_central_probability(x.abs(), df);
    if x >= 0.0 { outside / 2.0 } else { 1.0 - outside / 2.0 }
}

/// Holm's step-down correction of a family of p-values, in their order: the i-th smallest is
/// multiplied by (m − i + 1), then each adjusted value is raised to the largest before it, so that
/// comparing every adjusted value with 0.05 keeps the chance of any false finding in the family
/// at 5 %.
pub(super) fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let mut adjusted = vec![0.0; m];
    let mut largest = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        largest = largest.max(((m - rank) as f64 * p_values[i]).min(1.0));
        adjusted[i] = largest;
    }
    adjusted
}

/// P(|T| < t) for Student's t with `df` ≥ 1 degrees of freedom, from the finite series in
/// θ = atan(t / √df) that integer degrees of freedom allow (Abramowitz & Stegun 26.7.3–4).
fn t_central_probability(t: f64, df: usize) -> f64 {
    let theta = (t / (df as f64).sqrt()).atan();
    let (sin, cos) = theta.sin_cos();
    // Σ c_k cos^k θ for k = first, first + 2, …, df − 2, with c_first = 1 and
    // c_(k+2) = c_k · (k + 1) / (k + 2): 1 + ½cos² + ⅜cos⁴ + … (even df), cos + ⅔cos³ + … (odd).
    let series = |first: usize| {
        let (mut sum, mut term, mut k) = (0.0, cos.powi(first as i32), first);
        while k + 2 <= df {
            sum += term;
            term *= (k + 1) as f64 / (k + 2) as f64 * cos * cos;
            k += 2;
        }
        sum
    };
    if df.is_multiple_of(2) { sin * series(0) } else { 2.0 / std::f64::consts::PI * (theta + sin * series(1)) }
}

/// The tests one report makes, so that they can be corrected together: each named, with what
/// it tests and its p-value.
#[derive(Debug, Default)]
pub(super) struct Family {
    tests: Vec<(String, String, f64)>,
}

/// Where a finding's test is named in the report's text, written right after the finding's
/// verdict: [`Family::settle`] puts a note there when the test holds alone but not after Holm's
/// correction, and nothing otherwise.
#[derive(Debug, Clone, Copy)]
pub(super) struct HolmMark(Option<usize>);

impl fmt::Display for HolmMark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(test) => write!(f, "{}", Family::placeholder(test)),
            None => Ok(()),
        }
    }
}

impl Family {
    /// "`change` of run `compared` against run `reference` is not 0", by its two-sided t-test
    /// (nothing with one seed).
    pub(super) fn difference(&mut self, compared: &str, reference: &str, change: &PairedChange) -> HolmMark {
        self.add(compared, reference, "differs from 0".into(), change.p_value())
    }

    /// "`change` lies within ±margin", by two one-sided tests (nothing with one seed).
    pub(super) fn equivalence(&mut self, compared: &str, reference: &str, change: &PairedChange, margin: f64) -> HolmMark {
        let within = match change.unit {
            Unit::Accuracy => format!("within ±{margin} pt"),
            Unit::Loss | Unit::Perplexity => format!("within ±{margin}%"),
        };
        self.add(compared, reference, within, change.equivalence_p(margin))
    }

    fn add(&mut self, compared: &str, reference: &str, tested: String, p: Option<f64>) -> HolmMark {
        let Some(p) = p else { return HolmMark(None) };
        self.tests.push((Self::name(compared, reference), tested, p));
        HolmMark(Some(self.tests.len() - 1))
    }

    fn placeholder(test: usize) -> String {
        format!("\u{1}holm {test}\u{1}")
    }

    /// `text` with each [`HolmMark`] replaced: a finding whose test holds at 5% alone but not
    /// once the report's tests are corrected together says so where it is stated.
    pub(super) fn settle(&self, text: &str) -> String {
        let adjusted = holm(&self.tests.iter().map(|(_, _, p)| *p).collect::<Vec<_>>());
        let mut settled = text.to_string();
        for (test, ((_, _, p), corrected)) in self.tests.iter().zip(adjusted).enumerate() {
            let note = if *p < 0.05 && corrected >= 0.05 {
                format!(" (but not after Holm's correction for the report's {} tests: corrected p = {corrected:.4})", self.tests.len())
            } else {
                String::new()
            };
            settled = settled.replace(&Self::placeholder(test), &note);
        }
        settled
    }

    /// A comparison's name in the table, "A against B": scripts/recompute.py reads the two runs'
    /// names back from it.
    fn name(compared: &str, reference: &str) -> String {
        format!("{compared} against {reference}")
    }

    /// The report's tests in markdown, each p-value beside its Holm-corrected one and whether it
    /// holds at 5 % after the correction; empty without tests.
    pub(super) fn holm_section(&self) -> String {
        if self.tests.is_empty() {
            return String::new();
        }
        let adjusted = holm(&self.tests.iter().map(|(_, _, p)| *p).collect::<Vec<_>>());
        let mut out = format!(
            "\n## The report's {} tests, corrected together\n\n\
             Each finding above is decided by its own interval. Made together, {} tests would find something by chance \
             more often than 5% of the time: Holm's correction multiplies the i-th smallest p-value by (m − i + 1) and \
             keeps the order, so that a finding that holds below holds with a 5% chance of any false finding in the \
             report.\n\n| comparison | tested | p | Holm-corrected p | holds at 5% |\n|---|---|---:|---:|---|\n",
            self.tests.len(),
            self.tests.len()
        );
        for ((name, tested, p), corrected) in self.tests.iter().zip(adjusted) {
            out += &format!("| {name} | {tested} | {p:.4} | {corrected:.4} | {} |\n", if corrected < 0.05 { "yes" } else { "no" });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_between_the_middle_two() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        // Student's 0.975 quantiles, as printed in every statistics table.
        for (df, table) in [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (9, 2.262), (30, 2.042)] {
            let t = t_quantile_975(df);
            assert!((t - table).abs() < 1e-3, "df {df}: {t} against {table}");
        }
    }

    #[test]
    fn paired_changes_pair_by_seed_and_carry_their_unit() {
        let reference = [(1, 2.0), (2, 2.1), (3, 1.9)];
        let values = [(3, 1.9 * 1.02), (1, 2.0 * 1.01), (2, 2.1 * 1.03)];
        let change = PairedChange::of(Unit::Loss, &values, &reference).unwrap();
        assert_eq!(change.seeds(), 3);
        assert!((change.stats().0 - 2.0).abs() < 1e-9);
        // std 1, n 3: the interval is 2 ± 4.303 / √3.
        let (low, high) = change.interval().unwrap();
        assert!((high - low - 2.0 * 4.303 / 3f64.sqrt()).abs() < 1e-2, "{low} {high}");
        assert_eq!(change.direction(), Direction::Undecided);
        assert!((change.t().unwrap() - 2.0 * 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(change.listed(), "+2.00%, +1.00%, +3.00%");
        assert!(change.to_string().starts_with("+2.00 ± 1.00% in loss (95% interval"), "{change}");

        // A perplexity change is exp(Δloss) − 1: 0.05 nats more is +5.13 %.
        let ppl = PairedChange::of(Unit::Perplexity, &[(1, 2.05)], &[(1, 2.0), (2, 2.0)]).unwrap();
        assert!((ppl.stats().0 - 5.127).abs() < 1e-3, "{}", ppl.stats().0);
        assert_eq!(ppl.interval(), None);
        assert!(ppl.to_string().contains("% in perplexity (one seed"), "{ppl}");
        // Accuracies are fractions; their change is in percentage points.
        let accuracy = PairedChange::of(Unit::Accuracy, &[(1, 0.5), (2, 0.6)], &[(1, 0.9), (2, 0.9)]).unwrap();
        assert!(accuracy.to_string().starts_with("-35.00 ± 7.07 points of accuracy (95% interval"), "{accuracy}");
        assert!(accuracy.to_string().ends_with("per seed: -40.00 pt, -30.00 pt)"), "{accuracy}");
        assert_eq!(PairedChange::of(Unit::Loss, &[(9, 1.0)], &reference), None, "no seed in common");
    }

    /// Each seed's loss (seeds 1, 2, …) changed by `changes` (in %) from a reference of 2.0.
    fn changed_by(changes: &[f64]) -> Vec<(u64, f64)> {
        changes.iter().zip(1..).map(|(c, s)| (s, 2.0 * (1.0 + c / 100.0))).collect()
    }

    #[test]
    fn one_sided_tails_match_the_tables() {
        assert!((t_upper_tail(3.182, 3) - 0.025).abs() < 1e-4);
        assert!((t_upper_tail(0.0, 3) - 0.5).abs() < 1e-12);
        assert!((t_upper_tail(-3.182, 3) - 0.975).abs() < 1e-4);
        // df 5: t = 2.015 leaves 5 % above it.
        assert!((t_upper_tail(2.015, 5) - 0.05).abs() < 1e-4);
    }

    #[test]
    fn a_change_is_equivalent_exactly_when_its_90_percent_interval_is_inside_the_margin() {
        let reference: Vec<(u64, f64)> = (1..=6).map(|s| (s, 2.0)).collect();
        // Six seeds' changes of +0.1, -0.1, +0.2, 0, -0.2, 0 % in loss: mean 0.
        let change = PairedChange::of(Unit::Loss, &changed_by(&[0.1, -0.1, 0.2, 0.0, -0.2, 0.0]), &reference).unwrap();
        let (_, std, n) = change.stats();
        let half_90 = t_central_quantile(0.90, n - 1) * std / (n as f64).sqrt();
        let just = |margin: f64| change.equivalence_p(margin).unwrap();
        assert!(just(half_90 * 1.001) < 0.05 && just(half_90 * 0.999) > 0.05, "the boundary is the 90% interval");
        assert!(just(0.5) < 0.001, "well inside ±0.5%: {}", just(0.5));
        assert!(change.p_value().unwrap() > 0.99, "and no difference");
        // Paper 1's laptop run: -0.47% with a 95% interval of [-3.0, +2.1]: far from within ±0.5%.
        let change = PairedChange::of(Unit::Loss, &changed_by(&[-2.5, 1.5, -0.4]), &reference).unwrap();
        assert!(change.equivalence_p(0.5).unwrap() > 0.3, "{}", change.equivalence_p(0.5).unwrap());
        assert!(change.p_value().unwrap() > 0.05, "nor different: cannot tell");
        // A clear 2% change: different, and not equivalent.
        let change = PairedChange::of(Unit::Loss, &changed_by(&[2.0, 2.1, 1.9]), &reference).unwrap();
        assert!(change.p_value().unwrap() < 0.01 && change.equivalence_p(0.5).unwrap() > 0.95);
    }

    #[test]
    fn the_seeds_an_equivalence_test_needs_follow_the_t_tables() {
        // std = margin: n = 10 gives √10 = 3.16 < 1.833 + 1.383 (t tables, 9 df); n = 11 gives
        // 3.32 ≥ 1.812 + 1.372 (10 df).
        assert_eq!(seeds_for_equivalence(1.0, 1.0), Some(11));
        // Half the spread needs about a quarter of the seeds; twice the spread about four times.
        assert_eq!(seeds_for_equivalence(0.5, 1.0), Some(4));
        assert!(seeds_for_equivalence(2.0, 1.0).is_some_and(|n| (36..=38).contains(&n)));
        assert_eq!(seeds_for_equivalence(100.0, 1.0), None);
    }

    #[test]
    fn holm_multiplies_by_rank_and_keeps_the_order() {
        let adjusted = holm(&[0.01, 0.04, 0.03, 0.005]);
        // Sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04 → raised to 0.06.
        for (got, want) in adjusted.iter().zip([0.03, 0.06, 0.06, 0.02]) {
            assert!((got - want).abs() < 1e-12, "{adjusted:?}");
        }
        assert_eq!(holm(&[0.5, 0.9]), vec![1.0, 1.0], "capped at 1");
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn a_family_reports_each_test_beside_its_holm_corrected_p() {
        let reference = [(1, 2.0), (2, 2.0), (3, 2.0)];
        let of = |changes: &[f64]| PairedChange::of(Unit::Loss, &changed_by(changes), &reference).unwrap();
        let mut family = Family::default();
        family.difference("clear", "reference", &of(&[2.0, 2.1, 1.9]));
        family.difference("unclear", "reference", &of(&[1.0, -0.5, 0.2]));
        family.equivalence("tight", "reference", &of(&[0.01, -0.01, 0.0]), 0.5);
        family.difference("one seed", "reference", &of(&[5.0]));
        let section = family.holm_section();
        assert!(section.contains("## The report's 3 tests"), "one seed makes no test: {section}");
        let row = |name: &str| section.lines().find(|l| l.starts_with(&format!("| {name} against reference |"))).unwrap().to_string();
        assert!(row("clear").ends_with("| yes |") && row("unclear").ends_with("| no |"), "{section}");
        assert!(row("tight").contains("| within ±0.5% |") && row("tight").ends_with("| yes |"), "{section}");
        assert_eq!(Family::default().holm_section(), "");
    }

    #[test]
    fn a_finding_that_fails_holm_says_so_where_it_is_stated() {
        let reference = [(1, 2.0), (2, 2.0), (3, 2.0)];
        let of = |changes: &[f64]| PairedChange::of(Unit::Loss, &changed_by(changes), &reference).unwrap();
        let mut family = Family::default();
        let clear = family.difference("clear", "reference", &of(&[2.0, 2.1, 1.9]));
        // About p = 0.03 alone: it holds by its own interval, not once six tests are corrected.
        let marginal = of(&[1.0, 0.7, 1.3]);
        assert!(marginal.p_value().is_some_and(|p| p < 0.05));
        let weak = family.difference("weak", "reference", &marginal);
        let unclear = family.difference("unclear", "reference", &of(&[1.0, -0.5, 0.2]));
        for noise in [[0.4, -0.6, 0.1], [-0.3, 0.5, -0.1], [0.2, 0.3, -0.6]] {
            family.difference("noise", "reference", &of(&noise));
        }
        let text = family.settle(&format!("clear{clear}. weak{weak}. unclear{unclear}. one seed{}.", HolmMark(None)));
        assert!(text.starts_with("clear. weak (but not after Holm's correction for the report's 6 tests: corrected p = "), "{text}");
        assert!(text.ends_with(". unclear. one seed."), "a test that fails alone needs no note: {text}");
        assert!(!text.contains('\u{1}'), "every mark replaced: {text}");
    }

    #[test]
    fn a_consistent_change_has_a_direction() {
        let reference = [(1, 2.0), (2, 2.0), (3, 2.0)];
        let worse = PairedChange::of(Unit::Loss, &[(1, 2.04), (2, 2.05), (3, 2.03)], &reference).unwrap();
        assert_eq!(worse.direction(), Direction::Higher);
        let better = PairedChange::of(Unit::Loss, &[(1, 1.96), (2, 1.95), (3, 1.97)], &reference).unwrap();
        assert_eq!(better.direction(), Direction::Lower);
    }
}
