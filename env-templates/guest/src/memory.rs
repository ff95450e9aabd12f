//! A [`Store`] in memory, for running tools natively (tests, benchmarks).

use crate::Store;
use serde::de::IgnoredAny;
use std::collections::BTreeMap;

/// The host's state in memory: JSON records by collection and key, keys in
/// byte order, and fresh keys by the host's rule (the WIT `fresh-key`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MemoryStore {
    collections: BTreeMap<String, BTreeMap<String, String>>,
}

impl Store for MemoryStore {
    fn get(&self, collection: &str, key: &str) -> Option<String> {
        self.collections.get(collection)?.get(key).cloned()
    }

    fn put(&mut self, collection: &str, key: &str, record: &str) -> Result<(), String> {
        serde_json::from_str::<IgnoredAny>(record)
            .map_err(|err| format!("record {collection}/{key} is not valid JSON: {err}"))?;
        self.collections
            .entry(collection.to_owned())
            .or_default()
            .insert(key.to_owned(), record.to_owned());
        Ok(())
    }

    fn remove(&mut self, collection: &str, key: &str) -> bool {
        self.collections
            .get_mut(collection)
            .is_some_and(|records| records.remove(key).is_some())
    }

    fn keys(&self, collection: &str) -> Vec<String> {
        self.collections
            .get(collection)
            .map(|records| records.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// `prefix` + the smallest n >= (number of records + 1) whose key is unused.
    fn fresh_key(&self, collection: &str, prefix: &str) -> String {
        let records = self.collections.get(collection);
        let mut n = records.map_or(0, BTreeMap::len) + 1;
        loop {
            let key = format!("{prefix}{n}");
            if records.is_none_or(|records| !records.contains_key(&key)) {
                return key;
            }
            n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_keys_follow_the_hosts_rule() {
        let mut store = MemoryStore::default();
        for key in ["u1", "u3"] {
            store.put("users", key, "{}").unwrap();
        }
        assert_eq!(store.fresh_key("users", "u"), "u4");
        store.put("users", "u4", "{}").unwrap();
        assert!(store.remove("users", "u1"));
        assert_eq!(store.fresh_key("users", "u"), "u5");
        assert_eq!(store.fresh_key("orders", "o"), "o1");
        assert_eq!(store.keys("users"), ["u3", "u4"]);
        assert!(store.put("users", "u9", "{").is_err());
        assert_eq!(store.get("users", "u9"), None);
    }
}
