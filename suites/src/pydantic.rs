//! Pydantic's `Model.model_validate(data).model_dump()`, driven by the
//! model's JSON schema (`Model.model_json_schema()`).
//!
//! τ²-bench keeps its databases as pydantic models, and both its tool outputs
//! (`json.dumps(model.model_dump())`) and its database hash see the dumped
//! form, not the file: fields come in the model's order, optional fields the
//! file leaves out are dumped with their default (`null`), an `int` given to a
//! `float` field becomes a float (and an integral float given to an `int`
//! field an int), unknown fields are dropped (`extra="ignore"`, refused where
//! the schema says `additionalProperties: false`), and a union picks one
//! variant. Loading a database through [`Schema::dump`] gives the records
//! exactly as the reference holds them.
//!
//! Supported schema subset, which is what pydantic emits for these models:
//! `$ref` into `$defs`, `anyOf` (unions and `Optional`), `type` (`object`
//! with `properties` = a model, with `additionalProperties` = a dict; `array`
//! with `items`; `string`, `integer`, `number`, `boolean`, `null`), `const`,
//! `enum`, `default`, `required`, `propertyNames`, and `format: date-time`
//! (dumped as `str(datetime)` writes it).

use anyhow::{Context, Result};
use serde_json::{Map, Number, Value};
use std::fmt;

/// Why a value does not fit, and where: the path is built from the inside
/// out as the error travels up.
struct Invalid {
    path: Vec<String>,
    message: String,
}

impl Invalid {
    fn new(message: String) -> Self {
        Self {
            path: Vec::new(),
            message,
        }
    }

    /// The same error one level further out, under `segment`.
    fn under(mut self, segment: &str) -> Self {
        self.path.push(segment.to_owned());
        self
    }
}

impl From<String> for Invalid {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for Invalid {
    fn from(message: &str) -> Self {
        Self::new(message.to_owned())
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path: Vec<&str> = self.path.iter().rev().map(String::as_str).collect();
        match path.is_empty() {
            true => f.write_str(&self.message),
            false => write!(f, "{}: {}", path.join("."), self.message),
        }
    }
}

/// A model's JSON schema.
pub struct Schema {
    root: Value,
}

/// Pydantic's two validation modes: a union tries every variant strictly
/// (no conversions) before it tries them again leniently.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Strict,
    Lax,
}

impl Schema {
    /// Parses a schema as `model_json_schema()` writes it.
    pub fn parse(text: &str) -> Result<Self> {
        let root: Value = serde_json::from_str(text).context("the model schema is not JSON")?;
        Ok(Self { root })
    }

    /// `model_validate(value).model_dump()`; an error names the path of the
    /// offending field (`users.mia_li_3668.address.zip: …`).
    pub fn dump(&self, value: &Value) -> Result<Value, String> {
        self.validate(&self.root, value, Mode::Lax)
            .map_err(|invalid| invalid.to_string())
    }

    /// The model's top-level fields that are tables (`dict[key, record]`).
    pub fn table_fields(&self) -> Vec<String> {
        let Some(properties) = self.root.get("properties").and_then(Value::as_object) else {
            return Vec::new();
        };
        properties
            .iter()
            .filter(|(_, field)| {
                let field = match field.get("$ref").and_then(Value::as_str) {
                    Some(reference) => self.resolve(reference).ok(),
                    None => Some(*field),
                };
                field.is_some_and(|field| {
                    field.get("type").and_then(Value::as_str) == Some("object")
                        && field.get("properties").is_none()
                })
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The schema a `$ref` points at (`#/$defs/Name`).
    fn resolve<'s>(&'s self, reference: &str) -> Result<&'s Value, Invalid> {
        reference
            .strip_prefix("#/$defs/")
            .and_then(|name| self.root.get("$defs")?.get(name))
            .ok_or_else(|| format!("the schema has no definition `{reference}`").into())
    }

    fn validate(&self, schema: &Value, value: &Value, mode: Mode) -> Result<Value, Invalid> {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            return self.validate(self.resolve(reference)?, value, mode);
        }
        if let Some(Value::Array(variants)) = schema.get("anyOf") {
            return self.union(variants, value, mode);
        }
        if let Some(expected) = schema.get("const")
            && value != expected
        {
            return Err(format!("expected {expected}, got {value}").into());
        }
        if let Some(Value::Array(choices)) = schema.get("enum")
            && !choices.contains(value)
        {
            return Err(format!("{value} is not one of {}", Value::from(choices.clone())).into());
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("object") if schema.get("properties").is_some() => self.model(schema, value, mode),
            Some("object") => self.dict(schema, value, mode),
            Some("array") => self.list(schema, value, mode),
            Some("integer") => integer(value, mode),
            Some("number") => float(value),
            Some("string") if value.is_string() => Ok(match schema.get("format") {
                Some(format) if format == "date-time" => datetime_str(value),
                _ => value.clone(),
            }),
            Some("boolean") if value.is_boolean() => Ok(value.clone()),
            Some("null") if value.is_null() => Ok(Value::Null),
            Some(kind) => Err(format!("expected {kind}, got {value}").into()),
            None => Ok(value.clone()),
        }
    }

