//! The discoverable tools: methods the reference marks
//! `@is_discoverable_tool`, absent from the tool schemas. The knowledge base
//! names them; the agent unlocks its own (`unlock_discoverable_agent_tool`)
//! and calls them through `call_discoverable_agent_tool`, and gives the
//! user's to the user (`give_discoverable_user_tool`), who calls them through
//! `call_discoverable_user_tool`.
//!
//! What the reference reads from each method — its description and
//! parameters (parsed from the docstring, `parse_discoverable_tool_docstring`),
//! its signature and whether it mutates state — is `discoverable.json`,
//! dumped from the reference (τ²-bench, MIT licence, © 2025 Sierra); the
//! bodies are the modules here, one per part of the bank.

mod accounts;
mod cards;
mod credit;
mod disputes;
pub mod user;

use crate::db::{Records, query_database_tool};
use crate::py::{Raised, float_from_str, number, str_list};
use forge_tau_guest::{Data, Kwargs, dict_key, type_name};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// The table of debit cards, which both the card and the dispute tools work on.
const DEBIT_CARDS: &str = "debit_cards";

/// The body of a discoverable tool: the database, the arguments bound to its
/// signature, its answer, or the exception it raises (`Raised`) for its
/// caller to answer: a `TypeError` becomes the caller's "Invalid arguments"
/// text, any other exception leaves the tool.
pub type Run = fn(&mut Data<'_>, &Kwargs) -> Result<String, Raised>;

/// A discoverable tool's body, by name.
pub struct Body {
    pub name: &'static str,
    pub run: Run,
}

/// What the reference knows of a discoverable tool beyond its body.
#[derive(Debug, Deserialize)]
pub struct Doc {
    pub name: String,
    pub description: String,
    /// `{name: {type, description, required}}`, in docstring order.
    pub parameters: Map<String, Value>,
    /// Whether a call is logged as a state change (`MUTATES_STATE_ATTR`).
    pub mutates_state: bool,
    /// The signature: `[name, required, default repr]`, in order.
    signature: Vec<(String, bool, Option<String>)>,
}

impl Doc {
    /// The signature's parameters, each with whether it is required.
    pub fn signature(&self) -> Vec<(&str, bool)> {
        self.signature
            .iter()
            .map(|(name, required, _)| (name.as_str(), *required))
            .collect()
    }
}

#[derive(Deserialize)]
struct Docs {
    agent: Vec<Doc>,
    user: Vec<Doc>,
}

fn docs() -> &'static Docs {
    static DOCS: OnceLock<Docs> = OnceLock::new();
    DOCS.get_or_init(|| {
        serde_json::from_str(include_str!("../../discoverable.json"))
            .expect("discoverable.json is valid")
    })
}

/// The agent's discoverable tools, in the reference's order.
pub fn agent_docs() -> &'static [Doc] {
    &docs().agent
}

/// The user's discoverable tools, in the reference's order.
pub fn user_docs() -> &'static [Doc] {
    &docs().user
}

/// The bodies of the agent's discoverable tools.
const AGENT_BODIES: &[&[Body]] = &[
    disputes::TOOLS,
    credit::TOOLS,
    accounts::TOOLS,
    cards::TOOLS,
];

/// Agent tool `name`: its doc and body.
pub fn agent_tool(name: &str) -> Option<(&'static Doc, Run)> {
    tool_named(agent_docs(), AGENT_BODIES, name)
}

/// User tool `name`: its doc and body.
pub fn user_tool(name: &str) -> Option<(&'static Doc, Run)> {
    tool_named(user_docs(), &[user::TOOLS], name)
}

fn tool_named(docs: &'static [Doc], bodies: &[&[Body]], name: &str) -> Option<(&'static Doc, Run)> {
    let doc = docs.iter().find(|doc| doc.name == name)?;
    let body = bodies
        .iter()
        .flat_map(|tools| tools.iter())
        .find(|body| body.name == name)?;
    Some((doc, body.run))
}

/// `_parse_balance`: a number, or a string like `"$2,850.00"`; anything
/// else is 0.
pub fn parse_balance(value: &Value) -> Result<f64, String> {
    match value {
        Value::String(text) => float_from_str(&text.replace(['$', ','], "")),
        other => Ok(number(other).unwrap_or(0.0)),
    }
}

/// `_get_account_balance`: `current_holdings`, else `balance`, else 0.
pub fn account_balance(account: &Value) -> Result<f64, String> {
    match account
        .get("current_holdings")
        .or_else(|| account.get("balance"))
    {
        Some(value) => parse_balance(value),
        None => Ok(0.0),
    }
}

/// `record.get("status") in ("ACTIVE", "OPEN")`.
pub fn is_open(record: &Value) -> bool {
    matches!(
        record.get("status").and_then(Value::as_str),
        Some("ACTIVE" | "OPEN")
    )
}

/// `record.get(name)`, `None` (JSON null) when absent.
pub fn field<'r>(record: &'r Value, name: &str) -> &'r Value {
    record.get(name).unwrap_or(&Value::Null)
}

