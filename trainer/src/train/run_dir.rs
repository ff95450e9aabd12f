//! The layout of a run directory (see the [module](super) documentation)
//! and what resuming reads back from it: which checkpoint is the latest,
//! and where the run stood there.

use super::config::TrainConfig;
use super::metrics::Metrics;
use anyhow::{Context, Result, bail};
use forge_runtime::differences::{Difference, differences};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const METRICS: &str = "metrics.jsonl";
pub const CONFIG: &str = "config.toml";
pub(crate) const CHECKPOINTS: &str = "checkpoints";
/// The trained model of a complete run.
pub const FINAL: &str = "final";
pub(super) const LATEST: &str = "latest";
pub(super) const OPTIMIZER: &str = "optimizer";
pub(super) const POSITION: &str = "position.json";
/// The sha256 of a checkpoint's files, written last ([`seal`]).
pub(super) const SEAL: &str = "checkpoint.sha256";
pub(super) const REFERENCE: &str = "reference";
pub(super) const EPISODES: &str = "episodes";

/// The episodes file of a run's evaluation (`kind` `eval`) or RL step
/// (`rl`, with `rl.save_rollouts`) at `step`.
pub fn episodes_path(run_dir: &Path, kind: &str, step: usize) -> PathBuf {
    run_dir
        .join(EPISODES)
        .join(format!("{kind}-step-{step:06}.jsonl"))
}

/// Where a run stands, saved with each checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Position {
    /// Steps done (SFT then RL).
    pub step: usize,
    /// RL task draws done.
    pub drawn: usize,
}

/// The checkpoint `checkpoints/latest` names, or none when the run has not
/// written one. Complete checkpoints without the marker are refused rather
/// than passed over: restarting from step 0 would discard the metrics
/// logged up to them, and only the marker says which one the run resumes
/// from.
pub(super) fn read_latest(dir: &Path) -> Result<Option<PathBuf>> {
    let checkpoints = dir.join(CHECKPOINTS);
    let latest = checkpoints.join(LATEST);
    if !latest.exists() {
        if let Some(newest) = newest_checkpoint(&checkpoints)? {
            bail!(
                "{} is missing, but {} holds {newest}: write the name of the checkpoint to resume from \
                 into it (e.g. `{newest}`), or remove {} to restart the run from step 0",
                latest.display(),
                checkpoints.display(),
                checkpoints.display()
            );
        }
        return Ok(None);
    }
    let name = std::fs::read_to_string(&latest)
        .with_context(|| format!("reading {}", latest.display()))?;
    let name = name.trim();
    let checkpoint = checkpoints.join(name);
    if step_of(name).is_none() || !checkpoint.is_dir() {
        let newest = match newest_checkpoint(&checkpoints)? {
            Some(newest) => format!(" (it holds `{newest}`: name that one to resume from it)"),
            None => String::new(),
        };
        bail!(
            "{} names `{name}`, which is not a checkpoint in {}{newest}",
            latest.display(),
            checkpoints.display()
        );
    }
    Ok(Some(checkpoint))
}

