//! Episodes of the local model against the sandboxed tools and a simulated
//! user, turned into what training needs: the sampled turns (tokens and
//! log-probs, read back from the trajectory's policy trace), the reward, and
//! whether the masking judge flags the user.

use crate::CpuModel;
use crate::chat::{ModelPolicy, PromptStyle};
use crate::sampling::Sampling;
use crate::train::objective::Turn;
use anyhow::{Context, Result};
use forge_model::tokenizer::ModelTokenizer;
use forge_runtime::episode::{EpisodeSettings, User, run_episode};
use forge_runtime::policy::{ScriptedUser, UnstableUser};
use forge_runtime::trajectory::EpisodeRecord;
use forge_runtime::{Environment, PreparedTask};
use serde_json::Value;

/// One finished episode of the policy.
#[derive(Debug, Clone)]
pub struct Rollout {
    pub record: EpisodeRecord,
    pub turns: Vec<Turn>,
    /// The masking judge found wrong or missing user information.
    pub masked: bool,
}

impl Rollout {
    pub fn reward(&self) -> f64 {
        self.record.verdict.reward
    }

    pub fn sampled_tokens(&self) -> usize {
        self.turns.iter().map(|turn| turn.completion.len()).sum()
    }
}

/// How episodes are played.
#[derive(Clone)]
pub struct Play<'a> {
    pub model: &'a CpuModel,
    pub tokenizer: &'a ModelTokenizer,
    pub style: &'a PromptStyle,
    pub sampling: Sampling,
    pub max_turns: usize,
    /// Probability that the user misstates or withholds a fact (0: the
    /// scripted user).
    pub user_instability: f64,
    /// Run the masking judge on the episode.
    pub judge: bool,
}

impl Play<'_> {
    /// One episode of `task`, all its randomness derived from `seed`.
    pub fn episode(&self, env: &Environment, task: &PreparedTask, seed: u64) -> Result<Rollout> {
        let sampling = Sampling {
            seed,
            ..self.sampling.clone()
        };
        let mut policy = ModelPolicy::new(self.model, self.tokenizer, self.style.clone(), sampling);
        let instruction = &task.task.instruction;
        let mut user: Box<dyn User> = if self.user_instability > 0.0 {
            Box::new(UnstableUser::new(
                instruction,
                &task.task.stated_facts(),
                self.user_instability,
                seed,
            ))
        } else {
            Box::new(ScriptedUser::new(instruction))
        };
        let settings = EpisodeSettings {
            max_turns: self.max_turns,
            seed,
        };
        let record = run_episode(env, task, "model", &mut policy, user.as_mut(), settings)
            .with_context(|| format!("episode of task `{}`", task.task.id))?;
        let turns = turns(&record)?;
        let masked =
            self.judge && forge_rl::judge::misinformation(&task.task, &record.messages).is_some();
        Ok(Rollout {
            record,
            turns,
            masked,
        })
    }
}

/// The sampled turns a local model's policy trace records.
pub fn turns(record: &EpisodeRecord) -> Result<Vec<Turn>> {
    let trace = record
        .policy_trace
        .as_ref()
        .context("the episode has no policy trace (not a local model's episode)")?;
    let ids = |value: &Value, key: &str| -> Result<Vec<u32>> {
        value[key]
            .as_array()
            .with_context(|| format!("policy trace turn without `{key}`"))?
            .iter()
            .map(|id| {
                id.as_u64()
                    .map(|id| id as u32)
                    .with_context(|| format!("`{key}` holds a non-integer"))
            })
            .collect()
    };
    trace["turns"]
        .as_array()
        .context("policy trace without `turns`")?
        .iter()
        .map(|turn| {
            let logprobs = turn["logprobs"]
                .as_array()
                .context("policy trace turn without `logprobs`")?
                .iter()
                .map(|value| {
                    value
                        .as_f64()
                        .map(|v| v as f32)
                        .context("a non-number log-prob")
                })
                .collect::<Result<Vec<f32>>>()?;
            let completion = ids(turn, "ids")?;
            anyhow::ensure!(
                logprobs.len() == completion.len(),
                "policy trace turn with {} ids but {} log-probs",
                completion.len(),
                logprobs.len()
            );
            Ok(Turn {
                prompt: ids(turn, "prompt_ids")?,
                completion,
                logprobs,
            })
        })
        .collect()
}
