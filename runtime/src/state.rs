//! The environment state: named collections of JSON records keyed by id.
//!
//! The state is a persistent map (structurally shared), so cloning it is O(1):
//! resetting an episode to the initial state, forking it for a transaction or
//! keeping a snapshot costs nothing regardless of the state's size. Every record
//! and collection memoises its digest, so the state digest after a step costs
//! only the collections that step changed.

use crate::canonical;
use imbl::OrdMap;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

/// One JSON record, immutable once stored.
#[derive(Debug)]
struct RecordData {
    /// Compact JSON text, handed to tools as is.
    text: Arc<str>,
    value: Value,
    digest: OnceLock<[u8; 32]>,
}

/// A shared, immutable record.
#[derive(Debug, Clone)]
pub struct Record(Arc<RecordData>);

impl Record {
    /// A record from JSON text; errors when the text is not JSON.
    pub fn from_text(text: &str) -> Result<Self, serde_json::Error> {
        let value = serde_json::from_str(text)?;
        Ok(Self::from_parts(text.into(), value))
    }

    pub fn from_value(value: Value) -> Self {
        Self::from_parts(value.to_string().into(), value)
    }

    fn from_parts(text: Arc<str>, value: Value) -> Self {
        Self(Arc::new(RecordData {
            text,
            value,
            digest: OnceLock::new(),
        }))
    }

    pub fn text(&self) -> &Arc<str> {
        &self.0.text
    }

    pub fn value(&self) -> &Value {
        &self.0.value
    }

    /// sha256 of the record's canonical JSON.
    pub(crate) fn digest(&self) -> &[u8; 32] {
        self.0
            .digest
            .get_or_init(|| Sha256::digest(canonical::to_string(&self.0.value).as_bytes()).into())
    }
}

#[derive(Debug, Default)]
struct CollectionData {
    records: OrdMap<String, Record>,
    digest: OnceLock<[u8; 32]>,
}

/// A collection of records keyed by id, in key order.
#[derive(Debug, Clone, Default)]
pub struct Collection(Arc<CollectionData>);

impl Collection {
    fn with_records(records: OrdMap<String, Record>) -> Self {
        Self(Arc::new(CollectionData {
            records,
            digest: OnceLock::new(),
        }))
    }

    pub fn get(&self, key: &str) -> Option<&Record> {
        self.0.records.get(key)
    }

    pub fn len(&self) -> usize {
        self.0.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.records.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Record)> {
        self.0.records.iter()
    }

    fn digest(&self) -> &[u8; 32] {
        self.0.digest.get_or_init(|| {
            let mut hasher = Sha256::new();
            for (key, record) in &self.0.records {
                hasher.update((key.len() as u64).to_le_bytes());
                hasher.update(key.as_bytes());
                hasher.update(record.digest());
            }
            hasher.finalize().into()
        })
    }
}

/// The whole environment state. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct State {
    collections: OrdMap<String, Collection>,
}

/// Why a JSON document is not a state.
#[derive(Debug, thiserror::Error)]
pub enum StateShapeError {
    #[error("the state must be a JSON object of collections")]
    NotAnObject,
    #[error("collection `{0}` must be a JSON object of records keyed by id")]
    CollectionNotAnObject(String),
}

impl State {
    /// A state from `{"collection": {"key": record, …}, …}`.
    pub fn from_json(value: &Value) -> Result<Self, StateShapeError> {
        let Value::Object(collections) = value else {
            return Err(StateShapeError::NotAnObject);
        };
        let mut state = Self::default();
        for (name, records) in collections {
            let Value::Object(records) = records else {
                return Err(StateShapeError::CollectionNotAnObject(name.clone()));
            };
            let records = records
                .iter()
                .map(|(key, record)| (key.clone(), Record::from_value(record.clone())))
                .collect();
            state
                .collections
                .insert(name.clone(), Collection::with_records(records));
        }
        Ok(state)
    }

