//! The bundle's tasks: well formed, solvable by their gold actions, and with
//! arguments the tools' schemas accept.

use std::collections::BTreeSet;

use forge_example_shop::TOOLS;
use forge_guest::Value;
use serde::Deserialize;

use crate::store::{MemStore, bundle_jsonl};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Task {
    id: String,
    instruction: String,
    gold_actions: Vec<Action>,
    required_outputs: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Action {
    name: String,
    arguments: Value,
}

/// The tools that only read the state.
const READ_ONLY: &[&str] = &[
    "find_user_by_email",
    "get_user",
    "search_products",
    "get_product",
    "get_order",
    "list_user_orders",
];

fn tasks() -> Vec<Task> {
    bundle_jsonl("tasks.jsonl")
        .into_iter()
        .map(|task| serde_json::from_value(task).expect("tasks.jsonl holds tasks"))
        .collect()
}

#[test]
fn tasks_are_many_and_well_formed() {
    let tasks = tasks();
    assert!(tasks.len() >= 24, "only {} tasks", tasks.len());
    let mut ids = BTreeSet::new();
    for task in &tasks {
        assert!(
            ids.insert(task.id.as_str()),
            "task id {} is used twice",
            task.id
        );
        let number = task.id.strip_prefix("shop-").unwrap_or_default();
        assert!(
            number.len() == 2 && number.bytes().all(|b| b.is_ascii_digit()),
            "bad task id {}",
            task.id
        );
        assert!(
            task.instruction.starts_with("You are "),
            "{}: instruction is not a user scenario",
            task.id
        );
        assert!(
            !task.gold_actions.is_empty(),
            "{}: no gold actions",
            task.id
        );
        assert!(
            task.required_outputs
                .iter()
                .all(|output| !output.trim().is_empty()),
            "{}: blank output",
            task.id
        );
    }
}

/// Each task's gold actions succeed in order from the initial state, the write
/// actions among them change the state, and the task cannot be solved by doing
/// nothing: it changes the state or asks for outputs, which its actions reveal.
#[test]
fn gold_actions_solve_their_tasks() {
    let initial = MemStore::initial();
    for task in tasks() {
        let mut store = initial.clone();
        let mut results = Vec::new();
        for (step, action) in task.gold_actions.iter().enumerate() {
            let before = store.snapshot();
            let result = forge_guest::call(
                TOOLS,
                &mut store,
                &action.name,
                &action.arguments.to_string(),
            )
            .unwrap_or_else(|err| {
                panic!("{} step {step} ({}) failed: {err}", task.id, action.name)
            });
            let read_only = READ_ONLY.contains(&action.name.as_str());
            assert_eq!(
                store.snapshot() == before,
                read_only,
                "{} step {step} ({}): a read must leave the state alone and a write must change it",
                task.id,
                action.name
            );
            results.push(result);
        }
        let changed = store.snapshot() != initial.snapshot();
        assert!(
            changed || !task.required_outputs.is_empty(),
            "{}: doing nothing would solve it",
            task.id
        );
        for output in &task.required_outputs {
            assert!(
                results
                    .iter()
                    .any(|result| result.contains(output.as_str())),
                "{}: no gold action reveals {output:?}",
                task.id
            );
        }
    }
}

#[test]
fn describe_lists_one_schema_per_tool() {
    let schemas = described_schemas();
    assert!(TOOLS.len() >= 11, "only {} tools", TOOLS.len());
    assert_eq!(schemas.len(), TOOLS.len());
    let names: BTreeSet<&str> = schemas.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.len(), TOOLS.len(), "tool names must be unique");
    for (name, parameters) in &schemas {
        assert_eq!(parameters["type"], "object", "{name}");
        check_schema(parameters, name);
    }
}