/// Refuses to resume the run in `dir`, which holds no checkpoint, from its
/// start where it shows it got past one (`checkpoints/` removed to save
/// space): restarting from step 0 would discard its metrics, and leave its
/// `final/` model beside metrics no longer its own. A run killed before its
/// first checkpoint was whole got no further than that checkpoint's step.
pub(super) fn check_restartable(dir: &Path, config: &TrainConfig) -> Result<()> {
    let checkpoints = dir.join(CHECKPOINTS);
    if dir.join(FINAL).exists() {
        bail!(
            "{} holds the model of a complete run ({FINAL}/), but {} holds no checkpoint to \
             resume from: there is nothing to continue (to train again, choose another \
             --run-dir)",
            dir.display(),
            checkpoints.display()
        );
    }
    let total = config.sft.steps + config.rl.steps;
    let first_checkpoint = [config.checkpoint_every, config.sft.steps, total]
        .into_iter()
        .filter(|&step| step > 0)
        .min();
    // Read past damaged lines: those that parse tell how far it got.
    let metrics = dir.join(METRICS);
    let reached = match metrics.exists() {
        true => forge_runtime::jsonl::read_each(&metrics, forge_runtime::jsonl::parse::<Metrics>)?
            .records
            .into_iter()
            .flatten()
            .filter(|metrics| metrics.kind != "eval")
            .map(|metrics| metrics.step)
            .max(),
        false => None,
    };
    if let (Some(first), Some(reached)) = (first_checkpoint, reached)
        && reached > first
    {
        bail!(
            "{} records steps up to {reached}, past the checkpoint of step {first}, but {} holds \
             no checkpoint to resume from: resuming would restart the run from step 0 and \
             discard them (to train again from the start, choose another --run-dir)",
            metrics.display(),
            checkpoints.display()
        );
    }
    Ok(())
}

/// The name of the complete checkpoint of the highest step in
/// `checkpoints`, if any. A checkpoint is complete once its `position.json`
/// is written (its last file): a run killed while writing its first
/// checkpoint leaves none, and restarts from step 0.
fn newest_checkpoint(checkpoints: &Path) -> Result<Option<String>> {
    let entries = match std::fs::read_dir(checkpoints) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err).with_context(|| format!("reading {}", checkpoints.display())),
    };
    let mut newest: Option<(usize, String)> = None;
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", checkpoints.display()))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if let Some(step) = step_of(&name).filter(|_| entry.path().join(POSITION).is_file())
            && newest.as_ref().is_none_or(|(highest, _)| step > *highest)
        {
            newest = Some((step, name));
        }
    }
    Ok(newest.map(|(_, name)| name))
}

/// The directory name of the checkpoint after `step`.
pub(super) fn checkpoint_name(step: usize) -> String {
    format!("step-{step:06}")
}

/// The step whose model the path `within` a run directory holds, where it
/// is one of the run's checkpoints (`checkpoints/step-NNNNNN`).
pub fn checkpoint_step(within: &Path) -> Option<usize> {
    let mut parts = within.components();
    let (Some(checkpoints), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    (checkpoints.as_os_str() == CHECKPOINTS)
        .then(|| step_of(name.as_os_str().to_str()?))
        .flatten()
}

/// The step a checkpoint's directory name (`step-NNNNNN`) stands for.
fn step_of(name: &str) -> Option<usize> {
    name.strip_prefix("step-")?.parse().ok()
}

/// Writes the sha256 of `checkpoint`'s files (its weights, config,
/// tokenizer and position, a LoRA run's adapters, and the optimizer state),
/// which resuming checks: a damaged file that still parses would otherwise
/// resume silently into a run that is no longer the one it continues.
pub(super) fn seal(checkpoint: &Path) -> Result<()> {
    let digest = checkpoint_digest(checkpoint, true)?;
    crate::checkpoint::write_atomically(&checkpoint.join(SEAL), digest.as_bytes())
}

/// What a sealed directory is to its run, which says what resuming would
/// lose with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sealed {
    /// A checkpoint, resumed from.
    Checkpoint,
    /// The reference policy of the KL penalty (`reference/`).
    Reference,
}

