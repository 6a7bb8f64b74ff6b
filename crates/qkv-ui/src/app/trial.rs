//! The playground's side of the compute trial: on the first Train where there is a choice, each
//! compute is timed on the setup (`compute_trial`), the fastest trains on, and the user's pick
//! or a new timing can overrule it.

use web_time::Instant;

use qkv_compute::ComputeId;
use qkv_session::Command;

use super::{Playground, start_session};
use crate::compute_choice::Verdict;
use crate::compute_trial::{Outcome, Trial, TrialContext};

impl Playground {
    /// The verdict to keep for the next visit (JSON), once there is one.
    pub fn saved_compute_choice(&self) -> Option<String> {
        self.compute.verdict.as_ref().map(Verdict::to_json)
    }

    /// Why the playground trains on its compute, once timed or picked.
    pub fn compute_choice(&self) -> Option<&Verdict> {
        self.compute.verdict.as_ref()
    }

    /// The compute being timed, while a trial is under way.
    pub fn timing(&self) -> Option<String> {
        self.compute.trial.as_ref().map(|t| self.compute.offered[t.timing()].label())
    }

    /// Times every compute on the first Train, where there is a choice nobody has made.
    pub(super) fn wants_trial(&self) -> bool {
        self.compute.offered.len() > 1 && !self.compute.pinned && self.compute.verdict.is_none() && !self.view.finished
    }

    pub(super) fn start_trial(&mut self) {
        let others = (0..self.compute.offered.len()).filter(|&i| i != self.compute.chosen).collect();
        let plan = &self.setup.edited.plan;
        let runs = plan.runs.len();
        let setup = format!("{runs} run{} of the {} model", if runs == 1 { "" } else { "s" }, plan.preset);
        self.compute.trial = Some(Trial::start(self.compute.chosen, others, setup, Instant::now()));
        let first = self.compute.current().label();
        self.tell(format!("Timing each compute on this setup, to train on the fastest: {first} first."), false);
    }

    /// Ends a trial under way without a verdict: the user took over (paused, stepped, changed the
    /// setup or the compute). The contender's session ends with it.
    pub(super) fn cancel_trial(&mut self) {
        if self.compute.trial.take().is_some() {
            self.compute.pinned = true;
        }
    }

    /// Looks at the trial under way; once every compute is timed, trains on the fastest and
    /// says why.
    pub(super) fn advance_trial(&mut self) {
        let Some(trial) = &mut self.compute.trial else { return };
        let (platform, news, computes) = (self.platform.as_ref(), &self.channels.news, &self.compute.offered);
        let start = |compute: usize| start_session(platform, news, &computes[compute]);
        let ids: Vec<ComputeId> = computes.iter().map(|c| c.id.clone()).collect();
        let colours = self.setup.edited.colours32();
        let context = TrialContext {
            start: &start,
            computes: &ids,
            plan: &self.setup.edited.plan,
            attention_every: self.panels.attention.refresh_every,
            colours: &colours,
        };
        let previous = trial.timing();
        match trial.advance(&self.channels.session, &self.view, &context, Instant::now()) {
            Outcome::Running => {
                let now = trial.timing();
                if now != previous {
                    self.tell(format!("Timing {} on the same setup…", self.compute.offered[now].id), false);
                }
            }
            Outcome::Done { verdict, winner } => {
                self.compute.trial = None;
                if let Some(winner) = winner {
                    let mut view = winner.view;
                    // The attention panel redraws when the version changes.
                    view.attention_version += self.view.attention_version + 1;
                    view.exports.append(&mut self.view.exports);
                    self.view = view;
                    self.channels.session = winner.session;
                    self.compute.chosen = winner.compute;
                }
                match verdict {
                    Some(verdict) => {
                        self.tell(verdict.summary(), false);
                        self.compute.verdict = Some(verdict);
                    }
                    None => self.tell("No compute could be timed on this setup; training stays where it was.".into(), true),
                }
                self.send(Command::Play);
            }
        }
    }

    /// The user's pick from the compute list: training starts over there, and the pick is
    /// remembered over any timing.
    pub fn pick_compute(&mut self, compute: usize) {
        self.cancel_trial();
        self.compute.chosen = compute;
        self.compute.verdict = Some(Verdict::picked(self.compute.offered[compute].id.clone(), self.compute.verdict.as_ref()));
        self.channels.session = start_session(self.platform.as_ref(), &self.channels.news, &self.compute.offered[compute]);
        self.apply_setup();
    }

    /// Forgets the verdict: the next Train times every compute again.
    pub fn time_again(&mut self) {
        self.cancel_trial();
        self.compute.verdict = None;
        self.compute.pinned = false;
        self.tell("The next Train times each compute on the setup it trains.".into(), false);
    }
}
