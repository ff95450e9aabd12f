//! The reference's `TransactionalDB` and `db_query` as the tools see them.
//!
//! The database is a pydantic model of twenty-three tables, each a
//! `DatabaseTable` (`{"data": {id: record}, "notes": str}`). The host keeps
//! each table whole as one record of collection `db` (its key the field
//! name), so that a table's records stay in insertion order: the reference's
//! listings (`query_database_tool`, the transaction histories) show them in
//! that order, which the host's key order (bytes) would not keep.

use crate::py::py_cmp;
use forge_pycompat::dict_update;
use forge_tau_guest::{Data, py_eq, py_str};
use serde_json::{Map, Value};

/// The collection holding the tables.
const TABLES: &str = "db";

/// The tables `db_query._load_databases` offers `query_database_tool`, in its
/// order (the error for an unknown table lists them so).
pub const QUERYABLE: &[&str] = &[
    "users",
    "accounts",
    "referrals",
    "credit_card_applications",
    "user_discoverable_tools",
    "user_discoverable_tool_calls",
    "agent_discoverable_tools",
    "task_config",
    "verification_history",
    "credit_card_transaction_history",
    "cash_back_disputes",
    "bank_account_transaction_history",
    "credit_card_accounts",
    "human_transfer_requests",
    "transaction_disputes",
    "credit_card_orders",
    "credit_card_closure_reasons",
    "credit_card_account_flags",
    "debit_cards",
    "debit_card_orders",
    "debit_card_disputes",
    "credit_limit_increase_requests",
    "payment_history",
];

/// A table's records (`db.<table>.data`), in insertion order.
pub type Records = Map<String, Value>;

/// The tables of the database, as `db.<table>.data` reaches them.
pub trait Tables {
    /// `db.<table>.data`: every record, in insertion order.
    fn table(&self, table: &str) -> Result<Records, String>;

    /// Replaces `db.<table>.data` (its notes are kept).
    fn save(&mut self, table: &str, records: Records) -> Result<(), String>;

    /// `db.<table>.data.get(id)`.
    fn record(&self, table: &str, id: &str) -> Result<Option<Value>, String> {
        Ok(self.table(table)?.shift_remove(id))
    }

    /// `db_query.add_to_db`: adds `record` under `id` unless the id is taken
    /// (then `false`, and nothing changes).
    fn add(&mut self, table: &str, id: &str, record: Value) -> Result<bool, String> {
        let mut records = self.table(table)?;
        if records.contains_key(id) {
            return Ok(false);
        }
        records.insert(id.to_owned(), record);
        self.save(table, records)?;
        Ok(true)
    }

    /// `db_query.update_record_in_db`: sets `updates` on record `id` (new
    /// fields go last, as in a dict) and answers the updated record, or
    /// `None` (and nothing changes) when there is no such record.
    fn update(
        &mut self,
        table: &str,
        id: &str,
        updates: Vec<(&str, Value)>,
    ) -> Result<Option<Value>, String> {
        let mut records = self.table(table)?;
        let Some(record) = records.get_mut(id) else {
            return Ok(None);
        };
        let Value::Object(fields) = record else {
            return Err(format!("record {table}/{id} is not a dict"));
        };
        for (field, value) in updates {
            fields.insert(field.to_owned(), value);
        }
        let updated = record.clone();
        self.save(table, records)?;
        Ok(Some(updated))
    }

    /// `db_query.query_db(table, return_ids=True, **constraints)`: the
    /// records meeting every constraint, with their ids, in insertion order.
    fn query(&self, table: &str, constraints: &Map<String, Value>) -> Result<Records, String> {
        let mut records = self.table(table)?;
        records.retain(|_, record| matches(record, constraints));
        Ok(records)
    }
}

impl Tables for Data<'_> {
    fn table(&self, table: &str) -> Result<Records, String> {
        let Some(Value::Object(mut whole)) = self.get(TABLES, table)? else {
            return Err(format!("the database has no table '{table}'"));
        };
        match whole.shift_remove("data") {
            Some(Value::Object(records)) => Ok(records),
            _ => Err(format!("table '{table}' has no data dict")),
        }
    }

    fn save(&mut self, table: &str, records: Records) -> Result<(), String> {
        let notes = match self.get(TABLES, table)? {
            Some(Value::Object(mut whole)) => whole.shift_remove("notes"),
            _ => None,
        };
        let mut whole = Map::new();
        whole.insert("data".to_owned(), Value::Object(records));
        whole.insert(
            "notes".to_owned(),
            notes.unwrap_or_else(|| Value::String(String::new())),
        );
        self.put(TABLES, table, &Value::Object(whole))
    }
}

