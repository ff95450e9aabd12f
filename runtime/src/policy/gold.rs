use crate::bundle::{Actor, Task};
use crate::episode::{Action, Policy};
use crate::policy::request;
use crate::schema::ToolSpec;
use crate::trajectory::ChatMessage;
use anyhow::Result;
use std::collections::VecDeque;

/// Executes the task's gold actions, then tells the user the required
/// outputs. The user's own gold calls it asks the user for (see
/// [`request`]), each run of them in one message, as the scripted user
/// expects. It scores 1.0 on every sound task, which makes it the check that
/// a task is solvable and that the verifier agrees with the task's author.
/// (Benchmark tasks whose checks need more than the gold actions score less,
/// in their reference too.)
pub struct GoldPolicy {
    actions: VecDeque<Action>,
}

impl GoldPolicy {
    pub fn new(task: &Task) -> Self {
        let mut actions: VecDeque<Action> = task
            .gold_actions
            .chunk_by(|a, b| a.actor == b.actor)
            .flat_map(|run| match run[0].actor {
                Actor::User => vec![Action::Say(request(run))],
                Actor::Agent => run.iter().cloned().map(Action::call).collect(),
            })
            .collect();
        let closing = if task.required_outputs.is_empty() {
            "All done.".to_owned()
        } else {
            format!(
                "All done. Here is what you asked for: {}.",
                task.required_outputs.join("; ")
            )
        };
        actions.push_back(Action::Say(closing));
        Self { actions }
    }
}

impl Policy for GoldPolicy {
    fn act(&mut self, _: &[ChatMessage], _: &[ToolSpec]) -> Result<Action> {
        Ok(self
            .actions
            .pop_front()
            .unwrap_or_else(|| Action::Say("All done.".into())))
    }
}