#[test]
fn gold_arguments_satisfy_the_schemas() {
    let schemas = described_schemas();
    for task in tasks() {
        for (step, action) in task.gold_actions.iter().enumerate() {
            let (_, schema) = schemas
                .iter()
                .find(|(name, _)| *name == action.name)
                .unwrap_or_else(|| panic!("{} step {step}: unknown tool {}", task.id, action.name));
            if let Err(err) = validate(schema, &action.arguments, "arguments") {
                panic!("{} step {step} ({}): {err}", task.id, action.name);
            }
        }
    }
}

/// `(name, parameters)` of every tool, as `describe` reports them.
fn described_schemas() -> Vec<(String, Value)> {
    let described: Value =
        serde_json::from_str(&forge_guest::describe(TOOLS)).expect("describe returns JSON");
    let entries = described.as_array().expect("describe returns an array");
    entries
        .iter()
        .map(|entry| {
            assert_eq!(entry["type"], "function");
            let function = &entry["function"];
            let name = function["name"]
                .as_str()
                .expect("a tool has a name")
                .to_owned();
            let description = function["description"].as_str().unwrap_or_default();
            assert!(!description.is_empty(), "{name} has no description");
            (name, function["parameters"].clone())
        })
        .collect()
}

/// Asserts that `schema` uses only the supported subset of JSON schema, and
/// that its objects are closed and require only properties they have.
fn check_schema(schema: &Value, path: &str) {
    match schema["type"].as_str() {
        Some("string") => {
            if let Some(choices) = schema.get("enum") {
                let choices = choices
                    .as_array()
                    .unwrap_or_else(|| panic!("{path}: enum is not an array"));
                assert!(
                    !choices.is_empty() && choices.iter().all(Value::is_string),
                    "{path}: bad enum"
                );
            }
        }
        Some("integer" | "number" | "boolean") => {}
        Some("array") => check_schema(&schema["items"], &format!("{path}[]")),
        Some("object") => {
            assert_eq!(
                schema["additionalProperties"], false,
                "{path}: object is open"
            );
            let properties = schema["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("{path}: no properties"));
            for name in schema["required"]
                .as_array()
                .unwrap_or_else(|| panic!("{path}: no required list"))
            {
                let name = name
                    .as_str()
                    .unwrap_or_else(|| panic!("{path}: required names are strings"));
                assert!(
                    properties.contains_key(name),
                    "{path}: requires unknown property {name}"
                );
            }
            for (name, property) in properties {
                check_schema(property, &format!("{path}.{name}"));
            }
        }
        other => panic!("{path}: unsupported type {other:?}"),
    }
    if schema["type"] != "string" {
        assert!(
            schema.get("enum").is_none(),
            "{path}: enum is only used for strings"
        );
    }
}

/// Whether `value` satisfies `schema` (in the subset [`check_schema`] allows).
fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let fits = match schema["type"].as_str() {
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("array") => {
            let items = value
                .as_array()
                .ok_or_else(|| format!("{path} is not an array"))?;
            for (index, item) in items.iter().enumerate() {
                validate(&schema["items"], item, &format!("{path}[{index}]"))?;
            }
            true
        }
        Some("object") => {
            let fields = value
                .as_object()
                .ok_or_else(|| format!("{path} is not an object"))?;
            for required in schema["required"].as_array().into_iter().flatten() {
                let required = required.as_str().unwrap_or_default();
                if !fields.contains_key(required) {
                    return Err(format!("{path} lacks required `{required}`"));
                }
            }
            for (name, field) in fields {
                let property = schema["properties"]
                    .get(name)
                    .ok_or_else(|| format!("{path} has unknown property `{name}`"))?;
                validate(property, field, &format!("{path}.{name}"))?;
            }
            true
        }
        other => return Err(format!("{path}: unsupported schema type {other:?}")),
    };
    if !fits {
        return Err(format!("{path} is not of type {}", schema["type"]));
    }
    match schema.get("enum").and_then(Value::as_array) {
        Some(choices) if !choices.contains(value) => {
            Err(format!("{path} is not one of {choices:?}"))
        }
        _ => Ok(()),
    }
}
