//! Which compute the playground trains on and why: the computes the shell offered, the one
//! chosen, the verdict behind the choice, whether the user pinned it, and a trial under way.

use qkv_compute::ComputeId;

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
    /// still holds: the same computes are offered and none is pinned. A remembered verdict that
    /// cannot be read is said, with what happens instead.
    pub(super) fn new(offer: ComputeOffer) -> (Self, Option<String>) {
        let ComputeOffer { computes, pinned, remembered } = offer;
        assert!(!computes.is_empty(), "the playground needs at least one device");
        let ids: Vec<&ComputeId> = computes.iter().map(|c| &c.id).collect();
        let (verdict, unread) = match remembered.as_deref().map(Verdict::parse) {
            Some(Ok(verdict)) => (Some(verdict), None),
            Some(Err(e)) => (
                None,
                Some(format!(
                    "the compute choice kept from an earlier visit could not be read ({e}); each compute is timed again on Train"
                )),
            ),
            None => (None, None),
        };
        let verdict = verdict.filter(|v| !pinned && v.holds_for(&ids));
        let chosen = verdict.as_ref().and_then(|v| ids.iter().position(|id| **id == v.chosen)).unwrap_or(0);
        (Self { offered: computes, chosen, verdict, pinned, trial: None }, unread)
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
    use qkv_model::burn::tensor::Device;

    fn offer(labels: &[&str], pinned: bool, remembered: Option<String>) -> ComputeOffer {
        let computes = labels.iter().map(|l| Compute::on(l.parse().unwrap(), Device::flex())).collect();
        ComputeOffer { computes, pinned, remembered }
    }

    /// A trial's verdict over `labels` in which `fastest` took the least time.
    fn verdict_for(fastest: &str, labels: &[&str]) -> String {
        let timed = labels
            .iter()
            .map(|l| Timed { compute: l.parse().unwrap(), secs_per_step: Some(if *l == fastest { 1.0 } else { 2.0 }), problem: None })
            .collect();
        Verdict::fastest(timed, "2 runs of the classroom model".into()).unwrap().to_json()
    }

    #[test]
    fn a_remembered_verdict_chooses_while_the_same_computes_are_offered_and_none_is_pinned() {
        let labels = ["flex (CPU)", "wgpu: GPU"];
        let remembered = Some(verdict_for("wgpu: GPU", &labels));
        let (choice, unread) = ComputeChoice::new(offer(&labels, false, remembered.clone()));
        assert_eq!(unread, None);
        assert_eq!((choice.chosen, choice.current().label().as_str()), (1, "wgpu: GPU"));
        assert!(choice.verdict.is_some());
        // Pinned by the shell: its first, and the verdict is not kept.
        let (pinned, _) = ComputeChoice::new(offer(&labels, true, remembered.clone()));
        assert_eq!((pinned.chosen, pinned.verdict.is_none()), (0, true));
        // Another list of computes: the verdict was about others.
        let (other, _) = ComputeChoice::new(offer(&["flex (CPU)", "wgpu: other GPU"], false, remembered));
        assert_eq!((other.chosen, other.verdict.is_none()), (0, true));
        // Something unreadable: the first, and the playground says why.
        let (unreadable, unread) = ComputeChoice::new(offer(&labels, false, Some("{".into())));
        assert_eq!((unreadable.chosen, unreadable.verdict.is_none()), (0, true));
        assert!(unread.is_some_and(|note| note.contains("could not be read") && note.contains("timed again")));
    }
}
