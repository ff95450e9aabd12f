//! JSON Lines files that a process appends to, one record per line. A
//! process killed while writing leaves its last line cut short: reading
//! leaves that line out and says so, while any other line that is not a
//! record is an error naming it. A last line that only lacks its newline
//! but holds whole JSON (a file edited by hand) is not torn.

use crate::bom;
use anyhow::{Context, Result};
use serde::de::{DeserializeOwned, IgnoredAny};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The records of a file.
#[derive(Debug)]
pub struct Records<T> {
    pub records: Vec<T>,
    /// The line of the file (from 1) each record is on: blank lines hold none.
    pub lines: Vec<usize>,
    /// A torn last line (a process killed while writing it), left out.
    pub torn_tail: bool,
}

/// Reads the records of `path`, each `what` (e.g. "a trajectory record")
/// as `parse` reads it from its line; a line that is none is an error
/// naming it.
pub fn read<T>(
    path: &Path,
    what: &str,
    parse: impl FnMut(&[u8]) -> Result<T>,
) -> Result<Records<T>> {
    if path.is_dir() {
        anyhow::bail!("{} is a directory, not a file of records", path.display());
    }
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    read_from(BufReader::new(file), path, what, parse)
}

/// As [`read`], a complete line that is no record kept as why it is none
/// (placed within its line) rather than ending the reading: for readers
/// that go on past a damaged line, or say more of what to do about it.
pub fn read_each<T>(
    path: &Path,
    mut parse: impl FnMut(&[u8]) -> Result<T>,
) -> Result<Records<Result<T>>> {
    read(path, "a record", |line| {
        Ok(parse(line).map_err(within_the_line))
    })
}

/// The longest line read, far past any record's: what a device or stream
/// that never ends a line (`/dev/zero`) is stopped at, rather than read
/// until memory runs out.
const LONGEST_LINE: u64 = 256 << 20;

/// As [`read`], of the file at `path` already opened as `reader`: for a
/// writer that checks the file it holds before appending to it.
pub fn read_from<T>(
    mut reader: impl BufRead,
    path: &Path,
    what: &str,
    mut parse: impl FnMut(&[u8]) -> Result<T>,
) -> Result<Records<T>> {
    let mut records = Vec::new();
    let mut lines = Vec::new();
    // Bytes, not text: a line that is not UTF-8 is refused by the parser,
    // which names it, rather than by the reader, which cannot.
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        let read = Read::take(&mut reader, LONGEST_LINE)
            .read_until(b'\n', &mut line)
            .with_context(|| format!("reading {}", path.display()))?;
        if read as u64 == LONGEST_LINE && !line.ends_with(b"\n") {
            anyhow::bail!(
                "{} line {} runs past {} MiB without ending: that is no file of records",
                path.display(),
                number + 1,
                LONGEST_LINE >> 20
            );
        }
        if read == 0 {
            return Ok(Records {
                records,
                lines,
                torn_tail: false,
            });
        }
        number += 1;
        if number == 1 {
            line = bom::strip_bytes(&line).to_vec();
        }
        if !line.ends_with(b"\n") && !is_json(&line) {
            return Ok(Records {
                records,
                lines,
                torn_tail: true,
            });
        }
        if line.trim_ascii().is_empty() {
            continue;
        }
        // Without its line ending: a line cut short is told so, not as a
        // string broken by a control character.
        let content = line.strip_suffix(b"\n").unwrap_or(&line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        let record = parse(content)
            .map_err(within_the_line)
            .with_context(|| format!("{} line {number} is not {what}", path.display()))?;
        records.push(record);
        lines.push(number);
    }
}

/// A JSON error placed within its line. The record is the line, so the
/// parser's "at line 1 column 12" would read as a line of the file.
pub(crate) fn within_the_line(err: anyhow::Error) -> anyhow::Error {
    match err.downcast::<serde_json::Error>() {
        Ok(json) => {
            let text = json.to_string();
            let message = text
                .rsplit_once(" at line ")
                .map_or(text.as_str(), |(message, _)| message);
            match (json.is_eof(), json.line(), json.column()) {
                (true, ..) => anyhow::anyhow!("{message} at the end of the line"),
                (false, 0, _) | (false, _, 0) => anyhow::anyhow!("{message}"),
                (false, _, column) => anyhow::anyhow!("{message} at column {column}"),
            }
        }
        Err(other) => other,
    }
}

/// `line` as a `T` (the `parse` of [`read`] for records that need no more).
pub fn parse<T: DeserializeOwned>(line: &[u8]) -> Result<T> {
    Ok(serde_json::from_slice(line)?)
}

/// Whether `text` is one whole JSON value: what a torn line is not.
pub fn is_json(text: &[u8]) -> bool {
    serde_json::from_slice::<IgnoredAny>(text).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::bail;

    fn read_text(text: &[u8]) -> Result<Records<u32>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.jsonl");
        std::fs::write(&path, text).unwrap();
        read(&path, "a number", |line| match parse::<u32>(line)? {
            n if n < 100 => Ok(n),
            n => bail!("{n} is too large"),
        })
    }

    #[test]
    fn a_torn_last_line_is_left_out_and_a_whole_one_kept() {
        let read = read_text(b"1\n\n2\n3").unwrap();
        assert_eq!((read.records, read.torn_tail), (vec![1, 2, 3], false));
        assert_eq!(read.lines, [1, 3, 4], "records are placed on their lines");
        let read = read_text(b"1\n2\n[3").unwrap();
        assert_eq!((read.records, read.torn_tail), (vec![1, 2], true));
        let error = format!("{:#}", read_text(b"1\n300").unwrap_err());
        assert!(
            error.contains("line 2 is not a number: 300 is too large"),
            "whole JSON is no torn line: {error}"
        );
    }

    #[test]
    fn other_lines_that_are_no_record_are_named() {
        let error = format!("{:#}", read_text(b"1\n[2\n3\n").unwrap_err());
        assert!(error.contains("line 2 is not a number"), "{error}");
        // The parser's position is within the line, not the file.
        let error = format!("{:#}", read_text(b"1\n\"ab\n3\n").unwrap_err());
        assert!(
            error.ends_with("EOF while parsing a string at the end of the line"),
            "a line cut short is said to be: {error}"
        );
        assert!(!error.contains("line 2 column"), "{error}");
        let error = format!("{:#}", read_text(b"1\n2 x\n").unwrap_err());
        assert!(
            error.ends_with("trailing characters at column 3"),
            "{error}"
        );
        let error = format!("{:#}", read_text(b"1\n\xff\n").unwrap_err());
        assert!(error.contains("line 2 is not a number"), "{error}");
        let error = format!("{:#}", read_text(b"1\n2\n300\n").unwrap_err());
        assert!(
            error.contains("line 3 is not a number: 300 is too large"),
            "{error}"
        );
    }
}
