//! `forge replay`: prove a trajectory file byte-identical.

use crate::envs::load_all;
use crate::output;
use anyhow::{Result, anyhow, bail};
use clap::Args;
use forge_runtime::replay::{check_recorded_on, replay_episode};
use forge_runtime::trajectory::{self, EpisodeRecord};
use forge_runtime::{Environment, Sandbox};
use forge_suites::Suite;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(after_help = "Exit status: 0 when every episode replays identically, \
    1 when any diverged, 2 when none did but some could not be replayed")]
pub struct ReplayArgs {
    /// The trajectory file (JSONL) to replay, or a `forge eval` results
    /// directory (its `trajectories.jsonl`).
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

/// What `forge replay` exits with, as `diff` does: 0 when every episode
/// replays identically; 1 when any diverged; 2 when none diverged but it
/// could not replay them all: the file unreadable, an environment not
/// given, an episode its environment cannot play (a task it lacks, calls
/// whose arguments are not JSON).
pub(crate) const TROUBLE: u8 = 2;

/// Said of an episode of an environment named as the built-in example
/// but not it, replayed without `--env`.
const NOT_THE_EXAMPLE: &str = "; without --env the built-in example is tried: replay it with \
     `--env DIR` naming the bundle it was recorded on";

pub fn run(args: ReplayArgs) -> Result<ExitCode> {
    Ok(replay(args).unwrap_or_else(|err| {
        output::error(&err);
        ExitCode::from(TROUBLE)
    }))
}

/// Replays every episode of the file, saying of each one that is not
/// identical how it diverged or why it could not be replayed. A line that
/// is no episode record (damaged, edited) is one that could not be: the
/// others are replayed all the same.
fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let path = super::trajectory_file(&args.file)?;
    let file = trajectory::read_each(&path)?;
    if file.torn_tail {
        super::warn_torn_tail(&path);
    }
    if file.records.is_empty() {
        bail!(
            "{} holds no episode, so there is nothing to replay",
            path.display()
        );
    }
    let sandbox = Sandbox::with_defaults()?;
    let envs = load_all(&args.env, &args.suite, args.data.as_deref(), &sandbox)?;
    let builtin = args.env.is_empty() && args.suite.is_empty();
    // Each line's episode and environment, or why it cannot be replayed (a
    // damaged line, an environment not given or another version of it),
    // which is said when its turn comes: the others are replayed all the
    // same.
    let episodes: Vec<Result<(&EpisodeRecord, &Environment)>> = file
        .records
        .iter()
        .map(|record| {
            let record = record
                .as_ref()
                .map_err(|damage| anyhow!("it is not a trajectory record: {damage:#}"))?;
            let env = environment_of(&envs, record).map_err(|err| {
                // An environment of the example's name, not the example.
                let named = envs.iter().any(|env| env.name() == record.environment.name);
                let hint = if builtin && named {
                    NOT_THE_EXAMPLE
                } else {
                    ""
                };
                anyhow!("{err:#}{hint}")
            })?;
            Ok((record, env))
        })
        .collect();
    // A file none of whose episodes has its environment given says so
    // once, not once an episode.
    if episodes.iter().all(Result::is_err)
        && let Some((err, line)) = file
            .records
            .iter()
            .zip(&episodes)
            .zip(&file.lines)
            .find_map(|((record, episode), line)| match (record, episode) {
                (Ok(_), Err(err)) => Some((err, line)),
                _ => None,
            })
    {
        bail!("line {line} of {}: {err:#}", path.display());
    }
    let (mut diverged, mut unreplayable) = (0, 0);
    for ((episode, record), &line) in episodes.iter().zip(&file.records).zip(&file.lines) {
        let outcome = match episode {
            Ok((record, env)) => replay_episode(env, record),
            Err(err) => Err(anyhow!("{err:#}")),
        };
        // Of any record, its environment given or not.
        let task_id = record.as_ref().ok().map(|record| record.task_id.as_str());
        if args.json {
            let mut said = json!({"line": line, "task_id": task_id});
            match &outcome {
                Ok(divergence) => {
                    said["identical"] = json!(divergence.is_none());
                    said["divergence"] = json!(divergence);
                }
                Err(err) => {
                    said["identical"] = Value::Null;
                    said["error"] = json!(format!("{err:#}"));
                }
            }
            output::json_line(&said);
        } else {
            let said = match &outcome {
                Ok(None) => None,
                Ok(Some(divergence)) => Some(format!("diverged: {divergence}")),
                Err(err) => Some(format!("could not be replayed: {err:#}")),
            };
            if let Some(said) = said {
                let said = match task_id {
                    Some(task) => format!("line {line} (task {task}) {said}"),
                    None => format!("line {line} {said}"),
                };
                println!("{}", output::printable(&said));
            }
        }
        match outcome {
            Ok(None) => {}
            Ok(Some(_)) => diverged += 1,
            Err(_) => unreplayable += 1,
        }
    }
    let episodes = episodes.len();
    if args.json {
        output::json_line(&json!({
            "summary": true,
            "episodes": episodes,
            "identical": episodes - diverged - unreplayable,
            "diverged": diverged,
            "unreplayable": unreplayable,
            "torn_tail_skipped": file.torn_tail,
        }));
    } else if diverged + unreplayable == 0 {
        println!(
            "{} replayed byte-identically ({})",
            output::count(episodes, "episode"),
            path.display()
        );
    } else {
        let unreplayable = match unreplayable {
            0 => String::new(),
            n => format!(", {n} could not be replayed"),
        };
        println!("{diverged} of {episodes} episodes diverged{unreplayable}");
    }
    Ok(match (diverged, unreplayable) {
        (0, 0) => ExitCode::SUCCESS,
        (0, _) => ExitCode::from(TROUBLE),
        _ => ExitCode::FAILURE,
    })
}

/// The environment `record` was recorded on, of those given: the very one
/// (its content hash), else an error naming what to give instead.
fn environment_of<'e>(envs: &'e [Environment], record: &EpisodeRecord) -> Result<&'e Environment> {
    let recorded_on = &record.environment;
    if let Some(env) = envs
        .iter()
        .find(|env| env.content_hash() == recorded_on.content_hash)
    {
        return Ok(env);
    }
    if let Some(env) = envs.iter().find(|env| env.name() == recorded_on.name) {
        // Another version of it: the check names both.
        return check_recorded_on(env, record).map(|()| env);
    }
    bail!(
        "it was recorded on environment `{}`, which is not given (given: {}); replay it with {}",
        recorded_on.name,
        envs.iter()
            .map(|env| format!("`{}`", env.name()))
            .collect::<Vec<_>>()
            .join(", "),
        match Suite::of_environment(&recorded_on.name) {
            Some(suite) => format!("`--suite {suite} --data DIR`"),
            None => format!(
                "`--env DIR` naming the `{}` bundle (a `forge train` run lists its bundles in \
                 envs.json)",
                recorded_on.name
            ),
        }
    )
}
