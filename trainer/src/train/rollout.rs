//! Episodes of the local model against the sandboxed tools and a simulated
//! user, turned into what training needs: the sampled turns (tokens and
//! log-probs, read back from the trajectory's policy trace), the reward, and
//! whether the masking judge flags the user.

use crate::chat::{Generator, ModelPolicy, PromptStyle, stop_ids};
use crate::kv_cache::{Prefix, PrefixPool};
use crate::sampling::{Sampling, Stop};
use crate::train::objective::Turn;
use crate::user::ModelUser;
use crate::{Generation, Llama};
use anyhow::{Context, Result};
use burn::tensor::backend::Backend;
use forge_llm::ChatClient;
use forge_llm::agents::RemoteUser;
use forge_llm::judge::ModelJudge;
use forge_model::tokenizer::ModelTokenizer;
use forge_runtime::episode::{ContextFull, EpisodeSettings, Judge, User, run_episode};
use forge_runtime::policy::{remembered_instruction, scripted_user};
use forge_runtime::trajectory::{EpisodeRecord, Termination};
use forge_runtime::{Environment, PreparedTask};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
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

    /// A turn was cut before the model ended it: at `max_new_tokens`, or
    /// where its context ends.
    pub fn truncated(&self) -> bool {
        let turns = self
            .record
            .policy_trace
            .as_ref()
            .map(|trace| &trace["turns"]);
        turns
            .and_then(Value::as_array)
            .is_some_and(|turns| turns.iter().any(|turn| turn["stopped"] == false))
    }

    /// The dialogue outgrew the model's context.
    pub fn context_full(&self) -> bool {
        self.record.termination == Termination::ContextFull
    }

    /// The episode ran long: a turn was cut, or the dialogue outgrew the
    /// model's context.
    pub fn overlong(&self) -> bool {
        self.truncated() || self.context_full()
    }
}

/// How episodes are played.
pub struct Play<'a, B: Backend> {
    model: &'a Llama<B>,
    /// The model playing the user, with [`Users::Model`].
    user_model: Option<&'a Llama<B>>,
    script: Script<'a>,
    /// Set from outside to stop the episodes at once, cutting the turns
    /// being decoded ([`Play::stopped_by`]).
    interrupt: Option<&'a AtomicBool>,
    /// What the latest episodes read of their first prompts, the agent's
    /// and the user model's: the next batch's episodes begin from there.
    first_prompts: RefCell<[PrefixPool<B>; 2]>,
}

/// Everything about an episode but the models: what the episode threads share.
#[derive(Clone)]
pub struct Script<'a> {
    /// The policy's name in the episodes' records.
    pub policy: &'a str,
    pub tokenizer: &'a ModelTokenizer,
    pub sampling: Sampling,
    pub max_turns: usize,
    /// Probability that the user misstates or withholds a fact.
    pub user_instability: f64,
    pub users: Users<'a>,
    /// The masking judge, when episodes are judged.
    pub judge: Option<MaskJudge<'a>>,
    /// The model that judges the tasks' NL assertions, when there is one.
    pub nl_judge: Option<&'a ChatClient>,
}

/// Who plays the simulated user.
#[derive(Clone, Copy)]
pub enum Users<'a> {
    /// Each task's scripted user.
    Scripted,
    /// The local model of `Play::user_model`, prompted through `tokenizer`;
    /// its turns are decoded in batches beside the policy's. Records name
    /// it `name` (`model:NAME`).
    Model {
        tokenizer: &'a ModelTokenizer,
        name: &'a str,
        temperature: f32,
        max_tokens: usize,
    },
    /// A model behind an OpenAI-compatible endpoint, briefed with the
    /// environment's user guidelines and offered the user's own tools,
    /// sampled as `sampling` asks under each episode's user seed.
    Remote {
        client: &'a ChatClient,
        sampling: forge_llm::Sampling,
    },
}

/// Who decides whether an episode's user gave wrong or missing information.
#[derive(Clone, Copy)]
pub enum MaskJudge<'a> {
    /// A fact the instruction states that no user message contains.
    Rule,
    /// A model behind an OpenAI-compatible endpoint reads the dialogue.
    Remote(&'a ChatClient),
}

