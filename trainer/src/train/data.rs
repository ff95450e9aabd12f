//! The tasks a run works on: each environment's split into training and
//! held-out tasks, the seeded order in which RL draws training tasks, and the
//! cold-start SFT data rendered from the training tasks' gold episodes.

use crate::chat::{PromptStyle, assistant_text, completion, render};
use crate::train::config::{HeldOut, TasksSection};
use crate::train::objective::{Sequence, Turn};
use anyhow::{Context, Result};
use forge_model::tokenizer::ModelTokenizer;
use forge_runtime::episode::{EpisodeSettings, run_episode};
use forge_runtime::policy::{GoldPolicy, ScriptedUser};
use forge_runtime::trajectory::{Role, agent_view};
use forge_runtime::{Environment, PreparedTask};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// An environment and how the run uses it.
pub struct Workload<'a> {
    pub env: &'a Environment,
    pub style: PromptStyle,
    /// Indices into the environment's tasks.
    pub train: Vec<usize>,
    pub heldout: Vec<usize>,
    /// How many tasks the config asks to hold out: more than `heldout`
    /// where too few tasks qualify (`tasks.heldout = "covered"`).
    pub heldout_asked: usize,
}

impl<'a> Workload<'a> {
    /// Splits `env`'s tasks (those of `tasks.train_split`, or all) into
    /// training and held-out ones: the tasks of `tasks.heldout_split`, or
    /// after a seeded shuffle (by environment name, so adding an environment
    /// does not reshuffle the others) `heldout_fraction` of them — at least
    /// one when the fraction is positive and there are two tasks or more —
    /// chosen in that order as `tasks.heldout` says.
    pub fn split(
        env: &'a Environment,
        style: PromptStyle,
        tasks: &TasksSection,
        seed: u64,
    ) -> Result<Self> {
        let (train, heldout, heldout_asked) = partition(env, tasks, seed)?;
        Ok(Self {
            env,
            style,
            train,
            heldout,
            heldout_asked,
        })
    }

    pub fn task(&self, index: usize) -> &'a PreparedTask {
        &self.env.tasks()[index]
    }
}

/// The tasks of `env` a run under `tasks` and `seed` holds out (indices, in
/// the environment's order): those it evaluates and never trains on, for
/// `forge eval --tasks heldout:RUN` to measure the trained model on.
pub fn heldout_tasks(env: &Environment, tasks: &TasksSection, seed: u64) -> Result<Vec<usize>> {
    let (_, mut heldout, _) = partition(env, tasks, seed)?;
    heldout.sort_unstable();
    Ok(heldout)
}

/// (training, held-out) task indices, as [`Workload::split`] says, and how
/// many were asked to be held out.
fn partition(
    env: &Environment,
    tasks: &TasksSection,
    seed: u64,
) -> Result<(Vec<usize>, Vec<usize>, usize)> {
    let candidates = match tasks.train_split.as_str() {
        "" => (0..env.tasks().len()).collect(),
        name => split_tasks(env, name, "tasks.train_split")?,
    };
    Ok(match tasks.heldout_split.as_str() {
        "" => hold_out_share(env, candidates, tasks, seed),
        name => {
            let heldout = split_tasks(env, name, "tasks.heldout_split")?;
            let train = candidates
                .into_iter()
                .filter(|index| !heldout.contains(index))
                .collect();
            let asked = heldout.len();
            (train, heldout, asked)
        }
    })
}

/// The indices of the tasks of `env`'s split `name` (named by `key`), in
/// the environment's order.
fn split_tasks(env: &Environment, name: &str, key: &str) -> Result<Vec<usize>> {
    let ids = env
        .bundle()
        .manifest
        .split(name)
        .map_err(|why| anyhow::anyhow!("{key}: environment `{}` has {why}", env.name()))?;
    let ids: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    Ok((0..env.tasks().len())
        .filter(|&index| ids.contains(env.tasks()[index].task.id.as_str()))
        .collect())
}

