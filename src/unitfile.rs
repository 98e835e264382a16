//! Unit file -> StartTransientUnit properties.
//!
//! `start` reads the unit files in the state dir (so a user's edit takes effect) and hands systemd the
//! same settings as D-Bus properties. systemd has no API that loads a unit file as a transient unit,
//! and no crate parses unit files with systemd's quoting rules, so this module does: line
//! continuations, comments, `%%`, C-style quoting in ExecStart=, `*Sec=` to microseconds. Every key
//! it does not know is an error naming the file and line: nothing is dropped silently.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// A property value, in the D-Bus type systemd expects for that property.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Bool(bool),
    U64(u64),
    I32(i32),
    Strings(Vec<String>),
    /// a(sasb): path, argv (with argv[0]), ignore failure.
    Exec(Vec<(String, Vec<String>, bool)>),
    /// a(sb): path, ignore if missing.
    EnvFiles(Vec<(String, bool)>),
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Str,
    Bool,
    /// A time span; the property is the key with `Sec` replaced by `USec`.
    Usec,
    /// A number, or `infinity` (u64::MAX).
    Limit,
    /// Bytes with K/M/G/T suffixes (base 1024), or `infinity`.
    Bytes,
    Signal,
    /// Space-separated list; repeated keys accumulate, an empty value resets.
    List,
    /// Like List but words are unquoted (Environment=).
    QuotedList,
    Exec,
    EnvFile,
}

/// Every key `start` can translate, by section. Anything else is an error.
const KEYS: &[(&str, &str, Kind)] = &[
    ("Unit", "Description", Kind::Str),
    ("Unit", "Documentation", Kind::List),
    ("Unit", "Requires", Kind::List),
    ("Unit", "Requisite", Kind::List),
    ("Unit", "Wants", Kind::List),
    ("Unit", "BindsTo", Kind::List),
    ("Unit", "PartOf", Kind::List),
    ("Unit", "Conflicts", Kind::List),
    ("Unit", "Before", Kind::List),
    ("Unit", "After", Kind::List),
    ("Unit", "OnFailure", Kind::List),
    ("Unit", "CollectMode", Kind::Str),
    ("Service", "Type", Kind::Str),
    ("Service", "NotifyAccess", Kind::Str),
    ("Service", "ExecStart", Kind::Exec),
    ("Service", "ExecStartPre", Kind::Exec),
    ("Service", "ExecStartPost", Kind::Exec),
    ("Service", "ExecStop", Kind::Exec),
    ("Service", "ExecStopPost", Kind::Exec),
    ("Service", "ExecReload", Kind::Exec),
    ("Service", "Environment", Kind::QuotedList),
    ("Service", "EnvironmentFile", Kind::EnvFile),
    ("Service", "WorkingDirectory", Kind::Str),
    ("Service", "Restart", Kind::Str),
    ("Service", "RestartSec", Kind::Usec),
    ("Service", "TimeoutStartSec", Kind::Usec),
    ("Service", "TimeoutStopSec", Kind::Usec),
    ("Service", "RemainAfterExit", Kind::Bool),
    ("Service", "KillMode", Kind::Str),
    ("Service", "KillSignal", Kind::Signal),
    ("Service", "SendSIGKILL", Kind::Bool),
    ("Service", "Slice", Kind::Str),
    ("Service", "Delegate", Kind::Bool),
    ("Service", "LimitNOFILE", Kind::Limit),
    ("Service", "LimitCORE", Kind::Limit),
    ("Service", "User", Kind::Str),
    ("Service", "Group", Kind::Str),
    ("Service", "SyslogIdentifier", Kind::Str),
    ("Service", "StandardOutput", Kind::Str),
    ("Service", "StandardError", Kind::Str),
    ("Service", "ReadWritePaths", Kind::List),
    ("Service", "MemoryMax", Kind::Bytes),
    ("Service", "TasksMax", Kind::Limit),
];

/// A parsed unit file: the properties in file order (lists merged into their first occurrence).
#[derive(Debug, Clone)]
pub struct UnitFile {
    pub path: PathBuf,
    /// Unit name (the file name).
    pub name: String,
    pub properties: Vec<(String, Value)>,
}

impl UnitFile {
    pub fn read(path: &Path) -> Result<UnitFile, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Artifact {
            path: path.to_path_buf(),
            message: format!("cannot read unit file: {e}"),
            fix: "run `kubeunit gen` to regenerate the state dir".into(),
        })?;
        parse(path, &text)
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.properties
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// argv of ExecStart (with argv[0]).
    pub fn exec_start(&self) -> Option<&(String, Vec<String>, bool)> {
        match self.get("ExecStart") {
            Some(Value::Exec(cmds)) => cmds.first(),
            _ => None,
        }
    }
}

