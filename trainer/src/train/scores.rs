//! What became of each rollout of an RL step, written beside the step's
//! saved episodes (`rl.save_rollouts`) as `rl-step-NNNNNN.scores.jsonl`,
//! one line per episode in the same order: its reward, whether the judge
//! masked it, whether dynamic sampling kept its task, and the advantage it
//! was trained with. The episodes say what the policy did; this says what
//! the update made of it (`forge show` prints both).

use anyhow::{Context, Result};
use forge_runtime::jsonl;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One rollout's part in its step's update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutScore {
    pub task_id: String,
    pub reward: f64,
    /// The judge found that the user gave wrong or missing information.
    pub masked: bool,
    /// A turn was cut before the model ended it, or the dialogue outgrew
    /// the model's context.
    pub overlong: bool,
    /// Dynamic sampling kept the rollout's task: its valid rollouts did not
    /// all score alike (always, with `rl.dynamic_sampling` off).
    pub kept: bool,
    /// The advantage its tokens were trained with; none where it took no
    /// part: masked (with `rl.mask_overlong`, overlong too) or its task
    /// not kept.
    pub advantage: Option<f64>,
}

/// The scores file beside the episodes file `episodes`
/// (`rl-step-NNNNNN.jsonl` → `rl-step-NNNNNN.scores.jsonl`).
pub fn beside(episodes: &Path) -> PathBuf {
    episodes.with_extension("scores.jsonl")
}

pub(super) fn write(path: &Path, scores: &[RolloutScore]) -> Result<()> {
    let text: String = scores
        .iter()
        .map(|score| serde_json::to_string(score).expect("scores serialise") + "\n")
        .collect();
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The scores in `path`, in its episodes' order (a torn last line, of a
/// run killed while writing it, left out).
pub fn read(path: &Path) -> Result<Vec<RolloutScore>> {
    Ok(jsonl::read(path, "a rollout score", jsonl::parse)?.records)
}
