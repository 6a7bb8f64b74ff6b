//! Files in and out of the app: what the user drops on the window or picks, and what the app hands
//! back. How that happens is the platform's ([`crate::Platform`]): the file system on the desktop,
//! a file picker and downloads in the browser.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use qkv_session::CheckpointFile;
use qkv_train::folder_lock::FolderLockError;
use qkv_train::{Cause, cause};

/// Why a file did not arrive, or could not be handed over. The browser's causes are what its
/// JavaScript said ([`FileError::browser`]), the only form it gives them in.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {name}: {source}")]
    Read {
        name: String,
        #[source]
        source: Cause,
    },
    #[error("could not save in {folder}: {source}; choose another folder")]
    Save {
        folder: String,
        #[source]
        source: Cause,
    },
    /// Another program writes runs into the folder.
    #[error("{0}")]
    InUse(#[source] Cause),
    #[error("could not download {name}: {source}")]
    Download {
        name: String,
        #[source]
        source: Cause,
    },
    #[error("cannot open a file dialog: this app has no file dialog here; type the path instead")]
    NoDialog,
}

impl FileError {
    /// A cause the browser gave as text (a JavaScript exception, a read that failed).
    pub fn browser(said: impl Into<String>) -> Cause {
        Cause::from(Box::<dyn std::error::Error + Send + Sync>::from(said.into()))
    }
}

/// A file the user gave the app, read into memory.
#[derive(Debug, Clone)]
pub struct IncomingFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

impl IncomingFile {
    /// Saved runs end in `.qkv`; anything else is taken as text to train on.
    pub fn is_checkpoint(&self) -> bool {
        self.name.ends_with(".qkv")
    }

    /// Reads the file at `path` (a dropped file, or a path the user typed).
    pub fn read(path: &Path) -> Result<Self, FileError> {
        let name = path.display().to_string();
        match std::fs::read(path) {
            Ok(bytes) => Ok(Self { name, bytes }),
            Err(e) => Err(FileError::Read { name, source: cause(e) }),
        }
    }
}

/// A file the app hands to the user.
#[derive(Debug, Clone)]
pub struct OutgoingFile {
    pub name: String,
    pub bytes: Vec<u8>,
    /// Its media type, for a browser download.
    pub mime: &'static str,
}

impl OutgoingFile {
    /// Writes `files` into `folder` (created if missing); a checkpoint is written whole or not
    /// at all, and not into a folder another QKV Lab program is writing (`qkv train --out`, a
    /// second window): the folder is locked meanwhile. Says what was saved where.
    pub fn write_into(folder: &Path, files: &[OutgoingFile]) -> Result<String, FileError> {
        let fail = |source: Cause| FileError::Save { folder: folder.display().to_string(), source };
        let _lock = qkv_train::folder_lock::FolderLock::take(folder).map_err(|e| match e {
            FolderLockError::InUse { .. } => FileError::InUse(cause(e)),
            other => fail(cause(other)),
        })?;
        for file in files {
            qkv_train::checkpoint::write_atomically(&folder.join(&file.name), &file.bytes).map_err(|e| fail(cause(e)))?;
        }
        Ok(format!("saved {} in {}", names(files), folder.display()))
    }
}

/// "a and b": the files' names, for a notice.
pub fn names(files: &[OutgoingFile]) -> String {
    files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(" and ")
}

/// What a file dialog offers to pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Text to train on.
    Text,
    /// A saved run.
    Checkpoint,
}

impl FileKind {
    /// The file-name endings a dialog offers.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            FileKind::Text => &["txt"],
            FileKind::Checkpoint => &["qkv"],
        }
    }

    /// What a dialog calls files of this kind.
    pub fn description(self) -> &'static str {
        match self {
            FileKind::Text => "UTF-8 text",
            FileKind::Checkpoint => "QKV Lab run",
        }
    }
}

/// What a dialog that answers with a path chooses (the desktop's: the app reads the path itself
/// and shows it, so the user can also type it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathChoice {
    File(FileKind),
    /// A folder to export into.
    Folder,
}

/// Files on their way in. Platforms that read files asynchronously (the browser) deliver them a
/// little later; [`Inbox::take`] collects whatever has arrived.
#[derive(Default, Clone)]
pub struct Inbox {
    arrived: Rc<RefCell<Vec<Result<IncomingFile, FileError>>>>,
}

impl Inbox {
    pub fn take(&self) -> Vec<Result<IncomingFile, FileError>> {
        std::mem::take(&mut self.arrived.borrow_mut())
    }

    /// A file read (or why it could not be).
    pub fn deliver(&self, file: Result<IncomingFile, FileError>) {
        self.arrived.borrow_mut().push(file);
    }
}

/// An experiment's runs as a platform keeps them between visits (the browser's autosave): each
/// run's checkpoint at experiment step `step`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRuns {
    pub step: usize,
    pub files: Vec<CheckpointFile>,
}

/// Where a platform delivers the runs it kept, once read (later, where reading is asynchronous).
#[derive(Default, Clone)]
pub struct KeptInbox {
    arrived: Rc<RefCell<Option<KeptRuns>>>,
}

impl KeptInbox {
    pub fn deliver(&self, kept: KeptRuns) {
        *self.arrived.borrow_mut() = Some(kept);
    }

    pub fn take(&self) -> Option<KeptRuns> {
        self.arrived.borrow_mut().take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qkv_train::folder_lock::FolderLock;

    #[test]
    fn the_app_does_not_save_into_a_folder_another_program_is_writing() {
        let folder = std::env::temp_dir().join(format!("qkv-ui-save-test-{}", std::process::id()));
        let file = OutgoingFile { name: "run.qkv".to_string(), bytes: b"kept".to_vec(), mime: "application/octet-stream" };
        // As `qkv train --out` holds it while it trains.
        let held = FolderLock::take(&folder).unwrap();
        let refused = OutgoingFile::write_into(&folder, std::slice::from_ref(&file)).unwrap_err();
        assert!(
            matches!(&refused, FileError::InUse(_)) && refused.to_string().contains(&format!("process {}", std::process::id())),
            "{refused}"
        );
        assert!(!folder.join("run.qkv").exists(), "nothing written");
        drop(held);
        let saved = OutgoingFile::write_into(&folder, &[file]).unwrap();
        assert!(saved.contains("run.qkv") && folder.join("run.qkv").exists(), "{saved}");
        assert!(!folder.join(".qkv-lock").exists(), "the app's own lock is released");
        std::fs::remove_dir_all(&folder).ok();
    }
}
