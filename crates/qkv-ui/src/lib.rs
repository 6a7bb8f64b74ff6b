//! QKV Lab's panels. Each panel is a struct with its own state and a `ui(&mut self, ui)` method;
//! panels show what the model and training crates compute and hold no training logic.

pub mod params_panel;

pub use params_panel::ParamsPanel;
