//! The config of a new run: the preset, overlaid by each `--config` file in
//! turn and cut to `--stage`. A key that is wrong is blamed on the file that
//! set it, not on every file given.

use super::Stage;
use anyhow::{Context, Result, bail};
use forge_trainer::train::config::TrainConfig;
use std::path::PathBuf;

/// `preset`, overlaid by `files` in order, cut to `stage`, and checked.
pub(super) fn layered(
    preset: &TrainConfig,
    files: &[PathBuf],
    stage: Stage,
) -> Result<TrainConfig> {
    let base = toml::Table::try_from(preset)?;
    let mut overlays = Vec::with_capacity(files.len());
    for path in files {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let overlay: toml::Table =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        overlays.push((path, overlay));
    }
    let problem = match checked(&base, overlays.iter().map(|(_, overlay)| overlay), stage) {
        Ok(config) => return Ok(config),
        Err(problem) => problem,
    };
    // The last file whose keys alone, over the preset, have the problem;
    // none where the preset has it (with `--stage`); every file, where it
    // comes of them together.
    if checked(&base, [], stage).err().as_ref() == Some(&problem) {
        bail!("{problem}");
    }
    let blamed = overlays
        .iter()
        .rev()
        .find(|(_, overlay)| checked(&base, [overlay], stage).err().as_ref() == Some(&problem))
        .map(|(path, _)| path.display().to_string())
        .unwrap_or_else(|| {
            let files: Vec<_> = files
                .iter()
                .map(|path| path.display().to_string())
                .collect();
            files.join(", ")
        });
    match blamed.is_empty() {
        true => bail!("{problem}"),
        false => bail!("{blamed}: {problem}"),
    }
}

/// `base` overlaid by `overlays` and cut to `stage`, or what is wrong with it.
fn checked<'a>(
    base: &toml::Table,
    overlays: impl IntoIterator<Item = &'a toml::Table>,
    stage: Stage,
) -> Result<TrainConfig, String> {
    let mut merged = base.clone();
    for overlay in overlays {
        merge(&mut merged, overlay.clone());
    }
    let mut config = TrainConfig::from_table(merged).map_err(|err| err.to_string())?;
    match stage {
        Stage::All => {}
        Stage::Sft if config.sft.steps == 0 => {
            return Err("--stage sft trains for sft.steps, which is 0: nothing to train".into());
        }
        Stage::Rl if config.rl.steps == 0 => {
            return Err("--stage rl trains for rl.steps, which is 0: nothing to train".into());
        }
        Stage::Sft => config.rl.steps = 0,
        Stage::Rl => config.sft.steps = 0,
    }
    config.validate()?;
    Ok(config)
}

/// `overlay`'s keys replace `base`'s, tables merged key by key.
fn merge(base: &mut toml::Table, overlay: toml::Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base)), toml::Value::Table(overlay)) => merge(base, overlay),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}
