//! `forge eval`: several trials per task, pass^k with bootstrap confidence
//! intervals, per-task flip rates; resumable, keyed by the environment's
//! content hash.

use crate::agents::{AgentArgs, Agents, PolicyKind, decimal};
use crate::commands::{hold, leave_as_found, non_empty};
use crate::envs::EnvArgs;
use crate::flags::{MOST_TRIALS, at_least_one_u64};
use crate::metrics::{self, flip_rate, pass_hat_k};
use crate::output;
use crate::shutdown;
use crate::tasks::PlayArgs;
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use forge_runtime::differences::{Difference, differences};
use forge_runtime::trajectory::{self, EpisodeRecord};
use forge_runtime::{Environment, PreparedTask, Sandbox, TrajectoryWriter};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct EvalArgs {
    #[command(flatten)]
    env: EnvArgs,
    #[command(flatten)]
    agents: AgentArgs,
    #[command(flatten)]
    play: PlayArgs,
    /// Trials per task (pass^k is reported for k = 1..trials) [default: 4;
    /// 1 with --policy replay, which plays each recorded episode once].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MOST_TRIALS))]
    trials: Option<u64>,
    /// Episodes run at once, each on its own thread (for remote models, whose
    /// answers are waited for).
    #[arg(long, default_value_t = 1, value_parser = at_least_one_u64)]
    concurrency: u64,
    /// Bootstrap resamples for the confidence intervals.
    #[arg(long, default_value_t = 1000, value_parser = crate::flags::resamples)]
    bootstrap: usize,
    /// Results go to DIR/<environment content hash>/<policy>/; finished trials
    /// found there are not run again.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// pass^k with its bootstrap interval.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PassK {
    pub k: u64,
    pub value: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

pub fn run(mut args: EvalArgs) -> Result<ExitCode> {
    args.play.as_run_evaluates(&mut args.agents)?;
    let sandbox = Sandbox::with_defaults()?;
    let env = args.env.load_for(&sandbox, &args.play.tasks)?;
    let agents = Agents::new(&args.agents, &env)?;
    if args.concurrency > 1 && agents.batches_locally() {
        eprintln!(
            "note: a local model plays `--batch` episodes at once on its device: --concurrency \
             {} changes nothing here (it runs remote agents' episodes on threads)",
            args.concurrency
        );
    }
    let label = agents.label();
    let tasks = agents.tasks(&args.play, &env)?;
    if args.out.exists() && !args.out.is_dir() {
        bail!(
            "{} is not a directory: --out names the directory of the results",
            args.out.display()
        );
    }
    let dir = args
        .out
        .join(env.content_hash())
        .join(label.replace(['/', ':', ' '], "_"));
    // What this evaluation makes, innermost first: removed again if it
    // fails (or is interrupted) before its first episode, so that nothing
    // half-made is taken for a result (`forge compare`).
    let made: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|path| !path.as_os_str().is_empty() && !path.exists())
        .map(Path::to_owned)
        .collect();
    let existed = made.is_empty();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Held until the cleanup is done: a directory another process holds
    // is refused, and left to it.
    let held = hold(&dir)?;
    let outcome = evaluate(&args, &env, &agents, &tasks, &dir);
    // A finished evaluation has played its episodes.
    if !played(&dir) {
        leave_as_found(&dir, existed);
        for parent in made.iter().skip(1) {
            let _ = std::fs::remove_dir(parent);
        }
    }
    drop(held);
    outcome
}

impl EvalArgs {
    fn trials(&self) -> u64 {
        self.trials.unwrap_or(match self.agents.policy {
            PolicyKind::Replay => 1,
            _ => 4,
        })
    }
}

/// Whether the evaluation in `dir` has recorded an episode.
fn played(dir: &Path) -> bool {
    non_empty(&dir.join(TRAJECTORIES))
}

