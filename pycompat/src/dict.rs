//! `addict.Dict.update`, with which τ²-bench merges a task's
//! `initialization_data` into a database.

use serde_json::{Map, Value};

/// `update` merged into `base` as `addict.Dict.update` merges: a dict into a
/// dict key by key, recursively; anything else replaced (a `base` that is no
/// dict becomes `update`).
pub fn dict_update(base: &mut Value, update: &Map<String, Value>) {
    let Value::Object(base) = base else {
        *base = Value::Object(update.clone());
        return;
    };
    for (key, value) in update {
        match (base.get_mut(key), value) {
            (Some(existing @ Value::Object(_)), Value::Object(update)) => {
                dict_update(existing, update);
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dicts_merge_recursively_and_the_rest_is_replaced() {
        let mut base = json!({"users": {"u1": {"name": "a", "tags": [1]}, "u2": {}}});
        let update = json!({"users": {"u1": {"tags": [2], "age": 3}}, "x": 1});
        dict_update(&mut base, update.as_object().unwrap());
        assert_eq!(
            base,
            json!({"users": {"u1": {"name": "a", "tags": [2], "age": 3}, "u2": {}}, "x": 1})
        );
        let mut scalar = json!(5);
        dict_update(&mut scalar, update.as_object().unwrap());
        assert_eq!(scalar, update);
    }
}
