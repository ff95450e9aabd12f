//! Replaying a task's gold actions as the reference does: on a fresh copy of
//! the initial state, every action in order, failing calls included.

use crate::layout;
use forge_runtime::canonical;
use forge_runtime::environment::{Observation, execute};
use forge_runtime::{Environment, PreparedTask, State};
use serde::Serialize;

/// One replayed call: the tool and the exact text the agent would see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplayedAction {
    pub name: String,
    pub output: String,
    /// Set when the sandbox, not the tool, ended the call (a host-side error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_error: Option<String>,
}

/// A task's replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskReplay {
    pub task_id: String,
    pub actions: Vec<ReplayedAction>,
    /// sha256 of the final database as the suites hash it (Python's
    /// `json.dumps(db, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`).
    pub final_db_sha256: String,
    /// The same of the user's database, in domains whose user has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_user_db_sha256: Option<String>,
}

impl TaskReplay {
    /// Whether any call ended in a sandbox error.
    pub fn failed(&self) -> bool {
        self.actions
            .iter()
            .any(|action| action.sandbox_error.is_some())
    }
}

/// Replays `task`'s gold actions on `env` (without syncs between them, as the
/// reference builds its gold databases); returns the report and the final
/// state.
pub fn replay(env: &Environment, task: &PreparedTask) -> (TaskReplay, State) {
    let mut instance = env.component().instance();
    let mut state = task.initial.clone();
    let mut actions = Vec::with_capacity(task.task.gold_actions.len());
    for call in &task.task.gold_actions {
        let executed = execute(&mut instance, &state, call);
        let sandbox_error = match &executed.observation {
            Observation::SandboxError(message) => Some(message.clone()),
            _ => None,
        };
        actions.push(ReplayedAction {
            name: call.name.clone(),
            output: executed.observation.content(),
            sandbox_error,
        });
        state = executed.state;
    }
    let (db, user_db) = layout::databases(&state);
    let report = TaskReplay {
        task_id: task.task.id.clone(),
        actions,
        final_db_sha256: canonical::sha256_hex(&db),
        final_user_db_sha256: user_db.as_ref().map(canonical::sha256_hex),
    };
    (report, state)
}