/// Plays the evaluation's episodes not yet in `dir` (made and held by the
/// caller) and writes its report there.
fn evaluate(
    args: &EvalArgs,
    env: &Environment,
    agents: &Agents,
    tasks: &[&PreparedTask],
    dir: &Path,
) -> Result<ExitCode> {
    let label = agents.label();
    let trajectories = dir.join(TRAJECTORIES);
    let mut settings = agents.settings()?;
    let max_turns = agents.max_turns(&args.play, tasks)?;
    settings["max_turns"] = max_turns.into();
    claim(dir, &settings)?;

    // Resume: an episode is identified by its task and seed (the settings
    // being the same).
    let mut done: BTreeMap<(String, u64), EpisodeRecord> = BTreeMap::new();
    if trajectories.exists() {
        let read = trajectory::read_each(&trajectories)?;
        for (record, line) in read.records.into_iter().zip(read.lines) {
            let record = record.map_err(|err| {
                anyhow!(
                    "{} line {line} is not a trajectory record: {err:#}; to resume this \
                     evaluation, delete that line (its episode is played again) or pass another \
                     --out",
                    trajectories.display()
                )
            })?;
            // The directory names both; a record of another (a file copied
            // in) would be counted as this evaluation's.
            let found = &record.environment.content_hash;
            if *found != env.content_hash() || record.policy != label {
                bail!(
                    "{} holds an episode of policy `{}` on environment `{}` ({}), not of this \
                     evaluation's `{label}` on `{}` ({}): pass another --out",
                    trajectories.display(),
                    record.policy,
                    record.environment.name,
                    output::short_hash(found),
                    env.name(),
                    output::short_hash(env.content_hash())
                );
            }
            // Nor is one played to another limit of turns (appended by
            // `forge run --append`): its outcome is not this evaluation's.
            if record.max_turns != max_turns {
                bail!(
                    "{} line {line} is an episode played to at most {}, not this evaluation's \
                     {max_turns}: pass another --out",
                    trajectories.display(),
                    output::count(record.max_turns, "agent action")
                );
            }
            done.insert((record.task_id.clone(), record.seed), record);
        }
    }
    let mut writer = super::append_trajectories(&trajectories)?;
    let total = tasks.len() as u64 * args.trials();
    let progress = output::progress(total, args.json);
    agents.tell_retries(&progress);
    let episodes = agents.episodes(&args.play, tasks, args.trials())?;
    let pending: Vec<(&PreparedTask, u64)> = episodes
        .iter()
        .filter(|(task, seed)| !done.contains_key(&(task.task.id.clone(), *seed)))
        .copied()
        .collect();
    let (ran, resumed) = (pending.len(), total as usize - pending.len());
    progress.inc(resumed as u64);
    let threads = args.concurrency as usize;
    let mut finished = resumed;
    let stop = shutdown::episodes_flag()?;
    let result = agents.play(env, &pending, max_turns, threads, &stop, |record| {
        writer.write(&record)?;
        progress.inc(1);
        finished += 1;
        done.insert((record.task_id.clone(), record.seed), record);
        Ok(())
    });
    if let Err(err) = result {
        let interrupted = shutdown::interrupted(&err);
        if finished == 0 && !interrupted {
            return Err(err);
        }
        let stopped = format!(
            "stopped after {finished} of {total} episodes, which {} keeps (the same command \
             resumes there)",
            trajectories.display()
        );
        if args.json {
            output::json_stopped(interrupted, finished as u64, total, Some(&trajectories));
        }
        if interrupted {
            progress.finish_and_clear();
            match finished {
                0 => eprintln!("stopped before any episode finished"),
                _ => eprintln!("{stopped}"),
            }
            return Ok(ExitCode::from(shutdown::stopped_status()));
        }
        return Err(err.context(stopped));
    }
    drop(writer);
    if ran > 0 {
        in_canonical_order(&trajectories, &done)?;
    }
    let mut outcomes: BTreeMap<String, Vec<bool>> = BTreeMap::new();
    // How the episodes ended: an agent that loops runs out of turns, one
    // whose dialogue outgrows its model's context is cut there.
    let mut terminations: BTreeMap<&str, usize> = BTreeMap::new();
    let played: Vec<&EpisodeRecord> = episodes
        .iter()
        .map(|(task, seed)| &done[&(task.task.id.clone(), *seed)])
        .collect();
    for ((task, _), record) in episodes.iter().zip(&played) {
        outcomes
            .entry(task.task.id.clone())
            .or_default()
            .push(record.verdict.reward >= 1.0);
        *terminations.entry(record.termination.name()).or_default() += 1;
    }
    let ended = terminations
        .iter()
        .map(|(how, count)| format!("{count} {how}"))
        .collect::<Vec<_>>()
        .join(", ");
    progress.finish_and_clear();

    let successes =
        metrics::successes_per_task(outcomes.iter().flat_map(|(task, trials)| {
            trials.iter().map(move |success| (task.as_str(), *success))
        }));
    let mut rng = ChaCha8Rng::seed_from_u64(args.play.seed);
    let pass: Vec<PassK> = (1..=args.trials())
        .map(|k| {
            let value = pass_hat_k(&successes, k);
            let resampled: Vec<f64> = (0..args.bootstrap)
                .map(|_| {
                    let sample: Vec<(u64, u64)> = (0..successes.len())
                        .map(|_| successes[rng.random_range(0..successes.len())])
                        .collect();
                    pass_hat_k(&sample, k)
                })
                .collect();
            let (ci_low, ci_high) = metrics::percentile_interval(resampled, value);
            PassK {
                k,
                value,
                ci_low,
                ci_high,
            }
        })
        .collect();
    let flips: BTreeMap<&String, f64> = outcomes
        .iter()
        .map(|(task, trials)| (task, flip_rate(trials)))
        .collect();
    let mean_flip = flips.values().sum::<f64>() / flips.len().max(1) as f64;
    let unjudged = super::unjudged(env, played.iter().copied());
    let usage = agents.usage();
    let report = json!({
        "environment": env.name(),
        "content_hash": env.content_hash(),
        "policy": label,
        "user": agents.user_label(),
        "tasks": outcomes.len(),
        // What the report covers: the results directory may also hold the
        // episodes of other selections and seeds, kept for their resumes.
        "task_ids": outcomes.keys().collect::<Vec<_>>(),
        "seed": args.play.seed,
        "trials": args.trials(),
        "episodes_run": ran,
        "episodes_resumed": resumed,
        "pass_hat_k": pass,
        "bootstrap_resamples": args.bootstrap,
        "episodes_with_unevaluated_checks": unjudged,
        "mean_flip_rate": mean_flip,
        "flip_rate": flips,
        // Each task's trials in order, for task-by-task comparisons
        // (`forge compare`).
        "outcomes": outcomes,
        "terminations": terminations,
        "llm_usage": usage.agent,
        "judge_usage": usage.judge,
    });
    std::fs::write(dir.join(REPORT), serde_json::to_vec_pretty(&report)?)?;
    std::fs::write(
        dir.join("report.md"),
        markdown(&report, &pass, mean_flip, &ended, &outcomes),
    )?;
    chart(&dir.join("pass_k.svg"), &label, &pass)?;
    if args.json {
        output::json_line(&report);
    } else {
        let mut table = output::table(&["k", "pass^k", "95% CI"]);
        let shown = metrics::shown_ks(args.trials());
        for row in pass.iter().filter(|row| shown.contains(&row.k)) {
            table.add_row(vec![
                row.k.to_string(),
                format!("{:.3}", row.value),
                format!("[{:.3}, {:.3}]", row.ci_low, row.ci_high),
            ]);
        }
        println!("{table}");
        if shown.len() < pass.len() {
            println!("(report.json and report.md hold every k)");
        }
        let (always, sometimes, never) = solved(&outcomes);
        println!(
            "{} on {}, user {} ({} × {}; {} run, {} resumed); tasks solved always {always}, \
             sometimes {sometimes}, never {never}; mean flip rate {mean_flip:.3}; episodes \
             ended: {ended}; report in {}",
            label,
            env.name(),
            agents.user_label(),
            output::count(outcomes.len(), "task"),
            output::count(args.trials(), "trial"),
            ran,
            resumed,
            dir.display()
        );
        if unjudged > 0 {
            println!("{}", super::unjudged_note(unjudged, played.len()));
        }
        for line in agents.usage_lines() {
            println!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The episodes of an evaluation directory.
pub(crate) const TRAJECTORIES: &str = "trajectories.jsonl";
/// The settings file of an evaluation directory.
pub(crate) const SETTINGS: &str = "settings.json";
/// The report of an evaluation directory.
pub(crate) const REPORT: &str = "report.json";

/// Makes `dir` the evaluation of `settings`: one that holds episodes must
/// have been played under the same; otherwise `settings` are recorded.
/// Settings without an episode protect nothing — an evaluation that failed
/// before its first (a model that would not load on its device, a corrupt
/// checkpoint) does not bar the next one from its directory.
fn claim(dir: &Path, settings: &Value) -> Result<()> {
    let path = dir.join(SETTINGS);
    if !played(dir) {
        return std::fs::write(&path, serde_json::to_vec_pretty(settings)?)
            .with_context(|| format!("writing {}", path.display()));
    }
    let recorded: Value = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("{}: not an evaluation's settings", path.display()))?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => bail!(
            "{} holds episodes but no {SETTINGS} saying how they were played: \
             pass another --out",
            dir.display()
        ),
        Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
    };
    let (recorded, settings) = (at_f32_precision(&recorded), at_f32_precision(settings));
    if let Some(Difference { key, then, now }) = differences(&recorded, &settings).first() {
        bail!(
            "{} holds episodes played with other settings (`{key}`: {then} then, {now} now), \
             which this evaluation would count as its own: pass another --out",
            dir.display()
        );
    }
    Ok(())
}

/// `settings` with each fractional number as an `f32` setting would be
/// recorded now ([`decimal`]): earlier versions recorded such settings as
/// the `f32` holds them (0.699999988079071 for 0.7), and an evaluation they
/// began is still the same evaluation.
fn at_f32_precision(settings: &Value) -> Value {
    match settings {
        Value::Number(number) if number.is_f64() => number
            .as_f64()
            .map_or(Value::Null, |value| decimal(value as f32).into()),
        Value::Array(items) => items.iter().map(at_f32_precision).collect(),
        Value::Object(fields) => fields
            .iter()
            .map(|(key, value)| (key.clone(), at_f32_precision(value)))
            .collect(),
        _ => settings.clone(),
    }
}

/// Rewrites `path` with `records` in the order of their keys (task, seed),
/// whatever order concurrent episodes finished in: the same evaluation
/// gives the same bytes. Written beside and renamed over, so an
/// interruption leaves the old file whole.
fn in_canonical_order(path: &Path, records: &BTreeMap<(String, u64), EpisodeRecord>) -> Result<()> {
    let staged = path.with_extension("jsonl.partial");
    // What an interrupted rewrite left is a copy of records the file holds.
    let _ = std::fs::remove_file(&staged);
    let mut writer = TrajectoryWriter::create(&staged)?;
    for record in records.values() {
        writer.write(record)?;
    }
    drop(writer);
    std::fs::rename(&staged, path)
        .with_context(|| format!("replacing {} with {}", path.display(), staged.display()))
}

/// pass^k against k with its confidence band, as SVG.
fn chart(path: &std::path::Path, label: &str, pass: &[PassK]) -> Result<()> {
    use plotters::prelude::*;
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, (640, 400)).into_drawing_area();
        root.fill(&WHITE)?;
        let max_k = pass.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("pass^k — {label}"), ("sans-serif", 20))
            .margin(16)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(0.5..max_k + 0.5, 0.0..1.05)?;
        chart.configure_mesh().x_desc("k").y_desc("pass^k").draw()?;
        let band = pass
            .iter()
            .map(|row| (row.k as f64, row.ci_high))
            .chain(pass.iter().rev().map(|row| (row.k as f64, row.ci_low)));
        chart.draw_series(std::iter::once(Polygon::new(
            band.collect::<Vec<_>>(),
            BLUE.mix(0.15),
        )))?;
        chart.draw_series(LineSeries::new(
            pass.iter().map(|row| (row.k as f64, row.value)),
            &BLUE,
        ))?;
        chart.draw_series(
            pass.iter()
                .map(|row| Circle::new((row.k as f64, row.value), 4, BLUE.filled())),
        )?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|err| anyhow::anyhow!("drawing {}: {err}", path.display()))
}

