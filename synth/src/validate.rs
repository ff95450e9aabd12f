//! Stage 2 validation: every generated tool is exercised in the sandbox with
//! valid and invalid arguments, and its results and state changes are checked
//! against what the doc declares.

use crate::doc::{DomainDoc, ToolDoc, ToolKind};
use crate::initial::field_value;
use forge_runtime::State;
use forge_runtime::bundle::ToolCall;
use forge_runtime::environment::{Observation, execute};
use forge_runtime::sandbox::ToolComponent;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// The verdict on one tool.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCheck {
    pub tool: String,
    pub valid_calls: usize,
    pub succeeded: usize,
    pub problems: Vec<String>,
}

/// Calls each tool with arguments drawn from `state` (several tries for
/// writes whose preconditions may not hold) and with invalid arguments.
pub fn validate(
    doc: &DomainDoc,
    component: &ToolComponent,
    state: &State,
    seed: u64,
) -> Vec<ToolCheck> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    doc.tools
        .iter()
        .map(|tool| check_tool(doc, component, state, tool, &mut rng))
        .collect()
}

fn check_tool(
    doc: &DomainDoc,
    component: &ToolComponent,
    state: &State,
    tool: &ToolDoc,
    rng: &mut ChaCha8Rng,
) -> ToolCheck {
    let mut check = ToolCheck {
        tool: tool.name.clone(),
        valid_calls: 0,
        succeeded: 0,
        problems: Vec::new(),
    };
    let mut instance = component.instance();
    let collection = &doc.collections[&tool.collection];
    let keys = state.keys(&tool.collection);
    // Collections a write may touch: its own and those its changes reach.
    let mut allowed: BTreeSet<String> = BTreeSet::from([tool.collection.clone()]);
    for change in &tool.change {
        if let Ok(target) = doc.via_target(tool, change.via.as_deref()) {
            allowed.insert(target);
        }
    }
    // Writes with strict preconditions may need many draws to meet them once.
    let tries = if tool.kind.writes() { 80 } else { 10 };
    for _ in 0..tries {
        if tool.kind.writes() && check.succeeded >= 3 {
            break;
        }
        let Some(arguments) = valid_arguments(doc, state, tool, &keys, rng) else {
            break;
        };
        check.valid_calls += 1;
        let call = ToolCall::new(tool.name.clone(), Value::Object(arguments.clone()));
        let executed = execute(&mut instance, state, &call);
        match &executed.observation {
            Observation::Ok(text) => {
                check.succeeded += 1;
                let output: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                if let Some(problem) = effect_problem(
                    doc,
                    tool,
                    state,
                    &executed.state,
                    &arguments,
                    &output,
                    &allowed,
                ) {
                    check.problems.push(problem);
                }
            }
            Observation::ToolError(_) if tool.kind.writes() => {}
            Observation::ToolError(message) => check
                .problems
                .push(format!("a valid call {} failed: {message}", call.arguments)),
            Observation::SandboxError(message) => check
                .problems
                .push(format!("the sandbox stopped {}: {message}", call.arguments)),
        }
        if check.succeeded > 0 && !tool.kind.writes() {
            break;
        }
        if executed.state.sha256() != state.sha256() && !tool.kind.writes() {
            check.problems.push("a read changed the state".into());
        }
    }
    // A call the sandbox stopped says why itself (out of fuel, a trap):
    // the preconditions are not the question then.
    let stopped = check
        .problems
        .iter()
        .any(|problem| problem.starts_with("the sandbox stopped"));
    if check.succeeded == 0 && !stopped {
        check.problems.push(format!(
            "no valid call succeeded in {} tries (are its preconditions ever met?)",
            check.valid_calls
        ));
    }
    if matches!(
        tool.kind,
        ToolKind::Get | ToolKind::Update | ToolKind::Delete
    ) {
        let missing = ToolCall::new(
            tool.name.clone(),
            Value::Object(Map::from_iter([(
                collection.key_field.clone(),
                Value::String(format!("{}0", collection.key_prefix)),
            )])),
        );
        let mut arguments = missing.arguments.as_object().cloned().unwrap_or_default();
        for param in &tool.params {
            if let Some(field) = doc.field(&tool.collection, param) {
                arguments.insert(
                    param.clone(),
                    field_value(&field, &Map::new(), &Map::new(), rng),
                );
            }
        }
        let executed = execute(
            &mut instance,
            state,
            &ToolCall {
                arguments: Value::Object(arguments),
                ..missing
            },
        );
        if !matches!(executed.observation, Observation::ToolError(_))
            || executed.state.sha256() != state.sha256()
        {
            check.problems.push(format!(
                "an unknown {} was not refused cleanly: {:?}",
                collection.noun, executed.observation
            ));
        }
    }
    // Tries that fail alike are said once.
    check.problems.dedup();
    check
}

