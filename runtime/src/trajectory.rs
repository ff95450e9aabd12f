//! Trajectories: one JSON object per episode, one episode per line (JSONL).
//!
//! The dialogue is stored as OpenAI chat messages (`tool_calls` on assistant
//! messages, `tool` messages with the results), so any LLM tooling reads it.
//! Beside it, every tool step records its arguments, result, fuel and the state
//! digest after the step, which is what replay checks.
//!
//! Appending is crash-safe: each episode is written as one complete line and
//! synced before the next starts, a reader skips (and reports) a torn last line,
//! and a writer reopening such a file first cuts the torn tail off. A last
//! line that only lacks its newline but holds a whole record is not torn.

use crate::bundle::Actor;
use crate::verify::Verdict;
use crate::{bom, jsonl};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The `format` of every record this version writes. A format's number
/// grows with every field or value its records may hold that the one
/// before did not know, so that a reader of the older one names the format
/// it cannot read rather than a field it has never heard of.
pub const FORMAT: &str = "forge.trajectory/4";

/// The formats this version reads: its own and those before, whose records
/// are all records of the fourth: `forge.trajectory/1` without `user` and
/// the `context_full` termination, `forge.trajectory/2` without model users
/// named in `user`, `forge.trajectory/3` without text beside an agent's
/// tool calls and the `agent_ended` termination.
pub const READABLE: [&str; 4] = [
    "forge.trajectory/1",
    "forge.trajectory/2",
    "forge.trajectory/3",
    FORMAT,
];

/// An OpenAI chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ChatToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl ChatMessage {
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: Some(text.into()),
            tool_calls: None,
            tool_call_id: None,
        }
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: Some(text.into()),
            tool_calls: None,
            tool_call_id: None,
        }
    }

    pub fn assistant_call(call: ChatToolCall) -> Self {
        Self {
            role: Role::Assistant,
            content: None,
            tool_calls: Some(vec![call]),
            tool_call_id: None,
        }
    }

    /// The simulated user calling one of its own tools (hidden from the agent).
    pub fn user_call(call: ChatToolCall) -> Self {
        Self {
            role: Role::User,
            content: None,
            tool_calls: Some(vec![call]),
            tool_call_id: None,
        }
    }

    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: Some(content.into()),
            tool_calls: None,
            tool_call_id: Some(call_id.into()),
        }
    }
}

/// The dialogue as the agent sees it: without the simulated user's calls of
/// its own tools and their results.
pub fn agent_view(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let users_calls: std::collections::BTreeSet<&str> = messages
        .iter()
        .filter(|message| message.role == Role::User)
        .flat_map(|message| message.tool_calls.iter().flatten())
        .map(|call| call.id.as_str())
        .collect();
    messages
        .iter()
        .filter(|message| match message.role {
            Role::User => message.tool_calls.is_none(),
            Role::Tool => !message
                .tool_call_id
                .as_deref()
                .is_some_and(|id| users_calls.contains(id)),
            _ => true,
        })
        .cloned()
        .collect()
}

/// The dialogue as the simulated user sees it, from its side: the agent's
/// messages as `user` turns, the user's own as `assistant` turns (its calls
/// of its own tools included) and their results as `tool` turns; the
/// agent's calls and their results are left out.
pub fn user_view(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let mut own_calls = std::collections::BTreeSet::new();
    let mut seen = Vec::new();
    for message in messages {
        match (message.role, &message.content, &message.tool_calls) {
            (Role::User, _, Some(calls)) => {
                own_calls.extend(calls.iter().map(|call| call.id.as_str()));
                seen.push(ChatMessage {
                    role: Role::Assistant,
                    content: None,
                    tool_calls: Some(calls.clone()),
                    tool_call_id: None,
                });
            }
            (Role::User, Some(content), None) => seen.push(ChatMessage::assistant(content)),
            // What the agent wrote beside its calls is not said to the user.
            (Role::Assistant, Some(content), None) => seen.push(ChatMessage::user(content)),
            (Role::Tool, Some(_), _)
                if message
                    .tool_call_id
                    .as_deref()
                    .is_some_and(|id| own_calls.contains(id)) =>
            {
                seen.push(message.clone())
            }
            _ => {}
        }
    }
    seen
}

