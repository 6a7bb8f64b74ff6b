//! A training session driven by messages, for interactive front ends: commands in (load a plan,
//! play, pause, step, sample, export), results out (step records, evaluations, attention maps,
//! samples). The app never touches a tensor; it sends [`Command`]s and draws [`Message`]s.
//!
//! [`channel`] splits a session into a handle for the front end and a task that the shell runs
//! beside the UI, so the UI never waits on training: natively on a thread of its own
//! ([`SessionTask::run_blocking`]), in the browser in turns on the page's event loop
//! ([`SessionTask::turn`]). Every read-back from the device is awaited, since a browser's GPU
//! cannot be waited on.

// What the browser cannot do (clippy.toml's `disallowed-methods`) is an error in its build.
#![cfg_attr(target_arch = "wasm32", warn(clippy::disallowed_methods))]

mod channel;
mod error;
pub mod fanout;
mod maps;
mod pace;
mod protocol;
mod samples;
mod session;
pub mod wire;

pub use channel::{FrontEndGone, News, SessionHandle, SessionRelay, SessionTask, Turn, channel};
pub use error::SessionError;
pub use protocol::{AttentionMaps, CheckpointFile, Command, HeldOutImages, LIVE_RANKS_MAX_WIDTH, Message, RunId, RunInfo, Share};
pub use session::Session;
