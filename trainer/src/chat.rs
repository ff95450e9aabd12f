//! The chat format of the policy: ChatML (SmolLM2's template) with the tool
//! schemas in the system prompt, and tool calls in Forge's format:
//!
//! ```text
//! <tool_call>{"name": "get_user", "arguments": {"user_id": "u1"}}</tool_call>
//! ```
//!
//! Tool results come back as `tool` turns. Replies are parsed robustly: a
//! call whose JSON is malformed still becomes a call (with its raw arguments,
//! which the host answers with a validation error the model can learn from),
//! never a crash.

use crate::sampling::Sampling;
use crate::{CpuModel, Generation};
use forge_model::tokenizer::ModelTokenizer;
use forge_runtime::bundle::ToolCall;
use forge_runtime::episode::{Action, Policy};
use forge_runtime::schema::ToolSpec;
use forge_runtime::trajectory::{ChatMessage, Role};
use serde_json::{Value, json};

pub const IM_START: &str = "<|im_start|>";
pub const IM_END: &str = "<|im_end|>";
const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";

/// The prompt for the assistant's next turn.
pub fn render(system: &str, tools: &[ToolSpec], transcript: &[ChatMessage]) -> String {
    let mut out = format!("{IM_START}system\n{system}");
    if !tools.is_empty() {
        out.push_str("\n\nYou can call a tool by replying with exactly one line:\n");
        out.push_str("<tool_call>{\"name\": <tool name>, \"arguments\": <arguments object>}</tool_call>\nTools:");
        for tool in tools {
            out.push('\n');
            out.push_str(&tool.to_openai()["function"].to_string());
        }
    }
    out.push_str(IM_END);
    out.push('\n');
    for message in transcript {
        let (role, content) = match message.role {
            Role::System => ("system", message.content.clone().unwrap_or_default()),
            Role::User => ("user", message.content.clone().unwrap_or_default()),
            Role::Tool => ("tool", message.content.clone().unwrap_or_default()),
            Role::Assistant => match &message.tool_calls {
                Some(calls) => (
                    "assistant",
                    calls
                        .iter()
                        .map(|call| {
                            let arguments: Value = serde_json::from_str(&call.function.arguments)
                                .unwrap_or(Value::String(call.function.arguments.clone()));
                            format!(
                                "{CALL_OPEN}{}{CALL_CLOSE}",
                                json!({"name": call.function.name, "arguments": arguments})
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
                None => ("assistant", message.content.clone().unwrap_or_default()),
            },
        };
        out.push_str(&format!("{IM_START}{role}\n{content}{IM_END}\n"));
    }
    out.push_str(&format!("{IM_START}assistant\n"));
    out
}

/// What the model's reply asks for.
pub fn parse_reply(reply: &str) -> Action {
    let reply = reply.trim().trim_end_matches(IM_END).trim();
    let Some(start) = reply.find(CALL_OPEN) else {
        return Action::Say(reply.to_owned());
    };
    let body = &reply[start + CALL_OPEN.len()..];
    let body = body
        .find(CALL_CLOSE)
        .map_or(body, |end| &body[..end])
        .trim();
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(call)) => {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let arguments = call
                .get("arguments")
                .cloned()
                .unwrap_or(Value::Object(Default::default()));
            // Arguments sent as a JSON string are unwrapped when they parse.
            let arguments = match arguments {
                Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
                other => other,
            };
            Action::Call(ToolCall { name, arguments })
        }
        _ => Action::Call(ToolCall {
            name: quoted_after(body, "\"name\"").unwrap_or_default(),
            arguments: Value::String(body.to_owned()),
        }),
    }
}

/// The string value after `key` in malformed JSON, if one can be read.
fn quoted_after(text: &str, key: &str) -> Option<String> {
    let rest = &text[text.find(key)? + key.len()..];
    let rest = &rest[rest.find('"')? + 1..];
    Some(rest[..rest.find('"')?].to_owned())
}

/// The local model as the agent.
pub struct ModelPolicy<'a> {
    model: &'a CpuModel,
    tokenizer: &'a ModelTokenizer,
    system: String,
    sampling: Sampling,
    turns: Vec<Value>,
}

impl<'a> ModelPolicy<'a> {
    pub fn new(
        model: &'a CpuModel,
        tokenizer: &'a ModelTokenizer,
        system: impl Into<String>,
        sampling: Sampling,
    ) -> Self {
        Self {
            model,
            tokenizer,
            system: system.into(),
            sampling,
            turns: Vec::new(),
        }
    }
}

impl Policy for ModelPolicy<'_> {
    fn act(&mut self, transcript: &[ChatMessage], tools: &[ToolSpec]) -> anyhow::Result<Action> {
        let prompt = self
            .tokenizer
            .encode(&render(&self.system, tools, transcript))?;
        let end: Vec<u32> = self.tokenizer.token_id(IM_END).into_iter().collect();
        let sampling = Sampling {
            seed: self.sampling.seed.wrapping_add(self.turns.len() as u64),
            ..self.sampling.clone()
        };
        let Generation {
            tokens,
            logprobs,
            stopped,
        } = self.model.generate(&prompt, &sampling, &end);
        let text = self.tokenizer.decode(&tokens)?;
        self.turns.push(
            json!({"prompt_ids": prompt, "ids": tokens, "logprobs": logprobs, "stopped": stopped}),
        );
        Ok(parse_reply(&text))
    }

    fn trace(&mut self) -> Option<Value> {
        Some(json!({"turns": std::mem::take(&mut self.turns)}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_runtime::trajectory::{ChatFunction, ChatToolCall};

    #[test]
    fn replies_become_actions_robustly() {
        assert_eq!(
            parse_reply("Your order is on its way.<|im_end|>"),
            Action::Say("Your order is on its way.".into())
        );
        let call = parse_reply(
            "<tool_call>{\"name\": \"get_user\", \"arguments\": {\"user_id\": \"u1\"}}</tool_call>",
        );
        assert_eq!(
            call,
            Action::Call(ToolCall {
                name: "get_user".into(),
                arguments: json!({"user_id": "u1"})
            })
        );
        let stringly = parse_reply(
            "<tool_call>{\"name\": \"get_user\", \"arguments\": \"{\\\"user_id\\\": \\\"u1\\\"}\"}",
        );
        assert_eq!(
            stringly, call,
            "a missing close tag and string arguments are tolerated"
        );
        match parse_reply(
            "<tool_call>{\"name\": \"get_user\", \"arguments\": {\"user_id\": </tool_call>",
        ) {
            Action::Call(ToolCall {
                name,
                arguments: Value::String(raw),
            }) => {
                assert_eq!(name, "get_user");
                assert!(raw.contains("user_id"));
            }
            other => panic!("a malformed call stays a call: {other:?}"),
        }
    }

    #[test]
    fn the_prompt_is_chatml_with_tools_and_calls_in_forge_format() {
        let tools = [ToolSpec {
            name: "get_user".into(),
            description: "Get a user.".into(),
            parameters: json!({"type": "object"}),
        }];
        let transcript = [
            ChatMessage::user("Hi"),
            ChatMessage::assistant_call(ChatToolCall {
                id: "call_0".into(),
                kind: "function".into(),
                function: ChatFunction {
                    name: "get_user".into(),
                    arguments: "{\"user_id\":\"u1\"}".into(),
                },
            }),
            ChatMessage::tool("call_0", "{\"name\":\"Ava\"}"),
        ];
        let prompt = render("Be helpful.", &tools, &transcript);
        assert!(prompt.starts_with("<|im_start|>system\nBe helpful."));
        assert!(
            prompt.contains("{\"name\":\"get_user\",\"description\":\"Get a user.\""),
            "{prompt}"
        );
        assert!(prompt.contains("<|im_start|>assistant\n<tool_call>{\"name\":\"get_user\",\"arguments\":{\"user_id\":\"u1\"}}</tool_call><|im_end|>"), "{prompt}");
        assert!(prompt.contains("<|im_start|>tool\n{\"name\":\"Ava\"}<|im_end|>"));
        assert!(prompt.ends_with("<|im_start|>assistant\n"));
    }
}