/// Arguments that satisfy the schema, drawn from the state.
fn valid_arguments(
    doc: &DomainDoc,
    state: &State,
    tool: &ToolDoc,
    keys: &[String],
    rng: &mut ChaCha8Rng,
) -> Option<Map<String, Value>> {
    let collection = &doc.collections[&tool.collection];
    let sample = |rng: &mut ChaCha8Rng| -> Option<Map<String, Value>> {
        (!keys.is_empty())
            .then(|| {
                state
                    .get(&tool.collection, &keys[rng.random_range(0..keys.len())])
                    .and_then(|record| record.value().as_object().cloned())
            })
            .flatten()
    };
    let mut arguments = Map::new();
    match tool.kind {
        ToolKind::Find => {
            let by = tool.by.clone()?;
            arguments.insert(by.clone(), sample(rng)?.get(&by)?.clone());
        }
        ToolKind::Get | ToolKind::Delete => {
            arguments.insert(
                collection.key_field.clone(),
                sample(rng)?.get(&collection.key_field)?.clone(),
            );
        }
        ToolKind::List => {
            let record = sample(rng)?;
            for filter in &tool.required_filters {
                arguments.insert(filter.clone(), record.get(filter)?.clone());
            }
        }
        ToolKind::Create | ToolKind::Update => {
            if tool.kind == ToolKind::Update {
                arguments.insert(
                    collection.key_field.clone(),
                    sample(rng)?.get(&collection.key_field)?.clone(),
                );
            }
            for param in &tool.params {
                let field = doc.field(&tool.collection, param)?;
                let value = match &field.references {
                    Some(target) => {
                        let targets = state.keys(target);
                        Value::String(
                            targets
                                .get(rng.random_range(0..targets.len().max(1)))?
                                .clone(),
                        )
                    }
                    None => field_value(&field, &Map::new(), &Map::new(), rng),
                };
                arguments.insert(param.clone(), value);
            }
        }
    }
    Some(arguments)
}

/// What is wrong with a successful call's result and state change, if anything.
fn effect_problem(
    doc: &DomainDoc,
    tool: &ToolDoc,
    before: &State,
    after: &State,
    arguments: &Map<String, Value>,
    output: &Value,
    allowed: &BTreeSet<String>,
) -> Option<String> {
    let collection = &doc.collections[&tool.collection];
    let changed: BTreeSet<String> = before
        .collections()
        .map(|(name, _)| name.clone())
        .chain(after.collections().map(|(name, _)| name.clone()))
        .filter(|name| {
            let keys = |state: &State| {
                state
                    .keys(name)
                    .into_iter()
                    .map(|key| {
                        (
                            key.clone(),
                            state.get(name, &key).map(|r| r.value().clone()),
                        )
                    })
                    .collect::<Vec<_>>()
            };
            keys(before) != keys(after)
        })
        .collect();
    match tool.kind {
        ToolKind::Find | ToolKind::Get | ToolKind::List => {
            (!changed.is_empty()).then(|| format!("a read changed {changed:?}"))
        }
        ToolKind::Create | ToolKind::Update | ToolKind::Delete => {
            if let Some(outside) = changed.iter().find(|name| !allowed.contains(*name)) {
                return Some(format!(
                    "it changed `{outside}`, which its doc does not declare"
                ));
            }
            let before_count = before.collection(&tool.collection).map_or(0, |c| c.len());
            let after_count = after.collection(&tool.collection).map_or(0, |c| c.len());
            let expected = match tool.kind {
                ToolKind::Create => before_count + 1,
                ToolKind::Delete => before_count.saturating_sub(1),
                _ => before_count,
            };
            if after_count != expected {
                return Some(format!(
                    "`{}` went from {before_count} to {after_count} records",
                    tool.collection
                ));
            }
            if tool.kind == ToolKind::Update {
                let key = arguments.get(&collection.key_field)?.as_str()?;
                for param in &tool.params {
                    if output.get(param) != arguments.get(param) {
                        return Some(format!("`{param}` was not set to the argument"));
                    }
                }
                for (field, value) in &tool.set {
                    if after.get(&tool.collection, key)?.value().get(field) != Some(value) {
                        return Some(format!("`{field}` was not set to {value}"));
                    }
                }
            }
            None
        }
    }
}
