//! OpenEnv's WebSocket (`GET /ws`): a connection is a session, opened by its
//! first reset (or, with `?session_id=`, attaches to one made by
//! `openenv/session/create`); each
//! text frame gets exactly one answer, and a bad frame is answered with an
//! error while the session goes on.

use crate::ServeError;
use crate::http::{App, blocking};
use crate::mcp::{self, Reply, Transport};
use crate::openenv::{self, StepError};
use crate::sessions::{Hub, Observation, OpenRequest};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Query, State};
use axum::response::Response;
use futures_util::SinkExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The read buffer of a WebSocket session.
const BUFFER_BYTES: usize = 8 << 10;

/// Upgrades the connection.
pub(crate) async fn websocket(
    State(app): State<App>,
    Query(query): Query<HashMap<String, String>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let limit = app.options.max_request_bytes;
    let attach = query.get("session_id").cloned();
    // A new connection takes its place before the handshake completes:
    // taken once the upgraded connection runs, a client that has connected
    // could not count on it, and another let in after it could pass a full
    // server.
    let place = match attach {
        Some(_) => Some(Waiting::uncounted(&app)),
        None => Waiting::reserve(&app),
    };
    // Small buffers: thousands of sessions mostly wait, and a message
    // larger than the buffer still arrives whole.
    upgrade
        .read_buffer_size(BUFFER_BYTES)
        .write_buffer_size(0)
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| ws_session(app, socket, attach, place))
}

/// The session a connection speaks for.
#[derive(Debug, Clone)]
struct Link {
    /// Its id, once there is one: the session attached to at connect, or
    /// the one the connection opened.
    id: Option<String>,
    /// Whether the connection opens its session (and closes it at the end).
    owned: bool,
    /// The connection's own id ([`Hub::connection_id`]): the session it
    /// opens is its, which no one else may reset.
    connection: u64,
}

/// A connection, attached to the session `attach` names or to open its own
/// in the `place` it was given (`None`: the server was full).
async fn ws_session(
    app: App,
    mut socket: WebSocket,
    attach: Option<String>,
    place: Option<Waiting>,
) {
    let hub = app.hub.clone();
    let Some(mut waiting) = place else {
        let max = hub.limits().max_sessions;
        let (sessions, waiting) = (hub.places_taken(), hub.waiting().load(Ordering::Relaxed));
        let extra = json!({"active_sessions": sessions, "waiting_connections": waiting, "max_sessions": max});
        let full = ServeError::Full {
            sessions,
            waiting,
            max,
        }
        .to_string();
        let error = ws_error("CAPACITY_REACHED", &full, Some(extra));
        // 1013, "try again later": a refusal, told apart from a normal end.
        let close = CloseFrame {
            code: close_code::AGAIN,
            reason: "the server is full (--max-sessions)".into(),
        };
        return end_ws_with(socket, Some(error), close).await;
    };
    let mut link = match attach {
        Some(id) if hub.contains(&id) => Link {
            id: Some(id),
            owned: false,
            connection: hub.connection_id(),
        },
        Some(id) => {
            let error = ws_error("SESSION_ERROR", &format!("Unknown session_id: {id}"), None);
            return end_ws(socket, Some(error)).await;
        }
        // The session opens with the first reset, so that the reset's task
        // and seed apply and no episode is started only to be replaced; a
        // full server (counting the connections still to reset) refused the
        // connection already.
        None => Link {
            id: None,
            owned: true,
            connection: hub.connection_id(),
        },
    };
    let idle = hub.limits().idle_timeout;
    let mut stopping = app.stopping.clone();
    // Why the connection ends, when it is not simply closed.
    let mut ending = None;
    let mut idled = false;
    let mut stopped = false;
    let mut closed_by_client = false;
    loop {
        let message = tokio::select! {
            biased;
            _ = stopping.wait_for(|stop| *stop) => {
                stopped = true;
                break;
            }
            // A connection silent for the idle timeout ends, as its session
            // would: otherwise it would stay open for good.
            message = tokio::time::timeout(idle, socket.recv()) => match message {
                Ok(message) => message,
                Err(_) => {
                    idled = true;
                    break;
                }
            },
        };
        let text = match message {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                hub.metrics().refuse("bad_request");
                let error = ws_error("INVALID_JSON", "send JSON in text frames", None);
                if socket.send(Message::Text(error.into())).await.is_err() {
                    break;
                }
                continue;
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_))) => {
                closed_by_client = true;
                break;
            }
            None => break,
            Some(Err(err)) => {
                ending = unreadable(err, app.options.max_request_bytes);
                if let Some(Unreadable { kind, .. }) = &ending {
                    hub.metrics().refuse(kind);
                }
                break;
            }
        };
        let current = link.clone();
        // The place moves with the frame: a session opened takes it over
        // (see `Hub::open`) whether or not this task lives to see the reply.
        let (reply, back) = blocking(&hub, move |hub| {
            let reply = ws_frame(hub, &current, text.as_str());
            if let Some((_, Some(_))) = &reply {
                waiting.taken();
            }
            (reply, waiting)
        })
        .await;
        waiting = back;
        let Some((reply, opened)) = reply else { break };
        if opened.is_some() {
            link.id = opened;
        }
        if socket.send(Message::Text(reply.into())).await.is_err() {
            break;
        }
    }
    if let (true, Some(id)) = (link.owned, link.id) {
        let by = Some(link.connection);
        let _ = blocking(&hub, move |hub| hub.close(&id, by)).await;
    }
    // Its place is free before the client hears the connection end, as its
    // session is: a client that connects again at once finds it free.
    drop(waiting);
    match ending {
        Some(Unreadable { error, close, .. }) => end_ws_with(socket, Some(error), close).await,
        // Said in the close frame: a client sees why its connection ended.
        None if idled => {
            let close = CloseFrame {
                code: close_code::NORMAL,
                reason: format!("idle for {} s (--idle-timeout)", idle.as_secs()).into(),
            };
            end_ws_with(socket, None, close).await;
        }
        // 1001, "going away": a client can tell the server's end from a
        // normal close, and its episode was judged and recorded.
        None if stopped => {
            let close = CloseFrame {
                code: close_code::AWAY,
                reason: "the server is shutting down".into(),
            };
            end_ws_with(socket, None, close).await;
        }
        // The answering close frame is queued as the client's arrives,
        // and goes out with a flush: sending another would be refused.
        None if closed_by_client => {
            let _ = socket.flush().await;
        }
        None => end_ws(socket, None).await,
    }
}

