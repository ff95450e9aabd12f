//! Training runs side by side: held-out success before and after (and by
//! environment), reward, masking, throughput and stability, each run
//! against the first task by task on their last evaluations' held-out
//! tasks, and their curves on a shared step axis.

use super::Comparison;
use super::paired::{Against, Pairing, Wording, write_against};
use crate::output;
use crate::plot::{self, Curve, Panel};
use anyhow::{Context, Result};
use forge_trainer::train::{
    CONFIG_FILE, FINAL_DIR, METRICS_FILE, Metrics, checkpoint_step, episodes_path, read_metrics,
};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub(super) fn compare(dirs: &[PathBuf], labels: &[String], bootstrap: usize) -> Result<Comparison> {
    let runs = dirs
        .iter()
        .map(|dir| Run::read(dir))
        .collect::<Result<Vec<_>>>()?;
    let parents = parents(&runs);
    let offsets = offsets(&runs, &parents);
    let rows: Vec<Row> = runs
        .iter()
        .enumerate()
        .map(|(at, run)| {
            let parent = parents[at]
                .map(|parent| (labels[parent.run].as_str(), &runs[parent.run], parent.step));
            Row::new(&labels[at], run, parent)
        })
        .collect();
    let outcomes = (0..runs.len())
        .map(|at| last_outcomes(&runs, &parents, at))
        .collect::<Result<Vec<_>>>()?;
    let against: Vec<Against> = (1..runs.len())
        .map(|at| Against {
            name: labels[at].clone(),
            baseline: labels[0].clone(),
            pairing: match (&outcomes[0], &outcomes[at]) {
                (Some(first), Some(these)) => Pairing::new(first, these, bootstrap),
                (None, _) => Pairing::unpaired(&format!("the baseline {}", runs[0].unevaluated())),
                (_, None) => Pairing::unpaired(runs[at].unevaluated()),
            },
        })
        .collect();
    let mut json = serde_json::Map::new();
    json.insert("runs".into(), serde_json::to_value(&rows)?);
    json.insert("against_first".into(), serde_json::to_value(&against)?);
    let mut text = tables(&rows);
    let wording = Wording {
        what: "run",
        on: ", on the held-out tasks of each run's evaluation at its last step, or of a run that continues from that model at its step 0 (greedy: one episode a task)",
    };
    write_against(&mut text, &against, &wording);
    Ok(Comparison {
        settings: runs.iter().map(|run| run.settings.clone()).collect(),
        panels: panels(&runs, labels, &rows, &offsets),
        json,
        text,
    })
}

/// What a run directory records: the config it was trained under and its
/// metrics so far.
struct Run {
    dir: PathBuf,
    /// `config.toml`, as JSON.
    settings: Value,
    metrics: Vec<Metrics>,
}

impl Run {
    fn read(dir: &Path) -> Result<Self> {
        let config = dir.join(CONFIG_FILE);
        let text = std::fs::read_to_string(&config)
            .with_context(|| format!("reading {}", config.display()))?;
        let table: toml::Table =
            toml::from_str(&text).with_context(|| format!("reading {}", config.display()))?;
        let mut settings = serde_json::to_value(table)?;
        // Beside its config, what it trains on: runs on other environments
        // differ there first.
        if let Ok(environments) = crate::commands::train::environments_trained_on(dir) {
            settings["environments"] = environments.join(", ").into();
        }
        Ok(Self {
            dir: dir.to_owned(),
            settings,
            metrics: read_metrics(&dir.join(METRICS_FILE))?,
        })
    }

    /// The run's steps of `kind` (`sft`, `rl` or `eval`).
    fn lines<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Metrics> {
        self.metrics.iter().filter(move |line| line.kind == kind)
    }

    /// The steps done (SFT and RL).
    fn last_step(&self) -> usize {
        self.lines("sft")
            .chain(self.lines("rl"))
            .map(|line| line.step)
            .max()
            .unwrap_or(0)
    }

    /// The SFT steps the run's config asks for: the stage ends there (a run
    /// stopped before, by a time or step limit, never finished it).
    fn sft_steps_configured(&self) -> Option<usize> {
        let steps = self.settings.pointer("/sft/steps")?.as_u64()?;
        usize::try_from(steps).ok()
    }

