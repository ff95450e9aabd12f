//! Tool arguments.
//!
//! The host validates arguments against the tool's schema before the call, so
//! these accessors mostly guard against schemas and code disagreeing.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The arguments object of a tool call.
pub struct Args(Map<String, Value>);

impl Args {
    pub fn parse(text: &str) -> Result<Self, String> {
        match serde_json::from_str(text) {
            Ok(Value::Object(map)) => Ok(Self(map)),
            Ok(_) => Err("arguments must be a JSON object".to_owned()),
            Err(err) => Err(format!("arguments are not valid JSON: {err}")),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|value| !value.is_null())
    }

    pub fn str(&self, name: &str) -> Result<&str, String> {
        self.get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("argument `{name}` must be a string"))
    }

    pub fn opt_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(Value::as_str)
    }

    pub fn i64(&self, name: &str) -> Result<i64, String> {
        self.get(name)
            .and_then(Value::as_i64)
            .ok_or_else(|| format!("argument `{name}` must be an integer"))
    }

    pub fn f64(&self, name: &str) -> Result<f64, String> {
        self.get(name)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("argument `{name}` must be a number"))
    }

    /// Deserializes argument `name` into `T`.
    pub fn parse_field<T: DeserializeOwned>(&self, name: &str) -> Result<T, String> {
        let value = self
            .get(name)
            .ok_or_else(|| format!("argument `{name}` is missing"))?;
        serde_json::from_value(value.clone()).map_err(|err| format!("argument `{name}`: {err}"))
    }
}