/// How a connection ends whose stream cannot be read past a frame.
struct Unreadable {
    /// The refusal's name in the metrics.
    kind: &'static str,
    /// The last frame: an error saying why.
    error: String,
    close: CloseFrame,
}

/// Why the connection ends, for a message over `limit`, a text frame that
/// is not UTF-8 or a frame against the protocol (each with its close code);
/// none for a connection that broke, which cannot be told anything.
fn unreadable(err: axum::Error, limit: usize) -> Option<Unreadable> {
    let err = err.into_inner().downcast::<tungstenite::Error>().ok()?;
    let (kind, code, message, close, reason) = match *err {
        tungstenite::Error::Capacity(_) => (
            "request_too_large",
            "MESSAGE_TOO_BIG",
            format!("a message is over {limit} bytes (`--max-request-bytes`)"),
            close_code::SIZE,
            format!("message over {limit} bytes"),
        ),
        tungstenite::Error::Utf8(_) => (
            "bad_request",
            "INVALID_UTF8",
            "a text frame is not UTF-8".to_owned(),
            close_code::INVALID,
            "text frame not UTF-8".to_owned(),
        ),
        // A client gone without a close frame ends its session as one
        // that closed: nothing was refused.
        tungstenite::Error::Protocol(
            tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
        ) => {
            return None;
        }
        tungstenite::Error::Protocol(violation) => (
            "bad_request",
            "PROTOCOL_ERROR",
            format!("the frame breaks the WebSocket protocol: {violation}"),
            close_code::PROTOCOL,
            "protocol error".to_owned(),
        ),
        _ => return None,
    };
    Some(Unreadable {
        kind,
        error: ws_error(code, &format!("{message}; the connection ends"), None),
        close: CloseFrame {
            code: close,
            reason: reason.into(),
        },
    })
}

/// A connection counted as waiting for its session until it has one (or ends).
struct Waiting {
    count: Arc<AtomicUsize>,
    counted: bool,
}

impl Waiting {
    /// Counts a new connection in, if the server has a place for it: its
    /// sessions and the connections still to open theirs are fewer than
    /// `--max-sessions`. Counting and checking in one step, two connections
    /// never both take the last place.
    fn reserve(app: &App) -> Option<Self> {
        let promised = app.hub.promise_place();
        let place = Self {
            count: app.hub.waiting().clone(),
            counted: true,
        };
        // Dropped, a place refused counts out again.
        promised.then_some(place)
    }

    /// A connection attached to a session that exists: it takes no place.
    fn uncounted(app: &App) -> Self {
        Self {
            count: app.hub.waiting().clone(),
            counted: false,
        }
    }

