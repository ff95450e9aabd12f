//! The pydantic models τ²-bench's tools build from the agent's dicts
//! (`FlightInfo(**flight)`, `Passenger(**passenger)`, `Payment(**payment)`):
//! fields in the model's order, unknown keys dropped (or refused, for a
//! model with `extra="forbid"`), values converted as pydantic's lax mode
//! does, and pydantic's `ValidationError` text when a field is missing or
//! does not convert.

use crate::{py_repr, repr, type_name};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// The pydantic release whose error texts (and documentation links) these are.
const PYDANTIC_DOCS: &str = "https://errors.pydantic.dev/2.12/v";

/// A field's type.
#[derive(Clone, Copy)]
pub enum Kind {
    Str,
    Int,
    Bool,
    /// A string `Enum`: one of these values.
    Enum(&'static [&'static str]),
    /// `Optional[kind]`: `None` or a `kind`.
    Optional(&'static Kind),
}

/// One field error: pydantic's message and error type.
struct FieldError<'f> {
    field: &'f str,
    message: Cow<'static, str>,
    kind: &'static str,
    input: Value,
}

/// `Model(**input)` for the model `name` with `fields`, dumped.
pub fn build(name: &str, fields: &[(&'static str, Kind)], input: &Value) -> Result<Value, String> {
    validate(name, fields, input, false)
}

/// `Model(**input)` for a model with `extra="forbid"`: keys that are not
/// fields are errors too, reported after the fields' own.
pub fn build_forbidding_extra(
    name: &str,
    fields: &[(&'static str, Kind)],
    input: &Value,
) -> Result<Value, String> {
    validate(name, fields, input, true)
}

fn validate(
    name: &str,
    fields: &[(&'static str, Kind)],
    input: &Value,
    forbid_extra: bool,
) -> Result<Value, String> {
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
                message: Cow::Borrowed("Field required"),
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
    if forbid_extra {
        for (key, value) in map {
            if !fields.iter().any(|(field, _)| field == key) {
                errors.push(FieldError {
                    field: key,
                    message: Cow::Borrowed("Extra inputs are not permitted"),
                    kind: "extra_forbidden",
                    input: value.clone(),
                });
            }
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

/// Why a value does not convert: pydantic's message and error type.
type Refusal = (Cow<'static, str>, &'static str);

/// A value converted to `kind` in lax mode, or pydantic's refusal.
fn convert(kind: Kind, value: &Value) -> Result<Value, Refusal> {
    let refuse = |message: &'static str, kind: &'static str| Err((Cow::Borrowed(message), kind));
    match (kind, value) {
        (Kind::Str, Value::String(_)) => Ok(value.clone()),
        (Kind::Str, _) => refuse("Input should be a valid string", "string_type"),
        (Kind::Int, Value::Bool(flag)) => Ok(Value::from(i64::from(*flag))),
        (Kind::Int, Value::Number(number)) => match number.as_i64() {
            Some(int) => Ok(Value::from(int)),
            None => match number.as_f64() {
                Some(float) if float.fract() == 0.0 && float.abs() < 9.2e18 => {
                    Ok(Value::from(float as i64))
                }
                _ => refuse(
                    "Input should be a valid integer, got a number with a fractional part",
                    "int_from_float",
                ),
            },
        },
        (Kind::Int, Value::String(text)) => match text.trim().parse::<i64>() {
            Ok(int) => Ok(Value::from(int)),
            Err(_) => refuse(
                "Input should be a valid integer, unable to parse string as an integer",
                "int_parsing",
            ),
        },
        (Kind::Int, _) => refuse("Input should be a valid integer", "int_type"),
        (Kind::Bool, Value::Bool(_)) => Ok(value.clone()),
        // 0 and 1 (int or float) are booleans; other ints "cannot be
        // interpreted", other floats are not booleans at all.
        (Kind::Bool, Value::Number(number)) => match number.as_f64() {
            Some(float) if float == 0.0 || float == 1.0 => Ok(Value::Bool(float == 1.0)),
            _ if number.is_f64() => refuse("Input should be a valid boolean", "bool_type"),
            _ => refuse(BOOL_PARSING, "bool_parsing"),
        },
        (Kind::Bool, Value::String(text)) => match text.to_ascii_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => Ok(Value::Bool(false)),
            "1" | "on" | "t" | "true" | "y" | "yes" => Ok(Value::Bool(true)),
            _ => refuse(BOOL_PARSING, "bool_parsing"),
        },
        (Kind::Bool, _) => refuse("Input should be a valid boolean", "bool_type"),
        (Kind::Enum(values), Value::String(text)) if values.contains(&text.as_str()) => {
            Ok(value.clone())
        }
        (Kind::Enum(values), _) => Err((Cow::Owned(enum_message(values)), "enum")),
        (Kind::Optional(_), Value::Null) => Ok(Value::Null),
        (Kind::Optional(kind), _) => convert(*kind, value),
    }
}

const BOOL_PARSING: &str = "Input should be a valid boolean, unable to interpret input";

/// "Input should be 'a', 'b' or 'c'".
fn enum_message(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|value| repr(value)).collect();
    let listed = match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    format!("Input should be {listed}")
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

    /// τ²-bench telecom's `APNSettings` (`extra="forbid"`, every field defaulted).
    const APN: &[(&str, Kind)] = &[
        ("apn_name", Kind::Enum(&["internet", "broken"])),
        ("reset_at_reboot", Kind::Bool),
        ("mms_port", Kind::Optional(&Kind::Int)),
    ];

    #[test]
    fn strict_models_refuse_extra_keys_after_their_fields() {
        // python -c 'from tau2.domains.telecom.user_data_model import APNSettings
        // APNSettings(**{"zzz": 1, "apn_name": 1})'
        let input = json!({"zzz": 1, "apn_name": 1, "reset_at_reboot": "on", "mms_port": null});
        assert_eq!(
            build_forbidding_extra("APNSettings", APN, &input).unwrap_err(),
            "2 validation errors for APNSettings\napn_name\n  Input should be 'internet' or 'broken' [type=enum, input_value=1, input_type=int]\n    For further information visit https://errors.pydantic.dev/2.12/v/enum\nzzz\n  Extra inputs are not permitted [type=extra_forbidden, input_value=1, input_type=int]\n    For further information visit https://errors.pydantic.dev/2.12/v/extra_forbidden"
        );
        let input = json!({"apn_name": "broken", "reset_at_reboot": "YES", "mms_port": 80.0});
        assert_eq!(
            build_forbidding_extra("APNSettings", APN, &input).unwrap(),
            json!({"apn_name": "broken", "reset_at_reboot": true, "mms_port": 80})
        );
        for (flag, kind) in [(json!(2), "bool_parsing"), (json!(0.5), "bool_type")] {
            let input = json!({"apn_name": "internet", "reset_at_reboot": flag, "mms_port": null});
            let error = build_forbidding_extra("APNSettings", APN, &input).unwrap_err();
            assert!(error.contains(&format!("[type={kind},")), "{error}");
        }
    }
}
