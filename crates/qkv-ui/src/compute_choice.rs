//! Which compute the playground trains on, and why: the devices a shell offers, and the verdict
//! of timing them (or of the user's pick), which the shell keeps between visits.
//!
//! Why timed rather than assumed: a small model's step on a GPU is bound by kernel launches and
//! host waits, so a laptop GPU may well be slower than the CPU for the classroom model and faster
//! for a larger one, and a software GPU (SwiftShader, lavapipe) is slower than either.

use qkv_compute::ComputeId;
use serde::{Deserialize, Serialize};

pub use qkv_compute::Compute;

/// The devices a shell offers the playground.
pub struct ComputeOffer {
    /// Preferred first: the playground trains on the first until a verdict says otherwise.
    pub computes: Vec<Compute>,
    /// The user named the compute (a command-line flag, the page's address): it is the first,
    /// and nothing is timed or remembered over it.
    pub pinned: bool,
    /// The verdict kept from an earlier visit (JSON of a [`Verdict`]), if any.
    pub remembered: Option<String>,
}

/// Nothing pinned, nothing remembered: the first compute until the first Train times them all.
impl From<Vec<Compute>> for ComputeOffer {
    fn from(computes: Vec<Compute>) -> Self {
        Self { computes, pinned: false, remembered: None }
    }
}

/// One compute's figure in a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timed {
    /// Which compute (saved as its label, `label`, before the compute had a type: both read).
    #[serde(alias = "label")]
    pub compute: ComputeId,
    /// Seconds an experiment step took (every run's step), after the first; `None` where it
    /// could not be timed.
    pub secs_per_step: Option<f64>,
    /// Why it could not be timed (it failed, or finished no step in time).
    pub problem: Option<String>,
}

/// How the compute was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChosenBy {
    /// A trial timed every compute and this was the fastest.
    Timing,
    /// The user picked it from the list.
    User,
}

/// The compute to train on, remembered between visits while the same computes are offered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub chosen: ComputeId,
    pub by: ChosenBy,
    /// Every compute offered when the verdict was made (also those that could not be timed).
    pub timed: Vec<Timed>,
    /// What was timed, for people: "2 runs of the classroom model".
    pub setup: String,
}

impl Verdict {
    /// The fastest of `timed`; `None` where none could be timed.
    pub fn fastest(timed: Vec<Timed>, setup: String) -> Option<Verdict> {
        let chosen =
            timed.iter().filter_map(|t| t.secs_per_step.map(|secs| (secs, &t.compute))).min_by(|a, b| a.0.total_cmp(&b.0))?.1.clone();
        Some(Verdict { chosen, by: ChosenBy::Timing, timed, setup })
    }

    /// The user's pick of `chosen`, keeping the figures an earlier trial measured.
    pub fn picked(chosen: ComputeId, earlier: Option<&Verdict>) -> Verdict {
        let (timed, setup) = earlier.map_or_else(Default::default, |v| (v.timed.clone(), v.setup.clone()));
        Verdict { chosen, by: ChosenBy::User, timed, setup }
    }