/// Holds out `tasks.heldout_fraction` of `candidates` (indices into `env`'s
/// tasks) after a seeded shuffle, as `tasks.heldout` says: (train, held
/// out, how many were wanted).
fn hold_out_share(
    env: &Environment,
    mut order: Vec<usize>,
    tasks: &TasksSection,
    seed: u64,
) -> (Vec<usize>, Vec<usize>, usize) {
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(
        seed ^ stable_hash(env.name()),
    ));
    let mut wanted = (tasks.heldout_fraction * order.len() as f64).round() as usize;
    if tasks.heldout_fraction > 0.0 && order.len() >= 2 {
        wanted = wanted.clamp(1, order.len() - 1);
    }
    match tasks.heldout {
        HeldOut::Random => {
            let train = order.split_off(wanted);
            (train, order, wanted)
        }
        HeldOut::Covered => {
            let features: Vec<BTreeSet<String>> = env.tasks().iter().map(gold_features).collect();
            let (train, heldout) = covered_split(&features, &order, wanted);
            (train, heldout, wanted)
        }
    }
}

/// The first `fraction` of `tasks`, rounded up: a positive fraction of a
/// non-empty list keeps at least one. SFT learns from this share of each
/// environment's training tasks, in the seeded order of the split.
fn leading_share(tasks: &[usize], fraction: f64) -> &[usize] {
    let wanted = (fraction * tasks.len() as f64).ceil() as usize;
    &tasks[..wanted.min(tasks.len())]
}

/// Holds out tasks, in `order`, only while every tool and argument value of
/// a held-out task's gold actions still occurs in some training task: the
/// held-out tasks are then new combinations of things trained on, which a
/// small model trained from scratch can solve, rather than tokens it has never
/// produced. Returns (train, held out); fewer than `wanted` are held out when
/// no more tasks qualify.
fn covered_split(
    features: &[BTreeSet<String>],
    order: &[usize],
    wanted: usize,
) -> (Vec<usize>, Vec<usize>) {
    let mut in_training: BTreeMap<&String, usize> = BTreeMap::new();
    for feature in features.iter().flatten() {
        *in_training.entry(feature).or_default() += 1;
    }
    let (mut train, mut heldout) = (Vec::new(), Vec::new());
    for &index in order {
        let covered = features[index]
            .iter()
            .all(|feature| in_training[feature] >= 2);
        if heldout.len() < wanted && covered {
            for feature in &features[index] {
                *in_training.get_mut(feature).expect("counted above") -= 1;
            }
            heldout.push(index);
        } else {
            train.push(index);
        }
    }
    (train, heldout)
}

/// What a task's gold actions use: `tool <name>` and `value <json>` for
/// every scalar in their arguments.
fn gold_features(task: &PreparedTask) -> BTreeSet<String> {
    let mut features = BTreeSet::new();
    for call in &task.task.gold_actions {
        features.insert(format!("tool {}", call.name));
        leaf_values(&call.arguments, &mut features);
    }
    features
}

/// The scalar values in `value`, as `value <json>`.
fn leaf_values(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Array(items) => items.iter().for_each(|item| leaf_values(item, out)),
        Value::Object(map) => map.values().for_each(|item| leaf_values(item, out)),
        scalar => {
            out.insert(format!("value {scalar}"));
        }
    }
}

