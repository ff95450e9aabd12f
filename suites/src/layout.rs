//! Where a τ²-bench database lives in a Forge state.
//!
//! A Forge state is a set of collections of records. A τ² database is a
//! pydantic model whose top-level fields are either tables (`dict[id,
//! record]`: airline's `flights`, mock's `tasks`) or anything else (telecom's
//! `lines` list, the user's `device`). Tables become collections of their
//! own; every other field is one record of a collection named after the
//! database. Domains whose user has tools keep the user's database beside
//! the agent's, under its own names:
//!
//! | part | agent database | user database |
//! |---|---|---|
//! | table `t` | collection `t` | collection `user_db.t` |
//! | other field `f` | record `f` of collection `db` | record `f` of collection `user_db` |
//!
//! Collection [`SESSION`] holds what a toolkit object keeps beside its
//! database in the reference, and [`DOCUMENTS`] a knowledge base; they
//! belong to neither database.
//!
//! The tools see this layout through the store, and [`databases`] turns a
//! state back into the two databases the reference hashes.

use forge_runtime::State;
use serde_json::{Map, Value};

/// The collection of the agent database's fields that are not tables.
const AGENT_FIELDS: &str = "db";
/// The collection of the user database's fields that are not tables.
const USER_FIELDS: &str = "user_db";
/// The prefix of the user database's tables.
const USER_TABLE_PREFIX: &str = "user_db.";
/// The collection of what a toolkit keeps outside its database (which
/// discoverable tools the agent unlocked): part of the state, never of the
/// databases the reference hashes. The banking component writes it under
/// the same name (`suites/tau2-banking/src/agent.rs`).
pub const SESSION: &str = "session";
/// The collection of a knowledge base's documents, which the tools read and
/// neither database holds.
pub const DOCUMENTS: &str = "documents";

/// Which database a part belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Agent,
    User,
}

/// Adds `db` (a dumped database whose tables are the fields `tables`) to
/// `state`, a JSON object of collections.
pub fn store(
    state: &mut Map<String, Value>,
    side: Side,
    db: &Map<String, Value>,
    tables: &[String],
) {
    let (fields, prefix) = match side {
        Side::Agent => (AGENT_FIELDS, ""),
        Side::User => (USER_FIELDS, USER_TABLE_PREFIX),
    };
    for (field, value) in db {
        if tables.contains(field) {
            state.insert(format!("{prefix}{field}"), value.clone());
        } else {
            let records = state
                .entry(fields)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(records) = records {
                records.insert(field.clone(), value.clone());
            }
        }
    }
}

/// The agent's database and, when the state holds one, the user's.
pub fn databases(state: &State) -> (Value, Option<Value>) {
    let mut agent = Map::new();
    let mut user = Map::new();
    let mut has_user = false;
    for (name, collection) in state.collections() {
        if name == SESSION || name == DOCUMENTS {
            continue;
        }
        let records = || -> Map<String, Value> {
            collection
                .iter()
                .map(|(key, record)| (key.clone(), record.value().clone()))
                .collect()
        };
        if name == USER_FIELDS {
            has_user = true;
            user.extend(records());
        } else if let Some(table) = name.strip_prefix(USER_TABLE_PREFIX) {
            has_user = true;
            user.insert(table.to_owned(), Value::Object(records()));
        } else if name == AGENT_FIELDS {
            agent.extend(records());
        } else {
            agent.insert(name.clone(), Value::Object(records()));
        }
    }
    (
        Value::Object(agent),
        has_user.then_some(Value::Object(user)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn databases_come_back_as_they_were_stored() {
        let agent = json!({"plans": [{"id": 1}], "tasks": {"t1": {"id": "t1"}}});
        let user = json!({"device": {"on": true}, "notifications": {"n1": {"read": false}}});
        let mut state = Map::new();
        store(
            &mut state,
            Side::Agent,
            agent.as_object().unwrap(),
            &["tasks".into()],
        );
        store(
            &mut state,
            Side::User,
            user.as_object().unwrap(),
            &["notifications".into()],
        );
        assert_eq!(
            Value::Object(state.clone()),
            json!({
                "db": {"plans": [{"id": 1}]},
                "tasks": {"t1": {"id": "t1"}},
                "user_db": {"device": {"on": true}},
                "user_db.notifications": {"n1": {"read": false}},
            })
        );
        let state = State::from_json(&Value::Object(state)).unwrap();
        assert_eq!(databases(&state), (agent, Some(user)));
    }

    #[test]
    fn a_state_without_user_parts_has_no_user_database() {
        let state = State::from_json(&json!({"flights": {"f1": {}}})).unwrap();
        assert_eq!(databases(&state), (json!({"flights": {"f1": {}}}), None));
    }

    #[test]
    fn the_session_belongs_to_neither_database() {
        let state = State::from_json(&json!({
            "db": {"users": {"data": {}, "notes": ""}},
            "session": {"agent": {"unlocked": ["t"]}},
        }))
        .unwrap();
        assert_eq!(
            databases(&state),
            (json!({"users": {"data": {}, "notes": ""}}), None)
        );
    }
}
