//! Building blocks for tools generated from domain docs.
//!
//! `forge synth` writes each tool as a short sequence of these calls — load
//! the target record, check preconditions, apply effects, write back — so the
//! generated code stays small and declarative and the logic lives (and is
//! tested) here. Every check runs before the first write, so a failed
//! precondition changes nothing even before the host's transaction applies.

use crate::{Args, Db, ToolResult};
use serde_json::{Map, Value};

/// A record as a JSON object.
pub type Record = Map<String, Value>;

/// Parses a constant embedded in generated code.
pub fn constant(json: &str) -> Value {
    serde_json::from_str(json).expect("generated constants are valid JSON")
}

/// The record `key` of `collection`, or "<noun> <key> not found".
pub fn load(db: &Db<'_>, collection: &str, noun: &str, key: &str) -> Result<Record, String> {
    db.require(collection, key, noun)
}

/// The string value of reference field `field` of `record`.
pub fn reference(record: &Record, field: &str) -> Result<String, String> {
    record
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("the record has no reference `{field}`"))
}

/// Fails unless `record[field] <op> value`, naming the rule and the value found.
pub fn check(
    record: &Record,
    what: &str,
    field: &str,
    op: &str,
    value: &Value,
) -> Result<(), String> {
    let actual = record.get(field).unwrap_or(&Value::Null);
    let holds = match op {
        "==" => actual == value,
        "!=" => actual != value,
        _ => match (actual.as_f64(), value.as_f64()) {
            (Some(actual), Some(bound)) => match op {
                ">" => actual > bound,
                ">=" => actual >= bound,
                "<" => actual < bound,
                "<=" => actual <= bound,
                _ => false,
            },
            _ => false,
        },
    };
    if holds {
        Ok(())
    } else {
        Err(format!(
            "{what}: {field} must be {op} {value}, but it is {actual}"
        ))
    }
}

/// Adds `delta` to a numeric field, keeping integers integral and money to cents.
pub fn add(record: &mut Record, field: &str, delta: f64) -> Result<(), String> {
    let current = record.get(field).cloned().unwrap_or(Value::from(0));
    let updated = match current {
        Value::Number(number) if number.is_i64() && delta.fract() == 0.0 => {
            Value::from(number.as_i64().unwrap_or(0) + delta as i64)
        }
        Value::Number(number) => {
            Value::from(((number.as_f64().unwrap_or(0.0) + delta) * 100.0).round() / 100.0)
        }
        other => return Err(format!("{field} is {other}, not a number")),
    };
    record.insert(field.to_owned(), updated);
    Ok(())
}

/// Copies argument `name` (when given) into `record`.
pub fn set_from_args(record: &mut Record, args: &Args, name: &str) {
    if let Some(value) = args.get(name) {
        record.insert(name.to_owned(), value.clone());
    }
}

/// The first record of `collection` whose `field` equals `value`, as `{key_field: key}`.
pub fn find(
    db: &Db<'_>,
    collection: &str,
    noun: &str,
    key_field: &str,
    field: &str,
    value: &Value,
) -> ToolResult {
    for (key, record) in db.all::<Record>(collection)? {
        if record.get(field) == Some(value) {
            let mut found = Map::new();
            found.insert(key_field.to_owned(), Value::String(key));
            return Ok(Value::Object(found));
        }
    }
    Err(format!("no {noun} with {field} {value}"))
}

/// The records of `collection` matching every given filter, in key order.
pub fn list(db: &Db<'_>, collection: &str, args: &Args, filters: &[&str]) -> ToolResult {
    let wanted: Vec<(&str, &Value)> = filters
        .iter()
        .filter_map(|name| args.get(name).map(|value| (*name, value)))
        .collect();
    let records = db
        .all::<Record>(collection)?
        .into_iter()
        .map(|(_, record)| record)
        .filter(|record| {
            wanted
                .iter()
                .all(|(name, value)| record.get(*name) == Some(value))
        })
        .map(Value::Object)
        .collect();
    Ok(Value::Array(records))
}

/// The answer of a delete: `{"deleted": true, key_field: key}`.
pub fn deleted(key_field: &str, key: &str) -> Value {
    let mut answer = Map::new();
    answer.insert("deleted".to_owned(), Value::Bool(true));
    answer.insert(key_field.to_owned(), Value::String(key.to_owned()));
    Value::Object(answer)
}
