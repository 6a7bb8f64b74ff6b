//! The trial that makes a [`Verdict`]: on the first Train, the playground's own session trains a
//! few steps on its compute while the trial times them; then each other compute trains the same
//! setup (the same seed, the same batches) in a session of its own, timed the same way while the
//! others wait. The fastest goes on training: the playground's session, or the contender that
//! beat it, whose steps so far become the curve. Nothing trained is thrown away but a slower
//! compute's steps.

use qkv_compute::ComputeId;
use qkv_session::{Command, SessionHandle};
use qkv_train::ExperimentPlan;
use web_time::{Duration, Instant};

use crate::compute_choice::{Timed, Verdict};
use crate::view::SessionView;

/// Steps timed on each compute at the least, after the first (which compiles kernels, starts
/// workers and fills caches: not what training costs).
const MIN_STEPS: usize = 3;
/// ... over at least this long, so that a fast step is timed across many frames.
const MIN_TIME: Duration = Duration::from_secs(1);
/// A slow compute is timed no longer than this once it has a step timed.
const MAX_TIME: Duration = Duration::from_secs(10);
/// A compute that has not finished its first step by then is out: slower than any worth having.
const FIRST_STEP_LIMIT: Duration = Duration::from_secs(90);

/// Times one compute's steps as the app sees them arrive.
#[derive(Debug)]
pub struct Stopwatch {
    started: Instant,
    /// When every run had finished its first step, and how many steps they had then.
    first: Option<(Instant, usize)>,
}

/// What a [`Stopwatch`] says after a look at the steps.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    Running,
    /// Seconds an experiment step takes.
    Timed(f64),
    /// It could not be timed, and why.
    Failed(String),
}

impl Stopwatch {
    pub fn start(now: Instant) -> Self {
        Self { started: now, first: None }
    }

    /// Looks at the runs at `now`: `steps` is the step every run has finished.
    pub fn read(&mut self, steps: usize, now: Instant) -> Reading {
        let Some((first_at, first_steps)) = self.first else {
            if steps >= 1 {
                self.first = Some((now, steps));
            } else if now.duration_since(self.started) > FIRST_STEP_LIMIT {
                return Reading::Failed(format!("no step within {} s", FIRST_STEP_LIMIT.as_secs()));
            }
            return Reading::Running;
        };
        let (elapsed, timed) = (now.duration_since(first_at), steps.saturating_sub(first_steps));
        if (timed >= MIN_STEPS && elapsed >= MIN_TIME) || (timed >= 1 && elapsed >= MAX_TIME) {
            Reading::Timed(elapsed.as_secs_f64() / timed as f64)
        } else {
            Reading::Running
        }
    }

    /// The reading of runs that stopped before the stopwatch was done (a setup of few steps):
    /// what the steps seen so far say.
    pub fn stopped(&self, steps: usize, now: Instant) -> Reading {
        match self.first {
            Some((first_at, first_steps)) if steps > first_steps => {
                Reading::Timed(now.duration_since(first_at).as_secs_f64() / (steps - first_steps) as f64)
            }
            _ => Reading::Failed("finished before it could be timed".into()),
        }
    }
}

/// A compute being timed in a session of its own, and what its session has said.
pub struct Contender {
    pub compute: usize,
    pub session: SessionHandle,
    pub view: SessionView,
}

/// How a look at the trial ended.
pub enum Outcome {
    Running,
    /// Every compute is timed: the verdict (`None` where none could be), and the contender that
    /// won, if one did (else the playground's own session goes on).
    Done {
        verdict: Option<Verdict>,
        /// (Boxed: a contender holds a whole view, and this is said once.)
        winner: Option<Box<Contender>>,
    },
}

/// What a trial needs from the playground to start a contender.
pub struct TrialContext<'a> {
    /// Starts a session on compute `index`.
    pub start: &'a dyn Fn(usize) -> SessionHandle,
    /// Which compute each index is.
    pub computes: &'a [ComputeId],
    pub plan: &'a ExperimentPlan,
    /// The attention maps' refresh, as the playground's session has it: a contender does the
    /// same work a step as the session it may replace.
    pub attention_every: usize,
    pub colours: &'a [egui::Color32],
}

pub struct Trial {
    /// The computes still to time, in order.
    queue: Vec<usize>,
    /// The compute being timed, and its stopwatch; `None` in `contender`: the playground's own.
    watch: Stopwatch,
    contender: Option<Contender>,
    /// The compute of the playground's own session.
    own: usize,
    timed: Vec<(usize, Option<f64>, Option<String>)>,
    /// The fastest contender so far, kept to go on training if nothing beats it.
    best: Option<(f64, Contender)>,
    /// What was timed, for the verdict.
    setup: String,
}