    /// The held-out evaluation at `step`.
    fn eval_at(&self, step: usize) -> Option<&Metrics> {
        self.lines("eval").find(|line| line.step == step)
    }

    /// Held-out success as evaluated at `step`.
    fn heldout_at(&self, step: usize) -> Option<f64> {
        self.eval_at(step)?.heldout_success
    }

    /// The evaluation a continuation starts from: its own at step 0, or
    /// that of the run it continues at the step whose model it took.
    fn first_eval<'a>(&'a self, parent: Option<(&'a Run, usize)>) -> Option<&'a Metrics> {
        self.eval_at(0)
            .or_else(|| parent.and_then(|(parent, step)| parent.eval_at(step)))
    }

    /// Each held-out task's outcome (1 solved, 0 not) in the evaluation at
    /// `step`; none without that evaluation.
    fn outcomes_at(&self, step: usize) -> Result<Option<BTreeMap<HeldOutTask, f64>>> {
        let path = episodes_path(&self.dir, "eval", step);
        if self.eval_at(step).is_none() || !path.is_file() {
            return Ok(None);
        }
        let episodes = forge_runtime::trajectory::read(&path)?.episodes;
        Ok(Some(
            episodes
                .iter()
                .map(|episode| {
                    let task = HeldOutTask {
                        environment: episode.environment.name.clone(),
                        content_hash: episode.environment.content_hash.clone(),
                        task: episode.task_id.clone(),
                    };
                    (task, f64::from(u8::from(episode.verdict.reward >= 1.0)))
                })
                .collect(),
        ))
    }

    /// Why the run's last model has no held-out outcomes.
    fn unevaluated(&self) -> &'static str {
        let fraction = self.settings.pointer("/tasks/heldout_fraction");
        let split = self.settings.pointer("/tasks/heldout_split");
        let holds_out_none = fraction.and_then(Value::as_f64) == Some(0.0)
            && split.and_then(Value::as_str).is_none_or(str::is_empty);
        match holds_out_none {
            true => "holds out no task (tasks.heldout_fraction = 0)",
            false => "has no evaluation at its last step",
        }
    }

    /// Where `model.init` points, when it names a path that exists.
    fn init(&self) -> Option<PathBuf> {
        let init = self.settings.get("model")?.get("init")?.as_str()?;
        std::fs::canonicalize(init).ok()
    }
}

/// A task of a run's held-out evaluation. Runs' tasks pair only within the
/// same environment — content and all, as its hash says: two environments
/// of one name (synthesized again, edited) have different tasks under the
/// same ids.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct HeldOutTask {
    environment: String,
    content_hash: String,
    task: String,
}

impl std::fmt::Display for HeldOutTask {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}/{}", self.environment, self.task)
    }
}

/// The run a continuation starts from, and the step whose model it took.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Parent {
    run: usize,
    step: usize,
}

/// The settings besides the model that an evaluation's outcomes depend on:
/// where two runs agree on them, their evaluations of one model are one
/// measurement.
const EVALUATED_UNDER: [&str; 10] = [
    "/seed",
    "/tasks",
    "/eval/max_new_tokens",
    "/model/precision",
    "/model/system",
    "/model/tools",
    "/model/thinking",
    "/model/tiny_context",
    "/user",
    "/judge",
];

/// The held-out outcomes of run `at`'s last model: its evaluation at its
/// last step, or else (a run `--max-steps` stopped, as an SFT run an RL run
/// continues is) the evaluation a continuation of it made of that same
/// model at its own step 0, under the same settings.
fn last_outcomes(
    runs: &[Run],
    parents: &[Option<Parent>],
    at: usize,
) -> Result<Option<BTreeMap<HeldOutTask, f64>>> {
    let last = runs[at].last_step();
    if let Some(own) = runs[at].outcomes_at(last)? {
        return Ok(Some(own));
    }
    let alike = |other: &Run| {
        EVALUATED_UNDER
            .iter()
            .all(|key| runs[at].settings.pointer(key) == other.settings.pointer(key))
    };
    let took_the_last = Some(Parent {
        run: at,
        step: last,
    });
    for (continuation, parent) in parents.iter().enumerate() {
        if *parent == took_the_last
            && alike(&runs[continuation])
            && let Some(outcomes) = runs[continuation].outcomes_at(0)?
        {
            return Ok(Some(outcomes));
        }
    }
    Ok(None)
}

