//! Tool schemas (OpenAI function-calling form) and argument validation.
//!
//! The host validates every call's arguments against the tool's parameter
//! schema before entering the sandbox, so that every environment, whatever
//! language its tools are written in, answers malformed calls the same way.
//! The supported JSON-schema subset is what tool schemas use in practice:
//! `type` (one or a list), `enum`, `properties`, `required`,
//! `additionalProperties: false`, `items`, `minimum`/`maximum`, `minItems`/`maxItems`.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One tool as an LLM sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
}

impl ToolSpec {
    /// The OpenAI `tools` entry.
    pub fn to_openai(&self) -> Value {
        serde_json::json!({
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        })
    }

    /// Checks `args` against the parameter schema; the error names the
    /// argument. Arguments a model wrote as text that is no JSON (a call
    /// cut short) are told so, with where the JSON breaks.
    pub fn validate(&self, args: &Value) -> Result<(), String> {
        if let Value::String(text) = args
            && let Err(err) = serde_json::from_str::<Value>(text)
        {
            return Err(format!(
                "arguments must be a JSON object, and these are not JSON: {err}"
            ));
        }
        if !args.is_object() {
            return Err("arguments must be a JSON object".to_owned());
        }
        validate(&self.parameters, args, "arguments")
    }
}

#[derive(Deserialize)]
struct OpenAiTool {
    #[serde(rename = "type")]
    kind: String,
    function: OpenAiFunction,
}

#[derive(Deserialize)]
struct OpenAiFunction {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "empty_object_schema")]
    parameters: Value,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// Parses `describe`'s answer: a JSON array of OpenAI tool entries.
pub fn parse_tool_specs(text: &str) -> Result<Vec<ToolSpec>> {
    let entries: Vec<OpenAiTool> =
        serde_json::from_str(text).context("expected a JSON array of OpenAI tool entries")?;
    let mut tools: Vec<ToolSpec> = Vec::with_capacity(entries.len());
    for entry in entries {
        let name = entry.function.name;
        if entry.kind != "function" {
            bail!(
                "tool `{name}` has type `{}`, expected `function`",
                entry.kind
            );
        }
        if name.is_empty()
            || !name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
        {
            bail!("tool name `{name}` must be non-empty ASCII letters, digits, `_` or `-`");
        }
        if tools.iter().any(|tool| tool.name == name) {
            bail!("tool `{name}` is described twice");
        }
        if entry
            .function
            .parameters
            .get("type")
            .and_then(Value::as_str)
            != Some("object")
        {
            bail!("tool `{name}`: parameters must be a schema of `type: object`");
        }
        tools.push(ToolSpec {
            name,
            description: entry.function.description,
            parameters: entry.function.parameters,
        });
    }
    Ok(tools)
}

