use crate::bundle::{Actor, Task, ToolCall};
use crate::episode::{User, UserTurn};
use crate::policy::remembered_instruction;
use crate::schema::ToolSpec;
use crate::trajectory::{ChatMessage, Role, UserRef};
use anyhow::Result;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};

/// What the scripted user answers a message that asks for no call of its
/// tools.
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

/// States the task instruction, makes calls of its own tools (τ²-bench's
/// telecom: checking the status bar, toggling airplane mode, rebooting the
/// phone) when the agent asks for them, and ends the dialogue at the first
/// message of the agent once the calls that the task's gold actions give
/// it are made.
///
/// The agent asks for a call by naming its tool as a whole identifier, as
/// the telecom manual has the agent "guide the user to use
/// `toggle_airplane_mode()`":
/// - a naming written out as a call, `name(key=value, …)` (values as JSON
///   or bare words; values written without names take the tool's
///   parameters in its schema's order), asks for that call — or for the
///   user's gold call of the tool still to make whose every value the
///   written arguments state (case aside), so that the gold call is made
///   as given;
/// - the first other naming of a tool asks for its gold call still to make
///   whose every value the message states, or else, for a tool that
///   requires no argument, for its call without one; naming it again asks
///   for nothing more (two reboots are two written calls).
///
/// The user makes the calls in the order the message asks for them and
/// reports their results; a message that asks for none gets [`UNSURE`].
/// A script cannot read intent, so it follows the letter: a tool named in
/// passing is used, and a call whose arguments it cannot tell is not made.
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

    /// Queues in `asked` the calls of `tools` (the user's) that `message`
    /// asks for, in the message's order.
    fn take_asked(&mut self, message: &str, tools: &[ToolSpec]) {
        // A gold call's tool is known even to a caller that lists no tools.
        let mut signatures: BTreeMap<String, Signature> = tools
            .iter()
            .map(|tool| (tool.name.clone(), Signature::of(tool)))
            .collect();
        for call in &self.pending {
            signatures.entry(call.name.clone()).or_default();
        }
        // ASCII lower case keeps the message's byte offsets.
        let folded = message.to_ascii_lowercase();
        let lower = message.to_lowercase();
        let mut asked = Vec::new();
        for (name, signature) in signatures {
            let mut named = false;
            for at in namings_of(&folded, &name.to_ascii_lowercase()) {
                let after = &message[at + name.len()..];
                let call = match written_arguments(after, &signature.parameters) {
                    Some((text, arguments)) => self
                        .take_pending(&name, &text.to_lowercase())
                        .unwrap_or_else(|| ToolCall::new(&name, arguments)),
                    // Naming a tool again asks for nothing more.
                    None if named => continue,
                    None => match self.take_pending(&name, &lower) {
                        Some(call) => call,
                        None if signature.bare => {
                            ToolCall::new(&name, Value::Object(Default::default()))
                        }
                        None => continue,
                    },
                };
                named = true;
                asked.push((at, call));
            }
        }
        asked.sort_by_key(|&(at, _)| at);
        let asked = asked.into_iter().map(|(_, call)| ToolCall {
            actor: Actor::User,
            ..call
        });
        self.asked.extend(asked);
    }

    /// Takes the first gold call of tool `name` still to make whose every
    /// argument value (lower-case) `text` states.
    fn take_pending(&mut self, name: &str, text: &str) -> Option<ToolCall> {
        let at = self
            .pending
            .iter()
            .position(|call| call.name == name && states_arguments(text, &call.arguments))?;
        Some(self.pending.remove(at))
    }
}

impl User for ScriptedUser {
    fn open(&mut self, _: &[ToolSpec]) -> Result<String> {
        Ok(self.instruction.clone())
    }

    fn respond(&mut self, transcript: &[ChatMessage], tools: &[ToolSpec]) -> Result<UserTurn> {
        let last = transcript.last();
        if let Some(message) = last.filter(|message| message.role == Role::Assistant) {
            if self.pending.is_empty() {
                return Ok(UserTurn::Stop);
            }
            self.take_asked(message.content.as_deref().unwrap_or_default(), tools);
            if self.asked.is_empty() {
                return Ok(UserTurn::Say(UNSURE.into()));
            }
        }
        Ok(match self.asked.pop_front() {
            Some(call) => UserTurn::Call(call),
            None => UserTurn::Say(report(transcript)),
        })
    }

    fn played_by(&self) -> Option<UserRef> {
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
            let arguments = call.function.parsed_arguments();
            lines.push(format!(
                "`{}` → {result}",
                ToolCall::new(&call.function.name, arguments)
            ));
        }
    }
    format!("Done. {}", lines.join("; "))
}

/// What an agent says to have the scripted user make `calls` (the user's
/// own), in order.
pub fn request(calls: &[ToolCall]) -> String {
    let written: Vec<String> = calls.iter().map(|call| format!("`{call}`")).collect();
    match written.as_slice() {
        [one] => format!("Please do this on your side: {one}."),
        _ => format!(
            "Please do these on your side, in this order: {}.",
            written.join(", then ")
        ),
    }
}

