//! A local model's episodes outside training (`forge run`, `forge eval
//! --policy model`): played through the rollout engine, `batch` episodes at
//! a time whose turns are decoded together, on the CPU or a GPU.

use crate::accelerator::{self, Accelerator, OnBackend};
use crate::checkpoint;
use crate::llama::{Llama, Precision};
use crate::sampling::Sampling;
use crate::train::rollout::{Job, Play, Script, Users};
use anyhow::{Context, Result, anyhow, bail};
use burn::tensor::backend::AutodiffBackend;
use forge_llm::ChatClient;
use forge_runtime::trajectory::EpisodeRecord;
use std::path::Path;

/// How a local model plays.
pub struct LocalPlay<'a> {
    /// A GGUF file or a checkpoint directory.
    pub model: &'a Path,
    /// The policy's name in the records.
    pub policy: &'a str,
    pub accelerator: Accelerator,
    pub precision: Precision,
    pub sampling: Sampling,
    pub max_turns: usize,
    /// Episodes decoded together. Their turns share batches, and each batch
    /// begins from what the one before read of its first prompts, so the
    /// same `batch` gives the same episodes; another may round a logit
    /// differently and so, rarely, draw another token.
    pub batch: usize,
    pub user_instability: f64,
    /// `Users::Scripted` or `Users::Remote`: a local model user is
    /// training's, and [`play`] refuses it.
    pub users: Users<'a>,
    /// The model that judges the tasks' NL assertions, when there is one.
    pub nl_judge: Option<&'a ChatClient>,
}

/// Plays `jobs` (their seeds are the episodes'), handing each record to
/// `finished` in the order of `jobs` as its batch ends.
pub fn play(
    spec: &LocalPlay<'_>,
    jobs: &[Job<'_>],
    finished: &mut dyn FnMut(EpisodeRecord) -> Result<()>,
) -> Result<()> {
    if let Users::Model { .. } = spec.users {
        bail!(
            "a local model plays the user only in training's rollouts; \
             episodes outside training take a scripted user or one at an endpoint"
        );
    }
    accelerator::on(
        spec.accelerator,
        Playing {
            spec,
            jobs,
            finished,
        },
    )
}

/// Episodes to play on the backend [`accelerator::on`] picks.
struct Playing<'a, 'f> {
    spec: &'a LocalPlay<'a>,
    jobs: &'a [Job<'a>],
    finished: &'f mut dyn FnMut(EpisodeRecord) -> Result<()>,
}

impl OnBackend for Playing<'_, '_> {
    type Output = ();

    fn run<B: AutodiffBackend>(self, device: B::Device) -> Result<()> {
        let spec = self.spec;
        Llama::<B::InnerBackend>::check_precision(spec.precision, &device)?;
        let tokenizer = checkpoint::load_tokenizer(spec.model)?;
        for job in self.jobs {
            job.style
                .thinking
                .check(&tokenizer)
                .map_err(|message| anyhow!("{}: {message}", spec.model.display()))?;
        }
        let model = Llama::<B::InnerBackend>::load(spec.model, &device)
            .and_then(|model| model.with_precision(spec.precision))
            .with_context(|| format!("loading {}", spec.model.display()))?;
        let play = Play::new(
            &model,
            None,
            Script {
                policy: spec.policy,
                tokenizer: &tokenizer,
                sampling: spec.sampling.clone(),
                max_turns: spec.max_turns,
                user_instability: spec.user_instability,
                users: spec.users,
                judge: None,
                nl_judge: spec.nl_judge,
            },
        );
        for batch in self.jobs.chunks(spec.batch.max(1)) {
            for rollout in play.episodes(batch)? {
                (self.finished)(rollout.record)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_model::tokenizer::ModelTokenizer;

    #[test]
    fn a_local_model_user_is_refused_before_anything_loads() {
        let tokenizer = ModelTokenizer::byte_level();
        let spec = LocalPlay {
            model: Path::new("no-such-model.gguf"),
            policy: "model",
            accelerator: Accelerator::Cpu,
            precision: Precision::F32,
            sampling: Sampling::greedy(),
            max_turns: 1,
            batch: 1,
            user_instability: 0.0,
            users: Users::Model {
                tokenizer: &tokenizer,
                temperature: 1.0,
                max_tokens: 8,
            },
            nl_judge: None,
        };
        let error = play(&spec, &[], &mut |_| Ok(())).unwrap_err();
        assert!(error.to_string().contains("only in training"), "{error}");
    }
}
