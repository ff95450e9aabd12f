//! Terminal output helpers.

use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Width of tables when stdout is not a terminal (a terminal's own width is
/// used otherwise).
const PIPED_WIDTH: u16 = 160;

/// A table with the house style.
pub fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    // No terminal, or one that says it has no columns (`script`'s).
    if table.width().is_none_or(|width| width == 0) {
        table.set_width(PIPED_WIDTH);
    }
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    table
}

/// How often a progress bar that cannot draw, stderr being no terminal (a
/// job's log file), writes where it is as a line instead.
const LOG_EVERY: Duration = Duration::from_secs(30);

/// A progress bar on stderr, hidden when `quiet` (JSON output); where stderr
/// is not a terminal, a line every [`LOG_EVERY`] while it moves.
pub fn progress(len: u64, quiet: bool) -> ProgressBar {
    progress_logged(len, quiet).0
}

/// [`progress`], and where its place goes to stderr as log lines (stderr
/// being no terminal), the [`PlaceLog`] they are written through, for work
/// to write lines of its own in their order.
pub fn progress_logged(len: u64, quiet: bool) -> (ProgressBar, Option<PlaceLog>) {
    if quiet {
        return (ProgressBar::hidden(), None);
    }
    let bar = ProgressBar::new(len);
    if bar.is_hidden() {
        let log = PlaceLog::new(std::io::stderr());
        log_lines(&bar, LOG_EVERY, log.clone());
        return (bar, Some(log));
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("the template is valid"),
    );
    // Redrawn while nothing finishes (a model thinking, a slow endpoint),
    // so the clock shows the work is alive.
    bar.enable_steady_tick(Duration::from_millis(250));
    (bar, None)
}

/// Writes `err` and its causes to stderr as the one line `error: …`.
pub fn error(err: &anyhow::Error) {
    // Errors quote what files and endpoints hold.
    eprintln!("error: {}", printable(&format!("{err:#}")));
}

/// Writes each retry of `client`'s requests above `bar` as a warning: a
/// rate-limited or failing endpoint otherwise only stalls the bar.
pub fn tell_retries(client: &forge_llm::ChatClient, bar: &ProgressBar) {
    client.on_retry(std::sync::Arc::new(retry_warnings(bar)));
}

/// What [`tell_retries`] tells a client: a warning above `bar` (or, once
/// it is gone, on its own line) for each retry.
pub fn retry_warnings(bar: &ProgressBar) -> impl Fn(&forge_llm::Retrying) + Send + Sync + 'static {
    let bar = bar.downgrade();
    move |retrying| {
        // The error quotes the endpoint's answer.
        let warn = || eprintln!("warning: {}", printable(&retrying.to_string()));
        match bar.upgrade() {
            Some(bar) => bar.suspend(warn),
            None => warn(),
        }
    }
}

/// The log lines written in place of a bar that cannot draw: its place
/// (`[00:01:30] 12/40 message`, as the bar shows it), and lines of the
/// work's own (`[00:01:30] checkpoint …`). The place last written is
/// remembered, so that the periodic lines ([`log_lines`]) do not repeat
/// one that work wrote at a moment of its choosing (an evaluation's
/// result). A log that cannot be written to loses only these lines.
#[derive(Clone)]
pub struct PlaceLog(Arc<Mutex<LogState>>);

struct LogState {
    out: Box<dyn Write + Send>,
    /// The place last written: position and message.
    last: Option<(u64, String)>,
}

impl PlaceLog {
    fn new(out: impl Write + Send + 'static) -> Self {
        Self(Arc::new(Mutex::new(LogState {
            out: Box::new(out),
            last: None,
        })))
    }

    /// Writes `bar`'s place now.
    pub fn place(&self, bar: &ProgressBar) {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = writeln!(
            state.out,
            "{} {}/{} {}",
            elapsed(bar),
            bar.position(),
            bar.length().map_or("?".to_owned(), |len| len.to_string()),
            bar.message()
        );
        state.last = Some((bar.position(), bar.message()));
    }

    /// Writes `line` now, after the time `bar` has run.
    pub fn line(&self, bar: &ProgressBar, line: &str) {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = writeln!(state.out, "{} {line}", elapsed(bar));
    }

    /// Whether `bar` is where the last place written put it.
    fn unmoved(&self, bar: &ProgressBar) -> bool {
        let state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        state.last == Some((bar.position(), bar.message()))
    }
}

/// Writes `bar`'s place to `log` each time `every` has passed in which it
/// moved, and after [`STILL_LOGGED`] of them in which it did not, until it
/// is finished or dropped: long work in a log file shows how far it got,
/// and that it is alive while one step takes long.
fn log_lines(bar: &ProgressBar, every: Duration, log: PlaceLog) {
    let bar = bar.downgrade();
    std::thread::spawn(move || {
        let mut still = 0;
        loop {
            std::thread::sleep(every);
            let Some(bar) = bar.upgrade().filter(|bar| !bar.is_finished()) else {
                return;
            };
            if log.unmoved(&bar) {
                still += 1;
                if still < STILL_LOGGED {
                    continue;
                }
            }
            log.place(&bar);
            still = 0;
        }
    });
}