/// Where (lower-case) `message` names the identifier `name`: as a whole
/// identifier (`toggle_data_saver_mode` does not name `toggle_data`).
fn namings_of(message: &str, name: &str) -> Vec<usize> {
    let part_of_identifier = |ch: char| ch.is_alphanumeric() || ch == '_';
    message
        .match_indices(name)
        .map(|(at, _)| at)
        .filter(|&at| {
            let before = message[..at].chars().next_back();
            let after = message[at + name.len()..].chars().next();
            !before.is_some_and(part_of_identifier) && !after.is_some_and(part_of_identifier)
        })
        .collect()
}

/// One of the user's tools as the scripted user reads a call of it.
#[derive(Default)]
struct Signature {
    /// Its parameters in the order its schema lists them, which values
    /// written without their names take.
    parameters: Vec<String>,
    /// Whether it can be called without arguments.
    bare: bool,
}

impl Signature {
    fn of(tool: &ToolSpec) -> Self {
        let schema = &tool.parameters;
        Self {
            parameters: schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| properties.keys().cloned().collect())
                .unwrap_or_default(),
            bare: schema
                .get("required")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty),
        }
    }
}

/// The arguments that `after`, the text right after a tool's name, writes
/// out as a call — `(value, …, key=value, …)`, a value as JSON or a bare
/// word, `:` for `=`, values without names taking `parameters` in order —
/// with the text between the parentheses; `None` where it writes no call
/// or one in another form.
fn written_arguments<'a>(after: &'a str, parameters: &[String]) -> Option<(&'a str, Value)> {
    let inner = after.strip_prefix('(')?;
    let mut arguments = serde_json::Map::new();
    let mut unnamed = parameters.iter();
    let mut named = false;
    let mut rest = inner.trim_start();
    while !rest.starts_with(')') {
        let (key, tail) = match written_key(rest) {
            Some((key, tail)) => {
                named = true;
                (key.to_owned(), tail)
            }
            None if !named => (unnamed.next()?.clone(), rest),
            None => return None,
        };
        let (value, tail) = written_value(tail)?;
        arguments.insert(key, value);
        rest = tail.trim_start();
        if let Some(next) = rest.strip_prefix(',') {
            rest = next.trim_start();
        } else if !rest.starts_with(')') {
            return None;
        }
    }
    let text = &inner[..inner.len() - rest.len()];
    Some((text, Value::Object(arguments)))
}

/// The name `text` starts with, as in `key=` or `key:`, and what follows.
fn written_key(text: &str) -> Option<(&str, &str)> {
    let len = text.find(|ch: char| !(ch.is_alphanumeric() || ch == '_'))?;
    let (key, tail) = text.split_at(len);
    let tail = tail.trim_start();
    let tail = tail.strip_prefix('=').or_else(|| tail.strip_prefix(':'))?;
    (!key.is_empty()).then_some((key, tail.trim_start()))
}

