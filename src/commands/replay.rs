//! `forge replay`: prove a trajectory file byte-identical.

use crate::envs::load_all;
use crate::output;
use anyhow::{Result, anyhow, bail};
use clap::Args;
use forge_runtime::Sandbox;
use forge_runtime::replay::replay_episode;
use forge_suites::Suite;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The trajectory file (JSONL) to replay.
    file: PathBuf,
    /// The bundle directory of an environment the file's episodes were
    /// recorded on (repeatable, as a served file may hold several's); the
    /// built-in example environment when neither this nor `--suite` is given.
    #[arg(long, value_name = "DIR")]
    env: Vec<PathBuf>,
    /// A benchmark suite the episodes were recorded on (repeatable), read
    /// from `--data`: tau-bench/retail, tau-bench/airline, tau2-bench/mock,
    /// tau2-bench/airline, tau2-bench/retail, tau2-bench/telecom or
    /// tau2-bench/banking_knowledge.
    #[arg(long, value_name = "SUITE", requires = "data")]
    suite: Vec<Suite>,
    /// The benchmark data for `--suite`.
    #[arg(long, value_name = "DIR", requires = "suite")]
    data: Option<PathBuf>,
    /// One JSON object per episode, then a summary object.
    #[arg(long)]
    json: bool,
}

/// Exits 0 when every episode replays identically, 1 naming the first
/// diverging step otherwise.
pub fn run(args: ReplayArgs) -> Result<ExitCode> {
    let file = super::read_trajectory_file(&args.file)?;
    let (episodes, lines, torn_tail) = (file.episodes, file.lines, file.torn_tail);
    if episodes.is_empty() {
        bail!(
            "{} holds no episode, so there is nothing to replay",
            args.file.display()
        );
    }
    let sandbox = Sandbox::with_defaults()?;
    let envs = load_all(&args.env, &args.suite, args.data.as_deref(), &sandbox)?;
    let mut diverged = 0;
    for (record, &line) in episodes.iter().zip(&lines) {
        let recorded_on = &record.environment;
        // The very environment it was recorded on, else one of its name
        // (whose other version the replay names).
        let env = envs
            .iter()
            .find(|env| env.content_hash() == recorded_on.content_hash)
            .or_else(|| envs.iter().find(|env| env.name() == recorded_on.name));
        let divergence = match env {
            Some(env) => replay_episode(env, record),
            None => Err(anyhow!(
                "it was recorded on environment `{}`, which is not given (given: {}); replay it \
                 with {}",
                recorded_on.name,
                envs.iter()
                    .map(|env| format!("`{}`", env.name()))
                    .collect::<Vec<_>>()
                    .join(", "),
                match Suite::of_environment(&recorded_on.name) {
                    Some(suite) => format!("`--suite {suite} --data DIR`"),
                    None => format!(
                        "`--env DIR` naming the `{}` bundle (a `forge train` run lists its \
                         bundles in envs.json)",
                        recorded_on.name
                    ),
                }
            )),
        }
        .map_err(|err| anyhow!("line {line} of {}: {err:#}", args.file.display()))?;
        if args.json {
            output::json_line(&json!({
                "line": line,
                "task_id": record.task_id,
                "identical": divergence.is_none(),
                "divergence": divergence,
            }));
        } else if let Some(divergence) = &divergence {
            let said = format!(
                "line {line} (task {}) diverged: {divergence}",
                record.task_id
            );
            println!("{}", output::printable(&said));
        }
        diverged += usize::from(divergence.is_some());
    }
    let episodes = episodes.len();
    if args.json {
        output::json_line(
            &json!({"summary": true, "episodes": episodes, "identical": episodes - diverged, "diverged": diverged, "torn_tail_skipped": torn_tail}),
        );
    } else if diverged == 0 {
        println!(
            "{} replayed byte-identically ({})",
            output::count(episodes, "episode"),
            args.file.display()
        );
    } else {
        println!("{diverged} of {episodes} episodes diverged");
    }
    Ok(if diverged == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
