//! Every hyper-parameter of a training run, in one TOML file with documented
//! defaults (`forge train --print-config` shows them; the run directory keeps
//! the one used).

use crate::chat::{PromptSettings, Thinking, ToolListing};
use crate::config::LlamaConfig;
use crate::llama::{LoadError, Precision};
use crate::lora::Lora;
use crate::train::objective::Passes;
use forge_model::tokenizer::ModelTokenizer;
use forge_rl::advantage::Scaling;
use serde::{Deserialize, Serialize};

mod read;

pub use read::KeyError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Everything random in the run (initial weights, task order, sampling,
    /// the simulated users) derives from this.
    pub seed: u64,
    pub model: ModelSection,
    /// LoRA: train low-rank adapters of the projections, the weights frozen
    /// (`rank = 0`, the default: train every weight).
    pub lora: Lora,
    pub tasks: TasksSection,
    pub sft: SftSection,
    pub rl: RlSection,
    pub user: UserSection,
    pub judge: JudgeSection,
    pub optim: OptimSection,
    pub eval: EvalSection,
    /// Save a checkpoint every this many steps (and at the end of each
    /// stage; 0: only there).
    pub checkpoint_every: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            model: ModelSection::default(),
            lora: Lora::default(),
            tasks: TasksSection::default(),
            sft: SftSection::default(),
            rl: RlSection::default(),
            user: UserSection::default(),
            judge: JudgeSection::default(),
            optim: OptimSection::default(),
            eval: EvalSection::default(),
            checkpoint_every: 50,
        }
    }
}

/// The most parameters `init = "tiny"` makes: training that many in f32
/// takes about 16 GB (weights, gradients and the optimizer's two moments).
const TINY_PARAMETERS_MOST: u64 = 1_000_000_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelSection {
    /// `tiny` (a small random model with a byte-level tokenizer, for CPU
    /// runs), a fetched model's name (`smollm2-135m`), a GGUF file or a
    /// checkpoint directory.
    pub init: String,
    /// With `init = "tiny"`: its width, depth and heads.
    pub tiny_hidden: usize,
    pub tiny_layers: usize,
    pub tiny_heads: usize,
    pub tiny_kv_heads: usize,
    /// With `init = "tiny"`: the most tokens it reads, prompt and reply
    /// together (an episode whose dialogue outgrows it ends there); unset,
    /// any number.
    pub tiny_context: Option<usize>,
    /// The precision of the products with the weights (forward and backward,
    /// rollouts included): `f32`, or `bf16` — mixed precision, the weights
    /// and optimizer in f32; needs `--device cuda`.
    pub precision: Precision,
    /// The system prompt, empty for the default agent instructions of each
    /// environment's service.
    pub system: String,
    /// How the system prompt lists the tools: `schemas`, `compact`, or
    /// `none` (a model trained from scratch learns them from the data).
    pub tools: ToolListing,
    /// Whether a thinking model (Qwen3) reasons in `<think>…</think>` before
    /// each reply: `on`, or `off` (an empty one opens each reply, as Qwen3's
    /// `enable_thinking=False` does).
    pub thinking: Thinking,
}

impl Default for ModelSection {
    fn default() -> Self {
        Self {
            init: "smollm2-135m".into(),
            tiny_hidden: 64,
            tiny_layers: 2,
            tiny_heads: 4,
            tiny_kv_heads: 2,
            tiny_context: None,
            precision: Precision::F32,
            system: String::new(),
            tools: ToolListing::default(),
            thinking: Thinking::default(),
        }
    }
}

impl ModelSection {
    /// How the model is prompted, as its checkpoints record it.
    pub fn prompt(&self) -> PromptSettings {
        PromptSettings {
            system: self.system.clone(),
            tools: self.tools,
            thinking: self.thinking,
        }
    }