fn type_matches(kind: &str, value: &Value) -> bool {
    match kind {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `text` cut to a readable length, with its size: an error quoting what a
/// caller sent goes back to the agent and into the trajectory, and must not
/// grow with it.
pub(crate) fn shortened(text: &str) -> String {
    match crate::text::prefix(text, 80) {
        Some(kept) => format!("{kept}… ({} bytes)", text.len()),
        None => text.to_owned(),
    }
}

/// `value` as JSON, [`shortened`].
fn quoted(value: &Value) -> String {
    shortened(&value.to_string())
}

fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    if let Some(kind) = schema.get("type") {
        let kinds: Vec<&str> = match kind {
            Value::String(kind) => vec![kind.as_str()],
            Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !kinds.is_empty() && !kinds.iter().any(|kind| type_matches(kind, value)) {
            return Err(format!(
                "`{path}` must be {}, got {}",
                kinds.join(" or "),
                type_name(value)
            ));
        }
    }
    if let Some(Value::Array(choices)) = schema.get("enum")
        && !choices.contains(value)
    {
        let choices: Vec<String> = choices.iter().map(Value::to_string).collect();
        return Err(format!(
            "`{path}` must be one of {}, got {}",
            choices.join(", "),
            quoted(value)
        ));
    }
    if let Some(number) = value.as_f64() {
        if let Some(minimum) = schema.get("minimum").and_then(Value::as_f64)
            && number < minimum
        {
            return Err(format!("`{path}` must be at least {minimum}, got {value}"));
        }
        if let Some(maximum) = schema.get("maximum").and_then(Value::as_f64)
            && number > maximum
        {
            return Err(format!("`{path}` must be at most {maximum}, got {value}"));
        }
    }
    match value {
        Value::Object(object) => validate_object(schema, object, path),
        Value::Array(items) => {
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && (items.len() as u64) < min
            {
                return Err(format!(
                    "`{path}` must have at least {min} items, got {}",
                    items.len()
                ));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && (items.len() as u64) > max
            {
                return Err(format!(
                    "`{path}` must have at most {max} items, got {}",
                    items.len()
                ));
            }
            match schema.get("items") {
                Some(item_schema) => items.iter().enumerate().try_for_each(|(index, item)| {
                    validate(item_schema, item, &format!("{path}[{index}]"))
                }),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

fn validate_object(
    schema: &Map<String, Value>,
    object: &Map<String, Value>,
    path: &str,
) -> Result<(), String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let field = |name: &str| {
        if path == "arguments" {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                return Err(format!("missing required argument `{}`", field(name)));
            }
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (name, item) in object {
        match properties.and_then(|properties| properties.get(name)) {
            Some(item_schema) => validate(item_schema, item, &field(name))?,
            None if closed => {
                return Err(format!("unknown argument `{}`", shortened(&field(name))));
            }
            None => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> ToolSpec {
        ToolSpec {
            name: "place_order".into(),
            description: String::new(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "user_id": {"type": "string"},
                    "reason": {"type": "string", "enum": ["a", "b"]},
                    "items": {"type": "array", "minItems": 1, "items": {
                        "type": "object",
                        "properties": {"product_id": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
                        "required": ["product_id", "quantity"],
                        "additionalProperties": false
                    }}
                },
                "required": ["user_id", "items"],
                "additionalProperties": false
            }),
        }
    }

    #[test]
    fn accepts_valid_arguments() {
        let args =
            json!({"user_id": "u1", "reason": "a", "items": [{"product_id": "p1", "quantity": 2}]});
        assert_eq!(spec().validate(&args), Ok(()));
    }

    #[test]
    fn names_the_offending_argument() {
        let cases = [
            (json!([]), "arguments must be a JSON object"),
            (
                json!("{\"user_id\": \"u1\""),
                "arguments must be a JSON object, and these are not JSON: EOF while parsing an object at line 1 column 16",
            ),
            (json!({"items": []}), "missing required argument `user_id`"),
            (
                json!({"user_id": 3, "items": []}),
                "`user_id` must be string, got integer",
            ),
            (
                json!({"user_id": "u", "items": []}),
                "`items` must have at least 1 items, got 0",
            ),
            (
                json!({"user_id": "u", "items": [{"product_id": "p"}]}),
                "missing required argument `items[0].quantity`",
            ),
            (
                json!({"user_id": "u", "items": [{"product_id": "p", "quantity": 1.5}]}),
                "`items[0].quantity` must be integer, got number",
            ),
            (
                json!({"user_id": "u", "items": [{"product_id": "p", "quantity": 0}]}),
                "`items[0].quantity` must be at least 1, got 0",
            ),
            (
                json!({"user_id": "u", "items": [{"product_id": "p", "quantity": 1}], "x": 1}),
                "unknown argument `x`",
            ),
            (
                json!({"user_id": "u", "reason": "c", "items": [{"product_id": "p", "quantity": 1}]}),
                "`reason` must be one of \"a\", \"b\", got \"c\"",
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(spec().validate(&args), Err(expected.to_owned()), "{args}");
        }
    }

    #[test]
    fn a_huge_argument_is_not_quoted_whole() {
        let huge = "x".repeat(100_000);
        let items = json!([{"product_id": "p", "quantity": 1}]);
        for (args, ending) in [
            (
                json!({"user_id": "u", "reason": huge, "items": items}),
                "… (100002 bytes)",
            ),
            (
                json!({"user_id": "u", "items": items, &huge: 1}),
                "… (100000 bytes)`",
            ),
        ] {
            let message = spec().validate(&args).unwrap_err();
            assert!(
                message.len() < 200 && message.ends_with(ending),
                "{message}"
            );
        }
    }

    #[test]
    fn parses_and_checks_openai_entries() {
        let text = r#"[{"type":"function","function":{"name":"a","description":"d","parameters":{"type":"object","properties":{}}}}]"#;
        assert_eq!(parse_tool_specs(text).unwrap()[0].name, "a");
        let twice = r#"[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}},{"type":"function","function":{"name":"a","parameters":{"type":"object"}}}]"#;
        assert_eq!(
            parse_tool_specs(twice).unwrap_err().to_string(),
            "tool `a` is described twice"
        );
        assert!(parse_tool_specs("{}").is_err());
    }
}