/// Refuses to resume from `dir` (as `sealed_as`) when its files are not
/// those [`seal`] hashed. One without a seal (written before its kind was
/// sealed, or its seal deleted) is taken as it is, with a notice to say
/// so; one sealed before the optimizer state was has its other files
/// checked.
pub(super) fn check_seal(dir: &Path, sealed_as: Sealed) -> Result<Option<String>> {
    let Ok(sealed) = std::fs::read_to_string(dir.join(SEAL)) else {
        return Ok(Some(format!(
            "{} has no {SEAL}: its files are taken as they are, unchecked",
            dir.display()
        )));
    };
    let with_optimizer = sealed.contains(OPTIMIZER_SEALED);
    let now = checkpoint_digest(dir, with_optimizer)?;
    if sealed.trim() == now {
        return Ok(None);
    }
    let damage = damaged_part(dir, sealed.trim(), &now);
    match sealed_as {
        Sealed::Checkpoint => bail!(
            "{} is damaged: {damage} ({SEAL} holds another sha256), so the run cannot resume from it (an earlier checkpoint in {} may do: name it in {})",
            dir.display(),
            dir.parent().unwrap_or(dir).display(),
            dir.with_file_name(LATEST).display()
        ),
        Sealed::Reference => bail!(
            "{} is damaged: {damage} ({SEAL} holds another sha256), so the run cannot resume: \
             its KL penalty would pull towards another policy than the one its RL began with",
            dir.display()
        ),
    }
}

/// Refuses the model of a sealed directory (a checkpoint, or a run's
/// `final/`) whose weights, config, tokenizer or LoRA adapters are not the
/// files [`seal`] hashed: played or trained from, it would run as another
/// policy than the one trained, silently. A directory without a seal (a
/// Hugging Face model, or one written before seals) is taken as it is.
pub fn check_model_seal(dir: &Path) -> Result<()> {
    let Ok(sealed) = std::fs::read_to_string(dir.join(SEAL)) else {
        return Ok(());
    };
    let sealed = sealed.trim();
    let sealed_model = sealed.split(OPTIMIZER_SEALED).next().unwrap_or(sealed);
    let now = checkpoint_digest(dir, false)?;
    if sealed_model == now {
        return Ok(());
    }
    let damage = damaged_part(dir, sealed_model, &now);
    bail!(
        "{} is damaged: {damage} ({SEAL} holds another sha256)",
        dir.display()
    )
}

/// What of `checkpoint` changed since it was sealed, as a seal's parts
/// tell: its model files, its adapters, or its optimizer state.
fn damaged_part(checkpoint: &Path, sealed: &str, now: &str) -> String {
    let parts = |digest: &str| {
        let (files, optimizer) = match digest.split_once(OPTIMIZER_SEALED) {
            Some((files, optimizer)) => (files, Some(optimizer.to_owned())),
            None => (digest, None),
        };
        let mut files = files.split(' ').map(str::to_owned);
        (files.next(), files.next(), optimizer)
    };
    let (sealed_model, sealed_adapters, sealed_optimizer) = parts(sealed);
    let (model, adapters, optimizer) = parts(now);
    use crate::checkpoint::{CONFIG, PROMPT, TOKENIZER, WEIGHTS};
    if sealed_model != model {
        // A checkpoint's position is one of its files; `final/` has none.
        let is_checkpoint = checkpoint
            .file_name()
            .and_then(|name| step_of(name.to_str()?))
            .is_some();
        let missing: Vec<&str> = [WEIGHTS, CONFIG, TOKENIZER, PROMPT, POSITION]
            .into_iter()
            .filter(|&file| file != POSITION || is_checkpoint)
            .filter(|file| !checkpoint.join(file).exists())
            .collect();
        match missing.as_slice() {
            [] => format!(
                "its model files (the weights, {WEIGHTS}, or one of its .json files: config, \
                 tokenizer, prompt{}) changed since it was written",
                match is_checkpoint {
                    true => ", position",
                    false => "",
                }
            ),
            [file] => format!("its {file} is missing"),
            files => format!("its {} are missing", files.join(", ")),
        }
    } else if sealed_adapters != adapters {
        let adapters = crate::checkpoint::ADAPTER_DIR;
        format!("its LoRA adapters ({adapters}/) changed since it was written")
    } else if sealed_optimizer != optimizer {
        let state = super::optimizer::state_file(&checkpoint.join(OPTIMIZER));
        let name = state.file_name().unwrap_or_default().display().to_string();
        match state.exists() {
            true => format!("its optimizer state ({name}) changed since it was written"),
            false => format!("its optimizer state ({name}) is missing"),
        }
    } else {
        "its files changed since it was written".to_owned()
    }
}

