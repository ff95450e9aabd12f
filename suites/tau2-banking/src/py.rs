//! Python semantics the banking tools lean on beyond what `forge_tau_guest`
//! gives: ordering comparisons, `float()` and `int()`, `format()` and `str()`
//! of floats, string methods, `json.dumps(indent=2)` and
//! `json.loads(parse_int=float)`.

use forge_pycompat::json::{write_float, write_str};
use forge_tau_guest::{Num, repr, type_name};
use serde_json::{Map, Number, Value};
use std::cmp::Ordering;

/// An exception a discoverable tool's body raises, split as the reference's
/// callers split them: `call_discoverable_agent_tool` and
/// `call_discoverable_user_tool` answer a `TypeError` themselves (the agent's
/// without logging the call), any other exception leaves the tool (`Err`).
/// A `String` error converts to `Other`.
#[derive(Debug, PartialEq)]
pub enum Raised {
    /// A `TypeError`.
    Type(String),
    /// Any other exception (`ValueError`, `AttributeError`…).
    Other(String),
}

impl From<String> for Raised {
    fn from(error: String) -> Self {
        Self::Other(error)
    }
}

/// `a < b` and friends as Python orders values: numbers (a `bool` as its
/// int) with numbers, strings with strings, lists element-wise; `None` where
/// Python raises a `TypeError`.
pub fn py_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Array(a), Value::Array(b)) => {
            for (x, y) in a.iter().zip(b) {
                if !forge_tau_guest::py_eq(x, y) {
                    return py_cmp(x, y);
                }
            }
            Some(a.len().cmp(&b.len()))
        }
        _ => number(a)?.partial_cmp(&number(b)?),
    }
}

/// A number as Python computes with it (a `bool` as its int); `None` for
/// anything else.
pub fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Bool(flag) => Some(f64::from(u8::from(*flag))),
        _ => value.as_f64(),
    }
}

/// `value` as a number Python can compare with `0`, or the `TypeError` of
/// `value {op} 0`.
pub fn compared_with_zero(value: &Value, op: &str) -> Result<f64, String> {
    number(value).ok_or_else(|| {
        format!(
            "'{op}' not supported between instances of '{}' and 'int'",
            type_name(value)
        )
    })
}

/// `float(value)`: a number, a `bool`, or a string Python reads as a float;
/// Python's `TypeError` for any other value, its `ValueError` for a string
/// that is no float.
pub fn float(value: &Value) -> Result<f64, Raised> {
    if let Some(x) = number(value) {
        return Ok(x);
    }
    match value {
        Value::String(text) => float_from_str(text).map_err(Raised::Other),
        other => Err(Raised::Type(format!(
            "float() argument must be a string or a real number, not '{}'",
            type_name(other)
        ))),
    }
}

/// `float(text)` of a string: surrounding whitespace ignored, single
/// underscores between digits, `inf` and `nan` allowed; else Python's
/// `ValueError`.
pub fn float_from_str(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    underscores_between_digits(trimmed)
        .then(|| trimmed.replace('_', "").parse().ok())
        .flatten()
        .ok_or_else(|| format!("could not convert string to float: {}", repr(text)))
}

/// `int(value)`, `None` where Python raises (a float is truncated; a float
/// past `i64` saturates where Python's int would grow).
pub fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Bool(flag) => Some(i64::from(*flag)),
        Value::Number(number) => number.as_i64().or_else(|| {
            number
                .as_f64()
                .filter(|float| float.is_finite())
                .map(|float| float.trunc() as i64)
        }),
        Value::String(text) => {
            let text = text.trim();
            if !underscores_between_digits(text) {
                return None;
            }
            text.replace('_', "").parse().ok()
        }
        _ => None,
    }
}

/// Python's rule for `_` in a number literal: only single, between digits.
fn underscores_between_digits(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digit = |index: Option<usize>| {
        index
            .and_then(|index| bytes.get(index))
            .is_some_and(u8::is_ascii_digit)
    };
    bytes.iter().enumerate().all(|(index, byte)| {
        *byte != b'_' || (digit(index.checked_sub(1)) && digit(Some(index + 1)))
    })
}

/// `str(x)` of a float.
pub fn float_str(x: f64) -> String {
    Num::Float(x).to_python_string()
}

/// `f"{x:.{decimals}f}"` (NaN as Python writes it, `nan`, whatever its sign).
pub fn fixed(x: f64, decimals: usize) -> String {
    if x.is_nan() {
        "nan".to_owned()
    } else {
        format!("{x:.decimals$}")
    }
}

/// `f"${x:.2f}"`: an amount as the reference writes dollars.
pub fn dollars(x: f64) -> String {
    format!("${}", fixed(x, 2))
}

/// `f"{x:,.{decimals}f}"`: thousands separated by commas.
pub fn grouped(x: f64, decimals: usize) -> String {
    let text = fixed(x, decimals);
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text.as_str()),
    };
    let (whole, fraction) = match digits.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (digits, None),
    };
    let mut out = String::from(sign);
    for (index, digit) in whole.chars().enumerate() {
        if index > 0 && (whole.len() - index) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    if let Some(fraction) = fraction {
        out.push('.');
        out.push_str(fraction);
    }
    out
}

/// `str(items)` of a list of strings: each item's `repr`, in brackets.
pub fn str_list<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let items: Vec<String> = items.into_iter().map(|item| repr(item.as_ref())).collect();
    format!("[{}]", items.join(", "))
}

/// `text.replace("_", " ").title()`: each run of cased letters capitalised,
/// so `card_present_fraud` reads `Card Present Fraud`.
pub fn title_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut after_cased = false;
    for ch in text.chars().map(|ch| if ch == '_' { ' ' } else { ch }) {
        if after_cased {
            out.extend(ch.to_lowercase());
        } else {
            out.extend(ch.to_uppercase());
        }
        after_cased = ch.is_lowercase() || ch.is_uppercase();
    }
    out
}

