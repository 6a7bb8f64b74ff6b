//! QKV Lab's panels. Each panel is a struct with its own state and a `ui` method; panels show
//! what the model and training crates compute and hold no training logic. [`Playground`] puts
//! them around one training session.

// What the browser cannot do (clippy.toml's `disallowed-methods`) is an error in its build.
#![cfg_attr(target_arch = "wasm32", warn(clippy::disallowed_methods))]

pub mod app;
pub mod attention_panel;
pub mod compute_choice;
pub mod compute_trial;
pub mod costs_panel;
pub mod figures;
pub mod files;
pub mod files_panel;
pub mod frame_timer;
pub mod hidden;
pub mod images_panel;
pub mod intent;
pub mod lessons;
pub mod loss_panel;
pub mod news;
pub mod palette;
pub mod params_panel;
pub mod platform;
pub mod presentation;
pub mod qr;
pub mod samples_panel;
pub mod setup_panel;
pub mod shortcuts;
pub mod smoothing;
pub mod theory_panel;
pub mod ticks;
pub mod verdict;
pub mod view;
mod widgets;

pub use app::{Drawn, Playground, Tab};
pub use compute_choice::{Compute, ComputeOffer, Verdict};
pub use params_panel::ParamsPanel;
pub use platform::Platform;