    /// The state as `{"collection": {"key": record}}`.
    pub fn to_json(&self) -> Value {
        let collections = self
            .collections
            .iter()
            .map(|(name, collection)| {
                let records: Map<String, Value> = collection
                    .iter()
                    .map(|(key, record)| (key.clone(), record.value().clone()))
                    .collect();
                (name.clone(), Value::Object(records))
            })
            .collect();
        Value::Object(collections)
    }

    pub fn collection(&self, name: &str) -> Option<&Collection> {
        self.collections.get(name)
    }

    pub fn collections(&self) -> impl Iterator<Item = (&String, &Collection)> {
        self.collections.iter()
    }

    pub fn get(&self, collection: &str, key: &str) -> Option<&Record> {
        self.collections.get(collection)?.get(key)
    }

    /// Inserts or replaces a record, creating the collection if needed.
    pub fn put(&mut self, collection: &str, key: &str, record: Record) {
        let mut records = self
            .collections
            .get(collection)
            .map(|existing| existing.0.records.clone())
            .unwrap_or_default();
        records.insert(key.to_owned(), record);
        self.collections
            .insert(collection.to_owned(), Collection::with_records(records));
    }

    /// Removes a record; true when it existed. An emptied collection stays, empty.
    pub fn remove(&mut self, collection: &str, key: &str) -> bool {
        let Some(existing) = self.collections.get(collection) else {
            return false;
        };
        if existing.get(key).is_none() {
            return false;
        }
        let mut records = existing.0.records.clone();
        records.remove(key);
        self.collections
            .insert(collection.to_owned(), Collection::with_records(records));
        true
    }

    /// The keys of a collection in ascending byte order.
    pub fn keys(&self, collection: &str) -> Vec<String> {
        self.collections
            .get(collection)
            .map(|records| records.0.records.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// `prefix` + the smallest n >= len + 1 whose key is unused: deterministic,
    /// derived from the state alone, and readable (`o15` after 14 orders).
    pub fn fresh_key(&self, collection: &str, prefix: &str) -> String {
        let taken = self.collections.get(collection);
        let mut n = taken.map_or(0, Collection::len) + 1;
        loop {
            let key = format!("{prefix}{n}");
            if taken.is_none_or(|records| records.get(&key).is_none()) {
                return key;
            }
            n += 1;
        }
    }

    /// A structural digest of the state, recorded after every tool step. Equal
    /// states have equal digests; it costs only the collections changed since
    /// the last digest. (The Python-compatible hash is [`State::sha256`].)
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        for (name, collection) in &self.collections {
            hasher.update((name.len() as u64).to_le_bytes());
            hasher.update(name.as_bytes());
            hasher.update(collection.digest());
        }
        canonical::hex(&hasher.finalize())
    }

    /// (collection, key) of every record that differs between two states
    /// (present in one only, or different). Collections and records shared
    /// between the two (the usual case: an episode changes a few records of a
    /// large state) are skipped by pointer or memoised digest, so this costs
    /// the records changed, not the size of the state.
    pub fn changed_records(&self, other: &State) -> BTreeSet<(String, String)> {
        let mut changed = BTreeSet::new();
        let names: BTreeSet<&String> = self
            .collections
            .keys()
            .chain(other.collections.keys())
            .collect();
        for name in names {
            let (a, b) = (self.collections.get(name), other.collections.get(name));
            if let (Some(a), Some(b)) = (a, b)
                && (Arc::ptr_eq(&a.0, &b.0) || a.digest() == b.digest())
            {
                continue;
            }
            let keys: BTreeSet<&String> = a
                .into_iter()
                .chain(b)
                .flat_map(|c| c.0.records.keys())
                .collect();
            for key in keys {
                if !same_record(a.and_then(|c| c.get(key)), b.and_then(|c| c.get(key))) {
                    changed.insert((name.clone(), key.clone()));
                }
            }
        }
        changed
    }

    /// Whether the record `key` of `collection` is the same in both states
    /// (or absent from both).
    pub fn same_record(&self, other: &State, collection: &str, key: &str) -> bool {
        same_record(self.get(collection, key), other.get(collection, key))
    }

    /// The canonical JSON text of the state (see [`canonical`]).
    pub fn canonical_json(&self) -> String {
        let mut out = String::from("{");
        for (index, (name, collection)) in self.collections.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            canonical::write_str(&mut out, name);
            out.push_str(":{");
            for (index, (key, record)) in collection.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                canonical::write_str(&mut out, key);
                out.push(':');
                canonical::write_value(&mut out, record.value());
            }
            out.push('}');
        }
        out.push('}');
        out
    }

    /// sha256 of the state's canonical JSON: the same hex digest Python gets from
    /// `sha256(json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False))`.
    pub fn sha256(&self) -> String {
        canonical::hex(&Sha256::digest(self.canonical_json().as_bytes()))
    }
}

