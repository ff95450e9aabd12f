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

use crate::output;
use anyhow::{Context, Result, bail};
use forge_runtime::trajectory::{self, EpisodeRecord};
use forge_runtime::{Environment, TrajectoryWriter};
use std::path::{Path, PathBuf};

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

/// Holds `dir` for this process ([`forge_runtime::hold`]) until the
/// returned handle is dropped.
pub(crate) fn hold(dir: &Path) -> Result<std::fs::File> {
    let handle = std::fs::File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    forge_runtime::hold::hold(&handle, dir, "directory")?;
    Ok(handle)
}

/// Whether `path` is a file with something in it.
pub(crate) fn non_empty(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.len() > 0)
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

/// The trajectory file `path` names: itself, or where it is a `forge eval`
/// results directory, the file of episodes it holds. An evaluation's
/// `--out` holds one per environment and policy (an environment's
/// directory, one per policy): where there are several, refused, naming
/// them.
pub(crate) fn trajectory_file(path: &Path) -> Result<PathBuf> {
    if !path.is_dir() {
        return Ok(path.to_owned());
    }
    if path.join(eval::TRAJECTORIES).is_file() {
        return Ok(path.join(eval::TRAJECTORIES));
    }
    let within = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.is_dir())
            .collect()
    };
    // Environments, each holding policies; or, in an environment's, policies.
    let children = within(path);
    let mut found: Vec<PathBuf> = children
        .iter()
        .flat_map(|child| within(child))
        .chain(children.iter().cloned())
        .map(|results| results.join(eval::TRAJECTORIES))
        .filter(|file| file.is_file())
        .collect();
    found.sort();
    match found.as_slice() {
        [] => bail!("{} is a directory, not a file of episodes", path.display()),
        [one] => Ok(one.clone()),
        several => bail!(
            "{} holds the episodes of {} evaluations: name one of {}",
            path.display(),
            several.len(),
            several
                .iter()
                .map(|file| file.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The episodes of the trajectory file `path`, warning of a torn last line
/// (an episode a killed process was writing), which is left out.
pub(crate) fn read_trajectories(path: &Path) -> Result<Vec<EpisodeRecord>> {
    let file = trajectory::read(path)?;
    if file.torn_tail {
        warn_torn_tail(path);
    }
    Ok(file.episodes)
}

/// Warns that the torn last line of the trajectory file `path` is skipped.
pub(crate) fn warn_torn_tail(path: &Path) {
    eprintln!(
        "warning: {} ends with a torn line (a run was killed while writing it); it is skipped",
        path.display()
    );
}

/// Refuses to append episodes of `envs` to a file holding those of another
/// environment (or of another version of one of them): `forge replay`
/// checks each episode against the environment it was recorded on, which it
/// is given with the file.
pub(crate) fn refuse_other_environments(path: &Path, envs: &[&Environment]) -> Result<()> {
    // A file that does not read as trajectories (or is no file: a device)
    // is the writer's to refuse, naming why.
    if !path.is_file() {
        return Ok(());
    }
    let Ok(file) = trajectory::read(path) else {
        return Ok(());
    };
    let ours = |hash: &str| envs.iter().any(|env| env.content_hash() == hash);
    if let Some(other) = file
        .episodes
        .iter()
        .find(|record| !ours(&record.environment.content_hash))
    {
        let written = envs
            .iter()
            .map(|env| {
                format!(
                    "`{}` ({})",
                    env.name(),
                    output::short_hash(env.content_hash())
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        bail!(
            "{} holds episodes of environment `{}` ({}), not of {written}: a file holds the \
             episodes of the environments written to it, which `forge replay` is given to check \
             them against; pass another --out",
            path.display(),
            other.environment.name,
            output::short_hash(&other.environment.content_hash),
        );
    }
    Ok(())
}

/// How many of `records` (episodes on `env`) are of tasks with NL
/// assertions that no judge evaluated: their reward covers only the other
/// checks, and reads higher than a judged one could.
pub(crate) fn unjudged<'a>(
    env: &Environment,
    records: impl IntoIterator<Item = &'a EpisodeRecord>,
) -> usize {
    records
        .into_iter()
        .filter(|record| {
            record.verdict.nl_assertions.is_empty()
                && env
                    .task(&record.task_id)
                    .is_some_and(|task| !task.task.nl_assertions.is_empty())
        })
        .count()
}

/// What a note says of [`unjudged`] episodes.
pub(crate) fn unjudged_note(unjudged: usize, episodes: usize) -> String {
    format!(
        "{unjudged} of {episodes} episodes' tasks have NL assertions that no judge evaluated \
         (see --judge-model): their reward covers the other checks"
    )
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
