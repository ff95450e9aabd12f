//! The OpenEnv environment API, transport-free: actions in, `{observation,
//! reward, done}` out, in the shapes OpenEnv's Python clients
//! (`GenericEnvClient`, `MCPToolClient`) read.
//!
//! Actions are OpenEnv's MCP actions: `{"type": "list_tools"}` and
//! `{"type": "call_tool", "tool_name", "arguments"}`; the agent talks to the
//! simulated user by calling [`MESSAGE_TOOL`]. Forge's own fields — the
//! session id, the task, the messages the agent has not seen yet (the user's
//! opening message after a reset) — are in the observation's `metadata`,
//! which both clients pass through.

use crate::ServeError;
use crate::mcp::{MESSAGE_TOOL, tool_entries};
use crate::sessions::{Hub, Observation, OpenRequest, SessionState};
use forge_runtime::bundle::MAX_ARGUMENT_DEPTH;
use forge_runtime::{Action, ToolCall};
use serde_json::{Value, json};

/// Why a step could not be taken.
#[derive(Debug)]
pub enum StepError {
    /// The action is malformed: pydantic-style errors, as OpenEnv reports them.
    Invalid(Vec<Value>),
    Refused(ServeError),
}

impl From<ServeError> for StepError {
    fn from(err: ServeError) -> Self {
        Self::Refused(err)
    }
}

/// The options a reset reads.
const RESET_OPTIONS: [&str; 5] = ["seed", "episode_id", "env", "task_id", "policy"];

/// Other names a client may give a reset option (other servers', and the
/// CLI's `--task`), each with the option meant. (`session_id` is not among
/// them: MCP clients send it beside an `initialize`'s options.)
const RESET_ALIASES: [(&str, &str); 5] = [
    ("task", "task_id"),
    ("task_name", "task_id"),
    ("environment", "env"),
    ("env_name", "env"),
    ("env_id", "env"),
];

/// A key among `keys` that is a reset option misspelt (`taskid`, `Task-Id`)
/// or under another server's name (`task`, `environment`), with the option meant:
/// ignored as other unknown keys are, it would reset into another task
/// than the one asked for.
pub fn misspelt_option<'a>(
    keys: impl IntoIterator<Item = &'a str>,
) -> Option<(&'a str, &'static str)> {
    let plain = |key: &str| -> String {
        key.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let names = RESET_OPTIONS
        .iter()
        .map(|option| (*option, *option))
        .chain(RESET_ALIASES);
    keys.into_iter()
        .filter(|key| !RESET_OPTIONS.contains(key))
        .find_map(|key| {
            let (_, meant) = names.clone().find(|(name, _)| plain(name) == plain(key))?;
            Some((key, meant))
        })
}

/// The keys an action may have, as OpenEnv's `CallToolAction` (whose
/// `Action` base forbids others: a misspelt `args` would otherwise call
/// the tool without its arguments and spend the agent's turn).
const ACTION_KEYS: [&str; 4] = ["type", "tool_name", "arguments", "metadata"];

/// Reads a reset's options (`seed`, `episode_id`, and Forge's `env`,
/// `task_id`, `policy`); unknown keys are ignored, as OpenEnv does, unless
/// they are one of those misspelt.
pub fn open_request(data: &Value) -> Result<OpenRequest, StepError> {
    if !(data.is_object() || data.is_null()) {
        return Err(StepError::Invalid(vec![invalid(
            "dict_type",
            &[],
            "Input should be a valid dictionary (a reset's options are an object)",
            data,
        )]));
    }
    let keys = data
        .as_object()
        .into_iter()
        .flat_map(|object| object.keys());
    if let Some((key, meant)) = misspelt_option(keys.map(String::as_str)) {
        return Err(StepError::Invalid(vec![invalid(
            "extra_forbidden",
            &[key],
            &format!("Unknown option: did you mean `{meant}`?"),
            &data[key],
        )]));
    }
    let text = |key: &str| -> Result<Option<String>, StepError> {
        match data.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(StepError::Invalid(vec![invalid(
                "string_type",
                &[key],
                "Input should be a valid string",
                other,
            )])),
        }
    };
    let seed = match data.get("seed") {
        None | Some(Value::Null) => None,
        Some(value) => Some(value.as_u64().ok_or_else(|| {
            StepError::Invalid(vec![invalid(
                "int_type",
                &["seed"],
                "Input should be a non-negative integer below 2^64",
                value,
            )])
        })?),
    };
    Ok(OpenRequest {
        env: text("env")?,
        task_id: text("task_id")?,
        seed,
        session_id: text("episode_id")?,
        policy: text("policy")?,
        ..OpenRequest::default()
    })
}

/// Starts an episode: the reset's `{observation, reward, done}`.
pub fn reset(hub: &Hub, request: OpenRequest) -> Result<Value, ServeError> {
    hub.open(request)
        .map(|observation| reset_result(&observation))
}

/// The answer to a reset that opened `observation`'s episode.
pub fn reset_result(observation: &Observation) -> Value {
    step_result(json!({}), observation)
}