/// `ToolKitBase.update_db(update_data)`: `update` (tables of changes, as a
/// task's `initialization_data.agent_data` gives them) merged into the
/// database as `addict.Dict.update` merges: a dict into a dict key by key,
/// recursively; anything else replaced. The host has checked the result
/// against the model before the task runs.
pub fn update_db(data: &mut Data<'_>, update: &Map<String, Value>) -> Result<(), String> {
    for (table, change) in update {
        let Some(mut whole) = data.get(TABLES, table)? else {
            return Err(format!("the database has no table '{table}'"));
        };
        match change {
            Value::Object(change) => dict_update(&mut whole, change),
            other => whole = other.clone(),
        }
        data.put(TABLES, table, &whole)?;
    }
    Ok(())
}

/// `db_query.query_database_tool(database_name, constraints)`: the matching
/// records listed as text, or the reference's sentence for an unknown table,
/// bad JSON or no match.
pub fn query_database_tool(data: &Data<'_>, database_name: &str, constraints: &str) -> String {
    if !QUERYABLE.contains(&database_name) {
        let available: Vec<Value> = QUERYABLE
            .iter()
            .map(|name| Value::String((*name).to_owned()))
            .collect();
        return format!(
            "Error: Database '{database_name}' not found. Available: {}",
            py_str(&Value::Array(available))
        );
    }
    let constraints = if constraints.is_empty() {
        Map::new()
    } else {
        match serde_json::from_str::<Value>(constraints) {
            Ok(Value::Object(map)) => map,
            // `query_db(**constraints)` with a list or a scalar: Python's TypeError.
            Ok(other) => {
                return format!(
                    "Error querying database: tau2.domains.banking_knowledge.db_query.query_db() argument after ** must be a mapping, not {}",
                    forge_tau_guest::type_name(&other)
                );
            }
            Err(err) => return format!("Error: Invalid JSON: {err}"),
        }
    };
    let results = match data.query(database_name, &constraints) {
        Ok(results) => results,
        Err(err) => return format!("Error querying database: {err}"),
    };
    if results.is_empty() {
        return format!("No records found in '{database_name}'.");
    }
    list_records(database_name, results.iter())
}

/// Records of `table` listed as `query_database_tool` lists them: a count,
/// then each numbered with its id and its fields one a line.
pub fn list_records<'r>(
    table: &str,
    records: impl ExactSizeIterator<Item = (&'r String, &'r Value)>,
) -> String {
    let mut lines = vec![format!("Found {} record(s) in '{table}':\n", records.len())];
    for (index, (id, record)) in records.enumerate() {
        lines.push(format!("{}. Record ID: {id}", index + 1));
        if let Value::Object(fields) = record {
            for (field, value) in fields {
                lines.push(format!("   {field}: {}", py_str(value)));
            }
        }
        lines.push(String::new());
    }
    lines.join("\n")
}

/// `db_query._record_matches`: every `field[__op]` constraint holds, a
/// comparison Python refuses (`TypeError`) counting as no match.
fn matches(record: &Value, constraints: &Map<String, Value>) -> bool {
    constraints.iter().all(|(key, expected)| {
        let (field, op) = match key.rsplit_once("__") {
            Some((field, op)) => (field, op),
            None => (key.as_str(), "eq"),
        };
        let actual = record.get(field).unwrap_or(&Value::Null);
        compare(op, actual, expected).unwrap_or(false)
    })
}

