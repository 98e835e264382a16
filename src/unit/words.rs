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
    #[error("bad escape \\{0} (systemd knows \\a \\b \\f \\n \\r \\t \\v \\s \\\\ \\\" \\' \\xHH \\NNN \\uXXXX \\UXXXXXXXX, none of them zero)")]
    Escape(String),
    #[error("escapes that do not form UTF-8 text (a transient unit's strings are UTF-8): {0:?}")]
    NotUtf8(String),
    #[error("an unterminated quote")]
    UnterminatedQuote,
}

/// White space as systemd splits and strips it (`WHITESPACE`): not Unicode's.
pub const WHITESPACE: &[char] = &[' ', '\t', '\n', '\r'];

pub fn is_ws(c: char) -> bool {
    WHITESPACE.contains(&c)
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

/// `n` hex digits from `chars` as a number, or the escape's text for the error.
fn hex(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    n: usize,
    prefix: char,
) -> Result<u32, SyntaxError> {
    let digits: String = chars.by_ref().take(n).collect();
    if digits.len() != n || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(SyntaxError::Escape(format!("{prefix}{digits}")));
    }
    u32::from_str_radix(&digits, 16).map_err(|_| SyntaxError::Escape(format!("{prefix}{digits}")))
}

/// One C escape after a backslash (systemd's cunescape_one), appended to `word` as bytes.
fn escape(
    e: char,
    chars: &mut std::iter::Peekable<std::str::Chars>,
    word: &mut Vec<u8>,
) -> Result<(), SyntaxError> {
    let mut push = |c: char| word.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    match e {
        'a' => push('\x07'),
        'b' => push('\x08'),
        'f' => push('\x0c'),
        'n' => push('\n'),
        'r' => push('\r'),
        't' => push('\t'),
        'v' => push('\x0b'),
        's' => push(' '),
        '\\' | '"' | '\'' => push(e),
        'x' => {
            let b = hex(chars, 2, 'x')?;
            if b == 0 {
                return Err(SyntaxError::Escape("x00".into()));
            }
            word.push(b as u8);
        }
        'u' | 'U' => {
            let n = if e == 'u' { 4 } else { 8 };
            let v = hex(chars, n, e)?;
            match char::from_u32(v).filter(|c| *c != '\0') {
                Some(c) => push(c),
                None => return Err(SyntaxError::Escape(format!("{e}{v:0n$x}"))),
            }
        }
        '0'..='7' => {
            let rest: String = chars.by_ref().take(2).collect();
            let text = format!("{e}{rest}");
            let v = (rest.len() == 2 && rest.chars().all(|c| c.is_digit(8)))
                .then(|| u32::from_str_radix(&text, 8).ok())
                .flatten()
                .filter(|v| (1..=255).contains(v))
                .ok_or(SyntaxError::Escape(text))?;
            word.push(v as u8);
        }
        other => return Err(SyntaxError::Escape(other.to_string())),
    }
    Ok(())
}

/// The next word of `chars` (systemd's extract_first_word with EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE),
/// leading white space skipped; `None` at the end.
fn next_word(
    chars: &mut std::iter::Peekable<std::str::Chars>,
) -> Result<Option<String>, SyntaxError> {
    while chars.peek().is_some_and(|c| is_ws(*c)) {
        chars.next();
    }
    if chars.peek().is_none() {
        return Ok(None);
    }
    let mut word: Vec<u8> = Vec::new();
    let mut quote: Option<char> = None;
    while let Some(&c) = chars.peek() {
        if quote.is_none() && is_ws(c) {
            break;
        }
        chars.next();
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (_, '\\') => {
                let e = chars.next().ok_or(SyntaxError::TrailingBackslash)?;
                escape(e, chars, &mut word)?;
            }
            (_, c) => word.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    if quote.is_some() {
        return Err(SyntaxError::UnterminatedQuote);
    }
    String::from_utf8(word)
        .map(Some)
        .map_err(|e| SyntaxError::NotUtf8(String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Split like systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE): words separated by
/// systemd's white space (space, tab, newline, carriage return), double or single quotes group,
/// C escapes are resolved, unknown ones refused. `$$` stays as is: systemd turns it into `$` at exec
/// time for unit files and transient units alike.
pub fn split_words(s: &str) -> Result<Vec<String>, SyntaxError> {
    let mut chars = s.chars().peekable();
    let mut words = Vec::new();
    while let Some(w) = next_word(&mut chars)? {
        words.push(w);
    }
    Ok(words)
}

/// An Exec*= value as systemd reads it: commands separated by a lone unquoted `;`, with `\;` as a
/// literal `;` argument; empty commands dropped.
pub fn split_commands(s: &str) -> Result<Vec<Vec<String>>, SyntaxError> {
    let mut commands = Vec::new();
    let mut current = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start_matches(WHITESPACE);
        if rest.is_empty() {
            break;
        }
        let lone = |token: &str| {
            rest.strip_prefix(token)
                .filter(|r| r.is_empty() || r.starts_with(WHITESPACE))
        };
        if let Some(r) = lone(";") {
            commands.push(std::mem::take(&mut current));
            rest = r;
            continue;
        }
        if let Some(r) = lone("\\;") {
            current.push(";".to_string());
            rest = r;
            continue;
        }
        let mut chars = rest.chars().peekable();
        let Some(word) = next_word(&mut chars)? else {
            break;
        };
        current.push(word);
        let consumed = rest.len() - chars.collect::<String>().len();
        rest = &rest[consumed..];
    }
    commands.push(current);
    Ok(commands.into_iter().filter(|c| !c.is_empty()).collect())
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

/// The value of `--NAME=VALUE` (or `--NAME VALUE`) in an argv.
pub fn flag_value(argv: &[String], name: &str) -> Option<String> {
    let long = format!("--{name}");
    let eq = format!("{long}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        if let Some(v) = a.strip_prefix(&eq) {
            Some(v.to_string())
        } else if *a == long {
            argv.get(i + 1).cloned()
        } else {
            None
        }
    })
}
