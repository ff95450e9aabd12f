//! τ-bench (`sierra-research/tau-bench`): `retail` and `airline`.
//!
//! Layout read from the data directory:
//!
//! ```text
//! tau-bench/<domain>/<table>.json     one JSON object per table, keyed by record id
//! tau-bench/<domain>/tasks_<split>.json  [{user_id, instruction, actions: [{name, kwargs}], outputs}]
//! tau-bench/<domain>/wiki.md          the agent policy (the reference's agents see it alone)
//! ```
//!
//! Each table becomes a collection of the initial state, each task a Forge
//! task named `<split>/<index>` with the reference's gold actions (a
//! `transfer_to_human_agents` included: it changes nothing, and ends the
//! episode, as the reference's `terminate_tools` do) and required outputs.

use crate::{parse_task, read_json};
use anyhow::{Context, Result, bail};
use forge_runtime::Bundle;
use forge_runtime::bundle::{Manifest, Task, ToolCall};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// One τ-bench domain.
pub struct Domain {
    pub name: &'static str,
    /// The tables of its database, each from `<table>.json`.
    pub tables: &'static [&'static str],
    /// Task splits, each from `tasks_<split>.json`, in replay order.
    pub splits: &'static [&'static str],
    pub component: &'static [u8],
}

pub const RETAIL: Domain = Domain {
    name: "retail",
    tables: &["orders", "products", "users"],
    splits: &["test", "train", "dev"],
    component: include_bytes!(concat!(env!("OUT_DIR"), "/tau-retail.wasm")),
};

pub const AIRLINE: Domain = Domain {
    name: "airline",
    tables: &["flights", "reservations", "users"],
    splits: &["test"],
    component: include_bytes!(concat!(env!("OUT_DIR"), "/tau-airline.wasm")),
};

/// A task as the reference's data files hold it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TauTask {
    /// Who wrote the task; the reference drops it too.
    #[serde(default, rename = "annotator")]
    _annotator: Option<Value>,
    user_id: String,
    instruction: String,
    actions: Vec<TauAction>,
    #[serde(default)]
    outputs: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TauAction {
    name: String,
    kwargs: Map<String, Value>,
}

/// Reads `domain` from `data` as a bundle.
pub fn load(domain: &Domain, data: &Path) -> Result<Bundle> {
    let dir = data.join("tau-bench").join(domain.name);
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: --data must hold `tau-bench/{}/` as the τ-bench repository lays it out",
            dir.display(),
            domain.name
        );
    }
    let mut state = Map::new();
    for table in domain.tables {
        let path = dir.join(format!("{table}.json"));
        match read_json(&path)? {
            Value::Object(records) => {
                if let Some((key, _)) = records.iter().find(|(_, record)| !record.is_object()) {
                    bail!("{}: record `{key}` is not a JSON object", path.display());
                }
                state.insert((*table).to_owned(), Value::Object(records));
            }
            _ => bail!(
                "{}: expected a JSON object keyed by record id",
                path.display()
            ),
        }
    }
    let mut tasks = Vec::new();
    let mut splits = BTreeMap::new();
    for split in domain.splits {
        let path = dir.join(format!("tasks_{split}.json"));
        let Value::Array(list) = read_json(&path)? else {
            bail!("{}: not a list of tasks", path.display());
        };
        let list: Vec<TauTask> = list
            .into_iter()
            .enumerate()
            .map(|(index, task)| parse_task(&path, Some(index), task))
            .collect::<Result<_>>()?;
        splits.insert(
            (*split).to_owned(),
            (0..list.len())
                .map(|index| format!("{split}/{index}"))
                .collect(),
        );
        tasks.extend(list.into_iter().enumerate().map(|(index, task)| {
            Task {
                id: format!("{split}/{index}"),
                instruction: task.instruction,
                gold_actions: task
                    .actions
                    .into_iter()
                    .map(|action| ToolCall::new(action.name, Value::Object(action.kwargs)))
                    .collect(),
                required_outputs: task.outputs,
                initial_state: None,
                user_facts: Some(json!({"user_id": task.user_id})),
                dag: None,
                gold_final_state_sha256: None,
                stats: None,
                nl_assertions: Vec::new(),
                setup: Vec::new(),
                state_check: true,
                assertions: Vec::new(),
                required_calls: Vec::new(),
            }
        }));
    }
    let wiki_path = dir.join("wiki.md");
    let wiki = std::fs::read_to_string(&wiki_path)
        .with_context(|| format!("reading {}", wiki_path.display()))?;
    Ok(Bundle {
        manifest: Manifest {
            name: format!("tau-bench-{}", domain.name),
            description: wiki,
            verify: Default::default(),
            provenance: Some(json!({"suite": format!("tau-bench/{}", domain.name)})),
            hashes: None,
            // Malformed calls get the reference's own answers.
            check_arguments: false,
            sync: false,
            user_guidelines: None,
            splits,
            // As the reference's `terminate_tools`.
            ending_tools: vec!["transfer_to_human_agents".into()],
        },
        wasm: Arc::from(domain.component),
        initial_state: Value::Object(state),
        tasks,
    })
}
