//! Unit file text -> properties: sections, keys, continuations, values.

use std::path::{Path, PathBuf};

use crate::error::Error;

use super::words::{
    is_ws, parse_bool, parse_limit, parse_signal, parse_timespan, specifiers, split_commands,
    split_words, WHITESPACE,
};

/// A property value, in the D-Bus type systemd expects for that property.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Bool(bool),
    U64(u64),
    I32(i32),
    Strings(Vec<String>),
    /// a(sasb): path, argv (with argv[0]), ignore failure; a(sasas) as the key's `Ex` property
    /// when a command has a prefix only that form carries (`+`).
    Exec(Vec<(String, Vec<String>, ExecFlags)>),
    /// a(ss): LoadCredential= (id, path), TemporaryFileSystem= (path, options).
    Pairs(Vec<(String, String)>),
    /// a(ssbt): BindPaths=, BindReadOnlyPaths= (source, destination, ignore if missing, mount
    /// flags: MS_REC for systemd's default `rbind`).
    Binds(Vec<(String, String, bool, u64)>),
    U32(u32),
    /// a(sb): path, ignore if missing.
    EnvFiles(Vec<(String, bool)>),
    /// a(ss): timer base (`OnCalendar`), calendar expression (the `TimersCalendar` property).
    Calendar(Vec<(String, String)>),
}

/// An Exec*= command's prefixes that kubeunit passes on (systemd.service(5), "Table 1").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecFlags {
    /// `-`: a failure is recorded and ignored.
    pub ignore_failure: bool,
    /// `+`: runs as root, outside the unit's User= and file system namespacing.
    pub privileged: bool,
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
    /// OnCalendar=: repeated keys accumulate into TimersCalendar, an empty value resets.
    Calendar,
    /// An octal file mode creation mask (UMask=).
    Octal,
    /// `ID:PATH` (LoadCredential=): repeated keys accumulate.
    Credential,
    /// Space-separated `PATH[:OPTIONS]` (TemporaryFileSystem=): repeated keys accumulate, an empty
    /// value resets.
    TmpFs,
    /// Space-separated `[-]SOURCE[:DESTINATION[:OPTIONS]]` (BindPaths=): repeated keys accumulate,
    /// an empty value resets.
    Bind,
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
    ("Service", "UMask", Kind::Octal),
    ("Service", "LoadCredential", Kind::Credential),
    ("Service", "TemporaryFileSystem", Kind::TmpFs),
    ("Service", "BindPaths", Kind::Bind),
    ("Service", "BindReadOnlyPaths", Kind::Bind),
    ("Service", "NetworkNamespacePath", Kind::Str),
    ("Service", "MemoryMax", Kind::Bytes),
    ("Service", "MemoryAccounting", Kind::Bool),
    ("Service", "TasksMax", Kind::Limit),
    ("Timer", "OnCalendar", Kind::Calendar),
    ("Timer", "Persistent", Kind::Bool),
    ("Timer", "AccuracySec", Kind::Usec),
    ("Timer", "RandomizedDelaySec", Kind::Usec),
    ("Timer", "RemainAfterElapse", Kind::Bool),
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
    pub fn exec_start(&self) -> Option<&(String, Vec<String>, ExecFlags)> {
        match self.get("ExecStart") {
            Some(Value::Exec(cmds)) => cmds.first(),
            _ => None,
        }
    }
}

/// What is wrong with one line, and the fix.
struct LineError {
    message: String,
    fix: String,
}

impl LineError {
    fn new(message: impl Into<String>, fix: impl Into<String>) -> LineError {
        LineError {
            message: message.into(),
            fix: fix.into(),
        }
    }
}

/// Parse unit file text. `path` is only used in errors and for the unit name.
pub fn parse(path: &Path, text: &str) -> Result<UnitFile, Error> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut props: Vec<(String, Value)> = Vec::new();
    let mut section = String::new();
    for (lineno, line) in logical_lines(text) {
        let step = match line.strip_prefix('[') {
            Some(header) => section_name(header, &name).map(|s| section = s),
            None => property(&section, &line).map(|(prop, value)| merge(&mut props, prop, value)),
        };
        step.map_err(|e| Error::Artifact {
            path: PathBuf::from(format!("{}:{lineno}", path.display())),
            message: e.message,
            fix: e.fix,
        })?;
    }
    let oneshot = props
        .iter()
        .any(|(n, v)| n == "Type" && *v == Value::Str("oneshot".into()));
    let execs = props.iter().find_map(|(n, v)| match (n.as_str(), v) {
        ("ExecStart", Value::Exec(cmds)) => Some(cmds.len()),
        _ => None,
    });
    if !oneshot && execs.is_some_and(|n| n > 1) {
        return Err(Error::Artifact {
            path: path.to_path_buf(),
            message: "more than one ExecStart= command (systemd allows that only for Type=oneshot)"
                .into(),
            fix: "keep one command (a lone ';' separates commands: write \\; for a ';' argument)"
                .into(),
        });
    }
    Ok(UnitFile {
        path: path.to_path_buf(),
        name,
        properties: props,
    })
}

