use crate::bundle::{Actor, Task, ToolCall};
use crate::episode::{Action, ContextFull, Judge, Policy, User, UserTurn};
use crate::policy::scripted_user;
use crate::schema::ToolSpec;
use crate::trajectory::{ChatMessage, EpisodeRecord, Role, Termination, UserRef};
use anyhow::{Context, Result, bail};
use std::collections::VecDeque;

/// Repeats the agent actions of a recorded episode, then ends it where the
/// record ended before its dialogue did (its session closed, its agent's
/// context full).
pub struct ReplayPolicy {
    actions: VecDeque<Action>,
    termination: Termination,
}

impl ReplayPolicy {
    pub fn new(record: &EpisodeRecord) -> Result<Self> {
        // Calls of the user's tools (made by policies that act for both
        // sides) are told apart by their steps.
        let actors: std::collections::HashMap<&str, Actor> = record
            .steps
            .iter()
            .map(|step| (step.call_id.as_str(), step.actor))
            .collect();
        let mut actions = VecDeque::new();
        for (index, message) in record.messages.iter().enumerate() {
            if message.role != Role::Assistant {
                continue;
            }
            match (&message.tool_calls, &message.content) {
                (Some(calls), remark) => {
                    // What the agent wrote beside its calls went with the first.
                    let mut remark = remark.clone();
                    for call in calls {
                        let arguments = serde_json::from_str(&call.function.arguments)
                            .with_context(|| {
                                format!("message {index}: tool call arguments are not JSON")
                            })?;
                        let call = ToolCall {
                            name: call.function.name.clone(),
                            arguments,
                            actor: actors.get(call.id.as_str()).copied().unwrap_or_default(),
                        };
                        actions.push_back(Action::Call {
                            call,
                            remark: remark.take(),
                        });
                    }
                }
                (None, Some(text)) => actions.push_back(Action::Say(text.clone())),
                (None, None) => {
                    bail!("message {index}: assistant message without content or tool calls")
                }
            }
        }
        Ok(Self {
            actions,
            termination: record.termination,
        })
    }
}

impl Policy for ReplayPolicy {
    fn act(&mut self, _: &[ChatMessage], _: &[ToolSpec]) -> Result<Action> {
        match self.actions.pop_front() {
            Some(action) => Ok(action),
            None => bail!("the recorded episode has no further agent action"),
        }
    }

    fn ended(&self) -> Option<Termination> {
        let cut = matches!(
            self.termination,
            Termination::Closed | Termination::ContextFull
        );
        (self.actions.is_empty() && cut).then_some(self.termination)
    }
}

/// The user of a replay of `record` (an episode of `task`): the scripted
/// user played again where the record says it played, so that its turns
/// are checked too; any other user's recorded turns, repeated.
pub fn replayed_user(task: &Task, record: &EpisodeRecord) -> Box<dyn User + Send> {
    match record.user {
        Some(UserRef::Scripted { instability }) => scripted_user(task, instability, record.seed),
        Some(UserRef::Model { .. }) | None => Box::new(ReplayUser::new(record)),
    }
}

/// Repeats the user's turns of a recorded episode — its messages and calls
/// of its own tools — then stops, or, where the user model's context filled,
/// finds it full again.
pub struct ReplayUser {
    turns: VecDeque<UserTurn>,
    termination: Termination,
    /// Who the record says played the user.
    played_by: Option<UserRef>,
    /// The record ended as its user opened.
    stopped_at_opening: bool,
}

impl ReplayUser {
    pub fn new(record: &EpisodeRecord) -> Self {
        let turns = record
            .messages
            .iter()
            .filter(|message| message.role == Role::User)
            .flat_map(|message| match (&message.content, &message.tool_calls) {
                (Some(text), _) => vec![UserTurn::Say(text.clone())],
                (None, Some(calls)) => calls
                    .iter()
                    .map(|call| {
                        UserTurn::Call(ToolCall {
                            name: call.function.name.clone(),
                            arguments: call.function.parsed_arguments(),
                            actor: Actor::User,
                        })
                    })
                    .collect(),
                (None, None) => Vec::new(),
            })
            .collect();
        Self {
            turns,
            termination: record.termination,
            played_by: record.user.clone(),
            stopped_at_opening: record.termination == Termination::UserStop
                && record.messages.len() == 1,
        }
    }
}

impl User for ReplayUser {
    fn open(&mut self, _: &[ToolSpec]) -> Result<String> {
        match self.turns.pop_front() {
            Some(UserTurn::Say(text)) => Ok(text),
            _ => bail!("the recorded episode does not open with a user message"),
        }
    }

    fn respond(&mut self, _: &[ChatMessage], _: &[ToolSpec]) -> Result<UserTurn> {
        match self.turns.pop_front() {
            Some(turn) => Ok(turn),
            None if self.termination == Termination::ContextFull => {
                Err(ContextFull("the recorded user's context filled here".into()).into())
            }
            None => Ok(UserTurn::Stop),
        }
    }

    fn played_by(&self) -> Option<UserRef> {
        self.played_by.clone()
    }

    fn stops_at_opening(&self, _: &str) -> bool {
        self.stopped_at_opening
    }
}

/// Repeats the judge's verdicts of a recorded episode: a replay reproduces
/// the environment's side and takes the judge model's answers, like the
/// user's, as recorded.
pub struct RecordedJudge {
    verdicts: Vec<bool>,
}

impl RecordedJudge {
    /// The recorded episode's judge, when it ran with one.
    pub fn new(record: &EpisodeRecord) -> Option<Self> {
        let checks = &record.verdict.nl_assertions;
        (!checks.is_empty()).then(|| Self {
            verdicts: checks.iter().map(|check| check.met).collect(),
        })
    }
}

impl Judge for RecordedJudge {
    fn judge(&mut self, assertions: &[String], _: &[ChatMessage]) -> Result<Vec<bool>> {
        if assertions.len() != self.verdicts.len() {
            bail!(
                "the recorded episode judged {} NL assertions, the task has {}",
                self.verdicts.len(),
                assertions.len()
            );
        }
        Ok(self.verdicts.clone())
    }
}