/// What precedes the optimizer state's sha256 in a seal.
const OPTIMIZER_SEALED: &str = " optimizer:";

/// The sha256 of the model files of `checkpoint`, then of its adapters,
/// then (`with_optimizer`) of its optimizer state.
fn checkpoint_digest(checkpoint: &Path, with_optimizer: bool) -> Result<String> {
    let mut digest = crate::checkpoint::files_digest(checkpoint)?;
    let adapters = checkpoint.join(crate::checkpoint::ADAPTER_DIR);
    if adapters.is_dir() {
        digest = format!("{digest} {}", crate::checkpoint::files_digest(&adapters)?);
    }
    let optimizer = super::optimizer::state_file(&checkpoint.join(OPTIMIZER));
    if with_optimizer && optimizer.is_file() {
        let state = crate::checkpoint::files_digest(&optimizer)?;
        digest = format!("{digest}{OPTIMIZER_SEALED}{state}");
    }
    Ok(digest)
}

/// The position of `checkpoint`, which must be the step its directory is
/// named for: resumed at another step (a position edited, or copied from
/// another checkpoint), the run would miss the optimizer state, reference
/// model and metrics of that step.
pub(super) fn read_position(checkpoint: &Path) -> Result<Position> {
    let path = checkpoint.join(POSITION);
    // Written last: a checkpoint without it was not finished, or lost it.
    let position: Position = read_json(&path).with_context(|| {
        format!(
            "{} cannot be resumed from (an earlier checkpoint may do: name it in {})",
            checkpoint.display(),
            checkpoint.with_file_name(LATEST).display()
        )
    })?;
    let step = checkpoint
        .file_name()
        .and_then(|name| step_of(name.to_str()?))
        .expect("read_latest names checkpoints by step");
    if position.step != step {
        let latest = checkpoint.with_file_name(LATEST);
        bail!(
            "{} says step {}, but it is the checkpoint of step {step}: restore it, \
             or name another checkpoint in {}",
            path.display(),
            position.step,
            latest.display()
        );
    }
    Ok(position)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Settings a resumed run may take from an edited config: they say where a
/// service is reached, not what the run computes.
const RELOCATABLE: [&str; 4] = [
    "user.base_url",
    "user.api_key_env",
    "judge.base_url",
    "judge.api_key_env",
];

/// Saves the config `checkpoint` is trained under, for [`check_config`].
pub(super) fn save_config(checkpoint: &Path, config: &TrainConfig) -> Result<()> {
    let text = toml::to_string(config).context("writing the run's config")?;
    std::fs::write(checkpoint.join(CONFIG), text)
        .with_context(|| format!("writing {}", checkpoint.join(CONFIG).display()))
}

/// Refuses to resume `checkpoint` under a `config` other than its own
/// (beyond [`RELOCATABLE`] settings): from a changed config the run would
/// no longer continue as it began. A sealed checkpoint without its config
/// (removed) is refused, saying how to restore it; an unsealed one (saved
/// before checkpoints were sealed, or kept their config) passes.
pub(super) fn check_config(checkpoint: &Path, config: &TrainConfig) -> Result<()> {
    let path = checkpoint.join(CONFIG);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err)
            if err.kind() == std::io::ErrorKind::NotFound && !checkpoint.join(SEAL).is_file() =>
        {
            return Ok(());
        }
        // Without it, a changed config would resume unnoticed.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => bail!(
            "{} is missing, so the run's config cannot be checked against the one its \
             checkpoint was written under: restore it (a copy of the run's {CONFIG}, if that is \
             unchanged since), or name an earlier checkpoint in {}",
            path.display(),
            checkpoint.with_file_name(LATEST).display()
        ),
        Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
    };
    let saved =
        TrainConfig::from_saved(&text).with_context(|| format!("parsing {}", path.display()))?;
    let changes = changed_settings(&saved, config)?;
    if changes.is_empty() {
        return Ok(());
    }
    let listed = changes
        .iter()
        .map(|Difference { key, then, now }| format!("{key} = {then} then, {now} now"))
        .collect::<Vec<_>>()
        .join("; ");
    bail!(
        "the run's config has changed since its checkpoint {} ({listed}): a resumed run \
         continues exactly as it began, so restore the settings (the checkpoint keeps them in \
         {}), or start a new run from the checkpoint with model.init",
        checkpoint.display(),
        path.display()
    )
}

