//! `json.dumps` as CPython writes it.

use serde_json::Value;
use std::fmt::Write as _;

/// The options of `json.dumps` that change its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dumps {
    /// `sort_keys=True`: object keys in code-point order instead of insertion order.
    pub sort_keys: bool,
    /// `separators=(item, key)`.
    pub item_separator: &'static str,
    pub key_separator: &'static str,
    /// `ensure_ascii=True`: everything outside printable ASCII as `\uXXXX`.
    pub ensure_ascii: bool,
}

impl Dumps {
    /// `json.dumps(value)`: insertion order, `", "` and `": "`, ASCII only.
    pub const PYTHON_DEFAULT: Self = Self {
        sort_keys: false,
        item_separator: ", ",
        key_separator: ": ",
        ensure_ascii: true,
    };

    /// `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`:
    /// the canonical text that the benchmark suites hash.
    pub const CANONICAL: Self = Self {
        sort_keys: true,
        item_separator: ",",
        key_separator: ":",
        ensure_ascii: false,
    };

    pub fn to_string(&self, value: &Value) -> String {
        let mut out = String::new();
        self.write(&mut out, value);
        out
    }

    /// Appends the text of `value` to `out`.
    pub fn write(&self, out: &mut String, value: &Value) {
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
            Value::String(text) => write_str(out, text, self.ensure_ascii),
            Value::Array(items) => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push_str(self.item_separator);
                    }
                    self.write(out, item);
                }
                out.push(']');
            }
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                if self.sort_keys {
                    // Byte order of UTF-8 equals code-point order, which is Python's `sorted`.
                    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                }
                out.push('{');
                for (index, (key, item)) in entries.into_iter().enumerate() {
                    if index > 0 {
                        out.push_str(self.item_separator);
                    }
                    write_str(out, key, self.ensure_ascii);
                    out.push_str(self.key_separator);
                    self.write(out, item);
                }
                out.push('}');
            }
        }
    }
}

/// `json.dumps(value)` with Python's defaults.
pub fn dumps(value: &Value) -> String {
    Dumps::PYTHON_DEFAULT.to_string(value)
}

/// The canonical text (see [`Dumps::CANONICAL`]).
pub fn to_canonical(value: &Value) -> String {
    Dumps::CANONICAL.to_string(value)
}

/// Writes a JSON string as Python's encoder does.
pub fn write_str(out: &mut String, text: &str, ensure_ascii: bool) {
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
            ch if (ch as u32) < 0x20 || (ensure_ascii && !(' '..='~').contains(&ch)) => {
                let mut units = [0u16; 2];
                for unit in ch.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            ch => out.push(ch),
        }
    }
    out.push('"');
}

/// Writes `value` as Python's `float.__repr__` does: the shortest digits that
/// round-trip, in positional notation when the decimal exponent is in
/// `-4 <= exp < 16` and in scientific notation (`d.ddde±XX`) otherwise.
/// (`json.dumps` writes floats with `repr`, and non-finite ones as
/// `NaN`/`Infinity`.)
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
    fn canonical_sorts_keys_and_escapes_like_python() {
        let value = json!({
            "b": [1, 2.0, "x"],
            "a": {"z": null, "é": true, "Z": false},
            "ctl": "tab\tnl\nquote\"back\\bell\u{7}del\u{7f}",
            "big": 18446744073709551615u64,
            "neg": -3
        });
        assert_eq!(
            to_canonical(&value),
            concat!(
                r#"{"a":{"Z":false,"z":null,"é":true},"b":[1,2.0,"x"],"big":18446744073709551615,"#,
                r#""ctl":"tab\tnl\nquote\"back\\bell\u0007del"#,
                "\u{7f}",
                r#"","neg":-3}"#
            )
        );
    }

    /// `python3 -c 'import json; print(json.dumps({"b": [1, 2.5], "a": "é\x7f😀", "c": {}}))'`
    #[test]
    fn default_dumps_keeps_insertion_order_and_escapes_non_ascii() {
        let value = json!({"b": [1, 2.5], "a": "é\u{7f}😀", "c": {}});
        assert_eq!(
            dumps(&value),
            r#"{"b": [1, 2.5], "a": "\u00e9\u007f\ud83d\ude00", "c": {}}"#
        );
    }
}
