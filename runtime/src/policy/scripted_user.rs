use crate::episode::{User, UserTurn};
use crate::trajectory::ChatMessage;
use anyhow::Result;

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
