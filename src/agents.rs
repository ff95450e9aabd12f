//! Choosing the agent and the simulated user of episodes (`forge run`,
//! `forge eval`).

use crate::commands::train::Device;
use crate::flags::{
    at_least_one, at_least_one_u64, nucleus_mass, probability, request_timeout, temperature,
};
use crate::output;
use crate::shutdown::Interrupted;
use crate::tasks::{PlayArgs, TaskSelection};
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use forge_llm::agents::{RemotePolicy, RemoteUser};
use forge_llm::judge::ModelJudge;
use forge_llm::{ChatClient, ChatConfig, ChatError};
use forge_runtime::episode::{EpisodeSettings, Judge, Policy, User};
use forge_runtime::parallel::in_parallel;
use forge_runtime::policy::{
    GoldPolicy, RandomPolicy, RecordedJudge, ReplayPolicy, remembered_instruction, replayed_user,
    scripted_user,
};
use forge_runtime::trajectory::EpisodeRecord;
use forge_runtime::{Environment, PreparedTask};
use forge_trainer::accelerator::Accelerator;
use forge_trainer::chat::{PromptSettings, PromptStyle, Thinking};
use forge_trainer::episodes::{LocalPlay, UserPlayer};
use forge_trainer::train::config::UserSection;
use forge_trainer::train::rollout::{Job, USER_SEED};
use forge_trainer::{Precision, Sampling};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// The agent: the tasks' gold actions, seeded random calls, the actions of
    /// a recorded trajectory (`--from`), a model at an OpenAI-compatible
    /// endpoint (`openai`: `--base-url`, `--model`), or a local model
    /// (`model`: `--model` is a GGUF path, a fetched model's name or a
    /// checkpoint directory, e.g. a `forge train` run's `final/`).
    #[arg(long, value_enum, default_value_t = PolicyKind::Gold)]
    pub policy: PolicyKind,
    /// The trajectory file `--policy replay` repeats.
    #[arg(long, value_name = "FILE", required_if_eq("policy", "replay"))]
    pub from: Option<PathBuf>,
    /// The simulated user: states the instruction and ends at the agent's
    /// first message (`scripted`), or a model playing the user, which may
    /// call the user's own tools where the environment has some: at the
    /// OpenAI-compatible endpoint (`openai`), or a local model beside
    /// `--policy model` (`model`: `--user-model`), its turns decoded in the
    /// same batches as the agent's.
    #[arg(long, value_enum, default_value_t = UserKind::Scripted)]
    pub user: UserKind,
    /// `--user model`: the local model playing the user, a GGUF path, a
    /// fetched model's name or a checkpoint directory [default: the
    /// agent's model, loaded once].
    #[arg(long, value_name = "NAME|GGUF|DIR")]
    pub user_model: Option<String>,
    /// `--user model` or `--user openai`: the user's sampling temperature
    /// (0 is greedy; an endpoint is sent a seed drawn from the episode's,
    /// which servers that take one sample again alike) [default: 0.7 for a
    /// local model, 0 at an endpoint].
    #[arg(long, value_parser = temperature, allow_negative_numbers = true)]
    pub user_temperature: Option<f32>,
    /// `--user model`: most tokens per user message [default: 96].
    #[arg(long, value_parser = at_least_one)]
    pub user_max_new_tokens: Option<usize>,
    /// The probability that the user states one of its facts wrongly or
    /// withholds it (tasks with `user_facts` only; a model user is told the
    /// instruction with the fact spoiled), to measure the effect of masking
    /// such episodes.
    #[arg(long, default_value_t = 0.0, value_parser = probability, allow_negative_numbers = true)]
    pub user_instability: f64,
    /// OpenAI-compatible API base for `--policy openai` / `--user openai`.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model: its name at `--base-url`, or for `--policy model` a GGUF
    /// path, a fetched model's name or a checkpoint directory (default
    /// smollm2-135m).
    #[arg(long)]
    pub model: Option<String>,
    /// `--policy model` or `--policy openai`: sampling temperature (0 is
    /// greedy; an endpoint is sent a seed drawn from the episode's, which
    /// servers that take one sample again alike) [default: 0].
    #[arg(long, value_parser = temperature, allow_negative_numbers = true)]
    pub temperature: Option<f32>,
    /// `--policy model` or `--policy openai`: nucleus sampling mass, in
    /// (0, 1] [default: 1; the endpoint's own].
    #[arg(long, value_parser = nucleus_mass, allow_negative_numbers = true)]
    pub top_p: Option<f32>,
    /// `--policy model`: most tokens per turn [default: 256; with `--tasks
    /// heldout:RUN_DIR`, the run's `eval.max_new_tokens`].
    #[arg(long, value_parser = at_least_one)]
    pub max_new_tokens: Option<usize>,
    /// `--policy model`: where the model runs (`cuda` and `wgpu` need a
    /// forge built with that feature) [default: cpu].
    #[arg(long, value_enum)]
    pub device: Option<Device>,
    /// `--policy model`: the precision of the products with the weights:
    /// `f32`, or `bf16` (mixed precision; cuda only) [default: f32].
    #[arg(long)]
    pub precision: Option<Precision>,
    /// `--policy model`: whether a thinking model (Qwen3) reasons before
    /// each reply (`on`), or replies at once after an empty `<think>`
    /// (`off`) [default: as a Forge checkpoint was trained; on].
    #[arg(long, value_name = "on|off")]
    pub thinking: Option<Thinking>,
    /// `--policy model`: episodes played at once, their turns decoded as one
    /// batch (the same batch size gives the same episodes) [default: 64 on a
    /// GPU; 1 on the CPU, where one thread computes a batch no faster than
    /// its rows one by one, and padding the prompts to one length costs more].
    #[arg(long, value_parser = at_least_one_u64)]
    pub batch: Option<u64>,
    /// Most requests in flight to the endpoint at once (`forge eval
    /// --concurrency` runs episodes in parallel) [default: 8].
    #[arg(long, value_parser = at_least_one_u64)]
    pub max_requests: Option<u64>,
    /// The longest one request to the endpoint may take, its whole reply
    /// included; one that takes longer fails, unretried (it would take as
    /// long again) [default: 120].
    #[arg(long, value_name = "SECONDS", value_parser = request_timeout)]
    pub request_timeout: Option<u64>,
    /// The environment variable holding the endpoint's API key, if it needs
    /// one [default: OPENAI_API_KEY].
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// A model at an OpenAI-compatible endpoint that judges the tasks' NL
    /// assertions (τ²-bench); without one they are reported as not evaluated.
    #[arg(long, value_name = "MODEL")]
    pub judge_model: Option<String>,
    /// The judge's endpoint; `--base-url` when not given.
    #[arg(long, value_name = "URL", requires = "judge_model")]
    pub judge_base_url: Option<String>,
}