/// Parse unit file text. `path` is only used in errors and for the unit name.
pub fn parse(path: &Path, text: &str) -> Result<UnitFile, Error> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let err = |line: usize, message: String, fix: &str| Error::Artifact {
        path: PathBuf::from(format!("{}:{line}", path.display())),
        message,
        fix: fix.into(),
    };
    let mut props: Vec<(String, Value)> = Vec::new();
    let mut section = String::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((idx, raw)) = lines.next() {
        let lineno = idx + 1;
        let mut line = raw.trim().to_string();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        // Continuation: a trailing backslash joins the next line (comment lines in between are skipped).
        while line.ends_with('\\') {
            line.pop();
            line.push(' ');
            loop {
                match lines.next() {
                    Some((_, next))
                        if next.trim_start().starts_with('#')
                            || next.trim_start().starts_with(';') =>
                    {
                        continue
                    }
                    Some((_, next)) => {
                        line.push_str(next.trim());
                        break;
                    }
                    None => break,
                }
            }
        }
        if line.starts_with('[') {
            if !line.ends_with(']') {
                return Err(err(
                    lineno,
                    format!("malformed section header {line:?}"),
                    "write [Unit] or [Service]",
                ));
            }
            section = line[1..line.len() - 1].to_string();
            if section != "Unit" && section != "Service" {
                return Err(err(
                    lineno,
                    format!("section [{section}] has no meaning for a transient unit"),
                    "remove the section; kubeunit starts units itself",
                ));
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(err(
                lineno,
                format!("not a Key=Value line: {line:?}"),
                "fix the line",
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        let Some(&(_, _, kind)) = KEYS.iter().find(|(s, k, _)| *s == section && *k == key) else {
            return Err(err(
                lineno,
                format!("kubeunit cannot pass {key}= in [{section}] to systemd as a transient unit property"),
                &format!(
                    "remove it, or use one of: {}",
                    KEYS.iter()
                        .filter(|(s, _, _)| *s == section)
                        .map(|(_, k, _)| *k)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        let bad = |what: &str| {
            err(
                lineno,
                format!("{key}={value}: {what}"),
                "write the value as systemd.service(5) describes",
            )
        };
        let value = specifiers(value).map_err(|m| bad(&m))?;
        let (prop, val) = match kind {
            Kind::Str => (key.to_string(), Value::Str(value)),
            Kind::Bool => (
                key.to_string(),
                Value::Bool(parse_bool(&value).ok_or_else(|| bad("not a boolean"))?),
            ),
            Kind::Usec => (
                key.replace("Sec", "USec"),
                Value::U64(parse_timespan(&value).ok_or_else(|| bad("not a time span"))?),
            ),
            Kind::Limit => (
                key.to_string(),
                Value::U64(parse_limit(&value, false).ok_or_else(|| bad("not a number"))?),
            ),
            Kind::Bytes => (
                key.to_string(),
                Value::U64(parse_limit(&value, true).ok_or_else(|| bad("not a size"))?),
            ),
            Kind::Signal => (
                key.to_string(),
                Value::I32(parse_signal(&value).ok_or_else(|| bad("not a signal"))?),
            ),
            Kind::List => (
                key.to_string(),
                Value::Strings(value.split_whitespace().map(String::from).collect()),
            ),
            Kind::QuotedList => (
                key.to_string(),
                Value::Strings(split_words(&value).map_err(|m| bad(&m))?),
            ),
            Kind::Exec => {
                if value.is_empty() {
                    (key.to_string(), Value::Exec(vec![]))
                } else {
                    let mut words = split_words(&value).map_err(|m| bad(&m))?;
                    if words.is_empty() {
                        return Err(bad("no command"));
                    }
                    let mut path = words[0].clone();
                    let ignore = path.starts_with('-');
                    if ignore {
                        path.remove(0);
                        words[0] = path.clone();
                    }
                    if path.starts_with(['@', ':', '+', '!']) {
                        return Err(bad("command prefixes other than '-' are not supported"));
                    }
                    if !path.starts_with('/') {
                        return Err(bad("the command must be an absolute path"));
                    }
                    (key.to_string(), Value::Exec(vec![(path, words, ignore)]))
                }
            }
            Kind::EnvFile => {
                let (p, optional) = match value.strip_prefix('-') {
                    Some(rest) => (rest.to_string(), true),
                    None => (value.clone(), false),
                };
                (
                    "EnvironmentFiles".to_string(),
                    Value::EnvFiles(vec![(p, optional)]),
                )
            }
        };
        merge(&mut props, prop, val);
    }
    Ok(UnitFile {
        path: path.to_path_buf(),
        name,
        properties: props,
    })
}

/// Repeated list keys accumulate; an empty assignment resets the list (systemd's rule).
fn merge(props: &mut Vec<(String, Value)>, name: String, val: Value) {
    let existing = props.iter_mut().find(|(n, _)| *n == name);
    match (existing, val) {
        (Some((_, Value::Strings(a))), Value::Strings(b)) => {
            if b.is_empty() {
                a.clear()
            } else {
                a.extend(b)
            }
        }
        (Some((_, Value::Exec(a))), Value::Exec(b)) => {
            if b.is_empty() {
                a.clear()
            } else {
                a.extend(b)
            }
        }
        (Some((_, Value::EnvFiles(a))), Value::EnvFiles(b)) => a.extend(b),
        (Some((_, slot)), v) => *slot = v,
        (None, v) => props.push((name, v)),
    }
}

/// Resolve specifiers. Units kubeunit renders use only `%%`; any other specifier depends on the
/// unit-file context systemd would fill in, so it is refused rather than guessed.
fn specifiers(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some('%') => out.push('%'),
                Some(s) => return Err(format!("specifier %{s} is not supported in a transient unit (write %% for a percent sign)")),
                None => return Err("a lone % at the end (write %% for a percent sign)".into()),
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
pub fn split_words(s: &str) -> Result<Vec<String>, String> {
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
                    let e = chars.next().ok_or("a trailing backslash")?;
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
                                .map_err(|_| format!("bad escape \\x{hex}"))?;
                            word.push(b as char);
                        }
                        other => word.push(other),
                    }
                }
                (_, c) => word.push(c),
            }
        }
        if quote.is_some() {
            return Err("an unterminated quote".into());
        }
        words.push(word);
    }
}

fn parse_bool(s: &str) -> Option<bool> {
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

fn parse_limit(s: &str, bytes: bool) -> Option<u64> {
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

fn parse_signal(s: &str) -> Option<i32> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::systemd_word;

    #[test]
    fn words_round_trip_through_systemd_quoting() {
        for arg in [
            "plain",
            "a b",
            "say \"hi\"",
            "back\\slash",
            "",
            "tab\there",
            "it's",
        ] {
            let quoted = systemd_word(arg);
            let line = format!("/bin/x {quoted} --end");
            let words = split_words(&specifiers(&line).unwrap()).unwrap();
            assert_eq!(
                words,
                vec!["/bin/x".to_string(), arg.to_string(), "--end".into()],
                "{quoted}"
            );
        }
        // % is doubled by the renderer and resolved by the specifier pass; $$ is left for exec time.
        let words = split_words(&specifiers(&systemd_word("100% of $HOME")).unwrap()).unwrap();
        assert_eq!(words, vec!["100% of $$HOME".to_string()]);
    }

    #[test]
    fn parses_a_rendered_unit() {
        let text = "# c\n[Unit]\nDescription=x y\nRequires=a.service\nAfter=a.service b.service\n\n[Service]\nType=notify\n\
                    ExecStart=/usr/bin/etcd \\\n    --name=x \\\n    \"--v=a b\"\nRestartSec=1s\nTimeoutStartSec=2min\n\
                    LimitNOFILE=1048576\nDelegate=yes\nEnvironmentFile=-/e\n";
        let u = parse(Path::new("/s/kubeunit-a-etcd.service"), text).unwrap();
        assert_eq!(u.name, "kubeunit-a-etcd.service");
        assert_eq!(u.get("Description"), Some(&Value::Str("x y".into())));
        assert_eq!(
            u.get("After"),
            Some(&Value::Strings(vec![
                "a.service".into(),
                "b.service".into()
            ]))
        );
        assert_eq!(
            u.exec_start().unwrap(),
            &(
                "/usr/bin/etcd".to_string(),
                vec![
                    "/usr/bin/etcd".to_string(),
                    "--name=x".into(),
                    "--v=a b".into()
                ],
                false
            )
        );
        assert_eq!(u.get("RestartUSec"), Some(&Value::U64(1_000_000)));
        assert_eq!(u.get("TimeoutStartUSec"), Some(&Value::U64(120_000_000)));
        assert_eq!(u.get("Delegate"), Some(&Value::Bool(true)));
        assert_eq!(
            u.get("EnvironmentFiles"),
            Some(&Value::EnvFiles(vec![("/e".into(), true)]))
        );
    }

    #[test]
    fn unknown_keys_name_file_and_line() {
        let e = parse(
            Path::new("/s/u.service"),
            "[Service]\nType=exec\nProtectSystem=strict\n",
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("/s/u.service:3") && msg.contains("ProtectSystem"),
            "{msg}"
        );
        let e = parse(
            Path::new("/s/u.service"),
            "[Install]\nWantedBy=multi-user.target\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("[Install]"));
    }

    #[test]
    fn timespans() {
        assert_eq!(parse_timespan("90"), Some(90_000_000));
        assert_eq!(parse_timespan("500ms"), Some(500_000));
        assert_eq!(parse_timespan("1min 30s"), Some(90_000_000));
        assert_eq!(parse_timespan("infinity"), Some(u64::MAX));
        assert_eq!(parse_timespan("soon"), None);
    }
}
