//! The docs' kubeunit commands against the CLI: every `kubeunit ...` command line in README.md and
//! docs/*.md (fenced blocks, `$ ` prompts, inline code) must parse with the real clap definition, so
//! a renamed command or flag cannot stay documented. A line whose command is a placeholder
//! (`kubeunit COMMAND --help`) is left out. What the commands then do is the other areas' business.

use std::path::Path;

use clap::Parser;
use kubeunit::cli::Cli;

/// The code in a Markdown page: each line of a fenced block, and each inline code span (a paragraph's
/// lines joined first: a span may wrap).
fn code(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut fenced = false;
    let mut paragraph = String::new();
    let spans = |paragraph: &str, pieces: &mut Vec<String>| {
        pieces.extend(paragraph.split('`').skip(1).step_by(2).map(String::from));
    };
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            pieces.push(line.to_string());
        } else if line.trim().is_empty() {
            spans(&paragraph, &mut pieces);
            paragraph.clear();
        } else {
            paragraph.push(' ');
            paragraph.push_str(line.trim());
        }
    }
    spans(&paragraph, &mut pieces);
    pieces
}

/// Every kubeunit command in a piece of code: from `kubeunit` (or `scripts/kubeunit`) to the end of
/// the shell command (a pipe, `&&`, `;`, a redirect, a comment or a closing parenthesis).
fn commands(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = find_command(rest) {
        let after = &rest[at..];
        let end = after
            .find(['|', ';', '>', '#', ')', '&'])
            .unwrap_or(after.len());
        found.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    found
}

/// Where `kubeunit ` starts a command: at the start of the line or after a prompt, a shell
/// operator, a backtick or `$(`, not in prose such as "kubeunit renders".
fn find_command(s: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find("kubeunit ").map(|i| i + from) {
        let before = s[..i].trim_end_matches("scripts/").trim_end();
        let starts = before.is_empty()
            || before.ends_with(['$', '|', ';', '(', '&'])
            || before.ends_with("sudo")
            || before.ends_with("exec");
        let next = s[i + "kubeunit ".len()..].chars().next();
        if starts && next.is_some_and(|c| c.is_ascii_lowercase() || c == '-') {
            return Some(i);
        }
        from = i + 1;
    }
    None
}

/// Whether the CLI takes `words`. Prose names a command without its arguments (`kubeunit import`):
/// then the command must exist. A placeholder in capitals (`--seed N`) stands for any value.
fn parses(words: &[String]) -> Result<(), String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let Err(e) = Cli::try_parse_from(words) else {
        return Ok(());
    };
    let placeholder = |v: &str| v.chars().all(|c| c.is_ascii_uppercase() || c == '_');
    let ok = match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => true,
        ErrorKind::MissingRequiredArgument => {
            let named_only = words[1..].iter().all(|w| {
                w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
            });
            let with_help: Vec<&str> = words.iter().map(String::as_str).chain(["--help"]).collect();
            named_only
                && Cli::try_parse_from(with_help).is_err_and(|e| e.kind() == ErrorKind::DisplayHelp)
        }
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => matches!(
            e.get(ContextKind::InvalidValue),
            Some(ContextValue::String(v)) if placeholder(v)
        ),
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(e.to_string().lines().next().unwrap_or_default().to_string())
}

/// README.md and every page of docs/.
fn pages() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The prose of a Markdown page: its lines outside fenced blocks, inline code spans blanked.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            let kept = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
            lines.push(kept);
        }
    }
    lines
}

