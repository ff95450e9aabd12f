//! τ²-bench (`sierra-research/tau2-bench`): `airline` and `retail`.
//!
//! Layout read from the data directory:
//!
//! ```text
//! tau2-bench/<domain>/db.json     the database: {table: {id: record}}
//! tau2-bench/<domain>/tasks.json  [{id, user_scenario, initial_state, evaluation_criteria, …}]
//! tau2-bench/<domain>/policy.md   the agent policy
//! ```
//!
//! The reference holds its database as a pydantic model, so the database is
//! loaded the way the model dumps it ([`crate::pydantic`], driven by the
//! model's schema in `suites/tau2-<domain>/db.schema.json`). Each task becomes
//! a Forge task named by its `id`, with the gold actions of its
//! `evaluation_criteria` (the actions the reference replays to build the gold
//! database) and, when its `reward_basis` counts them, its `communicate_info`
//! as required outputs; NL assertions, which need an LLM judge, are kept as
//! the task's unevaluated checks.

use crate::pydantic::Schema;
use crate::read_json;
use anyhow::{Context, Result, bail};
use forge_runtime::Bundle;
use forge_runtime::bundle::{Manifest, Task, ToolCall};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::Arc;

/// One τ²-bench domain.
pub struct Domain {
    pub name: &'static str,
    /// `DB.model_json_schema()` of the domain's database model.
    pub schema: &'static str,
    pub component: &'static [u8],
}

pub const AIRLINE: Domain = Domain {
    name: "airline",
    schema: include_str!("../tau2-airline/db.schema.json"),
    component: include_bytes!(concat!(env!("OUT_DIR"), "/tau2-airline.wasm")),
};

pub const RETAIL: Domain = Domain {
    name: "retail",
    schema: include_str!("../tau2-retail/db.schema.json"),
    component: include_bytes!(concat!(env!("OUT_DIR"), "/tau2-retail.wasm")),
};

/// The parts of a reference task that Forge uses; the rest (description,
/// annotations, natural-language assertions, …) is for human readers and the
/// reference's LLM judge.
#[derive(Deserialize)]
struct Tau2Task {
    id: String,
    user_scenario: UserScenario,
    #[serde(default)]
    initial_state: Option<InitialState>,
    #[serde(default)]
    evaluation_criteria: Option<Criteria>,
}

