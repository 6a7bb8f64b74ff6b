//! One writer per output folder: whatever writes runs into a folder (`qkv train`, `compare` and
//! `resume`; the desktop app's exports) holds `.qkv-lock` there, holding its process id, and a
//! second writer refuses, naming the first, instead of the two overwriting each other's
//! checkpoints. A lock left by a process that is gone (a `kill -9`, a second Ctrl-C) is taken over.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The lock file's name in a folder.
const LOCK: &str = ".qkv-lock";

/// Why a folder could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum FolderLockError {
    #[error(
        "{folder} is in use by another QKV Lab program (process {pid}) writing its runs there: wait for it, stop it, or \
         write somewhere else (`--out` on the command line, the folder field in the app)"
    )]
    InUse { folder: String, pid: u32 },
    #[error("cannot {action} {path}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        cause: std::io::Error,
    },
    #[error("cannot lock {0}: another program took it at the same moment")]
    Raced(String),
}

/// Held while its holder writes the folder; released when dropped.
pub struct FolderLock {
    path: PathBuf,
}

impl FolderLock {
    /// Locks `folder`, creating it if it is missing.
    pub fn take(folder: &Path) -> Result<Self, FolderLockError> {
        fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FolderLockError {
            let path = path.display().to_string();
            move |cause| FolderLockError::Io { action, path, cause }
        }
        std::fs::create_dir_all(folder).map_err(io("create", folder))?;
        let path = folder.join(LOCK);
        // Twice at most: once more after clearing a lock whose process is gone.
        for _ in 0..2 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    write!(file, "{}", std::process::id()).map_err(io("write", &path))?;
                    return Ok(Self { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(&path).ok().and_then(|text| text.trim().parse::<u32>().ok());
                    match holder {
                        Some(pid) if is_running(pid) => {
                            return Err(FolderLockError::InUse { folder: folder.display().to_string(), pid });
                        }
                        // Gone, or a file that is no lock of ours: clear it and try again.
                        _ => std::fs::remove_file(&path).map_err(io("clear the stale lock", &path))?,
                    }
                }
                Err(e) => return Err(io("lock", folder)(e)),
            }
        }
        Err(FolderLockError::Raced(folder.display().to_string()))
    }
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether process `pid` still runs. Where that cannot be asked without a system call of its
/// own (not Linux), a lock is taken to be held: the message names the file to remove.
fn is_running(pid: u32) -> bool {
    if cfg!(target_os = "linux") { Path::new(&format!("/proc/{pid}")).exists() } else { true }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_folder_is_refused_and_a_stale_lock_is_taken_over() {
        let folder = std::env::temp_dir().join(format!("qkv-lock-test-{}", std::process::id()));
        let held = FolderLock::take(&folder).unwrap();
        let refused = FolderLock::take(&folder).err().expect("held by this process").to_string();
        assert!(refused.contains(&format!("process {}", std::process::id())), "{refused}");
        drop(held);
        assert!(!folder.join(LOCK).exists(), "released");
        if cfg!(target_os = "linux") {
            // A process id no process has (above Linux's pid_max).
            std::fs::write(folder.join(LOCK), "4294967295").unwrap();
            drop(FolderLock::take(&folder).expect("a stale lock is taken over"));
        }
        std::fs::remove_dir_all(&folder).ok();
    }
}
