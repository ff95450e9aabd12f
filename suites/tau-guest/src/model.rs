//! The pydantic models τ²-bench's tools build from the agent's dicts
//! (`FlightInfo(**flight)`, `Passenger(**passenger)`, `Payment(**payment)`):
//! fields in the model's order, unknown keys dropped, values converted as
//! pydantic's lax mode does, and pydantic's `ValidationError` text when a
//! field is missing or does not convert.

use crate::{repr, type_name};
use serde_json::{Map, Value};

/// The pydantic release whose error texts (and documentation links) these are.
const PYDANTIC_DOCS: &str = "https://errors.pydantic.dev/2.12/v";

/// A field's type.
#[derive(Clone, Copy)]
pub enum Kind {
    Str,
    Int,
}

/// One field error: pydantic's message and error type.
struct FieldError {
    field: &'static str,
    message: &'static str,
    kind: &'static str,
    input: Value,
}

/// `Model(**input)` for the model `name` with `fields`, dumped.
pub fn build(name: &str, fields: &[(&'static str, Kind)], input: &Value) -> Result<Value, String> {
    let Value::Object(map) = input else {
        return Err(format!(
            "'{}' object has no attribute '{}'",
            type_name(input),
            fields.first().map_or("", |(field, _)| field)
        ));
    };
    let mut dumped = Map::new();
    let mut errors = Vec::new();
    for (field, kind) in fields {
        let Some(value) = map.get(*field) else {
            errors.push(FieldError {
                field,
                message: "Field required",
                kind: "missing",
                input: input.clone(),
            });
            continue;
        };
        match convert(*kind, value) {
            Ok(value) => {
                dumped.insert((*field).to_owned(), value);
            }
            Err((message, kind)) => errors.push(FieldError {
                field,
                message,
                kind,
                input: value.clone(),
            }),
        }
    }
    if errors.is_empty() {
        Ok(Value::Object(dumped))
    } else {
        Err(validation_error(name, &errors))
    }
}

/// `[Model(**item) for item in items]` when every item is a dict, as the
/// tools convert their list arguments; a list holding anything else is
/// used as it is by the reference, which then fails reading `attribute` of
/// its first item.
pub fn build_all(
    name: &str,
    fields: &[(&'static str, Kind)],
    items: &[Value],
) -> Result<Vec<Value>, String> {
    if let Some(first) = items.first()
        && !items.iter().all(Value::is_object)
    {
        let attribute = fields.first().map_or("", |(field, _)| field);
        return Err(format!(
            "'{}' object has no attribute '{attribute}'",
            type_name(first)
        ));
    }
    items.iter().map(|item| build(name, fields, item)).collect()
}

/// A value converted to `kind` in lax mode, or pydantic's message and type.
fn convert(kind: Kind, value: &Value) -> Result<Value, (&'static str, &'static str)> {
    match (kind, value) {
        (Kind::Str, Value::String(_)) => Ok(value.clone()),
        (Kind::Str, _) => Err(("Input should be a valid string", "string_type")),
        (Kind::Int, Value::Bool(flag)) => Ok(Value::from(i64::from(*flag))),
        (Kind::Int, Value::Number(number)) => match number.as_i64() {
            Some(int) => Ok(Value::from(int)),
            None => match number.as_f64() {
                Some(float) if float.fract() == 0.0 && float.abs() < 9.2e18 => {
                    Ok(Value::from(float as i64))
                }
                _ => Err((
                    "Input should be a valid integer, got a number with a fractional part",
                    "int_from_float",
                )),
            },
        },
        (Kind::Int, Value::String(text)) => {
            text.trim().parse::<i64>().map(Value::from).map_err(|_| {
                (
                    "Input should be a valid integer, unable to parse string as an integer",
                    "int_parsing",
                )
            })
        }
        (Kind::Int, _) => Err(("Input should be a valid integer", "int_type")),
    }
}

/// `str(ValidationError)`.
fn validation_error(name: &str, errors: &[FieldError]) -> String {
    let plural = if errors.len() == 1 { "" } else { "s" };
    let mut text = format!("{} validation error{plural} for {name}", errors.len());
    for error in errors {
        text.push_str(&format!(
            "\n{}\n  {} [type={}, input_value={}, input_type={}]\n    For further information visit {PYDANTIC_DOCS}/{}",
            error.field,
            error.message,
            error.kind,
            truncate(&py_repr(&error.input)),
            type_name(&error.input),
            error.kind
        ));
    }
    text
}

/// Pydantic shortens a long `input_value` to its first 25 and last 24 characters.
fn truncate(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 50 {
        return text.to_owned();
    }
    let head: String = chars[..25].iter().collect();
    let tail: String = chars[chars.len() - 24..].iter().collect();
    format!("{head}...{tail}")
}

/// Python's `repr` of a JSON value.
fn py_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(_) => crate::num(value).map_or_else(|err| err, |num| num.to_python_string()),
        Value::String(text) => repr(text),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(py_repr).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let items: Vec<String> = map
                .iter()
                .map(|(key, value)| format!("{}: {}", repr(key), py_repr(value)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PAYMENT: &[(&str, Kind)] = &[("payment_id", Kind::Str), ("amount", Kind::Int)];

    #[test]
    fn builds_in_model_order_and_converts_like_lax_mode() {
        let built = build(
            "Payment",
            PAYMENT,
            &json!({"amount": 100.0, "x": 1, "payment_id": "p"}),
        );
        assert_eq!(
            serde_json::to_string(&built.unwrap()).unwrap(),
            r#"{"payment_id":"p","amount":100}"#
        );
    }

    #[test]
    fn errors_read_as_pydantic_writes_them() {
        // python -c 'from pydantic import BaseModel
        // class Payment(BaseModel): payment_id: str; amount: int
        // Payment(**{"amount": 1.5})'
        assert_eq!(
            build("Payment", PAYMENT, &json!({"amount": 1.5})).unwrap_err(),
            "2 validation errors for Payment\npayment_id\n  Field required [type=missing, input_value={'amount': 1.5}, input_type=dict]\n    For further information visit https://errors.pydantic.dev/2.12/v/missing\namount\n  Input should be a valid integer, got a number with a fractional part [type=int_from_float, input_value=1.5, input_type=float]\n    For further information visit https://errors.pydantic.dev/2.12/v/int_from_float"
        );
        let long = json!({"first_name": "a".repeat(30), "last_name": "b".repeat(30)});
        assert_eq!(
            truncate(&py_repr(&long)),
            "{'first_name': 'aaaaaaaaa...bbbbbbbbbbbbbbbbbbbbbb'}"
        );
    }
}