/// Takes one action in session `id`, for the WebSocket connection `by` (if
/// any).
pub fn step(hub: &Hub, id: &str, by: Option<u64>, action: &Value) -> Result<Value, StepError> {
    if !action.is_object() {
        return Err(StepError::Invalid(vec![invalid(
            "dict_type",
            &[],
            "Input should be a valid dictionary (an action is an object with a `type`)",
            action,
        )]));
    }
    let allowed: &[&str] = match action.get("type").and_then(Value::as_str) {
        Some("list_tools") => &["type", "metadata"],
        _ => &ACTION_KEYS,
    };
    let extra = action
        .as_object()
        .into_iter()
        .flat_map(|object| object.keys())
        .find(|key| !allowed.contains(&key.as_str()));
    if let Some(key) = extra {
        let hint = match key.as_str() {
            "args" | "params" | "parameters" | "input" if allowed.contains(&"arguments") => {
                " (the call's arguments go in `arguments`)"
            }
            "name" | "tool" if allowed.contains(&"tool_name") => " (the tool goes in `tool_name`)",
            _ => "",
        };
        return Err(StepError::Invalid(vec![invalid(
            "extra_forbidden",
            &[key],
            &format!("Extra inputs are not permitted{hint}"),
            &action[key],
        )]));
    }
    let kind = action.get("type").and_then(Value::as_str);
    match kind {
        Some("list_tools") => {
            let tools = hub.tools(id)?;
            let (done, reward) = hub.outcome(id)?;
            Ok(json!({
                "observation": {"tools": tool_entries(&tools, "input_schema"), "metadata": {"session_id": id}},
                "reward": reward,
                "done": done,
            }))
        }
        Some("call_tool") => {
            let Some(tool) = action.get("tool_name").and_then(Value::as_str) else {
                return Err(StepError::Invalid(vec![invalid(
                    "missing",
                    &["tool_name"],
                    "Field required",
                    action,
                )]));
            };
            let arguments = call_arguments(action.get("arguments"))?;
            let observation = hub.step(id, by, to_action(tool, arguments)?)?;
            Ok(step_result(
                call_observation(tool, &observation),
                &observation,
            ))
        }
        _ => Err(StepError::Invalid(vec![invalid(
            "literal_error",
            &["type"],
            "Input should be 'list_tools' or 'call_tool'",
            action.get("type").unwrap_or(&Value::Null),
        )])),
    }
}

/// A session's state (`episode_id`, `step_count`, and Forge's fields).
pub fn state(state: &SessionState) -> Value {
    serde_json::to_value(state).expect("a state serialises")
}

/// The state where there is no episode (OpenEnv's `State` defaults):
/// asking for it opens none.
pub fn no_state() -> Value {
    json!({"episode_id": null, "step_count": 0})
}

/// A call's `arguments`: an object, or none (`{}`).
pub fn call_arguments(arguments: Option<&Value>) -> Result<Value, StepError> {
    match arguments {
        None | Some(Value::Null) => Ok(json!({})),
        Some(arguments @ Value::Object(_)) => Ok(arguments.clone()),
        Some(other) => Err(StepError::Invalid(vec![invalid(
            "dict_type",
            &["arguments"],
            "Input should be a valid dictionary",
            other,
        )])),
    }
}

/// The action a tool call stands for.
pub fn to_action(tool: &str, arguments: Value) -> Result<Action, StepError> {
    if tool != MESSAGE_TOOL {
        let call = ToolCall::new(tool, arguments);
        let depth = call.arguments_depth();
        if depth > MAX_ARGUMENT_DEPTH {
            // Refused before the episode records it: its record would not
            // read back.
            return Err(StepError::Invalid(vec![invalid(
                "too_deep",
                &["arguments"],
                &format!(
                    "the arguments nest {depth} levels deep; at most {MAX_ARGUMENT_DEPTH} are taken"
                ),
                &Value::Null,
            )]));
        }
        return Ok(Action::call(call));
    }
    match arguments.get("message").and_then(Value::as_str) {
        Some(text) => Ok(Action::Say(text.to_owned())),
        None => Err(StepError::Invalid(vec![invalid(
            "missing",
            &["arguments", "message"],
            &format!("`{MESSAGE_TOOL}` needs a string `message`"),
            &arguments,
        )])),
    }
}

/// `{tool_name, result, error}` of a call: the result as an MCP tool result
/// (its `data` the JSON the tool answered, where it answered JSON); the
/// tool's own refusals are results with `is_error`; an unknown tool and a
/// call the sandbox stopped are errors.
fn call_observation(tool: &str, observation: &Observation) -> Value {
    let (text, is_error) = observation.answer();
    let error = |error_type: &str| json!({"tool_name": tool, "result": null, "error": {"error_type": error_type, "message": text}});
    if let Some(result) = &observation.result {
        if !result.known {
            return error("tool_not_found");
        }
        if result.is_sandbox_error() {
            return error("execution_error");
        }
    }
    json!({
        "tool_name": tool,
        "result": {
            "content": [{"type": "text", "text": text}],
            "structured_content": null,
            "data": data(&text),
            "is_error": is_error,
        },
        "error": null,
    })
}

/// A result's value: the JSON a tool answered, or its text.
pub fn data(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// `{observation, reward, done}`, with Forge's fields in the observation's
/// `metadata`.
fn step_result(mut fields: Value, observation: &Observation) -> Value {
    fields["metadata"] = json!({
        "session_id": observation.session_id,
        "env": observation.env,
        "task_id": observation.task_id,
        "step_count": observation.step_count,
        "messages": observation.messages,
    });
    if let Some(instructions) = &observation.instructions {
        fields["metadata"]["instructions"] = instructions.as_str().into();
    }
    json!({"observation": fields, "reward": observation.reward, "done": observation.done})
}

/// One pydantic-style validation error, as OpenEnv reports them: its kind
/// (`missing`, `string_type`, …), where (`loc`), what, and the input.
pub fn invalid(kind: &str, loc: &[&str], message: &str, input: &Value) -> Value {
    json!({"type": kind, "loc": loc, "msg": message, "input": input})
}
