//! Remote models as the agent (policy) and as the simulated user.

use crate::{ChatClient, ChatError, Sampling};
use forge_runtime::bundle::ToolCall;
use forge_runtime::episode::{Action, ContextFull, Policy, User, UserTurn};
use forge_runtime::policy::{AGENT_GREETING, ends_dialogue, user_brief};
use forge_runtime::schema::ToolSpec;
use forge_runtime::trajectory::{ChatFunction, ChatMessage, UserRef, user_view};
use serde_json::{Value, json};
use std::collections::VecDeque;

/// The agent is a model behind an OpenAI-compatible endpoint, offered the
/// environment's tools in function-calling form.
pub struct RemotePolicy<'a> {
    client: &'a ChatClient,
    system: String,
    sampling: Seeded,
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
            sampling: Seeded::default(),
            pending: VecDeque::new(),
        }
    }

    /// The same agent sampled as `sampling` asks in the episode seeded
    /// `seed` (greedy otherwise).
    pub fn sampled(self, sampling: Sampling, seed: u64) -> Self {
        Self {
            sampling: Seeded { sampling, seed },
            ..self
        }
    }
}

/// How a remote agent or user samples its replies, and its episode's seed.
#[derive(Debug, Clone, Copy, Default)]
struct Seeded {
    sampling: Sampling,
    seed: u64,
}

impl Seeded {
    /// The sampling of the request that continues `transcript`.
    fn at(&self, transcript: &[ChatMessage]) -> Sampling {
        self.sampling.at_turn(self.seed, transcript.len())
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
        let reply = complete(self.client, messages, &tools, self.sampling.at(transcript))?;
        let calls = reply
            .get("tool_calls")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let text = reply
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // What the model wrote beside its calls goes with the first.
        let mut remark = Some(text.to_owned()).filter(|text| !text.trim().is_empty());
        for call in &calls {
            self.pending.push_back(Action::Call {
                call: requested_call(call),
                remark: remark.take(),
            });
        }
        if let Some(action) = self.pending.pop_front() {
            return Ok(action);
        }
        Ok(Action::Say(text.to_owned()))
    }
}

/// The call an entry of an OpenAI reply's `tool_calls` asks for. Malformed
/// arguments reach the host as they are; it answers with a validation
/// error the model can correct. Arguments sent as JSON itself rather than
/// the string OpenAI specifies (as some servers do) are taken as written.
fn requested_call(call: &Value) -> ToolCall {
    let arguments = match call.pointer("/function/arguments") {
        // Some servers send a call without parameters so.
        Some(Value::String(text)) if text.trim().is_empty() => "{}".to_owned(),
        Some(Value::String(text)) => text.clone(),
        None | Some(Value::Null) => "{}".to_owned(),
        Some(value) => value.to_string(),
    };
    let function = ChatFunction {
        name: call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        arguments,
    };
    ToolCall::new(function.name.clone(), function.parsed_arguments())
}

/// The simulated user is a model given the task instruction; it ends the
/// dialogue as [`ends_dialogue`] says. Offered tools of its own (the user's
/// tools of the environment), it may call them before it answers.
pub struct RemoteUser<'a> {
    client: &'a ChatClient,
    sampling: Seeded,
    instruction: String,
    /// The environment's brief for a model playing its users.
    guidelines: Option<String>,
}

impl<'a> RemoteUser<'a> {
    pub fn new(client: &'a ChatClient, instruction: impl Into<String>) -> Self {
        Self {
            client,
            sampling: Seeded::default(),
            instruction: instruction.into(),
            guidelines: None,
        }
    }

    /// The same user sampled as `sampling` asks in the episode seeded
    /// `seed` (greedy otherwise).
    pub fn sampled(self, sampling: Sampling, seed: u64) -> Self {
        Self {
            sampling: Seeded { sampling, seed },
            ..self
        }
    }

