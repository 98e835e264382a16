//! systemd calendar expressions (`OnCalendar=`, systemd.time(7)), checked the way systemd 252's
//! `calendar_spec_from_string()` parses them, so that `gen` refuses what systemd would refuse at
//! `start`: `[WEEKDAYS] [[YEAR-]MONTH-DAY] [HOUR:MINUTE[:SECOND]] [TIMEZONE]`, the shorthands
//! (`hourly`, `daily`, ...) and `@EPOCH`. Each value is `*`, a number, `A..B`, `/REPEAT`, or a `,` list.

use std::path::Path;

/// Why a calendar expression is not one systemd accepts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalendarError {
    #[error("empty")]
    Empty,
    #[error("holds control characters")]
    ControlCharacters,
    #[error("@{0} is not a number of seconds since 1970")]
    Epoch(String),
    #[error("{0:?}: not a weekday (Mon, Tue, ... or Monday, ...)")]
    Weekday(String),
    /// Text at `at` that breaks the grammar: `expected` says what would fit there.
    #[error("{at:?}: {expected}")]
    Syntax { at: String, expected: &'static str },
    /// `rest` left over where the part starting at `at` should have ended.
    #[error("{at:?}: unexpected {rest:?}{after}")]
    Unexpected {
        at: String,
        rest: String,
        after: &'static str,
    },
    #[error("{name} {value} is outside {min}..{max}")]
    OutOfRange {
        name: &'static str,
        value: f64,
        min: u32,
        max: u32,
    },
    #[error("{name} range {start}..{stop} runs backwards")]
    Backwards {
        name: &'static str,
        start: f64,
        stop: f64,
    },
    #[error("{0}: a repetition of 0")]
    ZeroRepetition(&'static str),
    #[error("{0:?}: not a number")]
    NotANumber(String),
}

use CalendarError as E;

fn syntax<T>(at: &str, expected: &'static str) -> Result<T, CalendarError> {
    Err(E::Syntax {
        at: at.to_string(),
        expected,
    })
}

fn unexpected<T>(at: &str, rest: &str, after: &'static str) -> Result<T, CalendarError> {
    Err(E::Unexpected {
        at: at.to_string(),
        rest: rest.to_string(),
        after,
    })
}

const SHORTHANDS: &[&str] = &[
    "minutely",
    "hourly",
    "daily",
    "monthly",
    "weekly",
    "yearly",
    "annually",
    "quarterly",
    "semiannually",
];

/// Full names first: a prefix match must take the longest name.
const WEEKDAYS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "mon",
    "tue",
    "wed",
    "thu",
    "fri",
    "sat",
    "sun",
];

/// Why `spec` is not a calendar expression systemd accepts, if it is not.
pub fn check(spec: &str) -> Result<(), CalendarError> {
    check_with_zones(spec, Path::new("/usr/share/zoneinfo"))
}

fn check_with_zones(spec: &str, zoneinfo: &Path) -> Result<(), CalendarError> {
    if spec.is_empty() {
        return Err(E::Empty);
    }
    if spec.chars().any(|c| c.is_control()) {
        return Err(E::ControlCharacters);
    }
    let mut p = spec;
    // A trailing time zone: UTC, or a name of the tz database (one space before it).
    if let Some((head, zone)) = p.rsplit_once(' ') {
        if zone.eq_ignore_ascii_case("utc") || is_zone(zoneinfo, zone) {
            p = head;
        }
    }
    if SHORTHANDS.iter().any(|s| s.eq_ignore_ascii_case(p)) {
        return Ok(());
    }
    if let Some(epoch) = p.strip_prefix('@') {
        return match epoch.parse::<u64>() {
            Ok(_) => Ok(()),
            Err(_) => Err(E::Epoch(epoch.to_string())),
        };
    }
    let mut rest = weekdays(p)?;
    rest = date(rest)?;
    time(rest)
}

/// A tz database name with a TZif file under `zoneinfo` (what systemd's `timezone_is_valid` wants).
fn is_zone(zoneinfo: &Path, name: &str) -> bool {
    let ok_chars = !name.is_empty()
        && !name.starts_with('/')
        && !name
            .split('/')
            .any(|part| part.is_empty() || part == ".." || part == ".")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'+'));
    if !ok_chars {
        return false;
    }
    let mut magic = [0u8; 4];
    std::fs::File::open(zoneinfo.join(name))
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| &magic == b"TZif")
}