/// What the reference's user simulator is told (`UserScenario`).
#[derive(Deserialize)]
struct UserScenario {
    #[serde(default)]
    persona: Option<String>,
    instructions: Instructions,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Instructions {
    Structured {
        domain: String,
        reason_for_call: String,
        #[serde(default)]
        known_info: Option<String>,
        #[serde(default)]
        unknown_info: Option<String>,
        task_instructions: String,
    },
    Text(String),
}

#[derive(Deserialize)]
struct InitialState {
    #[serde(default)]
    initialization_data: Option<InitializationData>,
    #[serde(default)]
    initialization_actions: Option<Vec<Value>>,
    #[serde(default)]
    message_history: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct InitializationData {
    #[serde(default)]
    agent_data: Option<Map<String, Value>>,
    #[serde(default)]
    user_data: Option<Value>,
}

#[derive(Deserialize, Default)]
struct Criteria {
    #[serde(default)]
    actions: Option<Vec<Action>>,
    #[serde(default)]
    communicate_info: Option<Vec<String>>,
    #[serde(default)]
    nl_assertions: Option<Vec<String>>,
    /// The checks whose product is the reward; `[DB, COMMUNICATE]` when absent.
    #[serde(default)]
    reward_basis: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Action {
    name: String,
    arguments: Map<String, Value>,
    #[serde(default = "assistant")]
    requestor: String,
}

fn assistant() -> String {
    "assistant".to_owned()
}

/// Reads `domain` from `data` as a bundle.
pub fn load(domain: &Domain, data: &Path) -> Result<Bundle> {
    let dir = data.join("tau2-bench").join(domain.name);
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: --data must hold `tau2-bench/{}/` as the τ²-bench repository lays out `data/tau2/domains/{}/`",
            dir.display(),
            domain.name,
            domain.name
        );
    }
    let schema = Schema::parse(domain.schema)?;
    let db_path = dir.join("db.json");
    let state = schema
        .dump(&read_json(&db_path)?)
        .map_err(|error| anyhow::anyhow!("{}: {error}", db_path.display()))?;
    let tasks_path = dir.join("tasks.json");
    let list: Vec<Tau2Task> = serde_json::from_value(read_json(&tasks_path)?)
        .with_context(|| format!("{}: malformed task list", tasks_path.display()))?;
    let tasks = list
        .into_iter()
        .map(|task| {
            let id = task.id.clone();
            convert(task, &schema, &state)
                .with_context(|| format!("{}: task `{id}`", tasks_path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let policy_path = dir.join("policy.md");
    let policy = std::fs::read_to_string(&policy_path)
        .with_context(|| format!("reading {}", policy_path.display()))?;
    Ok(Bundle {
        manifest: Manifest {
            name: format!("tau2-bench-{}", domain.name),
            description: policy,
            verify: Default::default(),
            provenance: Some(json!({"suite": format!("tau2-bench/{}", domain.name)})),
            hashes: None,
            // Malformed calls get the reference's own answers.
            check_arguments: false,
        },
        wasm: Arc::from(domain.component),
        initial_state: state,
        tasks,
    })
}

/// A reference task as a Forge task.
fn convert(task: Tau2Task, schema: &Schema, db: &Value) -> Result<Task> {
    let criteria = task.evaluation_criteria.unwrap_or_default();
    let gold_actions = criteria
        .actions
        .unwrap_or_default()
        .into_iter()
        .map(|action| {
            if action.requestor != "assistant" {
                bail!(
                    "evaluation_criteria.actions: `{}` is requested by `{}`; only assistant actions are supported",
                    action.name,
                    action.requestor
                );
            }
            Ok(ToolCall {
                name: action.name,
                arguments: Value::Object(action.arguments),
            })
        })
        .collect::<Result<_>>()?;
    let basis = criteria
        .reward_basis
        .unwrap_or_else(|| vec!["DB".to_owned(), "COMMUNICATE".to_owned()]);
    if let Some(other) = basis
        .iter()
        .find(|check| !["DB", "COMMUNICATE", "NL_ASSERTION"].contains(&check.as_str()))
    {
        bail!("evaluation_criteria.reward_basis: `{other}` checks are not supported yet");
    }
    if !basis.iter().any(|check| check == "DB") {
        bail!(
            "evaluation_criteria.reward_basis: a reward without the DB check is not supported yet"
        );
    }
    // The reference counts what the agent said only when COMMUNICATE is in
    // the basis, and judges NL assertions with an LLM, which Forge does not.
    let required_outputs = if basis.iter().any(|check| check == "COMMUNICATE") {
        criteria.communicate_info.unwrap_or_default()
    } else {
        Vec::new()
    };
    let unevaluated = if basis.iter().any(|check| check == "NL_ASSERTION") {
        criteria
            .nl_assertions
            .unwrap_or_default()
            .into_iter()
            .map(|assertion| format!("NL_ASSERTION: {assertion}"))
            .collect()
    } else {
        Vec::new()
    };
    Ok(Task {
        id: task.id,
        instruction: scenario_text(&task.user_scenario),
        gold_actions,
        required_outputs,
        initial_state: task
            .initial_state
            .map(|initial| initial_db(initial, schema, db))
            .transpose()?
            .flatten(),
        user_facts: None,
        dag: None,
        gold_final_state_sha256: None,
        stats: None,
        unevaluated,
    })
}

/// The task's own initial database, when its `initial_state` changes the
/// domain's: `initialization_data.agent_data` merged into the database as
/// the reference's `update_db` does (a recursive dict update, then the model
/// validated again). Initialization actions, message histories and user data
/// belong to domains with user tools and are refused.
fn initial_db(initial: InitialState, schema: &Schema, db: &Value) -> Result<Option<Value>> {
    if initial
        .initialization_actions
        .is_some_and(|actions| !actions.is_empty())
    {
        bail!("initial_state.initialization_actions are not supported");
    }
    if initial
        .message_history
        .is_some_and(|history| !history.is_empty())
    {
        bail!("initial_state.message_history is not supported");
    }
    let Some(data) = initial.initialization_data else {
        return Ok(None);
    };
    if data.user_data.is_some() {
        bail!("initial_state.initialization_data.user_data: the domain has no user database");
    }
    let Some(agent_data) = data.agent_data else {
        return Ok(None);
    };
    let mut merged = db.clone();
    merge(&mut merged, &agent_data);
    schema
        .dump(&merged)
        .map(Some)
        .map_err(|error| anyhow::anyhow!("initial_state.initialization_data.agent_data: {error}"))
}

/// `addict.Dict.update`: a dict merged into a dict recursively, anything
/// else replaced.
fn merge(base: &mut Value, update: &Map<String, Value>) {
    let Value::Object(base) = base else {
        *base = Value::Object(update.clone());
        return;
    };
    for (key, value) in update {
        match (base.get_mut(key), value) {
            (Some(existing @ Value::Object(_)), Value::Object(update)) => merge(existing, update),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// `str(user_scenario)`: what the reference's user simulator reads.
fn scenario_text(scenario: &UserScenario) -> String {
    let mut lines = Vec::new();
    if let Some(persona) = &scenario.persona {
        lines.push("Persona:".to_owned());
        lines.push(indent(persona));
    }
    lines.push("Instructions:".to_owned());
    lines.push(indent(&instructions_text(&scenario.instructions)));
    lines.join("\n")
}

/// `str(StructuredUserInstructions)` (or the plain text).
fn instructions_text(instructions: &Instructions) -> String {
    match instructions {
        Instructions::Text(text) => text.clone(),
        Instructions::Structured {
            domain,
            reason_for_call,
            known_info,
            unknown_info,
            task_instructions,
        } => {
            let mut lines = vec![
                format!("Domain: {domain}"),
                format!("Reason for call:\n{}", indent(reason_for_call)),
            ];
            if let Some(known) = known_info {
                lines.push(format!("Known info:\n{}", indent(known)));
            }
            if let Some(unknown) = unknown_info {
                lines.push(format!("Unknown info:\n{}", indent(unknown)));
            }
            lines.push(format!("Task instructions:\n{}", indent(task_instructions)));
            lines.join("\n")
        }
    }
}

/// `textwrap.indent(text, "\t")`: a tab before every line that is not blank.
fn indent(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| match line.trim().is_empty() {
            true => line.to_owned(),
            false => format!("\t{line}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_updates_dicts_recursively_and_replaces_the_rest() {
        let mut base = json!({"users": {"u1": {"name": "a", "tags": [1]}, "u2": {}}});
        let update = json!({"users": {"u1": {"tags": [2], "age": 3}}, "x": 1});
        merge(&mut base, update.as_object().unwrap());
        assert_eq!(
            base,
            json!({"users": {"u1": {"name": "a", "tags": [2], "age": 3}, "u2": {}}, "x": 1})
        );
    }

    #[test]
    fn indent_skips_blank_lines() {
        assert_eq!(indent("a\n\n b\n"), "\ta\n\n\t b\n");
    }
}