fn is_comment(line: &str) -> bool {
    line.trim_start_matches(WHITESPACE).starts_with(['#', ';'])
}

/// Whether `line` ends in a backslash that no backslash before it escapes (systemd continues only
/// then; `\\` at the end is an escaped backslash).
fn ends_in_unescaped_backslash(line: &str) -> bool {
    let mut escaped = false;
    for c in line.chars() {
        escaped = !escaped && c == '\\';
    }
    escaped
}

/// Lines as systemd's config parser reads them, with the number of the first: blank and comment
/// lines dropped; a line ending in an unescaped backslash continues on the next (the backslash
/// becomes a space; comment lines in between are skipped; a continuation still open at the end of
/// the file is used as it is); each logical line stripped of systemd's white space.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (idx, raw) in text.lines().enumerate() {
        let (start, mut line) = match open.take() {
            Some((start, acc)) if is_comment(raw) => {
                open = Some((start, acc));
                continue;
            }
            Some((start, mut acc)) => {
                acc.push_str(raw);
                (start, acc)
            }
            None => {
                let stripped = raw.trim_matches(WHITESPACE);
                if stripped.is_empty() || is_comment(stripped) {
                    continue;
                }
                (idx + 1, raw.to_string())
            }
        };
        if ends_in_unescaped_backslash(&line) {
            line.pop();
            line.push(' ');
            open = Some((start, line));
            continue;
        }
        out.push((start, line.trim_matches(WHITESPACE).to_string()));
    }
    if let Some((start, line)) = open {
        out.push((start, line.trim_matches(WHITESPACE).to_string()));
    }
    out
}

/// `[Unit]`, and `[Service]` in a service or `[Timer]` in a timer (given without the opening
/// bracket).
fn section_name(header: &str, unit: &str) -> Result<String, LineError> {
    let own = if unit.ends_with(".timer") {
        "Timer"
    } else {
        "Service"
    };
    let Some(section) = header.strip_suffix(']') else {
        return Err(LineError::new(
            format!("malformed section header \"[{header}\""),
            format!("write [Unit] or [{own}]"),
        ));
    };
    if section == "Service" || section == "Timer" {
        if section != own {
            return Err(LineError::new(
                format!("section [{section}] does not belong in {unit}"),
                format!("use [Unit] and [{own}]"),
            ));
        }
    } else if section != "Unit" {
        return Err(LineError::new(
            format!("section [{section}] has no meaning for a transient unit"),
            "remove the section; kubeunit starts units itself",
        ));
    }
    Ok(section.to_string())
}

