//! `forge show`: read a trajectory file's episodes as dialogues — who said
//! what, which calls were made and what they answered, how the episode
//! ended and was judged — the way one reads what a policy did; a training
//! run's RL episodes with what the update made of each.

use crate::output;
use anyhow::{Result, bail};
use clap::Args;
use forge_runtime::text::shortened;
use forge_runtime::trajectory::{self, ChatMessage, EpisodeRecord, Role, UserRef};
use forge_runtime::{ToolCall, verify};
use forge_trainer::train::scores::{self, RolloutScore};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Characters of a message or result shown unless `--full`.
const SHOWN: usize = 400;

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The trajectory file (JSONL): what `forge run --out` writes, a
    /// `forge eval` results directory (its `trajectories.jsonl`), or a
    /// training run's `episodes/*.jsonl` (an RL step's shown with each
    /// episode's advantage, from the scores file beside it).
    file: PathBuf,
    /// Only the episodes of these tasks (comma-separated or repeated).
    #[arg(long = "task", value_name = "ID", value_delimiter = ',')]
    tasks: Vec<String>,
    /// Only the episode on this line of the file (as `forge replay` names
    /// episodes).
    #[arg(long, value_name = "N")]
    line: Option<usize>,
    /// Messages and results whole, rather than cut at 400 characters.
    #[arg(long)]
    full: bool,
}

