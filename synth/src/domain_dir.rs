//! A domain's output directory, `out/<domain>/`: written aside and moved into
//! place whole, so a directory is always one synthesis's files — never a new
//! report beside an old bundle — and a synthesis that fails half-way (an I/O
//! error, a model that stops answering) leaves what was there untouched.

use anyhow::{Context, Result, bail};
use forge_runtime::bundle::{COMPONENT_FILE, INITIAL_STATE_FILE, MANIFEST_FILE, TASKS_FILE};
use std::path::Path;
use tempfile::TempDir;

/// The annotated doc the domain was synthesized from (for a plain doc, the
/// model's answer), which synthesis reads as it is: the same tools, state
/// and tasks again without the model (their instructions as templates).
pub const DOC_FILE: &str = "doc.json";
/// The structure read from the doc (collections, generation order).
pub const STRUCTURE_FILE: &str = "structure.json";
/// The generated tools' source.
pub const SOURCE_FILE: &str = "tools.rs";
/// The tool graph the random walks follow.
pub const GRAPH_FILE: &str = "tool_graph.json";
/// What synthesis made of the domain, or why it was rejected.
pub const REPORT_FILE: &str = "report.md";

/// Every file synthesis writes in a domain's directory: all that replacing
/// one may remove.
const WRITTEN: [&str; 9] = [
    DOC_FILE,
    STRUCTURE_FILE,
    SOURCE_FILE,
    GRAPH_FILE,
    REPORT_FILE,
    MANIFEST_FILE,
    COMPONENT_FILE,
    INITIAL_STATE_FILE,
    TASKS_FILE,
];

/// Checks that `dir` may be replaced by a new synthesis: it is absent or
/// holds only files synthesis writes. Anything else in it (notes, a bundle
/// edited by hand with files of its own, a directory that is not a bundle at
/// all) is refused by name rather than deleted.
pub fn check_replaceable(dir: &Path) -> Result<()> {
    // Replaced, the link would become a directory, and its target keep the
    // old files, stale, with nothing to say so.
    if dir.is_symlink() {
        bail!(
            "{} is a symbolic link: not replacing it (choose another --out)",
            dir.display()
        );
    }
    let entries = match dir.read_dir() {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err).with_context(|| format!("reading {}", dir.display())),
    };
    let mut foreign: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|kind| kind.is_file());
        if !(is_file && WRITTEN.contains(&name.as_str())) {
            foreign.push(name);
        }
    }
    if !foreign.is_empty() {
        foreign.sort();
        bail!(
            "{} holds {}, which synthesis did not write: not replacing it (move it away or \
             choose another --out)",
            dir.display(),
            foreign
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// A directory beside `dir` (hidden, in the same file system, so moving it
/// into place is a rename) where a synthesis of `dir`'s domain is written.
pub fn stage(dir: &Path) -> Result<TempDir> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    tempfile::Builder::new()
        .prefix(&format!(".{name}.partial-"))
        .tempdir_in(parent)
        .with_context(|| format!("creating a directory in {}", parent.display()))
}

/// Whether `name` is that of a directory [`stage`] made: what a synthesis
/// stopped mid-way leaves behind.
pub fn is_staged(name: &std::ffi::OsStr) -> bool {
    name.to_str().and_then(staged_domain).is_some()
}

/// The domain directory whose stage `name` is (`.hr.partial-x1Y2z3` →
/// `hr`), if it is one [`stage`] made.
pub fn staged_domain(name: &str) -> Option<&str> {
    let (domain, _) = name.strip_prefix('.')?.rsplit_once(".partial-")?;
    (!domain.is_empty()).then_some(domain)
}

/// Where [`replace`] moves the directory it replaces, inside its stage.
pub const MOVED_ASIDE: &str = "old";

/// Whether `stage` holds only what a synthesis writes there (its files, and
/// the bundle it moved aside): a directory that only looks like a stage is
/// not a leftover to remove.
pub fn holds_only_synthesis(stage: &Path) -> bool {
    let Ok(entries) = stage.read_dir() else {
        return false;
    };
    entries.into_iter().all(|entry| {
        entry.is_ok_and(|entry| {
            let name = entry.file_name();
            let kind = entry.file_type().ok();
            match name.to_str() {
                Some(MOVED_ASIDE) => {
                    kind.is_some_and(|kind| kind.is_dir())
                        && check_replaceable(&entry.path()).is_ok()
                }
                Some(name) => kind.is_some_and(|kind| kind.is_file()) && WRITTEN.contains(&name),
                None => false,
            }
        })
    })
}

/// Moves `staged` into place as `dir`, replacing what `dir` held (which
/// [`check_replaceable`] allows). The old directory is moved aside first and
/// removed only once the new one is in place.
pub fn replace(dir: &Path, staged: TempDir) -> Result<()> {
    check_replaceable(dir)?;
    let aside = match dir.exists() {
        true => {
            let aside = stage(dir)?;
            std::fs::rename(dir, aside.path().join(MOVED_ASIDE))
                .with_context(|| format!("moving {} aside", dir.display()))?;
            Some(aside)
        }
        false => None,
    };
    if let Err(err) = std::fs::rename(staged.path(), dir) {
        let moving = format!("moving the new files into {}", dir.display());
        // Put the old directory back, or say where it is: the failure
        // loses nothing.
        if let Some(aside) = aside
            && std::fs::rename(aside.path().join(MOVED_ASIDE), dir).is_err()
        {
            let kept = aside.keep().join(MOVED_ASIDE);
            return Err(err)
                .with_context(|| format!("{moving} (the old directory is at {})", kept.display()));
        }
        return Err(err).context(moving);
    }
    // Its path is gone (renamed): nothing is left for it to remove.
    let _ = staged.keep();
    drop(aside);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_directory_replaces_one_synthesis_wrote() {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("shop");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(MANIFEST_FILE), "old").unwrap();
        std::fs::write(dir.join(TASKS_FILE), "old").unwrap();

        let staged = stage(&dir).unwrap();
        std::fs::write(staged.path().join(REPORT_FILE), "new").unwrap();
        replace(&dir, staged).unwrap();

        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, [REPORT_FILE], "nothing of the old synthesis is left");
        let others: Vec<_> = std::fs::read_dir(out.path()).unwrap().collect();
        assert_eq!(others.len(), 1, "no staging directory is left behind");
    }

    #[test]
    fn a_directory_with_other_files_is_kept() {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("shop");
        std::fs::create_dir_all(dir.join("runs")).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        std::fs::write(dir.join(MANIFEST_FILE), "old").unwrap();

        let err = check_replaceable(&dir).unwrap_err().to_string();
        assert!(err.contains("`notes.txt`, `runs`"), "{err}");
        let staged = stage(&dir).unwrap();
        assert!(replace(&dir, staged).is_err());
        assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"mine");
        assert_eq!(std::fs::read(dir.join(MANIFEST_FILE)).unwrap(), b"old");
        assert!(check_replaceable(&out.path().join("absent")).is_ok());

        let link = out.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let err = check_replaceable(&link).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
    }
}