/// For each run, the run among the others its `model.init` lies in (the
/// run it continues), if any: from one of its checkpoints, at that
/// checkpoint's step; from anything else in it (`final/`), at its last.
fn parents(runs: &[Run]) -> Vec<Option<Parent>> {
    let dirs: Vec<Option<PathBuf>> = runs
        .iter()
        .map(|run| std::fs::canonicalize(&run.dir).ok())
        .collect();
    runs.iter()
        .enumerate()
        .map(|(at, run)| {
            let init = run.init()?;
            dirs.iter().enumerate().find_map(|(other, dir)| {
                let within = init.strip_prefix(dir.as_ref()?).ok()?;
                // One of its checkpoints, or `final/`, its model at its
                // last step (not `reference/`, the model RL began from).
                let step = match checkpoint_step(within) {
                    Some(step) => step,
                    None if within == Path::new(FINAL_DIR) => runs[other].last_step(),
                    None => return None,
                };
                (other != at).then_some(Parent { run: other, step })
            })
        })
        .collect()
}

/// The step each run's curves start at on a shared axis: a continuation
/// starts at the step of the model it took.
fn offsets(runs: &[Run], parents: &[Option<Parent>]) -> Vec<usize> {
    (0..runs.len())
        .map(|at| {
            let mut offset = 0;
            let mut current = at;
            // A chain is at most as long as the list (a cycle, which copied
            // run directories could make, stops there).
            for _ in 0..runs.len() {
                let Some(parent) = parents[current] else {
                    break;
                };
                offset += parent.step;
                current = parent.run;
            }
            offset
        })
        .collect()
}

/// A run's row of the comparison.
#[derive(Debug, Serialize)]
struct Row {
    run: String,
    dir: PathBuf,
    /// The run this one continues, and the step whose model it took.
    starts_from: Option<String>,
    starts_from_step: Option<usize>,
    sft_steps: usize,
    rl_steps: usize,
    /// Before the first step: the run's own evaluation at step 0, or that
    /// of the run it continues at the step whose model it took.
    heldout_before: Option<f64>,
    /// At the end of the SFT stage (runs with one).
    heldout_after_sft: Option<f64>,
    /// At the last step (absent when the run was not evaluated there).
    heldout_after: Option<f64>,
    heldout_best: Option<f64>,
    /// `before` and `after`, each environment's held-out tasks apart.
    heldout_before_by_environment: Option<BTreeMap<String, f64>>,
    heldout_after_by_environment: Option<BTreeMap<String, f64>>,
    /// Means over the RL steps.
    rl_reward: Option<f64>,
    masked_share: Option<f64>,
    /// Tokens sampled in the RL steps' rollouts per second of rollout.
    rollout_tokens_per_s: Option<f64>,
    /// Tokens trained in the SFT and RL steps per second of optimisation.
    train_tokens_per_s: Option<f64>,
    /// The largest gap between the log-probs tokens were sampled with and
    /// those training computed: decoding's numerics against training's.
    logprob_gap_max: Option<f64>,
    /// The largest gradient norm before clipping: spikes mark instability.
    grad_norm_max: Option<f64>,
    /// Wall time of the steps and evaluations.
    seconds: f64,
}

