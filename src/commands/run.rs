//! `forge run`: episodes of a policy on an environment's tasks.

use crate::agents::{AgentArgs, Agents, PolicyKind};
use crate::envs::EnvArgs;
use crate::flags::MOST_TRIALS;
use crate::metrics;
use crate::output;
use crate::shutdown;
use crate::tasks::PlayArgs;
use anyhow::Result;
use clap::Args;
use forge_runtime::trajectory::{EpisodeRecord, Termination};
use forge_runtime::{Environment, Sandbox, TrajectoryWriter, verify};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    env: EnvArgs,
    #[command(flatten)]
    agents: AgentArgs,
    #[command(flatten)]
    play: PlayArgs,
    /// Episodes per task.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=MOST_TRIALS))]
    trials: u64,
    /// Write the trajectories (JSONL) here; the file must not exist unless `--append`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Append to `--out` instead of refusing an existing file.
    #[arg(long, requires = "out")]
    append: bool,
    /// One JSON object per episode, then a summary object.
    #[arg(long)]
    json: bool,
}

pub fn run(mut args: RunArgs) -> Result<ExitCode> {
    args.play.as_run_evaluates(&mut args.agents)?;
    let sandbox = Sandbox::with_defaults()?;
    let env = args.env.load_for(&sandbox, &args.play.tasks)?;
    let agents = Agents::new(&args.agents, &env)?;
    let tasks = agents.tasks(&args.play, &env)?;
    let label = agents.label();
    // Before the file is created: a refused selection leaves none behind.
    let episodes = agents.episodes(&args.play, &tasks, args.trials)?;
    let max_turns = agents.max_turns(&args.play, &tasks)?;
    let mut writer = match (&args.out, args.append) {
        (Some(path), false) => Some(TrajectoryWriter::create(path)?),
        (Some(path), true) => {
            super::refuse_other_environments(path, &[&env])?;
            Some(super::append_trajectories(path)?)
        }
        (None, _) => None,
    };

    let total = tasks.len() as u64 * args.trials;
    let progress = output::progress(total, args.json);
    agents.tell_retries(&progress);
    let mut records = Vec::with_capacity(episodes.len());
    let stop = shutdown::episodes_flag()?;
    // On one thread, records come in the order of `episodes`: by task, then trial.
    let played = agents.play(&env, &episodes, max_turns, 1, &stop, |record| {
        let trial = records.len() as u64 % args.trials;
        if let Some(writer) = &mut writer {
            writer.write(&record)?;
        }
        if args.json {
            output::json_line(&episode_json(&record, trial));
        }
        progress.set_message(format!(
            "{} reward {}",
            record.task_id, record.verdict.reward
        ));
        progress.inc(1);
        records.push((trial, record));
        Ok(())
    });
    if let Err(err) = played {
        let interrupted = shutdown::interrupted(&err);
        // A run that failed before its first episode (a model that does not
        // load, an endpoint that does not answer) leaves no empty file behind
        // for the next try to be refused on.
        if let (Some(path), false, true) = (&args.out, args.append, records.is_empty()) {
            drop(writer);
            let _ = std::fs::remove_file(path);
        }
        if records.is_empty() && !interrupted {
            return Err(err);
        }
        progress.finish_and_clear();
        if args.json {
            // The file is kept where it was appended to or holds episodes.
            let kept = args
                .out
                .as_deref()
                .filter(|_| args.append || !records.is_empty());
            output::json_stopped(interrupted, records.len() as u64, total, kept);
        } else if !records.is_empty() {
            // The finished episodes' table, which the error would otherwise
            // lose; no summary, whose rates and pass^k would read as the
            // whole run's.
            println!("{}", episodes_table(&records));
        }
        let stopped = match (records.len(), &args.out) {
            (0, _) => "stopped before any episode finished".to_owned(),
            (kept, Some(path)) => format!(
                "stopped after {kept} of {total} episodes, which {} keeps",
                path.display()
            ),
            (kept, None) => format!("stopped after {kept} of {total} episodes"),
        };
        if interrupted {
            eprintln!("{stopped}");
            return Ok(ExitCode::from(shutdown::stopped_status()));
        }
        return Err(err.context(stopped));
    }
    progress.finish_and_clear();
    report(&env, &args, &label, &agents, &records);
    Ok(ExitCode::SUCCESS)
}

