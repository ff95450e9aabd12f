//! One forge process at a time on a file or directory. Two processes
//! writing one trajectory file, run directory or results directory would
//! interleave their records and replace each other's files, losing what one
//! of them did. The hold is the operating system's advisory lock: it leaves
//! no file behind and dies with the process.

use anyhow::{Context, Result, bail};
use std::fs::{File, TryLockError};
use std::path::Path;

/// Holds `file` (opened from `path`, a `what`: "file", "directory") for this
/// process until it is closed, or says that another process holds it.
pub fn hold(file: &File, path: &Path, what: &str) -> Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => bail!(
            "{} is in use by another forge process: let it finish, or choose another {what}",
            path.display()
        ),
        Err(TryLockError::Error(err)) => {
            Err(err).with_context(|| format!("locking {}", path.display()))
        }
    }
}
