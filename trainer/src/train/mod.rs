//! `forge train`: cold-start SFT on gold episodes, then ERPO on rollouts of
//! the policy in the sandboxed environments, with held-out evaluation,
//! metrics, checkpoints and exact resume.
//!
//! A run directory holds `metrics.jsonl` (a line per step and per
//! evaluation), `checkpoints/step-NNNNNN/` (model as safetensors, optimizer
//! state, the config it was trained under, the position in the run) with
//! `checkpoints/latest` naming the newest, `episodes/eval-step-NNNNNN.jsonl`
//! (each evaluation's episodes; with `rl.save_rollouts`,
//! `episodes/rl-step-NNNNNN.jsonl` too, and beside it what the update made
//! of each, [`scores`]) and `final/` (the trained model, loadable by
//! `--policy model`).
//! Everything random derives from the config's seed and the step, so a run
//! resumed from a checkpoint continues exactly as if never interrupted.

pub mod config;
mod counterparts;
pub mod data;
mod metrics;
pub mod objective;
mod optimizer;
pub mod rollout;
pub(crate) mod run_dir;
pub mod scores;

use crate::Cpu;
use crate::accelerator::{self, Accelerator, OnBackend};
use crate::checkpoint;
use crate::llama::{Llama, WeightSource};
use crate::lora::FreshAdapters;
use crate::sampling::Sampling;
use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use burn::module::AutodiffModule;
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use config::TrainConfig;
use counterparts::Counterparts;
use data::{TaskQueue, Workload};
use forge_llm::RetryNotice;
use forge_model::tokenizer::ModelTokenizer;
use forge_rl::advantage::{self, Rollout as Scorable};
use forge_runtime::Environment;
use forge_runtime::episode_seed;
use forge_runtime::trajectory::TrajectoryWriter;
pub use metrics::{Metrics, read_metrics};
use objective::{LossStats, Scored, Sequence, Surrogate};
use optimizer::AdamOptimizer;
use rollout::{Interrupted, Job, Play, Rollout, Script, Users};
use run_dir::{
    CHECKPOINTS, EPISODES, LATEST, METRICS, OPTIMIZER, POSITION, Position, REFERENCE, Sealed,
    check_config, check_restartable, check_seal, checkpoint_name, read_latest, read_position,
    save_config, seal,
};
/// A run directory's config (the one it was started with, which `--resume`
/// keeps to) and metrics, as the CLI writes and `forge compare` reads them.
pub use run_dir::{
    CONFIG as CONFIG_FILE, FINAL as FINAL_DIR, METRICS as METRICS_FILE, check_model_seal,
    checkpoint_step, episodes_path,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The training backend: autodiff over the CPU backend.
pub type CpuTrain = Autodiff<Cpu>;
/// The training backend on a CUDA GPU.
#[cfg(feature = "cuda")]
pub type CudaTrain = Autodiff<crate::Cuda>;
/// The training backend on a WebGPU adapter.
#[cfg(feature = "wgpu")]
pub type WgpuTrain = Autodiff<crate::Wgpu>;

/// The stages of a run, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Sft,
    Rl,
}

/// What a run reports as it goes.
pub trait Observer {
    /// A step or an evaluation finished (its line is already in `metrics.jsonl`).
    fn metrics(&mut self, metrics: &Metrics);
    /// An evaluation of `tasks` held-out tasks begins (its metrics follow).
    fn evaluating(&mut self, _tasks: usize) {}
    /// A checkpoint was written.
    fn checkpoint(&mut self, _dir: &Path) {}
    /// Something about the run that does not stop it but that its user
    /// should know.
    fn notice(&mut self, _message: &str) {}
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Steps done, of `total_steps`; the run is `complete` when they agree.
    pub steps: usize,
    pub total_steps: usize,
    /// Steps done by this call, in `seconds` (0 when a run resumed complete).
    pub steps_run: usize,
    pub complete: bool,
    /// Stopped early by [`RunSpec::interrupt`].
    pub interrupted: bool,
    pub heldout_tasks: usize,
    /// Before the first step (none when `eval.at_start` is off or no task
    /// is held out).
    pub heldout_success_before: Option<f64>,
    /// After the SFT stage (absent without one).
    pub heldout_success_after_sft: Option<f64>,
    /// At the step the run stopped at (absent when no task is held out, or
    /// when the run was not evaluated there: one stopped by `max_steps` or
    /// an interrupt between evaluations). Never an earlier evaluation's,
    /// which would pass for the stopped model's.
    pub heldout_success_after: Option<f64>,
    /// The trained model (a complete run's).
    pub final_model: Option<PathBuf>,
    /// The model's weights, and how many numbers training updates: all of
    /// them, or with LoRA the adapters'.
    pub parameters: usize,
    pub trained_parameters: usize,
    pub seconds: f64,
}

/// A run to start or resume.
pub struct RunSpec<'a> {
    pub config: TrainConfig,
    pub dir: &'a Path,
    pub envs: &'a [Environment],
    /// The model to start from; `None` for the tiny random model.
    pub init: Option<&'a Path>,
    /// The model that plays the user (`user.kind = "model"`); `None` for
    /// the tiny random model.
    pub user_model: Option<&'a Path>,
    pub resume: bool,
    /// Stop after this many steps (with a checkpoint).
    pub max_steps: Option<usize>,
    /// Stop once the next step, if it took as long as the last, would end
    /// after this much time (with a checkpoint and an evaluation).
    pub time_limit: Option<Duration>,
    /// Set from outside (a signal handler) to stop after the current step,
    /// with a checkpoint.
    pub interrupt: Option<&'a AtomicBool>,
    pub accelerator: Accelerator,
    /// Told of each retry of a remote user's or judge's requests.
    pub on_retry: Option<RetryNotice>,
}

/// Refuses to resume the run in `dir` under `config` when that is not the
/// config of its latest checkpoint, or when it has none but got past one.
/// Resuming checks this too; checked first, the problem is named before
/// models and environments load (an emptied config would otherwise fail on
/// the default model's absence).
pub fn check_resumable(dir: &Path, config: &TrainConfig) -> Result<()> {
    match read_latest(dir)? {
        Some(checkpoint) => check_config(&checkpoint, config),
        None => check_restartable(dir, config),
    }
}