/// `key in records` then `records[key]` for an argument: its id and record,
/// `None` for a key no record has (any value that is no string), Python's
/// `TypeError` for an unhashable one.
pub fn find<'r>(records: &'r Records, key: &Value) -> Result<Option<(&'r str, &'r Value)>, Raised> {
    let key = dict_key(key).map_err(Raised::Type)?;
    Ok(key
        .and_then(|key| records.get_key_value(key))
        .map(|(id, record)| (id.as_str(), record)))
}

/// `value` if it is one of `options` (`value in options`).
pub fn one_of<'v>(value: &'v Value, options: &[&str]) -> Option<&'v str> {
    value.as_str().filter(|text| options.contains(text))
}

/// The reference's refusal of a value outside `options`:
/// `f"Error: Invalid {parameter}. Must be one of: {options}"`.
pub fn invalid_choice(parameter: &str, options: &[&str]) -> String {
    format!(
        "Error: Invalid {parameter}. Must be one of: {}",
        str_list(options)
    )
}

/// `query_database_tool(table, f'{{"{field}": "{value}"}}')`: the JSON built
/// by interpolation, unescaped, as the reference builds it.
pub fn query_by(data: &Data<'_>, table: &str, field: &str, value: &str) -> String {
    query_database_tool(data, table, &format!(r#"{{"{field}": "{value}"}}"#))
}

/// The reference's reading of a query's answer: records unless it says
/// "No results found" or "No records found".
pub fn shows_records(answer: &str) -> bool {
    !answer.contains("No results found") && !answer.contains("No records found")
}

/// What `for member in value` goes through: a dict's keys, a list's items,
/// a string's characters; the for-loop's `TypeError` (`'int' object is not
/// iterable`) for any other value.
pub fn members(value: &Value) -> Result<Vec<Value>, String> {
    match value {
        Value::Object(map) => Ok(map.keys().cloned().map(Value::String).collect()),
        Value::Array(items) => Ok(items.clone()),
        Value::String(text) => Ok(text.chars().map(|c| Value::String(c.into())).collect()),
        other => Err(format!("'{}' object is not iterable", type_name(other))),
    }
}

/// A body's outcome as `call_discoverable_agent_tool` answers it, for tests
/// that run bodies directly: a `TypeError` as its text, any other exception
/// `Err`.
#[cfg(test)]
pub fn as_agent_answers(outcome: Result<String, Raised>) -> Result<String, String> {
    match outcome {
        Ok(answer) => Ok(answer),
        Err(Raised::Type(type_error)) => Ok(crate::agent::invalid_arguments(&type_error)),
        Err(Raised::Other(error)) => Err(error),
    }
}

/// The reference database (`db.json` from the shared benchmark data) laid
/// out as the host stores it: each table one record of collection `db`.
#[cfg(test)]
pub fn reference_bank() -> forge_guest::MemoryStore {
    use forge_guest::Store;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/benchmarks/tau2-bench/banking_knowledge/db.json"
    );
    let text = std::fs::read_to_string(path).expect("the shared benchmark data");
    let Value::Object(tables) = serde_json::from_str(&text).expect("db.json is JSON") else {
        panic!("db.json is no object");
    };
    let mut store = forge_guest::MemoryStore::default();
    for name in crate::db::QUERYABLE {
        let empty = serde_json::json!({"data": {}, "notes": ""});
        let table = tables.get(*name).unwrap_or(&empty);
        store.put("db", name, &table.to_string()).expect("a table");
    }
    store
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `_parse_balance` reads a string as `float()` does, underscores
    /// between digits included (checked against Python).
    #[test]
    fn parses_balances_as_the_reference_does() {
        assert_eq!(parse_balance(&json!("$1_000.00")), Ok(1000.0));
        assert_eq!(parse_balance(&json!("$2,850.50")), Ok(2850.5));
        assert_eq!(parse_balance(&json!(true)), Ok(1.0));
        assert_eq!(parse_balance(&json!(null)), Ok(0.0));
        assert_eq!(
            parse_balance(&json!("1__0")),
            Err("could not convert string to float: '1__0'".to_owned())
        );
    }

    /// Every discoverable tool the reference has has a body here, and no body
    /// lacks its doc.
    #[test]
    fn every_tool_has_its_body_and_doc() {
        for (docs, bodies) in [
            (agent_docs(), AGENT_BODIES),
            (user_docs(), &[user::TOOLS][..]),
        ] {
            let documented: Vec<&str> = docs.iter().map(|doc| doc.name.as_str()).collect();
            let implemented: Vec<&str> = bodies
                .iter()
                .flat_map(|tools| tools.iter())
                .map(|body| body.name)
                .collect();
            let missing: Vec<&&str> = documented
                .iter()
                .filter(|name| !implemented.contains(name))
                .collect();
            let stray: Vec<&&str> = implemented
                .iter()
                .filter(|name| !documented.contains(name))
                .collect();
            assert!(
                missing.is_empty() && stray.is_empty(),
                "missing {missing:?}, stray {stray:?}"
            );
        }
    }
}