/// `db_query._get_comparison_op(op)(actual, expected)`; `None` where Python
/// raises a `TypeError`. An unknown operator is `eq`, as in the reference.
fn compare(op: &str, actual: &Value, expected: &Value) -> Option<bool> {
    use std::cmp::Ordering;
    let order = || py_cmp(actual, expected);
    match op {
        "ne" => Some(!py_eq(actual, expected)),
        "gt" => order().map(|o| o == Ordering::Greater),
        "gte" => order().map(|o| o != Ordering::Less),
        "lt" => order().map(|o| o == Ordering::Less),
        "lte" => order().map(|o| o != Ordering::Greater),
        "contains" => match actual {
            Value::Null => Some(false),
            _ => contains(actual, expected),
        },
        "startswith" => Some(!actual.is_null() && py_str(actual).starts_with(&py_str(expected))),
        "endswith" => Some(!actual.is_null() && py_str(actual).ends_with(&py_str(expected))),
        "in" => contains(expected, actual),
        "nin" => contains(expected, actual).map(|found| !found),
        _ => Some(py_eq(actual, expected)),
    }
}

/// `item in container`, `None` where Python raises a `TypeError`.
fn contains(container: &Value, item: &Value) -> Option<bool> {
    match (container, item) {
        (Value::String(text), Value::String(part)) => Some(text.contains(part.as_str())),
        (Value::String(_), _) => None,
        (Value::Array(items), _) => Some(items.iter().any(|each| py_eq(each, item))),
        (Value::Object(map), Value::String(key)) => Some(map.contains_key(key)),
        (Value::Object(_), Value::Array(_) | Value::Object(_)) => None,
        (Value::Object(_), _) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_guest::{MemoryStore, Store};
    use serde_json::json;

    fn bank() -> MemoryStore {
        let mut store = MemoryStore::default();
        let users = json!({"data": {
            "u2": {"user_id": "u2", "name": "Bo", "age": 40},
            "u1": {"user_id": "u1", "name": "Al", "age": 30},
        }, "notes": "people"});
        store.put("db", "users", &users.to_string()).unwrap();
        store
    }

    #[test]
    fn tables_keep_insertion_order_and_notes() {
        let mut store = bank();
        let mut data = Data::new(&mut store);
        let keys: Vec<String> = data.table("users").unwrap().keys().cloned().collect();
        assert_eq!(keys, ["u2", "u1"]);
        assert!(data.add("users", "u0", json!({"user_id": "u0"})).unwrap());
        assert!(!data.add("users", "u0", json!({})).unwrap());
        let updated = data.update("users", "u1", vec![("email", json!("a@b"))]);
        assert_eq!(
            updated.unwrap().unwrap(),
            json!({"user_id": "u1", "name": "Al", "age": 30, "email": "a@b"})
        );
        assert_eq!(data.update("users", "nope", vec![]).unwrap(), None);
        let keys: Vec<String> = data.table("users").unwrap().keys().cloned().collect();
        assert_eq!(keys, ["u2", "u1", "u0"]);
        let whole: Value = serde_json::from_str(&store.get("db", "users").unwrap()).unwrap();
        assert_eq!(whole["notes"], "people");
    }

    #[test]
    fn updates_merge_into_tables() {
        let mut store = bank();
        let mut data = Data::new(&mut store);
        let update = json!({"users": {"data": {
            "u1": {"age": 31, "tags": {"vip": true}},
            "u3": {"user_id": "u3"},
        }}});
        update_db(&mut data, update.as_object().unwrap()).unwrap();
        let users = data.table("users").unwrap();
        assert_eq!(
            users["u1"],
            json!({"user_id": "u1", "name": "Al", "age": 31, "tags": {"vip": true}})
        );
        assert_eq!(users.keys().collect::<Vec<_>>(), ["u2", "u1", "u3"]);
        let unknown = json!({"nope": {}});
        assert!(update_db(&mut data, unknown.as_object().unwrap()).is_err());
    }

    #[test]
    fn queries_list_records_as_the_reference_does() {
        let mut store = bank();
        let data = Data::new(&mut store);
        assert_eq!(
            query_database_tool(&data, "users", r#"{"age__gte": 35}"#),
            "Found 1 record(s) in 'users':\n\n1. Record ID: u2\n   user_id: u2\n   name: Bo\n   age: 40\n"
        );
        assert_eq!(
            query_database_tool(&data, "users", r#"{"name": "Cy"}"#),
            "No records found in 'users'."
        );
        assert_eq!(
            query_database_tool(
                &data,
                "users",
                r#"{"name__in": ["Al", "Cy"], "age__gt": "x"}"#
            ),
            "No records found in 'users'."
        );
        assert!(
            query_database_tool(&data, "nope", "{}")
                .starts_with("Error: Database 'nope' not found. Available: ['users', 'accounts', ")
        );
    }
}