    /// The same user briefed by `guidelines` (the environment's own, such as
    /// τ²-bench's user-simulator guidelines) instead of Forge's generic brief;
    /// the task's instruction follows them as the `<scenario>`.
    pub fn with_guidelines(self, guidelines: Option<&str>) -> Self {
        Self {
            guidelines: guidelines.map(str::to_owned),
            ..self
        }
    }

    /// The model's next message as the user. It sees the dialogue from the
    /// user's side: the agent's messages are `user` turns, the user's own
    /// are `assistant` turns (its tool calls and their results included);
    /// the agent's tool traffic is hidden. The agent's greeting, which the
    /// user's first message answers, opens it every time: chat templates
    /// that want turns to alternate from a `user` one refuse it otherwise.
    fn reply(&self, transcript: &[ChatMessage], tools: &[ToolSpec]) -> anyhow::Result<Value> {
        let system = user_brief(
            &self.instruction,
            !tools.is_empty(),
            self.guidelines.as_deref(),
        );
        let mut messages = vec![
            json!({"role": "system", "content": system}),
            json!({"role": "user", "content": AGENT_GREETING}),
        ];
        messages.extend(
            user_view(transcript)
                .iter()
                .map(|message| serde_json::to_value(message).expect("messages serialise")),
        );
        let tools = Value::Array(tools.iter().map(ToolSpec::to_openai).collect());
        complete(self.client, messages, &tools, self.sampling.at(transcript))
    }
}

/// The reply to `messages`, offering `tools`; a request refused for not
/// fitting in the model's context is [`ContextFull`], which ends the
/// episode rather than failing it.
fn complete(
    client: &ChatClient,
    messages: Vec<Value>,
    tools: &Value,
    sampling: Sampling,
) -> anyhow::Result<Value> {
    client
        .complete_message(&Value::Array(messages), Some(tools), &sampling)
        .map_err(|err| match err {
            ChatError::ContextFull(_) => ContextFull(err.to_string()).into(),
            err => err.into(),
        })
}

fn text_of(reply: &Value) -> String {
    reply
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

impl User for RemoteUser<'_> {
    fn open(&mut self, tools: &[ToolSpec]) -> anyhow::Result<String> {
        Ok(text_of(&self.reply(&[], tools)?))
    }

    fn stops_at_opening(&self, opening: &str) -> bool {
        ends_dialogue(opening)
    }

    fn respond(
        &mut self,
        transcript: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> anyhow::Result<UserTurn> {
        let reply = self.reply(transcript, tools)?;
        // One call at a time: the user sees each result before the next.
        if let Some(call) = reply
            .get("tool_calls")
            .and_then(Value::as_array)
            .and_then(|calls| calls.first())
        {
            return Ok(UserTurn::Call(requested_call(call)));
        }
        let text = text_of(&reply);
        Ok(match ends_dialogue(&text) {
            true => UserTurn::Stop,
            false => UserTurn::Say(text),
        })
    }

    fn played_by(&self) -> Option<UserRef> {
        Some(UserRef::Model {
            name: format!("openai:{}", self.client.config().model),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::requested_call;
    use serde_json::json;

    #[test]
    fn a_call_without_arguments_takes_none_however_the_server_says_so() {
        for arguments in [json!(""), json!(" "), json!(null), json!("{}")] {
            let call = json!({"function": {"name": "list", "arguments": arguments}});
            assert_eq!(requested_call(&call).arguments, json!({}), "{arguments}");
        }
        let missing = json!({"function": {"name": "list"}});
        assert_eq!(requested_call(&missing).arguments, json!({}));
        // Arguments as JSON itself, and malformed ones, as written.
        let object = json!({"function": {"name": "get", "arguments": {"id": 1}}});
        assert_eq!(requested_call(&object).arguments, json!({"id": 1}));
        let cut = json!({"function": {"name": "get", "arguments": "{\"id\": "}});
        assert_eq!(requested_call(&cut).arguments, json!("{\"id\": "));
    }
}
