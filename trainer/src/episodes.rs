//! A local model's episodes outside training (`forge run`, `forge eval
//! --policy model`): played through the rollout engine, `batch` episodes at
//! a time whose turns are decoded together, on the CPU or a GPU — and so
//! are a local model user's turns, beside the agent's.

use crate::accelerator::{self, Accelerator, OnBackend};
use crate::checkpoint;
use crate::llama::{Llama, Precision};
use crate::sampling::Sampling;
use crate::train::rollout::{Job, Play, Script, Users};
use anyhow::{Context, Result, anyhow};
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
    pub user: UserPlayer<'a>,
    /// The model that judges the tasks' NL assertions, when there is one.
    pub nl_judge: Option<&'a ChatClient>,
}

/// Who plays the simulated user of a local model's episodes.
#[derive(Clone, Copy)]
pub enum UserPlayer<'a> {
    /// Each task's scripted user.
    Scripted,
    /// A model behind an OpenAI-compatible endpoint, sampled as `sampling`
    /// asks.
    Remote {
        client: &'a ChatClient,
        sampling: forge_llm::Sampling,
    },
    /// A local model (a GGUF file or a checkpoint directory; the policy's
    /// own, loaded once, when it is the same path), its turns decoded in
    /// batches beside the policy's, at `temperature`, at most `max_tokens`
    /// each. Records name it `name` (`model:NAME`).
    Model {
        model: &'a Path,
        name: &'a str,
        temperature: f32,
        max_tokens: usize,
    },
}

/// Plays `jobs` (their seeds are the episodes'), handing each record to
/// `finished` in the order of `jobs` as its batch ends.
pub fn play(
    spec: &LocalPlay<'_>,
    jobs: &[Job<'_>],
    finished: &mut dyn FnMut(EpisodeRecord) -> Result<()>,
) -> Result<()> {
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
        let load = |path: &Path| {
            Llama::<B::InnerBackend>::load(path, &device)
                .and_then(|model| model.with_precision(spec.precision))
                .with_context(|| format!("loading {}", path.display()))
        };
        let model = load(spec.model)?;
        // A user model apart from the policy's, with its own tokenizer.
        let own_user = match spec.user {
            UserPlayer::Model { model: path, .. } if path != spec.model => {
                Some((load(path)?, checkpoint::load_tokenizer(path)?))
            }
            _ => None,
        };
        let (user_model, user_tokenizer) = match &own_user {
            Some((model, tokenizer)) => (model, tokenizer),
            None => (&model, &tokenizer),
        };
        let users = match spec.user {
            UserPlayer::Scripted => Users::Scripted,
            UserPlayer::Remote { client, sampling } => Users::Remote { client, sampling },
            UserPlayer::Model {
                name,
                temperature,
                max_tokens,
                ..
            } => Users::Model {
                tokenizer: user_tokenizer,
                name,
                temperature,
                max_tokens,
            },
        };
        let play = Play::new(
            &model,
            matches!(users, Users::Model { .. }).then_some(user_model),
            Script {
                policy: spec.policy,
                tokenizer: &tokenizer,
                sampling: spec.sampling.clone(),
                max_turns: spec.max_turns,
                user_instability: spec.user_instability,
                users,
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
