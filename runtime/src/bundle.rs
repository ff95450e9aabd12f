//! Environment bundles: a tool component, its initial state and its tasks.
//!
//! On disk a bundle is a directory:
//!
//! ```text
//! environment.json    {"name", "description", "verify": {…}}     (see [`Manifest`])
//! component.wasm      the tools, a `forge:env/environment` component
//! initial_state.json  {"collection": {"key": record, …}, …}
//! tasks.json          [task, …]                                  (see [`Task`])
//! ```

use crate::canonical;
use crate::verify::VerifyRules;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;

pub const MANIFEST_FILE: &str = "environment.json";
pub const COMPONENT_FILE: &str = "component.wasm";
pub const INITIAL_STATE_FILE: &str = "initial_state.json";
pub const TASKS_FILE: &str = "tasks.json";

/// `environment.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// How final states are canonicalised before they are compared.
    #[serde(default)]
    pub verify: VerifyRules,
}

/// A tool call with its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
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
    /// Executed in order on the initial state, these give the gold final state.
    #[serde(default)]
    pub gold_actions: Vec<ToolCall>,
    /// Strings the agent must say to the user (answers to read-only requests).
    #[serde(default)]
    pub required_outputs: Vec<String>,
    /// A task-specific initial state; the environment's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_state: Option<Value>,
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
        if !dir.is_dir() {
            bail!("{} is not a bundle directory", dir.display());
        }
        let manifest: Manifest = read_json(&dir.join(MANIFEST_FILE))?;
        let component_path = dir.join(COMPONENT_FILE);
        let wasm = std::fs::read(&component_path)
            .with_context(|| format!("reading {}", component_path.display()))?;
        let initial_state: Value = read_json(&dir.join(INITIAL_STATE_FILE))?;
        let tasks: Vec<Task> = read_json(&dir.join(TASKS_FILE))?;
        Ok(Self {
            manifest,
            wasm: wasm.into(),
            initial_state,
            tasks,
        })
    }

    /// Writes the bundle as a directory (created if needed).
    pub fn write_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
        };
        write(MANIFEST_FILE, &pretty(&self.manifest)?)?;
        write(COMPONENT_FILE, &self.wasm)?;
        write(INITIAL_STATE_FILE, &pretty(&self.initial_state)?)?;
        write(TASKS_FILE, &pretty(&self.tasks)?)?;
        Ok(())
    }

    /// Identifies the environment exactly: sha256 over the component bytes, the
    /// manifest, the initial state and the tasks (canonical JSON, so formatting
    /// of the files does not matter). Trajectories record it; replay checks it.
    pub fn content_hash(&self) -> String {
        let tasks = serde_json::to_value(&self.tasks).expect("tasks serialise");
        let manifest = serde_json::to_value(&self.manifest).expect("manifest serialises");
        let mut hasher = Sha256::new();
        for part in [
            canonical::hex(&Sha256::digest(&self.wasm)),
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

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is malformed", path.display()))
}

fn pretty<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    Ok(bytes)
}