/// `value.upper()`; Python's `AttributeError` for a value that is no string.
pub fn upper(value: &Value) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_uppercase)
        .ok_or_else(|| no_attribute(value, "upper"))
}

/// `value.lower()`; Python's `AttributeError` for a value that is no string.
pub fn lower(value: &Value) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_lowercase)
        .ok_or_else(|| no_attribute(value, "lower"))
}

/// Python's `AttributeError` for `value.{attribute}`.
fn no_attribute(value: &Value, attribute: &str) -> String {
    format!(
        "'{}' object has no attribute '{attribute}'",
        type_name(value)
    )
}

/// `json.dumps(value, indent=indent)` (ASCII only, `", "` becomes `","` at
/// line ends as Python's encoder writes it).
pub fn dumps_indent(value: &Value, indent: usize) -> String {
    let mut out = String::new();
    write_indented(&mut out, value, indent, 0);
    out
}

fn write_indented(out: &mut String, value: &Value, indent: usize, depth: usize) {
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&" ".repeat(indent * depth));
    };
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_indented(out, item, indent, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push('{');
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_str(out, key, true);
                out.push_str(": ");
                write_indented(out, item, indent, depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
        Value::Number(number) if number.is_f64() => {
            write_float(out, number.as_f64().unwrap_or(f64::NAN));
        }
        other => out.push_str(&forge_tau_guest::dumps(other)),
    }
}

/// `json.loads(text, parse_int=float)`: every integer becomes a float, as the
/// reference reads a discoverable tool's arguments.
pub fn loads_floats(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str(text).map(floats)
}

/// Every integer of `value` as a float.
pub fn floats(value: Value) -> Value {
    match value {
        Value::Number(number) if !number.is_f64() => number
            .as_f64()
            .and_then(Number::from_f64)
            .map_or(Value::Number(number), Value::Number),
        Value::Array(items) => Value::Array(items.into_iter().map(floats).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, item)| (key, floats(item)))
                .collect::<Map<String, Value>>(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats_as_python_does() {
        assert_eq!(fixed(2.5, 2), "2.50");
        assert_eq!(grouped(1234567.891, 2), "1,234,567.89");
        assert_eq!(grouped(-1000.0, 2), "-1,000.00");
        assert_eq!(grouped(999.0, 0), "999");
        assert_eq!(
            dumps_indent(&json!({"a": 1, "b": [1.0, "é"], "c": {}}), 2),
            "{\n  \"a\": 1,\n  \"b\": [\n    1.0,\n    \"\\u00e9\"\n  ],\n  \"c\": {}\n}"
        );
        assert_eq!(
            loads_floats(r#"{"n": 33, "x": [1, 2.5]}"#).unwrap(),
            json!({"n": 33.0, "x": [1.0, 2.5]})
        );
        assert_eq!(py_cmp(&json!(1), &json!(1.5)), Some(Ordering::Less));
        assert_eq!(py_cmp(&json!("b"), &json!("a")), Some(Ordering::Greater));
        assert_eq!(py_cmp(&json!(1), &json!("a")), None);
        assert_eq!(py_cmp(&json!(null), &json!(1)), None);
        assert_eq!(fixed(f64::NAN, 2), "nan");
        assert_eq!(fixed(-f64::NAN, 2), "nan");
        assert_eq!(fixed(f64::INFINITY, 2), "inf");
        assert_eq!(dollars(f64::NEG_INFINITY), "$-inf");
        assert_eq!(grouped(f64::NEG_INFINITY, 2), "-inf");
        assert_eq!(str_list(["a", "b'c"]), r#"['a', "b'c"]"#);
    }

    #[test]
    fn converts_numbers_as_float_does() {
        let float = |value: Value| float(&value).ok();
        assert_eq!(float(json!(" 7 ")), Some(7.0));
        assert_eq!(float(json!("1_000.5")), Some(1000.5));
        assert_eq!(float(json!(" 1_000.5\n")), Some(1000.5));
        assert_eq!(float(json!(true)), Some(1.0));
        assert_eq!(float(json!("-inf")), Some(f64::NEG_INFINITY));
        assert_eq!(float_from_str("inf"), Ok(f64::INFINITY));
        for refused in [
            json!("1__0"),
            json!("_1"),
            json!("1_"),
            json!("1_.5"),
            json!("abc"),
            json!([1]),
            Value::Null,
        ] {
            assert_eq!(float(refused.clone()), None, "{refused}");
        }
        assert_eq!(
            super::float(&json!(" x")),
            Err(Raised::Other(
                "could not convert string to float: ' x'".to_owned()
            ))
        );
        assert_eq!(
            super::float(&json!([1])),
            Err(Raised::Type(
                "float() argument must be a string or a real number, not 'list'".to_owned()
            ))
        );
    }

    #[test]
    fn converts_numbers_as_int_does() {
        assert_eq!(int(&json!(" 3 ")), Some(3));
        assert_eq!(int(&json!("3.0")), None);
        assert_eq!(int(&json!(-2.7)), Some(-2));
    }

    #[test]
    fn transforms_strings_as_python_does() {
        assert_eq!(title_words("fraud_suspected"), "Fraud Suspected");
        assert_eq!(title_words("a1b_CD"), "A1B Cd");
        assert_eq!(upper(&json!("rho-bank")), Ok("RHO-BANK".to_owned()));
        assert_eq!(lower(&json!("Blue Account")), Ok("blue account".to_owned()));
        assert_eq!(
            upper(&json!(7)),
            Err("'int' object has no attribute 'upper'".to_owned())
        );
    }
}
