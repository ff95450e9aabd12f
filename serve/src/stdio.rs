//! MCP over stdio (`forge serve --stdio`): one JSON-RPC message per line on
//! stdin and stdout, an episode at a time (each `initialize` opens one once
//! the last is over or closed). Nothing but protocol messages goes to stdout; logs
//! go to stderr.

use crate::mcp::{self, Reply, Transport};
use crate::sessions::{Hub, OpenRequest};
use anyhow::{Context, Result};
use std::io::{BufRead, Write};

/// Answers the messages of `input` on `output` until `input` ends, then
/// ends every episode of `hub` (which judges and records them). A line
/// longer than `max_line_bytes` is answered with an error, not read into
/// memory.
pub fn serve(
    hub: &Hub,
    open: &OpenRequest,
    input: impl BufRead,
    output: impl Write,
    max_line_bytes: usize,
) -> Result<()> {
    let answered = answer(hub, open, input, output, max_line_bytes);
    // However the conversation ended — the client left, a pipe broke — its
    // episodes are judged and recorded: the one `initialize` opened and any
    // `openenv/session/create` made.
    hub.shut_down();
    answered
}

fn answer(
    hub: &Hub,
    open: &OpenRequest,
    mut input: impl BufRead,
    mut output: impl Write,
    max_line_bytes: usize,
) -> Result<()> {
    // The session `initialize` opened.
    let mut session: Option<String> = None;
    let mut line = Vec::new();
    while let Some(read) =
        next_line(&mut input, max_line_bytes, &mut line).context("reading stdin")?
    {
        if read == Line::Whole && line.trim_ascii().is_empty() {
            continue;
        }
        let message = match read {
            Line::Whole => serde_json::from_slice(&line).map_err(|err| err.to_string()),
            Line::TooLong => Err(format!("the line is longer than {max_line_bytes} bytes")),
        };
        if let (Ok(message), Some(id)) = (&message, &session)
            && next_episode(hub, id, message)
        {
            // Its episode is judged and recorded already.
            let _ = hub.close(id, None);
            session = None;
        }
        let reply = match message {
            Ok(message) => mcp::handle(hub, Transport::Stdio, session.as_deref(), open, &message),
            Err(detail) => Reply::Response(mcp::parse_error(hub, &detail)),
        };
        let response = match reply {
            Reply::Accepted => continue,
            Reply::Response(response) | Reply::Sessionless(response) => response,
            Reply::Opened {
                response,
                session_id,
            } => {
                session = Some(session_id);
                response
            }
        };
        // A session closed by the client frees the conversation for another
        // `initialize`, as the episode's end tells the client.
        if session.as_deref().is_some_and(|id| !hub.contains(id)) {
            session = None;
        }
        serde_json::to_writer(&mut output, &response)?;
        output.write_all(b"\n")?;
        output.flush().context("writing stdout")?;
    }
    Ok(())
}

/// Whether `message` is an `initialize` after session `id`'s episode is
/// over: it opens the next episode, as MCP hosts, which know nothing of
/// closing sessions, would start one.
fn next_episode(hub: &Hub, id: &str, message: &serde_json::Value) -> bool {
    message.get("method").and_then(serde_json::Value::as_str) == Some("initialize")
        && hub.outcome(id).is_ok_and(|(over, _)| over)
}

/// How much of a line [`next_line`] kept.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Whole,
    /// Longer than the limit: skipped to its end, nothing kept.
    TooLong,
}

/// Reads the next line of `input` into `line` (without its newline), or
/// none at the end of input. Bytes, not text: a line that is not UTF-8 is
/// the JSON parser's to refuse, and the conversation goes on.
fn next_line(
    input: &mut impl BufRead,
    limit: usize,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<Line>> {
    line.clear();
    let mut read = None;
    loop {
        let available = match input.fill_buf() {
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            result => result?,
        };
        if available.is_empty() {
            return Ok(read);
        }
        let end = available.iter().position(|&byte| byte == b'\n');
        let chunk = &available[..end.unwrap_or(available.len())];
        if read != Some(Line::TooLong) {
            if line.len() + chunk.len() > limit {
                line.clear();
                read = Some(Line::TooLong);
            } else {
                line.extend_from_slice(chunk);
                read = Some(Line::Whole);
            }
        }
        let used = end.map_or(available.len(), |end| end + 1);
        input.consume(used);
        if end.is_some() {
            return Ok(read);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], limit: usize) -> Vec<(Line, Vec<u8>)> {
        // A one-byte buffer: lines arrive in as many pieces as they can.
        let mut input = std::io::BufReader::with_capacity(1, input);
        let mut line = Vec::new();
        let mut all = Vec::new();
        while let Some(read) = next_line(&mut input, limit, &mut line).unwrap() {
            all.push((read, line.clone()));
        }
        all
    }

    #[test]
    fn lines_past_the_limit_are_skipped_whole() {
        assert_eq!(
            lines(b"abc\nabcdef\n\nab", 4),
            [
                (Line::Whole, b"abc".to_vec()),
                (Line::TooLong, Vec::new()),
                (Line::Whole, Vec::new()),
                (Line::Whole, b"ab".to_vec()),
            ]
        );
        assert_eq!(lines(b"", 4), []);
        assert_eq!(lines(b"\xff\n", 4), [(Line::Whole, b"\xff".to_vec())]);
    }
}