/// One `Key=Value` line of `section` as the D-Bus property systemd expects.
fn property(section: &str, line: &str) -> Result<(String, Value), LineError> {
    let Some((key, value)) = line.split_once('=') else {
        return Err(LineError::new(
            format!("not a Key=Value line: {line:?}"),
            "fix the line",
        ));
    };
    let (key, value) = (key.trim_matches(WHITESPACE), value.trim_matches(WHITESPACE));
    let Some(&(_, _, kind)) = KEYS.iter().find(|(s, k, _)| *s == section && *k == key) else {
        let known: Vec<&str> = KEYS
            .iter()
            .filter(|(s, _, _)| *s == section)
            .map(|(_, k, _)| *k)
            .collect();
        return Err(LineError::new(
            format!(
                "kubeunit cannot pass {key}= in [{section}] to systemd as a transient unit property"
            ),
            format!("remove it, or use one of: {}", known.join(", ")),
        ));
    };
    let bad = |what: &dyn std::fmt::Display| {
        LineError::new(
            format!("{key}={value}: {what}"),
            "write the value as systemd.service(5) describes",
        )
    };
    let value = specifiers(value).map_err(|e| bad(&e))?;
    let plain = |v: Value| Ok((key.to_string(), v));
    match kind {
        Kind::Str => plain(Value::Str(value)),
        Kind::Bool => plain(Value::Bool(
            parse_bool(&value).ok_or_else(|| bad(&"not a boolean"))?,
        )),
        Kind::Usec => Ok((
            key.replace("Sec", "USec"),
            Value::U64(parse_timespan(&value).ok_or_else(|| bad(&"not a time span"))?),
        )),
        Kind::Limit => plain(Value::U64(
            parse_limit(&value, false).ok_or_else(|| bad(&"not a number"))?,
        )),
        Kind::Bytes => plain(Value::U64(
            parse_limit(&value, true).ok_or_else(|| bad(&"not a size"))?,
        )),
        Kind::Signal => plain(Value::I32(
            parse_signal(&value).ok_or_else(|| bad(&"not a signal"))?,
        )),
        Kind::List => plain(Value::Strings(
            value
                .split(is_ws)
                .filter(|w| !w.is_empty())
                .map(String::from)
                .collect(),
        )),
        Kind::QuotedList => plain(Value::Strings(split_words(&value).map_err(|e| bad(&e))?)),
        // An empty assignment resets the list (`merge`).
        Kind::Exec => plain(Value::Exec(exec_commands(&value).map_err(|e| bad(&e))?)),
        // An empty assignment resets the list (`merge`).
        Kind::Calendar if value.is_empty() => {
            Ok(("TimersCalendar".to_string(), Value::Calendar(vec![])))
        }
        Kind::Calendar => {
            crate::systemd::calendar::check(&value).map_err(|why| {
                LineError::new(
                    format!("{key}={value}: not a calendar expression: {why}"),
                    "write it as systemd.time(7) describes (systemd-analyze calendar EXPR checks one)",
                )
            })?;
            Ok((
                "TimersCalendar".to_string(),
                Value::Calendar(vec![("OnCalendar".to_string(), value)]),
            ))
        }
        Kind::Octal | Kind::Credential | Kind::TmpFs | Kind::Bind => Ok((
            key.to_string(),
            sandbox_value(kind, &value).map_err(|e| bad(&e))?,
        )),
        // An empty assignment resets the list (`merge`).
        Kind::EnvFile if value.is_empty() => {
            Ok(("EnvironmentFiles".to_string(), Value::EnvFiles(vec![])))
        }
        Kind::EnvFile => {
            let (p, optional) = match value.strip_prefix('-') {
                Some(rest) => (rest.to_string(), true),
                None => (value.clone(), false),
            };
            if !p.starts_with('/') {
                return Err(bad(&"not an absolute path"));
            }
            Ok((
                "EnvironmentFiles".to_string(),
                Value::EnvFiles(vec![(p, optional)]),
            ))
        }
    }
}

/// The value of a key of a unit's sandbox (UMask=, LoadCredential=, TemporaryFileSystem=,
/// BindPaths=), or why systemd would refuse it.
fn sandbox_value(kind: Kind, value: &str) -> Result<Value, String> {
    match kind {
        Kind::Octal => u32::from_str_radix(value, 8)
            .ok()
            .filter(|m| *m <= 0o7777)
            .map(Value::U32)
            .ok_or_else(|| "not an octal mode (e.g. 0077)".to_string()),
        // An empty assignment resets the list (`merge`).
        Kind::Credential if value.is_empty() => Ok(Value::Pairs(vec![])),
        Kind::Credential => {
            let (id, path) = value
                .split_once(':')
                .filter(|(id, p)| !id.is_empty() && !id.contains('/') && p.starts_with('/'))
                .ok_or_else(|| "not ID:PATH with an absolute path".to_string())?;
            Ok(Value::Pairs(vec![(id.to_string(), path.to_string())]))
        }
        // An empty assignment resets the list (`merge`).
        Kind::TmpFs => {
            let mut mounts = Vec::new();
            for word in split_words(value).map_err(|e| e.to_string())? {
                let (path, options) = word.split_once(':').unwrap_or((&word, ""));
                if !path.starts_with('/') {
                    return Err("not an absolute path".into());
                }
                mounts.push((path.to_string(), options.to_string()));
            }
            Ok(Value::Pairs(mounts))
        }
        // An empty assignment resets the list (`merge`).
        Kind::Bind => binds(value).map(Value::Binds),
        _ => Err("not a sandbox key".into()),
    }
}

