//! How often training news is drawn. Every batch of messages from the session asks for a
//! repaint, and a step can be shorter than a repaint: on a machine whose GPU is emulated on the
//! CPU (headless Chromium, SwiftShader) one repaint of the playground takes a large part of a
//! second, and repainting for every step would leave the page's thread no time for anything else.
//! So training progress is drawn at a pace set by what a repaint costs: the repaints it asks for
//! take at most a tenth of the UI thread. Progress that comes when the last progress drawn is a
//! wait ago or more (the first step, a Step press) is drawn at once, and so is every other kind of
//! news (an experiment loaded, a failure, play or pause) and, as always in egui, input.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use qkv_session::News;
use web_time::Instant;

/// The share of the UI thread that repaints for training news may take.
const NEWS_SHARE: f64 = 0.1;
/// Bounds on the wait: news at most 20 times a second, and at least once a second.
const FASTEST: Duration = Duration::from_millis(50);
const SLOWEST: Duration = Duration::from_secs(1);
/// How much of a new measurement the running mean takes (the rest is the mean so far).
const WEIGHT: f64 = 0.2;
/// No progress drawn yet.
const NEVER: u64 = u64::MAX;

/// Paces the repaints that the session's messages ask for.
#[derive(Clone)]
pub struct NewsPacing {
    ctx: egui::Context,
    /// What the times below count from.
    epoch: Instant,
    /// The wait between news repaints, in microseconds (read by the session's side).
    wait_us: Arc<AtomicU64>,
    /// When progress was last drawn, in microseconds since `epoch` ([`NEVER`] before the first).
    progress_drawn_us: Arc<AtomicU64>,
    /// Progress came that the next repaint draws.
    progress_pending: Arc<AtomicBool>,
    /// The running mean of a repaint's cost on the UI thread, in seconds.
    repaint_secs: Option<f64>,
}

impl NewsPacing {
    pub fn new(ctx: &egui::Context) -> Self {
        Self {
            ctx: ctx.clone(),
            epoch: Instant::now(),
            wait_us: Arc::new(AtomicU64::new(FASTEST.as_micros() as u64)),
            progress_drawn_us: Arc::new(AtomicU64::new(NEVER)),
            progress_pending: Arc::new(AtomicBool::new(false)),
            repaint_secs: None,
        }
    }

    /// What the session calls when it has news, from whichever thread it runs on: progress is
    /// drawn once the current wait since the last progress drawn is over (egui merges the
    /// requests that come meanwhile), anything else at once.
    pub fn waker(&self) -> impl Fn(News) + Send + Sync + 'static {
        let pacing = self.clone();
        move |news| match news {
            News::Progress => {
                pacing.progress_pending.store(true, Ordering::Relaxed);
                pacing.ctx.request_repaint_after(pacing.progress_delay());
            }
            News::Event => pacing.ctx.request_repaint(),
        }
    }

    /// How long progress that comes now waits for its repaint.
    fn progress_delay(&self) -> Duration {
        let drawn = self.progress_drawn_us.load(Ordering::Relaxed);
        if drawn == NEVER {
            return Duration::ZERO;
        }
        let since_drawn = self.now_us().saturating_sub(drawn);
        Duration::from_micros(self.wait_us.load(Ordering::Relaxed).saturating_sub(since_drawn))
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// A frame is being drawn: it shows whatever progress came since the last one.
    pub fn drawing_now(&self) {
        if self.progress_pending.swap(false, Ordering::Relaxed) {
            self.progress_drawn_us.store(self.now_us(), Ordering::Relaxed);
        }
    }

    /// A repaint took `secs` of the UI thread (the shell's measure: building, laying out and
    /// tessellating the UI and handing it to the GPU).
    pub fn record_repaint(&mut self, secs: f64) {
        if !secs.is_finite() || secs < 0.0 {
            return;
        }
        let mean = self.repaint_secs.map_or(secs, |mean| mean + WEIGHT * (secs - mean));
        self.repaint_secs = Some(mean);
        let wait = Duration::from_secs_f64(mean / NEWS_SHARE).clamp(FASTEST, SLOWEST);
        self.wait_us.store(wait.as_micros() as u64, Ordering::Relaxed);
    }

    /// The wait between news repaints now (what the tests look at).
    #[cfg(test)]
    fn wait(&self) -> Duration {
        Duration::from_micros(self.wait_us.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn news_waits_ten_repaints_within_its_bounds() {
        let mut pacing = NewsPacing::new(&egui::Context::default());
        assert_eq!(pacing.wait(), FASTEST, "before any measurement news comes at the fastest pace");
        pacing.record_repaint(0.001);
        assert_eq!(pacing.wait(), FASTEST, "cheap repaints: news at the fastest pace, not faster");
        for _ in 0..50 {
            pacing.record_repaint(0.07);
        }
        let wait = pacing.wait().as_secs_f64();
        assert!((wait - 0.7).abs() < 0.01, "70 ms repaints: news every 0.7 s, got {wait}");
        for _ in 0..50 {
            pacing.record_repaint(0.5);
        }
        assert_eq!(pacing.wait(), SLOWEST, "news is drawn at least once a second however slow a repaint");
        pacing.record_repaint(f64::NAN);
        assert_eq!(pacing.wait(), SLOWEST, "a nonsense measurement changes nothing");
    }

    #[test]
    fn progress_right_after_progress_waits_and_progress_after_a_quiet_spell_does_not() {
        let mut pacing = NewsPacing::new(&egui::Context::default());
        let wake = pacing.waker();
        for _ in 0..50 {
            pacing.record_repaint(0.5);
        }
        assert_eq!(pacing.progress_delay(), Duration::ZERO, "the first progress is drawn at once");
        wake(News::Progress);
        pacing.drawing_now();
        // The clock runs between these calls: half the pace leaves a loaded test machine time.
        assert!(pacing.progress_delay() > SLOWEST / 2, "progress just drawn: the next waits out the pace");
        wake(News::Event);
        pacing.drawing_now();
        assert!(pacing.progress_delay() > SLOWEST / 2, "drawing other news does not reset the pace");
        pacing.epoch -= SLOWEST;
        assert_eq!(pacing.progress_delay(), Duration::ZERO, "progress drawn a wait ago: the next is drawn at once");
    }
}