/// `--max-requests` when not given.
const MAX_REQUESTS: u64 = 8;
/// `--api-key-env` when not given.
const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// A client of the endpoint `config` names, or a refusal naming the flag
/// at fault of `flags` (the URL's, the model's): [`ChatConfig::check`]
/// refuses a config without a model before one with a bad URL.
pub(crate) fn client(config: ChatConfig, flags: [&'static str; 2]) -> Result<ChatClient> {
    let [url_flag, model_flag] = flags;
    let flag = match config.model.trim().is_empty() {
        true => model_flag,
        false => url_flag,
    };
    ChatClient::new(config).context(flag)
}

impl AgentArgs {
    /// A client of `model` at the endpoint `url`, with the key, the
    /// requests in flight and the timeout asked for; `flags` name them (the
    /// URL's, the model's) in a refusal.
    fn endpoint(&self, url: &str, model: &str, flags: [&'static str; 2]) -> Result<ChatClient> {
        let key = self.api_key_env.as_deref().unwrap_or(API_KEY_ENV);
        let mut config = ChatConfig::new(url, model).key_from_env(key);
        config.max_in_flight = self.max_requests.unwrap_or(MAX_REQUESTS) as usize;
        if let Some(seconds) = self.request_timeout {
            config.timeout = Duration::from_secs(seconds);
        }
        client(config, flags)
    }

    /// Refuses a flag the chosen agent, user and judge would not use: the
    /// episodes would not be the ones asked for (a `--temperature` with the
    /// gold policy, a `--from` without `--policy replay`).
    fn refuse_unused(&self) -> Result<()> {
        let (policy, user) = (self.policy, self.user);
        if policy == PolicyKind::Replay {
            // A replayed episode's user says what it said in the record.
            if user != UserKind::Scripted {
                bail!(
                    "--policy replay replays each episode's recorded user too: \
                     --user {} would be ignored",
                    flag_value(user)
                );
            }
            if self.user_instability != 0.0 {
                bail!(
                    "--policy replay replays each episode's recorded user too: \
                     --user-instability would be ignored"
                );
            }
        }
        let local = policy == PolicyKind::Model;
        let sampled = local || policy == PolicyKind::Openai;
        const SAMPLED: &str = "--policy model and --policy openai";
        if user == UserKind::Model && !local {
            bail!(
                "--user model plays the user with a local model beside a local agent \
                 (--policy model), their turns decoded in the same batches: with --policy {} \
                 take --user scripted or --user openai",
                flag_value(policy)
            );
        }
        let local_user = user == UserKind::Model;
        const LOCAL_USER: &str = "--user model";
        let remote = policy == PolicyKind::Openai || user == UserKind::Openai;
        let judged = self.judge_model.is_some();
        const LOCAL: &str = "--policy model";
        const ENDPOINTS: &str = "--policy openai, --user openai and --judge-model";
        // Each flag: given, used, and by what.
        let flags = [
            (
                "--from",
                self.from.is_some(),
                policy == PolicyKind::Replay,
                "--policy replay",
            ),
            (
                "--temperature",
                self.temperature.is_some(),
                sampled,
                SAMPLED,
            ),
            ("--top-p", self.top_p.is_some(), sampled, SAMPLED),
            (
                "--max-new-tokens",
                self.max_new_tokens.is_some(),
                local,
                LOCAL,
            ),
            ("--device", self.device.is_some(), local, LOCAL),
            ("--precision", self.precision.is_some(), local, LOCAL),
            ("--thinking", self.thinking.is_some(), local, LOCAL),
            ("--batch", self.batch.is_some(), local, LOCAL),
            (
                "--user-model",
                self.user_model.is_some(),
                local_user,
                LOCAL_USER,
            ),
            (
                "--user-temperature",
                self.user_temperature.is_some(),
                local_user || user == UserKind::Openai,
                "--user model and --user openai",
            ),
            (
                "--user-max-new-tokens",
                self.user_max_new_tokens.is_some(),
                local_user,
                LOCAL_USER,
            ),
            (
                "--model",
                self.model.is_some(),
                local || remote,
                "--policy model, --policy openai and --user openai",
            ),
            (
                "--base-url",
                self.base_url.is_some(),
                remote || judged,
                ENDPOINTS,
            ),
            (
                "--max-requests",
                self.max_requests.is_some(),
                remote || judged,
                ENDPOINTS,
            ),
            (
                "--api-key-env",
                self.api_key_env.is_some(),
                remote || judged,
                ENDPOINTS,
            ),
            (
                "--request-timeout",
                self.request_timeout.is_some(),
                remote || judged,
                ENDPOINTS,
            ),
        ];
        if let Some((flag, .., users)) = flags.iter().find(|(_, given, used, _)| *given && !used) {
            bail!(
                "{flag} is for {users} only: with --policy {} and --user {} it would be ignored",
                flag_value(policy),
                flag_value(user)
            );
        }
        // A mass of 1 is no truncation, greedy or not.
        if self.top_p.is_some_and(|mass| mass < 1.0)
            && self
                .temperature
                .is_none_or(|temperature| temperature == 0.0)
        {
            bail!(
                "--top-p samples among the likeliest tokens, and greedy decoding (--temperature \
                 0, the default) takes the likeliest alone: give a --temperature above 0 too"
            );
        }
        Ok(())
    }
}

/// How `value` is written on the command line.
fn flag_value(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map_or_else(String::new, |possible| possible.get_name().to_owned())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyKind {
    Gold,
    Random,
    Replay,
    Openai,
    Model,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UserKind {
    Scripted,
    Openai,
    Model,
}

/// What the remote models of a command cost: reports give the agent's and
/// user's endpoint as `llm_usage` and the judge's as `judge_usage`, each
/// null where none is used.
pub struct RemoteUsage {
    pub agent: Option<forge_llm::Usage>,
    pub judge: Option<forge_llm::Usage>,
}

/// Makes a fresh policy and user for each episode.
pub struct Agents {
    policy: PolicyKind,
    user: UserKind,
    client: Option<ChatClient>,
    /// How the endpoint samples the agent's replies (`--policy openai`)
    /// and the user's (`--user openai`).
    remote_agent: forge_llm::Sampling,
    remote_user: forge_llm::Sampling,
    judge: Option<ChatClient>,
    /// The environment's brief for a model playing the user.
    user_guidelines: Option<String>,
    /// `--policy replay`: the trajectory file, and its first episode of
    /// each task.
    from: Option<PathBuf>,
    recorded: BTreeMap<String, EpisodeRecord>,
    /// Of those, the tasks whose episode is another version's of the
    /// environment (the file held none of this one's).
    recorded_elsewhere: BTreeSet<String>,
    style: PromptStyle,
    instability: f64,
    local: Option<LocalModel>,
}

/// A local model, loaded onto its device when its episodes are played.
struct LocalModel {
    name: String,
    path: PathBuf,
    sampling: Sampling,
    accelerator: Accelerator,
    precision: Precision,
    batch: usize,
    /// The local model playing the user (`--user model`).
    user: Option<UserModel>,
}

/// A local model playing the user, on its agent's device.
struct UserModel {
    /// As records name it (`model:NAME`).
    label: String,
    path: PathBuf,
    temperature: f32,
    max_tokens: usize,
}

impl Agents {
    pub fn new(args: &AgentArgs, env: &Environment) -> Result<Self> {
        args.refuse_unused()?;
        let needs_model = args.policy == PolicyKind::Openai || args.user == UserKind::Openai;
        let local = match args.policy {
            PolicyKind::Model => {
                let name = args
                    .model
                    .clone()
                    .unwrap_or_else(|| "smollm2-135m".to_owned());
                let path = crate::commands::model::resolve(&name)?;
                // Unset, each is greedy decoding's (the defaults the help states).
                let greedy = Sampling::greedy();
                let sampling = Sampling {
                    temperature: args.temperature.unwrap_or(greedy.temperature),
                    top_p: args.top_p.unwrap_or(greedy.top_p),
                    max_tokens: args.max_new_tokens.unwrap_or(greedy.max_tokens),
                    ..greedy
                };
                let device = args.device.unwrap_or(Device::Cpu);
                // Sampled as training's model users are, unless told otherwise.
                let trained = UserSection::default();
                let user = match args.user {
                    UserKind::Model => Some(UserModel {
                        label: format!("model:{}", args.user_model.as_ref().unwrap_or(&name)),
                        path: match &args.user_model {
                            Some(name) => {
                                crate::commands::model::resolve(name).context("--user-model")?
                            }
                            None => path.clone(),
                        },
                        temperature: args.user_temperature.unwrap_or(trained.temperature as f32),
                        max_tokens: args.user_max_new_tokens.unwrap_or(trained.max_new_tokens),
                    }),
                    _ => None,
                };
                Some(LocalModel {
                    name,
                    path,
                    sampling,
                    accelerator: device.accelerator(),
                    precision: args.precision.unwrap_or_default(),
                    batch: args.batch.map_or(
                        match device {
                            Device::Cpu => 1,
                            Device::Cuda | Device::Wgpu => 64,
                        },
                        |batch| batch as usize,
                    ),
                    user,
                })
            }
            _ => None,
        };
        let client = match (needs_model, &args.base_url, &args.model) {
            (false, _, _) => None,
            (true, Some(url), Some(model)) => {
                Some(args.endpoint(url, model, ["--base-url", "--model"])?)
            }
            (true, url, model) => {
                let missing = [(url.is_none(), "--base-url"), (model.is_none(), "--model")]
                    .into_iter()
                    .filter_map(|(missing, flag)| missing.then_some(flag))
                    .collect::<Vec<_>>()
                    .join(", ");
                bail!(
                    "`--policy openai` and `--user openai` need --base-url and --model (missing: {missing})"
                )
            }
        };
        let judge = match (
            &args.judge_model,
            args.judge_base_url.as_ref().or(args.base_url.as_ref()),
        ) {
            (None, _) => None,
            (Some(model), Some(url)) => Some(args.endpoint(
                url,
                model,
                match args.judge_base_url {
                    Some(_) => ["--judge-base-url", "--judge-model"],
                    None => ["--base-url", "--judge-model"],
                },
            )?),
            (Some(_), None) => bail!("`--judge-model` needs --judge-base-url or --base-url"),
        };
        let (recorded, recorded_elsewhere) = match &args.from {
            Some(path) => recorded_by_task(path, env)?,
            None => Default::default(),
        };
        let mut prompt = match &local {
            // A trained checkpoint is prompted the way it was trained.
            Some(local) => forge_trainer::checkpoint::load_prompt(&local.path)?,
            None => PromptSettings::default(),
        };
        if let Some(thinking) = args.thinking {
            prompt.thinking = thinking;
        }
        let style = prompt.style(&env.bundle().manifest.description);
        Ok(Self {
            policy: args.policy,
            user: args.user,
            client,
            remote_agent: forge_llm::Sampling {
                temperature: args.temperature.map_or(0.0, decimal),
                // A mass of 1 samples as the endpoint does unasked.
                top_p: args.top_p.map(decimal).filter(|&mass| mass < 1.0),
                seed: None,
            },
            remote_user: forge_llm::Sampling {
                temperature: args.user_temperature.map_or(0.0, decimal),
                ..Default::default()
            },
            judge,
            user_guidelines: env.bundle().manifest.user_guidelines.clone(),
            from: args.from.clone(),
            recorded,
            recorded_elsewhere,
            style,
            instability: args.user_instability,
            local,
        })
    }

    /// The policy's name in trajectories and reports.
    pub fn label(&self) -> String {
        match (self.policy, &self.client) {
            (PolicyKind::Gold, _) => "gold".into(),
            (PolicyKind::Random, _) => "random".into(),
            (PolicyKind::Replay, _) => "replay".into(),
            (PolicyKind::Openai, Some(client)) => format!("openai:{}", client.config().model),
            (PolicyKind::Openai, None) => "openai".into(),
            (PolicyKind::Model, _) => format!(
                "model:{}",
                self.local.as_ref().map_or("?", |local| local.name.as_str())
            ),
        }
    }

    /// Who plays the user, for reports: named as records name model users
    /// (`model:NAME`, `openai:NAME`), the scripted user with its
    /// instability.
    pub fn user_label(&self) -> String {
        let local_user = self.local.as_ref().and_then(|local| local.user.as_ref());
        match (self.policy, self.user, &self.client, local_user) {
            (PolicyKind::Replay, ..) => "as recorded".into(),
            (_, UserKind::Openai, Some(client), _) => format!("openai:{}", client.config().model),
            (_, UserKind::Model, _, Some(user)) => user.label.clone(),
            _ if self.instability > 0.0 => format!("scripted (instability {})", self.instability),
            _ => "scripted".into(),
        }
    }

    /// What the remote models cost so far.
    pub fn usage(&self) -> RemoteUsage {
        RemoteUsage {
            agent: self.client.as_ref().map(ChatClient::usage),
            judge: self.judge.as_ref().map(ChatClient::usage),
        }
    }

    /// The summary lines of [`Self::usage`] (none where no remote model is
    /// used).
    pub fn usage_lines(&self) -> Vec<String> {
        let line = |what: &str, client: &ChatClient| {
            format!(
                "{what} {}: {}",
                client.config().model,
                crate::output::usage(&client.usage())
            )
        };
        let agent = self.client.as_ref().map(|client| line("model", client));
        let judge = self.judge.as_ref().map(|client| line("judge", client));
        agent.into_iter().chain(judge).collect()
    }

    /// Tells of the agent's, user's and judge's endpoints' retries above
    /// `bar` (see [`output::tell_retries`]).
    pub fn tell_retries(&self, bar: &indicatif::ProgressBar) {
        for client in self.client.iter().chain(&self.judge) {
            output::tell_retries(client, bar);
        }
    }

    /// Everything besides the task and the seed that decides how an episode
    /// plays out: an evaluation resumed under other settings must not count
    /// the episodes it finds as its own. Settings that only change how fast
    /// episodes run (requests in flight, threads) are left out.
    pub fn settings(&self) -> Result<serde_json::Value> {
        let endpoint = |client: &ChatClient| {
            serde_json::json!({
                "base_url": client.config().base(),
                "model": client.config().model,
            })
        };
        // Greedy sampling is written as before sampling could be asked
        // for, so that evaluations begun then resume: the agent's
        // temperature 0, the rest null (as a key left out reads).
        let greedy = forge_llm::Sampling::default();
        let agent = match self.policy {
            PolicyKind::Openai => self.remote_agent,
            _ => greedy,
        };
        let user_temperature = match self.user {
            UserKind::Openai => Some(self.remote_user.temperature).filter(|&t| t > 0.0),
            _ => None,
        };
        let mut settings = serde_json::json!({
            "policy": self.label(),
            "user": format!("{:?}", self.user).to_lowercase(),
            "user_instability": self.instability,
            "endpoint": self.client.as_ref().map(|client| {
                let mut endpoint = endpoint(client);
                endpoint["temperature"] = agent.temperature.into();
                endpoint["top_p"] = agent.top_p.into();
                endpoint["user_temperature"] = user_temperature.into();
                endpoint
            }),
            "judge": self.judge.as_ref().map(|client| {
                let mut judge = endpoint(client);
                judge["temperature"] = greedy.temperature.into();
                judge
            }),
        });
        if self.policy == PolicyKind::Replay {
            let recorded = serde_json::to_value(&self.recorded).expect("records serialise");
            settings["replayed_sha256"] = forge_runtime::canonical::sha256_hex(&recorded).into();
        }
        if let Some(local) = &self.local {
            let user_model = local.user.as_ref().map(|user| {
                Ok::<_, anyhow::Error>(serde_json::json!({
                    "path": user.path,
                    "sha256": forge_trainer::checkpoint::files_digest(&user.path)?,
                    "temperature": decimal(user.temperature),
                    "max_new_tokens": user.max_tokens,
                }))
            });
            settings["user_model"] = user_model.transpose()?.into();
            settings["model"] = serde_json::json!({
                "path": local.path,
                // The path may hold another model than last time.
                "sha256": forge_trainer::checkpoint::files_digest(&local.path)?,
                "temperature": decimal(local.sampling.temperature),
                "top_p": decimal(local.sampling.top_p),
                "max_new_tokens": local.sampling.max_tokens,
                // Batch shape, device and precision change the rounding.
                "device": format!("{:?}", local.accelerator).to_lowercase(),
                "precision": local.precision,
                "batch": local.batch,
                // What the model is told: `--thinking`, or the checkpoint's
                // prompt.json, may change it under the same path.
                "prompt": self.style,
            });
        }
        Ok(settings)
    }

    /// Whether a local model plays the agent: its episodes go in batches
    /// on its device (`--batch`), never on threads.
    pub fn batches_locally(&self) -> bool {
        self.local.is_some()
    }

    /// Plays one episode of each `(task, seed)`, handing each record to
    /// `finished` as it ends: a local model's in batches on its device, in
    /// order; any other policy's on `threads` threads at a time, each with a
    /// fresh policy, user and judge, in the order they end (in order on one
    /// thread). A failure stops the rest, and the earliest failed
    /// episode's error is the one returned ([`in_parallel`]).
    ///
    /// Once `stop` is set no episode starts (with a local model, no batch:
    /// the one under way is played out and every episode of it kept); the
    /// call then fails with [`Interrupted`]. A failed request to an
    /// endpoint is no longer retried then, and an episode that fails for
    /// want of the retry is one stopped, not kept, rather than a failure.
    pub fn play(
        &self,
        env: &Environment,
        episodes: &[(&PreparedTask, u64)],
        max_turns: usize,
        threads: usize,
        stop: &Arc<AtomicBool>,
        mut finished: impl FnMut(EpisodeRecord) -> Result<()>,
    ) -> Result<()> {
        let stopped = || match stop.load(Ordering::Relaxed) {
            true => Err(anyhow::Error::new(Interrupted)),
            false => Ok(()),
        };
        for client in self.client.iter().chain(&self.judge) {
            client.give_up_when(Arc::clone(stop));
        }
        let unretried = |err: anyhow::Error| match ChatError::stopped_in(&err) {
            true => anyhow::Error::new(Interrupted),
            false => err,
        };
        if let Some(local) = &self.local {
            // A batch hands its records on once all of it is played: the
            // flag is heeded after a batch's last record, before the next.
            let batch = local.batch.max(1);
            let mut handed = 0;
            let mut finished = |record: EpisodeRecord| {
                finished(record)?;
                handed += 1;
                match handed % batch == 0 && handed < episodes.len() {
                    true => stopped(),
                    false => Ok(()),
                }
            };
            return self
                .play_local(local, env, episodes, max_turns, &mut finished)
                .map_err(unretried);
        }
        let run_one = |(task, seed): (&PreparedTask, u64)| {
            stopped()?;
            let (mut policy, mut user) = self.make(task, seed)?;
            let mut judge = self.judge(task);
            forge_runtime::run_episode(
                env,
                task,
                &self.label(),
                policy.as_mut(),
                user.as_mut(),
                judge.as_mut().map(|judge| judge.as_mut() as &mut dyn Judge),
                EpisodeSettings { max_turns, seed },
            )
            .with_context(|| format!("task `{}`", task.task.id))
            .map_err(unretried)
        };
        in_parallel(episodes, threads, run_one, finished)
    }

    fn play_local(
        &self,
        local: &LocalModel,
        env: &Environment,
        episodes: &[(&PreparedTask, u64)],
        max_turns: usize,
        finished: &mut dyn FnMut(EpisodeRecord) -> Result<()>,
    ) -> Result<()> {
        let jobs: Vec<Job<'_>> = episodes
            .iter()
            .map(|&(task, seed)| Job {
                env,
                style: &self.style,
                task,
                seed,
            })
            .collect();
        let user = match (self.user, &local.user) {
            (UserKind::Openai, _) => UserPlayer::Remote {
                client: self.client.as_ref().expect("checked in new"),
                sampling: self.remote_user,
            },
            (_, Some(user)) => UserPlayer::Model {
                model: &user.path,
                name: &user.label,
                temperature: user.temperature,
                max_tokens: user.max_tokens,
            },
            (_, None) => UserPlayer::Scripted,
        };
        let label = self.label();
        let spec = LocalPlay {
            model: &local.path,
            policy: &label,
            accelerator: local.accelerator,
            precision: local.precision,
            sampling: local.sampling.clone(),
            max_turns,
            batch: local.batch,
            user_instability: self.instability,
            user,
            nl_judge: self.judge.as_ref(),
        };
        forge_trainer::episodes::play(&spec, &jobs, finished)
    }

    /// The episodes to play: `play`'s, each task's `trials` under seeds
    /// derived from `--seed`; or, replaying a trajectory, each task's
    /// recorded episode under its recorded seed — a replayed user says what
    /// it said under that seed, which another seed would contradict.
    pub fn episodes<'a>(
        &self,
        play: &PlayArgs,
        tasks: &[&'a PreparedTask],
        trials: u64,
    ) -> Result<Vec<(&'a PreparedTask, u64)>> {
        refuse_needless_instability(self.instability, tasks.iter().copied(), "chosen")?;
        if self.judge.is_some() && tasks.iter().all(|task| task.task.nl_assertions.is_empty()) {
            bail!(
                "--judge-model: no task chosen has NL assertions (`nl_assertions`) for a judge \
                 to decide, so it would change nothing"
            );
        }
        if self.policy != PolicyKind::Replay {
            return Ok(play.episodes(tasks, trials));
        }
        if trials > 1 {
            bail!(
                "--policy replay plays each task's recorded episode once: pass --trials 1 \
                 (each trial would repeat it)"
            );
        }
        if play.seed != 0 {
            bail!(
                "--policy replay plays each episode under its recorded seed: --seed would be ignored"
            );
        }
        let episodes = tasks
            .iter()
            .map(|task| Ok((*task, self.recorded(task)?.seed)))
            .collect::<Result<Vec<_>>>()?;
        // Another version's actions are played on this one, which may take
        // them elsewhere: what the replay shows is then not what was recorded.
        let elsewhere = tasks
            .iter()
            .filter(|task| self.recorded_elsewhere.contains(&task.task.id))
            .count();
        if elsewhere > 0 {
            eprintln!(
                "warning: {} holds episodes of {} only as recorded on another version of the \
                 environment than this one: their actions are played on it as they were \
                 recorded, which may lead elsewhere",
                self.replayed_file().display(),
                output::count(elsewhere, "task"),
            );
        }
        Ok(episodes)
    }

    /// The tasks to play: `--tasks`' selection; replaying a file under
    /// `--tasks all`, those of its tasks the environment has.
    pub fn tasks<'a>(
        &self,
        play: &PlayArgs,
        env: &'a Environment,
    ) -> Result<Vec<&'a PreparedTask>> {
        let tasks = play.tasks.select(env)?;
        if self.policy != PolicyKind::Replay || play.tasks != TaskSelection::All {
            return Ok(tasks);
        }
        let recorded: Vec<&PreparedTask> = tasks
            .into_iter()
            .filter(|task| self.recorded.contains_key(&task.task.id))
            .collect();
        if recorded.is_empty() {
            bail!(
                "environment `{}` has none of the tasks {} has episodes of (another version of \
                 it?)",
                env.name(),
                self.replayed_file().display()
            );
        }
        let lacking: Vec<&str> = self
            .recorded
            .keys()
            .map(String::as_str)
            .filter(|id| env.task(id).is_none())
            .collect();
        if !lacking.is_empty() {
            // Said, as a count too short is: a replay meant to cover the
            // file covers less of it.
            eprintln!(
                "note: environment `{}` lacks {} of the {} {} has episodes of: skipping {}",
                env.name(),
                lacking.len(),
                crate::output::count(self.recorded.len(), "task"),
                self.replayed_file().display(),
                listed(&lacking)
            );
        }
        Ok(recorded)
    }

    /// The most agent actions per episode: `--max-turns`, else the limit
    /// replayed episodes were recorded under (under another, a replay
    /// would end elsewhere than its record), else the default.
    pub fn max_turns(&self, play: &PlayArgs, tasks: &[&PreparedTask]) -> Result<usize> {
        if let Some(turns) = play.max_turns {
            return Ok(turns);
        }
        if self.policy != PolicyKind::Replay {
            return Ok(EpisodeSettings::default().max_turns);
        }
        let recorded = tasks
            .iter()
            .map(|task| Ok(self.recorded(task)?.max_turns))
            .collect::<Result<BTreeSet<usize>>>()?;
        match recorded.into_iter().collect::<Vec<_>>().as_slice() {
            [turns] => Ok(*turns),
            turns => bail!(
                "the episodes to replay were recorded with different --max-turns ({}): pass \
                 --max-turns, or --tasks choosing episodes of one",
                turns
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// `--policy replay`: the file it replays, as messages name it.
    fn replayed_file(&self) -> &Path {
        self.from.as_deref().unwrap_or(Path::new("the trajectory"))
    }

    /// `--policy replay`: the recorded episode of `task`.
    fn recorded(&self, task: &PreparedTask) -> Result<&EpisodeRecord> {
        self.recorded.get(&task.task.id).with_context(|| {
            let has: Vec<&str> = self.recorded.keys().map(String::as_str).collect();
            format!(
                "{} has no episode of task `{}` (it has {}): pass --tasks naming tasks it has",
                self.replayed_file().display(),
                task.task.id,
                listed(&has)
            )
        })
    }

    /// The policy and user of one episode of `task`.
    fn make<'a>(
        &'a self,
        task: &PreparedTask,
        seed: u64,
    ) -> Result<(Box<dyn Policy + 'a>, Box<dyn User + 'a>)> {
        let recorded = || self.recorded(task);
        let policy: Box<dyn Policy + 'a> = match self.policy {
            PolicyKind::Gold => Box::new(GoldPolicy::new(&task.task)),
            PolicyKind::Random => Box::new(RandomPolicy::new(seed)),
            PolicyKind::Replay => Box::new(ReplayPolicy::new(recorded()?)?),
            PolicyKind::Openai => Box::new(
                RemotePolicy::new(
                    self.client.as_ref().expect("checked in new"),
                    self.style.system.clone(),
                )
                .sampled(self.remote_agent, seed),
            ),
            PolicyKind::Model => unreachable!("a local model's episodes are played in batches"),
        };
        let user: Box<dyn User + 'a> = match (self.policy, self.user) {
            // A replayed episode replays its user too.
            (PolicyKind::Replay, _) => replayed_user(&task.task, recorded()?),
            (_, UserKind::Scripted) => scripted_user(&task.task, self.instability, seed),
            (_, UserKind::Model) => unreachable!("a local model user plays beside a local model"),
            (_, UserKind::Openai) => Box::new(
                RemoteUser::new(
                    self.client.as_ref().expect("checked in new"),
                    remembered_instruction(&task.task, self.instability, seed),
                )
                .sampled(self.remote_user, seed ^ USER_SEED)
                .with_guidelines(self.user_guidelines.as_deref()),
            ),
        };
        Ok((policy, user))
    }
}

impl Agents {
    /// The judge of one episode's NL assertions of `task`: the judge model,
    /// or a replayed episode's recorded verdicts; none when neither is there.
    fn judge(&self, task: &PreparedTask) -> Option<Box<dyn Judge + '_>> {
        if self.policy == PolicyKind::Replay {
            let recorded = self.recorded.get(&task.task.id)?;
            return RecordedJudge::new(recorded).map(|judge| Box::new(judge) as Box<dyn Judge>);
        }
        self.judge
            .as_ref()
            .map(|client| Box::new(ModelJudge::new(client)) as Box<dyn Judge + '_>)
    }
}

/// The first recorded episode of each task of environment `env` in a
/// trajectory file (or a `forge eval` results directory), those recorded on
/// this very version of it first, and the tasks whose episode is another
/// version's. A file with none of `env`'s episodes is
/// refused, naming the environments it holds: its task ids would otherwise
/// be reported missing one by one, or match another environment's tasks by
/// chance.
fn recorded_by_task(
    path: &Path,
    env: &Environment,
) -> Result<(BTreeMap<String, EpisodeRecord>, BTreeSet<String>)> {
    let path = crate::commands::trajectory_file(path)?;
    let (mut this_version, mut other_versions) = (BTreeMap::new(), BTreeMap::new());
    let mut others = BTreeSet::new();
    for record in crate::commands::read_trajectories(&path)? {
        let by_task = match &record.environment {
            recorded if recorded.content_hash == env.content_hash() => &mut this_version,
            recorded if recorded.name == env.name() => &mut other_versions,
            recorded => {
                others.insert(recorded.name.clone());
                continue;
            }
        };
        by_task.entry(record.task_id.clone()).or_insert(record);
    }
    if this_version.is_empty() && other_versions.is_empty() {
        match others.is_empty() {
            true => bail!("{} holds no episode to replay", path.display()),
            false => bail!(
                "{} holds episodes of {}, none of `{}`: pass `--env DIR` naming the bundle it was \
                 recorded on (or `--suite`)",
                path.display(),
                others
                    .iter()
                    .map(|name| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                env.name()
            ),
        }
    }
    // Another version's episode stands in for a task this one's lacks.
    let mut by_task = this_version;
    let mut elsewhere = BTreeSet::new();
    for (task, record) in other_versions {
        if let std::collections::btree_map::Entry::Vacant(entry) = by_task.entry(task) {
            elsewhere.insert(entry.key().clone());
            entry.insert(record);
        }
    }
    Ok((by_task, elsewhere))
}

/// Task ids for a message: the first few, then `…`.
fn listed(ids: &[&str]) -> String {
    const LISTED: usize = 5;
    let mut shown = ids[..ids.len().min(LISTED)].join(", ");
    if ids.len() > LISTED {
        shown.push_str(", …");
    }
    shown
}

/// Refuses `--user-instability` (`instability` above 0) where none of
/// `tasks` (those `which`: chosen, served) has a fact its instruction
/// states: an unreliable user misstates such a fact, so it would change
/// nothing.
pub fn refuse_needless_instability<'a>(
    instability: f64,
    mut tasks: impl Iterator<Item = &'a PreparedTask>,
    which: &str,
) -> Result<()> {
    if instability > 0.0 && tasks.all(|task| task.task.stated_facts().is_empty()) {
        bail!(
            "--user-instability: no task {which} has a fact for the user to misstate \
             (`user_facts` its instruction states), so it would change nothing"
        );
    }
    Ok(())
}

/// The number a person means by an `f32` setting, as an `f64`: `0.7`, not
/// the 0.699999988079071 the `f32` holds exactly, which is how JSON would
/// otherwise record it.
pub fn decimal(value: f32) -> f64 {
    value
        .to_string()
        .parse()
        .expect("an f32 prints as a number")
}
