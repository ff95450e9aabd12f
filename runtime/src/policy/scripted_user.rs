use crate::bundle::{Actor, Task, ToolCall};
use crate::episode::{User, UserTurn};
use crate::policy::remembered_instruction;
use crate::trajectory::{ChatMessage, Role, UserRef};
use anyhow::Result;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};

/// What the scripted user answers a message that asks for none of the calls
/// it still has to make.
const UNSURE: &str = "I'm not sure what to do on my side. What should I do?";

/// The scripted user of an episode of `task`: reliable, or with
/// `instability` > 0 one that misremembers a fact of its instruction
/// (see [`remembered_instruction`]), seeded by the episode's `seed`.
pub fn scripted_user(task: &Task, instability: f64, seed: u64) -> Box<dyn User + Send> {
    let mut user = ScriptedUser::new(task);
    if instability > 0.0 {
        user.instruction = remembered_instruction(task, instability, seed);
        user.instability = instability;
    }
    Box::new(user)
}

/// States the task instruction, makes the calls of its own tools that the
/// task's gold actions give it (τ²-bench's telecom: toggling airplane mode,
/// rebooting the phone) when the agent asks for them, and ends the dialogue
/// at the first message of the agent once none is left to make.
///
/// The agent asks for a call by naming its tool (as a whole identifier) and
/// stating every argument value (case aside), as the telecom manual has the
/// agent "guide the user to use `toggle_airplane_mode()`"; the user makes
/// the calls asked for, in the order of the gold actions, and reports their
/// results. A message that asks for none of them gets [`UNSURE`]. A script
/// cannot read intent, so it follows the letter: calls it was not given are
/// not made, however clearly asked for.
pub struct ScriptedUser {
    instruction: String,
    /// How unreliable the user is (see [`scripted_user`]).
    instability: f64,
    /// The user's gold calls not made yet, in the gold actions' order.
    pending: Vec<ToolCall>,
    /// The calls the agent's last message asked for, still to make.
    asked: VecDeque<ToolCall>,
}

impl ScriptedUser {
    pub fn new(task: &Task) -> Self {
        Self {
            instruction: task.instruction.clone(),
            instability: 0.0,
            pending: task
                .gold_actions
                .iter()
                .filter(|call| call.actor == Actor::User)
                .cloned()
                .collect(),
            asked: VecDeque::new(),
        }
    }

    /// Moves the pending calls that `message` asks for to `asked`: each
    /// naming of a tool in the message asks for one call of it.
    fn take_asked(&mut self, message: &str) {
        let message = message.to_lowercase();
        // Namings of each tool not yet taken by a call.
        let mut namings: BTreeMap<String, usize> = BTreeMap::new();
        for call in std::mem::take(&mut self.pending) {
            let left = namings
                .entry(call.name.clone())
                .or_insert_with(|| namings_of(&message, &call.name.to_lowercase()));
            if *left > 0 && states_arguments(&message, &call.arguments) {
                *left -= 1;
                self.asked.push_back(call);
            } else {
                self.pending.push(call);
            }
        }
    }
}

impl User for ScriptedUser {
    fn open(&mut self) -> Result<String> {
        Ok(self.instruction.clone())
    }

    fn respond(&mut self, transcript: &[ChatMessage]) -> Result<UserTurn> {
        let last = transcript.last();
        if let Some(message) = last.filter(|message| message.role == Role::Assistant) {
            if self.pending.is_empty() {
                return Ok(UserTurn::Stop);
            }
            self.take_asked(message.content.as_deref().unwrap_or_default());
            if self.asked.is_empty() {
                return Ok(UserTurn::Say(UNSURE.into()));
            }
        }
        Ok(match self.asked.pop_front() {
            Some(call) => UserTurn::Call(ToolCall {
                actor: Actor::User,
                ..call
            }),
            None => UserTurn::Say(report(transcript)),
        })
    }

    fn replayable(&self) -> Option<UserRef> {
        Some(UserRef::Scripted {
            instability: self.instability,
        })
    }
}

/// The results of the calls the user made since the agent's last message.
fn report(transcript: &[ChatMessage]) -> String {
    let since = transcript
        .iter()
        .rposition(|message| message.role == Role::Assistant)
        .map_or(0, |at| at + 1);
    let mut lines = Vec::new();
    let mut calls = transcript[since..].iter().peekable();
    while let Some(message) = calls.next() {
        for call in message.tool_calls.iter().flatten() {
            let result = calls
                .next_if(|next| next.tool_call_id.as_deref() == Some(call.id.as_str()))
                .and_then(|next| next.content.as_deref())
                .unwrap_or_default();
            let arguments = serde_json::from_str(&call.function.arguments).unwrap_or(Value::Null);
            lines.push(format!(
                "`{}` → {result}",
                written(&ToolCall::new(&call.function.name, arguments))
            ));
        }
    }
    format!("Done. {}", lines.join("; "))
}

/// What an agent says to have the scripted user make `calls` (the user's
/// own), in order.
pub fn request(calls: &[ToolCall]) -> String {
    let written: Vec<String> = calls
        .iter()
        .map(|call| format!("`{}`", written(call)))
        .collect();
    match written.as_slice() {
        [one] => format!("Please do this on your side: {one}."),
        _ => format!(
            "Please do these on your side, in this order: {}.",
            written.join(", then ")
        ),
    }
}