/// The settings whose values differ between `then` and `now`, apart from
/// [`RELOCATABLE`]s.
fn changed_settings(then: &TrainConfig, now: &TrainConfig) -> Result<Vec<Difference>> {
    let changes = differences(&serde_json::to_value(then)?, &serde_json::to_value(now)?);
    Ok(changes
        .into_iter()
        .filter(|change| !RELOCATABLE.contains(&change.key.as_str()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_is_known_by_its_place_in_the_run() {
        let step = |path: &str| checkpoint_step(Path::new(path));
        assert_eq!(step("checkpoints/step-000100"), Some(100));
        assert_eq!(step("final"), None);
        assert_eq!(step("checkpoints"), None);
        assert_eq!(step("checkpoints/step-000100/model.safetensors"), None);
        assert_eq!(step("elsewhere/step-000100"), None);
        assert_eq!(step("checkpoints/latest"), None);
    }

    #[test]
    fn a_sealed_reference_policy_that_changed_is_refused_and_an_unsealed_one_noted() {
        let dir = tempfile::tempdir().unwrap();
        let reference = dir.path().join(REFERENCE);
        std::fs::create_dir_all(&reference).unwrap();
        // A full fine-tuning run's reference: a model and how it is prompted.
        use crate::checkpoint::{CONFIG, PROMPT, TOKENIZER, WEIGHTS};
        for file in [CONFIG, PROMPT, TOKENIZER] {
            std::fs::write(reference.join(file), b"{}").unwrap();
        }
        let weights = reference.join(WEIGHTS);
        std::fs::write(&weights, b"weights").unwrap();
        let notice = check_seal(&reference, Sealed::Reference).unwrap().unwrap();
        assert!(
            notice
                .ends_with("has no checkpoint.sha256: its files are taken as they are, unchecked"),
            "{notice}"
        );
        seal(&reference).unwrap();
        assert_eq!(check_seal(&reference, Sealed::Reference).unwrap(), None);
        std::fs::write(&weights, b"weighty").unwrap();
        let err = check_seal(&reference, Sealed::Reference)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("reference is damaged: its model files"),
            "{err}"
        );
        assert!(
            err.contains("its KL penalty would pull towards another policy"),
            "{err}"
        );
        // A file gone is named as such.
        std::fs::write(&weights, b"weights").unwrap();
        std::fs::remove_file(reference.join(CONFIG)).unwrap();
        let err = check_seal(&reference, Sealed::Reference)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("reference is damaged: its config.json is missing"),
            "{err}"
        );
    }

    #[test]
    fn a_changed_setting_is_named_but_a_moved_endpoint_is_not() {
        let then = TrainConfig::smoke();
        let mut now = then.clone();
        now.user.base_url = "http://elsewhere:8000/v1".into();
        now.judge.api_key_env = "OTHER_KEY".into();
        assert!(changed_settings(&then, &now).unwrap().is_empty());
        now.rl.lr *= 2.0;
        now.seed += 1;
        let changes = changed_settings(&then, &now).unwrap();
        let keys: Vec<&str> = changes.iter().map(|change| change.key.as_str()).collect();
        assert_eq!(keys, ["rl.lr", "seed"]);
        assert_eq!(changes[1].then, then.seed);
        assert_eq!(changes[1].now, now.seed);
    }
}