impl Trial {
    /// Times the playground's own session (on `own`) first, then each of `others`.
    pub fn start(own: usize, others: Vec<usize>, setup: String, now: Instant) -> Self {
        let mut queue = others;
        queue.reverse();
        Self { queue, watch: Stopwatch::start(now), contender: None, own, timed: Vec::new(), best: None, setup }
    }

    /// The compute being timed now.
    pub fn timing(&self) -> usize {
        self.contender.as_ref().map_or(self.own, |c| c.compute)
    }

    /// Looks at the compute being timed (its messages are read here when it is a contender);
    /// moves on to the next once it is timed, and says when all are.
    pub fn advance(&mut self, own_session: &SessionHandle, own_view: &SessionView, context: &TrialContext<'_>, now: Instant) -> Outcome {
        if let Some(contender) = &mut self.contender {
            while let Some(message) = contender.session.try_recv() {
                contender.view.apply(message, context.colours);
            }
        }
        let view = self.contender.as_ref().map_or(own_view, |c| &c.view);
        let reading = match problem(view) {
            Some(problem) => Reading::Failed(problem),
            None if view.finished => self.watch.stopped(view.steps_done(), now),
            None => self.watch.read(view.steps_done(), now),
        };
        let (secs, problem) = match reading {
            Reading::Running => return Outcome::Running,
            Reading::Timed(secs) => (Some(secs), None),
            Reading::Failed(problem) => (None, Some(problem)),
        };
        self.timed.push((self.timing(), secs, problem));
        match self.contender.take() {
            // The playground's own session waits while the others are timed.
            None => {
                own_session.send(Command::Pause);
            }
            Some(contender) => {
                contender.session.send(Command::Pause);
                let own_secs = self.timed.iter().find(|t| t.0 == self.own).and_then(|t| t.1);
                let beats = |secs: f64, other: Option<f64>| other.is_none_or(|other| secs < other);
                if let Some(secs) = secs.filter(|&s| beats(s, own_secs) && beats(s, self.best.as_ref().map(|b| b.0))) {
                    self.best = Some((secs, contender));
                }
            }
        }
        if let Some(next) = self.queue.pop() {
            let session = (context.start)(next);
            session.send(Command::AttentionEvery(context.attention_every));
            session.send(Command::Load(context.plan.clone()));
            session.send(Command::Play);
            self.contender = Some(Contender { compute: next, session, view: SessionView::default() });
            self.watch = Stopwatch::start(now);
            return Outcome::Running;
        }
        let timed = self
            .timed
            .iter()
            .map(|(compute, secs, problem)| Timed {
                compute: context.computes[*compute].clone(),
                secs_per_step: *secs,
                problem: problem.clone(),
            })
            .collect();
        Outcome::Done { verdict: Verdict::fastest(timed, std::mem::take(&mut self.setup)), winner: self.best.take().map(|b| Box::new(b.1)) }
    }
}

/// Why a session cannot train the setup, where it cannot: a run stopped (a model that does not
/// fit this device, a NaN) or the load failed.
fn problem(view: &SessionView) -> Option<String> {
    view.error.clone().or_else(|| view.runs.iter().find_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.label()))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stopwatch_skips_the_first_step_and_times_enough_steps_or_long_enough() {
        let t0 = Instant::now();
        let at = |secs: f64| t0 + Duration::from_secs_f64(secs);
        // A fast compute: three steps are not enough before a second has passed.
        let mut fast = Stopwatch::start(t0);
        assert_eq!(fast.read(0, at(2.0)), Reading::Running, "the first step compiles: it is not timed");
        assert_eq!(fast.read(1, at(2.5)), Reading::Running);
        assert_eq!(fast.read(5, at(2.9)), Reading::Running, "0.4 s is too short a window");
        assert_eq!(fast.read(101, at(3.5)), Reading::Timed(0.01));
        // A slow one: one step is enough once ten seconds have passed.
        let mut slow = Stopwatch::start(t0);
        assert_eq!(slow.read(1, at(20.0)), Reading::Running);
        assert_eq!(slow.read(2, at(26.0)), Reading::Running);
        assert_eq!(slow.read(3, at(32.0)), Reading::Timed(6.0));
        // One that never finishes a step, and runs that end early.
        assert!(matches!(Stopwatch::start(t0).read(0, at(91.0)), Reading::Failed(_)));
        let mut short = Stopwatch::start(t0);
        short.read(1, at(1.0));
        assert_eq!(short.stopped(3, at(1.5)), Reading::Timed(0.25));
        assert!(matches!(Stopwatch::start(t0).stopped(1, at(1.0)), Reading::Failed(_)));
    }
}
