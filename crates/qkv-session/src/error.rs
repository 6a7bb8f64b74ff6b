//! Why a command failed.

use qkv_model::reparam::ReparamError;
use qkv_train::checkpoint::CheckpointError;
use qkv_train::corpus::DataError;
use qkv_train::cpu_copy::WeightsReadError;
use qkv_train::dataset::DataSourceError;
use qkv_train::plan::StartError;
use qkv_train::run::RunError;

use crate::RunId;

/// Why a command failed. The session sends it to the front end as [`Message::Failed`] and carries
/// on as before the command.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("load an experiment first")]
    NothingLoaded,
    #[error("there is no run {0}")]
    NoSuchRun(RunId),
    #[error("a run {0} is already there: name the new run with an id no run has")]
    RunIdTaken(RunId),
    #[error("no checkpoint to continue: give one or more .qkv files")]
    NoCheckpoints,
    #[error(
        "these checkpoints trained on different data ({first} and {other}): continue runs of one experiment together, or each on its own"
    )]
    MixedData { first: String, other: String },
    #[error(
        "{checkpoint} was trained on {path}, which is not here: put the file back at that path (in the browser: upload it) to continue training it"
    )]
    DataMissing { checkpoint: String, path: String },
    #[error(transparent)]
    DataSource(#[from] DataSourceError),
    #[error("the attention prompt is empty: type a few words")]
    EmptyPrompt,
    #[error("reading attention maps: {0}")]
    ReadBack(#[from] qkv_kernels::ReadBackError),
    #[error("attention diagnostics: {0}")]
    Diagnostics(#[from] qkv_model::diagnostics::DiagnosticsError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Reparam(#[from] ReparamError),
    #[error(transparent)]
    Weights(#[from] WeightsReadError),
}
