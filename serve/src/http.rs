//! The HTTP server: OpenEnv's routes (`/reset`, `/step`, `/state`,
//! `/health`, `/metadata`, `/schema`; `/ws` is in [`crate::ws`]), MCP at
//! `/mcp`, `/healthz` and `/metrics`. Handlers only move bytes: sessions live in the [`Hub`], and
//! the sandbox work of each request runs on the blocking pool so that a slow
//! tool never stalls the event loop.

use crate::ServeError;
use crate::connections;
use crate::mcp::{self, Reply, Transport};
use crate::openenv::{self, StepError};
use crate::origin::{AllowedHosts, AllowedOrigins};
use crate::sessions::{self, Hub, OpenRequest};
use crate::ws;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Query, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The header that carries an MCP session id.
const MCP_SESSION: &str = "mcp-session-id";

/// How the HTTP server treats requests.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Largest request body or WebSocket message.
    pub max_request_bytes: usize,
    /// How long a client may take to send a request's headers (an idle
    /// keep-alive connection is one waiting for them), or pause while
    /// sending its body, before its connection is closed.
    pub read_timeout: Duration,
    /// Most connections served at once; more wait to be accepted. An
    /// upgraded WebSocket leaves the count (its session counts against
    /// the hub's `max_sessions`).
    pub max_connections: usize,
    /// How long shutting down waits for connections to finish the requests
    /// they are serving before it drops them: a client that stalls or
    /// trickles its request cannot hold the server up.
    pub shutdown_grace: Duration,
    /// The web pages whose browsers may use the server (a request with no
    /// `Origin`, as agents and trainers send, always may).
    pub allowed_origins: AllowedOrigins,
    /// The names requests may address the server by (`Host`).
    pub allowed_hosts: AllowedHosts,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            max_request_bytes: 1 << 20,
            read_timeout: Duration::from_secs(30),
            max_connections: 1024,
            // Well within the 30 s a container is given to stop.
            shutdown_grace: Duration::from_secs(10),
            allowed_origins: AllowedOrigins::Local,
            allowed_hosts: AllowedHosts::Local,
        }
    }
}

#[derive(Clone)]
pub(crate) struct App {
    pub(crate) hub: Arc<Hub>,
    pub(crate) options: HttpOptions,
    /// Becomes true when the server begins to shut down: WebSocket sessions
    /// end at their next message boundary.
    pub(crate) stopping: watch::Receiver<bool>,
}

/// Serves `hub` on `listener` until `shutdown` resolves; then ends every
/// session at once (judging and recording its episode, each after the
/// request it is serving: a process killed soon after loses none), lets
/// the requests in flight finish within the grace, and returns.
pub async fn serve(
    hub: Arc<Hub>,
    listener: tokio::net::TcpListener,
    options: HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (stop, stopping) = watch::channel(false);
    let app = App {
        hub: hub.clone(),
        options: options.clone(),
        stopping,
    };
    let reaper = tokio::spawn(expire_idle_sessions(hub.clone()));
    // Agents wait on each answer: send it at once.
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    let stopping = app.stopping.clone();
    let records = hub.records();
    let recorded = tokio::spawn(async move {
        shutdown.await;
        match records {
            true => tracing::info!("shutting down: recording every open episode"),
            false => tracing::info!("shutting down: ending every open episode"),
        }
        let _ = stop.send(true);
        tokio::task::spawn_blocking(move || hub.shut_down()).await
    });
    connections::accept(listener, router(app), &options, stopping).await;
    reaper.abort();
    let ended = recorded.await??;
    match records {
        true => tracing::info!(sessions = ended, "shut down; every episode recorded"),
        false => tracing::info!(sessions = ended, "shut down"),
    }
    Ok(())
}

fn router(app: App) -> Router {
    let limit = app.options.max_request_bytes;
    Router::new()
        .route("/health", get(health))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/metadata", get(metadata))
        .route("/schema", get(schema))
        .route("/openapi.json", get(openapi))
        .route("/reset", post(reset))
        .route("/step", post(step))
        .route("/state", get(state))
        .route("/ws", get(ws::websocket))
        // No GET: the server opens no stream of its own, and MCP clients
        // go on without one when refused it (405).
        .route("/mcp", post(mcp_post).delete(mcp_delete))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            refuse_oversized,
        ))
        .layer(middleware::from_fn_with_state(app.clone(), guard_origin))
        .layer(middleware::from_fn_with_state(app.clone(), guard_host))
        .with_state(app)
}