/// The weekday part (`Mon`, `Mon..Fri`, `Sat,Sun`), if the expression starts with one; returns what
/// follows it.
fn weekdays(p: &str) -> Result<&str, CalendarError> {
    let mut t = p;
    let mut first = true;
    loop {
        let lower = t.to_ascii_lowercase();
        let Some(day) = WEEKDAYS.iter().find(|d| lower.starts_with(*d)) else {
            if first {
                return Ok(p);
            }
            return Err(E::Weekday(t.to_string()));
        };
        first = false;
        t = &t[day.len()..];
        match t.bytes().next() {
            None => return Ok(t),
            Some(b' ') => return Ok(t.trim_start_matches(' ')),
            Some(b',') | Some(b'-') => t = &t[1..],
            Some(b'.') if t.starts_with("..") => t = &t[2..],
            Some(_) => return syntax(p, "a weekday must be followed by ',', '..' or a space"),
        }
    }
}

/// Limits of a component: (name, smallest, largest).
type Limits = (&'static str, u32, u32);
const YEAR: Limits = ("year", 1970, 2199);
const MONTH: Limits = ("month", 1, 12);
const DAY: Limits = ("day", 1, 31);
const HOUR: Limits = ("hour", 0, 23);
const MINUTE: Limits = ("minute", 0, 59);
const SECOND: Limits = ("second", 0, 59);

/// The date part (`MONTH-DAY` or `YEAR-MONTH-DAY`, `~` for days counted from the month's end); a
/// first part followed by ':' is the time. Returns what follows.
fn date(p: &str) -> Result<&str, CalendarError> {
    if p.is_empty() {
        return Ok(p);
    }
    let (first, t) = chain(p, false)?;
    if t.is_empty() || t.starts_with(':') {
        return Ok(p);
    }
    let end_of_month = |t: &str| t.starts_with('~');
    if !t.starts_with(['-', '~']) {
        return syntax(p, "expected '-' between the date's parts");
    }
    let tilde = end_of_month(t);
    let (second, t2) = chain(&t[1..], false)?;
    if t2.is_empty() || t2.starts_with(' ') {
        first.within(MONTH)?;
        second.within(DAY)?;
        return Ok(t2.trim_start_matches(' '));
    }
    if tilde {
        return syntax(p, "'~' counts days, after the month");
    }
    if !t2.starts_with(['-', '~']) {
        return syntax(p, "expected '-' between the date's parts");
    }
    let (third, t3) = chain(&t2[1..], false)?;
    if !(t3.is_empty() || t3.starts_with(' ')) {
        return unexpected(p, t3, " after the date");
    }
    first.within(YEAR)?;
    second.within(MONTH)?;
    third.within(DAY)?;
    Ok(t3.trim_start_matches(' '))
}

/// The time part: `HOUR:MINUTE[:SECOND]`, the seconds with an optional fraction. Nothing may follow.
fn time(p: &str) -> Result<(), CalendarError> {
    if p.is_empty() {
        return Ok(());
    }
    let (h, t) = chain(p, false)?;
    let Some(t) = t.strip_prefix(':') else {
        return syntax(p, "a time is HOUR:MINUTE[:SECOND]");
    };
    h.within(HOUR)?;
    let (m, t) = chain(t, false)?;
    m.within(MINUTE)?;
    if t.is_empty() {
        return Ok(());
    }
    let Some(t) = t.strip_prefix(':') else {
        return unexpected(p, t, " after the minutes");
    };
    let (s, t) = chain(t, true)?;
    s.within(SECOND)?;
    if !t.is_empty() {
        return unexpected(p, t, " after the seconds");
    }
    Ok(())
}

/// One component's values: `*`, or a list of `START[..STOP][/REPEAT]`.
struct Chain(Vec<(f64, Option<f64>, Option<f64>)>);

impl Chain {
    fn within(&self, (name, min, max): Limits) -> Result<(), CalendarError> {
        for &(start, stop, repeat) in &self.0 {
            for v in [Some(start), stop].into_iter().flatten() {
                if v < f64::from(min) || v >= f64::from(max) + 1.0 {
                    return Err(E::OutOfRange {
                        name,
                        value: v,
                        min,
                        max,
                    });
                }
            }
            if stop.is_some_and(|s| s < start) {
                return Err(E::Backwards {
                    name,
                    start,
                    stop: stop.unwrap_or(0.0),
                });
            }
            if repeat == Some(0.0) {
                return Err(E::ZeroRepetition(name));
            }
        }
        Ok(())
    }
}

fn chain(p: &str, fraction: bool) -> Result<(Chain, &str), CalendarError> {
    if let Some(rest) = p.strip_prefix('*') {
        return Ok((Chain(vec![]), rest));
    }
    let mut values = Vec::new();
    let mut t = p;
    loop {
        let (start, rest) = decimal(t, fraction)?;
        t = rest;
        let mut stop = None;
        if let Some(rest) = t.strip_prefix("..") {
            let (v, rest) = decimal(rest, fraction)?;
            stop = Some(v);
            t = rest;
        }
        let mut repeat = None;
        if let Some(rest) = t.strip_prefix('/') {
            let (v, rest) = decimal(rest, fraction)?;
            repeat = Some(v);
            t = rest;
        }
        if !(t.is_empty() || t.starts_with([' ', ',', '-', '~', ':'])) {
            return unexpected(p, t, "");
        }
        values.push((start, stop, repeat));
        match t.strip_prefix(',') {
            Some(rest) => t = rest,
            None => return Ok((Chain(values), t)),
        }
    }
}

/// A number (seconds may have a fraction).
fn decimal(p: &str, fraction: bool) -> Result<(f64, &str), CalendarError> {
    let digits = p.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return syntax(p, "expected a number or '*'");
    }
    let mut end = digits;
    if fraction && p[end..].starts_with('.') && !p[end..].starts_with("..") {
        end += 1 + p[end + 1..].bytes().take_while(u8::is_ascii_digit).count();
    }
    let v: f64 = p[..end]
        .parse()
        .map_err(|_| E::NotANumber(p[..end].to_string()))?;
    Ok((v, &p[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What systemd 252 says of each (checked with `systemd-analyze calendar`; the test below asks it
    /// again where it is installed).
    const CASES: &[(&str, bool)] = &[
        ("*/2:00", false),
        ("*:*:0/10", true),
        ("Mon-Fri", true),
        ("mon,wed *-*-* 12:00", true),
        ("0/2:00", true),
        ("12:00:00.5", true),
        ("25:00", false),
        ("2300-01-01", false),
        ("", false),
        ("Mon", true),
        ("Monday 12:00", true),
        ("*-*-1..5/2", true),
        ("1,3,5:00", true),
        ("*:0,30", true),
        ("*:0/15", true),
        ("12:00 Europe/Berlin", true),
        ("hourly UTC", true),
        ("HOURLY", true),
        ("minutely", true),
        ("@1700000000", true),
        ("2026-13-01", false),
        ("12", false),
        ("12:", false),
        ("12:00:00:00", false),
        ("Mon..", false),
        ("*-*", true),
        ("02-29", true),
        ("*~01", true),
        ("Mon,Fri..Sun", true),
        ("5..3:00", false),
        ("0..59/0:00", false),
        ("*:*:*.5", false),
        ("weekly Sat", false),
        ("Sat weekly", false),
        ("  daily  ", false),
        ("daily  UTC", false),
        ("*:0/15 ", false),
        ("1970-01-01", true),
        ("1969-01-01", false),
        ("12:60", false),
        ("*-*-* 00:00:00 Asia/Foo", false),
        ("Mon 00:00", true),
        ("tomorrow", false),
        ("now", false),
        ("*:*:00", true),
        ("6,*:00", false),
        ("Sat,Sun *-*-* 03:30:00 UTC", true),
        ("Fri *-*-1..7 18:00", true),
        ("*-*-* *:*:*", true),
        ("every minute", false),
        ("1m", false),
        ("*-02~03", true),
        ("2026-*~1", true),
    ];

    #[test]
    fn accepts_and_refuses_what_systemd_does() {
        for (spec, ok) in CASES {
            assert_eq!(check(spec).is_ok(), *ok, "{spec:?}: {:?}", check(spec));
        }
    }

    #[test]
    fn agrees_with_systemd_analyze() {
        // The same table against the systemd on this machine (installed by scripts/install-deps.sh).
        for (spec, _) in CASES {
            let out = std::process::Command::new("systemd-analyze")
                .args(["calendar", spec])
                .output()
                .expect("systemd-analyze (apt-get install systemd)");
            assert_eq!(
                check(spec).is_ok(),
                out.status.success(),
                "{spec:?}: kubeunit says {:?}, systemd-analyze {}",
                check(spec),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
