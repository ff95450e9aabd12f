//! Episodes of the local model against the sandboxed tools and a simulated
//! user, turned into what training needs: the sampled turns (tokens and
//! log-probs, read back from the trajectory's policy trace), the reward, and
//! whether the masking judge flags the user.

use crate::chat::{Generator, ModelPolicy, PromptStyle, stop_ids};
use crate::sampling::{Sampling, Stop};
use crate::train::objective::Turn;
use crate::{Generation, Llama};
use anyhow::{Context, Result};
use burn::tensor::backend::Backend;
use forge_model::tokenizer::ModelTokenizer;
use forge_runtime::episode::{EpisodeSettings, run_episode};
use forge_runtime::policy::scripted_user;
use forge_runtime::trajectory::EpisodeRecord;
use forge_runtime::{Environment, PreparedTask};
use serde_json::Value;
use std::sync::mpsc;

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
pub struct Play<'a, B: Backend> {
    pub model: &'a Llama<B>,
    pub script: Script<'a>,
}

/// Everything about an episode but the model: what the episode threads share.
#[derive(Clone)]
pub struct Script<'a> {
    pub tokenizer: &'a ModelTokenizer,
    pub sampling: Sampling,
    pub max_turns: usize,
    /// Probability that the user misstates or withholds a fact (0: the
    /// scripted user).
    pub user_instability: f64,
    /// Run the masking judge on the episode.
    pub judge: bool,
}

/// One episode to play: a task of an environment, prompted in a style, and
/// the seed all its randomness derives from.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    pub env: &'a Environment,
    pub style: &'a PromptStyle,
    pub task: &'a PreparedTask,
    pub seed: u64,
}

/// A turn to decode, from an episode thread to the batcher.
enum Message {
    Request {
        row: usize,
        prompt: Vec<u32>,
        sampling: Sampling,
        reply: mpsc::Sender<Generation>,
    },
    /// The episode of this thread is over (finished or failed).
    Done,
}

/// An episode thread's generator: its turns go to the batcher.
struct Remote {
    row: usize,
    requests: mpsc::Sender<Message>,
}

impl Generator for Remote {
    fn generate(&mut self, prompt: &[u32], sampling: &Sampling) -> Result<Generation> {
        let (reply, answer) = mpsc::channel();
        self.requests
            .send(Message::Request {
                row: self.row,
                prompt: prompt.to_vec(),
                sampling: sampling.clone(),
                reply,
            })
            .ok()
            .context("the batcher stopped")?;
        answer.recv().ok().context("the batcher stopped")
    }
}

/// Tells the batcher an episode thread is done, however it ends.
struct DoneGuard(mpsc::Sender<Message>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        let _ = self.0.send(Message::Done);
    }
}

impl<B: Backend> Play<'_, B> {
    /// Plays `jobs`, each episode on its own thread (tools run in parallel),
    /// while this thread decodes the model's turns: each round it waits
    /// until every live episode has asked for its next turn and decodes them
    /// all as one batch. Which turns share a batch is therefore fixed by the
    /// jobs alone, so the results do not depend on thread timing.
    pub fn episodes(&self, jobs: &[Job<'_>]) -> Result<Vec<Rollout>> {
        let stop = stop_ids(self.script.tokenizer);
        let (requests, inbox) = mpsc::channel();
        std::thread::scope(|scope| {
            let threads: Vec<_> = jobs
                .iter()
                .enumerate()
                .map(|(row, job)| {
                    let requests = requests.clone();
                    let script = self.script.clone();
                    scope.spawn(move || {
                        let _done = DoneGuard(requests.clone());
                        let generator = Box::new(Remote { row, requests });
                        script.episode(generator, job)
                    })
                })
                .collect();
            drop(requests);
            let mut live = jobs.len();
            while live > 0 {
                let mut pending = Vec::new();
                while pending.len() < live {
                    match inbox.recv() {
                        Ok(Message::Request {
                            row,
                            prompt,
                            sampling,
                            reply,
                        }) => pending.push((row, prompt, sampling, reply)),
                        Ok(Message::Done) => live -= 1,
                        Err(_) => break,
                    }
                }
                if pending.is_empty() {
                    continue;
                }
                pending.sort_by_key(|(row, ..)| *row);
                let prompts: Vec<&[u32]> =
                    pending.iter().map(|(_, prompt, ..)| &prompt[..]).collect();
                let samplings: Vec<Sampling> = pending
                    .iter()
                    .map(|(_, _, sampling, _)| sampling.clone())
                    .collect();
                let generations =
                    self.model
                        .generate_batch(&prompts, &samplings, Stop::tokens(&stop));
                for ((.., reply), generation) in pending.into_iter().zip(generations) {
                    // A thread that has gone away no longer needs its turn.
                    let _ = reply.send(generation);
                }
            }
            threads
                .into_iter()
                .map(|thread| {
                    thread
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        })
    }
}

impl Script<'_> {
    /// One episode of `job`, its turns generated by `generator`.
    fn episode(&self, generator: Box<dyn Generator + '_>, job: &Job<'_>) -> Result<Rollout> {
        let task = job.task;
        let sampling = Sampling {
            seed: job.seed,
            ..self.sampling.clone()
        };
        let mut policy =
            ModelPolicy::with_generator(generator, self.tokenizer, job.style.clone(), sampling);
        let mut user = scripted_user(&task.task, self.user_instability, job.seed);
        let settings = EpisodeSettings {
            max_turns: self.max_turns,
            seed: job.seed,
        };
        let record = run_episode(
            job.env,
            task,
            "model",
            &mut policy,
            user.as_mut(),
            None,
            settings,
        )
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