/// Refuses a body its `Content-Length` says is over the limit before
/// waiting for it (a client may never send what it announced).
async fn refuse_oversized(State(app): State<App>, request: Request, next: Next) -> Response {
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok()?.parse::<u64>().ok());
    let limit = app.options.max_request_bytes;
    if announced.is_some_and(|length| length > limit as u64) {
        return too_large(limit).answer(&app.hub);
    }
    next.run(request).await
}

/// Refuses a request addressed to a name the server does not answer to
/// ([`crate::origin`]): a page of another site that rebinds its name to
/// this machine, reading a GET route without sending an `Origin`.
async fn guard_host(State(app): State<App>, request: Request, next: Next) -> Response {
    let allowed = &app.options.allowed_hosts;
    // HTTP/1.1 asks for a `Host`, and browsers always send it.
    let host = request.headers().get(header::HOST);
    if let Some(host) = host.map(|host| String::from_utf8_lossy(host.as_bytes()))
        && !allowed.allows(&host)
    {
        return Refusal {
            status: StatusCode::FORBIDDEN,
            code: "host_not_allowed",
            detail: format!(
                "requests addressed to {host} are refused: this server answers to {allowed} \
                 (`--allow-host` adds others, as for a proxy in front of it)"
            ),
        }
        .answer(&app.hub);
    }
    next.run(request).await
}

/// Guards the server against web pages of other sites ([`crate::origin`])
/// and lets allowed ones read its answers: a request a browser sends for a
/// page not allowed is refused (403, as MCP's transport asks); one for an
/// allowed page is answered with CORS headers, its preflight at once.
async fn guard_origin(State(app): State<App>, request: Request, next: Next) -> Response {
    let Some(origin) = request.headers().get(header::ORIGIN).cloned() else {
        return next.run(request).await;
    };
    let allowed = &app.options.allowed_origins;
    let page = String::from_utf8_lossy(origin.as_bytes()).into_owned();
    if !allowed.allows(&page) {
        return Refusal {
            status: StatusCode::FORBIDDEN,
            code: "origin_not_allowed",
            detail: format!(
                "requests from pages of {page} are refused: this server serves {allowed} \
                 (`--allow-origin` adds others)"
            ),
        }
        .answer(&app.hub);
    }
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = match preflight {
        true => {
            let mut response = StatusCode::NO_CONTENT.into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, DELETE"),
            );
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("content-type, mcp-session-id, mcp-protocol-version"),
            );
            headers.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
            response
        }
        false => next.run(request).await,
    };
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("mcp-session-id, retry-after"),
    );
    headers.append(header::VARY, HeaderValue::from_static("origin"));
    response
}

/// Closes idle sessions every so often (a quarter of the idle timeout,
/// between 1 and 30 seconds).
async fn expire_idle_sessions(hub: Arc<Hub>) {
    let period =
        (hub.limits().idle_timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(30));
    let mut ticks = tokio::time::interval(period);
    loop {
        ticks.tick().await;
        let hub = hub.clone();
        let _ = tokio::task::spawn_blocking(move || hub.expire_idle()).await;
    }
}

/// Runs `work` on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    hub: &Arc<Hub>,
    work: impl FnOnce(&Hub) -> T + Send + 'static,
) -> T {
    let hub = hub.clone();
    match tokio::task::spawn_blocking(move || work(&hub)).await {
        Ok(value) => value,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        // Cancelled: the runtime is shutting down, and this request's task
        // with it, which is dropped without resuming.
        Err(_) => std::future::pending().await,
    }
}

/// An error answer: `{"detail", "code"}`, as OpenEnv's server answers.
fn failure(hub: &Hub, status: StatusCode, code: &str, detail: impl Into<Value>) -> Response {
    hub.metrics().refuse(code);
    (status, Json(json!({"detail": detail.into(), "code": code}))).into_response()
}

