//! Parsers of the CLI's numeric flags: a value that cannot mean anything
//! (a probability of 1.5, a temperature of NaN, 0 sessions) is refused by
//! clap, naming the flag and the value, before any work starts.

pub(crate) fn probability(text: &str) -> Result<f64, String> {
    number_where(
        text,
        |p| (0.0..=1.0).contains(p),
        "a probability between 0 and 1",
    )
}

pub(crate) fn temperature(text: &str) -> Result<f32, String> {
    number_where(
        text,
        |t: &f32| t.is_finite() && *t >= 0.0,
        "a temperature: a number, 0 (greedy) or more",
    )
}

pub(crate) fn nucleus_mass(text: &str) -> Result<f32, String> {
    number_where(
        text,
        |p| *p > 0.0 && *p <= 1.0,
        "a nucleus mass: a number above 0, at most 1",
    )
}

pub(crate) fn at_least_one(text: &str) -> Result<usize, String> {
    number_where(text, |n| *n >= 1, "a whole number of at least 1")
}

/// [`at_least_one`] for a `u64` flag.
pub(crate) fn at_least_one_u64(text: &str) -> Result<u64, String> {
    at_least_one(text).map(|n| n as u64)
}

/// The most tasks `forge synth` makes of a domain: generating and verifying
/// them grows faster than their number (ten thousand take minutes), and a
/// count typed a few digits too long would run for days.
const MOST_SYNTH_TASKS: usize = 10_000;

pub(crate) fn synth_tasks(text: &str) -> Result<usize, String> {
    number_where(
        text,
        |n| (1..=MOST_SYNTH_TASKS).contains(n),
        &format!("a number of tasks from 1 to {MOST_SYNTH_TASKS}"),
    )
}

/// The most random-policy episodes verification plays per task: a
/// solve rate measured to a thousandth needs no more.
const MOST_RANDOM_TRIALS: u64 = 1_000;

pub(crate) fn random_trials(text: &str) -> Result<u64, String> {
    number_where(
        text,
        |n| *n <= MOST_RANDOM_TRIALS,
        &format!("a number of episodes from 0 to {MOST_RANDOM_TRIALS}"),
    )
}

/// The most sessions a server holds: each reserves an instance's memory
/// (address space, mostly), which runs out past about this many.
const MOST_SESSIONS: usize = 10_000;

pub(crate) fn session_count(text: &str) -> Result<usize, String> {
    number_where(
        text,
        |n| (1..=MOST_SESSIONS).contains(n),
        &format!("a number of sessions from 1 to {MOST_SESSIONS}"),
    )
}

/// The fewest bootstrap resamples a 95% percentile interval is read from:
/// with fewer, its 2.5th and 97.5th percentiles are a draw or two apart, or
/// the same draw.
const FEWEST_RESAMPLES: usize = 100;

pub(crate) fn resamples(text: &str) -> Result<usize, String> {
    number_where(
        text,
        |n| *n >= FEWEST_RESAMPLES,
        &format!("at least {FEWEST_RESAMPLES} resamples, which a 95% interval is read from"),
    )
}

pub(crate) fn positive(text: &str) -> Result<f64, String> {
    number_where(
        text,
        |x: &f64| x.is_finite() && *x > 0.0,
        "a positive number",
    )
}

/// A flag's number, if it parses and `accept` takes it; otherwise an error
/// naming the text and what was `expected`.
fn number_where<T: std::str::FromStr>(
    text: &str,
    accept: impl Fn(&T) -> bool,
    expected: &str,
) -> Result<T, String> {
    match text.parse::<T>() {
        Ok(value) if accept(&value) => Ok(value),
        Err(_) if too_large(text) => Err(format!("`{text}` is too large for {expected}")),
        _ => Err(format!("`{text}` is not {expected}")),
    }
}

/// Whether `text` is a whole number that failed to parse: one past what
/// its type holds, which "is not a whole number" would misdescribe.
pub(crate) fn too_large(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit())
}

/// The longest a measurement may be asked to run: a year. Deadlines are
/// instants, which a longer duration could carry past what the clock holds.
const MOST_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// Seconds of a measurement: above 0, at most a year.
pub(crate) fn seconds(text: &str) -> Result<f64, String> {
    number_where(
        text,
        |x: &f64| *x > 0.0 && *x <= MOST_SECONDS,
        "a number of seconds above 0, at most a year (31536000)",
    )
}

/// A request's timeout: whole seconds from 1 to a day (a deadline further
/// off could carry past what the clock holds; no reply takes that long).
pub(crate) fn request_timeout(text: &str) -> Result<u64, String> {
    const DAY: u64 = 24 * 3600;
    number_where(
        text,
        |n: &u64| (1..=DAY).contains(n),
        &format!("a whole number of seconds from 1 to a day ({DAY})"),
    )
}

/// A run's time limit: seconds from 0 (a new run: one step, then stop; a
/// resumed one, whose steps' times it knows: none) to a year.
pub(crate) fn time_limit(text: &str) -> Result<std::time::Duration, String> {
    number_where(
        text,
        |x: &f64| (0.0..=MOST_SECONDS).contains(x),
        "a number of seconds from 0 to a year (31536000)",
    )
    .map(std::time::Duration::from_secs_f64)
}

/// The most trials per task of `forge run` and `forge eval`: every episode's
/// record is held until the report, so a mistyped count would exhaust memory.
pub(crate) const MOST_TRIALS: u64 = 100_000;