    /// A union in pydantic's smart mode: the first variant that accepts the
    /// value without conversions, else the first that accepts it with them.
    /// (Pydantic breaks ties between several strict matches by the number of
    /// fields set; the τ² models' variants differ in a `Literal` tag, so at
    /// most one matches.)
    fn union(&self, variants: &[Value], value: &Value, mode: Mode) -> Result<Value, Invalid> {
        let modes: &[Mode] = match mode {
            Mode::Strict => &[Mode::Strict],
            Mode::Lax => &[Mode::Strict, Mode::Lax],
        };
        let mut errors = Vec::new();
        for mode in modes {
            for variant in variants {
                match self.validate(variant, value, *mode) {
                    Ok(dumped) => return Ok(dumped),
                    Err(error) => errors.push(error.to_string()),
                }
            }
        }
        Err(format!("no variant of the union accepts it ({})", errors.join("; ")).into())
    }

    /// A model: its fields in declaration order, defaults for those absent.
    fn model(&self, schema: &Value, value: &Value, mode: Mode) -> Result<Value, Invalid> {
        let Value::Object(input) = value else {
            return Err(format!("expected an object, got {value}").into());
        };
        let properties = schema["properties"]
            .as_object()
            .ok_or("the schema's `properties` is not an object")?;
        if schema.get("additionalProperties") == Some(&Value::Bool(false))
            && let Some(extra) = input.keys().find(|key| !properties.contains_key(*key))
        {
            return Err(Invalid::from("extra fields are not permitted").under(extra));
        }
        let required = |name: &str| {
            schema
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|required| required.iter().any(|field| field == name))
        };
        let mut dumped = Map::with_capacity(properties.len());
        for (name, field) in properties {
            let value = match (input.get(name), field.get("default")) {
                (Some(value), _) => self
                    .validate(field, value, mode)
                    .map_err(|error| error.under(name))?,
                (None, Some(default)) => default.clone(),
                (None, None) if !required(name) => self
                    .factory_default(field)
                    .map_err(|error| error.under(name))?,
                (None, None) => return Err(Invalid::from("field required").under(name)),
            };
            dumped.insert(name.clone(), value);
        }
        Ok(Value::Object(dumped))
    }

    /// The value of an optional field without a `default` in the schema: one
    /// with a `default_factory`, which builds an empty list, an empty dict,
    /// or a model from its own defaults.
    fn factory_default(&self, schema: &Value) -> Result<Value, Invalid> {
        let schema = match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => self.resolve(reference)?,
            None => schema,
        };
        match schema.get("type").and_then(Value::as_str) {
            Some("array") => Ok(Value::Array(Vec::new())),
            _ => self.validate(schema, &Value::Object(Map::new()), Mode::Lax),
        }
    }

    /// A dict: every value validated, keys (checked against `propertyNames`)
    /// kept in the input's order.
    fn dict(&self, schema: &Value, value: &Value, mode: Mode) -> Result<Value, Invalid> {
        let Value::Object(input) = value else {
            return Err(format!("expected an object, got {value}").into());
        };
        let values = schema.get("additionalProperties").filter(|v| v.is_object());
        let keys = schema.get("propertyNames");
        let mut dumped = Map::with_capacity(input.len());
        for (key, item) in input {
            if let Some(keys) = keys {
                self.validate(keys, &Value::String(key.clone()), mode)
                    .map_err(|error| Invalid::new(format!("key {}", error.message)).under(key))?;
            }
            let item = match values {
                Some(values) => self
                    .validate(values, item, mode)
                    .map_err(|error| error.under(key))?,
                None => item.clone(),
            };
            dumped.insert(key.clone(), item);
        }
        Ok(Value::Object(dumped))
    }

    fn list(&self, schema: &Value, value: &Value, mode: Mode) -> Result<Value, Invalid> {
        let Value::Array(items) = value else {
            return Err(format!("expected an array, got {value}").into());
        };
        let Some(item_schema) = schema.get("items") else {
            return Ok(value.clone());
        };
        items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                self.validate(item_schema, item, mode)
                    .map_err(|error| error.under(&index.to_string()))
            })
            .collect::<Result<_, _>>()
            .map(Value::Array)
    }
}