/// A tool call inside an assistant (or user) message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: ChatFunction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatFunction {
    pub name: String,
    /// The arguments object as JSON text, as OpenAI sends it.
    pub arguments: String,
}

impl ChatFunction {
    /// The arguments as JSON, or as a string of their text where it is not
    /// JSON (a model's malformed call, which the host answered as such).
    pub fn parsed_arguments(&self) -> Value {
        serde_json::from_str(&self.arguments)
            .unwrap_or_else(|_| Value::String(self.arguments.clone()))
    }
}

/// One executed tool step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The agent turn (0-based) that made the call.
    pub turn: usize,
    pub call_id: String,
    pub tool: String,
    /// Whose tool it was (the agent's unless said otherwise).
    #[serde(default, skip_serializing_if = "Actor::is_agent")]
    pub actor: Actor,
    pub arguments: Value,
    /// `ok`, `tool_error` or `sandbox_error`.
    pub status: String,
    /// The `tool` message content the agent saw.
    pub result: String,
    /// Fuel the call consumed (0 when the host refused it before the sandbox).
    pub fuel: u64,
    /// [`crate::State::digest`] after the step.
    pub state_hash: String,
}

/// Which environment an episode ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentRef {
    pub name: String,
    /// [`crate::Bundle::content_hash`].
    pub content_hash: String,
}

/// Who played the user. A replay plays a scripted user again, so that a
/// record whose user's messages, calls or seed were changed no longer
/// replays; a model user's turns it repeats as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum UserRef {
    /// The task's scripted user, unreliable with probability `instability`.
    Scripted { instability: f64 },
    /// A model, named as `policy` names a model agent: `model:NAME` for a
    /// local one, `openai:NAME` for one at an endpoint.
    Model { name: String },
}

/// Why an episode ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The simulated user ended the dialogue.
    UserStop,
    /// The agent used all its turns.
    MaxTurns,
    /// The episode was cut before its end: its `forge serve` session was
    /// closed by the client, expired, or the server shut down.
    Closed,
    /// The dialogue outgrew the context of the model playing the agent (or
    /// the user): it could not take another turn, so the episode ended and
    /// was judged as it stood.
    ContextFull,
    /// The agent called one of the environment's ending tools (τ-bench's
    /// `transfer_to_human_agents`): the episode ended with the call.
    AgentEnded,
}

impl Termination {
    /// The name a trajectory records.
    pub fn name(self) -> &'static str {
        match self {
            Self::UserStop => "user_stop",
            Self::MaxTurns => "max_turns",
            Self::Closed => "closed",
            Self::ContextFull => "context_full",
            Self::AgentEnded => "agent_ended",
        }
    }
}

/// One episode, one JSONL line. A field it does not have is refused: a
/// misspelt one would otherwise be dropped without a word.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpisodeRecord {
    pub format: String,
    pub environment: EnvironmentRef,
    pub task_id: String,
    pub policy: String,
    pub seed: u64,
    pub max_turns: usize,
    /// Absent for users a replay repeats as recorded (and in records made
    /// before users were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<UserRef>,
    pub messages: Vec<ChatMessage>,
    pub steps: Vec<Step>,
    pub termination: Termination,
    /// [`crate::State::sha256`] of the final state (Python-compatible).
    pub final_state_sha256: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The policy's own record of the episode (see [`crate::Policy::trace`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_trace: Option<serde_json::Value>,
}

/// Appends episodes to a JSONL file, which it holds for this process
/// ([`crate::hold`]): two writers of one file would tear each other's
/// lines (and the second, opening it to append, could cut off as torn the
/// line the first is writing). Every line is written at the file's end,
/// wherever that is by then: a file truncated under the writer (a log
/// rotated by copy-then-truncate) goes on from its new end rather than
/// from a hole of zeros.
pub struct TrajectoryWriter {
    file: File,
    path: PathBuf,
    /// Bytes of a torn last line cut off when the file was opened to append.
    torn_tail_cut: u64,
    /// A write failed part-way and its line could not be cut off.
    torn: bool,
}

