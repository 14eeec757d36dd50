//! `strftime_now(format)`: today's date, as templates write it into a system turn.
//!
//! Hugging Face gives templates Python's `datetime.now().strftime(format)`; Llama 3.2's writes
//! `"Today Date: " + strftime_now("%d %b %Y")`, Mistral Small's `%Y-%m-%d`. This formats a
//! Unix time in UTC with the directives C's `strftime` shares across platforms in the C
//! locale, and refuses any other directive by name rather than guess.

use minijinja::{Error, ErrorKind};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A day in the proleptic Gregorian calendar, and a time of day.
#[derive(Debug, PartialEq)]
struct Civil {
    year: i64,
    month: usize, // 1..=12
    day: i64,     // 1..=31
    yday: i64,    // 1..=366
    weekday: usize,
    hour: i64,
    minute: i64,
    second: i64,
}

/// The UTC date and time of `unix` seconds: days since 1970 counted in 400-year eras of
/// 146097 days, each era's years starting in March so that February's leap day comes last.
fn civil(unix: i64) -> Civil {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097; // day of the era, 0..146097
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of the era
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of the March-based year
    let mp = (5 * doy + 2) / 153; // March = 0
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let before: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = before[month as usize - 1] + day + i64::from(leap && month > 2);
    Civil {
        year,
        month: month as usize,
        day,
        yday,
        weekday: (days + 4).rem_euclid(7) as usize, // 1970-01-01 was a Thursday
        hour: secs / 3600,
        minute: secs / 60 % 60,
        second: secs % 60,
    }
}

/// `format` with its `%` directives filled in from `unix` seconds (UTC).
pub fn strftime(format: &str, unix: i64) -> Result<String, Error> {
    let t = civil(unix);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let d = chars.next();
        let text = match d {
            Some('Y') => t.year.to_string(),
            Some('y') => format!("{:02}", t.year.rem_euclid(100)),
            Some('m') => format!("{:02}", t.month),
            Some('B') => MONTHS[t.month - 1].to_string(),
            Some('b') => MONTHS[t.month - 1][..3].to_string(),
            Some('d') => format!("{:02}", t.day),
            Some('j') => format!("{:03}", t.yday),
            Some('A') => DAYS[t.weekday].to_string(),
            Some('a') => DAYS[t.weekday][..3].to_string(),
            Some('w') => t.weekday.to_string(),
            Some('H') => format!("{:02}", t.hour),
            Some('I') => format!("{:02}", (t.hour + 11) % 12 + 1),
            Some('p') => if t.hour < 12 { "AM" } else { "PM" }.to_string(),
            Some('M') => format!("{:02}", t.minute),
            Some('S') => format!("{:02}", t.second),
            Some('%') => "%".to_string(),
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!(
                        "strftime_now: the directive %{} is not supported by this renderer",
                        other.map(String::from).unwrap_or_default()
                    ),
                ));
            }
        };
        out.push_str(&text);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_those_python_gives() {
        // Each: Unix seconds, and Python's
        // datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S %a %j").
        for (t, want) in [
            (0, "1970-01-01 00:00:00 Thu 001"),
            (951_782_400, "2000-02-29 00:00:00 Tue 060"),
            (1_741_338_302, "2025-03-07 09:05:02 Fri 066"),
            (4_107_542_399, "2100-02-28 23:59:59 Sun 059"),
            (-1, "1969-12-31 23:59:59 Wed 365"),
        ] {
            assert_eq!(strftime("%Y-%m-%d %H:%M:%S %a %j", t).unwrap(), want);
        }
        assert_eq!(
            strftime("%d %b %Y, %B %A %I %p %y %w %%", 1_741_338_302).unwrap(),
            "07 Mar 2025, March Friday 09 AM 25 5 %"
        );
        let e = strftime("%c", 0).unwrap_err();
        assert!(e.to_string().contains("%c is not supported"), "{e}");
    }
}
