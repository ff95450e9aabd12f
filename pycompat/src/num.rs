//! Numbers with Python's int/float identity.
//!
//! Python keeps `100` and `100.0` apart, and the suites' hashes see the
//! difference: adding a float amount to an integer balance turns it into a
//! float, `round(int, 2)` stays an int, and `0` summed over no items stays the
//! integer `0`. [`Num`] carries that identity through arithmetic.

use serde_json::{Number, Value};
use std::cmp::Ordering;
use std::ops::{Add, Mul, Neg, Sub};

/// A Python `int` (within `i64`) or `float`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    /// The number a JSON value holds (`None` for anything else).
    pub fn from_value(value: &Value) -> Option<Self> {
        let number = value.as_number()?;
        match number.as_i64() {
            Some(int) => Some(Self::Int(int)),
            None => number.as_f64().map(Self::Float),
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Self::Int(int) => int as f64,
            Self::Float(float) => float,
        }
    }

    /// The JSON value, keeping int/float identity (non-finite floats become null,
    /// which JSON cannot hold).
    pub fn to_value(self) -> Value {
        match self {
            Self::Int(int) => Value::from(int),
            Self::Float(float) => Number::from_f64(float).map_or(Value::Null, Value::Number),
        }
    }

    /// `str(x)`.
    pub fn to_python_string(self) -> String {
        match self {
            Self::Int(int) => int.to_string(),
            Self::Float(float) if float.is_nan() => "nan".to_owned(),
            Self::Float(float) if float.is_infinite() => {
                (if float > 0.0 { "inf" } else { "-inf" }).to_owned()
            }
            Self::Float(float) => {
                let mut out = String::new();
                crate::write_float(&mut out, float);
                out
            }
        }
    }

    fn int_op(
        self,
        other: Self,
        int: fn(i64, i64) -> Option<i64>,
        float: fn(f64, f64) -> f64,
    ) -> Self {
        match (self, other) {
            (Self::Int(a), Self::Int(b)) => {
                int(a, b).map_or_else(|| Self::Float(float(a as f64, b as f64)), Self::Int)
            }
            (a, b) => Self::Float(float(a.as_f64(), b.as_f64())),
        }
    }

    /// `abs(x)`.
    pub fn abs(self) -> Self {
        match self {
            Self::Int(int) => int
                .checked_abs()
                .map_or(Self::Float((int as f64).abs()), Self::Int),
            Self::Float(float) => Self::Float(float.abs()),
        }
    }

    /// `x / y`; the error is Python's `ZeroDivisionError` message.
    pub fn true_div(self, other: Self) -> Result<Self, &'static str> {
        match (self, other) {
            (Self::Int(_), Self::Int(0)) => Err("division by zero"),
            (_, b) if b.as_f64() == 0.0 => Err("float division by zero"),
            (a, b) => Ok(Self::Float(a.as_f64() / b.as_f64())),
        }
    }

    /// `x // y`.
    pub fn floor_div(self, other: Self) -> Result<Self, &'static str> {
        match (self, other) {
            (Self::Int(_), Self::Int(0)) => Err("integer division or modulo by zero"),
            (Self::Int(a), Self::Int(b)) => Ok(match a.checked_div(b) {
                Some(truncated) => {
                    let inexact = a % b != 0;
                    Self::Int(truncated - i64::from(inexact && ((a < 0) != (b < 0))))
                }
                // i64::MIN // -1 leaves i64.
                None => Self::Float(-(a as f64)),
            }),
            (_, b) if b.as_f64() == 0.0 => Err("float floor division by zero"),
            (a, b) => Ok(Self::Float(float_floor_div(a.as_f64(), b.as_f64()))),
        }
    }

    /// `x ** y`.
    pub fn pow(self, other: Self) -> Result<Self, &'static str> {
        match (self, other) {
            (Self::Int(a), Self::Int(b)) if b >= 0 => Ok(u32::try_from(b)
                .ok()
                .and_then(|b| a.checked_pow(b))
                .map_or_else(|| Self::Float((a as f64).powf(b as f64)), Self::Int)),
            (a, b) if a.as_f64() == 0.0 && b.as_f64() < 0.0 => {
                Err("0.0 cannot be raised to a negative power")
            }
            (a, b) => Ok(Self::Float(a.as_f64().powf(b.as_f64()))),
        }
    }

    /// `round(x, ndigits)`: an int stays the same int, a float is rounded.
    pub fn round(self, ndigits: usize) -> Self {
        match self {
            Self::Int(int) => Self::Int(int),
            Self::Float(float) => Self::Float(round(float, ndigits)),
        }
    }
}