    /// A remembered verdict, or why `json` is not one (one saved by an older version that
    /// cannot be read, a damaged value).
    pub fn parse(json: &str) -> Result<Verdict, serde_json::Error> {
        serde_json::from_str(json)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Whether the verdict was made among these computes (a new GPU, or a browser that lost its
    /// WebGPU, asks for a new one). A user's pick needs only its compute to be offered.
    pub fn holds_for(&self, offered: &[&ComputeId]) -> bool {
        match self.by {
            ChosenBy::User => offered.contains(&&self.chosen),
            ChosenBy::Timing => {
                self.timed.len() == offered.len() && offered.iter().all(|&compute| self.timed.iter().any(|t| &t.compute == compute))
            }
        }
    }

    /// Says which compute trains and why, in a sentence: "Training on flex (CPU): 0.21 s a step
    /// against 4.8 s on wgpu: SwiftShader (timed on 2 runs of the classroom model)."
    pub fn summary(&self) -> String {
        let mine = self.timed.iter().find(|t| t.compute == self.chosen).and_then(|t| t.secs_per_step);
        let others: Vec<String> = self
            .timed
            .iter()
            .filter(|t| t.compute != self.chosen)
            .map(|t| match (t.secs_per_step, &t.problem) {
                (Some(secs), _) => format!("{} on {}", seconds(secs), t.compute),
                (None, Some(problem)) => format!("{}: {problem}", t.compute),
                (None, None) => format!("{}: not timed", t.compute),
            })
            .collect();
        match self.by {
            ChosenBy::User => format!("Training on {}, as you chose.", self.chosen),
            ChosenBy::Timing => format!(
                "Training on {}, the fastest here: {} a step{}{} (timed on {}; the compute list switches).",
                self.chosen,
                mine.map_or("–".into(), seconds),
                if others.is_empty() { "" } else { " against " },
                others.join(", "),
                self.setup
            ),
        }
    }
}

/// A duration for people: "4.8 s", "0.21 s", "12 ms".
fn seconds(secs: f64) -> String {
    if secs >= 10.0 {
        format!("{secs:.0} s")
    } else if secs >= 0.1 {
        format!("{secs:.2} s")
    } else {
        format!("{:.1} ms", secs * 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(label: &str) -> ComputeId {
        label.parse().unwrap()
    }

    fn timed(label: &str, secs: Option<f64>) -> Timed {
        Timed { compute: id(label), secs_per_step: secs, problem: secs.is_none().then(|| "failed to start".into()) }
    }

    #[test]
    fn the_fastest_timed_compute_is_chosen_and_the_summary_says_by_how_much() {
        let verdict = Verdict::fastest(
            vec![timed("wgpu: SwiftShader", Some(4.8)), timed("flex (CPU)", Some(0.21)), timed("cuda: first GPU", None)],
            "2 runs of the classroom model".into(),
        )
        .unwrap();
        assert_eq!(verdict.chosen, ComputeId::cpu());
        assert_eq!(
            verdict.summary(),
            "Training on flex (CPU), the fastest here: 0.21 s a step against 4.80 s on wgpu: SwiftShader, cuda: first GPU: failed \
             to start (timed on 2 runs of the classroom model; the compute list switches)."
        );
        assert!(Verdict::fastest(vec![timed("flex (CPU)", None)], String::new()).is_none(), "nothing timed, nothing chosen");
    }

    #[test]
    fn a_verdict_holds_while_the_same_computes_are_offered_and_survives_a_restart() {
        let verdict = Verdict::fastest(vec![timed("wgpu: GPU", Some(0.01)), timed("flex (CPU)", Some(0.02))], "x".into()).unwrap();
        let (cpu, gpu, cuda) = (id("flex (CPU)"), id("wgpu: GPU"), id("cuda: first GPU"));
        assert!(verdict.holds_for(&[&cpu, &gpu]), "the order does not matter");
        assert!(!verdict.holds_for(&[&cpu]), "a compute went away");
        assert!(!verdict.holds_for(&[&cpu, &gpu, &cuda]), "a new compute is worth timing");
        assert_eq!(Verdict::parse(&verdict.to_json()).unwrap(), verdict);
        assert!(Verdict::parse("{\"chosen\": 7").is_err());
        let pick = Verdict::picked(cpu.clone(), Some(&verdict));
        assert!(pick.holds_for(&[&cpu, &cuda]) && !pick.holds_for(&[&gpu]));
        assert_eq!(pick.summary(), "Training on flex (CPU), as you chose.");
    }

    /// What a page kept before the compute had a type (the page's storage, as the page wrote it
    /// then): its verdict names the computes by their labels. It still reads, and still holds
    /// for the same computes.
    #[test]
    fn a_verdict_saved_with_labels_still_reads() {
        let saved = include_str!("../tests/fixtures/compute-choice-before-typed-protocol.json");
        let verdict = Verdict::parse(saved).unwrap();
        let webgpu = ComputeId::on(qkv_compute::Backend::Wgpu, "WebGPU (own device; the page draws with WebGL)");
        assert_eq!((verdict.chosen.clone(), verdict.by), (webgpu.clone(), ChosenBy::Timing));
        assert!(verdict.holds_for(&[&ComputeId::cpu(), &webgpu]));
    }
}