/// The checkpoint whose weights resuming the run in `dir` under `config`
/// takes, needing no `model.init`: a full fine-tuning run's latest (LoRA's
/// checkpoints hold only the adapters). The model a run started from may
/// have moved since.
pub fn own_weights_to_resume(dir: &Path, config: &TrainConfig) -> Result<Option<PathBuf>> {
    match config.lora.enabled() {
        true => Ok(None),
        false => read_latest(dir),
    }
}

/// Starts or resumes `spec`'s run and runs it: the backends are
/// instantiated here, so callers compile none of the training code.
pub fn train(spec: RunSpec<'_>, observer: &mut dyn Observer) -> Result<Summary> {
    let RunSpec {
        config,
        dir,
        envs,
        init,
        user_model,
        resume,
        max_steps,
        time_limit,
        interrupt,
        accelerator,
        on_retry,
    } = spec;
    let models = Models { init, user_model };
    let limits = Limits {
        max_steps,
        // A limit too far off to represent is no limit.
        deadline: time_limit.and_then(|limit| Instant::now().checked_add(limit)),
        interrupt,
    };
    let work = Training {
        config,
        dir,
        envs,
        models,
        resume,
        observer,
        limits,
        on_retry,
    };
    accelerator::on(accelerator, work)
}

/// A run, to be started on the backend [`accelerator::on`] picks.
struct Training<'a, 'o> {
    config: TrainConfig,
    dir: &'a Path,
    envs: &'a [Environment],
    models: Models<'a>,
    resume: bool,
    observer: &'o mut dyn Observer,
    limits: Limits<'a>,
    on_retry: Option<RetryNotice>,
}

impl OnBackend for Training<'_, '_> {
    type Output = Summary;

    fn run<B: AutodiffBackend>(self, device: B::Device) -> Result<Summary> {
        let mut trainer = Trainer::<B>::new(
            self.config,
            self.dir,
            self.envs,
            self.models,
            self.resume,
            device,
        )?;
        if let Some(notice) = &self.on_retry {
            trainer.counterparts.tell_retries(notice);
        }
        trainer.run(self.observer, self.limits)
    }
}

/// The model files a run starts from (`None`: the tiny random model).
#[derive(Debug, Clone, Copy, Default)]
pub struct Models<'a> {
    /// The policy.
    pub init: Option<&'a Path>,
    /// The model that plays the user, with `user.kind = "model"`.
    pub user_model: Option<&'a Path>,
}

/// Where a run stops before its end, to be resumed: long runs in bounded
/// jobs, and runs stopped by hand or by a job scheduler.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits<'a> {
    /// After this many more steps.
    pub max_steps: Option<usize>,
    /// Before a step that, taking as long as the last, would end after this.
    pub deadline: Option<Instant>,
    /// After the step during which this was set.
    pub interrupt: Option<&'a AtomicBool>,
}

impl Limits<'_> {
    fn interrupted(&self) -> bool {
        crate::sampling::is_set(self.interrupt)
    }
}

/// A training run on backend `B`.
pub struct Trainer<'a, B: AutodiffBackend> {
    config: TrainConfig,
    dir: PathBuf,
    workloads: Vec<Workload<'a>>,
    queue: TaskQueue,
    tokenizer: ModelTokenizer,
    model: Llama<B>,
    /// With LoRA, the digest of the frozen weights the adapters train on.
    lora_base: Option<String>,
    optimizer: AdamOptimizer<B>,
    /// The policy at the start of RL, for the KL penalty.
    reference: Option<Llama<B::InnerBackend>>,
    /// The simulated user and masking judge of rollouts.
    counterparts: Counterparts<B::InnerBackend>,
    device: B::Device,
    position: Position,
    /// The step of the latest checkpoint, not to be written twice.
    checkpointed: Option<usize>,
    /// What resuming found amiss (unsealed checkpoints, cut metrics), told
    /// as the run starts.
    notices: Vec<String>,
    /// How long the latest evaluation took: a time limit keeps room for the
    /// one made where it stops the run.
    evaluation_time: Option<Duration>,
    /// How long the latest step of each stage took, which a time limit
    /// judges the next one by: resumed, as the metrics record it, so that
    /// a run given less time than a step stops before it, not during it.
    step_times: StepTimes,
}

/// How long the latest step of each stage took, as run or, resumed, as
/// the run's metrics record.
#[derive(Debug, Default)]
struct StepTimes {
    sft: Option<Duration>,
    rl: Option<Duration>,
}

impl StepTimes {
    fn of(&mut self, stage: Stage) -> &mut Option<Duration> {
        match stage {
            Stage::Sft => &mut self.sft,
            Stage::Rl => &mut self.rl,
        }
    }
}

/// The policy's name in the records of rollouts and evaluations.
const POLICY: &str = "model";