pub fn run(args: ShowArgs) -> Result<ExitCode> {
    let path = super::trajectory_file(&args.file)?;
    let file = trajectory::read_each(&path)?;
    if file.torn_tail {
        super::warn_torn_tail(&path);
    }
    // A line that is no episode record (damaged, edited) is named and left
    // out, as `forge replay` does: the others are shown all the same.
    let (mut records, mut lines) = (Vec::new(), Vec::new());
    for (record, line) in file.records.into_iter().zip(file.lines) {
        match record {
            Ok(record) => {
                records.push(record);
                lines.push(line);
            }
            Err(damage) if args.line == Some(line) => bail!(
                "--line {line}: that line of {} is not a trajectory record: {damage:#}",
                path.display()
            ),
            Err(damage) if args.line.is_none() => eprintln!(
                "warning: line {line} of {} is not a trajectory record ({damage:#}); it is skipped",
                path.display()
            ),
            Err(_) => {}
        }
    }
    // As typed in a list: `--task "a, b"`.
    let tasks: Vec<String> = args
        .tasks
        .iter()
        .map(|task| task.trim().to_owned())
        .collect();
    let episodes = records.len();
    let (Some(first), Some(last)) = (lines.first(), lines.last()) else {
        bail!("{} holds no episode to show", path.display());
    };
    if let Some(line) = args.line.filter(|line| !lines.contains(line)) {
        bail!(
            "--line {line}: no episode is on that line of {}, which holds {} (on lines {first} \
             to {last})",
            path.display(),
            output::count(episodes, "episode")
        );
    }
    if let Some(task) = tasks
        .iter()
        .find(|task| !records.iter().any(|record| record.task_id == **task))
    {
        bail!("--task `{task}`: {} holds no episode of it", path.display());
    }
    if let Some(line) = args.line {
        let at = lines
            .iter()
            .position(|&at| at == line)
            .expect("checked above");
        let task = &records[at].task_id;
        if !tasks.is_empty() && !tasks.contains(task) {
            bail!(
                "--line {line} is an episode of task `{task}`, not of --task {}",
                tasks.join(",")
            );
        }
    }
    let scores = update_scores(&path, &records);
    let most = (!args.full).then_some(SHOWN);
    let shown = records
        .iter()
        .zip(&lines)
        .enumerate()
        .filter(|(_, (record, line))| {
            args.line.is_none_or(|wanted| wanted == **line)
                && (tasks.is_empty() || tasks.contains(&record.task_id))
        });
    for (position, (index, (record, &line))) in shown.enumerate() {
        if position > 0 {
            println!();
        }
        print!("{}", output::printable(&dialogue(line, record, most)));
        if let Some(score) = scores.as_ref().map(|scores| &scores[index]) {
            print!("{}", entry("update", &update(score)));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What the update made of each of the `episodes` of the RL step saved in
/// `file`, where its scores file is beside it; one that cannot be read, or
/// does not hold a score of each episode's task in turn, is named and left
/// out.
fn update_scores(file: &Path, episodes: &[EpisodeRecord]) -> Option<Vec<RolloutScore>> {
    let path = scores::beside(file);
    if !path.exists() {
        return None;
    }
    let other_task = |scores: &[RolloutScore]| {
        scores
            .iter()
            .zip(episodes)
            .position(|(score, record)| score.task_id != record.task_id)
    };
    match scores::read(&path) {
        Ok(scores) if scores.len() != episodes.len() => {
            eprintln!(
                "warning: {} holds {} for {}: left out",
                path.display(),
                output::count(scores.len(), "score"),
                output::count(episodes.len(), "episode")
            );
            None
        }
        Ok(scores) => match other_task(&scores) {
            None => Some(scores),
            Some(at) => {
                eprintln!(
                    "warning: {}: score {} is of task `{}`, its episode of `{}`: left out",
                    path.display(),
                    at + 1,
                    scores[at].task_id,
                    episodes[at].task_id
                );
                None
            }
        },
        Err(err) => {
            eprintln!("warning: {err:#}: left out");
            None
        }
    }
}

/// An RL episode's part in its step's update.
fn update(score: &RolloutScore) -> String {
    match (score.advantage, score.masked, score.kept, score.overlong) {
        (Some(advantage), ..) => format!("advantage {advantage:+.3}"),
        (None, true, ..) => {
            "masked (the user gave wrong or missing information): not trained on".into()
        }
        (None, false, false, _) => {
            "its task's rollouts all scored alike (dynamic sampling): not trained on".into()
        }
        (None, false, true, true) => "masked as overlong (rl.mask_overlong): not trained on".into(),
        (None, false, true, false) => "not trained on (its score gives no reason)".into(),
    }
}

/// The episode on `line` as text: a heading, one entry per message (calls
/// written as calls, each result under its call) and the verdict; messages
/// and results cut at `most` characters where given.
fn dialogue(line: usize, record: &EpisodeRecord, most: Option<usize>) -> String {
    let cut = |text: &str| match most {
        Some(most) => shortened(text, most),
        None => text.to_owned(),
    };
    let user = match &record.user {
        Some(UserRef::Scripted { instability }) if *instability > 0.0 => {
            format!(" · scripted user (instability {instability})")
        }
        Some(UserRef::Scripted { .. }) => " · scripted user".to_owned(),
        Some(UserRef::Model { name }) => format!(" · user {name}"),
        None => String::new(),
    };
    let mut out = format!(
        "── line {line} · task {} · policy {} · seed {}{user} ──\n",
        record.task_id, record.policy, record.seed
    );
    for message in &record.messages {
        match (message.role, &message.tool_calls) {
            (Role::Assistant | Role::User, Some(calls)) => {
                // What the agent wrote beside its calls, which the user did not see.
                if let Some(remark) = message.content.as_deref().filter(|text| !text.is_empty()) {
                    out += &entry(speaker(message), &format!("({})", cut(remark)));
                }
                for call in calls {
                    let call = ToolCall::new(&call.function.name, call.function.parsed_arguments());
                    out += &entry(speaker(message), &format!("→ {}", cut(&call.to_string())));
                }
            }
            (Role::Tool, _) => {
                let status = record
                    .steps
                    .iter()
                    .find(|step| message.tool_call_id.as_deref() == Some(step.call_id.as_str()))
                    .map_or("result", |step| step.status.as_str());
                let result = message.content.as_deref().unwrap_or_default();
                out += &entry("", &format!("← {status}: {}", cut(result)));
            }
            _ => {
                let text = message.content.as_deref().unwrap_or_default();
                out += &entry(speaker(message), &cut(text));
            }
        }
    }
    out += &entry("end", &verdict(record));
    out
}

/// Who speaks `message`: the agent, the user (its own calls included), the
/// system.
fn speaker(message: &ChatMessage) -> &'static str {
    match message.role {
        Role::Assistant => "agent",
        Role::User => "user",
        Role::System => "system",
        Role::Tool => "",
    }
}

/// `text` after `who`, its lines after the first indented beneath.
fn entry(who: &str, text: &str) -> String {
    let indent = " ".repeat(10);
    let mut lines = text.lines();
    let mut out = format!("  {who:<8}{}\n", lines.next().unwrap_or_default());
    for line in lines {
        out += &format!("{indent}{line}\n");
    }
    out
}

/// How the episode ended and how it was judged, on one line.
fn verdict(record: &EpisodeRecord) -> String {
    let verdict = &record.verdict;
    let share = |total: usize, met: usize, what: &str| match total {
        0 => String::new(),
        _ => format!(" · {what} {met}/{total}"),
    };
    let checks =
        |checks: &[verify::Check], what: &str| share(checks.len(), verify::met(checks), what);
    let outputs = share(
        verdict.outputs.len(),
        verify::found(&verdict.outputs),
        "outputs",
    );
    format!(
        "{} · reward {} · state {}{outputs}{}{}{} · partial credit {:.2}",
        record.termination.name(),
        verdict.reward,
        match verdict.state_match {
            true => "matches",
            false => "differs",
        },
        checks(&verdict.assertions, "assertions"),
        checks(&verdict.calls, "calls"),
        checks(&verdict.nl_assertions, "NL assertions"),
        verdict.partial_credit
    )
}