/// A stable 64-bit hash of `text` (not `std`'s, which may change between releases).
pub fn stable_hash(text: &str) -> u64 {
    let digest = Sha256::digest(text.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// The order in which RL draws training tasks: every training task of every
/// environment once per epoch, each epoch in its own seeded order.
pub struct TaskQueue {
    tasks: Vec<(usize, usize)>,
    seed: u64,
}

impl TaskQueue {
    pub fn new(workloads: &[Workload<'_>], seed: u64) -> Self {
        let tasks = workloads
            .iter()
            .enumerate()
            .flat_map(|(env, workload)| workload.train.iter().map(move |&task| (env, task)))
            .collect();
        Self { tasks, seed }
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The `position`-th draw: (workload index, task index).
    pub fn at(&self, position: usize) -> (usize, usize) {
        let len = self.tasks.len();
        self.tasks[permutation(len, self.seed, position / len)[position % len]]
    }
}

/// The seeded order of `len` items in pass `epoch` over them.
pub fn permutation(len: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(
        seed ^ (epoch as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
    ));
    order
}

/// SFT's data: the gold turns as token sequences.
pub struct SftData {
    pub sequences: Vec<Sequence>,
    /// Gold turns left out because their prompt and reply together do not
    /// fit in the model's context: a rollout could not have sampled them.
    pub turns_past_context: usize,
}

/// The gold episode of each SFT task (`fraction` of every environment's
/// training tasks), as token sequences whose trained spans are the
/// assistant's turns (each followed by the end of its turn), up to the
/// first turn that would not fit in `context` tokens.
pub fn sft_sequences(
    workloads: &[Workload<'_>],
    fraction: f64,
    tokenizer: &ModelTokenizer,
    max_turns: usize,
    context: Option<usize>,
) -> Result<SftData> {
    let context = context.unwrap_or(usize::MAX);
    let mut data = SftData {
        sequences: Vec::new(),
        turns_past_context: 0,
    };
    for workload in workloads {
        for &index in leading_share(&workload.train, fraction) {
            let task = workload.task(index);
            let turns = gold_turns(workload.env, task, &workload.style, tokenizer, max_turns)?;
            let fitting = turns
                .iter()
                .take_while(|turn| turn.prompt.len() + turn.completion.len() <= context)
                .count();
            data.turns_past_context += turns.len() - fitting;
            data.sequences
                .extend(Sequence::from_turns(&turns[..fitting]));
        }
    }
    Ok(data)
}

/// The assistant turns of `task`'s gold episode (played against its
/// scripted user for at most `max_turns` turns) as `style` prompts a model
/// through `tokenizer`: each turn's prompt, and its reply followed by the
/// end of its turn.
pub fn gold_turns(
    env: &Environment,
    task: &PreparedTask,
    style: &PromptStyle,
    tokenizer: &ModelTokenizer,
    max_turns: usize,
) -> Result<Vec<Turn>> {
    let mut policy = GoldPolicy::new(&task.task);
    let mut user = ScriptedUser::new(&task.task);
    let settings = EpisodeSettings { max_turns, seed: 0 };
    let record = run_episode(env, task, "gold", &mut policy, &mut user, None, settings)
        .with_context(|| format!("gold episode of task `{}`", task.task.id))?;
    let tools = env.component().tools();
    let mut turns = Vec::new();
    for (at, message) in record.messages.iter().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        let prompt = render(style, tools, &agent_view(&record.messages[..at])).encode(tokenizer)?;
        let completion = completion(&assistant_text(message)).encode(tokenizer)?;
        turns.push(Turn {
            logprobs: vec![0.0; completion.len()],
            prompt,
            completion,
        });
    }
    Ok(turns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite(suite: forge_suites::Suite) -> Environment {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/benchmarks");
        let bundle = suite.load(&data).unwrap();
        Environment::load(&forge_runtime::Sandbox::with_defaults().unwrap(), bundle).unwrap()
    }

    #[test]
    fn splits_choose_the_training_and_held_out_tasks() {
        // τ²-bench airline: `base` (all 50) = `train` (30) + `test` (20).
        let env = suite(forge_suites::Suite::Tau2Airline);
        let ids = |indices: &[usize]| -> BTreeSet<String> {
            indices
                .iter()
                .map(|&index| env.tasks()[index].task.id.clone())
                .collect()
        };
        let split = |train: &str, heldout: &str| {
            let tasks = TasksSection {
                train_split: train.into(),
                heldout_split: heldout.into(),
                ..TasksSection::default()
            };
            Workload::split(&env, PromptStyle::for_service("Airline."), &tasks, 0)
        };
        let named = |name: &str| -> BTreeSet<String> {
            env.bundle().manifest.splits[name].iter().cloned().collect()
        };
        // The held-out split leaves a training split that holds it.
        let workload = split("base", "test").unwrap();
        assert_eq!(ids(&workload.heldout), named("test"));
        assert_eq!(ids(&workload.train), named("train"));
        // Without one, a share of the training split is held out.
        let workload = split("train", "").unwrap();
        assert_eq!((workload.train.len(), workload.heldout.len()), (22, 8));
        assert!(ids(&workload.train).is_subset(&named("train")));
        assert!(ids(&workload.heldout).is_subset(&named("train")));
        let err = split("", "dev").err().unwrap().to_string();
        assert!(
            err.contains("has no split `dev` (it has `base`, `test`, `train`)"),
            "{err}"
        );
    }

    #[test]
    fn gold_dialogues_ask_the_user_for_its_calls_and_hide_them_from_the_agent() {
        let env = suite(forge_suites::Suite::Tau2Telecom);
        let id = "[service_issue]airplane_mode_on|break_apn_settings|overdue_bill_suspension|unseat_sim_card[PERSONA:None]";
        let task = env.tasks().iter().find(|task| task.task.id == id).unwrap();
        let tokenizer = ModelTokenizer::byte_level();
        let style = PromptStyle::for_service("Telecom support.");
        let turns = gold_turns(&env, task, &style, &tokenizer, 30).unwrap();
        let text = |ids: &[u32]| tokenizer.decode(ids).unwrap();
        let replies: Vec<String> = turns.iter().map(|turn| text(&turn.completion)).collect();
        // The user's calls are asked for, the agent's made.
        assert!(replies[0].contains(
            "Please do these on your side, in this order: `toggle_airplane_mode()`, then `reset_apn_settings()`, then `reboot_device()`."
        ), "{}", replies[0]);
        assert!(
            replies[1].contains("send_payment_request"),
            "{}",
            replies[1]
        );
        assert!(replies[2].contains("`make_payment()`"), "{}", replies[2]);
        assert_eq!(replies.len(), 6, "{replies:#?}");
        // The agent reads the user's report of its calls, not the calls and
        // their results.
        let last = text(&turns[5].prompt);
        assert!(last.contains("Done. `toggle_airplane_mode()` → Airplane Mode is now OFF."));
        assert_eq!(
            last.matches("Airplane Mode is now OFF").count(),
            1,
            "{last}"
        );
    }

    #[test]
    fn every_epoch_draws_each_task_once_in_a_seeded_order() {
        let len = 7;
        let first = permutation(len, 3, 0);
        let mut sorted = first.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..len).collect::<Vec<_>>());
        assert_eq!(
            first,
            permutation(len, 3, 0),
            "the same seed gives the same order"
        );
        assert_ne!(
            first,
            permutation(len, 3, 1),
            "each epoch has its own order"
        );
        assert_ne!(first, permutation(len, 4, 0));
    }

    #[test]
    fn covered_splits_hold_out_only_tasks_whose_parts_are_trained_on() {
        let task = |parts: &[&str]| parts.iter().map(|part| (*part).to_owned()).collect();
        // Lamp 6 appears in one task only: it can never be held out.
        let features: Vec<BTreeSet<String>> = vec![
            task(&["tool on", "value 1"]),
            task(&["tool off", "value 1"]),
            task(&["tool on", "value 6"]),
            task(&["tool off", "value 2"]),
            task(&["tool on", "value 2"]),
        ];
        let (train, heldout) = covered_split(&features, &[2, 0, 1, 3, 4], 2);
        assert_eq!(heldout, vec![0, 3]);
        assert_eq!(train, vec![2, 1, 4]);
        for index in &heldout {
            for feature in &features[*index] {
                assert!(
                    train.iter().any(|t| features[*t].contains(feature)),
                    "{feature}"
                );
            }
        }
        // Asking for more than qualify holds out what does.
        let (_, heldout) = covered_split(&features, &[0, 1, 2, 3, 4], 4);
        assert_eq!(heldout, vec![0, 3]);
    }

    #[test]
    fn sft_learns_from_the_leading_share_of_the_training_tasks() {
        let train: Vec<usize> = (0..22).rev().collect();
        assert_eq!(leading_share(&train, 1.0), &train[..]);
        assert_eq!(leading_share(&train, 0.5), &train[..11]);
        assert_eq!(leading_share(&train, 0.3), &train[..7], "6.6 rounds up");
        assert_eq!(leading_share(&train, 0.01), &train[..1]);
        assert!(leading_share(&[], 0.5).is_empty());
    }

    #[test]
    fn the_stable_hash_does_not_change() {
        // Task splits derive from it: a change would reshuffle every run.
        assert_eq!(stable_hash("lamps"), 0x5aa8_0968_1fb8_e0df);
    }
}
