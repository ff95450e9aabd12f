//! Canonical JSON: the exact bytes Python's
//! `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`
//! writes, and its sha256.
//!
//! The benchmark suites compare databases by hashing that text, so Forge must
//! reproduce it to the byte: keys sorted by code point, no whitespace, UTF-8 left
//! unescaped, control characters escaped as Python escapes them, integers as
//! written, and floats formatted like Python's `repr(float)` (`1e-05`, `1e+16`,
//! `100.0`) rather than Rust's (`1e-5`, `1e16`, `100`).

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// The canonical text of `value`.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Hex sha256 of the canonical text of `value`.
pub fn sha256_hex(value: &Value) -> String {
    hex(&Sha256::digest(to_string(value).as_bytes()))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
}

/// Appends the canonical text of `value` to `out`.
pub fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => {
            if let Some(int) = number.as_i64() {
                let _ = write!(out, "{int}");
            } else if let Some(int) = number.as_u64() {
                let _ = write!(out, "{int}");
            } else if let Some(float) = number.as_f64() {
                write_float(out, float);
            }
        }
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            // Byte order of UTF-8 equals code-point order, which is Python's `sorted`.
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_str(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// Writes a JSON string as Python's encoder does with `ensure_ascii=False`.
pub fn write_str(out: &mut String, text: &str) {
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ch if (ch as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", ch as u32);
            }
            ch => out.push(ch),
        }
    }
    out.push('"');
}

/// Writes `value` as Python's `float.__repr__` does: the shortest digits that
/// round-trip, in positional notation when the decimal exponent is in
/// `-4 <= exp < 16` and in scientific notation (`d.ddde±XX`) otherwise.
pub fn write_float(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("NaN");
        return;
    }
    if value.is_infinite() {
        out.push_str(if value > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    // Rust's `{:e}` prints the shortest round-trip digits: "-1.2345e-7".
    let formatted = format!("{value:e}");
    let (mantissa, exponent) = formatted
        .split_once('e')
        .expect("`{:e}` always has an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` exponent is an integer");
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|ch| *ch != '.').collect();
    if negative {
        out.push('-');
    }
    // Python's rule, with `decpt = exponent + 1`: scientific when decpt <= -4 or decpt > 16.
    if !(-4..16).contains(&exponent) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exponent.abs());
    } else if exponent < 0 {
        out.push_str("0.");
        for _ in 0..(-exponent - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let point = exponent as usize + 1;
        if digits.len() > point {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        } else {
            out.push_str(&digits);
            for _ in digits.len()..point {
                out.push('0');
            }
            out.push_str(".0");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn float(value: f64) -> String {
        let mut out = String::new();
        write_float(&mut out, value);
        out
    }

    /// Expected values are what CPython 3 prints for `repr(x)`.
    #[test]
    fn floats_match_python_repr() {
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (24.99, "24.99"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.000123, "0.000123"),
            (0.0000123, "1.23e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345.6, "123456789012345.6"),
            (1234567890123456.7, "1234567890123456.8"),
            (1e300, "1e+300"),
            (2.5e-300, "2.5e-300"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (1.0 / 3.0, "0.3333333333333333"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
        ];
        for (value, expected) in cases {
            assert_eq!(float(value), expected, "repr({value:?})");
        }
    }

    #[test]
    fn objects_sort_keys_and_strings_escape_like_python() {
        let value = json!({
            "b": [1, 2.0, "x"],
            "a": {"z": null, "é": true, "Z": false},
            "ctl": "tab\tnl\nquote\"back\\bell\u{7}del\u{7f}",
            "big": 18446744073709551615u64,
            "neg": -3
        });
        assert_eq!(
            to_string(&value),
            concat!(
                r#"{"a":{"Z":false,"z":null,"é":true},"b":[1,2.0,"x"],"big":18446744073709551615,"#,
                r#""ctl":"tab\tnl\nquote\"back\\bell\u0007del"#,
                "\u{7f}",
                r#"","neg":-3}"#
            )
        );
    }

    #[test]
    fn sha256_is_of_the_canonical_text() {
        // python3 -c 'import json,hashlib;print(hashlib.sha256(json.dumps({"b":1,"a":[0.5]},sort_keys=True,separators=(",",":"),ensure_ascii=False).encode()).hexdigest())'
        assert_eq!(
            sha256_hex(&json!({"b": 1, "a": [0.5]})),
            "1c6e9e1e92b8d1d5246b5ebb3591fcd42716c42b8323a237d3ebd430be8cc8ff"
        );
    }
}
