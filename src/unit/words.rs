//! The value syntax of unit files: specifiers, C-style quoted words, booleans, time spans, limits,
//! sizes and signals, as systemd reads them.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    #[error("specifier %{0} is not supported in a transient unit (write %% for a percent sign)")]
    Specifier(char),
    #[error("a lone % at the end (write %% for a percent sign)")]
    LonePercent,
    #[error("a trailing backslash")]
    TrailingBackslash,
    #[error("bad escape \\x{0}")]
    Escape(String),
    #[error("an unterminated quote")]
    UnterminatedQuote,
}

/// Resolve specifiers. Units kubeunit renders use only `%%`; any other specifier depends on the
/// unit-file context systemd would fill in, so it is refused rather than guessed.
pub fn specifiers(value: &str) -> Result<String, SyntaxError> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some('%') => out.push('%'),
                Some(s) => return Err(SyntaxError::Specifier(s)),
                None => return Err(SyntaxError::LonePercent),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Split like systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE): words separated by
/// white space, double or single quotes group, C escapes are resolved. `$$` stays as is: systemd
/// turns it into `$` at exec time for unit files and transient units alike.
pub fn split_words(s: &str) -> Result<Vec<String>, SyntaxError> {
    let mut words = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(words);
        }
        let mut word = String::new();
        let mut quote: Option<char> = None;
        while let Some(&c) = chars.peek() {
            if quote.is_none() && c.is_whitespace() {
                break;
            }
            chars.next();
            match (quote, c) {
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (_, '\\') => {
                    let e = chars.next().ok_or(SyntaxError::TrailingBackslash)?;
                    match e {
                        'n' => word.push('\n'),
                        't' => word.push('\t'),
                        'r' => word.push('\r'),
                        'a' => word.push('\x07'),
                        'b' => word.push('\x08'),
                        'f' => word.push('\x0c'),
                        'v' => word.push('\x0b'),
                        's' => word.push(' '),
                        'x' => {
                            let hex: String = chars.by_ref().take(2).collect();
                            let b = u8::from_str_radix(&hex, 16)
                                .map_err(|_| SyntaxError::Escape(hex.clone()))?;
                            word.push(b as char);
                        }
                        other => word.push(other),
                    }
                }
                (_, c) => word.push(c),
            }
        }
        if quote.is_some() {
            return Err(SyntaxError::UnterminatedQuote);
        }
        words.push(word);
    }
}

pub fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "yes" | "true" | "on" | "y" | "t" => Some(true),
        "0" | "no" | "false" | "off" | "n" | "f" => Some(false),
        _ => None,
    }
}

/// systemd time span: `90`, `1s`, `500ms`, `2min`, `1h 30min`, `infinity` -> microseconds.
pub fn parse_timespan(s: &str) -> Option<u64> {
    let s = s.trim();
    if s == "infinity" {
        return Some(u64::MAX);
    }
    if let Ok(secs) = s.parse::<u64>() {
        return secs.checked_mul(1_000_000);
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        rest = rest.trim_start();
        let num_end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let num: f64 = rest[..num_end].parse().ok()?;
        rest = rest[num_end..].trim_start();
        let unit_end = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let factor: f64 = match unit {
            "us" | "usec" | "µs" => 1.0,
            "ms" | "msec" => 1e3,
            "" | "s" | "sec" | "second" | "seconds" => 1e6,
            "m" | "min" | "minute" | "minutes" => 60e6,
            "h" | "hr" | "hour" | "hours" => 3600e6,
            "d" | "day" | "days" => 86400e6,
            "w" | "week" | "weeks" => 604800e6,
            _ => return None,
        };
        total = total.checked_add((num * factor) as u64)?;
    }
    Some(total)
}

pub fn parse_limit(s: &str, bytes: bool) -> Option<u64> {
    let s = s.trim();
    if s == "infinity" {
        return Some(u64::MAX);
    }
    if !bytes {
        return s.parse().ok();
    }
    let (num, mult) = match s.char_indices().last()? {
        (i, 'K') => (&s[..i], 1u64 << 10),
        (i, 'M') => (&s[..i], 1 << 20),
        (i, 'G') => (&s[..i], 1 << 30),
        (i, 'T') => (&s[..i], 1 << 40),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

pub fn parse_signal(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse() {
        return Some(n);
    }
    let name = s.strip_prefix("SIG").unwrap_or(s);
    Some(match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "TERM" => 15,
        "CONT" => 18,
        "STOP" => 19,
        _ => return None,
    })
}
