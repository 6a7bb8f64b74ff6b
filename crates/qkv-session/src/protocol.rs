//! What a front end and a [`Session`](crate::Session) say to each other: [`Command`]s in,
//! [`Message`]s out, and what they carry. Every type here can cross to a Web Worker as bytes
//! ([`crate::wire`]).

use serde::{Deserialize, Serialize};

use qkv_model::{ModelDiagnostics, ParamReport};

use qkv_compute::ComputeId;
pub use qkv_train::RunId;
use qkv_train::dataset::{DataSource, Upload};
use qkv_train::generate::SampleOptions;
use qkv_train::plan::ExperimentPlan;
use qkv_train::run::{EvalRecord, Run, RunSpec, StepRecord};
use qkv_train::theory::ReparamReport;
use qkv_train::{Problem, RunEvent};

// A command goes out once per click, so the size of its largest variant (a whole plan) costs
// nothing worth a box at every call site.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Command {
    /// Builds a new experiment from the plan, replacing the current one.
    Load(ExperimentPlan),
    /// Continues saved runs (checkpoint files' contents) side by side as one experiment; they
    /// must have trained on the same data. Runs trained on an upload find its text in `upload`
    /// (the front end's, of the same name).
    Import {
        files: Vec<CheckpointFile>,
        upload: Option<Upload>,
    },
    /// Every run's checkpoint as it stands, for a front end that keeps them (the browser's
    /// autosave); answered by [`Message::Snapshot`].
    Snapshot,
    Play,
    Pause,
    /// One step of every run, then pause.
    Step,
    /// The prompt of the attention maps (empty: the default line); maps are sent at once.
    AttentionPrompt(String),
    /// Refresh the attention maps every this many steps while training; 0: never (a driver
    /// without a screen).
    AttentionEvery(usize),
    Sample {
        run: RunId,
        prompt: String,
        options: SampleOptions,
    },
    Export {
        run: RunId,
    },
    /// Folds the run's W_Q into its neighbours (paper 1's theory) and adds the converted model
    /// as a new run, `into`, that continues from here. The front end names the new run: only it
    /// knows every id in use when the runs are spread over several sessions.
    EliminateQuery {
        run: RunId,
        into: RunId,
    },
    /// From now on, load and import only this share of the runs: a session that trains some of
    /// an experiment's runs beside others that train the rest ([`crate::fanout`]).
    Share(Share),
}

/// Which of an experiment's runs a session trains: every `of`-th, from run `index`. The whole
/// experiment is still validated (a setup fails in every share, or in none) and the runs keep the
/// names they have in the whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub index: usize,
    pub of: usize,
}

impl Share {
    /// Every run.
    pub const ALL: Share = Share { index: 0, of: 1 };

    /// Whether run `run` of the whole experiment is in this share.
    pub fn holds(self, run: usize) -> bool {
        run % self.of.max(1) == self.index
    }

    /// The runs of the whole that are in this share, in order.
    pub fn of_runs<T>(self, runs: Vec<T>) -> Vec<T> {
        runs.into_iter().enumerate().filter(|(i, _)| self.holds(*i)).map(|(_, run)| run).collect()
    }

    /// The id in the whole of this share's run `local` (of those it loaded).
    pub fn whole_id(self, local: usize) -> RunId {
        RunId(self.index + local * self.of.max(1))
    }
}

/// A checkpoint file's name and contents.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointFile {
    pub name: String,
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

/// The name and size only: a checkpoint is megabytes.
impl std::fmt::Debug for CheckpointFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointFile").field("name", &self.name).field("bytes", &self.bytes.len()).finish()
    }
}

/// What a front end needs to show a run before it has trained.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunInfo {
    pub id: RunId,
    pub spec: RunSpec,
    pub params: ParamReport,
    /// Metrics the run already had (an imported checkpoint), so curves continue.
    pub steps: Vec<StepRecord>,
    pub evals: Vec<EvalRecord>,
}

/// Every run's attention probabilities on one prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttentionMaps {
    /// The experiment step they were taken at.
    pub step: usize,
    /// One label per prompt token.
    pub tokens: Vec<String>,
    /// The runs whose maps these are, in order (every run of the experiment).
    pub ids: Vec<RunId>,
    /// Per run: [layer][head] → row-major [query, key] probabilities (T × T).
    pub runs: Vec<Vec<Vec<Vec<f32>>>>,
    /// The logits the probabilities are the softmax of, laid out as `runs`: with every learned
    /// term, before the causal mask (a decoder's future pairs are not read by any query).
    pub logits: Vec<Vec<Vec<Vec<f32>>>>,
    /// Per run: its attention diagnostics on the same prompt (effective ranks only for models
    /// up to [`LIVE_RANKS_MAX_WIDTH`] wide).
    pub diagnostics: Vec<ModelDiagnostics>,
    /// Vision runs: the held-out images they classify, the maps' the first of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<HeldOutImages>,
    /// Per run, laid out as `runs`: the class it gives each of `images` (none without images).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predictions: Vec<Vec<usize>>,
}

/// The first held-out images of a vision experiment, as the app draws them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutImages {
    pub height: usize,
    pub width: usize,
    pub channels: usize,
    /// Pixels a patch is wide: the maps' tokens after the class token are the patches, row by
    /// row.
    pub patch: usize,
    /// Each image's values in [0, 1], pixel by pixel (HWC).
    pub pixels: Vec<Vec<f32>>,
    /// Each image's true class.
    pub labels: Vec<usize>,
    pub class_names: Vec<String>,
}

/// The widest model whose effective ranks the live view computes: a singular value
/// decomposition costs d³ per projection, and the maps refresh while training.
pub const LIVE_RANKS_MAX_WIDTH: usize = 256;

impl RunInfo {
    pub fn of(id: RunId, run: &Run) -> Self {
        Self {
            id,
            spec: run.spec.clone(),
            params: ParamReport::new(&run.spec.model),
            steps: run.metrics.steps.clone(),
            evals: run.metrics.evals.clone(),
        }
    }
}

impl AttentionMaps {
    pub fn time(&self) -> usize {
        self.tokens.len()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Message {
    Loaded {
        runs: Vec<RunInfo>,
        data: DataSource,
        /// Where they train.
        compute: ComputeId,
    },
    /// A run stepped or stopped, as the engine says it; its `run` is the run's [`RunId`]'s number.
    Run(RunEvent),
    Evaluated {
        run: RunId,
        record: EvalRecord,
    },
    Attention(AttentionMaps),
    Sampled {
        run: RunId,
        text: String,
    },
    Exported {
        run: RunId,
        name: String,
        #[serde(with = "serde_bytes")]
        checkpoint: Vec<u8>,
        metrics_csv: String,
    },
    /// A converted model joined as run `info`; `report` says how exactly it matches `from`.
    /// (Boxed: the message is rare and large, and every message would carry its size.)
    Converted {
        from: RunId,
        info: Box<RunInfo>,
        report: Box<ReparamReport>,
    },
    /// Every run's checkpoint at experiment step `step`, named `RUN.qkv`: run `ids[i]`'s is
    /// `files[i]`.
    Snapshot {
        step: usize,
        ids: Vec<RunId>,
        files: Vec<CheckpointFile>,
    },
    /// Playing or paused, as the session now is.
    Playing(bool),
    /// Every run has finished or stopped.
    Finished,
    /// A command failed; the session carries on as before it.
    Failed(Problem),
    /// The answer to [`Command::Share`]: what the session says next about a load is that load's
    /// (for [`crate::fanout`], which keeps it from the front end).
    Sharing(Share),
}
