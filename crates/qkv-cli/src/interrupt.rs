//! Ctrl-C and SIGTERM while training: the step in flight finishes, what was trained is written,
//! and `qkv` exits with 130 (SIGINT) or 143 (SIGTERM), as a shell reports a process the signal
//! ended. A second signal exits at once; the files written last stay whole, since every file is
//! written to a temporary name and renamed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use signal_hook::consts::{SIGINT, SIGTERM};

use crate::Failure;

/// The signals caught so far.
pub struct Interrupts {
    interrupt: Arc<AtomicBool>,
    terminate: Arc<AtomicBool>,
}

/// Which signal stopped training.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Interrupt,
    Terminate,
}

impl Signal {
    /// What a shell reports for a process this signal ended: 128 + the signal's number.
    pub fn exit_code(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "Ctrl-C (SIGINT)",
            Signal::Terminate => "SIGTERM",
        }
    }
}

impl Interrupts {
    /// Catches SIGINT and SIGTERM from now until the process ends.
    pub fn catch() -> Result<Self, Failure> {
        let (interrupt, terminate) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        // Either signal sets `any`; a signal that finds it set already exits at once (the
        // conditional exit is registered first, so the first signal does not trigger it).
        let any = Arc::new(AtomicBool::new(false));
        for (signal, flag, code) in [(SIGINT, &interrupt, 130), (SIGTERM, &terminate, 143)] {
            signal_hook::flag::register_conditional_shutdown(signal, code, Arc::clone(&any))?;
            signal_hook::flag::register(signal, Arc::clone(&any))?;
            signal_hook::flag::register(signal, Arc::clone(flag))?;
        }
        Ok(Self { interrupt, terminate })
    }

    /// The signal caught, if one was.
    pub fn caught(&self) -> Option<Signal> {
        if self.interrupt.load(Ordering::Relaxed) {
            Some(Signal::Interrupt)
        } else if self.terminate.load(Ordering::Relaxed) {
            Some(Signal::Terminate)
        } else {
            None
        }
    }
}

/// Training stopped on a signal, after writing what it had: the failure `qkv` exits with.
#[derive(Debug)]
pub struct Interrupted {
    pub signal: Signal,
    /// The step every run had reached, and where the files are.
    pub step: usize,
    pub wrote: String,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by {} after step {}; the run so far is in {}", self.signal.name(), self.step, self.wrote)
    }
}

impl std::error::Error for Interrupted {}

/// Training stopped early on `signal` (what the step loop returns to end the loop).
#[derive(Debug)]
pub struct Caught(pub Signal);

impl std::fmt::Display for Caught {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by {}", self.0.name())
    }
}

impl std::error::Error for Caught {}