/// A row per episode: its task, trial, reward and how it ended.
fn episodes_table(records: &[(u64, EpisodeRecord)]) -> comfy_table::Table {
    let mut table = output::table(&[
        "task", "trial", "reward", "partial", "outputs", "steps", "fuel", "end",
    ]);
    for (trial, record) in records {
        let verdict = &record.verdict;
        table.add_row(vec![
            output::cell(&record.task_id),
            trial.to_string(),
            format!("{:.0}", verdict.reward),
            format!("{:.2}", verdict.partial_credit),
            format!(
                "{}/{}",
                verify::found(&verdict.outputs),
                verdict.outputs.len()
            ),
            record.steps.len().to_string(),
            record
                .steps
                .iter()
                .map(|step| step.fuel)
                .sum::<u64>()
                .to_string(),
            record.termination.name().to_owned(),
        ]);
    }
    table
}

fn episode_json(record: &EpisodeRecord, trial: u64) -> serde_json::Value {
    json!({
        "task_id": record.task_id,
        "trial": trial,
        "seed": record.seed,
        "reward": record.verdict.reward,
        "partial_credit": record.verdict.partial_credit,
        "state_match": record.verdict.state_match,
        "outputs_found": verify::found(&record.verdict.outputs),
        "outputs_required": record.verdict.outputs.len(),
        "assertions_met": verify::met(&record.verdict.assertions),
        "assertions": record.verdict.assertions.len(),
        "calls_made": verify::met(&record.verdict.calls),
        "calls_required": record.verdict.calls.len(),
        "nl_assertions_met": verify::met(&record.verdict.nl_assertions),
        "nl_assertions_judged": record.verdict.nl_assertions.len(),
        "steps": record.steps.len(),
        "fuel": record.steps.iter().map(|step| step.fuel).sum::<u64>(),
        "termination": record.termination,
        "final_state_sha256": record.final_state_sha256,
    })
}

