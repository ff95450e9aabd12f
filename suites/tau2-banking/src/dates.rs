//! The domain's fixed clock (`utils.get_today`, `get_now`: 2025-11-14
//! 03:40:00) and the `%m/%d/%Y` dates its records hold.

/// `get_today_str()`.
pub const TODAY: &str = "11/14/2025";

/// A calendar date as days since 1970-01-01.
pub type Day = i64;

/// `datetime.strptime(text, "%m/%d/%Y")` as a day; `None` where Python
/// raises a `ValueError` (month and day take one or two digits, the year
/// four).
pub fn parse_mdy(text: &str) -> Option<Day> {
    let mut parts = text.split('/');
    let (month, day, year) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let digits = |part: &str, min: usize, max: usize| {
        (min..=max).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit())
    };
    if !digits(month, 1, 2) || !digits(day, 1, 2) || !digits(year, 4, 4) {
        return None;
    }
    let (year, month, day): (i64, u32, u32) =
        (year.parse().ok()?, month.parse().ok()?, day.parse().ok()?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month, day))
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
        assert_eq!(parse_mdy("02/30/2025"), None);
        assert_eq!(parse_mdy("2025-11-14"), None);
    }
}