/// BindPaths= words: `[-]SOURCE[:DESTINATION[:OPTIONS]]`, the destination the source when not
/// given; OPTIONS `rbind` (systemd's default) or `norbind`.
fn binds(value: &str) -> Result<Vec<(String, String, bool, u64)>, String> {
    // MS_REC from <sys/mount.h>: what `rbind` means to systemd's bus property.
    const MS_REC: u64 = 16384;
    let mut out = Vec::new();
    for word in split_words(value).map_err(|e| e.to_string())? {
        let (ignore, rest) = match word.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, word.as_str()),
        };
        let mut parts = rest.splitn(3, ':');
        let source = parts.next().unwrap_or_default();
        let destination = parts.next().unwrap_or(source);
        let flags = match parts.next().unwrap_or("rbind") {
            "rbind" | "" => MS_REC,
            "norbind" => 0,
            other => return Err(format!("unknown bind option {other:?} (rbind or norbind)")),
        };
        if !source.starts_with('/') || !destination.starts_with('/') {
            return Err(format!("{word:?}: not absolute paths"));
        }
        out.push((source.to_string(), destination.to_string(), ignore, flags));
    }
    Ok(out)
}

/// Why systemd would refuse an Exec*= value.
#[derive(Debug, thiserror::Error)]
enum BadExec {
    #[error("{0}")]
    Syntax(#[from] super::words::SyntaxError),
    #[error("command prefixes other than '-' and '+' are not supported")]
    Prefix,
    #[error("the command must be an absolute path")]
    Relative,
    #[error(
        "the command path holds quotes, backslashes or control characters, which systemd refuses"
    )]
    Unsafe,
}

/// An Exec*= value's commands: (path, argv, prefixes `-` and `+`).
fn exec_commands(value: &str) -> Result<Vec<(String, Vec<String>, ExecFlags)>, BadExec> {
    let mut cmds = Vec::new();
    for mut words in split_commands(value)? {
        let Some(first) = words.first_mut() else {
            continue;
        };
        // Prefixes come in any order, each once (systemd's config_parse_exec).
        let mut flags = ExecFlags::default();
        loop {
            if !flags.ignore_failure && first.starts_with('-') {
                flags.ignore_failure = true;
            } else if !flags.privileged && first.starts_with('+') {
                flags.privileged = true;
            } else {
                break;
            }
            first.remove(0);
        }
        let path = first.clone();
        if path.starts_with(['@', ':', '+', '!', '-']) {
            return Err(BadExec::Prefix);
        }
        if !path.starts_with('/') {
            return Err(BadExec::Relative);
        }
        // systemd's string_is_safe() on the executable name.
        if path
            .chars()
            .any(|c| c.is_control() || matches!(c, '"' | '\'' | '\\'))
        {
            return Err(BadExec::Unsafe);
        }
        cmds.push((path, words, flags));
    }
    Ok(cmds)
}

fn reset_or_extend<T>(list: &mut Vec<T>, more: Vec<T>) {
    if more.is_empty() {
        list.clear()
    } else {
        list.extend(more)
    }
}