/// Whose turn a request to the batcher is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Speaker {
    Agent,
    User,
}

/// Mixed into an episode's seed for its user model's draws (local or at an
/// endpoint), which then fall apart from the policy's.
pub const USER_SEED: u64 = 0x05ee_d0f0_05e4;

/// One episode to play: a task of an environment, prompted in a style, and
/// the seed all its randomness derives from.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    pub env: &'a Environment,
    pub style: &'a PromptStyle,
    pub task: &'a PreparedTask,
    pub seed: u64,
}

/// What an episode thread tells the batcher.
enum Message {
    /// A turn to decode.
    Request(Pending),
    /// The episode of this row is over (finished or failed).
    Done(usize),
}

/// An episode thread's generator: its turns go to the batcher.
struct Remote {
    row: usize,
    speaker: Speaker,
    requests: mpsc::Sender<Message>,
}

impl Generator for Remote {
    fn generate(&mut self, prompt: &[u32], sampling: &Sampling) -> Result<Generation> {
        let (reply, answer) = mpsc::channel();
        self.requests
            .send(Message::Request(Pending {
                row: self.row,
                speaker: self.speaker,
                prompt: prompt.to_vec(),
                sampling: sampling.clone(),
                reply,
            }))
            .ok()
            .context("the batcher stopped")?;
        let answer = answer.recv().ok().context("the batcher stopped")?;
        Ok(answer?)
    }
}

/// Tells the batcher an episode thread is done, however it ends.
struct DoneGuard {
    row: usize,
    requests: mpsc::Sender<Message>,
}

impl Drop for DoneGuard {
    fn drop(&mut self) {
        let _ = self.requests.send(Message::Done(self.row));
    }
}

/// A turn to decode, from an episode thread to the batcher.
struct Pending {
    row: usize,
    speaker: Speaker,
    prompt: Vec<u32>,
    sampling: Sampling,
    reply: mpsc::Sender<Result<Generation, ContextFull>>,
}

impl<'a, B: Backend> Play<'a, B> {
    /// Episodes of `model`, against `user_model` where [`Script::users`]
    /// is [`Users::Model`].
    pub fn new(model: &'a Llama<B>, user_model: Option<&'a Llama<B>>, script: Script<'a>) -> Self {
        Self {
            model,
            user_model,
            script,
            interrupt: None,
            first_prompts: RefCell::new([PrefixPool::new(0), PrefixPool::new(0)]),
        }
    }

    /// Stops the episodes once `interrupt` is set, cutting the turns being
    /// decoded, and [`Play::episodes`] fails with [`Interrupted`]: episodes
    /// whose results nothing keeps (an evaluation's) need not hold up a
    /// stop.
    pub fn stopped_by(self, interrupt: Option<&'a AtomicBool>) -> Self {
        Self { interrupt, ..self }
    }

    /// Whether the interrupt [`Self::stopped_by`] gave is set.
    fn interrupt_set(&self) -> bool {
        crate::sampling::is_set(self.interrupt)
    }