    /// The connection's session opened and took over its place (the hub
    /// counted it out as it did).
    fn taken(&mut self) {
        self.counted = false;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.counted {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The answer to one WebSocket frame, and the id of the session it opened
/// for the connection if it did; `None` to a `close`.
fn ws_frame(hub: &Hub, link: &Link, text: &str) -> Option<(String, Option<String>)> {
    let frame: Value = match serde_json::from_str(text) {
        Ok(frame) => frame,
        Err(err) => {
            hub.metrics().refuse("bad_json");
            let error = ws_error("INVALID_JSON", &format!("Invalid JSON: {err}"), None);
            return Some((error, None));
        }
    };
    let data = frame.get("data").cloned().unwrap_or_else(|| json!({}));
    let mut opened = None;
    // Starts an episode in the connection's session, opening it if there is
    // none yet. It keeps its id across episodes; an attached one is not
    // brought back once closed.
    let mut open = |request: OpenRequest| -> Result<Observation, ServeError> {
        // The first reset may name the session (OpenEnv's `episode_id`);
        // later ones go on in it, whatever they name.
        let session_id = link.id.clone().or_else(|| request.session_id.clone());
        let observation = hub.open(OpenRequest {
            session_id,
            existing_only: !link.owned,
            held: true,
            connection: Some(link.connection),
            // A connection let in to open its own session holds its place
            // until it has.
            reserved: link.owned && link.id.is_none(),
            ..request
        })?;
        if link.id.is_none() {
            opened = Some(observation.session_id.clone());
        }
        Ok(observation)
    };
    // The connection's session; a frame that needs one before any reset
    // opens it as a reset without fields would.
    let mut session = || match &link.id {
        Some(id) => Ok(id.clone()),
        None => open(OpenRequest::default()).map(|observation| observation.session_id),
    };
    let answer = match frame.get("type").and_then(Value::as_str) {
        Some("reset") => match openenv::open_request(&data) {
            Ok(request) => open(request)
                .map(|observation| {
                    json!({"type": "observation", "data": openenv::reset_result(&observation)})
                })
                .map_err(StepError::Refused),
            Err(err) => Err(err),
        },
        Some("step") if frame.get("data").is_none() => {
            Err(StepError::Invalid(vec![openenv::invalid(
                "missing",
                &["data"],
                "Field required",
                &frame,
            )]))
        }
        Some("step") => session()
            .map_err(StepError::Refused)
            .and_then(|id| openenv::step(hub, &id, Some(link.connection), &data))
            .map(|result| json!({"type": "observation", "data": result})),
        Some("state") => match &link.id {
            None => Ok(json!({"type": "state", "data": openenv::no_state()})),
            Some(id) => hub
                .state(id)
                .map(|state| json!({"type": "state", "data": openenv::state(&state)}))
                .map_err(StepError::Refused),
        },
        Some("mcp") => session().map_err(StepError::Refused).map(|id| {
            let by = OpenRequest {
                connection: Some(link.connection),
                ..OpenRequest::default()
            };
            let reply = match mcp::handle(hub, Transport::WebSocket, Some(&id), &by, &data) {
                Reply::Response(response)
                | Reply::Opened { response, .. }
                | Reply::Sessionless(response) => response,
                Reply::Accepted => Value::Null,
            };
            json!({"type": "mcp", "data": reply})
        }),
        Some("close") => return None,
        other => {
            hub.metrics().refuse("bad_request");
            let error = ws_error(
                "UNKNOWN_TYPE",
                &format!("Unknown message type: {}", other.unwrap_or("(none)")),
                None,
            );
            return Some((error, opened));
        }
    };
    let reply = match answer {
        Ok(answer) => answer.to_string(),
        Err(StepError::Invalid(errors)) => {
            hub.metrics().refuse("invalid_action");
            ws_error(
                "VALIDATION_ERROR",
                "Invalid message",
                Some(json!({ "errors": errors })),
            )
        }
        Err(StepError::Refused(err)) => {
            hub.metrics().refuse(err.code());
            let code = match err {
                ServeError::UnknownSession(_) | ServeError::Held(_) => "SESSION_ERROR",
                ServeError::Full { .. } => "CAPACITY_REACHED",
                ServeError::BadRequest(_) => "VALIDATION_ERROR",
                _ => "EXECUTION_ERROR",
            };
            ws_error(code, &err.to_string(), Some(json!({"reason": err.code()})))
        }
    };
    Some((reply, opened))
}

fn ws_error(code: &str, message: &str, extra: Option<Value>) -> String {
    let mut data = json!({"message": message, "code": code});
    if let Some(Value::Object(extra)) = extra {
        data.as_object_mut().expect("an object").extend(extra);
    }
    json!({"type": "error", "data": data}).to_string()
}

/// Sends `last` (if any) and closes the connection normally.
async fn end_ws(socket: WebSocket, last: Option<String>) {
    let normal = CloseFrame {
        code: close_code::NORMAL,
        reason: "".into(),
    };
    end_ws_with(socket, last, normal).await;
}

/// Sends `last` (if any) and closes the connection with `close`.
async fn end_ws_with(mut socket: WebSocket, last: Option<String>, close: CloseFrame) {
    if let Some(last) = last {
        let _ = socket.send(Message::Text(last.into())).await;
    }
    let _ = socket.send(Message::Close(Some(close))).await;
}
