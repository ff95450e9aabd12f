//! `forge model prompts`: how long a model's prompts run on an environment,
//! against its context — before a run finds its episodes cut short.

use super::resolve;
use crate::envs::EnvArgs;
use crate::flags::at_least_one_u64;
use crate::output;
use crate::tasks::TaskSelection;
use anyhow::Result;
use clap::Args;
use forge_runtime::Sandbox;
use forge_runtime::episode::EpisodeSettings;
use forge_trainer::checkpoint;
use forge_trainer::train::data::gold_turns;
use serde_json::json;

#[derive(Args, Debug)]
pub struct PromptsArgs {
    /// A GGUF file, a checkpoint directory, or the name of a fetched model.
    model: String,
    #[command(flatten)]
    env: EnvArgs,
    /// `all`, `first:N`, `split:NAME`, `heldout:RUN_DIR`, or task ids
    /// separated by commas (as for `forge run`).
    #[arg(
        long,
        default_value = "all",
        value_name = "all|N|first:N|split:NAME|heldout:RUN_DIR|ID,ID"
    )]
    tasks: TaskSelection,
    /// Most agent actions of a gold episode (as for `forge run`).
    #[arg(
        long,
        default_value_t = EpisodeSettings::default().max_turns as u64,
        value_parser = at_least_one_u64,
    )]
    max_turns: u64,
    /// A JSON line per task, then a summary line.
    #[arg(long)]
    json: bool,
}

/// The token counts of one task's gold episode.
struct Lengths {
    task: String,
    turns: usize,
    /// The first turn's prompt: the system prompt, the tools, the opening.
    first_prompt: usize,
    /// The longest turn, its prompt and reply together.
    longest: usize,
}

/// Plays each selected task's gold episode, prompts each of its agent turns
/// as the model is prompted (a checkpoint's own prompt settings), and reports
/// the token counts against the model's context.
pub fn prompts(args: &PromptsArgs) -> Result<()> {
    let path = resolve(&args.model)?;
    // A model Forge cannot run still has prompts to measure.
    let context = checkpoint::read_model_config(&path)
        .ok()
        .and_then(|config| config.context);
    let tokenizer = checkpoint::load_tokenizer(&path)?;
    let env = args.env.load(&Sandbox::with_defaults()?)?;
    let style = checkpoint::load_prompt(&path)?.style(&env.bundle().manifest.description);
    let mut lengths = Vec::new();
    for task in args.tasks.select(&env)? {
        let turns = gold_turns(&env, task, &style, &tokenizer, args.max_turns as usize)?;
        lengths.push(Lengths {
            task: task.task.id.clone(),
            turns: turns.len(),
            first_prompt: turns.first().map_or(0, |turn| turn.prompt.len()),
            longest: turns
                .iter()
                .map(|turn| turn.prompt.len() + turn.completion.len())
                .max()
                .unwrap_or(0),
        });
    }
    let fits = |length: &Lengths| context.is_none_or(|context| length.longest <= context);
    let too_long = lengths.iter().filter(|length| !fits(length)).count();
    let longest = lengths.iter().max_by_key(|length| length.longest);
    if args.json {
        for length in &lengths {
            output::json_line(&json!({
                "task": length.task,
                "turns": length.turns,
                "first_prompt_tokens": length.first_prompt,
                "longest_turn_tokens": length.longest,
                "fits": fits(length),
            }));
        }
        output::json_line(&json!({
            "summary": true,
            "environment": env.name(),
            "context": context,
            "tasks": lengths.len(),
            "tasks_past_context": too_long,
            "longest_turn_tokens": longest.map(|length| length.longest),
        }));
        return Ok(());
    }
    let mut table = output::table(&["task", "turns", "first prompt", "longest turn", "fits"]);
    for length in &lengths {
        table.add_row(vec![
            length.task.clone(),
            length.turns.to_string(),
            length.first_prompt.to_string(),
            length.longest.to_string(),
            if fits(length) { "yes" } else { "no" }.to_owned(),
        ]);
    }
    println!("{table}");
    let context = match context {
        Some(context) => format!("the model's context of {context} tokens"),
        None => "the model's context (its file does not say how long it is)".to_owned(),
    };
    if let Some(longest) = longest {
        println!(
            "{}: the longest gold turn is {} tokens, prompt and reply (task {}); {} of {} go \
             past {context}",
            env.name(),
            longest.longest,
            longest.task,
            output::count(too_long, "task"),
            lengths.len(),
        );
    }
    Ok(())
}
