//! Environment bundles: a tool component, its initial state and its tasks.
//!
//! On disk a bundle is a directory:
//!
//! ```text
//! manifest.json       {"name", "description", "verify": {…}, "hashes": {…}}  (see [`Manifest`])
//! tools.wasm          the tools, a `forge:env/environment` component
//! initial_state.json  {"collection": {"key": record, …}, …}
//! tasks.jsonl         one task per line                                (see [`Task`])
//! ```
//!
//! The manifest records the sha256 of the other three files; a bundle whose
//! files do not match is refused (a corrupted copy or a hand edit that forgot
//! to update the manifest), naming the file.

use crate::verify::VerifyRules;
use crate::{bom, canonical, jsonl};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub const MANIFEST_FILE: &str = "manifest.json";
pub const COMPONENT_FILE: &str = "tools.wasm";
pub const INITIAL_STATE_FILE: &str = "initial_state.json";
pub const TASKS_FILE: &str = "tasks.jsonl";

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// How final states are canonicalised before they are compared.
    #[serde(default)]
    pub verify: VerifyRules,
    /// How the environment was made (synthesis settings, seed…); free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Value>,
    /// sha256 of the bundle's files, written with the bundle and checked on
    /// reading; not part of the content hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashes: Option<FileHashes>,
    /// Whether the host checks each call's tool name and arguments against the
    /// tools' schemas before the call (the default). Benchmark suites that must
    /// answer malformed calls exactly as their reference implementation does
    /// turn it off: their tools then see every call and check it themselves.
    #[serde(default = "checked", skip_serializing_if = "is_checked")]
    pub check_arguments: bool,
    /// Whether the host calls the component's `sync` after every successful
    /// call of an episode or of a task's set-up (environments whose agent and
    /// user sides hold views of the same facts, such as τ²-bench's telecom).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sync: bool,
    /// How a model playing the user is told to behave, before the task's
    /// instruction (τ²-bench's user-simulator guidelines); a generic brief
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_guidelines: Option<String>,
    /// Named subsets of the tasks, as task ids (a benchmark's `train` and
    /// `test`, τ²-bench's leaderboard `base`): `--tasks split:NAME` plays
    /// one, and training can learn from one and hold out another.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub splits: BTreeMap<String, Vec<String>>,
    /// The agent's tools whose call ends the episode, which is judged as it
    /// stands after it (τ-bench's `transfer_to_human_agents`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ending_tools: Vec<String>,
}

impl Manifest {
    /// The task ids of the split `name`, or why there is none: `no split
    /// `name` (it has `a`, `b`)`.
    pub fn split(&self, name: &str) -> Result<&[String], String> {
        self.splits.get(name).map(Vec::as_slice).ok_or_else(|| {
            let known: Vec<String> = self.splits.keys().map(|name| format!("`{name}`")).collect();
            match known.is_empty() {
                true => format!("no split `{name}` (it has none)"),
                false => format!("no split `{name}` (it has {})", known.join(", ")),
            }
        })
    }
}

fn checked() -> bool {
    true
}

fn is_checked(check: &bool) -> bool {
    *check
}

/// sha256 (hex) of each file of a bundle directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileHashes {
    pub tools: String,
    pub initial_state: String,
    pub tasks: String,
}

/// Whose tool a call is: the agent's, or those of a simulated user that has
/// tools of its own (the WIT `actor`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Actor {
    #[default]
    Agent,
    User,
}

impl Actor {
    pub fn is_agent(&self) -> bool {
        *self == Self::Agent
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::User => "user",
        }
    }
}

/// The deepest a call's arguments may nest (objects and arrays within each
/// other). A trajectory record holds them a few levels down, and JSON
/// readers refuse documents past 128 levels: deeper arguments would make a
/// record that nothing reads back.
pub const MAX_ARGUMENT_DEPTH: usize = 64;

/// A tool call with its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Whose tool it is; the agent's unless said otherwise.
    #[serde(default, skip_serializing_if = "Actor::is_agent")]
    pub actor: Actor,
}

/// `name(key=value, …)`, values as JSON: how a request to the scripted user
/// and `forge show` write a call.
impl std::fmt::Display for ToolCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let arguments = match &self.arguments {
            Value::Object(fields) => fields
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect::<Vec<_>>()
                .join(", "),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        write!(f, "{}({arguments})", self.name)
    }
}

impl ToolCall {
    /// How deep the arguments nest: 1 for `{}` or `{"a": 1}`, 2 for
    /// `{"a": [1]}` (see [`MAX_ARGUMENT_DEPTH`]).
    pub fn arguments_depth(&self) -> usize {
        fn depth(value: &Value) -> usize {
            match value {
                Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
                Value::Object(fields) => 1 + fields.values().map(depth).max().unwrap_or(0),
                _ => 0,
            }
        }
        depth(&self.arguments)
    }

    /// A call of one of the agent's tools.
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        Self {
            name: name.into(),
            arguments,
            actor: Actor::Agent,
        }
    }
}

