//! Where two JSON documents differ, key by key: how a resumed evaluation or
//! training run names each setting that has changed since it began.

use serde_json::Value;
use std::collections::BTreeSet;

/// A value that differs: at `key`, a dotted path (`rl.lr`), `then` in the
/// first document, `now` in the second (`null` where one lacks the key).
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub key: String,
    pub then: Value,
    pub now: Value,
}

/// Every leaf at which `then` and `now` differ, in key order; objects are
/// compared key by key (an object beside nothing, leaf by leaf against
/// nothing: a setting of one run that another lacks), anything else as a
/// whole.
pub fn differences(then: &Value, now: &Value) -> Vec<Difference> {
    let mut found = Vec::new();
    walk("", then, now, &mut found);
    found
}

fn walk(at: &str, then: &Value, now: &Value, found: &mut Vec<Difference>) {
    let nothing = serde_json::Map::new();
    match (then, now) {
        (Value::Object(_), Value::Object(_) | Value::Null) | (Value::Null, Value::Object(_))
            if then.as_object().is_some_and(|fields| !fields.is_empty())
                || now.as_object().is_some_and(|fields| !fields.is_empty()) =>
        {
            let then = then.as_object().unwrap_or(&nothing);
            let now = now.as_object().unwrap_or(&nothing);
            let keys: BTreeSet<&String> = then.keys().chain(now.keys()).collect();
            for key in keys {
                let path = match at {
                    "" => key.clone(),
                    _ => format!("{at}.{key}"),
                };
                let (then, now) = (then.get(key), now.get(key));
                let null = &Value::Null;
                walk(&path, then.unwrap_or(null), now.unwrap_or(null), found);
            }
        }
        _ if then != now => found.push(Difference {
            key: at.to_owned(),
            then: then.clone(),
            now: now.clone(),
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_keys_are_named_by_their_path() {
        let then = json!({"seed": 0, "rl": {"lr": 1e-5, "steps": 4}, "gone": true, "model": null});
        let now =
            json!({"seed": 0, "rl": {"lr": 2e-5, "steps": 4}, "new": "x", "model": {"path": "m"}});
        let keys: Vec<String> = differences(&then, &now)
            .into_iter()
            .map(|difference| format!("{} {} {}", difference.key, difference.then, difference.now))
            .collect();
        assert_eq!(
            keys,
            [
                "gone true null",
                "model.path null \"m\"",
                "new null \"x\"",
                "rl.lr 0.00001 0.00002"
            ]
        );
        assert!(differences(&then, &then).is_empty());
    }
}