    /// Plays `jobs`, each episode on its own thread (tools run in parallel),
    /// while this thread decodes the models' turns: each round it waits
    /// until every live episode has asked for its next turn — the agent's
    /// or a model user's — and decodes each model's turns as one batch.
    /// Which turns share a batch is therefore fixed by the jobs alone, so
    /// the results do not depend on thread timing. What each speaker of an
    /// episode has read stays cached until the episode ends, so that its
    /// next turn's prompt pass reads only the new messages. What the latest
    /// episodes (as many as `jobs` holds) read of their first prompts stays
    /// pooled for the episodes of later calls, which begin from the longest
    /// pooled prefix of their own first prompt.
    pub fn episodes(&self, jobs: &[Job<'_>]) -> Result<Vec<Rollout>> {
        let mut first_prompts = self.first_prompts.borrow_mut();
        let [agent_prompts, user_prompts] = &mut *first_prompts;
        agent_prompts.set_capacity(jobs.len());
        user_prompts.set_capacity(jobs.len());
        let stop = stop_ids(self.script.tokenizer)?;
        let user_stop = match self.script.users {
            Users::Model { tokenizer, .. } => stop_ids(tokenizer)?,
            _ => Vec::new(),
        };
        let (requests, inbox) = mpsc::channel();
        std::thread::scope(|scope| {
            let threads: Vec<_> = jobs
                .iter()
                .enumerate()
                .map(|(row, job)| {
                    let requests = requests.clone();
                    let script = self.script.clone();
                    scope.spawn(move || {
                        let record = {
                            let _done = DoneGuard {
                                row,
                                requests: requests.clone(),
                            };
                            script.play(row, requests, job)
                        };
                        // Judged once the batcher no longer waits for this
                        // episode: a judge model's latency holds up no one.
                        script.judged(record?, job)
                    })
                })
                .collect();
            drop(requests);
            let mut live = jobs.len();
            let mut read = HashMap::new();
            let mut interrupted = false;
            while live > 0 {
                let mut pending = Vec::new();
                while pending.len() < live {
                    match inbox.recv() {
                        Ok(Message::Request(turn)) => pending.push(turn),
                        Ok(Message::Done(row)) => {
                            live -= 1;
                            read.retain(|&(done, _), _| done != row);
                        }
                        // Every episode thread has ended.
                        Err(_) => live = 0,
                    }
                }
                // Once every episode is over, there is nothing to stop.
                interrupted |= !pending.is_empty() && self.interrupt_set();
                if interrupted {
                    // Unanswered, each turn ends its episode ("the batcher
                    // stopped"), until none is left.
                    continue;
                }
                pending.sort_by_key(|turn| turn.row);
                let (agents, users): (Vec<_>, Vec<_>) = pending
                    .into_iter()
                    .partition(|turn| turn.speaker == Speaker::Agent);
                let interrupt = self.interrupt;
                decode(
                    self.model,
                    agents,
                    &stop,
                    interrupt,
                    &mut read,
                    agent_prompts,
                );
                if !users.is_empty() {
                    let model = self
                        .user_model
                        .expect("model users are played with Play::user_model");
                    decode(model, users, &user_stop, interrupt, &mut read, user_prompts);
                }
                // A batch the interrupt cut short answered its turns with
                // cut replies: the episodes are stopped, whatever those
                // replies led to (an episode may end on one).
                interrupted |= self.interrupt_set();
            }
            let played: Vec<Result<Rollout>> = threads
                .into_iter()
                .map(|thread| {
                    thread
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect();
            if interrupted {
                return Err(Interrupted.into());
            }
            played.into_iter().collect()
        })
    }
}

/// [`Play::episodes`] stopped by its interrupt.
#[derive(Debug, thiserror::Error)]
#[error("the episodes were stopped by an interrupt")]
pub struct Interrupted;

/// Decodes `turns` with `model` as one batch and answers each, going on
/// from what each speaker has `read` of its episode (which the batch
/// updates) or, for a first turn, from the longest prefix of its prompt in
/// `first_prompts` (which then pools what it read of its prompt). A turn
/// samples no further than the model's context; one whose prompt fills it
/// is answered [`ContextFull`], which ends its episode.
fn decode<B: Backend>(
    model: &Llama<B>,
    turns: Vec<Pending>,
    stop: &[u32],
    interrupt: Option<&AtomicBool>,
    read: &mut HashMap<(usize, Speaker), Prefix<B>>,
    first_prompts: &mut PrefixPool<B>,
) {
    let room = |turn: &Pending| model.config.room_after(turn.prompt.len());
    let (turns, full): (Vec<_>, Vec<_>) = turns.into_iter().partition(|turn| room(turn).is_ok());
    for turn in full {
        let full = ContextFull(room(&turn).unwrap_err());
        // A thread that has gone away no longer needs its answer.
        let _ = turn.reply.send(Err(full));
    }
    if turns.is_empty() {
        return;
    }
    let prompts: Vec<&[u32]> = turns.iter().map(|turn| &turn.prompt[..]).collect();
    let samplings: Vec<Sampling> = turns
        .iter()
        .map(|turn| Sampling {
            max_tokens: turn.sampling.max_tokens.min(room(turn).unwrap_or(0)),
            ..turn.sampling.clone()
        })
        .collect();
    let keys: Vec<_> = turns.iter().map(|turn| (turn.row, turn.speaker)).collect();
    let firsts: Vec<bool> = keys.iter().map(|key| !read.contains_key(key)).collect();
    let mut prefixes: Vec<Prefix<B>> = keys
        .iter()
        .zip(&prompts)
        .map(|(key, prompt)| {
            read.remove(key)
                .unwrap_or_else(|| first_prompts.longest(prompt))
        })
        .collect();
    // Cut short by an interrupt, the turns are answered as they stand: the
    // batcher finds the interrupt set once they are, and fails the episodes.
    let stop = Stop::tokens(stop).or_interrupted(interrupt);
    let generations = model.continue_batch(&prompts, &samplings, stop, &mut prefixes);
    for ((prefix, prompt), first) in prefixes.iter().zip(&prompts).zip(firsts) {
        if first {
            first_prompts.keep(prefix.truncated(prompt.len()));
        }
    }
    read.extend(keys.into_iter().zip(prefixes));
    for (turn, generation) in turns.into_iter().zip(generations) {
        let _ = turn.reply.send(Ok(generation));
    }
}

impl<'a> Script<'a> {
    /// One episode of `job`, its model turns sent to the batcher as `row`.
    fn play(
        &self,
        row: usize,
        requests: mpsc::Sender<Message>,
        job: &Job<'_>,
    ) -> Result<EpisodeRecord> {
        let task = job.task;
        let sampling = Sampling {
            seed: job.seed,
            ..self.sampling.clone()
        };
        let agent = Box::new(Remote {
            row,
            speaker: Speaker::Agent,
            requests: requests.clone(),
        });
        let mut policy =
            ModelPolicy::with_generator(agent, self.tokenizer, job.style.clone(), sampling);
        let mut user = self.user(row, requests, job);
        let settings = EpisodeSettings {
            max_turns: self.max_turns,
            seed: job.seed,
        };
        let mut nl_judge = self.nl_judge.map(ModelJudge::new);
        run_episode(
            job.env,
            task,
            self.policy,
            &mut policy,
            user.as_mut(),
            nl_judge.as_mut().map(|judge| judge as &mut dyn Judge),
            settings,
        )
        .with_context(|| format!("episode of task `{}`", task.task.id))
    }

    /// The rollout of a played episode: its sampled turns, and whether the
    /// masking judge flags its user.
    fn judged(&self, record: EpisodeRecord, job: &Job<'_>) -> Result<Rollout> {
        let task = &job.task.task;
        let turns = turns(&record)?;
        let masked = match self.judge {
            None => false,
            Some(MaskJudge::Rule) => {
                forge_rl::judge::misinformation(task, &record.messages).is_some()
            }
            Some(MaskJudge::Remote(client)) => {
                forge_llm::judge::user_misinformation(client, task, &record.messages)
                    .with_context(|| format!("judging the user of task `{}`", task.id))?
                    .is_some()
            }
        };
        Ok(Rollout {
            record,
            turns,
            masked,
        })
    }

    /// The simulated user of `job`. Model users are told the instruction
    /// as an unstable user would remember it.
    fn user(
        &self,
        row: usize,
        requests: mpsc::Sender<Message>,
        job: &Job<'_>,
    ) -> Box<dyn User + 'a> {
        let task = &job.task.task;
        let instruction = || remembered_instruction(task, self.user_instability, job.seed);
        match self.users {
            Users::Scripted => scripted_user(task, self.user_instability, job.seed),
            Users::Model {
                tokenizer,
                name,
                temperature,
                max_tokens,
            } => {
                let generator = Box::new(Remote {
                    row,
                    speaker: Speaker::User,
                    requests,
                });
                let sampling = Sampling {
                    temperature,
                    top_p: 1.0,
                    max_tokens,
                    seed: job.seed ^ USER_SEED,
                };
                Box::new(
                    ModelUser::new(generator, tokenizer, name, &instruction(), sampling)
                        .with_guidelines(job.env.bundle().manifest.user_guidelines.as_deref()),
                )
            }
            Users::Remote { client, sampling } => Box::new(
                RemoteUser::new(client, instruction())
                    .sampled(sampling, job.seed ^ USER_SEED)
                    .with_guidelines(job.env.bundle().manifest.user_guidelines.as_deref()),
            ),
        }
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
