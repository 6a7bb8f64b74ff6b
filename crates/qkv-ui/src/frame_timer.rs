//! How long frames take: the frame-to-frame times the top bar shows and the smoke test sums,
//! and the time each frame spent building the UI.

use web_time::Instant;

/// Frame-to-frame times of the last couple of seconds.
#[derive(Default)]
pub struct FrameTimer {
    last: Option<Instant>,
    recent: std::collections::VecDeque<f64>,
    /// Every frame time since the start, for the smoke test's summary.
    pub all: Vec<f64>,
    /// Seconds each frame spent building the UI (the rest of a frame is rendering, presenting
    /// and waiting).
    pub ui_work: Vec<f64>,
}

impl FrameTimer {
    pub fn tick(&mut self) {
        let now = Instant::now();
        if let Some(last) = self.last.replace(now) {
            let secs = now.duration_since(last).as_secs_f64();
            self.recent.push_back(secs);
            push_bounded(&mut self.all, secs);
            if self.recent.len() > 120 {
                self.recent.pop_front();
            }
        }
    }

    pub fn record_ui_work(&mut self, secs: f64) {
        push_bounded(&mut self.ui_work, secs);
    }

    /// Mean frame time of the recent frames, in seconds.
    pub fn mean(&self) -> Option<f64> {
        (!self.recent.is_empty()).then(|| self.recent.iter().sum::<f64>() / self.recent.len() as f64)
    }
}

/// Hours of frames would grow without end: past 100 000 records keep the newer half.
fn push_bounded(records: &mut Vec<f64>, value: f64) {
    if records.len() >= 100_000 {
        records.drain(..50_000);
    }
    records.push(value);
}
