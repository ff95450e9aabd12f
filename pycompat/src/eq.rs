//! Python's `==` on the values JSON decodes to.

use serde_json::Value;

/// `a == b` as Python compares the decoded values: `True == 1 == 1.0`,
/// integers exactly however large, dicts regardless of key order, lists
/// element by element.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| py_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, value)| y.get(key).is_some_and(|other| py_eq(value, other)))
        }
        _ => match (numeric(a), numeric(b)) {
            (Some(Numeric::Int(x)), Some(Numeric::Int(y))) => x == y,
            (Some(x), Some(y)) => x.as_f64() == y.as_f64(),
            _ => a == b,
        },
    }
}

/// A number or a bool, as Python's numeric tower sees it.
enum Numeric {
    Int(i128),
    Float(f64),
}

impl Numeric {
    fn as_f64(&self) -> f64 {
        match *self {
            Self::Int(int) => int as f64,
            Self::Float(float) => float,
        }
    }
}

fn numeric(value: &Value) -> Option<Numeric> {
    match value {
        Value::Bool(flag) => Some(Numeric::Int(i128::from(*flag))),
        Value::Number(number) => Some(if let Some(int) = number.as_i64() {
            Numeric::Int(i128::from(int))
        } else if let Some(int) = number.as_u64() {
            Numeric::Int(i128::from(int))
        } else {
            Numeric::Float(number.as_f64().unwrap_or(f64::NAN))
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compares_as_python_does() {
        assert!(py_eq(&json!(1), &json!(1.0)));
        assert!(py_eq(&json!(true), &json!(1)));
        assert!(py_eq(&json!(false), &json!(0.0)));
        assert!(!py_eq(&json!(true), &json!(2)));
        assert!(!py_eq(&json!(true), &json!("True")));
        assert!(!py_eq(&json!(false), &json!(null)));
        assert!(py_eq(&json!(null), &json!(null)));
        assert!(!py_eq(&json!(u64::MAX), &json!(u64::MAX - 1)));
        assert!(py_eq(
            &json!({"a": [1, "x"], "b": null}),
            &json!({"b": null, "a": [1.0, "x"]})
        ));
        assert!(!py_eq(&json!("1"), &json!(1)));
        assert!(!py_eq(&json!([1]), &json!([1, 2])));
    }
}
