use crate::bundle::Task;
use crate::episode::{User, UserTurn};
use crate::policy::UnstableUser;
use crate::trajectory::ChatMessage;
use anyhow::Result;

/// The scripted user of an episode of `task`: reliable, or with
/// `instability` > 0 an [`UnstableUser`] seeded by the episode's `seed`.
pub fn scripted_user(task: &Task, instability: f64, seed: u64) -> Box<dyn User + Send> {
    match instability > 0.0 {
        true => Box::new(UnstableUser::new(task, instability, seed)),
        false => Box::new(ScriptedUser::new(task.instruction.clone())),
    }
}

/// States the task instruction, then ends the dialogue at the agent's first
/// message to it.
pub struct ScriptedUser {
    instruction: String,
}

impl ScriptedUser {
    pub fn new(instruction: impl Into<String>) -> Self {
        Self {
            instruction: instruction.into(),
        }
    }
}

impl User for ScriptedUser {
    fn open(&mut self) -> Result<String> {
        Ok(self.instruction.clone())
    }

    fn respond(&mut self, _: &[ChatMessage]) -> Result<UserTurn> {
        Ok(UserTurn::Stop)
    }
}
