//! Remote models as the agent (policy) and as the simulated user.

use crate::ChatClient;
use forge_runtime::bundle::ToolCall;
use forge_runtime::episode::{Action, Policy, User, UserTurn};
use forge_runtime::schema::ToolSpec;
use forge_runtime::trajectory::{ChatMessage, Role};
use serde_json::{Value, json};
use std::collections::VecDeque;

/// The agent is a model behind an OpenAI-compatible endpoint, offered the
/// environment's tools in function-calling form.
pub struct RemotePolicy<'a> {
    client: &'a ChatClient,
    system: String,
    /// Further tool calls of the last assistant message, executed in order.
    pending: VecDeque<Action>,
}

impl<'a> RemotePolicy<'a> {
    /// `system` is the agent's instructions (the environment's description
    /// and rules).
    pub fn new(client: &'a ChatClient, system: impl Into<String>) -> Self {
        Self {
            client,
            system: system.into(),
            pending: VecDeque::new(),
        }
    }
}

impl Policy for RemotePolicy<'_> {
    fn act(&mut self, transcript: &[ChatMessage], tools: &[ToolSpec]) -> anyhow::Result<Action> {
        if let Some(action) = self.pending.pop_front() {
            return Ok(action);
        }
        let mut messages = vec![json!({"role": "system", "content": self.system})];
        messages.extend(
            transcript
                .iter()
                .map(|message| serde_json::to_value(message).expect("messages serialise")),
        );
        let tools = Value::Array(tools.iter().map(ToolSpec::to_openai).collect());
        let reply = self
            .client
            .complete_message(&Value::Array(messages), Some(&tools))?;
        let calls = reply
            .get("tool_calls")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for call in &calls {
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let raw = call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .unwrap_or("{}");
            // Malformed arguments reach the host as they are; it answers with a
            // validation error the model can correct.
            let arguments =
                serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
            self.pending
                .push_back(Action::Call(ToolCall::new(name, arguments)));
        }
        if let Some(action) = self.pending.pop_front() {
            return Ok(action);
        }
        let text = reply
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(Action::Say(text.to_owned()))
    }
}

/// What a model playing the user says to end the dialogue.
pub const STOP: &str = "###STOP###";

/// The simulated user is a model given the task instruction; it ends the
/// dialogue by saying [`STOP`].
pub struct RemoteUser<'a> {
    client: &'a ChatClient,
    instruction: String,
}

impl<'a> RemoteUser<'a> {
    pub fn new(client: &'a ChatClient, instruction: impl Into<String>) -> Self {
        Self {
            client,
            instruction: instruction.into(),
        }
    }

    fn system(&self) -> String {
        format!(
            "You are a customer talking to a customer-service agent. Your situation and goal:\n{}\n\n\
             Say one message at a time, as the customer. Give only the information the agent asks \
             for and that your situation contains; never invent facts. When your goal is met, or \
             cannot be met, reply with exactly {STOP}.",
            self.instruction
        )
    }

    /// The dialogue from the user's side: the agent's messages are `user`
    /// turns, the user's own are `assistant` turns; tool traffic is hidden.
    fn say(&self, transcript: &[ChatMessage]) -> anyhow::Result<String> {
        let mut messages = vec![json!({"role": "system", "content": self.system()})];
        for message in transcript {
            let (role, Some(content)) = (message.role, &message.content) else {
                continue;
            };
            match role {
                Role::User => messages.push(json!({"role": "assistant", "content": content})),
                Role::Assistant => messages.push(json!({"role": "user", "content": content})),
                Role::System | Role::Tool => {}
            }
        }
        if transcript.is_empty() {
            messages.push(json!({"role": "user", "content": "Hello, how can I help you today?"}));
        }
        let reply = self
            .client
            .complete_message(&Value::Array(messages), None)?;
        Ok(reply
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_owned())
    }
}

impl User for RemoteUser<'_> {
    fn open(&mut self) -> anyhow::Result<String> {
        self.say(&[])
    }

    fn respond(&mut self, transcript: &[ChatMessage]) -> anyhow::Result<UserTurn> {
        let reply = self.say(transcript)?;
        Ok(if reply.contains(STOP) {
            UserTurn::Stop
        } else {
            UserTurn::Say(reply)
        })
    }
}
