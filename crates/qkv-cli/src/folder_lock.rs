//! One writer per output folder: `train`, `compare` and `resume` hold `.qkv-lock` (their process
//! id) in the folder they write, and a second command on that folder refuses, naming the first,
//! instead of the two overwriting each other's checkpoints. A lock left by a process that is gone
//! (a `kill -9`, a second Ctrl-C) is taken over.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::Failure;

/// The lock file's name in a folder.
const LOCK: &str = ".qkv-lock";

/// Held while a command writes its folder; released when dropped.
pub struct FolderLock {
    path: PathBuf,
}

impl FolderLock {
    pub fn take(folder: &Path) -> Result<Self, Failure> {
        std::fs::create_dir_all(folder).map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
        let path = folder.join(LOCK);
        // Twice at most: once more after clearing a lock whose process is gone.
        for _ in 0..2 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    write!(file, "{}", std::process::id()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    return Ok(Self { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(&path).ok().and_then(|text| text.trim().parse::<u32>().ok());
                    match holder {
                        Some(pid) if is_running(pid) => {
                            return Err(format!(
                                "{} is in use by another qkv (process {pid}) writing its runs there: wait for it, stop it, or \
                                 pass another --out",
                                folder.display()
                            )
                            .into());
                        }
                        // Gone, or a file that is no lock of ours: clear it and try again.
                        _ => std::fs::remove_file(&path).map_err(|e| format!("cannot clear the stale {}: {e}", path.display()))?,
                    }
                }
                Err(e) => return Err(format!("cannot lock {}: {e}", folder.display()).into()),
            }
        }
        Err(format!("cannot lock {}: another qkv took it at the same moment", folder.display()).into())
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
