//! A UTF-8 byte-order mark before JSON, as editors on Windows write one:
//! RFC 8259 lets a parser ignore it, and serde_json refuses it as "expected
//! value at line 1 column 1", which names nothing. Files people edit are
//! read without it.

const BOM: &str = "\u{feff}";

/// `text` without a leading byte-order mark.
pub fn strip(text: &str) -> &str {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// `bytes` without a leading byte-order mark.
pub fn strip_bytes(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM.as_bytes()).unwrap_or(bytes)
}
