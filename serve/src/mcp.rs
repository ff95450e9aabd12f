//! The Model Context Protocol (JSON-RPC 2.0), transport-free: an MCP session
//! is one episode. `initialize` opens it — the simulated user's opening
//! message is the server's `instructions` — `tools/list` lists the agent's
//! tools and [`MESSAGE_TOOL`], and `tools/call` takes an action. The HTTP
//! transport (`/mcp`) and the stdio one (`forge serve --stdio`) only move
//! these messages.

use crate::openenv::{self, StepError};
use crate::sessions::{Hub, Observation, OpenRequest};
use crate::{ServeError, catalog::Catalog};
use serde_json::{Value, json};

/// The tool that says something to the simulated user and returns its
/// answer; the episode ends when the user stops.
pub const MESSAGE_TOOL: &str = "send_message_to_user";

/// Protocol versions spoken, newest first.
const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
/// Requests the server refuses (rate, capacity, an episode that is over).
const SERVER_ERROR: i64 = -32000;

/// What to send back for one incoming message.
#[derive(Debug, PartialEq)]
pub enum Reply {
    /// The response to a request.
    Response(Value),
    /// The response to `initialize`, which opened session `session_id`.
    Opened { response: Value, session_id: String },
    /// A notification or a client's response: nothing to answer.
    Accepted,
    /// The error response to a request that needs a session and named
    /// none, which MCP's HTTP transport answers with 400.
    Sessionless(Value),
}

/// How MCP messages reach the server, which decides what a client does to
/// start another episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `/mcp`: a session per `initialize`, ended by a close or `DELETE`.
    Http,
    /// `mcp` frames of a WebSocket, whose session a `reset` frame renews.
    WebSocket,
    /// `forge serve --stdio`: an `initialize` once an episode is over opens
    /// the next.
    Stdio,
}

impl Transport {
    /// How to start another episode, as a clause, once the session's
    /// episode is `over` or while it is not.
    fn another_episode(self, over: bool) -> &'static str {
        match (self, over) {
            (Self::Http, _) => {
                "close this session (`openenv/session/close`, or `DELETE /mcp`) and initialize a \
                 new one"
            }
            (Self::WebSocket, _) => "send a `reset` frame on this connection",
            (Self::Stdio, true) => "send `initialize`",
            (Self::Stdio, false) => {
                "finish this one, or close it (`openenv/session/close`), then send `initialize`"
            }
        }
    }
}

/// Refuses environments whose own tools would be shadowed by [`MESSAGE_TOOL`].
pub fn check_catalog(catalog: &Catalog) -> anyhow::Result<()> {
    for env in catalog.envs() {
        if env
            .component()
            .tool(forge_runtime::Actor::Agent, MESSAGE_TOOL)
            .is_some()
        {
            anyhow::bail!(
                "environment `{}` has a tool named `{MESSAGE_TOOL}`, which MCP clients use to talk to the user",
                env.name()
            );
        }
    }
    Ok(())
}

/// The JSON-RPC error response to `message` for bad parameters (counted as
/// a refused request).
pub fn invalid_params(hub: &Hub, message: &Value, detail: &str) -> Value {
    hub.metrics().refuse("invalid_params");
    error(
        message.get("id").unwrap_or(&Value::Null),
        INVALID_PARAMS,
        detail,
    )
}

/// The JSON-RPC error response to `message` for a refused request
/// (counted as one).
pub fn refused_message(hub: &Hub, message: &Value, err: &ServeError) -> Value {
    hub.metrics().refuse(err.code());
    refused(message.get("id").unwrap_or(&Value::Null), err)
}

/// The JSON-RPC error response to an unparsable message (counted as a
/// refused request).
pub fn parse_error(hub: &Hub, detail: &str) -> Value {
    hub.metrics().refuse("bad_json");
    error(&Value::Null, PARSE_ERROR, &format!("parse error: {detail}"))
}

/// Answers one message of `session` (none before `initialize`) come by
/// `transport`; `open` says which task `initialize` starts. An error
/// answer is counted as a refused request, as over the other transports.
pub fn handle(
    hub: &Hub,
    transport: Transport,
    session: Option<&str>,
    open: &OpenRequest,
    message: &Value,
) -> Reply {
    let reply = answer(hub, transport, session, open, message);
    if let Reply::Response(response) | Reply::Opened { response, .. } | Reply::Sessionless(response) =
        &reply
        && let Some(error) = response.get("error")
    {
        hub.metrics().refuse(refusal_kind(error));
    }
    reply
}

/// The kind a refused request is counted as: the server's own code for the
/// requests it refuses, else one for the JSON-RPC error.
fn refusal_kind(error: &Value) -> &str {
    if let Some(code) = error.pointer("/data/code").and_then(Value::as_str) {
        return code;
    }
    match error.get("code").and_then(Value::as_i64) {
        Some(METHOD_NOT_FOUND) => "method_not_found",
        Some(INVALID_PARAMS) => "invalid_params",
        _ => "bad_request",
    }
}

