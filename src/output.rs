//! Terminal output helpers.

use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressStyle};

/// Width of tables when stdout is not a terminal (a terminal's own width is
/// used otherwise).
const PIPED_WIDTH: u16 = 160;

/// A table with the house style.
pub fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    if table.width().is_none() {
        table.set_width(PIPED_WIDTH);
    }
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    table
}

/// A progress bar on stderr, hidden when `quiet` (JSON output) or when stderr
/// is not a terminal.
pub fn progress(len: u64, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("the template is valid"),
    );
    // Redrawn while nothing finishes (a model thinking, a slow endpoint),
    // so the clock shows the work is alive.
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    bar
}

/// `n` of a thing named by a regular noun, singular for one: `count(1,
/// "task")` is "1 task", `count(3, "task")` "3 tasks".
pub fn count(n: impl std::fmt::Display, noun: &str) -> String {
    let n = n.to_string();
    let plural = if n == "1" { "" } else { "s" };
    format!("{n} {noun}{plural}")
}

/// A content hash's first 12 hex digits, as messages show one (whole where
/// a hash is shorter, as a hand-edited record's may be).
pub fn short_hash(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// `text` safe to write to a terminal: control characters other than
/// newlines and tabs (an escape sequence that would recolour or clear the
/// screen, a carriage return that would overwrite a line) written as
/// escapes (`\u{1b}`). Trajectories carry what remote agents and models
/// sent.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let shown = |c: char| !c.is_control() || c == '\n' || c == '\t';
    if text.chars().all(shown) {
        return text.into();
    }
    text.chars()
        .map(|c| match shown(c) {
            true => c.to_string(),
            false => c.escape_default().to_string(),
        })
        .collect::<String>()
        .into()
}

/// Prints one JSON value on its own line.
pub fn json_line(value: &serde_json::Value) {
    println!("{value}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_reach_the_terminal_as_escapes() {
        assert_eq!(printable("a\tb\nc"), "a\tb\nc");
        assert_eq!(printable("\u{1b}[2Jx\r"), "\\u{1b}[2Jx\\r");
    }
}