/// A host-only function of the environment (the WIT `invoke`): a step of a
/// task's set-up, or an assertion on its final state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionCall {
    /// The side whose function it is.
    #[serde(default, skip_serializing_if = "Actor::is_agent")]
    pub actor: Actor,
    pub function: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

/// A step of a task's set-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SetupStep {
    /// A host-only function (the WIT `invoke`); if it fails, the task is
    /// broken.
    Function(FunctionCall),
    /// A tool call of a recorded dialogue the task starts from, replayed as
    /// the episode would have made it (a tool's refusal is part of that
    /// dialogue).
    Call(ToolCall),
}

/// An assertion on a task's final state: the function's answer must equal
/// `expected`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assertion {
    #[serde(flatten)]
    pub call: FunctionCall,
    pub expected: Value,
}

/// A call the agent (or user) must have made during the episode: one with the
/// same tool name whose arguments equal these, compared on the arguments
/// `compare` names, or on all the arguments the call passed when it is
/// absent (τ²-bench's action check).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequiredCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare: Option<Vec<String>>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// One task: what the user wants, the gold actions that achieve it, and what
/// the agent must tell the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub id: String,
    /// What the simulated user knows and wants.
    pub instruction: String,
    /// Executed in order on the initial state (after the set-up), these give
    /// the gold final state.
    #[serde(default)]
    pub gold_actions: Vec<ToolCall>,
    /// Strings the agent must say to the user (answers to read-only requests).
    #[serde(default)]
    pub required_outputs: Vec<String>,
    /// A task-specific initial state; the environment's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_state: Option<Value>,
    /// What the simulated user knows (synthesized tasks): facts it may state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_facts: Option<Value>,
    /// The gold actions' dependency graph and reasoning nodes (synthesized tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dag: Option<Value>,
    /// sha256 of the gold final state; when present, loading checks that the
    /// gold actions still reach it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gold_final_state_sha256: Option<String>,
    /// Difficulty statistics (synthesized tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<Value>,
    /// Statements about the dialogue that a judge model checks on the
    /// transcript (τ²-bench's NL assertions: "the agent confirmed the
    /// refund"). Counted in the reward when an episode runs with a judge;
    /// without one they are reported as not evaluated and left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nl_assertions: Vec<String>,
    /// Run in order on the initial state before the episode, each followed
    /// by the environment's sync (τ²-bench's initialization actions and the
    /// tool calls of a task's message history); the gold actions start from
    /// the same state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<SetupStep>,
    /// Whether the reward requires the final state to equal the gold final
    /// state. On by default; off for benchmark tasks judged by their
    /// assertions alone.
    #[serde(default = "checked", skip_serializing_if = "is_checked")]
    pub state_check: bool,
    /// Assertions on the final state that the reward requires.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<Assertion>,
    /// Calls the reward requires the episode to contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_calls: Vec<RequiredCall>,
}

impl Task {
    /// The user facts the instruction states, as text: what the user is meant
    /// to tell the agent (and what a rewrite of the instruction must keep).
    pub fn stated_facts(&self) -> Vec<String> {
        let facts = self.user_facts.as_ref().and_then(Value::as_object);
        facts
            .into_iter()
            .flat_map(|facts| facts.values())
            .map(|value| match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .filter(|fact| !fact.is_empty() && self.instruction.contains(fact.as_str()))
            .collect()
    }
}

/// A bundle in memory.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub manifest: Manifest,
    pub wasm: Arc<[u8]>,
    pub initial_state: Value,
    pub tasks: Vec<Task>,
}