fn answer(
    hub: &Hub,
    transport: Transport,
    session: Option<&str>,
    open: &OpenRequest,
    message: &Value,
) -> Reply {
    let Some(object) = message.as_object() else {
        let detail = match message {
            Value::Array(_) => "expected one JSON-RPC message object (batches are not supported)",
            _ => "expected a JSON-RPC message object",
        };
        return Reply::Response(error(&Value::Null, INVALID_REQUEST, detail));
    };
    let id = object.get("id").cloned();
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        // A response to a request of ours (we send none) or garbage.
        return match id {
            Some(_) if object.contains_key("result") || object.contains_key("error") => {
                Reply::Accepted
            }
            _ => Reply::Response(error(
                &id.unwrap_or(Value::Null),
                INVALID_REQUEST,
                "a JSON-RPC request needs a `method`",
            )),
        };
    };
    let Some(id) = id else {
        // Notifications (`notifications/initialized`, `…/cancelled`) need no answer.
        return Reply::Accepted;
    };
    let params = object.get("params").cloned().unwrap_or_else(|| json!({}));
    // OpenEnv's clients name the session in the parameters.
    let session = session.or_else(|| params.get("session_id").and_then(Value::as_str));
    Reply::Response(match (method, session) {
        ("initialize", Some(_)) => error(
            &id,
            INVALID_REQUEST,
            &format!(
                "this session is initialized already: to start another episode, {}",
                transport.another_episode(false)
            ),
        ),
        ("initialize", None) => return initialize(hub, open, &id, &params),
        // OpenEnv's `MCPToolClient` makes its session so.
        ("openenv/session/create", _) => match openenv::open_request(&params) {
            Ok(request) => match hub.open(OpenRequest {
                session_id: None,
                held: true,
                ..request
            }) {
                Ok(opened) => success(&id, json!({"session_id": opened.session_id})),
                Err(err) => refused(&id, &err),
            },
            Err(StepError::Invalid(errors)) => error(
                &id,
                INVALID_PARAMS,
                &format!("malformed session options: {}", describe(&errors)),
            ),
            Err(StepError::Refused(err)) => refused(&id, &err),
        },
        ("ping", _) => success(&id, json!({})),
        ("tools/list", Some(session)) => match hub.tools(session) {
            Ok(tools) => success(&id, json!({ "tools": tool_entries(&tools, "inputSchema") })),
            Err(err) => refused(&id, &err),
        },
        ("tools/call", Some(session)) => {
            call(hub, transport, session, open.connection, &id, &params)
        }
        ("openenv/session/close", Some(session)) => match hub.close(session, open.connection) {
            Ok(()) => success(&id, json!({"session_id": session, "closed": true})),
            Err(err) => refused(&id, &err),
        },
        ("tools/list" | "tools/call" | "openenv/session/close", None) => {
            return Reply::Sessionless(error(
                &id,
                INVALID_REQUEST,
                "no session: send `initialize` first (or name a `session_id`)",
            ));
        }
        _ => error(
            &id,
            METHOD_NOT_FOUND,
            &format!("method `{method}` not found"),
        ),
    })
}

fn initialize(hub: &Hub, open: &OpenRequest, id: &Value, params: &Value) -> Reply {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = VERSIONS
        .into_iter()
        .find(|version| Some(*version) == asked)
        .unwrap_or(VERSIONS[0]);
    let open = match picked_in(params, open) {
        Ok(open) => open,
        Err(StepError::Invalid(errors)) => {
            let detail = format!("malformed session options: {}", describe(&errors));
            return Reply::Response(error(id, INVALID_PARAMS, &detail));
        }
        Err(StepError::Refused(err)) => return Reply::Response(refused(id, &err)),
    };
    let opened = match hub.open(open) {
        Ok(opened) => opened,
        Err(err) => return Reply::Response(refused(id, &err)),
    };
    let (opening, _) = opened.answer();
    let response = success(
        id,
        json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {"name": "forge", "version": env!("CARGO_PKG_VERSION")},
            "instructions": format!(
                "You are the agent of an episode of task `{}` in environment `{}`. \
                 Use the tools to serve the user; talk to the user with `{MESSAGE_TOOL}`.{}\n\n\
                 The user says:\n\n{}",
                opened.task_id,
                opened.env,
                opened
                    .instructions
                    .as_ref()
                    .map_or_else(String::new, |rules| format!(
                        " The environment's rules:\n\n{rules}"
                    )),
                opening
            ),
        }),
    );
    Reply::Opened {
        response,
        session_id: opened.session_id,
    }
}

