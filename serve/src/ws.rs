//! OpenEnv's WebSocket (`GET /ws`): a connection is a session (or, with
//! `?session_id=`, attaches to one made by `openenv/session/create`); each
//! text frame gets exactly one answer, and a bad frame is answered with an
//! error while the session goes on.

use crate::ServeError;
use crate::http::{App, blocking};
use crate::mcp::{self, Reply};
use crate::openenv::{self, StepError};
use crate::sessions::{Hub, OpenRequest};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Query, State};
use axum::response::Response;
use serde_json::{Value, json};
use std::collections::HashMap;

/// The read buffer of a WebSocket session.
const BUFFER_BYTES: usize = 8 << 10;

/// Upgrades the connection.
pub(crate) async fn websocket(
    State(app): State<App>,
    Query(query): Query<HashMap<String, String>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let limit = app.options.max_request_bytes;
    // Small buffers: thousands of sessions mostly wait, and a message
    // larger than the buffer still arrives whole.
    upgrade
        .read_buffer_size(BUFFER_BYTES)
        .write_buffer_size(0)
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| ws_session(app, socket, query.get("session_id").cloned()))
}

async fn ws_session(app: App, mut socket: WebSocket, attach: Option<String>) {
    let hub = app.hub.clone();
    let (id, owned) = match attach {
        Some(id) if hub.contains(&id) => (id, false),
        Some(id) => {
            let error = ws_error("SESSION_ERROR", &format!("Unknown session_id: {id}"), None);
            return end_ws(socket, Some(error)).await;
        }
        None => match blocking(&hub, |hub| hub.open(OpenRequest::default())).await {
            Ok(opened) => (opened.session_id, true),
            Err(err) => {
                let code = match err {
                    ServeError::Full(_) => "CAPACITY_REACHED",
                    _ => "FACTORY_ERROR",
                };
                let extra = json!({"active_sessions": hub.len(), "max_sessions": hub.limits().max_sessions});
                let error = ws_error(code, &err.to_string(), Some(extra));
                return end_ws(socket, Some(error)).await;
            }
        },
    };
    let mut stopping = app.stopping.clone();
    loop {
        let message = tokio::select! {
            biased;
            _ = stopping.wait_for(|stop| *stop) => break,
            message = socket.recv() => message,
        };
        let text = match message {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                let error = ws_error("INVALID_JSON", "send JSON in text frames", None);
                if socket.send(Message::Text(error.into())).await.is_err() {
                    break;
                }
                continue;
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
        };
        let session = id.clone();
        let reply = blocking(&hub, move |hub| ws_frame(hub, &session, text.as_str())).await;
        let Some(reply) = reply else { break };
        if socket.send(Message::Text(reply.into())).await.is_err() {
            break;
        }
    }
    if owned {
        let _ = blocking(&hub, move |hub| hub.close(&id)).await;
    }
    end_ws(socket, None).await;
}

/// The answer to one WebSocket frame; `None` to a `close`.
fn ws_frame(hub: &Hub, id: &str, text: &str) -> Option<String> {
    let frame: Value = match serde_json::from_str(text) {
        Ok(frame) => frame,
        Err(err) => {
            return Some(ws_error(
                "INVALID_JSON",
                &format!("Invalid JSON: {err}"),
                None,
            ));
        }
    };
    let data = frame.get("data").cloned().unwrap_or_else(|| json!({}));
    let answer = match frame.get("type").and_then(Value::as_str) {
        Some("reset") => match openenv::open_request(&data) {
            // The connection's session keeps its id across episodes.
            Ok(request) => openenv::reset(
                hub,
                OpenRequest {
                    session_id: Some(id.to_owned()),
                    ..request
                },
            )
            .map(|result| json!({"type": "observation", "data": result}))
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
        Some("step") => openenv::step(hub, id, &data)
            .map(|result| json!({"type": "observation", "data": result})),
        Some("state") => hub
            .state(id)
            .map(|state| json!({"type": "state", "data": openenv::state(&state)}))
            .map_err(StepError::Refused),
        Some("mcp") => {
            let reply = match mcp::handle(hub, Some(id), &OpenRequest::default(), &data) {
                Reply::Response(response) | Reply::Opened { response, .. } => response,
                Reply::Accepted => Value::Null,
            };
            Ok(json!({"type": "mcp", "data": reply}))
        }
        Some("close") => return None,
        other => {
            return Some(ws_error(
                "UNKNOWN_TYPE",
                &format!("Unknown message type: {}", other.unwrap_or("(none)")),
                None,
            ));
        }
    };
    Some(match answer {
        Ok(answer) => answer.to_string(),
        Err(StepError::Invalid(errors)) => ws_error(
            "VALIDATION_ERROR",
            "Invalid message",
            Some(json!({ "errors": errors })),
        ),
        Err(StepError::Refused(err)) => {
            hub.metrics().refuse(err.code());
            let code = match err {
                ServeError::UnknownSession(_) => "SESSION_ERROR",
                _ => "EXECUTION_ERROR",
            };
            ws_error(code, &err.to_string(), Some(json!({"reason": err.code()})))
        }
    })
}

fn ws_error(code: &str, message: &str, extra: Option<Value>) -> String {
    let mut data = json!({"message": message, "code": code});
    if let Some(Value::Object(extra)) = extra {
        data.as_object_mut().expect("an object").extend(extra);
    }
    json!({"type": "error", "data": data}).to_string()
}

/// Sends `last` (if any) and closes the connection normally.
async fn end_ws(mut socket: WebSocket, last: Option<String>) {
    if let Some(last) = last {
        let _ = socket.send(Message::Text(last.into())).await;
    }
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code: close_code::NORMAL,
            reason: "".into(),
        })))
        .await;
}
