//! Which compute the playground trains on and why: the computes the shell offered, the one
//! chosen, the verdict behind the choice, whether the user pinned it, and a trial under way.

use crate::compute_choice::{Compute, ComputeOffer, Verdict};
use crate::compute_trial::Trial;

pub(super) struct ComputeChoice {
    /// Preferred first, as the shell offered them.
    pub(super) offered: Vec<Compute>,
    /// The one the session trains on (an index into `offered`).
    pub(super) chosen: usize,
    /// Why `chosen` trains: the remembered or new verdict of a trial, or the user's pick.
    pub(super) verdict: Option<Verdict>,
    /// The shell was told which compute to use: nothing is timed.
    pub(super) pinned: bool,
    /// The timing of every compute under way (from the first Train without a verdict).
    pub(super) trial: Option<Trial>,
}

impl ComputeChoice {
    /// The offer's first compute, or the one a remembered verdict chose, where that verdict
    /// still holds: the same computes are offered and none is pinned.
    pub(super) fn new(offer: ComputeOffer) -> Self {
        let ComputeOffer { computes, pinned, remembered } = offer;
        assert!(!computes.is_empty(), "the playground needs at least one device");
        let labels: Vec<&str> = computes.iter().map(|c| c.label.as_str()).collect();
        let verdict = remembered.as_deref().and_then(Verdict::parse).filter(|v| !pinned && v.holds_for(&labels));
        let chosen = verdict.as_ref().and_then(|v| labels.iter().position(|l| *l == v.chosen)).unwrap_or(0);
        Self { offered: computes, chosen, verdict, pinned, trial: None }
    }

    /// The compute the session trains on.
    pub(super) fn current(&self) -> &Compute {
        &self.offered[self.chosen]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute_choice::Timed;
    use qkv_compute::Backend;
    use qkv_model::burn::tensor::Device;

    fn offer(labels: &[&str], pinned: bool, remembered: Option<String>) -> ComputeOffer {
        let computes = labels.iter().map(|l| Compute::on(Backend::Flex, Device::flex(), *l)).collect();
        ComputeOffer { computes, pinned, remembered }
    }

    /// A trial's verdict over `labels` in which `fastest` took the least time.
    fn verdict_for(fastest: &str, labels: &[&str]) -> String {
        let timed = labels
            .iter()
            .map(|l| Timed { label: l.to_string(), secs_per_step: Some(if *l == fastest { 1.0 } else { 2.0 }), problem: None })
            .collect();
        Verdict::fastest(timed, "2 runs of the classroom model".into()).unwrap().to_json()
    }

    #[test]
    fn a_remembered_verdict_chooses_while_the_same_computes_are_offered_and_none_is_pinned() {
        let labels = ["CPU", "GPU"];
        let remembered = Some(verdict_for("GPU", &labels));
        let choice = ComputeChoice::new(offer(&labels, false, remembered.clone()));
        assert_eq!((choice.chosen, choice.current().label.as_str()), (1, "GPU"));
        assert!(choice.verdict.is_some());
        // Pinned by the shell: its first, and the verdict is not kept.
        let pinned = ComputeChoice::new(offer(&labels, true, remembered.clone()));
        assert_eq!((pinned.chosen, pinned.verdict.is_none()), (0, true));
        // Another list of computes: the verdict was about others.
        let other = ComputeChoice::new(offer(&["CPU", "other GPU"], false, remembered));
        assert_eq!((other.chosen, other.verdict.is_none()), (0, true));
        // Nothing remembered, or something unreadable: the first.
        let unreadable = ComputeChoice::new(offer(&labels, false, Some("{".into())));
        assert_eq!((unreadable.chosen, unreadable.verdict.is_none()), (0, true));
    }
}