fn report(
    env: &Environment,
    args: &RunArgs,
    label: &str,
    agents: &Agents,
    records: &[(u64, EpisodeRecord)],
) {
    let user = agents.user_label();
    let usage = agents.usage();
    let episodes = records.len();
    let run_seed = (args.agents.policy != PolicyKind::Replay).then_some(args.play.seed);
    let successes = records
        .iter()
        .filter(|(_, record)| record.verdict.reward >= 1.0)
        .count();
    let success_rate = successes as f64 / episodes.max(1) as f64;
    let mean_partial = records
        .iter()
        .map(|(_, record)| record.verdict.partial_credit)
        .sum::<f64>()
        / episodes.max(1) as f64;
    // Episodes in which the simulated user gave wrong or missing facts (MEU masking's judge).
    let masked: Vec<bool> = records
        .iter()
        .map(|(_, record)| {
            env.task(&record.task_id).is_some_and(|task| {
                forge_rl::judge::misinformation(&task.task, &record.messages).is_some()
            })
        })
        .collect();
    let masked_count = masked.iter().filter(|masked| **masked).count();
    let unmasked_successes = records
        .iter()
        .zip(&masked)
        .filter(|((_, record), masked)| !**masked && record.verdict.reward >= 1.0)
        .count();
    let unmasked_success_rate = unmasked_successes as f64 / (episodes - masked_count).max(1) as f64;
    let masked_share = masked_count as f64 / episodes.max(1) as f64;
    // pass^k over the trials of each task (pass^1 is the success rate).
    let per_task = metrics::successes_per_task(
        records
            .iter()
            .map(|(_, record)| (record.task_id.as_str(), record.verdict.reward >= 1.0)),
    );
    let pass_hat_k: Vec<(u64, f64)> = (1..=args.trials)
        .map(|k| (k, metrics::pass_hat_k(&per_task, k)))
        .collect();
    // Episodes whose task has NL assertions that no judge evaluated.
    let unevaluated = super::unjudged(env, records.iter().map(|(_, record)| record));
    let ended = |termination| {
        records
            .iter()
            .filter(|(_, record)| record.termination == termination)
            .count()
    };
    let context_full = ended(Termination::ContextFull);
    let out_of_turns = ended(Termination::MaxTurns);
    if args.json {
        output::json_line(&json!({
            "summary": true,
            "episodes_with_unevaluated_checks": unevaluated,
            "episodes_context_full": context_full,
            "episodes_max_turns": out_of_turns,
            "masked_share": masked_share,
            "unmasked_success_rate": unmasked_success_rate,
            "environment": env.name(),
            "content_hash": env.content_hash(),
            "policy": label,
            "user": user,
            // A replay's episodes keep their recorded seeds: no run seed.
            "seed": run_seed,
            "episodes": episodes,
            "successes": successes,
            "success_rate": success_rate,
            "mean_partial_credit": mean_partial,
            "trials": args.trials,
            "pass_hat_k": pass_hat_k
                .iter()
                .map(|(k, value)| json!({"k": k, "value": value}))
                .collect::<Vec<_>>(),
            "llm_usage": usage.agent,
            "judge_usage": usage.judge,
        }));
        return;
    }
    println!("{}", episodes_table(records));
    println!(
        "environment {} ({}), policy {}, user {user}, {}: success rate {successes}/{episodes} = {success_rate:.3}, mean partial credit {mean_partial:.3}",
        env.name(),
        output::short_hash(env.content_hash()),
        label,
        run_seed.map_or("seeds as recorded".to_owned(), |seed| format!(
            "seed {seed}"
        ))
    );
    if unevaluated > 0 {
        println!("{}", super::unjudged_note(unevaluated, episodes));
    }
    if context_full > 0 {
        println!(
            "{context_full} of {episodes} episodes outgrew the model's context and ended there \
             (`context_full`), judged as they stood"
        );
    }
    if out_of_turns > 0 {
        // The limit is each episode's own (a replay's, as recorded).
        let limits: std::collections::BTreeSet<usize> = records
            .iter()
            .filter(|(_, record)| record.termination == Termination::MaxTurns)
            .map(|(_, record)| record.max_turns)
            .collect();
        let limits: Vec<String> = limits.iter().map(ToString::to_string).collect();
        println!(
            "{out_of_turns} of {} ran out of turns (`max_turns`: {}; `--max-turns` sets the \
             limit)",
            output::count(episodes, "episode"),
            output::count(limits.join(" or "), "agent action")
        );
    }
    if args.trials > 1 {
        let shown = metrics::shown_ks(args.trials);
        let values: Vec<String> = pass_hat_k
            .iter()
            .filter(|(k, _)| shown.contains(k))
            .map(|(k, value)| format!("pass^{k} {value:.3}"))
            .collect();
        let every = match shown.len() < pass_hat_k.len() {
            true => " (`--json` gives every k)",
            false => "",
        };
        println!(
            "{} per task: {}{every}",
            output::count(args.trials, "trial"),
            values.join(", ")
        );
    }
    if masked_count > 0 {
        println!(
            "the user gave wrong or missing facts in {} ({masked_share:.3}); success rate without them {unmasked_success_rate:.3}",
            output::count(masked_count, "episode")
        );
    }
    for line in agents.usage_lines() {
        println!("{line}");
    }
    if let Some(path) = &args.out {
        println!("trajectories: {}", path.display());
    }
}
