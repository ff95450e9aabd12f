//! The [`Store`] backed by the host's `forge:env/store` imports.

use crate::Store;
use crate::bindings::forge::env::store;

/// The host-side state, reached through the component's imports. Only usable
/// inside a component instantiated by the Forge host.
pub struct HostStore;

impl Store for HostStore {
    fn get(&self, collection: &str, key: &str) -> Option<String> {
        store::get(collection, key)
    }

    fn put(&mut self, collection: &str, key: &str, record: &str) -> Result<(), String> {
        store::put(collection, key, record)
    }

    fn remove(&mut self, collection: &str, key: &str) -> bool {
        store::remove(collection, key)
    }

    fn keys(&self, collection: &str) -> Vec<String> {
        store::keys(collection)
    }

    fn fresh_key(&self, collection: &str, prefix: &str) -> String {
        store::fresh_key(collection, prefix)
    }
}