/// A `datetime` field as the reference's dumps write it (`str(datetime)`,
/// through `json.dumps(default=str)`): ISO 8601 with a space between the date
/// and the time.
fn datetime_str(value: &Value) -> Value {
    match value.as_str() {
        Some(text) if text.get(10..11) == Some("T") => {
            Value::String(format!("{} {}", &text[..10], &text[11..]))
        }
        _ => value.clone(),
    }
}

/// An `int` field: an int, or (lax) a float without a fractional part.
fn integer(value: &Value, mode: Mode) -> Result<Value, Invalid> {
    let Some(number) = value.as_number() else {
        return Err(format!("expected an integer, got {value}").into());
    };
    if number.is_i64() || number.is_u64() {
        return Ok(value.clone());
    }
    match number.as_f64() {
        Some(float) if mode == Mode::Lax && float.fract() == 0.0 && float.abs() < 9.2e18 => {
            Ok(Value::from(float as i64))
        }
        _ => Err(format!("expected an integer, got {value}").into()),
    }
}

/// A `float` field: any number, dumped as a float.
fn float(value: &Value) -> Result<Value, Invalid> {
    value
        .as_f64()
        .filter(|_| value.is_number())
        .and_then(Number::from_f64)
        .map(Value::Number)
        .ok_or_else(|| format!("expected a number, got {value}").into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        Schema {
            root: json!({
                "$defs": {
                    "Card": {"type": "object", "properties": {
                        "source": {"const": "card", "type": "string"},
                        "id": {"type": "string"}}, "required": ["source", "id"]},
                    "Gift": {"type": "object", "properties": {
                        "source": {"const": "gift", "type": "string"},
                        "balance": {"type": "number"}}, "required": ["source", "balance"]},
                },
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "count": {"type": "integer"},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                    "methods": {"type": "object", "additionalProperties": {
                        "anyOf": [{"$ref": "#/$defs/Card"}, {"$ref": "#/$defs/Gift"}]}},
                },
                "required": ["count", "methods"],
            }),
        }
    }

    #[test]
    fn dumps_in_model_order_with_defaults_and_float_fields() {
        let dumped = schema()
            .dump(&json!({"methods": {"g": {"balance": 5, "source": "gift", "extra": 1}}, "count": 2.0}))
            .unwrap();
        assert_eq!(
            serde_json::to_string(&dumped).unwrap(),
            r#"{"count":2,"note":null,"methods":{"g":{"source":"gift","balance":5.0}}}"#
        );
    }

    #[test]
    fn errors_name_the_field() {
        let error = schema()
            .dump(&json!({"count": 1, "methods": {"c": {"source": "card"}}}))
            .unwrap_err();
        assert!(error.starts_with("methods.c: no variant"), "{error}");
        assert!(error.contains("id: field required"), "{error}");
        let error = schema()
            .dump(&json!({"count": 1, "methods": {}, "x": 0}))
            .unwrap_err();
        assert_eq!(error, "x: extra fields are not permitted");
        let error = schema()
            .dump(&json!({"count": 1.5, "methods": {}}))
            .unwrap_err();
        assert_eq!(error, "count: expected an integer, got 1.5");
    }
}
