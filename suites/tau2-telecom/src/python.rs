//! Python semantics the telecom methods lean on beyond what
//! `forge_tau_guest` gives: truthiness, `==` against a `bool`, the
//! exceptions of operations on a value of the wrong type.

use forge_tau_guest::{Num, py_str, repr, type_name};
use serde_json::Value;

/// `bool(value)`.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|float| float != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

/// `flag == value` (`True == 1` and `True == 1.0` hold, `True == "yes"` does not).
pub fn equals_bool(flag: bool, value: &Value) -> bool {
    operand(value).is_some_and(|number| number.as_f64() == f64::from(u8::from(flag)))
}

/// A value arithmetic and comparisons take: a number, or a `bool` as the int it is.
pub fn operand(value: &Value) -> Option<Num> {
    match value {
        Value::Bool(flag) => Some(Num::Int(i64::from(*flag))),
        _ => Num::from_value(value),
    }
}

/// `left OP right` where one side is no number: Python's `TypeError`.
pub fn not_comparable(op: &str, left: &Value, right: &Value) -> String {
    format!(
        "'{op}' not supported between instances of '{}' and '{}'",
        type_name(left),
        type_name(right)
    )
}

/// `value.attribute` on a value that has no such attribute.
pub fn no_attribute(value: &Value, attribute: &str) -> String {
    format!(
        "'{}' object has no attribute '{attribute}'",
        type_name(value)
    )
}

/// `Enum(value)` for a value that is none of the enum's: its `ValueError`.
pub fn not_a_member(value: &Value, enum_name: &str) -> String {
    let shown = match value {
        Value::String(text) => repr(text),
        other => py_str(other),
    };
    format!("{shown} is not a valid {enum_name}")
}

/// `dict.get(key)` on a dict with string keys: the key if it could be one,
/// `None` for a hashable value that is no string (never found), the
/// `TypeError` for an unhashable one.
pub fn dict_key(value: &Value) -> Result<Option<&str>, String> {
    match value {
        Value::String(text) => Ok(Some(text)),
        Value::Array(_) | Value::Object(_) => {
            Err(format!("unhashable type: '{}'", type_name(value)))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_truth_and_equality() {
        assert!(!truthy(&json!(0.0)) && !truthy(&json!("")) && !truthy(&json!({})));
        assert!(truthy(&json!([0])) && truthy(&json!("False")));
        assert!(equals_bool(true, &json!(1.0)) && equals_bool(false, &json!(false)));
        assert!(!equals_bool(true, &json!("True")) && !equals_bool(false, &json!(null)));
        assert_eq!(
            not_a_member(&json!("bogus"), "NetworkStatus"),
            "'bogus' is not a valid NetworkStatus"
        );
        assert_eq!(
            not_a_member(&json!(5), "NetworkStatus"),
            "5 is not a valid NetworkStatus"
        );
    }
}