/// A word that reads as a git commit (7 to 40 hex digits, with a digit and a letter: `d219d98`).
fn commit_like(word: &str) -> bool {
    (7..=40).contains(&word.len())
        && word.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

/// A date (`2026-12-06`) or a record's timestamp (`20261206T2310Z`) in `text`.
fn dated(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let digits = |from: usize, n: usize| {
        b.get(from..from + n)
            .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
    };
    (0..b.len()).find_map(|i| {
        let date = digits(i, 4)
            && b.get(i + 4) == Some(&b'-')
            && digits(i + 5, 2)
            && b.get(i + 7) == Some(&b'-')
            && digits(i + 8, 2);
        let stamp = digits(i, 8) && b.get(i + 8) == Some(&b'T') && digits(i + 9, 4);
        (date || stamp).then(|| text[i..].chars().take(13).collect())
    })
}

/// The docs say what is true now: history (which run, at which commit, on which day) lives in
/// docs/benchmarks.md and benches/results/, so no other page names a commit, or a date outside code.
#[test]
fn no_commit_or_dated_run_outside_the_benchmarks_page() {
    let mut found = Vec::new();
    for page in pages()
        .iter()
        .filter(|p| !p.ends_with("docs/benchmarks.md"))
    {
        let text = std::fs::read_to_string(page).unwrap();
        for word in text
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| commit_like(w))
        {
            found.push(format!("{}: commit-like {word:?}", page.display()));
        }
        for line in prose(&text) {
            if let Some(date) = dated(&line) {
                found.push(format!(
                    "{}: dated {date:?} in: {}",
                    page.display(),
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "history belongs in docs/benchmarks.md:\n{}",
        found.join("\n")
    );
}

#[test]
fn history_is_found_where_it_hides() {
    assert!(commit_like("d219d98") && commit_like("4f233c7"));
    assert!(!commit_like("deadbee") && !commit_like("1234567") && !commit_like("sha256"));
    assert!(
        !commit_like(&"a1".repeat(32)),
        "a sha256 digest is no commit"
    );
    assert_eq!(dated("at 2026-12-06, 26 min"), Some("2026-12-06, 2".into()));
    assert_eq!(
        dated("suite-full-20261207T0145Z.txt"),
        Some("20261207T0145".into())
    );
    assert_eq!(dated("v1.36.3 in 2026 minutes"), None);
    let page =
        "Run `gen --set pki.epoch=2026-01-01T00:00:00Z`.\n```\n2026-01-01\n```\nOn 2026-01-02.";
    assert_eq!(prose(page).iter().filter_map(|l| dated(l)).count(), 1);
}

#[test]
fn every_kubeunit_command_in_the_docs_parses() {
    let pages = pages();
    let (mut checked, mut failures) = (0, Vec::new());
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for command in code(&text).iter().flat_map(|c| commands(c)) {
            // A synopsis's optional parts (`[-o json]`) are checked as if given.
            let Some(words) = shlex::split(&command.replace(['[', ']'], "")) else {
                failures.push(format!("{}: cannot split {command:?}", page.display()));
                continue;
            };
            checked += 1;
            if let Err(why) = parses(&words) {
                failures.push(format!("{}: {command:?}: {why}", page.display()));
            }
        }
    }
    assert!(checked >= 50, "only {checked} commands found in the docs");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn commands_are_found_where_shell_would_run_them() {
    assert_eq!(
        commands("$ scripts/kubeunit logs kubelet -n 1   # the last line"),
        ["kubeunit logs kubelet -n 1"]
    );
    assert_eq!(
        commands("kubeunit import ./built && kubeunit start --state-dir /x | cat"),
        ["kubeunit import ./built", "kubeunit start --state-dir /x"]
    );
    let page = "Then `kubeunit stop -o json` says; kubeunit renders files, `kubeunit\nimport`.\n\n```sh\n$ kubeunit status\n```\n";
    let found: Vec<String> = code(page).iter().flat_map(|c| commands(c)).collect();
    assert_eq!(
        found,
        [
            "kubeunit stop -o json",
            "kubeunit import",
            "kubeunit status"
        ]
    );
    assert!(commands("kubeunit COMMAND --help").is_empty());
    assert!(parses(&["kubeunit".into(), "import".into()]).is_ok());
    assert!(parses(&["kubeunit".into(), "imports".into()]).is_err());
    assert!(parses(&["kubeunit".into(), "gen".into(), "--seed".into(), "N".into()]).is_ok());
    assert!(parses(&["kubeunit".into(), "gen".into(), "--seed".into(), "x".into()]).is_err());
}
