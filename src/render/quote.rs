//! Quoting for the files systemd reads (ExecStart= words, EnvironmentFile= lines) and for the shell
//! scripts kubeunit writes.

/// Quote one word of an ExecStart= line so systemd reads it back unchanged: `%` and `$` doubled
/// (specifier and variable expansion), and C-style double quotes around anything with white space,
/// quotes, backslashes, a lone `;`, or a leading `#` or `;` (on a continuation line systemd would
/// take the word for a comment and drop it).
pub fn systemd_word(arg: &str) -> String {
    let needs_quotes = arg.is_empty()
        || arg.starts_with(['#', ';'])
        || arg
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\'));
    let mut out = String::with_capacity(arg.len() + 2);
    if needs_quotes {
        out.push('"');
    }
    for c in arg.chars() {
        match c {
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            '"' if needs_quotes => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            // Every byte of its UTF-8 form (U+0080..U+009F are two bytes, each escaped).
            c if c.is_control() => {
                for b in c.encode_utf8(&mut [0; 4]).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    if needs_quotes {
        out.push('"');
    }
    out
}

/// A path as the value of a unit setting that takes it verbatim (`EnvironmentFile=`): `%` doubled
/// for the specifier pass. Paths are validated to hold no control characters (they cannot be quoted
/// there).
pub fn systemd_path(path: &str) -> String {
    path.replace('%', "%%")
}

/// An EnvironmentFile= line: `KEY="value"` with the escapes systemd's env-file parser undoes.
pub fn env_file_line(key: &str, value: &str) -> String {
    let mut v = String::new();
    for c in value.chars() {
        match c {
            '"' | '\\' | '$' | '`' => {
                v.push('\\');
                v.push(c);
            }
            c => v.push(c),
        }
    }
    format!("{key}=\"{v}\"\n")
}

/// One word for a POSIX shell: single quotes around it (a `'` inside as `'\''`), which the shell
/// reads back byte for byte. A word of plain characters stays as it is, for a script that reads well.
pub fn shell_word(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '=' | ':' | '+' | ',')
        });
    if plain {
        return arg.to_string();
    }
    format!("'{}'", arg.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_read_back_unchanged() {
        assert_eq!(shell_word("/var/lib/kubeunit/ha"), "/var/lib/kubeunit/ha");
        for word in [
            "",
            "a b",
            "it's",
            "$(reboot)",
            "`id`",
            "a\nb",
            "x\ny",
            "'\"*?[]~#&;|<>",
        ] {
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("printf %s {}", shell_word(word)))
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                word,
                "{}",
                shell_word(word)
            );
        }
    }

    #[test]
    fn quoting() {
        assert_eq!(systemd_word("--v=2"), "--v=2");
        assert_eq!(systemd_word("a b"), "\"a b\"");
        assert_eq!(systemd_word("100%"), "100%%");
        assert_eq!(systemd_word("$HOME"), "$$HOME");
        assert_eq!(systemd_word("say \"hi\""), "\"say \\\"hi\\\"\"");
        assert_eq!(systemd_word(""), "\"\"");
    }
}