/// The time `bar` has run, as `[00:01:30]`: what a log line written in
/// place of the bar begins with.
fn elapsed(bar: &ProgressBar) -> String {
    let seconds = bar.elapsed().as_secs();
    format!(
        "[{:02}:{:02}:{:02}]",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// How many intervals without progress pass between the lines that say a
/// bar is still where it was.
const STILL_LOGGED: usize = 10;

/// `n` of a thing named by a regular noun, singular for one: `count(1,
/// "task")` is "1 task", `count(3, "task")` "3 tasks".
pub fn count(n: impl std::fmt::Display, noun: &str) -> String {
    let n = n.to_string();
    let plural = if n == "1" { "" } else { "s" };
    format!("{n} {noun}{plural}")
}

/// A measurement as a table shows it: whole from 100 up, else to three
/// significant digits, so that a small one (`0.0312` µs, `4.27` tokens/s)
/// keeps what tells it apart rather than rounding to `0.03` or `4`.
pub fn measured(value: f64) -> String {
    // Decimals for three significant digits of `value`.
    let decimals = |value: f64| (2 - value.abs().log10().floor() as i32).max(0);
    // Rounded first: 99.96 is 100 (not `100.0`), 9.9996 is `10.0`.
    let rounded = match value == 0.0 || !value.is_finite() {
        true => value,
        false => {
            let scale = 10f64.powi(decimals(value));
            (value * scale).round() / scale
        }
    };
    // `-0` would read as a sign of something.
    let rounded = if rounded == 0.0 { 0.0 } else { rounded };
    if !rounded.is_finite() || rounded.abs() >= 100.0 || rounded == 0.0 {
        return format!("{rounded:.0}");
    }
    format!("{rounded:.*}", decimals(rounded) as usize)
}

/// What a remote model cost, as a summary line says it: "12 requests, 3400
/// prompt and 560 completion tokens".
pub fn usage(usage: &forge_llm::Usage) -> String {
    format!(
        "{}, {} prompt and {} completion tokens",
        count(usage.requests, "request"),
        usage.prompt_tokens,
        usage.completion_tokens
    )
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

/// `text` as a table's cell: [`printable`], its tabs as spaces (a table
/// measures a tab as one column, and the terminal draws up to eight).
pub fn cell(text: &str) -> String {
    printable(text).replace('\t', "    ")
}

/// The last line of `--json` output of `forge run` or `forge eval` cut
/// short (by Ctrl-C or an error), in place of a summary whose rates would
/// read as the whole command's: how many of the episodes finished, and the
/// file that keeps them (none where there is no file).
pub fn json_stopped(interrupted: bool, episodes: u64, planned: u64, out: Option<&Path>) {
    json_line(&serde_json::json!({
        "stopped": true,
        "interrupted": interrupted,
        "episodes": episodes,
        "episodes_planned": planned,
        "out": out,
    }));
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
        // A table measures a tab as one column: its cells hold spaces.
        assert_eq!(cell("a\tb\u{7}"), "a    b\\u{7}");
    }

    #[test]
    fn measurements_keep_three_significant_digits() {
        for (value, shown) in [
            (12345.6, "12346"),
            (100.0, "100"),
            (99.94, "99.9"),
            (4.267, "4.27"),
            (1.0, "1.00"),
            (0.03124, "0.0312"),
            (99.96, "100"),
            (9.9996, "10.0"),
            (0.99996, "1.00"),
            (-3.4049, "-3.40"),
            (-0.0, "0"),
            (0.0, "0"),
        ] {
            assert_eq!(measured(value), shown, "{value}");
        }
    }

    /// What a progress bar logs, shared with the test that reads it.
    #[derive(Clone, Default)]
    struct Log(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Log {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Log {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }

        /// The log once it holds `line`, or what it holds after seconds.
        fn awaiting(&self, line: &str) -> String {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !self.text().contains(line) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            self.text()
        }
    }

    #[test]
    fn a_bar_that_cannot_draw_logs_its_place_while_it_moves() {
        let bar = ProgressBar::hidden();
        bar.set_length(3);
        bar.inc(1);
        bar.set_message("episode 2");
        let log = Log::default();
        let place_log = PlaceLog::new(log.clone());
        log_lines(&bar, Duration::from_millis(20), place_log.clone());
        let first = log.awaiting("1/3 episode 2\n");
        assert!(first.starts_with("[00:00:0") && first.ends_with("] 1/3 episode 2\n"));
        // Standing still, it is logged again only after ten intervals.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(log.text().lines().count(), 1, "{}", log.text());
        let again = log.awaiting("2\n[");
        assert!(again.ends_with("] 1/3 episode 2\n"), "{again}");
        bar.inc(1);
        assert!(log.awaiting("2/3").ends_with("] 2/3 episode 2\n"));
        // A place the work wrote itself is not written again.
        bar.set_message("held-out 0.5");
        place_log.place(&bar);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            log.text().matches("held-out 0.5").count(),
            1,
            "{}",
            log.text()
        );
        // Finished, it is logged no more.
        bar.inc(1);
        bar.finish_and_clear();
        std::thread::sleep(Duration::from_millis(100));
        let finished = log.text();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(log.text(), finished);
    }
}