fn refused(hub: &Hub, err: &ServeError) -> Response {
    let mut response = failure(hub, err.status(), err.code(), err.to_string());
    if let Some(after) = err.retry_after() {
        // Whole seconds, rounded up: asking sooner would be refused again.
        let seconds = after.as_secs_f64().ceil().max(1.0) as u64;
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// A request refused before it reaches a session.
struct Refusal {
    status: StatusCode,
    code: &'static str,
    detail: String,
}

impl Refusal {
    fn answer(self, hub: &Hub) -> Response {
        failure(hub, self.status, self.code, self.detail)
    }
}

/// The JSON object of a request's body (`{}` for an empty one), or why it
/// is not one.
fn json_body(body: Result<Bytes, BytesRejection>, options: &HttpOptions) -> Result<Value, Refusal> {
    let bytes = body.map_err(|rejection| unread(&rejection, options))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(object)) => Ok(Value::Object(object)),
        Ok(_) => Err(Refusal {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "bad_request",
            detail: "the body must be a JSON object".to_owned(),
        }),
        Err(err) => Err(Refusal {
            status: StatusCode::BAD_REQUEST,
            code: "bad_json",
            detail: format!("the body is not JSON: {err}"),
        }),
    }
}

/// Why a body could not be read; one over a limit names it and its flag.
fn unread(rejection: &BytesRejection, options: &HttpOptions) -> Refusal {
    if connections::stalled(rejection) {
        return Refusal {
            status: StatusCode::REQUEST_TIMEOUT,
            code: "request_timeout",
            detail: format!(
                "the request body stalled: nothing came for {} s (`--read-timeout`)",
                options.read_timeout.as_secs_f64()
            ),
        };
    }
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => too_large(options.max_request_bytes),
        status => Refusal {
            status,
            code: "bad_request",
            detail: rejection.body_text(),
        },
    }
}

fn too_large(limit: usize) -> Refusal {
    Refusal {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        code: "request_too_large",
        detail: format!("the request body is over {limit} bytes (`--max-request-bytes`)"),
    }
}

async fn health() -> Json<Value> {
    Json(json!({"status": "healthy"}))
}

async fn healthz(State(app): State<App>) -> Json<Value> {
    Json(json!({"status": "healthy", "sessions": app.hub.len()}))
}

async fn metrics(State(app): State<App>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.hub.metrics().render(),
    )
}

async fn metadata(State(app): State<App>) -> Json<Value> {
    let envs: Vec<Value> = app
        .hub
        .catalog()
        .envs()
        .iter()
        .map(|env| {
            json!({
                "name": env.name(),
                "description": env.bundle().manifest.description,
                "content_hash": env.content_hash(),
                "tasks": env.tasks().len(),
                "tools": env.component().tools().len(),
            })
        })
        .collect();
    Json(json!({
        "name": "forge",
        "description": format!(
            "Forge tool environments in a deterministic WebAssembly sandbox: {}",
            app.hub.catalog().env_names().join(", ")
        ),
        "readme_content": null,
        "version": env!("CARGO_PKG_VERSION"),
        "author": null,
        "documentation_url": null,
        "environments": envs,
    }))
}

async fn schema() -> Json<Value> {
    Json(json!({
        "action": {
            "type": "object",
            "description": "An MCP action: list the tools, or call one (`send_message_to_user` talks to the user).",
            "properties": {
                "type": {"enum": ["list_tools", "call_tool"]},
                "tool_name": {"type": "string"},
                "arguments": {"type": "object"}
            },
            "required": ["type"]
        },
        "observation": {
            "type": "object",
            "properties": {
                "tools": {"type": "array"},
                "tool_name": {"type": "string"},
                "result": {},
                "error": {},
                "metadata": {"type": "object", "description": "session_id, env, task_id, step_count, and the messages the agent has not seen yet"}
            }
        },
        "state": {
            "type": "object",
            "properties": {
                "episode_id": {"type": ["string", "null"]},
                "step_count": {"type": "integer", "minimum": 0}
            }
        }
    }))
}

async fn openapi() -> Json<Value> {
    let routes = [
        ("/reset", "post", "Start an episode (a session) of a task"),
        (
            "/step",
            "post",
            "Take an action in a session: a tool call or a message to the user",
        ),
        (
            "/state",
            "get",
            "A session's episode: its task, steps taken, state hash and, once over, reward",
        ),
        (
            "/health",
            "get",
            "Whether the server is up (OpenEnv's check)",
        ),
        (
            "/healthz",
            "get",
            "Whether the server is up, and how many sessions it holds",
        ),
        ("/metrics", "get", "Prometheus metrics"),
        (
            "/metadata",
            "get",
            "The environments served, their content hashes and task counts",
        ),
        (
            "/schema",
            "get",
            "The JSON schemas of actions, observations and states",
        ),
        (
            "/mcp",
            "post",
            "A Model Context Protocol message (Streamable HTTP)",
        ),
        (
            "/mcp",
            "delete",
            "End the MCP session the Mcp-Session-Id header names",
        ),
        ("/ws", "get", "OpenEnv's WebSocket protocol (an upgrade)"),
    ];
    let mut paths = serde_json::Map::new();
    for (path, method, summary) in routes {
        let operation = json!({"summary": summary, "responses": {"200": {"description": "OK"}}});
        paths
            .entry(path)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("a path item is an object")
            .insert(method.to_owned(), operation);
    }
    Json(json!({
        "openapi": "3.1.0",
        "info": {"title": "Forge environment API (OpenEnv)", "version": "1.0.0"},
        "paths": paths,
    }))
}

