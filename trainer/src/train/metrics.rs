//! `metrics.jsonl`: a line per step and per evaluation of a run, appended
//! as they finish and cut back to a checkpoint's step when a run resumes.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// One line of `metrics.jsonl`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// `sft`, `rl` or `eval`.
    pub kind: String,
    /// Steps done so far in the run (SFT and RL together).
    pub step: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lr: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// Trained tokens in the step (RL: over all its updates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<usize>,
    /// Trained tokens per second of the step's optimisation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train_tokens_per_s: Option<f64>,
    /// The L2 norm of the step's gradient before clipping (RL: of its first
    /// update, whose loss `loss` is). An RL step with nothing to learn
    /// (every advantage 0) updates nothing and has neither.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grad_norm: Option<f64>,
    /// RL: mean reward and success share over every rollout of the step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reward: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success: Option<f64>,
    /// RL: share of rollouts masked out (user misinformation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masked_share: Option<f64>,
    /// RL: share of rollouts with a turn cut before the model ended it (at
    /// `rl.max_new_tokens` or the context's end): many say the limit is
    /// too low, or the policy rambles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated_share: Option<f64>,
    /// RL: share of rollouts whose dialogue outgrew the model's context
    /// (ended there, judged as they stood).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_full_share: Option<f64>,
    /// RL: tasks rolled out, and those kept by dynamic sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks_drawn: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks_kept: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advantage_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advantage_std: Option<f64>,
    /// RL: share of trained tokens the PPO clip took out of the gradient,
    /// in the step's last update (in the first, every ratio is 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clipped_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kl: Option<f64>,
    /// RL: mean |log-prob as trained − log-prob as sampled| of the trained
    /// tokens before the step's first update — how far decoding's numerics
    /// stray from training's (0 up to rounding; larger in bf16).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprob_gap: Option<f64>,
    /// RL: the mean negative log-prob of the sampled tokens, an unbiased
    /// estimate of the policy's entropy at the sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entropy: Option<f64>,
    /// RL: tokens the policy sampled in the step's rollouts, and how fast.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout_tokens_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub episodes_per_s: Option<f64>,
    /// Eval: success share on the held-out tasks (greedy decoding).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_success: Option<f64>,
    /// Eval: the same, each environment's held-out tasks apart: a run on
    /// many environments may gain on some and lose on others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_success_by_environment: Option<BTreeMap<String, f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

/// The lines of a run's `metrics.jsonl` (none if it does not exist yet). A
/// last line cut short (the run was killed while writing it) is left out:
/// it lies past the last checkpoint, and the resumed run writes it again.
pub fn read_metrics(path: &Path) -> Result<Vec<Metrics>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    Ok(forge_runtime::jsonl::read(path, "a metrics record", forge_runtime::jsonl::parse)?.records)
}

/// Appends `metrics` to the file at `path`.
pub(super) fn append(path: &Path, metrics: &Metrics) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    writeln!(file, "{}", serde_json::to_string(metrics)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// What [`keep_until`] left of a metrics file.
#[derive(Debug)]
pub(super) struct Kept {
    /// The records kept, in the file's order.
    pub records: Vec<Metrics>,
    /// What is amiss with them, for the run's user to be told.
    pub notice: Option<String>,
}

/// Leaves in the file at `path` the lines of steps up to `step`: those past
/// a checkpoint are made again by the run resumed from it. Tells what is
/// amiss with the lines before it: a file cut short, or gone, has lost the
/// metrics of steps its checkpoint holds, which the run cannot make again.
pub(super) fn keep_until(path: &Path, step: usize) -> Result<Kept> {
    let name = path
        .file_name()
        .map_or(path.as_os_str(), |name| name)
        .display();
    if !path.exists() {
        let notice = (step > 0).then(|| {
            format!(
                "{name} is gone: the metrics of the steps up to the checkpoint's {step} are lost"
            )
        });
        return Ok(Kept {
            records: Vec::new(),
            notice,
        });
    }
    let mut records = Vec::new();
    let mut text = String::new();
    let mut last_step = 0;
    let read = forge_runtime::jsonl::read_each(path, forge_runtime::jsonl::parse::<Metrics>)?;
    for (metrics, line) in read.records.into_iter().zip(read.lines) {
        let metrics = metrics.map_err(|err| {
            anyhow::anyhow!(
                "{} line {line} is not a metrics record: {err:#}; to resume, mend or delete that \
                 line (its metrics are then lost)",
                path.display()
            )
        })?;
        if metrics.step <= step {
            if metrics.kind != "eval" {
                last_step = last_step.max(metrics.step);
            }
            text.push_str(&serde_json::to_string(&metrics)?);
            text.push('\n');
            records.push(metrics);
        }
    }
    crate::checkpoint::write_atomically(path, text.as_bytes())?;
    let notice = (last_step < step).then(|| {
        let lost = match last_step + 1 {
            first if first == step => format!("step {step}"),
            first => format!("steps {first} to {step}"),
        };
        format!(
            "{name} ends at step {last_step}, before the checkpoint's step {step} (it was cut \
             short or edited): the metrics of {lost} are lost, and curves and `forge compare` \
             go without them"
        )
    });
    Ok(Kept { records, notice })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: &str, step: usize) -> String {
        let metrics = Metrics {
            kind: kind.into(),
            step,
            ..Metrics::default()
        };
        serde_json::to_string(&metrics).unwrap() + "\n"
    }

    #[test]
    fn resuming_keeps_the_steps_up_to_the_checkpoint_and_names_those_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let lines = [
            line("eval", 0),
            line("sft", 1),
            line("sft", 2),
            line("sft", 3),
        ];
        std::fs::write(&path, lines.concat()).unwrap();
        let kept = keep_until(&path, 2).unwrap();
        assert_eq!(kept.notice, None);
        let steps: Vec<_> = kept.records.iter().map(|metrics| metrics.step).collect();
        assert_eq!(steps, [0, 1, 2]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), lines[..3].concat());

        // Cut short: steps the checkpoint holds have no metrics.
        std::fs::write(&path, lines[..2].concat() + "{\"kind\": \"sf").unwrap();
        let notice = keep_until(&path, 3).unwrap().notice.unwrap();
        assert!(
            notice.contains(
                "metrics.jsonl ends at step 1, before the checkpoint's step 3 (it was cut short \
                 or edited): the metrics of steps 2 to 3 are lost"
            ),
            "{notice}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), lines[..2].concat());
        let notice = keep_until(&path, 2).unwrap().notice.unwrap();
        assert!(
            notice.contains("the metrics of step 2 are lost"),
            "{notice}"
        );

        // A torn line past the checkpoint is the step made again: nothing lost.
        std::fs::write(&path, lines[..3].concat() + "{\"kind\": \"sf").unwrap();
        assert_eq!(keep_until(&path, 2).unwrap().notice, None);

        // A damaged line amid them stops the resumption, naming it and how
        // to go on, and the file is left as it was.
        let damaged = [lines[0].as_str(), "{\"kind\": 1}\n", &lines[1]].concat();
        std::fs::write(&path, &damaged).unwrap();
        let error = format!("{:#}", keep_until(&path, 2).unwrap_err());
        assert!(
            error.contains("metrics.jsonl line 2 is not a metrics record: invalid type")
                && error.contains("mend or delete that line"),
            "{error}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), damaged);

        std::fs::remove_file(&path).unwrap();
        let notice = keep_until(&path, 2).unwrap().notice.unwrap();
        assert!(notice.contains("metrics.jsonl is gone"), "{notice}");
        assert_eq!(keep_until(&path, 0).unwrap().notice, None);
    }
}