/// `open`, with the task, environment and seed that `initialize`'s params
/// name (read as a reset's body is), in place of those of the query or
/// `--task`: a client picks each episode's task (over stdio, where there
/// is no query to name it in).
fn picked_in(params: &Value, open: &OpenRequest) -> Result<OpenRequest, StepError> {
    // MCP's own params aside; a misspelt option is refused as a reset's is.
    let picked: serde_json::Map<String, Value> = params
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| {
            ["env", "task_id", "seed"].contains(&key.as_str())
                || openenv::misspelt_option([key.as_str()]).is_some()
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let picked = openenv::open_request(&Value::Object(picked))?;
    Ok(OpenRequest {
        env: picked.env.or_else(|| open.env.clone()),
        task_id: picked.task_id.or_else(|| open.task_id.clone()),
        seed: picked.seed.or(open.seed),
        ..open.clone()
    })
}

/// Tool entries for a listing: the agent's tools and [`MESSAGE_TOOL`], the
/// schema under `schema_key` (MCP says `inputSchema`, OpenEnv's step
/// observations `input_schema`); a schema always says `"type": "object"`.
pub fn tool_entries(tools: &[forge_runtime::schema::ToolSpec], schema_key: &str) -> Vec<Value> {
    let entry = |name: &str, description: &str, mut schema: Value| {
        if let Some(object) = schema.as_object_mut() {
            object.entry("type").or_insert_with(|| json!("object"));
        }
        let mut entry = json!({"name": name, "description": description});
        entry[schema_key] = schema;
        entry
    };
    let mut entries: Vec<Value> = tools
        .iter()
        .map(|tool| entry(&tool.name, &tool.description, tool.parameters.clone()))
        .collect();
    entries.push(entry(
        MESSAGE_TOOL,
        "Say something to the user and get the user's answer. When the user has nothing more to say, the episode ends and its reward is reported.",
        json!({
            "type": "object",
            "properties": {"message": {"type": "string", "description": "What to tell the user"}},
            "required": ["message"]
        }),
    ));
    entries
}

/// The keys of `tools/call`'s params: MCP's, and the session OpenEnv's
/// clients name there.
const CALL_KEYS: [&str; 4] = ["name", "arguments", "_meta", "session_id"];

fn call(
    hub: &Hub,
    transport: Transport,
    session: &str,
    by: Option<u64>,
    id: &Value,
    params: &Value,
) -> Value {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return error(id, INVALID_PARAMS, "`tools/call` needs a tool `name`");
    };
    // A misspelt `args`, ignored, would spend the agent's turn on a call
    // without its arguments.
    if let Some(key) = params
        .as_object()
        .into_iter()
        .flat_map(|params| params.keys())
        .find(|key| !CALL_KEYS.contains(&key.as_str()))
    {
        let said = format!("`tools/call` takes `name`, `arguments` and `_meta`, not `{key}`");
        return error(id, INVALID_PARAMS, &said);
    }
    let action = match openenv::call_arguments(params.get("arguments"))
        .and_then(|arguments| openenv::to_action(name, arguments))
    {
        Ok(action) => action,
        Err(StepError::Invalid(errors)) => {
            return error(id, INVALID_PARAMS, &describe(&errors));
        }
        Err(StepError::Refused(err)) => return refused(id, &err),
    };
    // An unknown tool is an error of the protocol, and a turn of the
    // episode (the agent's mistake is part of its trajectory), said so: a
    // client that retried it would spend turns without knowing.
    match hub.step(session, by, action) {
        Ok(observation)
            if observation
                .result
                .as_ref()
                .is_some_and(|result| !result.known) =>
        {
            let said = format!("unknown tool `{name}` (the call counts as a turn of the episode)");
            error(id, INVALID_PARAMS, &said)
        }
        Ok(observation) => success(id, tool_result(&observation)),
        Err(ServeError::EpisodeOver(_)) => {
            let text = format!(
                "The episode is over. To play another, {}.",
                transport.another_episode(true)
            );
            success(
                id,
                json!({"content": [{"type": "text", "text": text}], "isError": true, "is_error": true}),
            )
        }
        Err(err) => refused(id, &err),
    }
}

/// Pydantic-style validation errors as one line: `loc: msg` each.
fn describe(errors: &[Value]) -> String {
    errors
        .iter()
        .map(|error| {
            let loc: Vec<String> = error["loc"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|part| {
                    part.as_str()
                        .map_or_else(|| part.to_string(), str::to_owned)
                })
                .collect();
            format!(
                "`{}`: {}",
                loc.join("."),
                error["msg"].as_str().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A step's observation as a `tools/call` result: the answer's text, then
/// the reward once the episode is over. A tool's refusal and a call the
/// sandbox stopped are both results with `isError`, as MCP has it (an
/// unknown tool is a protocol error, answered before this).
fn tool_result(observation: &Observation) -> Value {
    let (answer, is_error) = observation.answer();
    let data = openenv::data(&answer);
    // A user who ends the dialogue says nothing more.
    let mut text: Vec<String> = Vec::new();
    if !(observation.done && answer.is_empty()) {
        text.push(answer);
    }
    if observation.done {
        text.push(format!(
            "The episode is over: reward {}.",
            observation
                .reward
                .map_or("unknown".into(), |r| r.to_string())
        ));
    }
    // `is_error` and `data` are what OpenEnv's `MCPToolClient` reads.
    json!({
        "content": text.iter().map(|text| json!({"type": "text", "text": text})).collect::<Vec<_>>(),
        "isError": is_error,
        "is_error": is_error,
        "data": data,
    })
}

fn success(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn refused(id: &Value, err: &ServeError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": SERVER_ERROR, "message": err.to_string(), "data": {"code": err.code()}
    }})
}
