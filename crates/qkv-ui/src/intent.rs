//! What a panel asks the playground to do. A panel's `ui` draws what it shows and returns at
//! most one [`Intent`] (a user clicks one thing at a time); the playground carries each out in
//! one place (`Playground::carry_out`), so that no panel holds the session or the platform.

use qkv_session::RunId;

use crate::figures::Export;
use crate::files::FileKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// Build the experiment anew from the edited setup (Apply setup).
    ApplySetup,
    /// Open the platform's dialog for a file of this kind: a text to train on, a checkpoint to
    /// continue (the browser's way to name a file).
    PickFile(FileKind),
    /// Choose the path of a text to train on in the platform's dialog (the desktop's).
    BrowseText,
    /// Choose a checkpoint's path in the platform's dialog, then continue it.
    BrowseCheckpoint,
    /// Continue the run saved at the path typed in the files panel.
    ImportPath,
    /// Choose the export folder in the platform's dialog.
    ChooseFolder,
    /// Copy this link (it opens the applied setup).
    CopyLink(String),
    /// Save this run's checkpoint and metrics.
    ExportRun(RunId),
    /// Save a figure (a chart, the maps) as SVG, PNG or CSV.
    ExportFigure(Export),
    /// Show the attention maps on this prompt.
    AttentionPrompt(String),
    /// Refresh the attention maps every this many steps while training.
    RefreshMapsEvery(usize),
    /// Generate a sample from each of these runs, with the samples panel's prompt and options.
    Sample(Vec<RunId>),
    /// Fold this run's W_Q into its neighbours, as a new run (paper 1's theory).
    EliminateQuery(RunId),
}
