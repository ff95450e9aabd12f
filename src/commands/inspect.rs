//! `forge inspect`: an environment's tools and tasks.

use crate::envs::EnvArgs;
use crate::output;
use anyhow::Result;
use clap::Args;
use forge_runtime::schema::ToolSpec;
use forge_runtime::{Actor, Sandbox};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// An environment bundle directory (as `--env DIR`).
    #[arg(value_name = "DIR", conflicts_with_all = ["env", "suite"])]
    bundle: Option<PathBuf>,
    #[command(flatten)]
    env: EnvArgs,
    /// Print one JSON object with the tool schemas and tasks.
    #[arg(long)]
    json: bool,
}

pub fn run(args: InspectArgs) -> Result<ExitCode> {
    let sandbox = Sandbox::with_defaults()?;
    let env = EnvArgs {
        env: args.env.env.or(args.bundle),
        ..args.env
    }
    .load(&sandbox)?;
    let tools = env.component().tools();
    let user_tools = env.component().tools_of(Actor::User);
    if args.json {
        output::json_line(&json!({
            "name": env.name(),
            "description": env.bundle().manifest.description,
            "content_hash": env.content_hash(),
            "component_sha256": env.component().wasm_sha256(),
            "tools": tools.iter().map(|tool| tool.to_openai()).collect::<Vec<_>>(),
            "user_tools": user_tools.iter().map(|tool| tool.to_openai()).collect::<Vec<_>>(),
            "splits": env.bundle().manifest.splits,
            "tasks": env.tasks().iter().map(|task| json!({
                "id": task.task.id,
                "instruction": task.task.instruction,
                "gold_actions": task.task.gold_actions.len(),
                "required_outputs": task.task.required_outputs,
                "gold_final_state_sha256": task.gold.sha256(),
            })).collect::<Vec<_>>(),
        }));
        return Ok(ExitCode::SUCCESS);
    }
    // A suite's description is its whole policy (hundreds of lines): its
    // first line heads the tools and tasks, and `--json` holds the rest.
    let description = env.bundle().manifest.description.trim();
    let mut lines = description.lines();
    println!(
        "{} — {}",
        env.name(),
        output::printable(lines.next().unwrap_or_default())
    );
    let more = lines.count();
    if more > 0 {
        let lines = if more == 1 { "line" } else { "lines" };
        println!("({more} more {lines} of the description: --json prints it whole)");
    }
    println!("content hash {}\n", env.content_hash());
    println!("{}\n", tool_table("tool", tools));
    if !user_tools.is_empty() {
        println!("{}\n", tool_table("user's tool", user_tools));
    }
    let mut table = output::table(&["task", "gold actions", "outputs", "instruction"]);
    for task in env.tasks() {
        table.add_row(vec![
            output::cell(&task.task.id),
            task.task.gold_actions.len().to_string(),
            output::cell(&task.task.required_outputs.join("; ")),
            output::cell(&task.task.instruction),
        ]);
    }
    println!("{table}");
    let splits = &env.bundle().manifest.splits;
    if !splits.is_empty() {
        let sizes: Vec<String> = splits
            .iter()
            .map(|(name, ids)| format!("{name} ({})", ids.len()))
            .collect();
        println!("\nsplits (--tasks split:NAME): {}", sizes.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// The tools' names, parameters and descriptions.
fn tool_table(heading: &str, tools: &[ToolSpec]) -> comfy_table::Table {
    let mut table = output::table(&[heading, "parameters", "description"]);
    for tool in tools {
        let parameters = tool
            .parameters
            .get("properties")
            .and_then(|p| p.as_object())
            .map(|p| p.keys().cloned().collect::<Vec<_>>().join(", "))
            .unwrap_or_default();
        table.add_row(vec![
            output::cell(&tool.name),
            output::cell(&parameters),
            output::cell(&tool.description),
        ]);
    }
    table
}