impl<'a, B: AutodiffBackend> Trainer<'a, B> {
    /// A fresh run in `dir` (which must hold no earlier run), or — with
    /// `resume` — the continuation of the run there from its latest
    /// checkpoint (from its start, when it was stopped before the first).
    /// `models` are the files of the policy to start from and of a model
    /// user.
    pub fn new(
        config: TrainConfig,
        dir: &Path,
        envs: &'a [Environment],
        models: Models<'_>,
        resume: bool,
        device: B::Device,
    ) -> Result<Self> {
        config
            .validate()
            .map_err(|message| anyhow::anyhow!("invalid training config: {message}"))?;
        Llama::<B>::check_precision(config.model.precision, &device)
            .context("the config's model.precision")?;
        let latest = read_latest(dir)?;
        // Said once the run starts.
        let mut notices = Vec::new();
        let position = match (&latest, resume) {
            (Some(checkpoint), true) => {
                check_config(checkpoint, &config)?;
                let position = read_position(checkpoint)?;
                notices.extend(check_seal(checkpoint, Sealed::Checkpoint)?);
                position
            }
            (Some(_), false) => bail!(
                "{} already holds a run: pass --resume to continue it, or choose another directory",
                dir.display()
            ),
            (None, true) => {
                check_restartable(dir, &config)?;
                Position::default()
            }
            (None, false) => Position::default(),
        };
        // Where the weights come from: the latest checkpoint when resuming
        // (with LoRA, whose weights stay as they started, only the adapters),
        // else `model.init` (a run stopped before its first checkpoint
        // resumes from its start), else a tiny model made here.
        let lora = &config.lora;
        let source = match &latest {
            Some(checkpoint) if !lora.enabled() => Some((checkpoint.as_path(), "the checkpoint")),
            _ => models.init.map(|path| (path, "model.init")),
        };
        let tokenizer = match source {
            Some((path, what)) => checkpoint::load_tokenizer(path)
                .with_context(|| format!("reading {what} {}", path.display()))?,
            None => ModelTokenizer::byte_level(),
        };
        // Refused before the weights load.
        config
            .model
            .thinking
            .check(&tokenizer)
            .map_err(|message| anyhow::anyhow!("invalid training config: model.{message}"))?;
        let model = match source {
            Some((path, what)) => Llama::load(path, &device)
                .with_context(|| format!("loading {what} {}", path.display()))?,
            None => {
                let tiny = config
                    .model
                    .tiny_shape(tokenizer.vocab_size())
                    .context("model.tiny_*")?;
                Llama::init(tiny, config.seed, &device)
            }
        };
        let lora_base = lora
            .enabled()
            .then(|| checkpoint::weights_digest(&model.named_tensors()));
        let model = if let Some(base) = &lora_base {
            let mut adapters: Box<dyn WeightSource> = match &latest {
                Some(checkpoint) => {
                    let saved = checkpoint::saved_adapters(checkpoint)?;
                    saved.check_base(base, "resume with the model.init the run started from")?;
                    Box::new(saved.tensors(&model)?)
                }
                None => Box::new(FreshAdapters::new(config.seed)),
            };
            model.with_lora(lora, adapters.as_mut())?
        } else {
            model
        };
        let model = model.with_precision(config.model.precision)?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        if resume && latest.is_none() {
            // What the stopped run logged, the restart logs again.
            match std::fs::remove_file(dir.join(METRICS)) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(err).context("clearing the stopped run's metrics");
                }
                _ => {}
            }
        }
        let workloads: Vec<Workload<'a>> = envs
            .iter()
            .map(|env| {
                let style = config
                    .model
                    .prompt()
                    .style(&env.bundle().manifest.description);
                Workload::split(env, style, &config.tasks, config.seed)
            })
            .collect::<Result<_>>()?;
        if latest.is_none() {
            notices.extend(config.cautions());
            for workload in &workloads {
                if workload.heldout.len() < workload.heldout_asked {
                    notices.push(format!(
                        "environment `{}`: {} of the {} tasks tasks.heldout_fraction asks for \
                         are held out: no others have all their gold actions' tools and values \
                         in training tasks too (tasks.heldout = \"covered\")",
                        workload.env.name(),
                        workload.heldout.len(),
                        workload.heldout_asked
                    ));
                }
            }
        }
        let queue = TaskQueue::new(&workloads, config.seed);
        if config.rl.steps > 0 && queue.is_empty() {
            bail!("no training tasks: every task is held out");
        }
        let counterparts = Counterparts::new(&config, models.user_model, &device)?;
        let mut trainer = Self {
            optimizer: optimizer::new(&config.optim),
            counterparts,
            config,
            dir: dir.to_owned(),
            workloads,
            queue,
            tokenizer,
            model,
            lora_base,
            reference: None,
            device,
            position,
            checkpointed: latest.as_ref().map(|_| position.step),
            notices,
            evaluation_time: None,
            step_times: StepTimes::default(),
        };
        if let Some(checkpoint) = latest {
            trainer.restore(&checkpoint)?;
        }
        Ok(trainer)
    }

    pub fn total_steps(&self) -> usize {
        self.config.sft.steps + self.config.rl.steps
    }

    pub fn heldout_tasks(&self) -> usize {
        self.workloads.iter().map(|w| w.heldout.len()).sum()
    }

    /// Runs the remaining steps, evaluating and checkpointing as configured,
    /// until the run ends or a limit stops it with a checkpoint to resume
    /// from (and, for the time limit, an evaluation, so that a run cut short
    /// still reports where it got to).
    pub fn run(&mut self, observer: &mut dyn Observer, limits: Limits) -> Result<Summary> {
        let started = Instant::now();
        let first_step = self.position.step;
        let stop_at = limits.max_steps.map(|steps| first_step + steps);
        let sft_steps = self.config.sft.steps;
        let total = self.total_steps();
        for notice in std::mem::take(&mut self.notices) {
            observer.notice(&notice);
        }
        // Made before the first evaluation is recorded: a run SFT has
        // nothing to teach fails without leaving a run it cannot go on with.
        let sft_data = if self.position.step < sft_steps {
            let data = data::sft_sequences(
                &self.workloads,
                self.config.sft.task_fraction,
                &self.tokenizer,
                self.config.tasks.max_turns,
                self.model.config.context,
            )?;
            if data.turns_past_context > 0 {
                let context = self.model.config.context.unwrap_or_default();
                anyhow::ensure!(
                    !data.sequences.is_empty(),
                    "no gold turn fits in the model's context of {context} tokens (its prompt \
                     and reply together): SFT has nothing to learn from"
                );
                let (turns, them) = match data.turns_past_context {
                    1 => ("1 gold turn lies".to_owned(), "it"),
                    many => (format!("{many} gold turns lie"), "them"),
                };
                observer.notice(&format!(
                    "{turns} past the model's context of {context} tokens: SFT leaves {them} out"
                ));
            }
            data.sequences
        } else {
            Vec::new()
        };
        // An evaluation due where the run starts that it does not hold (a
        // new run's first, or one a stop cut short) is made first.
        let mut interrupted = false;
        // RL steps this call ran, and those with nothing to learn.
        let mut rl_steps = (0, 0);
        let step = self.position.step;
        if self.evaluation_due(step) && !self.evaluated_at(step)? {
            interrupted = !self.evaluate(observer, limits)?;
        }
        // The step before, whose time stands for a stage's first step.
        let mut last_step_time = None;
        while self.position.step < total {
            interrupted |= limits.interrupted();
            if interrupted || stop_at == Some(self.position.step) {
                self.save_checkpoint(observer)?;
                break;
            }
            let step = self.position.step;
            let stage = if step < sft_steps {
                Stage::Sft
            } else {
                Stage::Rl
            };
            // Room for the step and the evaluation made where the run
            // stops (one due after the step is made there, in its place).
            // A stage's first step is judged by the step before it, which
            // takes no longer (an RL step takes many SFT steps' time).
            let step_time = self.step_times.of(stage).or(last_step_time);
            let out_of_time = limits
                .deadline
                .zip(step_time)
                .is_some_and(|(deadline, took)| {
                    // Times read back from an edited file may be past counting.
                    let needed = took.checked_add(self.evaluation_time.unwrap_or_default());
                    needed
                        .and_then(|needed| Instant::now().checked_add(needed))
                        .is_none_or(|done| done >= deadline)
                });
            if out_of_time {
                if step == first_step {
                    // Said, or a job given the same limit again would
                    // stop here again, none the wiser.
                    observer.notice(&format!(
                        "the time limit leaves no room for a step ({:.1} s, as the last took) and \
                         the evaluation where the run stops ({:.1} s): no step was run",
                        step_time.unwrap_or_default().as_secs_f64(),
                        self.evaluation_time.unwrap_or_default().as_secs_f64()
                    ));
                }
                // The checkpoint first: it is what a resumed run needs,
                // should the process be stopped from outside during the
                // evaluation.
                self.save_checkpoint(observer)?;
                if !self.evaluated_at(step)? {
                    interrupted = !self.evaluate(observer, limits)?;
                }
                break;
            }
            if step == sft_steps && stage == Stage::Rl {
                self.start_rl()?;
            }
            let step_started = Instant::now();
            let metrics = match stage {
                Stage::Sft => self.sft_step(&sft_data, step)?,
                Stage::Rl => self.rl_step(step - sft_steps)?,
            };
            let step_time = step_started.elapsed();
            *self.step_times.of(stage) = Some(step_time);
            last_step_time = Some(step_time);
            if stage == Stage::Rl {
                rl_steps.0 += 1;
                // No loss: no rollout had an advantage to learn from.
                rl_steps.1 += usize::from(metrics.loss.is_none());
            }
            self.position.step += 1;
            self.record(&metrics, observer)?;
            let done = self.position.step;
            let stage_end = done == sft_steps || done == total;
            if self.evaluation_due(done) {
                interrupted = !self.evaluate(observer, limits)?;
            }
            if stage_end || every(done, self.config.checkpoint_every) {
                self.save_checkpoint(observer)?;
            }
        }
        if rl_steps.0 > 0 && rl_steps.1 == rl_steps.0 {
            let steps = match rl_steps.0 {
                1 => "the RL step had nothing".to_owned(),
                run => format!("none of the {run} RL steps had anything"),
            };
            observer.notice(&format!(
                "{steps} to learn from: in every task's group the rollouts that counted (not \
                 masked) earned the same reward, all right or all wrong, which gives no \
                 advantage; more rollouts (rl.rollouts), a higher rl.temperature, or SFT first \
                 (sft.steps) make them differ"
            ));
        }
        let complete = self.position.step == total;
        let final_model = self.dir.join(run_dir::FINAL);
        // A complete run resumed keeps the model it wrote, unless that is
        // gone, damaged or unsealed (written before models were).
        let sealed = final_model.join(run_dir::SEAL).is_file();
        let intact = || sealed && check_model_seal(&final_model).is_ok();
        if complete && (first_step < total || !intact()) {
            let lost = match (final_model.exists(), sealed) {
                (false, _) => Some("gone"),
                (true, true) => Some("damaged"),
                (true, false) => None,
            };
            if let Some(lost) = lost.filter(|_| first_step == total) {
                observer.notice(&format!(
                    "{} is {lost}: written again from the last checkpoint",
                    final_model.display()
                ));
            }
            // Unsealed while it is written: a stop part-way leaves files no
            // seal vouches for, not new files under the old seal.
            let _ = std::fs::remove_file(final_model.join(run_dir::SEAL));
            self.save_model(&final_model)?;
            // Checked as a checkpoint's model is, wherever it is run.
            seal(&final_model)?;
        }
        let evals = read_metrics(&self.dir.join(METRICS))?
            .into_iter()
            .filter(|metrics| metrics.kind == "eval")
            .collect::<Vec<_>>();
        let success_at = |step: usize| {
            evals
                .iter()
                .rev()
                .find(|metrics| metrics.step == step)
                .and_then(|metrics| metrics.heldout_success)
        };
        Ok(Summary {
            steps: self.position.step,
            total_steps: total,
            steps_run: self.position.step - first_step,
            complete,
            interrupted,
            heldout_tasks: self.heldout_tasks(),
            heldout_success_before: success_at(0),
            heldout_success_after_sft: (sft_steps > 0).then(|| success_at(sft_steps)).flatten(),
            heldout_success_after: success_at(self.position.step),
            final_model: complete.then_some(final_model),
            parameters: self.model.weight_count(),
            trained_parameters: self.model.trained_count(),
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    fn sft_step(&mut self, data: &[Sequence], step: usize) -> Result<Metrics> {
        anyhow::ensure!(!data.is_empty(), "no gold episodes to fine-tune on");
        let started = Instant::now();
        let batch = self.config.sft.batch;
        // A seeded pass over the data per epoch, `batch` sequences a step.
        let per_epoch = data.len();
        let sequences: Vec<Sequence> = (step * batch..(step + 1) * batch)
            .map(|position| {
                let epoch = position / per_epoch;
                let order = data::permutation(per_epoch, self.config.seed, epoch);
                data[order[position % per_epoch]].clone()
            })
            .collect();
        let lr = self
            .config
            .optim
            .lr_at(self.config.sft.lr, step, self.config.sft.steps);
        let (grads, stats) =
            objective::sft_gradients(&self.model, &sequences, self.config.optim.passes());
        let grad_norm = self
            .apply(lr, grads)
            .with_context(|| format!("SFT step {} (loss {})", step + 1, stats.loss))?;
        let seconds = started.elapsed().as_secs_f64();
        Ok(Metrics {
            kind: "sft".into(),
            step: step + 1,
            lr: Some(lr),
            loss: Some(stats.loss),
            tokens: Some(stats.tokens),
            train_tokens_per_s: Some(stats.tokens as f64 / seconds),
            grad_norm: Some(grad_norm),
            seconds: Some(seconds),
            ..Metrics::default()
        })
    }

    fn start_rl(&mut self) -> Result<()> {
        self.optimizer = optimizer::new(&self.config.optim);
        if self.config.rl.kl > 0.0 {
            let dir = self.dir.join(REFERENCE);
            let policy = self.model.valid();
            match &self.lora_base {
                // The adapters alone: the frozen weights are the policy's.
                Some(base) => {
                    checkpoint::save_adapter(&dir, &policy, &self.config.model.init, base)?
                }
                // A model directory, runnable as the run's are prompted.
                None => {
                    checkpoint::save(&dir, &policy, &self.tokenizer)?;
                    checkpoint::save_prompt(&dir, &self.config.model.prompt())?;
                }
            }
            // Resuming checks it as it checks a checkpoint.
            seal(&dir)?;
            self.reference = Some(self.load_reference()?);
        }
        Ok(())
    }

    /// The policy at the start of RL, as `start_rl` saved it, computing
    /// at the run's precision. A LoRA run's is its frozen weights (shared
    /// with the policy, not copied) with the adapters as they were then.
    fn load_reference(&self) -> Result<Llama<B::InnerBackend>> {
        let path = self.dir.join(REFERENCE);
        let loaded = checkpoint::adapters(&path).and_then(|adapters| match adapters {
            Some(saved) => saved.apply(self.model.valid()),
            None => Llama::load(&path, &self.device)?.with_precision(self.config.model.precision),
        });
        loaded.with_context(|| format!("loading the reference policy {}", path.display()))
    }

    fn rl_step(&mut self, rl_step: usize) -> Result<Metrics> {
        let config = self.config.rl.clone();
        let step = self.position.step;
        let harvest = self.harvest(step)?;
        let scorable: Vec<Scorable> = harvest
            .groups
            .iter()
            .flat_map(|group| group.scorable(config.mask_overlong))
            .collect();
        let advantages = advantage::advantages(&scorable, config.scaling, config.eps);
        if config.save_rollouts {
            let saved = self.episodes_path("rl", step + 1);
            scores::write(
                &scores::beside(&saved),
                &harvest.scores(&advantages, config.rollouts),
            )?;
        }
        let mut batch = scored_batch(&harvest.groups, &advantages, config.rollouts);
        if let Some(reference) = &self.reference {
            objective::reference_logprobs(
                reference,
                &mut batch,
                config.temperature,
                self.config.optim.micro_batch,
            );
        }
        let valid_advantages: Vec<f64> = advantages.iter().flatten().copied().collect();
        let lr = self.config.optim.lr_at(config.lr, rl_step, config.steps);
        let train_started = Instant::now();
        // A step whose advantages are all 0 (every kept rollout as good as
        // its task's others, or none kept) has no gradient: it updates
        // nothing, and its metrics carry no loss or gradient norm.
        let trained = valid_advantages.iter().any(|advantage| *advantage != 0.0);
        let update = trained
            .then(|| self.update(&batch, lr))
            .transpose()
            .with_context(|| format!("step {} (RL)", step + 1))?;
        let stats = update.map(|(stats, _)| stats);
        let train_seconds = train_started.elapsed().as_secs_f64();
        let rollouts = harvest.outcomes.len().max(1) as f64;
        let share = |counted: fn(&Outcome) -> bool| {
            harvest
                .outcomes
                .iter()
                .filter(|outcome| counted(outcome))
                .count() as f64
                / rollouts
        };
        let rollout_seconds = harvest.seconds.max(1e-9);
        Ok(Metrics {
            kind: "rl".into(),
            step: step + 1,
            lr: Some(lr),
            loss: stats.map(|stats| stats.loss),
            tokens: Some(stats.map_or(0, |stats| stats.tokens)),
            train_tokens_per_s: stats.map(|stats| stats.tokens as f64 / train_seconds.max(1e-9)),
            grad_norm: update.map(|(_, norm)| norm),
            reward: Some(
                harvest
                    .outcomes
                    .iter()
                    .map(|outcome| outcome.reward)
                    .sum::<f64>()
                    / rollouts,
            ),
            success: Some(share(|outcome| outcome.reward >= 1.0)),
            masked_share: Some(share(|outcome| outcome.masked)),
            truncated_share: Some(share(|outcome| outcome.truncated)),
            context_full_share: Some(share(|outcome| outcome.context_full)),
            tasks_drawn: Some(harvest.drawn),
            tasks_kept: Some(harvest.groups.len()),
            advantage_mean: Some(advantage::mean(&valid_advantages)),
            advantage_std: Some(advantage::std(&valid_advantages)),
            clipped_share: stats.map(|stats| stats.clipped),
            kl: stats.filter(|_| config.kl > 0.0).map(|stats| stats.kl),
            logprob_gap: stats
                .filter(|stats| stats.tokens > 0)
                .map(|stats| stats.logprob_gap),
            entropy: Some(harvest.sampled_nll / harvest.sampled_tokens.max(1) as f64),
            sampled_tokens: Some(harvest.sampled_tokens),
            rollout_tokens_per_s: Some(harvest.sampled_tokens as f64 / rollout_seconds),
            episodes_per_s: Some(harvest.outcomes.len() as f64 / rollout_seconds),
            seconds: Some(harvest.seconds + train_seconds),
            ..Metrics::default()
        })
    }

    /// The rollouts of step `step`: rounds of task draws, all of a round's
    /// rollouts played as one batch, until dynamic sampling has kept
    /// `rl.tasks_per_step` tasks or the step's draws run out.
    fn harvest(&mut self, step: usize) -> Result<Harvest> {
        let config = &self.config.rl;
        let started = Instant::now();
        let policy = self.model.valid().fold_adapters();
        let play = Play::new(
            &policy,
            self.counterparts.user_model(),
            Script {
                policy: POLICY,
                tokenizer: &self.tokenizer,
                sampling: Sampling {
                    temperature: config.temperature,
                    top_p: config.top_p,
                    max_tokens: config.max_new_tokens,
                    seed: 0,
                },
                max_turns: self.config.tasks.max_turns,
                user_instability: config.user_instability,
                users: self.counterparts.users(),
                judge: self.counterparts.judge(config.masking),
                nl_judge: None,
            },
        );
        let mut harvest = Harvest::default();
        let mut saved = match config.save_rollouts {
            true => Some(self.episodes_file("rl", step + 1)?),
            false => None,
        };
        let budget = config.tasks_per_step * config.max_draw_factor;
        while harvest.groups.len() < config.tasks_per_step && harvest.drawn < budget {
            let wanted = (config.tasks_per_step - harvest.groups.len()).min(budget - harvest.drawn);
            let draws = self.position.drawn..self.position.drawn + wanted;
            let tasks: Vec<(usize, usize)> = draws.clone().map(|at| self.queue.at(at)).collect();
            self.position.drawn += wanted;
            harvest.drawn += wanted;
            let jobs: Vec<Job<'_>> = tasks
                .iter()
                .zip(draws)
                .flat_map(|(&(env, task), draw)| {
                    let workload = &self.workloads[env];
                    let prepared = workload.task(task);
                    // Seeded by the draw's place in the queue, which no
                    // other draw has: two draws of one task in a step (a
                    // queue shorter than the step's draws wraps) play apart.
                    let draw_seed =
                        self.config.seed ^ (draw as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    (0..config.rollouts).map(move |trial| Job {
                        env: workload.env,
                        style: &workload.style,
                        task: prepared,
                        seed: episode_seed(draw_seed, &prepared.task.id, trial as u64),
                    })
                })
                .collect();
            let mut rollouts = play.episodes(&jobs)?.into_iter();
            for (env, task) in tasks {
                let group = Group {
                    env,
                    task,
                    rollouts: rollouts.by_ref().take(config.rollouts).collect(),
                };
                let informative =
                    !forge_rl::sampling::informative_tasks(&group.scorable(config.mask_overlong))
                        .is_empty();
                let kept =
                    (informative || !config.dynamic_sampling).then_some(harvest.groups.len());
                for (slot, rollout) in group.rollouts.iter().enumerate() {
                    if let Some(file) = &mut saved {
                        file.write(&rollout.record)?;
                    }
                    harvest.count(rollout, kept.map(|group| (group, slot)));
                }
                if kept.is_some() {
                    harvest.groups.push(group);
                }
            }
        }
        harvest.seconds = started.elapsed().as_secs_f64();
        Ok(harvest)
    }

    /// `rl.updates_per_batch` updates of the policy on `batch` at `lr`: the
    /// first update's loss statistics and gradient norm, with the tokens of
    /// all the updates and the clipped share of the last.
    fn update(&mut self, batch: &[Scored], lr: f64) -> Result<(LossStats, f64)> {
        let config = &self.config.rl;
        let surrogate = Surrogate {
            clip: config.clip,
            kl: config.kl,
            temperature: config.temperature,
        };
        let (mut stats, mut grad_norm) = (LossStats::default(), 0.0);
        for update in 0..config.updates_per_batch {
            let (grads, pass) = objective::surrogate_gradients(
                &self.model,
                batch,
                surrogate,
                self.config.optim.passes(),
            );
            let norm = self
                .apply(lr, grads)
                .with_context(|| format!("update {} (loss {})", update + 1, pass.loss))?;
            if update == 0 {
                grad_norm = norm;
                stats = pass;
            } else {
                stats.tokens += pass.tokens;
                stats.clipped = pass.clipped;
            }
        }
        Ok((stats, grad_norm))
    }

    /// A new `episodes/<kind>-step-NNNNNN.jsonl`, replacing the file (and
    /// the scores beside it) that an interrupted try at the step left.
    fn episodes_file(&self, kind: &str, step: usize) -> Result<TrajectoryWriter> {
        let path = self.episodes_path(kind, step);
        std::fs::create_dir_all(self.dir.join(EPISODES))?;
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(scores::beside(&path));
        TrajectoryWriter::create(&path)
    }

    fn episodes_path(&self, kind: &str, step: usize) -> PathBuf {
        run_dir::episodes_path(&self.dir, kind, step)
    }

    /// One AdamW step on `grads`, clipped to `optim.grad_clip`; returns
    /// their norm before clipping. Gradients that are no longer numbers
    /// (the run diverged) are refused, not applied: they would turn every
    /// weight to NaN, and the run would go on learning nothing until an
    /// evaluation failed on it.
    fn apply(&mut self, lr: f64, mut grads: GradientsParams) -> Result<f64> {
        let norm = optimizer::grad_norm(&self.model, &grads);
        if !norm.is_finite() {
            bail!(
                "the gradient's norm is {norm}: training diverged, and this update was not \
                 applied (the latest checkpoint, if there is one, holds an earlier step's \
                 weights). A lower learning rate \
                 (`sft.lr`, `rl.lr`) or clipping (`optim.grad_clip`) in a new run may keep it \
                 from diverging"
            );
        }
        let max_norm = f64::from(self.config.optim.grad_clip);
        optimizer::clip_to_norm(&self.model, &mut grads, norm, max_norm);
        // Cloning a module shares its tensors; the step returns the updated one.
        self.model = self.optimizer.step(lr, self.model.clone(), grads);
        Ok(norm)
    }

    /// Whether the config evaluates the policy once `step` steps are done:
    /// at the start (`eval.at_start`), at the end of each stage, and every
    /// `eval.every` steps of one.
    fn evaluation_due(&self, step: usize) -> bool {
        let (sft_steps, every_steps) = (self.config.sft.steps, self.config.eval.every);
        match step {
            0 => self.config.eval.at_start,
            _ if step == sft_steps || step == self.total_steps() => true,
            _ if step < sft_steps => every(step, every_steps),
            _ => every(step - sft_steps, every_steps),
        }
    }

    /// Whether the run's metrics hold an evaluation at `step`.
    fn evaluated_at(&self, step: usize) -> Result<bool> {
        Ok(read_metrics(&self.dir.join(METRICS))?
            .iter()
            .any(|metrics| metrics.kind == "eval" && metrics.step == step))
    }

    /// Greedy episodes of every held-out task; logs the success share. With
    /// none held out (`tasks.heldout_fraction = 0`), there is nothing to log.
    /// `false` when `limits`' interrupt stopped it first: nothing of it is
    /// kept.
    fn evaluate(&mut self, observer: &mut dyn Observer, limits: Limits) -> Result<bool> {
        if self.heldout_tasks() == 0 {
            return Ok(true);
        }
        observer.evaluating(self.heldout_tasks());
        let started = Instant::now();
        let policy = self.model.valid().fold_adapters();
        let play = Play::new(
            &policy,
            None,
            Script {
                policy: POLICY,
                tokenizer: &self.tokenizer,
                sampling: Sampling {
                    max_tokens: self.config.eval.max_new_tokens,
                    ..Sampling::greedy()
                },
                max_turns: self.config.tasks.max_turns,
                user_instability: 0.0,
                users: Users::Scripted,
                judge: None,
                nl_judge: None,
            },
        )
        .stopped_by(limits.interrupt);
        let jobs: Vec<Job<'_>> = self
            .workloads
            .iter()
            .flat_map(|workload| {
                workload.heldout.iter().map(|&task| Job {
                    env: workload.env,
                    style: &workload.style,
                    task: workload.task(task),
                    seed: self.config.seed,
                })
            })
            .collect();
        let records: Vec<_> = match play.episodes(&jobs) {
            Ok(rollouts) => rollouts.into_iter().map(|rollout| rollout.record).collect(),
            Err(err) if err.is::<Interrupted>() => {
                let step = self.position.step;
                // One a time limit added is not made again.
                let again = match self.evaluation_due(step) {
                    true => ": a resumed run makes it",
                    false => "",
                };
                observer.notice(&format!(
                    "the evaluation at step {step} was stopped unfinished{again}"
                ));
                return Ok(false);
            }
            Err(err) => return Err(err),
        };
        // (successes, episodes), over all and by environment.
        let mut overall = (0, 0);
        let mut by_environment: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for record in &records {
            let success = usize::from(record.verdict.reward >= 1.0);
            let counts = by_environment
                .entry(record.environment.name.as_str())
                .or_default();
            for (successes, episodes) in [counts, &mut overall] {
                *successes += success;
                *episodes += 1;
            }
        }
        let share = |(successes, episodes): (usize, usize)| successes as f64 / episodes as f64;
        // The episodes themselves, for reading what the policy does (and
        // `forge replay`): one file per evaluation.
        let mut file = self.episodes_file("eval", self.position.step)?;
        for record in &records {
            file.write(record)?;
        }
        let took = started.elapsed();
        let metrics = Metrics {
            kind: "eval".into(),
            step: self.position.step,
            heldout_success: Some(share(overall)),
            heldout_success_by_environment: Some(
                by_environment
                    .into_iter()
                    .map(|(name, counts)| (name.to_owned(), share(counts)))
                    .collect(),
            ),
            seconds: Some(took.as_secs_f64()),
            ..Metrics::default()
        };
        self.evaluation_time = Some(took);
        self.record(&metrics, observer)?;
        Ok(true)
    }

    fn record(&self, metrics: &Metrics, observer: &mut dyn Observer) -> Result<()> {
        metrics::append(&self.dir.join(METRICS), metrics)?;
        observer.metrics(metrics);
        Ok(())
    }

    /// The model, its tokenizer and how it is prompted, loadable by `--policy model`.
    fn save_model(&self, dir: &Path) -> Result<()> {
        let model = self.model.valid();
        checkpoint::save(dir, &model, &self.tokenizer)?;
        if let Some(base) = &self.lora_base {
            checkpoint::save_adapter(dir, &model, &self.config.model.init, base)?;
        }
        checkpoint::save_prompt(dir, &self.config.model.prompt())
    }

    fn save_checkpoint(&mut self, observer: &mut dyn Observer) -> Result<()> {
        if self.checkpointed == Some(self.position.step) {
            return Ok(());
        }
        let name = checkpoint_name(self.position.step);
        let dir = self.dir.join(CHECKPOINTS).join(&name);
        self.save_model(&dir)?;
        optimizer::save(&self.optimizer, &dir.join(OPTIMIZER))?;
        save_config(&dir, &self.config)?;
        checkpoint::write_atomically(&dir.join(POSITION), &serde_json::to_vec(&self.position)?)?;
        seal(&dir)?;
        // Only now does the checkpoint become the one to resume from.
        checkpoint::write_atomically(&self.dir.join(CHECKPOINTS).join(LATEST), name.as_bytes())?;
        self.checkpointed = Some(self.position.step);
        observer.checkpoint(&dir);
        Ok(())
    }

    /// Puts back what a checkpoint holds beyond the weights: the optimizer
    /// state, the reference policy, and the metrics up to it.
    fn restore(&mut self, checkpoint: &Path) -> Result<()> {
        let sft_steps = self.config.sft.steps;
        // At a stage boundary the next stage starts with a fresh optimizer.
        if self.position.step != sft_steps || sft_steps == 0 {
            self.optimizer = optimizer::load(
                &self.config.optim,
                &self.model,
                &checkpoint.join(OPTIMIZER),
                &self.device,
            )?;
        }
        if self.position.step > sft_steps && self.config.rl.kl > 0.0 {
            let sealed = check_seal(&self.dir.join(REFERENCE), Sealed::Reference)?;
            self.notices.extend(sealed);
            self.reference = Some(self.load_reference()?);
        }
        let kept = metrics::keep_until(&self.dir.join(METRICS), self.position.step)?;
        self.notices.extend(kept.notice);
        // What a time limit judges the run's next steps by, as when it stopped.
        let took = |kind: &str| {
            kept.records
                .iter()
                .rev()
                .find(|metrics| metrics.kind == kind)
                .and_then(|metrics| Duration::try_from_secs_f64(metrics.seconds?).ok())
        };
        self.evaluation_time = took("eval");
        self.step_times = StepTimes {
            sft: took("sft"),
            rl: took("rl"),
        };
        Ok(())
    }
}

/// `step` is a multiple of a positive `period` (0 means never).
fn every(step: usize, period: usize) -> bool {
    period > 0 && step.is_multiple_of(period)
}

/// The rollouts of one task drawn in an RL step.
struct Group {
    /// The environment's index among the run's, and the task's among its.
    env: usize,
    task: usize,
    rollouts: Vec<Rollout>,
}

impl Group {
    /// What the advantages are computed from: rollouts whose user the
    /// judge flags are masked, and with `mask_overlong` those that ran long.
    fn scorable(&self, mask_overlong: bool) -> Vec<Scorable> {
        self.rollouts
            .iter()
            .map(|rollout| Scorable {
                environment: self.env.to_string(),
                task: self.task.to_string(),
                reward: rollout.reward(),
                masked: rollout.masked || (mask_overlong && rollout.overlong()),
            })
            .collect()
    }
}

/// The sequences of the rollouts of `groups` (`rollouts` a task), each with
/// its rollout's advantage (in `advantages`, in the same order).
fn scored_batch(groups: &[Group], advantages: &[Option<f64>], rollouts: usize) -> Vec<Scored> {
    let mut batch = Vec::new();
    for (group, advantages) in groups.iter().zip(advantages.chunks(rollouts)) {
        for (rollout, advantage) in group.rollouts.iter().zip(advantages) {
            for sequence in Sequence::from_turns(&rollout.turns) {
                batch.push(Scored {
                    sequence,
                    advantage: *advantage,
                    reference: None,
                });
            }
        }
    }
    batch
}

/// A step's rollouts: the tasks kept for training, and what the step's
/// metrics count of every rollout played.
#[derive(Default)]
struct Harvest {
    /// The tasks kept.
    groups: Vec<Group>,
    /// Tasks drawn, kept or not.
    drawn: usize,
    outcomes: Vec<Outcome>,
    sampled_tokens: usize,
    /// The sampled tokens' negative log-probs, summed.
    sampled_nll: f64,
    /// The time the rollouts took.
    seconds: f64,
}

/// What a step's metrics count of one rollout, and where it went.
struct Outcome {
    task_id: String,
    reward: f64,
    masked: bool,
    /// A turn was cut before the model ended it.
    truncated: bool,
    /// The dialogue outgrew the model's context.
    context_full: bool,
    /// Its group's place among the kept ones and its own in the group;
    /// none when dynamic sampling dropped its task.
    kept: Option<(usize, usize)>,
}

impl Harvest {
    fn count(&mut self, rollout: &Rollout, kept: Option<(usize, usize)>) {
        self.outcomes.push(Outcome {
            task_id: rollout.record.task_id.clone(),
            reward: rollout.reward(),
            masked: rollout.masked,
            truncated: rollout.truncated(),
            context_full: rollout.context_full(),
            kept,
        });
        self.sampled_tokens += rollout.sampled_tokens();
        self.sampled_nll -= rollout
            .turns
            .iter()
            .flat_map(|turn| &turn.logprobs)
            .map(|&logprob| f64::from(logprob))
            .sum::<f64>();
    }

    /// Each rollout's part in the update, in the order they were played:
    /// `advantages` are the kept groups' (`rollouts` a group, in order).
    fn scores(&self, advantages: &[Option<f64>], rollouts: usize) -> Vec<scores::RolloutScore> {
        self.outcomes
            .iter()
            .map(|outcome| scores::RolloutScore {
                task_id: outcome.task_id.clone(),
                reward: outcome.reward,
                masked: outcome.masked,
                overlong: outcome.truncated || outcome.context_full,
                kept: outcome.kept.is_some(),
                advantage: outcome
                    .kept
                    .and_then(|(group, slot)| advantages[group * rollouts + slot]),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A rollout of `reward` that ends as `termination`, its one turn
    /// ended by the model (`stopped`) or cut.
    fn rollout(reward: f64, stopped: bool, termination: &str) -> Rollout {
        let record = json!({
            "format": forge_runtime::trajectory::FORMAT,
            "environment": {"name": "env", "content_hash": "0"},
            "task_id": "task", "policy": POLICY, "seed": 0, "max_turns": 4,
            "messages": [], "steps": [], "termination": termination,
            "final_state_sha256": "0", "reward": reward, "state_match": reward == 1.0,
            "outputs": [], "partial_credit": reward,
            "policy_trace": {"turns": [{"stopped": stopped}]},
        });
        Rollout {
            record: serde_json::from_value(record).unwrap(),
            turns: Vec::new(),
            masked: false,
        }
    }

    #[test]
    fn overlong_rollouts_are_masked_only_when_asked() {
        let group = Group {
            env: 0,
            task: 0,
            rollouts: vec![
                rollout(1.0, true, "user_stop"),
                rollout(0.0, false, "user_stop"),
                rollout(0.0, true, "context_full"),
            ],
        };
        let masked = |mask_overlong| -> Vec<bool> {
            let scorable = group.scorable(mask_overlong);
            scorable.iter().map(|rollout| rollout.masked).collect()
        };
        assert_eq!(masked(false), [false, false, false]);
        assert_eq!(masked(true), [false, true, true]);
        // Its only failures cut short, the task teaches nothing: dynamic
        // sampling draws another.
        let informative = |mask_overlong| {
            !forge_rl::sampling::informative_tasks(&group.scorable(mask_overlong)).is_empty()
        };
        assert!(informative(false));
        assert!(!informative(true));
    }
}
