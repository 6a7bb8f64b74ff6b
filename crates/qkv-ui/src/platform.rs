//! What the playground needs from the machine it runs on, as one trait. The shells implement it:
//! the desktop in `src/native.rs`, the browser in `src/web/`. The panels and the playground hold
//! no platform code of their own. The file methods' defaults are those of a machine with a file
//! system (the desktop, the tests); the browser overrides them.

use std::path::{Path, PathBuf};

use qkv_session::SessionTask;

use crate::files::{FileError, FileKind, Inbox, IncomingFile, KeptInbox, KeptRuns, OutgoingFile, PathChoice};

pub trait Platform {
    /// Runs a training session's task beside the UI, so that the UI never waits on training.
    fn spawn_session(&self, task: SessionTask);

    /// Where exports go unless the user picks another folder; `None` where the user has no
    /// folders to name (the browser downloads instead).
    fn default_folder(&self) -> Option<String>;

    /// Hands `files` to the user: into `folder` on the desktop, as downloads in the browser.
    /// Says what happened, for the notice.
    fn save(&self, folder: &str, files: &[OutgoingFile]) -> Result<String, FileError> {
        OutgoingFile::write_into(Path::new(folder), files)
    }

    /// Reads a file dropped on the window into `inbox` (at once, or later where reading is
    /// asynchronous).
    fn read_dropped(&self, file: egui::DroppedFileHandle, inbox: &Inbox) {
        inbox.deliver(IncomingFile::read(file.path()));
    }

    /// Whether the platform keeps the runs between starts of the app ([`Platform::keep_runs`]).
    fn keeps_runs(&self) -> bool {
        false
    }

    /// Keeps `runs` where the next start of the app finds them, replacing what it kept before:
    /// the browser's storage, so that a reload or a closed tab loses no training. The desktop
    /// keeps nothing (its user exports runs to files).
    fn keep_runs(&self, _runs: KeptRuns) {}

    /// Reads the runs kept on an earlier start into `inbox`, if there are any.
    fn kept_runs(&self, _inbox: &KeptInbox) {}

    /// Opens the platform's dialog for a file of `kind`; the picked file arrives in `inbox`.
    /// `false` where the platform has no dialog (the user types a path instead).
    fn pick(&self, _kind: FileKind, _inbox: &Inbox) -> bool {
        false
    }

    /// Opens the platform's dialog for a path (the desktop's, where files are named by path);
    /// `Ok(None)`: the user closed it without choosing.
    fn choose_path(&self, _choice: PathChoice) -> Result<Option<PathBuf>, FileError> {
        Err(FileError::NoDialog)
    }
}
