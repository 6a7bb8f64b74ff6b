//! Where QKV Lab computes: Burn's backends by name ([`Backend`]), the devices each has in this
//! build and on this machine (found here and nowhere else), and the [`Compute`] a run trains on.
//!
//! The CLI's `--backend`, the desktop's `--compute` and its compute list, and the page's
//! `?compute=` all name a [`Backend`]. A shell that made the GPU device itself (the window's,
//! shared with egui) hands it over with [`Compute::on`]; everything else asks a backend for its
//! devices.

// What the browser cannot do (clippy.toml's `disallowed-methods`) is an error in its build.
#![cfg_attr(target_arch = "wasm32", warn(clippy::disallowed_methods))]

mod backend;
mod compute;
mod compute_id;
mod devices;
mod error;

pub use backend::Backend;
pub use compute::{Adapter, Compute};
pub use compute_id::{ComputeId, NotACompute};
pub use error::ComputeError;
