//! Typed access to the environment state.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The raw state operations of the `forge:env/store` interface.
pub trait Store {
    fn get(&self, collection: &str, key: &str) -> Option<String>;
    fn put(&mut self, collection: &str, key: &str, record: &str) -> Result<(), String>;
    fn remove(&mut self, collection: &str, key: &str) -> bool;
    fn keys(&self, collection: &str) -> Vec<String>;
    fn fresh_key(&self, collection: &str, prefix: &str) -> String;
}

/// Typed records over a [`Store`]. Errors are strings because they end up as the
/// tool's answer to the agent.
pub struct Db<'a> {
    store: &'a mut dyn Store,
}

impl<'a> Db<'a> {
    pub fn new(store: &'a mut dyn Store) -> Self {
        Self { store }
    }

    /// The record `key` of `collection`, if present.
    pub fn get<T: DeserializeOwned>(
        &self,
        collection: &str,
        key: &str,
    ) -> Result<Option<T>, String> {
        self.store
            .get(collection, key)
            .map(|text| {
                serde_json::from_str(&text)
                    .map_err(|err| format!("record {collection}/{key} is malformed: {err}"))
            })
            .transpose()
    }

    /// The record `key` of `collection`, or `"<what> <key> not found"`.
    pub fn require<T: DeserializeOwned>(
        &self,
        collection: &str,
        key: &str,
        what: &str,
    ) -> Result<T, String> {
        self.get(collection, key)?
            .ok_or_else(|| format!("{what} {key} not found"))
    }

    /// Inserts or replaces a record.
    pub fn put<T: Serialize>(
        &mut self,
        collection: &str,
        key: &str,
        record: &T,
    ) -> Result<(), String> {
        let text = serde_json::to_string(record).map_err(|err| err.to_string())?;
        self.store.put(collection, key, &text)
    }

    pub fn remove(&mut self, collection: &str, key: &str) -> bool {
        self.store.remove(collection, key)
    }

    pub fn keys(&self, collection: &str) -> Vec<String> {
        self.store.keys(collection)
    }

    /// All records of `collection` in key order.
    pub fn all<T: DeserializeOwned>(&self, collection: &str) -> Result<Vec<(String, T)>, String> {
        self.keys(collection)
            .into_iter()
            .filter_map(|key| match self.get(collection, &key) {
                Ok(Some(record)) => Some(Ok((key, record))),
                Ok(None) => None,
                Err(err) => Some(Err(err)),
            })
            .collect()
    }

    /// A fresh key for a new record (see the WIT `fresh-key`).
    pub fn fresh_key(&self, collection: &str, prefix: &str) -> String {
        self.store.fresh_key(collection, prefix)
    }
}
