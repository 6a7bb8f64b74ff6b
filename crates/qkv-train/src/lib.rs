//! QKV Lab's training engine: data and tokenizers, AdamW recipes, runs that advance one step
//! per call (async: the browser awaits them, a command line waits on them), experiments on identical batches,
//! generation with a KV cache, and checkpoints.

// What the browser cannot do (clippy.toml's `disallowed-methods`) is an error in its build.
#![cfg_attr(target_arch = "wasm32", warn(clippy::disallowed_methods))]

pub mod baselines;
mod cause;
pub mod checkpoint;
pub mod corpus;
pub mod cpu_copy;
pub mod csv;
pub mod dataset;
pub mod experiment;
pub mod folder_lock;
pub mod generate;
mod image_files;
pub mod image_split;
pub mod images;
pub mod lesson_plans;
pub mod loss;
pub mod optimiser;
pub mod papers;
pub mod plan;
pub mod problem;
pub mod pytorch;
pub mod recipe;
pub mod records;
mod relations;
pub mod rng;
pub mod run;
mod run_id;
mod shards;
mod shift;
pub mod synthetic;
pub mod theory;
pub mod threads;
pub mod tokenizer;
pub mod tokens;

pub use cause::{Cause, cause};
pub use corpus::{DataError, TextCorpus};
pub use dataset::{Batch, DataSource, Dataset, Inputs, Upload};
pub use experiment::{Experiment, RunEvent};
pub use image_split::{ImageShape, ImageSplit};
pub use images::{ImageData, ImageSource};
pub use plan::{ExperimentPlan, PlanError, RunPlan, StartError};
pub use problem::Problem;
pub use recipe::{TrainingConfig, TrainingConfigError};
pub use run::{EvalRecord, Metrics, Run, RunError, RunSpec, RunStatus, Score, StepRecord, UnknownStatus};
pub use run_id::RunId;
pub use synthetic::{Framing, SyntheticData, SyntheticTask};
pub use tokenizer::{Tokenizer, TokenizerKind};