impl TrajectoryWriter {
    /// Creates `path`; refuses to overwrite an existing file, which could hold
    /// episodes someone still needs.
    pub fn create(path: &Path) -> Result<Self> {
        refuse_directory(path)?;
        let file = match OpenOptions::new().append(true).create_new(true).open(path) {
            Ok(file) => file,
            // Said once, without the system's own "File exists".
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists && !path.exists() => {
                bail!(
                    "{} is a symbolic link to nothing: not creating a file through it (choose \
                     another path)",
                    path.display()
                )
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => bail!(
                "{} already exists (pass --append to add to it, or choose another path)",
                path.display()
            ),
            Err(err) => return Err(err).with_context(|| format!("creating {}", path.display())),
        };
        crate::hold::hold(&file, path, "file")?;
        Ok(Self {
            file,
            path: path.to_owned(),
            torn_tail_cut: 0,
            torn: false,
        })
    }

    /// Opens `path` for appending (creating it). A torn last line left by a
    /// killed process (the beginning of a record) is cut off first; a last
    /// record that only lacks its newline (an edited file) is kept and
    /// ended. A file with any other line (past a byte-order mark and blank
    /// lines, as [`read`] reads it) that is no trajectory record is refused
    /// rather than appended to or cut: episodes after it would be
    /// unreadable with it.
    pub fn append(path: &Path) -> Result<Self> {
        refuse_other_than_a_file(path)?;
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        crate::hold::hold(&file, path, "file")?;
        let reading = |err: std::io::Error| {
            anyhow::Error::from(err).context(format!("reading {}", path.display()))
        };
        let len = file.metadata().map_err(reading)?.len();
        // Every line is read as reading the file will, through what this
        // writer holds and no further than its length now.
        let held = BufReader::new(Read::take(&mut file, len));
        let read = jsonl::read_from(held, path, "a trajectory record", |line| {
            parse_record(line).map(drop)
        })
        .map_err(|err| anyhow::anyhow!("{err:#}; refusing to append to it"))?;
        let complete = line_start(&mut file, len).map_err(reading)?;
        let mut torn_tail_cut = 0;
        if read.torn_tail {
            let mut tail = Vec::new();
            file.seek(SeekFrom::Start(complete)).map_err(reading)?;
            Read::take(&mut file, len - complete)
                .read_to_end(&mut tail)
                .map_err(reading)?;
            if complete == 0 {
                tail = bom::strip_bytes(&tail).to_vec();
            }
            // Only what is a line of episodes can be cut off as a torn one
            // (blank space after the last newline is cut too): the
            // beginning of a record, written when a process was killed.
            let blank = tail.trim_ascii().is_empty();
            if !blank && !begins_a_record(&tail) {
                bail!(
                    "{} is not a trajectory file this version appends to (its last line, cut \
                     short, is not even the beginning of an episode record): refusing to append \
                     to it",
                    path.display()
                );
            }
            // A file of a byte-order mark alone has nothing to cut.
            if !tail.is_empty() {
                file.set_len(complete).with_context(|| {
                    format!("cutting the torn last line off {}", path.display())
                })?;
                torn_tail_cut = len - complete;
            }
        } else if complete < len {
            // A whole record that only lacks its newline.
            file.write_all(b"\n")
                .with_context(|| format!("writing to {}", path.display()))?;
        }
        Ok(Self {
            file,
            path: path.to_owned(),
            torn_tail_cut,
            torn: false,
        })
    }

    /// The length of the torn last line [`Self::append`] cut off (0 when
    /// there was none), for telling whoever appends: that episode is gone.
    pub fn torn_tail_cut(&self) -> u64 {
        self.torn_tail_cut
    }

    /// Writes one episode as one line and syncs it to disk. A line that
    /// fails part-way (a full disk) is cut off again: left, it would be a
    /// torn line amid the file once the next went after it, and the file
    /// unreadable. Where it cannot be cut off, the writer takes no more.
    pub fn write(&mut self, record: &EpisodeRecord) -> Result<()> {
        if self.torn {
            bail!(
                "{} ends in a line an earlier write failed part-way through and that could not \
                 be cut off: writing no more episodes after it",
                self.path.display()
            );
        }
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        let end = self
            .file
            .metadata()
            .with_context(|| format!("reading the length of {}", self.path.display()))?
            .len();
        let written = self
            .file
            .write_all(&line)
            .and_then(|()| self.file.sync_data());
        if written.is_err() {
            self.torn = self
                .file
                .set_len(end)
                .and_then(|()| self.file.sync_data())
                .is_err();
        }
        written.with_context(|| format!("writing to {}", self.path.display()))
    }
}

/// Trajectories go to a file; a directory would otherwise be reported as a
/// file that "already exists", or as an I/O error.
fn refuse_directory(path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!(
            "{} is a directory: name a JSONL file for the trajectories",
            path.display()
        );
    }
    Ok(())
}

