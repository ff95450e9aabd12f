//! An in-memory [`Store`] and the bundle's files.

use std::collections::BTreeMap;
use std::path::Path;

use forge_guest::{Store, Value};

/// A [`Store`] held in memory, following the `forge:env/store` contract.
#[derive(Clone, Debug, Default)]
pub struct MemStore(BTreeMap<String, BTreeMap<String, String>>);

impl MemStore {
    /// The bundle's initial state.
    pub fn initial() -> Self {
        let Value::Object(collections) = bundle_json("initial_state.json") else {
            panic!("initial_state.json must be an object of collections");
        };
        let collections = collections
            .into_iter()
            .map(|(name, records)| {
                let Value::Object(records) = records else {
                    panic!("collection {name} must be an object of records");
                };
                let records = records
                    .into_iter()
                    .map(|(key, record)| (key, record.to_string()))
                    .collect();
                (name, records)
            })
            .collect();
        Self(collections)
    }

    /// The state as parsed records, so that comparisons ignore how a record's
    /// JSON happens to be spelled (`119.00` and `119.0` are the same price).
    pub fn snapshot(&self) -> BTreeMap<String, BTreeMap<String, Value>> {
        self.0
            .iter()
            .map(|(name, records)| {
                let records = records
                    .iter()
                    .map(|(key, text)| {
                        (
                            key.clone(),
                            serde_json::from_str(text).expect("records are JSON"),
                        )
                    })
                    .collect();
                (name.clone(), records)
            })
            .collect()
    }

    /// The record `key` of `collection`, parsed.
    pub fn record(&self, collection: &str, key: &str) -> Value {
        let text = self
            .get(collection, key)
            .unwrap_or_else(|| panic!("{collection}/{key} is missing"));
        serde_json::from_str(&text).expect("records are JSON")
    }
}

impl Store for MemStore {
    fn get(&self, collection: &str, key: &str) -> Option<String> {
        self.0.get(collection)?.get(key).cloned()
    }

    fn put(&mut self, collection: &str, key: &str, record: &str) -> Result<(), String> {
        serde_json::from_str::<Value>(record)
            .map_err(|err| format!("record is not JSON: {err}"))?;
        self.0
            .entry(collection.to_owned())
            .or_default()
            .insert(key.to_owned(), record.to_owned());
        Ok(())
    }

    fn remove(&mut self, collection: &str, key: &str) -> bool {
        self.0
            .get_mut(collection)
            .is_some_and(|records| records.remove(key).is_some())
    }

    fn keys(&self, collection: &str) -> Vec<String> {
        self.0
            .get(collection)
            .map(|records| records.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn fresh_key(&self, collection: &str, prefix: &str) -> String {
        let records = self.0.get(collection);
        let len = records.map_or(0, BTreeMap::len);
        (len + 1..)
            .map(|n| format!("{prefix}{n}"))
            .find(|key| records.is_none_or(|records| !records.contains_key(key)))
            .expect("some number is unused")
    }
}

/// A JSON file of `bundle/`.
pub fn bundle_json(name: &str) -> Value {
    let (path, text) = bundle_file(name);
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// A JSONL file of the bundle, one value per line.
pub fn bundle_jsonl(name: &str) -> Vec<Value> {
    let (path, text) = bundle_file(name);
    text.lines()
        .enumerate()
        .map(|(index, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("{} line {}: {err}", path.display(), index + 1))
        })
        .collect()
}

fn bundle_file(name: &str) -> (std::path::PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("bundle")
        .join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    (path, text)
}

/// Calls tool `name` with `args` on `store`; the result is parsed JSON.
pub fn call(store: &mut MemStore, name: &str, args: &Value) -> Result<Value, String> {
    forge_guest::call(forge_example_shop::TOOLS, store, name, &args.to_string())
        .map(|text| serde_json::from_str(&text).expect("tool results are JSON"))
}