    /// The shape of the tiny model (`init = "tiny"`) for a tokenizer of
    /// `vocab` tokens, if the decoder can run it and it is small enough to
    /// be made from nothing: sizes typed a few digits too long would build
    /// for minutes and then run out of memory.
    pub fn tiny_shape(&self, vocab: usize) -> Result<LlamaConfig, LoadError> {
        let shape = LlamaConfig {
            hidden: self.tiny_hidden,
            layers: self.tiny_layers,
            heads: self.tiny_heads,
            kv_heads: self.tiny_kv_heads,
            ffn: self.tiny_hidden.saturating_mul(3),
            context: self.tiny_context,
            ..LlamaConfig::tiny(vocab)
        }
        .checked()?;
        let parameters = shape.parameters();
        if parameters > TINY_PARAMETERS_MOST {
            return Err(LoadError::Unsupported(format!(
                "that shape has {} million parameters, more than the {} million a tiny model may \
                 have (SmolLM2-135M has 135): smaller sizes, or a pretrained model as `init`",
                parameters / 1_000_000,
                TINY_PARAMETERS_MOST / 1_000_000
            )));
        }
        Ok(shape)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TasksSection {
    /// The share of each environment's tasks held out for evaluation (never
    /// trained on, not even by SFT), chosen by a seeded shuffle; unused with
    /// `heldout_split`.
    pub heldout_fraction: f64,
    /// Which tasks of the shuffle may be held out.
    pub heldout: HeldOut,
    /// The environments' split to train on (a benchmark's `train`); empty:
    /// all their tasks. Every environment must have it.
    pub train_split: String,
    /// The environments' split to hold out (a benchmark's `test`), in place
    /// of a `heldout_fraction` of the tasks; empty: none. Every environment
    /// must have it.
    pub heldout_split: String,
    /// Most agent actions per episode.
    pub max_turns: usize,
}

/// Which tasks may be held out for evaluation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeldOut {
    /// Any: the first tasks of the shuffle.
    #[default]
    Random,
    /// Only tasks whose gold tools and argument values all occur in training
    /// tasks too: held-out tasks are new combinations of what was trained on
    /// (for models trained from scratch, which cannot produce a token they
    /// never saw as output).
    Covered,
}

impl Default for TasksSection {
    fn default() -> Self {
        Self {
            heldout_fraction: 0.25,
            heldout: HeldOut::Random,
            train_split: String::new(),
            heldout_split: String::new(),
            max_turns: 8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftSection {
    /// Cold-start steps on gold trajectories of the training tasks (0: none).
    pub steps: usize,
    /// Assistant turns per step.
    pub batch: usize,
    /// AdamW's peak learning rate for SFT (see `optim` for its schedule).
    pub lr: f64,
    /// The share of each environment's training tasks whose gold episodes
    /// SFT learns from (the first of the seeded shuffle); RL draws from all
    /// of them. Below 1, RL meets tasks SFT never showed — the setting in
    /// which gold trajectories are scarce and verifiable rewards are not,
    /// where what RL adds to SFT can be measured.
    pub task_fraction: f64,
}

impl Default for SftSection {
    fn default() -> Self {
        Self {
            steps: 100,
            batch: 16,
            lr: 1e-4,
            task_fraction: 1.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RlSection {
    /// ERPO steps (0: none).
    pub steps: usize,
    /// Tasks per step, after dynamic sampling.
    pub tasks_per_step: usize,
    /// Rollouts per task (the group).
    pub rollouts: usize,
    /// At most this many times `tasks_per_step` tasks are rolled out per
    /// step while refilling the batch with informative tasks.
    pub max_draw_factor: usize,
    /// Sampling temperature of the rollouts (held-out evaluation is greedy).
    pub temperature: f32,
    /// Nucleus sampling: each token is drawn from the smallest set of the
    /// likeliest tokens whose probability reaches `top_p` (1: all of them).
    /// Below 1 the updates are no longer exactly on-policy: the clipped
    /// ratio compares the policy's whole distributions, while the tokens
    /// came from the renormalised nucleus (as in most RL libraries).
    pub top_p: f32,
    /// Most tokens per policy turn.
    pub max_new_tokens: usize,
    /// Which standard deviation scales advantages: `erpo` (pooled over the
    /// environment), `grpo` (the task's group) or `batch`.
    pub scaling: Scaling,
    /// Added to the standard deviation.
    pub eps: f64,
    /// PPO clip range of the token ratio.
    pub clip: f64,
    /// Weight of the KL penalty to the policy at the start of RL (0: off;
    /// then no reference model is kept).
    pub kl: f64,
    /// Gradient steps on each batch of rollouts (the ratio moves from 1
    /// after the first, which is what the clip bounds).
    pub updates_per_batch: usize,
    /// Drop tasks whose valid rollouts all earn the same reward (all succeed
    /// or all fail), refilling the batch from the queue.
    pub dynamic_sampling: bool,
    /// Drop rollouts in which the simulated user gave wrong or missing
    /// information (MEU masking) from advantages and loss.
    pub masking: bool,
    /// Drop rollouts that ran long — a turn cut at `max_new_tokens` or the
    /// context's end, or a dialogue that outgrew the context — from
    /// advantages and loss (DAPO's overlong filtering): their failure says
    /// the reply was cut, not that it was wrong.
    pub mask_overlong: bool,
    /// Probability that the simulated user misstates or withholds a fact
    /// (a model user is given the instruction with the fact spoiled).
    pub user_instability: f64,
    /// Write each step's rollouts to `episodes/rl-step-N.jsonl` (replayable
    /// with `forge replay`), to read what the policy and the user did.
    pub save_rollouts: bool,
    /// AdamW's peak learning rate for RL, whose fresh optimizer starts at
    /// the end of SFT (see `optim` for its schedule).
    pub lr: f64,
}

impl Default for RlSection {
    fn default() -> Self {
        Self {
            steps: 100,
            tasks_per_step: 32,
            rollouts: 8,
            max_draw_factor: 3,
            temperature: 1.0,
            top_p: 1.0,
            max_new_tokens: 256,
            scaling: Scaling::Erpo,
            eps: 1e-6,
            clip: 0.2,
            kl: 0.0,
            updates_per_batch: 2,
            dynamic_sampling: true,
            masking: true,
            mask_overlong: false,
            user_instability: 0.0,
            save_rollouts: false,
            lr: 1e-5,
        }
    }
}

/// Who plays the simulated user in RL rollouts. Held-out evaluation always
/// uses each task's scripted user, so that it measures the policy alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UserSection {
    /// `scripted` (each task's scripted user), `model` (a local model,
    /// frozen, named by `model`: `tiny`, a fetched model's name, a GGUF file
    /// or a checkpoint directory; its turns are decoded in batches beside the
    /// policy's) or `openai` (the model `model` at the OpenAI-compatible
    /// endpoint `base_url`).
    pub kind: UserKind,
    pub model: String,
    pub base_url: String,
    /// The environment variable holding the endpoint's API key.
    pub api_key_env: String,
    /// A model user's sampling temperature (local or remote).
    pub temperature: f64,
    /// Most tokens per message of a local model user.
    pub max_new_tokens: usize,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserKind {
    #[default]
    Scripted,
    Model,
    Openai,
}

impl Default for UserSection {
    fn default() -> Self {
        Self {
            kind: UserKind::Scripted,
            model: String::new(),
            base_url: String::new(),
            api_key_env: "OPENAI_API_KEY".into(),
            temperature: 0.7,
            max_new_tokens: 96,
        }
    }
}

/// Who decides that a rollout's user gave wrong or missing information
/// (with `rl.masking`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JudgeSection {
    /// `rule`: a fact the task's instruction states that no user message
    /// contains (deterministic; exact for scripted users); `openai`: the
    /// model `model` at the OpenAI-compatible endpoint `base_url` reads the
    /// dialogue (for model users, who paraphrase).
    pub kind: JudgeKind,
    pub model: String,
    pub base_url: String,
    /// The environment variable holding the endpoint's API key.
    pub api_key_env: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JudgeKind {
    #[default]
    Rule,
    Openai,
}

impl Default for JudgeSection {
    fn default() -> Self {
        Self {
            kind: JudgeKind::Rule,
            model: String::new(),
            base_url: String::new(),
            api_key_env: "OPENAI_API_KEY".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OptimSection {
    /// AdamW's decay rates of its running means of the gradient and of its
    /// square.
    pub beta1: f32,
    pub beta2: f32,
    /// Added to the root of AdamW's running mean of the squared gradient
    /// before it divides: PyTorch's 1e-8. Clipped to norm 1 over 135M
    /// weights, a gradient's elements are around 1e-5 and smaller (RL's
    /// much smaller); an epsilon as large as they are (burn's default,
    /// 1e-5) would outweigh the root and shrink every step well below the
    /// learning rate.
    pub epsilon: f32,
    /// AdamW's decoupled weight decay (each step shrinks every weight by
    /// lr × `weight_decay` of itself).
    pub weight_decay: f32,
    /// The whole gradient is scaled to at most this L2 norm (0: off).
    pub grad_clip: f32,
    /// Linear warm-up steps at the start of each stage.
    pub warmup_steps: usize,
    /// After warm-up: `constant`, or `cosine` decay to `min_lr_ratio` × lr
    /// at the end of the stage.
    pub schedule: Schedule,
    pub min_lr_ratio: f64,
    /// Sequences per forward/backward pass; gradients accumulate over the
    /// micro-batches of a step (lower it to fit memory). Two by default: a
    /// pass of two SmolLM2 sequences of the 2,800 tokens the synthesized
    /// tasks reach with tool schemas in the prompt peaks at 16 GB (on the
    /// CPU, weights and AdamW's state included).
    pub micro_batch: usize,
    /// `kept`: the backward pass uses the activations the forward pass
    /// kept. `recomputed`: the forward pass keeps each decoder block's
    /// input alone and the backward pass runs each block again, so a pass
    /// holds one block's activations at a time (a SmolLM2 step on a
    /// sequence of 2,048 tokens takes 0.43 GB above the weights and
    /// optimizer state instead of 4.3 GB, on the CPU) for about 20% more
    /// time: the way to longer sequences or larger micro-batches.
    pub activations: Activations,
}

impl Default for OptimSection {
    fn default() -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            weight_decay: 0.0,
            grad_clip: 1.0,
            warmup_steps: 5,
            schedule: Schedule::Cosine,
            min_lr_ratio: 0.1,
            micro_batch: 2,
            activations: Activations::Kept,
        }
    }
}

/// What a training pass keeps for its backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activations {
    /// Every activation of the forward pass.
    Kept,
    /// Each decoder block's input; the rest is recomputed.
    Recomputed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    Constant,
    Cosine,
}

impl OptimSection {
    /// How a step's sequences go through the model.
    pub fn passes(&self) -> Passes {
        Passes {
            micro_batch: self.micro_batch,
            activations: self.activations,
        }
    }

    /// The learning rate at `step` (from 0) of a stage of `steps` steps at
    /// peak `lr`: its last step runs at the cosine's floor.
    pub fn lr_at(&self, lr: f64, step: usize, steps: usize) -> f64 {
        if step < self.warmup_steps {
            return lr * (step + 1) as f64 / self.warmup_steps as f64;
        }
        match self.schedule {
            Schedule::Constant => lr,
            Schedule::Cosine => {
                let span = steps.saturating_sub(self.warmup_steps + 1).max(1) as f64;
                let progress = ((step - self.warmup_steps) as f64 / span).min(1.0);
                let floor = lr * self.min_lr_ratio;
                floor + (lr - floor) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvalSection {
    /// Evaluate on the held-out tasks every this many steps of each stage
    /// (0: only before training, after SFT and at the end).
    pub every: usize,
    /// Most tokens per policy turn (decoding is greedy).
    pub max_new_tokens: usize,
    /// Evaluate before the first step: the baseline. Runs that start from a
    /// model evaluated already (RL from an SFT run's model) can skip it.
    pub at_start: bool,
}

impl Default for EvalSection {
    fn default() -> Self {
        Self {
            every: 25,
            max_new_tokens: 256,
            at_start: true,
        }
    }
}

/// AdamW's epsilon in runs saved before `optim.epsilon` was a setting:
/// burn's default, which they trained with.
const PRE_SETTING_EPSILON: f64 = 1e-5;

impl TrainConfig {
    /// A run's saved config (its `config.toml`, or a checkpoint's copy).
    /// A setting added since the run was saved takes the value the run
    /// trained with, not today's default: resumed under the new default,
    /// it would continue otherwise than it began.
    pub fn from_saved(text: &str) -> anyhow::Result<Self> {
        let mut table: toml::Table = toml::from_str(text)?;
        if let Some(optim) = table
            .entry("optim")
            .or_insert_with(|| toml::Table::new().into())
            .as_table_mut()
        {
            optim
                .entry("epsilon")
                .or_insert(toml::Value::Float(PRE_SETTING_EPSILON));
        }
        Ok(Self::from_table(table)?)
    }

    /// The CPU smoke run: the tiny model, short prompts, minutes on two cores.
    pub fn smoke() -> Self {
        Self {
            model: ModelSection {
                init: "tiny".into(),
                system: "Lamp switchboard agent.".into(),
                // The tiny model learns the tools from the data: listed,
                // they made its prompts five times as long, and how soon
                // it learned to read the lamp depended on the seed.
                tools: ToolListing::None,
                ..ModelSection::default()
            },
            tasks: TasksSection {
                heldout_fraction: 0.25,
                heldout: HeldOut::Covered,
                max_turns: 4,
                ..TasksSection::default()
            },
            sft: SftSection {
                steps: 1200,
                batch: 8,
                lr: 3e-3,
                ..SftSection::default()
            },
            // Rollouts a little cooler than the policy, so that a tiny model
            // succeeds often enough to learn from. Twelve steps of 32
            // rollouts are too few to raise this model's success measurably
            // (its sampled reward is near 1): the stage shows ERPO's
            // machinery at work and must keep what SFT taught. A KL anchor
            // and a small rate do; at 5e-5 and above, the noise of so few
            // rollouts cost a held-out task.
            rl: RlSection {
                steps: 12,
                tasks_per_step: 4,
                rollouts: 8,
                max_new_tokens: 96,
                lr: 2e-5,
                temperature: 0.7,
                kl: 0.1,
                ..RlSection::default()
            },
            // Weight decay is what moves the tiny model from recalling the
            // training tasks to copying the argument (held-out success).
            optim: OptimSection {
                weight_decay: 0.5,
                // The tiny model's short sequences take little memory.
                micro_batch: 8,
                ..OptimSection::default()
            },
            eval: EvalSection {
                every: 100,
                max_new_tokens: 96,
                at_start: true,
            },
            checkpoint_every: 100,
            ..Self::default()
        }
    }

    /// Refuses settings that cannot run, or that would run to no purpose
    /// (a negative rate, a clip that clips everything), naming the key.
    pub fn validate(&self) -> Result<(), String> {
        let (model, tasks, sft, rl, user, optim) = (
            &self.model,
            &self.tasks,
            &self.sft,
            &self.rl,
            &self.user,
            &self.optim,
        );
        let checks: &[(bool, &str)] = &[
            (
                sft.steps > 0 || rl.steps > 0,
                "sft.steps and rl.steps are both 0: there is nothing to train \
                 (`forge eval` measures a model as it is)",
            ),
            (optim.micro_batch > 0, "optim.micro_batch must be positive"),
            (
                (0.0..1.0).contains(&tasks.heldout_fraction),
                "tasks.heldout_fraction must be in [0, 1)",
            ),
            (tasks.max_turns > 0, "tasks.max_turns must be positive"),
            (
                sft.steps == 0 || sft.batch > 0,
                "sft.batch must be positive",
            ),
            (
                sft.steps == 0 || positive(sft.lr),
                "sft.lr must be a positive number",
            ),
            (
                sft.task_fraction > 0.0 && sft.task_fraction <= 1.0,
                "sft.task_fraction must be in (0, 1]",
            ),
            (
                rl.steps == 0 || rl.tasks_per_step > 0,
                "rl.tasks_per_step must be positive",
            ),
            (
                rl.steps == 0 || rl.rollouts > 1,
                "rl.rollouts must be at least 2 (ERPO compares a task's rollouts with their mean)",
            ),
            (
                rl.steps == 0 || positive(rl.lr),
                "rl.lr must be a positive number",
            ),
            (
                rl.max_draw_factor > 0,
                "rl.max_draw_factor must be positive",
            ),
            (
                positive(f64::from(rl.temperature)),
                "rl.temperature must be a positive number (rollouts are sampled)",
            ),
            (
                rl.top_p > 0.0 && rl.top_p <= 1.0,
                "rl.top_p must be in (0, 1]",
            ),
            (rl.max_new_tokens > 0, "rl.max_new_tokens must be positive"),
            (
                positive(rl.eps),
                "rl.eps must be a positive number (it keeps a group of equal rewards from dividing by zero)",
            ),
            (positive(rl.clip), "rl.clip must be a positive number"),
            (at_least_zero(rl.kl), "rl.kl must be a number, at least 0"),
            (
                (0.0..=1.0).contains(&rl.user_instability),
                "rl.user_instability must be in [0, 1]",
            ),
            (
                rl.updates_per_batch > 0,
                "rl.updates_per_batch must be positive",
            ),
            (
                user.kind == UserKind::Scripted || !user.model.is_empty(),
                "user.model must name the model that plays the user",
            ),
            (
                user.kind != UserKind::Openai || !user.base_url.is_empty(),
                "user.base_url must name the endpoint of the model that plays the user",
            ),
            (
                user.kind != UserKind::Model
                    || (positive(user.temperature) && user.max_new_tokens > 0),
                "user.temperature and user.max_new_tokens must be positive",
            ),
            (
                user.kind != UserKind::Openai || at_least_zero(user.temperature),
                "user.temperature must be a number, at least 0",
            ),
            (
                self.judge.kind == JudgeKind::Rule || !self.judge.model.is_empty(),
                "judge.model must name the judge model",
            ),
            (
                self.judge.kind == JudgeKind::Rule || !self.judge.base_url.is_empty(),
                "judge.base_url must name the judge model's endpoint",
            ),
            (
                self.judge.kind == JudgeKind::Rule || rl.masking,
                "judge.kind = \"openai\" judges for masking: set rl.masking = true",
            ),
            (
                (0.0..1.0).contains(&optim.beta1) && (0.0..1.0).contains(&optim.beta2),
                "optim.beta1 and optim.beta2 must be in [0, 1)",
            ),
            (
                optim.epsilon.is_finite() && optim.epsilon > 0.0,
                "optim.epsilon must be a positive number",
            ),
            (
                at_least_zero(f64::from(optim.weight_decay)),
                "optim.weight_decay must be a number, at least 0",
            ),
            (
                at_least_zero(f64::from(optim.grad_clip)),
                "optim.grad_clip must be a number, at least 0 (0: off)",
            ),
            (
                (0.0..=1.0).contains(&optim.min_lr_ratio),
                "optim.min_lr_ratio must be in [0, 1]",
            ),
            (
                self.eval.max_new_tokens > 0,
                "eval.max_new_tokens must be positive",
            ),
        ];
        if let Some((_, message)) = checks.iter().find(|(ok, _)| !ok) {
            return Err((*message).to_owned());
        }
        self.lora.validate()?;
        if model.init == "tiny" {
            model
                .tiny_shape(ModelTokenizer::byte_level().vocab_size())
                .map_err(|err| format!("model.tiny_*: {err}"))?;
        }
        Ok(())
    }

    /// Settings that run, but likely not as meant: told as a run starts.
    pub fn cautions(&self) -> Vec<String> {
        let warmup = self.optim.warmup_steps;
        [("sft", self.sft.steps), ("rl", self.rl.steps)]
            .into_iter()
            .filter(|&(_, steps)| steps > 0 && warmup > steps)
            .map(|(stage, steps)| {
                format!(
                    "optim.warmup_steps = {warmup} outlasts the {stage} stage of {steps} \
                     steps: its rate never reaches {stage}.lr"
                )
            })
            .collect()
    }
}

/// A finite number above 0.
fn positive(value: f64) -> bool {
    value.is_finite() && value > 0.0
}

/// A finite number, 0 or more.
fn at_least_zero(value: f64) -> bool {
    value.is_finite() && value >= 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_then_cosine_to_the_floor() {
        let optim = OptimSection {
            warmup_steps: 2,
            ..OptimSection::default()
        };
        assert_eq!(optim.lr_at(1.0, 0, 12), 0.5);
        assert_eq!(optim.lr_at(1.0, 1, 12), 1.0);
        assert!((optim.lr_at(1.0, 2, 12) - 1.0).abs() < 1e-12);
        // Step 11 is the stage's last.
        assert!((optim.lr_at(1.0, 11, 12) - 0.1).abs() < 1e-12);
        assert!(optim.lr_at(1.0, 10, 12) > 0.1);
        assert!(optim.lr_at(1.0, 7, 12) < 1.0 && optim.lr_at(1.0, 7, 12) > 0.1);
    }

    #[test]
    fn a_saved_config_from_before_a_setting_keeps_what_the_run_trained_with() {
        let saved = toml::to_string(&TrainConfig::smoke()).unwrap();
        let mut old: toml::Table = toml::from_str(&saved).unwrap();
        old["optim"].as_table_mut().unwrap().remove("epsilon");
        let old = TrainConfig::from_saved(&toml::to_string(&old).unwrap()).unwrap();
        assert_eq!(old.optim.epsilon, 1e-5);
        assert_eq!(
            TrainConfig::from_saved(&saved).unwrap(),
            TrainConfig::smoke()
        );
    }

    #[test]
    fn settings_that_cannot_run_are_refused_naming_the_key() {
        for (overlay, key) in [
            ("[sft]\nlr = -0.001", "sft.lr"),
            ("[rl]\nlr = inf", "rl.lr"),
            ("[rl]\ntemperature = nan", "rl.temperature"),
            (
                "[user]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"http://x\"\ntemperature = -1.0",
                "user.temperature must be a number, at least 0",
            ),
            ("[rl]\nclip = -0.2", "rl.clip"),
            ("[rl]\nkl = nan", "rl.kl"),
            ("[rl]\neps = 0.0", "rl.eps"),
            ("[rl]\nmax_new_tokens = 0", "rl.max_new_tokens"),
            ("[optim]\nbeta2 = 1.5", "optim.beta1 and optim.beta2"),
            ("[optim]\nepsilon = 0.0", "optim.epsilon"),
            ("[optim]\nweight_decay = -0.1", "optim.weight_decay"),
            ("[optim]\ngrad_clip = -1.0", "optim.grad_clip"),
            ("[optim]\nmin_lr_ratio = 2.0", "optim.min_lr_ratio"),
            ("[eval]\nmax_new_tokens = 0", "eval.max_new_tokens"),
            ("[model]\ninit = \"tiny\"\ntiny_heads = 3", "model.tiny_*"),
            (
                "[model]\ninit = \"tiny\"\ntiny_kv_heads = 3",
                "model.tiny_*",
            ),
            ("[model]\ninit = \"tiny\"\ntiny_layers = 0", "model.tiny_*"),
            (
                "[model]\ninit = \"tiny\"\ntiny_layers = 100000",
                "model.tiny_*: that shape has 4928 million parameters",
            ),
        ] {
            let config: TrainConfig = toml::from_str(overlay).unwrap();
            let err = config
                .validate()
                .expect_err(&format!("{overlay} is refused"));
            assert!(err.starts_with(key), "{overlay}: {err}");
        }
        // The tiny model's shape is no concern of a run that starts from a file,
        // and a stage that does not run needs no rate.
        let config: TrainConfig =
            toml::from_str("[model]\ninit = \"smollm2-135m\"\ntiny_heads = 3").unwrap();
        assert_eq!(config.validate(), Ok(()));
        let config: TrainConfig = toml::from_str("[sft]\nsteps = 0\nlr = 0.0").unwrap();
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(TrainConfig::default().validate(), Ok(()));
        assert_eq!(TrainConfig::smoke().validate(), Ok(()));
    }

    #[test]
    fn a_warm_up_longer_than_a_stage_is_cautioned_of() {
        let config: TrainConfig =
            toml::from_str("[sft]\nsteps = 4\n[rl]\nsteps = 0\n[optim]\nwarmup_steps = 5").unwrap();
        assert_eq!(
            config.cautions(),
            [
                "optim.warmup_steps = 5 outlasts the sft stage of 4 steps: its rate never reaches \
              sft.lr"
            ]
        );
        // As long as the stage, its last step runs at the rate.
        let config: TrainConfig =
            toml::from_str("[sft]\nsteps = 5\n[rl]\nsteps = 0\n[optim]\nwarmup_steps = 5").unwrap();
        assert!(config.cautions().is_empty());
        assert_eq!(config.optim.lr_at(1.0, 4, 5), 1.0);
        assert!(TrainConfig::default().cautions().is_empty());
    }

    #[test]
    fn the_config_round_trips_through_toml_and_rejects_unknown_keys() {
        let config = TrainConfig::smoke();
        let text = toml::to_string(&config).unwrap();
        assert_eq!(toml::from_str::<TrainConfig>(&text).unwrap(), config);
        let err = toml::from_str::<TrainConfig>("[rl]\nclipp = 0.3\n").unwrap_err();
        assert!(err.to_string().contains("clipp"), "{err}");
        let partial: TrainConfig = toml::from_str("[rl]\nclip = 0.3\n").unwrap();
        assert_eq!(partial.rl.clip, 0.3);
        assert_eq!(partial.rl.rollouts, RlSection::default().rollouts);
        let recomputed: TrainConfig =
            toml::from_str("[optim]\nactivations = \"recomputed\"\n").unwrap();
        assert_eq!(
            recomputed.optim.passes().activations,
            Activations::Recomputed
        );
        let err =
            toml::from_str::<TrainConfig>("[optim]\nactivations = \"recompute\"\n").unwrap_err();
        assert!(
            err.to_string().contains("expected `kept` or `recomputed`"),
            "{err}"
        );
    }
}