/// FastAPI's answers (OpenEnv's servers are FastAPI apps), with a `code`.
async fn not_found() -> impl IntoResponse {
    let body = json!({"detail": "Not Found", "code": "not_found"});
    (StatusCode::NOT_FOUND, Json(body))
}

async fn method_not_allowed() -> impl IntoResponse {
    let body = json!({"detail": "Method Not Allowed", "code": "method_not_allowed"});
    (StatusCode::METHOD_NOT_ALLOWED, Json(body))
}

/// The refusal of a query on `route`, which takes its options in its JSON
/// body: ignored, `?task_id=…` would reset into another task than the one
/// it names.
fn refuse_query(route: &str, query: Option<String>, hub: &Hub) -> Option<Response> {
    let query = query.filter(|query| !query.is_empty())?;
    let err = ServeError::BadRequest(format!(
        "`{route}` takes its options in the JSON body, not in the query (`?{query}`)"
    ));
    Some(refused(hub, &err))
}

/// `POST /reset`: starts an episode in a session — the one `episode_id`
/// names (made so, or restarted), else a new one.
async fn reset(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Some(refusal) = refuse_query("/reset", query, &app.hub) {
        return refusal;
    }
    let data = match json_body(body, &app.options) {
        Ok(data) => data,
        Err(refusal) => return refusal.answer(&app.hub),
    };
    let request = match openenv::open_request(&data) {
        Ok(request) => request,
        Err(err) => return step_error(&app.hub, err),
    };
    match blocking(&app.hub, move |hub| openenv::reset(hub, request)).await {
        Ok(result) => Json(result).into_response(),
        Err(err) => refused(&app.hub, &err),
    }
}

/// `POST /step`: `{"action", "episode_id"}` — unlike OpenEnv's own
/// stateless `/step`, Forge's episodes live in sessions, so a step names the
/// session its reset made.
async fn step(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Some(refusal) = refuse_query("/step", query, &app.hub) {
        return refusal;
    }
    let data = match json_body(body, &app.options) {
        Ok(data) => data,
        Err(refusal) => return refusal.answer(&app.hub),
    };
    let Some(action) = data.get("action").cloned() else {
        return step_error(
            &app.hub,
            StepError::Invalid(vec![openenv::invalid(
                "missing",
                &["body", "action"],
                "Field required",
                &data,
            )]),
        );
    };
    let id = match session_named(&data) {
        Ok(id) => id,
        Err(invalid) => return step_error(&app.hub, StepError::Invalid(vec![invalid])),
    };
    match blocking(&app.hub, move |hub| openenv::step(hub, &id, None, &action)).await {
        Ok(result) => Json(result).into_response(),
        Err(err) => step_error(&app.hub, err),
    }
}

/// The session a `/step` names (`episode_id`, or `session_id`), or the
/// pydantic-style error of its absence or type.
fn session_named(data: &Value) -> Result<String, Value> {
    // A null id is no id, as OpenEnv's optional `episode_id` has it.
    let named = ["episode_id", "session_id"]
        .into_iter()
        .find_map(|key| Some((key, data.get(key).filter(|id| !id.is_null())?)));
    match named {
        Some((_, Value::String(id))) => Ok(id.clone()),
        Some((key, other)) => Err(openenv::invalid(
            "string_type",
            &["body", key],
            "Input should be a valid string",
            other,
        )),
        None => Err(openenv::invalid(
            "missing",
            &["body", "episode_id"],
            "Field required: the session's id from POST /reset (or use the WebSocket at /ws)",
            data,
        )),
    }
}

fn step_error(hub: &Hub, err: StepError) -> Response {
    match err {
        StepError::Invalid(errors) => failure(
            hub,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_action",
            errors,
        ),
        StepError::Refused(err) => refused(hub, &err),
    }
}

