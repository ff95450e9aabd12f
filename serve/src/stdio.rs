//! MCP over stdio (`forge serve --stdio`): one JSON-RPC message per line on
//! stdin and stdout, one episode per process. Nothing but protocol messages
//! goes to stdout; logs go to stderr.

use crate::mcp::{self, Reply};
use crate::sessions::{Hub, OpenRequest};
use anyhow::{Context, Result};
use std::io::{BufRead, Write};

/// Answers the messages of `input` on `output` until `input` ends, then
/// ends every episode of `hub` (which judges and records them).
pub fn serve(hub: &Hub, open: &OpenRequest, input: impl BufRead, output: impl Write) -> Result<()> {
    let answered = answer(hub, open, input, output);
    // However the conversation ended — the client left, a pipe broke — its
    // episodes are judged and recorded: the one `initialize` opened and any
    // `openenv/session/create` made.
    hub.shut_down();
    answered
}

fn answer(
    hub: &Hub,
    open: &OpenRequest,
    input: impl BufRead,
    mut output: impl Write,
) -> Result<()> {
    // The session `initialize` opened.
    let mut session: Option<String> = None;
    for line in input.lines() {
        let line = line.context("reading stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str(&line) {
            Ok(message) => mcp::handle(hub, session.as_deref(), open, &message),
            Err(err) => Reply::Response(mcp::parse_error(&err.to_string())),
        };
        let response = match reply {
            Reply::Accepted => continue,
            Reply::Response(response) => response,
            Reply::Opened {
                response,
                session_id,
            } => {
                session = Some(session_id);
                response
            }
        };
        serde_json::to_writer(&mut output, &response)?;
        output.write_all(b"\n")?;
        output.flush().context("writing stdout")?;
    }
    Ok(())
}