/// Appending reads the file first, and may cut a torn line off its end:
/// a device or pipe (`/dev/null`, standard output) has neither a content
/// to read nor an end to cut.
fn refuse_other_than_a_file(path: &Path) -> Result<()> {
    refuse_directory(path)?;
    match std::fs::metadata(path) {
        Ok(metadata) if !metadata.is_file() => bail!(
            "{} is not a regular file (a device or pipe): episodes are appended only to a \
             file of them",
            path.display()
        ),
        _ => Ok(()),
    }
}

/// How every episode record's line begins, as [`TrajectoryWriter`] writes
/// it: what shows a line torn short to be one.
const RECORD_BEGINS: &[u8] = br#"{"format":"forge.trajectory/"#;

/// Whether `tail`, a line cut short, is the beginning of an episode
/// record, however short.
fn begins_a_record(tail: &[u8]) -> bool {
    let tail = tail.trim_ascii();
    tail.starts_with(RECORD_BEGINS) || RECORD_BEGINS.starts_with(tail)
}

/// Where the line that `end` lies in begins: just past the last newline
/// before `end` (0 where there is none). Of the file's length, the length
/// of its whole lines.
fn line_start(file: &mut File, end: u64) -> std::io::Result<u64> {
    let mut end = end;
    let mut buffer = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(buffer.len() as u64);
        let chunk = &mut buffer[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(position) = chunk.iter().rposition(|byte| *byte == b'\n') {
            return Ok(start + position as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// What a trajectory file holds.
#[derive(Debug)]
pub struct TrajectoryFile {
    pub episodes: Vec<EpisodeRecord>,
    /// The line of the file each episode is on.
    pub lines: Vec<usize>,
    /// A torn last line (a process killed while writing it), skipped.
    pub torn_tail: bool,
}

/// Reads a trajectory file. A malformed complete line is an error naming the
/// line; a torn last line is skipped and reported in [`TrajectoryFile::torn_tail`].
pub fn read(path: &Path) -> Result<TrajectoryFile> {
    let read = jsonl::read(path, "a trajectory record", parse_record)?;
    Ok(TrajectoryFile {
        episodes: read.records,
        lines: read.lines,
        torn_tail: read.torn_tail,
    })
}

/// Each line of a trajectory file as [`read`] reads it, a complete line
/// that is no record kept as why it is none rather than ending the
/// reading: for replaying every episode that can be, whatever one damaged
/// line holds.
pub fn read_each(path: &Path) -> Result<jsonl::Records<Result<EpisodeRecord>>> {
    jsonl::read_each(path, parse_record)
}

/// The record on `line`, of a format this version reads. A record of
/// another is refused by its format, before any field it holds that this
/// version does not know.
fn parse_record(line: &[u8]) -> Result<EpisodeRecord> {
    let readable = |format: &str| READABLE.contains(&format);
    let parsed = match serde_json::from_slice::<EpisodeRecord>(line) {
        Ok(record) if readable(&record.format) => return Ok(record),
        parsed => parsed,
    };
    // What the line is instead, where it is JSON.
    match serde_json::from_slice::<Value>(line).map(|value| value.get("format").cloned()) {
        Ok(Some(Value::String(format))) if !readable(&format) => {
            let (last, others) = READABLE.split_last().expect("a format is readable");
            bail!(
                "the format is `{format}`; this version reads `{}` and `{last}`",
                others.join("`, `")
            )
        }
        Ok(None) => bail!(
            "it has no `format`, as every episode record has (trajectories are what `--out` \
             writes, not `--json` output, reports or task files)"
        ),
        _ => Ok(parsed?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_does_not_see_the_users_own_calls() {
        let call = |id: &str| ChatToolCall {
            id: id.into(),
            kind: "function".into(),
            function: ChatFunction {
                name: "toggle_data".into(),
                arguments: "{}".into(),
            },
        };
        let messages = vec![
            ChatMessage::user("my data is off"),
            // What the agent wrote beside its call stays on its side.
            ChatMessage {
                content: Some("Let me check your line.".into()),
                ..ChatMessage::assistant_call(call("call_0"))
            },
            ChatMessage::tool("call_0", "line L1"),
            ChatMessage::assistant("please toggle your data"),
            ChatMessage::user_call(call("call_1")),
            ChatMessage::tool("call_1", "Mobile Data is now ON."),
            ChatMessage::user("done"),
        ];
        let seen = agent_view(&messages);
        let expected: Vec<ChatMessage> = [0, 1, 2, 3, 6]
            .into_iter()
            .map(|index| messages[index].clone())
            .collect();
        assert_eq!(seen, expected);
        // The user sees its side: its own calls, not the agent's.
        let seen = user_view(&messages);
        let mut own_call = messages[4].clone();
        own_call.role = Role::Assistant;
        let expected = vec![
            ChatMessage::assistant("my data is off"),
            ChatMessage::user("please toggle your data"),
            own_call,
            messages[5].clone(),
            ChatMessage::assistant("done"),
        ];
        assert_eq!(seen, expected);
    }

    /// A record's line, of `format`, with `extra` fields.
    fn record_line(format: &str, extra: &str) -> String {
        format!(
            "{{\"format\": \"{format}\", \"environment\": {{\"name\": \"shop\", \"content_hash\": \"h\"}}, \
             \"task_id\": \"t1\", \"policy\": \"gold\", \"seed\": 0, \"max_turns\": 30, \
             \"messages\": [], \"steps\": [], \"termination\": \"user_stop\", \
             \"final_state_sha256\": \"s\", \"reward\": 1.0, \"state_match\": true, \
             \"outputs\": [], \"partial_credit\": 1.0{extra}}}\n"
        )
    }

    #[test]
    fn one_writer_holds_a_file_and_writes_at_its_end_whatever_it_was_cut_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let record: EpisodeRecord = parse_record(record_line(FORMAT, "").as_bytes()).unwrap();
        let mut writer = TrajectoryWriter::create(&path).unwrap();
        writer.write(&record).unwrap();
        let error = format!("{:#}", TrajectoryWriter::append(&path).err().unwrap());
        assert!(
            error.contains("t.jsonl is in use by another forge process"),
            "{error}"
        );
        assert_eq!(read(&path).unwrap().episodes.len(), 1, "nothing was cut");
        // Cut under the writer, as a log rotated by copy-then-truncate is.
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        writer.write(&record).unwrap();
        let file = read(&path).unwrap();
        assert_eq!(file.episodes.len(), 1);
        assert!(!file.torn_tail);
        drop(writer);
        // Let go with its writer.
        TrajectoryWriter::append(&path)
            .unwrap()
            .write(&record)
            .unwrap();
        assert_eq!(read(&path).unwrap().episodes.len(), 2);
    }

    #[test]
    fn appending_reads_a_file_as_reading_it_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let line = record_line(FORMAT, "");
        let record: EpisodeRecord = parse_record(line.as_bytes()).unwrap();
        let compact = String::from_utf8(serde_json::to_vec(&record).unwrap()).unwrap();
        let append_one = |text: &str| {
            std::fs::write(&path, text).unwrap();
            let mut writer = TrajectoryWriter::append(&path)?;
            writer.write(&record)?;
            anyhow::Ok((writer.torn_tail_cut(), read(&path)?.episodes.len()))
        };
        // The only line, torn as the first episode was written, is cut off.
        for cut in [40, 15] {
            assert_eq!(append_one(&compact[..cut]).unwrap(), (cut as u64, 1));
        }
        // So is blank space after the last newline.
        assert_eq!(append_one("  ").unwrap(), (2, 1));
        // A byte-order mark and blank lines before the first record, as
        // an editor may leave them, are read past.
        assert_eq!(append_one(&format!("\u{feff}\n{line}")).unwrap(), (0, 2));
        assert_eq!(append_one(&format!("\u{feff}{compact}")).unwrap(), (0, 2));
        // A file of one line that is no record, torn or whole, is left as
        // it was.
        for text in ["my notes", "{\"a\": "] {
            let error = format!("{:#}", append_one(text).unwrap_err());
            assert!(error.contains("is not a trajectory file"), "{error}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        }
        // Nor is a file with any line that is no record, first, last or
        // amid records, whole or cut short: reading it would stop there.
        for (text, at) in [
            ("{\"a\": 1}".to_owned(), 1),
            (format!("{line}hello"), 0),
            (format!("{line}hello\n\n"), 2),
            (format!("{line}\n{{\"a\": 1}}\n{line}"), 3),
            (format!("{line}{}\n{line}", &compact[..40]), 2),
        ] {
            let error = format!("{:#}", append_one(&text).unwrap_err());
            assert!(error.contains("refusing to append"), "{error}");
            if at > 0 {
                let named = format!("t.jsonl line {at} is not a trajectory record");
                assert!(error.contains(&named), "{error}");
            }
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        }
    }

    #[test]
    fn a_writer_whose_failed_line_cannot_be_cut_off_writes_no_more() {
        // Every write to /dev/full fails as to a full disk, and it cannot
        // be cut to a length as a file can.
        let full = Path::new("/dev/full");
        if !full.exists() {
            return;
        }
        let record: EpisodeRecord = parse_record(record_line(FORMAT, "").as_bytes()).unwrap();
        // Opened here: `append` takes regular files alone.
        let mut writer = TrajectoryWriter {
            file: OpenOptions::new().append(true).open(full).unwrap(),
            path: full.to_owned(),
            torn_tail_cut: 0,
            torn: false,
        };
        let error = format!("{:#}", writer.write(&record).unwrap_err());
        assert!(error.contains("writing to /dev/full"), "{error}");
        let error = format!("{:#}", writer.write(&record).unwrap_err());
        assert!(
            error.contains("an earlier write failed part-way through"),
            "{error}"
        );
    }

    #[test]
    fn records_of_every_earlier_format_are_read_and_another_format_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let current = record_line(
            FORMAT,
            ", \"user\": {\"kind\": \"model\", \"name\": \"model:smollm2-135m\"}",
        );
        let second = record_line(
            "forge.trajectory/2",
            ", \"user\": {\"kind\": \"scripted\", \"instability\": 0.0}",
        );
        let first = record_line("forge.trajectory/1", "");
        std::fs::write(&path, first + &second + &current).unwrap();
        let file = read(&path).unwrap();
        let users: Vec<_> = file.episodes.iter().map(|record| &record.user).collect();
        assert_eq!(
            users,
            [
                &None,
                &Some(UserRef::Scripted { instability: 0.0 }),
                &Some(UserRef::Model {
                    name: "model:smollm2-135m".into()
                })
            ]
        );
        // A newer record holds what this version does not know.
        let newer = record_line("forge.trajectory/9", ", \"novelty\": 1");
        std::fs::write(&path, current.clone() + &newer).unwrap();
        let error = format!("{:#}", read(&path).unwrap_err());
        assert!(
            error.contains(
                "line 2 is not a trajectory record: the format is `forge.trajectory/9`; this \
                 version reads `forge.trajectory/1`, `forge.trajectory/2`, \
                 `forge.trajectory/3` and `forge.trajectory/4`"
            ),
            "{error}"
        );
        // A misspelt field of a record this version reads is named as such.
        std::fs::write(&path, record_line(FORMAT, ", \"polcy\": 1")).unwrap();
        let error = format!("{:#}", read(&path).unwrap_err());
        assert!(error.contains("unknown field `polcy`"), "{error}");
        // A line of JSON that is no record at all (a `--json` summary) says
        // what a trajectory file is.
        std::fs::write(&path, "{\"summary\": true, \"episodes\": 4}\n").unwrap();
        let error = format!("{:#}", read(&path).unwrap_err());
        assert!(
            error.contains("line 1 is not a trajectory record: it has no `format`"),
            "{error}"
        );
        // Appending to a file of another format is refused, the file kept.
        std::fs::write(&path, &newer).unwrap();
        let error = format!("{:#}", TrajectoryWriter::append(&path).err().unwrap());
        assert!(
            error.contains("the format is `forge.trajectory/9`"),
            "{error}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), newer);
    }
}