/// Repeated list keys accumulate; an empty assignment resets the list (systemd's rule).
fn merge(props: &mut Vec<(String, Value)>, name: String, val: Value) {
    let existing = props.iter_mut().find(|(n, _)| *n == name);
    match (existing, val) {
        (Some((_, Value::Strings(a))), Value::Strings(b)) => reset_or_extend(a, b),
        (Some((_, Value::Exec(a))), Value::Exec(b)) => reset_or_extend(a, b),
        (Some((_, Value::EnvFiles(a))), Value::EnvFiles(b)) => reset_or_extend(a, b),
        (Some((_, Value::Pairs(a))), Value::Pairs(b)) => reset_or_extend(a, b),
        (Some((_, Value::Binds(a))), Value::Binds(b)) => reset_or_extend(a, b),
        (Some((_, Value::Calendar(a))), Value::Calendar(b)) => reset_or_extend(a, b),
        (Some((_, slot)), v) => *slot = v,
        (None, v) => props.push((name, v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::quote::systemd_word;

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
                ExecFlags::default()
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

    /// ExecStart's argvs, or parse's error as text.
    fn exec(text: &str) -> Result<Vec<Vec<String>>, Error> {
        let unit = format!("[Service]\nType=exec\n{text}\n");
        let u = parse(Path::new("/s/u.service"), &unit)?;
        Ok(match u.get("ExecStart") {
            Some(Value::Exec(cmds)) => cmds.iter().map(|(_, argv, _)| argv.clone()).collect(),
            _ => vec![],
        })
    }

    #[test]
    fn continuations_follow_systemd() {
        // Only an unescaped final backslash continues; comment lines inside are skipped.
        assert_eq!(
            exec("ExecStart=/bin/x a \\\n# c \"\n  ; c\n  b").unwrap(),
            vec![vec!["/bin/x", "a", "b"]]
        );
        // An escaped backslash at the end is an argument, and the next line a key of its own.
        let e = exec("ExecStart=/bin/x a\\\\\nFoo=bar")
            .unwrap_err()
            .to_string();
        assert!(e.contains("u.service:4") && e.contains("Foo"), "{e}");
        // A blank line ends a continuation; one still open at the end of the file is used.
        let e = exec("ExecStart=/bin/x \\\n\nFoo=b")
            .unwrap_err()
            .to_string();
        assert!(e.contains("u.service:5"), "{e}");
        assert_eq!(
            exec("ExecStart=/bin/x a \\").unwrap(),
            vec![vec!["/bin/x", "a"]]
        );
        // A word starting with '#' on a continuation line is a comment: quoted, it is a word.
        assert_eq!(
            exec("ExecStart=/bin/x \\\n    \"#a\" \\\n    #b\n").unwrap(),
            vec![vec!["/bin/x", "#a"]]
        );
    }

    #[test]
    fn semicolons_and_escapes_follow_systemd() {
        assert_eq!(
            exec("ExecStart=/bin/x \\; \";\" a;").unwrap(),
            vec![vec!["/bin/x", ";", ";", "a;"]]
        );
        let e = exec("ExecStart=/bin/x a ; /bin/y").unwrap_err().to_string();
        assert!(e.contains("more than one ExecStart"), "{e}");
        assert_eq!(
            exec("ExecStart=/bin/x \\101\\u00e9\\U0001F600\\xc3\\xa9\\s").unwrap(),
            vec![vec!["/bin/x", "A\u{e9}\u{1F600}\u{e9} "]]
        );
        for bad in [
            "\\q", "\\e", "\\x00", "\\400", "\\18", "\\u0000", "\\uD800", "\\xff", "\\x4",
        ] {
            let e = exec(&format!("ExecStart=/bin/x a{bad}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("u.service:3"), "{bad}: {e}");
        }
        // Only systemd's white space splits words.
        assert_eq!(
            exec("ExecStart=/bin/x a\u{a0}b\tc\u{2003}d").unwrap(),
            vec![vec!["/bin/x", "a\u{a0}b", "c\u{2003}d"]]
        );
    }

    #[test]
    fn timers() {
        let text = "[Unit]\nDescription=t\n[Timer]\nOnCalendar=hourly\nOnCalendar=*:0/15\nPersistent=no\nAccuracySec=1s\n";
        let u = parse(Path::new("/s/kubeunit-a-x.timer"), text).unwrap();
        assert_eq!(
            u.get("TimersCalendar"),
            Some(&Value::Calendar(vec![
                ("OnCalendar".into(), "hourly".into()),
                ("OnCalendar".into(), "*:0/15".into())
            ]))
        );
        assert_eq!(u.get("Persistent"), Some(&Value::Bool(false)));
        assert_eq!(u.get("AccuracyUSec"), Some(&Value::U64(1_000_000)));
        // An empty OnCalendar= resets the list; a wrong expression names file and line.
        let u = parse(
            Path::new("/s/a.timer"),
            "[Timer]\nOnCalendar=hourly\nOnCalendar=\nOnCalendar=daily\n",
        )
        .unwrap();
        assert_eq!(
            u.get("TimersCalendar"),
            Some(&Value::Calendar(vec![(
                "OnCalendar".into(),
                "daily".into()
            )]))
        );
        let e = parse(Path::new("/s/a.timer"), "[Timer]\nOnCalendar=every hour\n").unwrap_err();
        assert!(e.to_string().contains("/s/a.timer:2"), "{e}");
        // Each section in its own kind of unit.
        let e = parse(Path::new("/s/a.timer"), "[Service]\nType=exec\n").unwrap_err();
        assert!(e.to_string().contains("[Service] does not belong"), "{e}");
        let e = parse(Path::new("/s/a.service"), "[Timer]\nPersistent=yes\n").unwrap_err();
        assert!(e.to_string().contains("[Timer] does not belong"), "{e}");
    }

    #[test]
    fn an_empty_environment_file_resets_the_list() {
        let u = parse(
            Path::new("/s/u.service"),
            "[Service]\nEnvironmentFile=/a\nEnvironmentFile=\nEnvironmentFile=-/b\n",
        )
        .unwrap();
        assert_eq!(
            u.get("EnvironmentFiles"),
            Some(&Value::EnvFiles(vec![("/b".into(), true)]))
        );
    }

    #[test]
    fn an_own_users_sandbox_keys_parse_as_systemd_takes_them() {
        let u = parse(
            Path::new("/s/u.service"),
            "[Service]\nType=exec\nExecStartPre=+/bin/mkdir -p /d\nExecStartPre=-+/bin/true\n\
             ExecStart=/bin/x\nUMask=0077\nLoadCredential=a.key:/s/pki/a.key\n\
             LoadCredential=b:/p:q\nTemporaryFileSystem=/tmp /root:ro\n\
             BindPaths=/tmp/d -/o:/n:norbind\nBindReadOnlyPaths=/root/bin/x\n",
        )
        .unwrap();
        let plus = ExecFlags {
            ignore_failure: false,
            privileged: true,
        };
        let both = ExecFlags {
            ignore_failure: true,
            privileged: true,
        };
        assert_eq!(
            u.get("ExecStartPre"),
            Some(&Value::Exec(vec![
                (
                    "/bin/mkdir".into(),
                    vec!["/bin/mkdir".into(), "-p".into(), "/d".into()],
                    plus
                ),
                ("/bin/true".into(), vec!["/bin/true".into()], both),
            ]))
        );
        assert_eq!(u.get("UMask"), Some(&Value::U32(0o077)));
        assert_eq!(
            u.get("LoadCredential"),
            Some(&Value::Pairs(vec![
                ("a.key".into(), "/s/pki/a.key".into()),
                ("b".into(), "/p:q".into())
            ]))
        );
        assert_eq!(
            u.get("TemporaryFileSystem"),
            Some(&Value::Pairs(vec![
                ("/tmp".into(), "".into()),
                ("/root".into(), "ro".into())
            ]))
        );
        assert_eq!(
            u.get("BindPaths"),
            Some(&Value::Binds(vec![
                ("/tmp/d".into(), "/tmp/d".into(), false, 16384),
                ("/o".into(), "/n".into(), true, 0)
            ]))
        );
        assert_eq!(
            u.get("BindReadOnlyPaths"),
            Some(&Value::Binds(vec![(
                "/root/bin/x".into(),
                "/root/bin/x".into(),
                false,
                16384
            )]))
        );
        // What systemd would refuse is refused here, by line.
        for bad in [
            "ExecStartPre=!/bin/x",
            "ExecStartPre=++/bin/x",
            "UMask=0888",
            "UMask=u=rwx",
            "LoadCredential=nopath",
            "LoadCredential=a/b:/p",
            "LoadCredential=a:relative",
            "TemporaryFileSystem=relative",
            "BindPaths=/a:relative",
            "BindPaths=/a:/b:bogus",
        ] {
            let text = format!("[Service]\nType=exec\nExecStart=/bin/x\n{bad}\n");
            let e = parse(Path::new("/s/u.service"), &text).unwrap_err();
            assert!(e.to_string().contains("u.service:4"), "{bad}: {e}");
        }
    }

    proptest::proptest! {
        /// Any argv kubeunit renders (no NUL: validation refuses it) reads back unchanged through
        /// the unit file and its continuation lines, `$` left doubled for systemd's exec-time pass.
        #[test]
        fn rendered_argv_round_trips(args in proptest::collection::vec("[^\\x00]{0,12}", 0..6)) {
            let words: Vec<String> = args.iter().map(|a| systemd_word(a)).collect();
            let text = format!(
                "[Service]\nType=exec\nExecStart=/bin/x{}\n",
                words.iter().map(|w| format!(" \\\n    {w}")).collect::<String>()
            );
            let u = parse(Path::new("/s/u.service"), &text).map_err(|e| {
                proptest::test_runner::TestCaseError::fail(format!("{e}\n{text}"))
            })?;
            let mut want = vec!["/bin/x".to_string()];
            want.extend(args.iter().map(|a| a.replace('$', "$$")));
            proptest::prop_assert_eq!(&u.exec_start().unwrap().1, &want, "{}", text);
            // And word by word, as the quoting function promises.
            for a in &args {
                let back = split_words(&specifiers(&systemd_word(a)).unwrap()).unwrap();
                proptest::prop_assert_eq!(back, vec![a.replace('$', "$$")]);
            }
        }
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
