//! What each kernel of some work took on the device, for ranking the kernels worth work next:
//! every launch is timed on its own (CubeCL's launch hook, asked for resolved timings), so each
//! waits for the one before and the device runs one kernel at a time. The times rank the kernels;
//! their sum is not the work's time on a device that overlaps them.
//!
//! The device times its kernels where it can (wgpu with timestamp queries, CUDA); where it
//! cannot, the time is the host's around a blocking submit, the kernel's compilation included on
//! its first launch ([`KernelTime::host_timed`] counts those).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cubecl_runtime::config::{TypeNameFormatLevel, type_name_format};
use cubecl_runtime::logging::{Duration, LaunchObservation, LaunchObserver, TimingMethod, TimingRequest};

/// One kernel's launches and their time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelTime {
    pub launches: usize,
    pub seconds: f64,
    /// Launches timed by the host rather than the device.
    pub host_timed: usize,
}

#[derive(Default)]
struct Timed(Mutex<BTreeMap<&'static str, KernelTime>>);

impl LaunchObserver for Timed {
    fn launched(&self, _kernel: &'static str) {}

    fn timing(&self) -> TimingRequest {
        TimingRequest::Resolved
    }

    fn timed(&self, kernel: &'static str, duration: Duration, method: TimingMethod) {
        let mut times = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let time = times.entry(kernel).or_default();
        time.launches += 1;
        time.seconds += duration.as_secs_f64();
        time.host_timed += usize::from(method == TimingMethod::System);
    }
}

/// Times every kernel the process launches while it lives. It takes CubeCL's one launch-hook
/// slot, so a [`crate::LaunchCounter`] counts nothing meanwhile (and counts again once this is
/// finished).
#[must_use = "kernels are timed only while this lives"]
pub struct KernelTimes {
    timed: Arc<Timed>,
    _observation: LaunchObservation,
}

impl KernelTimes {
    pub fn start() -> Self {
        let timed = Arc::new(Timed::default());
        Self { _observation: LaunchObservation::new(timed.clone()), timed }
    }

    /// The kernels timed, named as [`crate::Tally`] names them, the longest first.
    pub fn finish(self) -> Vec<(String, KernelTime)> {
        let times = self.timed.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut by_name: BTreeMap<String, KernelTime> = BTreeMap::new();
        for (&kernel, time) in times.iter() {
            let entry = by_name.entry(type_name_format(kernel, TypeNameFormatLevel::Short)).or_default();
            entry.launches += time.launches;
            entry.seconds += time.seconds;
            entry.host_timed += time.host_timed;
        }
        let mut sorted: Vec<(String, KernelTime)> = by_name.into_iter().collect();
        sorted.sort_by(|a, b| b.1.seconds.total_cmp(&a.1.seconds).then_with(|| a.0.cmp(&b.0)));
        sorted
    }
}