/// Whether two (possibly absent) records are equal: the same allocation, or
/// equal memoised digests.
fn same_record(a: Option<&Record>, b: Option<&Record>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(&a.0, &b.0) || a.digest() == b.digest(),
        (None, None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> State {
        State::from_json(&json!({
            "users": {"u2": {"name": "Bo", "balance": 1.5}, "u1": {"name": "Al", "balance": 10.0}},
            "orders": {}
        }))
        .unwrap()
    }

    #[test]
    fn canonical_json_matches_the_generic_writer() {
        let state = sample();
        assert_eq!(
            state.canonical_json(),
            canonical::to_string(&state.to_json())
        );
        assert_eq!(
            state.canonical_json(),
            r#"{"orders":{},"users":{"u1":{"balance":10.0,"name":"Al"},"u2":{"balance":1.5,"name":"Bo"}}}"#
        );
    }

    #[test]
    fn clones_are_independent_snapshots() {
        let initial = sample();
        let mut fork = initial.clone();
        fork.put("users", "u3", Record::from_value(json!({"name": "Cy"})));
        assert!(fork.remove("users", "u1"));
        assert!(initial.get("users", "u1").is_some());
        assert!(initial.get("users", "u3").is_none());
        assert_ne!(initial.digest(), fork.digest());
        assert_eq!(initial.digest(), sample().digest());
    }

    #[test]
    fn digest_tracks_content_not_history() {
        let mut state = sample();
        let before = state.digest();
        let old = state.get("users", "u1").unwrap().clone();
        state.put(
            "users",
            "u1",
            Record::from_value(json!({"name": "Changed"})),
        );
        assert_ne!(state.digest(), before);
        state.put("users", "u1", old);
        assert_eq!(state.digest(), before);
    }

    #[test]
    fn changed_records_are_the_ones_that_differ() {
        let initial = sample();
        let mut reached = initial.clone();
        reached.put(
            "users",
            "u2",
            Record::from_value(json!({"name": "Bo", "balance": 2.5})),
        );
        reached.put("orders", "o1", Record::from_value(json!({})));
        // An equal record written again is not a change.
        reached.put(
            "users",
            "u1",
            Record::from_value(json!({"name": "Al", "balance": 10.0})),
        );
        let changed: Vec<(String, String)> =
            initial.changed_records(&reached).into_iter().collect();
        assert_eq!(
            changed,
            vec![
                ("orders".into(), "o1".into()),
                ("users".into(), "u2".into())
            ]
        );
        assert!(initial.same_record(&reached, "users", "u1"));
        assert!(!initial.same_record(&reached, "orders", "o1"));
        assert!(initial.changed_records(&initial.clone()).is_empty());
    }

    #[test]
    fn fresh_keys_skip_taken_ones() {
        let mut state = sample();
        assert_eq!(state.fresh_key("users", "u"), "u3");
        state.put("users", "u3", Record::from_value(json!({})));
        assert_eq!(state.fresh_key("users", "u"), "u4");
        assert_eq!(state.fresh_key("orders", "o"), "o1");
        assert_eq!(state.fresh_key("missing", "m"), "m1");
    }

    #[test]
    fn malformed_states_are_named() {
        assert!(matches!(
            State::from_json(&json!([])),
            Err(StateShapeError::NotAnObject)
        ));
        let err = State::from_json(&json!({"users": [1]})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "collection `users` must be a JSON object of records keyed by id"
        );
    }
}