impl Row {
    fn new(label: &str, run: &Run, parent: Option<(&str, &Run, usize)>) -> Self {
        let sft: Vec<&Metrics> = run.lines("sft").collect();
        let rl: Vec<&Metrics> = run.lines("rl").collect();
        let steps: Vec<&Metrics> = sft.iter().chain(&rl).copied().collect();
        let before = run.first_eval(parent.map(|(_, parent, step)| (parent, step)));
        let after_sft = run
            .sft_steps_configured()
            .filter(|&steps| steps > 0)
            .and_then(|steps| run.heldout_at(steps));
        let after = (!steps.is_empty())
            .then(|| run.eval_at(run.last_step()))
            .flatten();
        // Steps done, as the lines' steps count them: lines lost to a cut
        // metrics file are steps all the same.
        let sft_done = sft.iter().map(|line| line.step).max().unwrap_or(0);
        let by_environment = |eval: Option<&Metrics>| {
            eval.and_then(|eval| eval.heldout_success_by_environment.clone())
        };
        Self {
            run: label.to_owned(),
            dir: run.dir.clone(),
            starts_from: parent.map(|(label, ..)| label.to_owned()),
            starts_from_step: parent.map(|(.., step)| step),
            sft_steps: sft_done,
            rl_steps: rl.iter().map(|line| line.step).max().map_or(0, |last| {
                last.saturating_sub(run.sft_steps_configured().unwrap_or(sft_done))
            }),
            heldout_before: before.and_then(|eval| eval.heldout_success),
            heldout_after_sft: after_sft,
            heldout_after: after.and_then(|eval| eval.heldout_success),
            heldout_before_by_environment: by_environment(before),
            heldout_after_by_environment: by_environment(after),
            heldout_best: maximum(run.lines("eval").filter_map(|line| line.heldout_success)),
            rl_reward: mean(rl.iter().filter_map(|line| line.reward)),
            masked_share: mean(rl.iter().filter_map(|line| line.masked_share)),
            rollout_tokens_per_s: overall_rate(
                rl.iter()
                    .filter_map(|line| line.sampled_tokens.zip(line.rollout_tokens_per_s)),
            ),
            train_tokens_per_s: overall_rate(
                steps
                    .iter()
                    .filter_map(|line| line.tokens.zip(line.train_tokens_per_s)),
            ),
            logprob_gap_max: maximum(rl.iter().filter_map(|line| line.logprob_gap)),
            grad_norm_max: maximum(steps.iter().filter_map(|line| line.grad_norm)),
            // Folded from +0: an empty sum of floats is -0, printed so.
            seconds: run
                .metrics
                .iter()
                .filter_map(|line| line.seconds)
                .fold(0.0, |sum, seconds| sum + seconds),
        }
    }
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values.fold((0.0, 0usize), |(sum, count), value| {
        (sum + value, count + 1)
    });
    (count > 0).then(|| sum / count as f64)
}

/// Tokens per second over steps of `(tokens, tokens per second)`: all the
/// tokens over all the time (each step's is its tokens over its rate), not
/// the mean of the steps' rates, which short steps would sway as much as
/// long ones.
fn overall_rate(steps: impl Iterator<Item = (usize, f64)>) -> Option<f64> {
    let (tokens, seconds) = steps
        .filter(|(tokens, rate)| *tokens > 0 && *rate > 0.0)
        .fold((0.0, 0.0), |(tokens, seconds), (step_tokens, rate)| {
            (
                tokens + step_tokens as f64,
                seconds + step_tokens as f64 / rate,
            )
        });
    (seconds > 0.0).then(|| tokens / seconds)
}

fn maximum(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.reduce(f64::max)
}

