//! `forge bench replay <suite> --data DIR`: every task's gold actions,
//! replayed as the suite's reference implementation replays them, and what
//! the operations of an episode cost on the suite's database.

use crate::output;
use anyhow::{Context, Result, bail};
use clap::Args;
use forge_runtime::environment::execute;
use forge_runtime::{Environment, Sandbox, State, verify};
use forge_suites::Suite;
use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The suite: tau-bench/retail, tau-bench/airline, tau2-bench/mock,
    /// tau2-bench/airline, tau2-bench/retail, tau2-bench/telecom or
    /// tau2-bench/banking_knowledge.
    suite: Suite,
    /// The benchmark data, laid out like the benchmarks' repositories
    /// (`<DIR>/tau-bench/retail/orders.json`, …).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Print one JSON object per task
    /// (`{"task_id", "actions": [{"name", "output"}], "final_db_sha256"}`,
    /// and `"final_user_db_sha256"` for the domains whose user has a
    /// database), then a summary object, instead of the summary and cost
    /// tables.
    #[arg(long)]
    json: bool,
}

pub fn run(args: ReplayArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let bundle = args.suite.load(&args.data)?;
    let sandbox = Sandbox::with_defaults()?;
    let env = Environment::load(&sandbox, bundle)
        .with_context(|| format!("loading suite {}", args.suite))?;
    if env.tasks().is_empty() {
        bail!("environment `{}` has no tasks to replay", env.name());
    }
    let loaded = started.elapsed();
    let bar = output::progress(env.tasks().len() as u64, args.json);
    let mut failed = Vec::new();
    let mut finals = Vec::with_capacity(env.tasks().len());
    let (mut calls, mut errors) = (0, 0);
    for task in env.tasks() {
        let (replay, state) = forge_suites::replay(&env, task);
        calls += replay.actions.len();
        errors += replay
            .actions
            .iter()
            .filter(|action| action.output.starts_with("Error:"))
            .count();
        if replay.failed() {
            failed.push(replay.task_id.clone());
        }
        if args.json {
            output::json_line(&serde_json::to_value(&replay)?);
        }
        finals.push(state);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let replayed = started.elapsed() - loaded;
    if args.json {
        output::json_line(&serde_json::json!({
            "summary": true,
            "suite": args.suite.to_string(),
            "tasks": env.tasks().len(),
            "gold_calls": calls,
            "error_outputs": errors,
            "sandbox_errors": failed,
            "load_s": loaded.as_secs_f64(),
            "replay_s": replayed.as_secs_f64(),
        }));
    } else {
        let mut table = output::table(&[
            "suite",
            "tasks",
            "gold calls",
            "error outputs",
            "sandbox errors",
            "load s",
            "replay s",
        ]);
        table.add_row(vec![
            args.suite.to_string(),
            env.tasks().len().to_string(),
            calls.to_string(),
            errors.to_string(),
            failed.len().to_string(),
            format!("{:.2}", loaded.as_secs_f64()),
            format!("{:.2}", replayed.as_secs_f64()),
        ]);
        println!("{table}");
        // The reference suites' gold actions include calls the tools
        // refuse, as the reference answers them; those are no failures.
        println!(
            "error outputs: gold calls a tool answered `Error: …`, as the reference does; \
             sandbox errors: tasks whose replay the sandbox stopped (a failure); load s: \
             reading the data and building the environment, each task's gold actions played \
             once to prove it solvable; replay s: every task's gold actions played again from \
             its initial database, each call's output and the final database hashed"
        );
        println!("{}", costs(&env, &finals));
    }
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "sandbox errors in the replay of {} task(s): {}",
            failed.len(),
            failed.join(", ")
        );
        Ok(ExitCode::FAILURE)
    }
}

/// What an episode's operations cost on this suite: reset, a tool call, the
/// reward's state check, and (for comparison) hashing the whole state.
fn costs(env: &Environment, finals: &[State]) -> comfy_table::Table {
    let tasks = env.tasks();
    // Each row names its statistic: a mean, or the tool call's median.
    let mut table = output::table(&["operation", "time", "what it does"]);
    let mut row = |operation: &str, time: Duration, what: &str| {
        table.add_row(vec![
            operation.to_owned(),
            format_duration(time),
            what.to_owned(),
        ]);
    };

    let resets = 100_000;
    let start = Instant::now();
    for index in 0..resets {
        black_box(tasks[index % tasks.len()].initial.clone());
    }
    row(
        "reset, mean",
        start.elapsed() / resets as u32,
        "a fresh copy of the initial database (persistent: shares every record with it until \
         a write)",
    );

    let mut instance = env.component().instance();
    let mut latencies = Vec::new();
    for task in tasks {
        let mut state = task.initial.clone();
        for call in &task.task.gold_actions {
            let start = Instant::now();
            let executed = execute(&mut instance, &state, call);
            latencies.push(start.elapsed());
            state = executed.state;
        }
    }
    let mean = latencies.iter().sum::<Duration>() / latencies.len().max(1) as u32;
    latencies.sort();
    let median = latencies
        .get(latencies.len() / 2)
        .copied()
        .unwrap_or_default();
    row(
        "tool call, median",
        median,
        "a gold call in the sandbox, arguments validated, writes committed",
    );
    row(
        "tool call, mean",
        mean,
        "the same, mean (calls that scan a whole table weigh in)",
    );

    let rules = &env.bundle().manifest.verify;
    let start = Instant::now();
    for (task, reached) in tasks.iter().zip(finals) {
        black_box(verify::verify(
            rules,
            &task.initial,
            &task.gold,
            reached,
            &task.task.required_outputs,
            &[],
            verify::Checks::default(),
        ));
    }
    row(
        "reward state check, mean",
        start.elapsed() / tasks.len().max(1) as u32,
        "final database against the gold one (memoised digests: only changed records are hashed)",
    );

    let sample = tasks.len().min(20);
    let start = Instant::now();
    for task in &tasks[..sample] {
        black_box(task.initial.sha256());
    }
    row(
        "full database hash, mean",
        start.elapsed() / sample.max(1) as u32,
        "sha256 of the canonical JSON of the whole database, from scratch",
    );
    table
}

fn format_duration(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    if micros < 1.0 {
        format!("{:.0} ns", micros * 1e3)
    } else if micros < 1e3 {
        format!("{micros:.1} µs")
    } else {
        format!("{:.1} ms", micros / 1e3)
    }
}
