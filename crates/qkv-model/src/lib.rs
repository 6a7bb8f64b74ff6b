//! QKV Lab's models: a GPT, and a ViT built from the same blocks, whose attention can drop or
//! share W_Q, W_K, W_V (the variants are described in the README's table), and exact parameter,
//! KV-cache and FLOP accounting for them.

// What the browser cannot do (clippy.toml's `disallowed-methods`) is an error in its build.
#![cfg_attr(target_arch = "wasm32", warn(clippy::disallowed_methods))]

pub mod accounting;
pub mod attention;
pub mod config;
pub mod diagnostics;
pub mod dropout;
pub mod gpt;
pub(crate) mod linalg;
pub mod model;
pub mod output;
pub mod presets;
pub mod random;
pub mod reparam;
pub mod variant;
pub mod vit;

pub use accounting::{CacheDType, Component, ParamReport};
pub use attention::{AttentionTrace, CausalSelfAttention};
pub use config::{AttentionConfig, ConfigError, ImageInput, ModelConfig, Norm};
pub use diagnostics::{LayerDiagnostics, ModelDiagnostics, SymmetryMeasure};
pub use gpt::{Gpt, KvCache};
pub use model::{Input, Model};
pub use output::ModelOutput;
pub use presets::Preset;
pub use variant::{AttentionVariant, UnknownVariant};
pub use vit::Vit;

/// Re-exported so that downstream crates use the same Burn.
pub use burn;