/// The row per run, what the columns mean, and which runs continue which.
fn tables(rows: &[Row]) -> String {
    let mut text = String::new();
    let mut table = output::table(&[
        "run",
        "SFT",
        "RL",
        "before",
        "after SFT",
        "after",
        "best",
        "reward",
        "masked",
        "rollout tok/s",
        "train tok/s",
        "lp gap",
        "max |g|",
        "s",
    ]);
    // A run's name stays on one line.
    if let Some(column) = table.column_mut(0) {
        column.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
    }
    let fixed = |value: Option<f64>, digits: usize| {
        value.map_or_else(|| "-".to_owned(), |value| format!("{value:.digits$}"))
    };
    for row in rows {
        table.add_row(vec![
            row.run.clone(),
            row.sft_steps.to_string(),
            row.rl_steps.to_string(),
            fixed(row.heldout_before, 3),
            fixed(row.heldout_after_sft, 3),
            fixed(row.heldout_after, 3),
            fixed(row.heldout_best, 3),
            fixed(row.rl_reward, 3),
            fixed(row.masked_share, 3),
            fixed(row.rollout_tokens_per_s, 0),
            fixed(row.train_tokens_per_s, 0),
            fixed(row.logprob_gap_max, 4),
            fixed(row.grad_norm_max, 3),
            format!("{:.0}", row.seconds),
        ]);
    }
    let _ = writeln!(text, "{table}");
    let _ = writeln!(
        text,
        "SFT, RL: steps done. before, after SFT, after, best: held-out success before the first \
         step, at the end of SFT, at the last step, at best. reward, masked: means over the RL \
         steps. rollout, train tok/s: the RL steps' sampled tokens over their rollouts' time; \
         all steps' trained tokens over their optimisation's time. lp gap: the largest gap \
         between sampled and retrained log-probs; max |g|: the largest gradient norm before \
         clipping. s: seconds."
    );
    write_by_environment(&mut text, rows);
    for row in rows {
        if let (Some(parent), Some(step)) = (&row.starts_from, row.starts_from_step) {
            let _ = writeln!(
                text,
                "{} starts from {parent}'s model at step {step}: `before` is the evaluation at \
                 the start (the run's own at step 0, else {parent}'s at step {step}), and its \
                 curves go on from there",
                row.run
            );
        }
    }
    text
}

/// Where the runs evaluated more than one environment, held-out success
/// `before → after` for each, a column per environment.
fn write_by_environment(text: &mut String, rows: &[Row]) {
    let environments: BTreeSet<&str> = rows
        .iter()
        .flat_map(|row| {
            [
                &row.heldout_before_by_environment,
                &row.heldout_after_by_environment,
            ]
        })
        .flatten()
        .flat_map(|by_environment| by_environment.keys().map(String::as_str))
        .collect();
    if environments.len() < 2 {
        return;
    }
    let _ = writeln!(text, "held-out success by environment, before → after:");
    let mut header = vec!["run"];
    header.extend(&environments);
    let mut table = output::table(&header);
    for row in rows {
        let at = |by_environment: &Option<BTreeMap<String, f64>>, environment: &str| {
            by_environment
                .as_ref()
                .and_then(|by_environment| by_environment.get(environment))
                .map_or_else(|| "-".to_owned(), |success| format!("{success:.3}"))
        };
        let mut cells = vec![row.run.clone()];
        cells.extend(environments.iter().map(|environment| {
            format!(
                "{} → {}",
                at(&row.heldout_before_by_environment, environment),
                at(&row.heldout_after_by_environment, environment)
            )
        }));
        table.add_row(cells);
    }
    let _ = writeln!(text, "{table}");
}

