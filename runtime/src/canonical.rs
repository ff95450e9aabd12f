//! Canonical JSON: the exact bytes Python's
//! `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`
//! writes, and its sha256.
//!
//! The benchmark suites compare databases by hashing that text, so Forge must
//! reproduce it to the byte (the rules live in `forge-pycompat`).

use forge_pycompat::json::Dumps;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// The canonical text of `value`.
pub fn to_string(value: &Value) -> String {
    forge_pycompat::to_canonical(value)
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
    Dumps::CANONICAL.write(out, value);
}

/// Appends the canonical text of the string `text` to `out`.
pub fn write_str(out: &mut String, text: &str) {
    forge_pycompat::write_str(out, text, false);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sha256_is_of_the_canonical_text() {
        // python3 -c 'import json,hashlib;print(hashlib.sha256(json.dumps({"b":1,"a":[0.5]},sort_keys=True,separators=(",",":"),ensure_ascii=False).encode()).hexdigest())'
        assert_eq!(
            sha256_hex(&json!({"b": 1, "a": [0.5]})),
            "1c6e9e1e92b8d1d5246b5ebb3591fcd42716c42b8323a237d3ebd430be8cc8ff"
        );
    }
}