/// `GET /state?episode_id=ID`: that session's state; without an id, the
/// state of no episode (as OpenEnv answers), unless the query names one
/// under another key (`episodeId`), which would pass for no session.
async fn state(State(app): State<App>, Query(query): Query<HashMap<String, String>>) -> Response {
    let Some(id) = query
        .get("episode_id")
        .or_else(|| query.get("session_id"))
        .cloned()
    else {
        if let Some(key) = query.keys().next() {
            let err = ServeError::BadRequest(format!(
                "unknown query key {key:?}: `/state` takes `episode_id`"
            ));
            return refused(&app.hub, &err);
        }
        return Json(openenv::no_state()).into_response();
    };
    match blocking(&app.hub, move |hub| hub.state(&id)).await {
        Ok(state) => Json(openenv::state(&state)).into_response(),
        Err(err) => refused(&app.hub, &err),
    }
}

/// `POST /mcp`: MCP's Streamable HTTP transport (sessions by the
/// `Mcp-Session-Id` header; `initialize` takes `?env=&task_id=&seed=`), and
/// the JSON-RPC dialect OpenEnv's `MCPToolClient` speaks (sessions by
/// `params.session_id`). Answers are single JSON bodies.
async fn mcp_post(
    State(app): State<App>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let session = mcp_session(&headers);
    let message = match body {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(message) => message,
            Err(err) => return Json(mcp::parse_error(&app.hub, &err.to_string())).into_response(),
        },
        Err(rejection) => {
            return unread(&rejection, &app.options).answer(&app.hub);
        }
    };
    if let Some((key, meant)) = openenv::misspelt_option(query.keys().map(String::as_str)) {
        let said = format!("unknown option `{key}`: did you mean `{meant}`?");
        return Json(mcp::invalid_params(&app.hub, &message, &said)).into_response();
    }
    let seed = match query.get("seed").map(|seed| seed.parse::<u64>()) {
        None => None,
        Some(Ok(seed)) => Some(seed),
        Some(Err(_)) => {
            return Json(mcp::invalid_params(
                &app.hub,
                &message,
                "`seed` must be a non-negative integer",
            ))
            .into_response();
        }
    };
    let open = OpenRequest {
        env: query.get("env").cloned(),
        task_id: query.get("task_id").cloned(),
        seed,
        session_id: None,
        policy: query.get("policy").cloned(),
        // MCP clients end their sessions (DELETE).
        held: true,
        ..OpenRequest::default()
    };
    if let Some(id) = &session {
        // An id no session can have is a bad request, as wherever a
        // request names one; MCP clients take a 404 to mean that the
        // session is gone.
        let refusal = match sessions::check_id(id) {
            Err(err) => Some(err),
            Ok(()) if !app.hub.contains(id) => Some(ServeError::UnknownSession(id.clone())),
            Ok(()) => None,
        };
        if let Some(err) = refusal {
            return (
                err.status(),
                Json(mcp::refused_message(&app.hub, &message, &err)),
            )
                .into_response();
        }
    }
    let reply = blocking(&app.hub, move |hub| {
        mcp::handle(hub, Transport::Http, session.as_deref(), &open, &message)
    })
    .await;
    match reply {
        Reply::Accepted => StatusCode::ACCEPTED.into_response(),
        Reply::Response(response) => Json(response).into_response(),
        Reply::Sessionless(response) => (StatusCode::BAD_REQUEST, Json(response)).into_response(),
        Reply::Opened {
            response,
            session_id,
        } => {
            let mut answer = Json(response).into_response();
            if let Ok(value) = HeaderValue::from_str(&session_id) {
                answer.headers_mut().insert(MCP_SESSION, value);
            }
            answer
        }
    }
}

fn mcp_session(headers: &HeaderMap) -> Option<String> {
    headers
        .get(MCP_SESSION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// Ends the MCP session the header names (its episode is judged and recorded).
async fn mcp_delete(State(app): State<App>, headers: HeaderMap) -> Response {
    let Some(id) = mcp_session(&headers) else {
        return failure(
            &app.hub,
            StatusCode::BAD_REQUEST,
            "bad_request",
            "no Mcp-Session-Id header",
        );
    };
    match blocking(&app.hub, move |hub| hub.close(&id, None)).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(err) => refused(&app.hub, &err),
    }
}
