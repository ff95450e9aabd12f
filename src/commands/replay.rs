//! `forge replay`: prove a trajectory file byte-identical.

use crate::envs::EnvArgs;
use crate::output;
use anyhow::{Result, anyhow, bail};
use clap::Args;
use forge_runtime::Sandbox;
use forge_runtime::replay::replay_episode;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The trajectory file (JSONL) to replay.
    file: PathBuf,
    #[command(flatten)]
    env: EnvArgs,
    /// One JSON object per episode, then a summary object.
    #[arg(long)]
    json: bool,
}

/// Exits 0 when every episode replays identically, 1 naming the first
/// diverging step otherwise.
pub fn run(args: ReplayArgs) -> Result<ExitCode> {
    let episodes = super::read_trajectories(&args.file)?;
    if episodes.is_empty() {
        bail!(
            "{} holds no episode, so there is nothing to replay",
            args.file.display()
        );
    }
    let sandbox = Sandbox::with_defaults()?;
    let env = args.env.load(&sandbox)?;
    let mut diverged = 0;
    for (index, record) in episodes.iter().enumerate() {
        let line = index + 1;
        let divergence = replay_episode(&env, record).map_err(|err| {
            let recorded_on = &record.environment.name;
            let hint = if *recorded_on == env.name() {
                String::new()
            } else {
                // A training run's episodes: their bundles are in the run.
                format!(
                    "; replay it with `--env DIR` naming the `{recorded_on}` bundle (a `forge train` run lists its bundles in envs.json), or `--suite`"
                )
            };
            anyhow!("line {line} of {}: {err:#}{hint}", args.file.display())
        })?;
        if args.json {
            output::json_line(&json!({
                "line": line,
                "task_id": record.task_id,
                "identical": divergence.is_none(),
                "divergence": divergence,
            }));
        } else if let Some(divergence) = &divergence {
            println!(
                "line {line} (task {}) diverged: {divergence}",
                record.task_id
            );
        }
        diverged += usize::from(divergence.is_some());
    }
    let episodes = episodes.len();
    if args.json {
        output::json_line(
            &json!({"summary": true, "episodes": episodes, "identical": episodes - diverged, "diverged": diverged}),
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
