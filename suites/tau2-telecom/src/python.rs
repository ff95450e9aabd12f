//! Python semantics the telecom methods lean on beyond what
//! `forge_tau_guest` gives: arithmetic on a `bool`, the exceptions of
//! operations on a value of the wrong type.

use forge_tau_guest::{Num, py_str, repr, type_name};
use serde_json::Value;

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_operands_and_errors() {
        assert_eq!(operand(&json!(true)), Some(Num::Int(1)));
        assert_eq!(operand(&json!(2.5)), Some(Num::Float(2.5)));
        assert_eq!(operand(&json!("2")), None);
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