/// Held-out success and RL reward by step, a curve per run on a shared step
/// axis (a continuation's from the step its parent ended at, starting at
/// its `before`).
fn panels(runs: &[Run], labels: &[String], rows: &[Row], offsets: &[usize]) -> Vec<Panel> {
    let mut heldout = Vec::new();
    let mut reward = Vec::new();
    for (at, run) in runs.iter().enumerate() {
        let offset = offsets[at] as f64;
        let shifted = |lines: Vec<&Metrics>, value: fn(&Metrics) -> Option<f64>| {
            lines
                .into_iter()
                .filter_map(|line| value(line).map(|y| (offset + line.step as f64, y)))
                .collect::<Vec<_>>()
        };
        let mut evals = shifted(run.lines("eval").collect(), |line| line.heldout_success);
        if let Some(before) = rows[at].heldout_before
            && run.heldout_at(0).is_none()
        {
            evals.insert(0, (offset, before));
        }
        let rewards = shifted(run.lines("rl").collect(), |line| line.reward);
        for (points, curves) in [(evals, &mut heldout), (rewards, &mut reward)] {
            if !points.is_empty() {
                curves.push(Curve {
                    name: labels[at].clone(),
                    points,
                    color: plot::color(at),
                });
            }
        }
    }
    vec![
        Panel {
            title: "held-out success",
            x_label: "step",
            curves: heldout,
        },
        Panel {
            title: "RL reward",
            x_label: "step",
            curves: reward,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(kind: &str, step: usize) -> Metrics {
        Metrics {
            kind: kind.to_owned(),
            step,
            ..Metrics::default()
        }
    }

    fn eval(step: usize, success: f64) -> Metrics {
        Metrics {
            heldout_success: Some(success),
            ..line("eval", step)
        }
    }

    fn rl(step: usize, reward: f64) -> Metrics {
        Metrics {
            reward: Some(reward),
            masked_share: Some(0.25),
            grad_norm: Some(step as f64),
            ..line("rl", step)
        }
    }

    fn run(settings: Value, metrics: Vec<Metrics>) -> Run {
        Run {
            dir: PathBuf::from("runs/x"),
            settings,
            metrics,
        }
    }

    #[test]
    fn a_row_reads_held_out_success_before_after_sft_and_after() {
        let metrics = vec![
            eval(0, 0.1),
            line("sft", 1),
            line("sft", 2),
            eval(2, 0.5),
            rl(3, 0.2),
            rl(4, 0.6),
            eval(4, 0.4),
        ];
        let config = json!({"sft": {"steps": 2}});
        let row = Row::new("x", &run(config.clone(), metrics.clone()), None);
        assert_eq!((row.sft_steps, row.rl_steps), (2, 2));
        assert_eq!(row.heldout_before, Some(0.1));
        assert_eq!(row.heldout_after_sft, Some(0.5));
        assert_eq!(row.heldout_after, Some(0.4));
        assert_eq!(row.heldout_best, Some(0.5));
        assert_eq!(row.rl_reward, Some(0.4));
        assert_eq!(row.masked_share, Some(0.25));
        assert_eq!(row.grad_norm_max, Some(4.0));
        // Lines lost to a cut file are steps done all the same.
        let cut = [&metrics[..1], &metrics[2..4], &metrics[5..]].concat();
        let row = Row::new("x", &run(config.clone(), cut), None);
        assert_eq!((row.sft_steps, row.rl_steps), (2, 2));

        // A run stopped in its SFT stage (a time limit) never ended it.
        let stopped = run(json!({"sft": {"steps": 100}}), metrics[..4].to_vec());
        let row = Row::new("x", &stopped, None);
        assert_eq!(row.heldout_after_sft, None);
        assert_eq!(row.heldout_after, Some(0.5));
    }

    #[test]
    fn a_run_not_evaluated_at_its_last_step_has_no_after() {
        // Never an earlier evaluation's, which would pass for the last model's.
        let metrics = vec![eval(0, 0.1), rl(1, 0.2), eval(1, 0.3), rl(2, 0.4)];
        let row = Row::new("x", &run(json!({}), metrics), None);
        assert_eq!(row.heldout_after, None);
        assert_eq!(row.heldout_after_sft, None);
    }

    #[test]
    fn a_continuation_starts_where_its_parent_ended() {
        let parent = run(
            json!({}),
            vec![line("sft", 1), line("sft", 2), eval(2, 0.5)],
        );
        let child = run(json!({}), vec![rl(1, 0.3), rl(2, 0.7), eval(2, 0.75)]);
        let row = Row::new("rl", &child, Some(("sft", &parent, 2)));
        assert_eq!(row.starts_from.as_deref(), Some("sft"));
        assert_eq!(row.heldout_before, Some(0.5));
        // From a checkpoint before the parent's end: its evaluation there.
        let early = Row::new("rl", &child, Some(("sft", &parent, 0)));
        assert_eq!(
            early.heldout_before, None,
            "sft was not evaluated at step 0"
        );
        let runs = [parent, child];
        let parent = |step| Some(Parent { run: 0, step });
        assert_eq!(offsets(&runs, &[None, parent(2)]), vec![0, 2]);
        assert_eq!(offsets(&runs, &[None, parent(1)]), vec![0, 1]);
        let rows = vec![Row::new("sft", &runs[0], None), row];
        let labels = ["sft".to_owned(), "rl".to_owned()];
        let panels = panels(&runs, &labels, &rows, &[0, 2]);
        let points: Vec<&Vec<(f64, f64)>> =
            panels[0].curves.iter().map(|curve| &curve.points).collect();
        assert_eq!(points, [&vec![(2.0, 0.5)], &vec![(2.0, 0.5), (4.0, 0.75)]]);
        // The SFT run has no RL reward curve.
        assert_eq!(panels[1].curves.len(), 1);
        assert_eq!(panels[1].curves[0].points, [(3.0, 0.3), (4.0, 0.7)]);
    }

    #[test]
    fn each_environment_is_read_before_and_after() {
        let by = |lamps: f64, shop: f64| Metrics {
            heldout_success_by_environment: Some(
                [("lamps".to_owned(), lamps), ("shop".to_owned(), shop)].into(),
            ),
            ..eval(2, (lamps + shop) / 2.0)
        };
        let parent = run(
            json!({}),
            vec![line("sft", 1), line("sft", 2), by(0.5, 0.25)],
        );
        let child = run(json!({}), vec![rl(1, 0.3), rl(2, 0.7), by(0.75, 0.5)]);
        let row = Row::new("rl", &child, Some(("sft", &parent, 2)));
        let (before, after) = (
            row.heldout_before_by_environment.as_ref().unwrap(),
            row.heldout_after_by_environment.as_ref().unwrap(),
        );
        assert_eq!((before["lamps"], before["shop"]), (0.5, 0.25));
        assert_eq!((after["lamps"], after["shop"]), (0.75, 0.5));
        let mut text = String::new();
        write_by_environment(&mut text, &[row]);
        assert!(
            text.contains("0.500 → 0.750") && text.contains("0.250 → 0.500"),
            "{text}"
        );
        // One environment needs no table of its own.
        let single = run(json!({}), vec![line("sft", 1), eval(1, 0.5)]);
        let mut text = String::new();
        write_by_environment(&mut text, &[Row::new("one", &single, None)]);
        assert!(text.is_empty(), "{text}");
    }

    #[test]
    fn throughput_is_all_the_tokens_over_all_the_time() {
        let step =
            |step: usize, trained: usize, rate: f64, sampled: usize, sampling: f64| Metrics {
                tokens: Some(trained),
                train_tokens_per_s: Some(rate),
                sampled_tokens: Some(sampled),
                rollout_tokens_per_s: Some(sampling),
                ..rl(step, 0.0)
            };
        // 1,000 tokens in 10 s, then 10 in 0.01 s: 1,010 in 10.01 s, not
        // the mean of 100 and 1,000 a second.
        let timed = run(
            json!({}),
            vec![
                step(1, 1000, 100.0, 300, 30.0),
                step(2, 10, 1000.0, 300, 10.0),
                line("rl", 3),
            ],
        );
        let row = Row::new("a", &timed, None);
        assert!((row.train_tokens_per_s.unwrap() - 1010.0 / 10.01).abs() < 1e-9);
        assert!((row.rollout_tokens_per_s.unwrap() - 600.0 / 40.0).abs() < 1e-9);
        let idle = Row::new("b", &run(json!({}), vec![line("rl", 1)]), None);
        assert_eq!(idle.train_tokens_per_s, None);
    }

    #[test]
    fn held_out_tasks_pair_only_within_the_same_environment() {
        let task = |hash: &str| HeldOutTask {
            environment: "shop".into(),
            content_hash: hash.into(),
            task: "a".into(),
        };
        let baseline = BTreeMap::from([(task("1"), 0.0)]);
        // Another `shop` (synthesized again): its `a` is another task.
        let other = BTreeMap::from([(task("2"), 1.0)]);
        let Pairing::Unpaired { unpaired } = Pairing::new(&baseline, &other, 10) else {
            panic!("another environment's task was paired");
        };
        assert_eq!(unpaired, "no task in common");
        let same = BTreeMap::from([(task("1"), 1.0)]);
        let Pairing::Paired(paired) = Pairing::new(&baseline, &same, 10) else {
            panic!("shop/a is shared");
        };
        assert_eq!(paired.better, ["shop/a"]);
    }

    #[test]
    fn a_cycle_of_continuations_ends() {
        let runs = [
            run(json!({}), vec![rl(3, 0.0)]),
            run(json!({}), vec![rl(5, 0.0)]),
        ];
        let cycle = [
            Some(Parent { run: 1, step: 5 }),
            Some(Parent { run: 0, step: 3 }),
        ];
        assert_eq!(offsets(&runs, &cycle), vec![8, 8]);
    }
}