/// How many tasks every trial solved, some did, and none did.
fn solved(outcomes: &BTreeMap<String, Vec<bool>>) -> (usize, usize, usize) {
    let mut counts = (0, 0, 0);
    for trials in outcomes.values() {
        match (trials.iter().all(|&s| s), trials.iter().any(|&s| s)) {
            (true, _) => counts.0 += 1,
            (false, true) => counts.1 += 1,
            (false, false) => counts.2 += 1,
        }
    }
    counts
}

fn markdown(
    report: &serde_json::Value,
    pass: &[PassK],
    mean_flip: f64,
    ended: &str,
    outcomes: &BTreeMap<String, Vec<bool>>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Evaluation: {} on {}\n\nUser {}; environment content hash `{}`; {} × {}, seed {}.\n",
        report["policy"].as_str().unwrap_or_default(),
        report["environment"].as_str().unwrap_or_default(),
        report["user"].as_str().unwrap_or_default(),
        report["content_hash"].as_str().unwrap_or_default(),
        output::count(&report["tasks"], "task"),
        output::count(&report["trials"], "trial"),
        report["seed"]
    );
    let _ = writeln!(
        out,
        "| k | pass^k | 95% bootstrap CI ({} resamples) |\n| --- | --- | --- |",
        report["bootstrap_resamples"]
    );
    for row in pass {
        let _ = writeln!(
            out,
            "| {} | {:.3} | [{:.3}, {:.3}] |",
            row.k, row.value, row.ci_low, row.ci_high
        );
    }
    let (always, sometimes, never) = solved(outcomes);
    let _ = writeln!(
        out,
        "\nTasks solved in every trial: {always}; in some: {sometimes}; in none: {never}. \
         Mean flip rate across trials: {mean_flip:.3}. Episodes ended: {ended}.\n"
    );
    let unjudged = report["episodes_with_unevaluated_checks"]
        .as_u64()
        .unwrap_or(0);
    if unjudged > 0 {
        let episodes = outcomes.values().map(Vec::len).sum();
        let _ = writeln!(
            out,
            "{}.\n",
            super::unjudged_note(unjudged as usize, episodes)
        );
    }
    let _ = writeln!(out, "![pass^k](pass_k.svg)\n");
    // Each task, the least solved first: where to look.
    let _ = writeln!(
        out,
        "## Tasks\n\n| task | solved | flip rate |\n| --- | --- | --- |"
    );
    let mut tasks: Vec<(&String, usize, &Vec<bool>)> = outcomes
        .iter()
        .map(|(task, trials)| (task, trials.iter().filter(|&&s| s).count(), trials))
        .collect();
    tasks.sort_by(|a, b| {
        let share = |(_, solved, trials): &(&String, usize, &Vec<bool>)| {
            *solved as f64 / trials.len().max(1) as f64
        };
        share(a).total_cmp(&share(b)).then(a.0.cmp(b.0))
    });
    for (task, successes, trials) in tasks {
        let _ = writeln!(
            out,
            "| {} | {successes}/{} | {:.3} |",
            // τ²-bench's telecom ids hold `|`, which would end the cell.
            task.replace('|', "\\|"),
            trials.len(),
            flip_rate(trials)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_evaluation_begun_with_f32_settings_recorded_exactly_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let then =
            json!({"model": {"temperature": 0.699999988079071, "top_p": 1.0}, "max_turns": 30});
        std::fs::write(dir.path().join(SETTINGS), then.to_string()).unwrap();
        // An episode played under them (claim reads no more of it).
        std::fs::write(dir.path().join(TRAJECTORIES), "{}\n").unwrap();
        let now = json!({"model": {"temperature": decimal(0.7), "top_p": 1.0}, "max_turns": 30});
        claim(dir.path(), &now).unwrap();
        let other = json!({"model": {"temperature": decimal(0.8), "top_p": 1.0}, "max_turns": 30});
        let err = claim(dir.path(), &other).unwrap_err().to_string();
        assert!(
            err.contains("`model.temperature`: 0.7 then, 0.8 now"),
            "{err}"
        );
    }

    #[test]
    fn settings_without_an_episode_bind_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let failed = json!({"model": {"precision": "bf16"}, "max_turns": 30});
        claim(dir.path(), &failed).unwrap();
        std::fs::write(dir.path().join(TRAJECTORIES), "").unwrap();
        let now = json!({"model": {"precision": "f32"}, "max_turns": 30});
        claim(dir.path(), &now).unwrap();
        let recorded: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(SETTINGS)).unwrap()).unwrap();
        assert_eq!(recorded, now);
    }
}