impl Bundle {
    /// Reads a bundle directory; errors name the file and what is wrong.
    pub fn read_dir(dir: &Path) -> Result<Self> {
        if !dir.exists() {
            bail!("{} does not exist", dir.display());
        }
        if !dir.is_dir() {
            bail!("{} is not a bundle directory", dir.display());
        }
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
        };
        let manifest_bytes = read(MANIFEST_FILE)?;
        let manifest: Manifest = serde_json::from_slice(bom::strip_bytes(&manifest_bytes))
            .with_context(|| format!("{} is malformed", dir.join(MANIFEST_FILE).display()))?;
        let (wasm, state_bytes, task_bytes) = (
            read(COMPONENT_FILE)?,
            read(INITIAL_STATE_FILE)?,
            read(TASKS_FILE)?,
        );
        if let Some(expected) = &manifest.hashes {
            for (name, bytes, hash) in [
                (COMPONENT_FILE, &wasm, &expected.tools),
                (INITIAL_STATE_FILE, &state_bytes, &expected.initial_state),
                (TASKS_FILE, &task_bytes, &expected.tasks),
            ] {
                if &sha256_hex(bytes) != hash {
                    bail!(
                        "{} does not match the sha256 recorded in {MANIFEST_FILE}: corrupted, or edited \
                         (a bundle edited on purpose drops `hashes` from {MANIFEST_FILE}; episodes \
                         recorded before the edit no longer replay on it)",
                        dir.join(name).display()
                    );
                }
            }
        }
        let initial_state = serde_json::from_slice(bom::strip_bytes(&state_bytes))
            .with_context(|| format!("{} is malformed", dir.join(INITIAL_STATE_FILE).display()))?;
        let tasks = parse_tasks(&task_bytes)
            .with_context(|| format!("{} is malformed", dir.join(TASKS_FILE).display()))?;
        Ok(Self {
            manifest,
            wasm: wasm.into(),
            initial_state,
            tasks,
        })
    }

    /// Writes the bundle as a directory (created if needed), with the files'
    /// hashes in the manifest.
    pub fn write_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
        };
        let state = pretty(&self.initial_state)?;
        let tasks = tasks_jsonl(&self.tasks)?;
        let mut manifest = self.manifest.clone();
        manifest.hashes = Some(FileHashes {
            tools: sha256_hex(&self.wasm),
            initial_state: sha256_hex(&state),
            tasks: sha256_hex(&tasks),
        });
        write(COMPONENT_FILE, &self.wasm)?;
        write(INITIAL_STATE_FILE, &state)?;
        write(TASKS_FILE, &tasks)?;
        // The manifest last: a directory with a manifest is complete.
        write(MANIFEST_FILE, &pretty(&manifest)?)
    }

    /// Identifies the environment exactly: sha256 over the component bytes, the
    /// manifest, the initial state and the tasks (canonical JSON, so formatting
    /// of the files does not matter). Trajectories record it; replay checks it.
    pub fn content_hash(&self) -> String {
        let tasks = serde_json::to_value(&self.tasks).expect("tasks serialise");
        let manifest = Manifest {
            hashes: None,
            ..self.manifest.clone()
        };
        let manifest = serde_json::to_value(&manifest).expect("manifest serialises");
        let mut hasher = Sha256::new();
        for part in [
            sha256_hex(&self.wasm),
            canonical::to_string(&manifest),
            canonical::to_string(&self.initial_state),
            canonical::to_string(&tasks),
        ] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        canonical::hex(&hasher.finalize())
    }
}

/// Tasks from JSONL text: one task per line; blank lines are skipped.
pub fn parse_tasks(bytes: &[u8]) -> Result<Vec<Task>> {
    let text = bom::strip(std::str::from_utf8(bytes).context("not UTF-8")?);
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str(line)
                .map_err(|err| jsonl::within_the_line(err.into()))
                .with_context(|| format!("line {}", index + 1))
        })
        .collect()
}

fn tasks_jsonl(tasks: &[Task]) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    for task in tasks {
        serde_json::to_writer(&mut bytes, task)?;
        bytes.push(b'\n');
    }
    Ok(bytes)
}

fn sha256_hex(bytes: &[u8]) -> String {
    canonical::hex(&Sha256::digest(bytes))
}

fn pretty<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn task_checks_and_set_up_read_and_write_as_documented() {
        let line = json!({
            "id": "t1",
            "instruction": "i",
            "gold_actions": [{"name": "toggle_data", "arguments": {}, "actor": "user"}],
            "setup": [
                {"function": "set_user_info", "arguments": {"name": "J"}, "actor": "user"},
                {"name": "create_task", "arguments": {"title": "x"}}
            ],
            "state_check": false,
            "assertions": [{"function": "assert_data", "arguments": {}, "actor": "user", "expected": true}],
            "required_calls": [{"name": "refuel", "arguments": {"gb": 2}, "compare": []}],
            "nl_assertions": ["the agent apologised"]
        });
        let task: Task = serde_json::from_value(line.clone()).unwrap();
        assert_eq!(task.gold_actions[0].actor, Actor::User);
        assert!(matches!(&task.setup[0], SetupStep::Function(call) if call.actor == Actor::User));
        assert!(matches!(&task.setup[1], SetupStep::Call(call) if call.actor == Actor::Agent));
        assert_eq!(task.assertions[0].call.function, "assert_data");
        assert_eq!(task.required_calls[0].compare, Some(Vec::new()));
        assert_eq!(serde_json::to_value(&task).unwrap(), {
            let mut expected = line;
            expected["required_outputs"] = json!([]);
            expected
        });
        // A misspelt field is refused, inside a flattened assertion too.
        let mut misspelt = serde_json::to_value(&task).unwrap();
        misspelt["assertions"][0]["expect"] = json!(true);
        assert!(serde_json::from_value::<Task>(misspelt).is_err());
    }

    #[test]
    fn tasks_without_the_new_fields_write_as_before() {
        let task: Task = serde_json::from_value(json!({
            "id": "t1",
            "instruction": "i",
            "gold_actions": [{"name": "get_user", "arguments": {"user_id": "u1"}}]
        }))
        .unwrap();
        assert!(task.state_check);
        // Nothing new is written, so existing bundles keep their content hash.
        assert_eq!(
            serde_json::to_value(&task).unwrap(),
            json!({
                "id": "t1",
                "instruction": "i",
                "gold_actions": [{"name": "get_user", "arguments": {"user_id": "u1"}}],
                "required_outputs": []
            })
        );
    }
}