/// `call` as a request writes it: `name(key=value, …)`, values as JSON.
fn written(call: &ToolCall) -> String {
    let arguments = match &call.arguments {
        Value::Object(fields) => fields
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    format!("{}({arguments})", call.name)
}

/// How many times (lower-case) `message` names the identifier `name`: as a
/// whole identifier (`toggle_data_saver_mode` does not name `toggle_data`).
fn namings_of(message: &str, name: &str) -> usize {
    let part_of_identifier = |ch: char| ch.is_alphanumeric() || ch == '_';
    message
        .match_indices(name)
        .filter(|&(at, _)| {
            let before = message[..at].chars().next_back();
            let after = message[at + name.len()..].chars().next();
            !before.is_some_and(part_of_identifier) && !after.is_some_and(part_of_identifier)
        })
        .count()
}

/// Whether (lower-case) `message` states every scalar value in `arguments`.
fn states_arguments(message: &str, arguments: &Value) -> bool {
    match arguments {
        Value::Null => true,
        // A string of JSON (arguments passed on to another tool) is stated
        // as its text, or by its own values where a request escaped it.
        Value::String(text) => {
            message.contains(&text.to_lowercase())
                || serde_json::from_str::<Value>(text).is_ok_and(|inner| {
                    (inner.is_object() || inner.is_array()) && states_arguments(message, &inner)
                })
        }
        Value::Bool(_) | Value::Number(_) => message.contains(&arguments.to_string()),
        Value::Array(items) => items.iter().all(|item| states_arguments(message, item)),
        Value::Object(fields) => fields
            .values()
            .all(|value| states_arguments(message, value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asks_for(message: &str, call: &ToolCall) -> bool {
        let message = message.to_lowercase();
        namings_of(&message, &call.name) > 0 && states_arguments(&message, &call.arguments)
    }

    fn user_call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            actor: Actor::User,
            ..ToolCall::new(name, arguments)
        }
    }

    #[test]
    fn a_call_is_asked_for_by_its_tools_name_and_every_argument_value() {
        let grant = user_call(
            "grant_app_permission",
            json!({"app_name": "messaging", "permission": "sms"}),
        );
        assert!(asks_for(
            "Please run `grant_app_permission(app_name=\"messaging\", permission=\"SMS\")`.",
            &grant
        ));
        assert!(!asks_for(
            "Please run grant_app_permission for messaging.",
            &grant
        ));
        let data = user_call("toggle_data", json!({}));
        assert!(asks_for("Now toggle_data, please.", &data));
        assert!(!asks_for("Please toggle_data_saver_mode().", &data));
        assert!(!asks_for("Please my_toggle_data().", &data));
        assert!(!asks_for("Please toggle your data.", &data));
        let nested = user_call(
            "call_discoverable_user_tool",
            json!({"discoverable_tool_name": "submit_referral", "arguments": "{\"user_id\": \"nk80\"}"}),
        );
        assert!(asks_for(&request(std::slice::from_ref(&nested)), &nested));
    }

    #[test]
    fn it_makes_the_calls_asked_for_in_gold_order_and_stops_once_none_is_left() {
        let task: Task = serde_json::from_value(json!({
            "id": "t",
            "instruction": "My phone has no data.",
            "gold_actions": [
                {"name": "enable_roaming", "arguments": {"line": "L1"}},
                {"name": "reboot_device", "actor": "user"},
                {"name": "toggle_roaming", "actor": "user"},
                {"name": "reboot_device", "actor": "user"}
            ]
        }))
        .unwrap();
        let mut user = ScriptedUser::new(&task);
        assert_eq!(user.open().unwrap(), "My phone has no data.");
        let mut transcript = vec![ChatMessage::assistant("Let me look at your line.")];
        assert_eq!(
            user.respond(&transcript).unwrap(),
            UserTurn::Say(UNSURE.into())
        );
        // Asked in another order, made in the gold one; one naming of
        // `reboot_device` asks for one reboot.
        transcript.push(ChatMessage::assistant(
            "Please toggle_roaming() and then reboot_device().",
        ));
        let calls: Vec<String> = (0..2)
            .map(|at| match user.respond(&transcript).unwrap() {
                UserTurn::Call(call) => {
                    assert_eq!(call.actor, Actor::User);
                    transcript.push(ChatMessage::user_call(crate::trajectory::ChatToolCall {
                        id: format!("call_{at}"),
                        kind: "function".into(),
                        function: crate::trajectory::ChatFunction {
                            name: call.name.clone(),
                            arguments: call.arguments.to_string(),
                        },
                    }));
                    transcript.push(ChatMessage::tool(format!("call_{at}"), "ok"));
                    call.name
                }
                other => panic!("expected a call, got {other:?}"),
            })
            .collect();
        assert_eq!(calls, ["reboot_device", "toggle_roaming"]);
        assert_eq!(
            user.respond(&transcript).unwrap(),
            UserTurn::Say("Done. `reboot_device()` → ok; `toggle_roaming()` → ok".into())
        );
        transcript.push(ChatMessage::assistant("Anything else?"));
        assert_eq!(
            user.respond(&transcript).unwrap(),
            UserTurn::Say(UNSURE.into()),
            "a reboot is still to make"
        );
        transcript.push(ChatMessage::assistant(request(&[user_call(
            "reboot_device",
            Value::Null,
        )])));
        assert!(matches!(
            user.respond(&transcript).unwrap(),
            UserTurn::Call(_)
        ));
        transcript.push(ChatMessage::assistant("All done."));
        assert_eq!(user.respond(&transcript).unwrap(), UserTurn::Stop);
    }
}
