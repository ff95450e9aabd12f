//! One module per subcommand.

pub mod bench;
pub mod compare;
pub mod eval;
pub mod example;
pub mod inspect;
pub mod model;
pub mod replay;
pub mod run;
pub mod serve;
pub mod show;
pub mod synth;
pub mod train;

use anyhow::{Context, Result, bail};
use forge_runtime::TrajectoryWriter;
use forge_runtime::trajectory::{self, EpisodeRecord};
use std::path::Path;

/// Whether `dir` exists and holds anything: a command that writes a new
/// directory refuses one that does, rather than write over what is there.
pub(crate) fn holds_files(dir: &Path) -> Result<bool> {
    if !dir.exists() {
        // A link to nothing does not exist, yet cannot be created either.
        if dir.is_symlink() {
            bail!(
                "{} is a symbolic link to nothing: remove it, or name another directory",
                dir.display()
            );
        }
        return Ok(false);
    }
    if !dir.is_dir() {
        bail!("{} is a file, not a directory", dir.display());
    }
    let mut entries = dir
        .read_dir()
        .with_context(|| format!("reading {}", dir.display()))?;
    Ok(entries.next().is_some())
}

/// Holds `dir` for this process until the returned handle is dropped. Two
/// processes writing one run or evaluation directory would interleave their
/// records and replace each other's files, losing what one of them did. The
/// lock is the operating system's advisory lock on the directory itself: it
/// leaves no file behind and dies with the process.
pub(crate) fn hold(dir: &Path) -> Result<std::fs::File> {
    let handle = std::fs::File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    match handle.try_lock() {
        Ok(()) => Ok(handle),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "{} is in use by another forge process: let it finish, or choose another directory",
            dir.display()
        ),
        Err(std::fs::TryLockError::Error(err)) => {
            Err(err).with_context(|| format!("locking {}", dir.display()))
        }
    }
}

/// Leaves `dir`, which a command that failed was writing into, as the
/// command found it: gone, or empty (as [`holds_files`] required) when it
/// `existed`; so that the same command can be run again once the cause is
/// fixed, and nothing half-written is taken for a result.
pub(crate) fn leave_as_found(dir: &Path, existed: bool) {
    let _ = std::fs::remove_dir_all(dir);
    if existed {
        let _ = std::fs::create_dir(dir);
    }
}

/// The episodes of the trajectory file `path`, warning of a torn last line
/// (an episode a killed process was writing), which is left out.
pub(crate) fn read_trajectories(path: &Path) -> Result<Vec<EpisodeRecord>> {
    let file = trajectory::read(path)?;
    if file.torn_tail {
        eprintln!(
            "warning: {} ends with a torn line (a run was killed while writing it); it is skipped",
            path.display()
        );
    }
    Ok(file.episodes)
}

/// Opens the trajectory file `path` to append episodes to, saying so when a
/// torn last line (an episode a killed process was writing) is cut off
/// first: that episode is not in the file.
pub(crate) fn append_trajectories(path: &Path) -> Result<TrajectoryWriter> {
    let writer = TrajectoryWriter::append(path)?;
    let cut = writer.torn_tail_cut();
    if cut > 0 {
        eprintln!(
            "warning: {} ended with a torn line (a run was killed while writing it): \
             its {cut} bytes are cut off before appending",
            path.display()
        );
    }
    Ok(writer)
}