/// The value `text` starts with, up to the next `,` or `)`, and what
/// follows it: JSON, or else a bare word (quotes around it dropped).
fn written_value(text: &str) -> Option<(Value, &str)> {
    let mut json = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    if let Some(Ok(value)) = json.next() {
        let tail = &text[json.byte_offset()..];
        if tail.trim_start().starts_with([',', ')']) {
            return Some((value, tail));
        }
    }
    // JSON scalars must be followed by a JSON delimiter, which `)` is not.
    let end = text.find([',', ')'])?;
    let word = text[..end].trim();
    let value = serde_json::from_str(word)
        .unwrap_or_else(|_| Value::String(word.trim_matches(['\'', '`']).to_owned()));
    (!word.is_empty()).then_some((value, &text[end..]))
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
    use crate::trajectory::{ChatFunction, ChatToolCall};
    use serde_json::json;

    fn asks_for(message: &str, call: &ToolCall) -> bool {
        let message = message.to_lowercase();
        !namings_of(&message, &call.name).is_empty() && states_arguments(&message, &call.arguments)
    }

    fn user_call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            actor: Actor::User,
            ..ToolCall::new(name, arguments)
        }
    }

    /// A user tool requiring `required`.
    fn tool(name: &str, required: &[&str]) -> ToolSpec {
        let properties: serde_json::Map<String, Value> = required
            .iter()
            .map(|key| (key.to_string(), json!({"type": "string"})))
            .collect();
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": properties, "required": required}),
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
    fn written_calls_are_read_with_json_or_bare_values() {
        let read_with = |after: &str, parameters: &[&str]| {
            let parameters: Vec<String> = parameters.iter().map(|name| name.to_string()).collect();
            written_arguments(after, &parameters)
                .map(|(text, arguments)| (text.to_owned(), arguments))
        };
        let read = |after: &str| read_with(after, &[]);
        assert_eq!(read("() now"), Some((String::new(), json!({}))));
        assert_eq!(read("( )"), Some((" ".into(), json!({}))));
        assert_eq!(
            read("(mode=\"4g_only\", tries=2)."),
            Some((
                "mode=\"4g_only\", tries=2".into(),
                json!({"mode": "4g_only", "tries": 2})
            ))
        );
        assert_eq!(
            read("(app_name: 'messaging', permission = sms)"),
            Some((
                "app_name: 'messaging', permission = sms".into(),
                json!({"app_name": "messaging", "permission": "sms"})
            ))
        );
        assert_eq!(
            read("(settings={\"apn\": \"a, b\"})").map(|(_, arguments)| arguments),
            Some(json!({"settings": {"apn": "a, b"}}))
        );
        assert_eq!(read(" ()"), None, "the call follows the name");
        assert_eq!(read("(the messaging app)"), None, "a value of no parameter");
        assert_eq!(read("(mode=\"4g\""), None, "unclosed");
        assert_eq!(read("(=1)"), None);
        // Values without names take the parameters in order, before any
        // named one.
        let app = ["app_name", "permission"];
        assert_eq!(
            read_with("('messaging', permission=\"sms\")", &app).map(|(_, arguments)| arguments),
            Some(json!({"app_name": "messaging", "permission": "sms"}))
        );
        assert_eq!(
            read_with("(messaging, sms)", &app).map(|(_, arguments)| arguments),
            Some(json!({"app_name": "messaging", "permission": "sms"}))
        );
        assert_eq!(
            read_with("(a, b, c)", &app),
            None,
            "more values than parameters"
        );
        assert_eq!(read_with("(permission=sms, messaging)", &app), None);
    }

    /// Plays the user's calls of `transcript`'s last message, answering
    /// each with `ok`, and gives them and the user's reply.
    fn played(
        user: &mut ScriptedUser,
        transcript: &mut Vec<ChatMessage>,
        tools: &[ToolSpec],
    ) -> (Vec<String>, UserTurn) {
        let mut calls = Vec::new();
        loop {
            match user.respond(transcript, tools).unwrap() {
                UserTurn::Call(call) => {
                    assert_eq!(call.actor, Actor::User);
                    let id = format!("call_{}", transcript.len());
                    let written = call.to_string();
                    transcript.push(ChatMessage::user_call(ChatToolCall {
                        id: id.clone(),
                        kind: "function".into(),
                        function: ChatFunction {
                            name: call.name,
                            arguments: call.arguments.to_string(),
                        },
                    }));
                    transcript.push(ChatMessage::tool(id, "ok"));
                    calls.push(written);
                }
                reply => return (calls, reply),
            }
        }
    }

    #[test]
    fn it_makes_the_calls_asked_for_in_the_messages_order_and_stops_once_its_gold_calls_are_made() {
        let task: Task = serde_json::from_value(json!({
            "id": "t",
            "instruction": "My phone has no data.",
            "gold_actions": [
                {"name": "enable_roaming", "arguments": {"line": "L1"}},
                {"name": "reboot_device", "actor": "user"},
                {"name": "set_mode", "arguments": {"mode": "4g"}, "actor": "user"},
                {"name": "reboot_device", "actor": "user"}
            ]
        }))
        .unwrap();
        let tools = [
            tool("check_status_bar", &[]),
            tool("check_app", &["app_name"]),
            tool("reboot_device", &[]),
            tool("set_mode", &["mode"]),
        ];
        let mut user = ScriptedUser::new(&task);
        assert_eq!(user.open(&tools).unwrap(), "My phone has no data.");
        let mut transcript = Vec::new();
        let mut say = |transcript: &mut Vec<ChatMessage>, text: &str| {
            transcript.push(ChatMessage::assistant(text));
            played(&mut user, transcript, &tools)
        };
        assert_eq!(
            say(&mut transcript, "Let me look at your line."),
            (vec![], UserTurn::Say(UNSURE.into()))
        );
        // A tool that requires an argument is not used without it.
        assert_eq!(
            say(&mut transcript, "Please check_app for me."),
            (vec![], UserTurn::Say(UNSURE.into()))
        );
        // Calls that are no gold call are made as asked, in the order the
        // message names them (a script reads no "after"); naming a tool
        // again asks for nothing more.
        let (calls, reply) = say(
            &mut transcript,
            "Please run set_mode with mode 4G, after check_app('messaging') and \
             check_status_bar; tell me what check_status_bar shows.",
        );
        assert_eq!(
            calls,
            [
                "set_mode(mode=\"4g\")",
                "check_app(app_name=\"messaging\")",
                "check_status_bar()"
            ]
        );
        assert_eq!(
            reply,
            UserTurn::Say(
                "Done. `set_mode(mode=\"4g\")` → ok; `check_app(app_name=\"messaging\")` → ok; \
                 `check_status_bar()` → ok"
                    .into()
            )
        );
        // Written calls ask for one call each.
        let (calls, _) = say(
            &mut transcript,
            "Please reboot_device(), then reboot_device().",
        );
        assert_eq!(calls, ["reboot_device()", "reboot_device()"]);
        assert_eq!(say(&mut transcript, "All done?").1, UserTurn::Stop);
    }
}
