//! The domain's fixed clock (`utils.get_today`, `get_now`: 2025-11-14
//! 03:40:00) and the `%m/%d/%Y` dates its records hold.

use crate::py::Raised;
use forge_tau_guest::type_name;
use serde_json::Value;

/// `get_today_str()`.
pub const TODAY: &str = "11/14/2025";

/// A calendar date as days since 1970-01-01.
pub type Day = i64;

/// `datetime.strptime(text, "%m/%d/%Y")` as a day; `None` where Python
/// raises a `ValueError`.
pub fn parse_mdy(text: &str) -> Option<Day> {
    match leading_mdy(text)? {
        (date, "") => Some(date),
        _ => None,
    }
}

/// `datetime.strptime(value, "%m/%d/%Y")` of a record's value: `None` where
/// Python raises a `ValueError`, the `TypeError` of a value that is no
/// string.
pub fn strptime_mdy(value: &Value) -> Result<Option<Day>, Raised> {
    match value {
        Value::String(text) => Ok(parse_mdy(text)),
        Value::Null => Err(Raised::Type(
            "strptime() argument 1 must be str, not None".to_owned(),
        )),
        other => Err(Raised::Type(format!(
            "strptime() argument 1 must be str, not {}",
            type_name(other)
        ))),
    }
}

/// The `%m/%d/%Y` starting `text` as `strptime` reads it (month and day one
/// or two digits, the day also a space and one digit, the year four digits
/// and not 0), and what follows it.
pub fn leading_mdy(text: &str) -> Option<(Day, &str)> {
    let (month, rest) = number_field(text, 1, 12)?;
    let rest = rest.strip_prefix('/')?;
    let (day, rest) = day_field(rest)?;
    let rest = rest.strip_prefix('/')?;
    let year: i64 = rest
        .get(..4)
        .filter(|year| year.bytes().all(|b| b.is_ascii_digit()))?
        .parse()
        .ok()?;
    if year == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some((days_from_civil(year, month, day), &rest[4..]))
}

/// The ` %H:%M:%S` ending a timestamp (any run of whitespace before it) as
/// seconds into the day; `None` where `strptime` refuses it.
pub fn time_of_day(text: &str) -> Option<u32> {
    let time = text.trim_start();
    if time.len() == text.len() {
        return None;
    }
    let (hours, rest) = number_field(time, 0, 23)?;
    let (minutes, rest) = number_field(rest.strip_prefix(':')?, 0, 59)?;
    let (seconds, rest) = number_field(rest.strip_prefix(':')?, 0, 59)?;
    rest.is_empty()
        .then_some(hours * 3600 + minutes * 60 + seconds)
}

/// One to two digits starting `text`, read as `strptime`'s pattern for a
/// numeric field reads them: their value (within `min..=max`) and the rest.
fn number_field(text: &str, min: u32, max: u32) -> Option<(u32, &str)> {
    let digits = text.bytes().take(2).take_while(u8::is_ascii_digit).count();
    let value: u32 = text.get(..digits)?.parse().ok()?;
    (min..=max)
        .contains(&value)
        .then(|| (value, &text[digits..]))
}

/// A `%d`: one or two digits `1`-`31`, or a space and one digit.
fn day_field(text: &str) -> Option<(u32, &str)> {
    match text.strip_prefix(' ') {
        Some(rest) => number_field(rest.get(..1)?, 1, 9).map(|(day, _)| (day, &rest[1..])),
        None => number_field(text, 1, 31),
    }
}

/// Today as a day.
pub fn today() -> Day {
    days_from_civil(2025, 11, 14)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> Day {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_as_strptime_does() {
        assert_eq!(parse_mdy("01/01/1970"), Some(0));
        assert_eq!(parse_mdy("11/14/2025"), Some(today()));
        assert_eq!(
            parse_mdy("3/1/2024").unwrap() - parse_mdy("2/28/2024").unwrap(),
            2
        );
        assert_eq!(parse_mdy("11/ 5/2025"), parse_mdy("11/5/2025"));
        assert_eq!(parse_mdy("02/30/2025"), None);
        assert_eq!(parse_mdy("01/01/0000"), None);
        assert_eq!(parse_mdy("2025-11-14"), None);
        assert_eq!(
            strptime_mdy(&serde_json::json!(null)),
            Err(Raised::Type(
                "strptime() argument 1 must be str, not None".to_owned()
            ))
        );
    }
}