/// CPython's `float_floor_div` (`1 // 0.1` is `9.0`, not `floor(10.0)`):
/// the quotient of the exact remainder, rounded to the nearest integer.
fn float_floor_div(a: f64, b: f64) -> f64 {
    let remainder = a % b;
    let mut quotient = (a - remainder) / b;
    if remainder != 0.0 && ((b < 0.0) != (remainder < 0.0)) {
        quotient -= 1.0;
    }
    if quotient == 0.0 {
        return 0.0_f64.copysign(a / b);
    }
    let floored = quotient.floor();
    if quotient - floored > 0.5 {
        floored + 1.0
    } else {
        floored
    }
}

impl Add for Num {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        self.int_op(other, i64::checked_add, |a, b| a + b)
    }
}

impl Sub for Num {
    type Output = Self;

    fn sub(self, other: Self) -> Self {
        self.int_op(other, i64::checked_sub, |a, b| a - b)
    }
}

impl Mul for Num {
    type Output = Self;

    fn mul(self, other: Self) -> Self {
        self.int_op(other, i64::checked_mul, |a, b| a * b)
    }
}

impl Neg for Num {
    type Output = Self;

    fn neg(self) -> Self {
        match self {
            Self::Int(int) => int
                .checked_neg()
                .map_or(Self::Float(-(int as f64)), Self::Int),
            Self::Float(float) => Self::Float(-float),
        }
    }
}

impl PartialOrd for Num {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        match (self, other) {
            (Self::Int(a), Self::Int(b)) => Some(a.cmp(b)),
            (a, b) => a.as_f64().partial_cmp(&b.as_f64()),
        }
    }
}

/// Python's `round(value, ndigits)` for a float: the double nearest to the
/// exact binary value rounded half-to-even at `ndigits` decimals. Rust's
/// fixed-precision formatting rounds the exact value the same way, and
/// parsing is correctly rounded, so the two together give CPython's result.
pub fn round(value: f64, ndigits: usize) -> f64 {
    if !value.is_finite() {
        return value;
    }
    format!("{value:.ndigits$}").parse().unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values from CPython 3.11.
    #[test]
    fn round_matches_python() {
        let cases = [
            (0.125, 2, 0.12),
            (0.375, 2, 0.38),
            (2.675, 2, 2.67),
            (1.005, 2, 1.0),
            (-0.125, 2, -0.12),
            (2.5, 0, 2.0),
            (1.5, 0, 2.0),
            (1234.5678, 2, 1234.57),
            (0.1 + 0.2, 2, 0.3),
        ];
        for (value, ndigits, expected) in cases {
            assert_eq!(round(value, ndigits), expected, "round({value}, {ndigits})");
        }
    }

    #[test]
    fn ints_stay_ints_until_a_float_joins() {
        let zero = Num::Int(0);
        assert_eq!(zero.round(2), Num::Int(0));
        assert_eq!((zero + Num::Int(5)).to_python_string(), "5");
        assert_eq!(
            (Num::Int(100) - Num::Float(20.5)).to_python_string(),
            "79.5"
        );
        assert_eq!(
            (Num::Int(100) + Num::Float(0.0)).to_python_string(),
            "100.0"
        );
        assert_eq!(Num::Int(7).true_div(Num::Int(2)), Ok(Num::Float(3.5)));
        assert_eq!(Num::Int(-7).floor_div(Num::Int(2)), Ok(Num::Int(-4)));
        assert_eq!(Num::Int(7).floor_div(Num::Int(-2)), Ok(Num::Int(-4)));
        assert_eq!(Num::Int(1).floor_div(Num::Float(0.1)), Ok(Num::Float(9.0)));
        assert_eq!(
            Num::Float(-7.5).floor_div(Num::Int(2)),
            Ok(Num::Float(-4.0))
        );
        assert_eq!(Num::Float(f64::INFINITY).to_python_string(), "inf");
        assert_eq!(Num::Int(2).pow(Num::Int(-1)), Ok(Num::Float(0.5)));
        assert_eq!(Num::Int(1).true_div(Num::Int(0)), Err("division by zero"));
        assert_eq!(
            Num::Float(1.0).true_div(Num::Int(0)),
            Err("float division by zero")
        );
        assert!(Num::Int(3) < Num::Float(3.5));
    }
}
