//! The source tree is one straight pipeline: no module imports a module that imports it back,
//! directly or through others. Read from the source itself: every `use` and every `crate::`,
//! `super::` and `self::` path of every file under src/ (test code included) is an edge from the
//! file's module to the module the path names.
//!
//! The rooms (src/'s top-level folders) are named here with their roles, none holds more than about
//! a fifth of src/, and the lifecycle (`run`) never uses an operation (`ops`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Module = Vec<String>;

/// Module path of a source file: src/a/b.rs and src/a/b/mod.rs are a::b; src/lib.rs is the root.
fn module_of(rel: &Path) -> Option<Module> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop()?;
    let stem = file.strip_suffix(".rs")?;
    match stem {
        "main" if parts.is_empty() => None,
        "lib" if parts.is_empty() => Some(vec![]),
        "mod" => Some(parts),
        _ => {
            parts.push(stem.to_string());
            Some(parts)
        }
    }
}

/// The text without line comments (doc comments name modules in prose) and with the insides of
/// string literals blanked: a message such as "use one of: {}" is no `use` item.
fn code(text: &str) -> String {
    let text = blank_strings(text);
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` with every string literal's content (plain, byte and raw, escapes included) replaced by
/// spaces, newlines kept; the quotes stay. A `'"'` char literal is no string.
fn blank_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' && chars.get(i + 1) == Some(&'"') && chars.get(i + 2) == Some(&'\'') {
            out.push_str("'\"'");
            i += 3;
            continue;
        }
        // r"..." and r#"..."#: the closing quote is followed by as many #s.
        if c == 'r'
            && !i
                .checked_sub(1)
                .and_then(|j| chars.get(j))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            let hashes = chars[i + 1..].iter().take_while(|h| **h == '#').count();
            if chars.get(i + 1 + hashes) == Some(&'"') {
                out.push('r');
                out.extend(std::iter::repeat_n('#', hashes));
                out.push('"');
                i += hashes + 2;
                while i < chars.len() {
                    if chars[i] == '"'
                        && chars[i + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|h| **h == '#')
                            .count()
                            == hashes
                    {
                        break;
                    }
                    out.push(blank(chars[i]));
                    i += 1;
                }
                continue;
            }
        }
        out.push(c);
        i += 1;
        if c == '"' {
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    out.push(' ');
                    i += 1;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
            if i < chars.len() {
                out.push('"');
                i += 1;
            }
        }
    }
    out
}

/// `a::{b, c::{d, e}}` -> a::b, a::c::d, a::c::e.
fn expand(tree: &str) -> Vec<String> {
    // `x as y` keeps `x`: mark the rename before white space goes.
    let tree: String = tree
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" as ", "@");
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree.split('@').next().unwrap_or(&tree).to_string()];
    };
    let prefix = &tree[..open];
    let close = tree.rfind('}').filter(|&c| c > open).unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|i| !i.is_empty())
        .flat_map(|i| expand(i).into_iter().map(move |e| format!("{prefix}{e}")))
        .collect()
}

/// Every path the file names: the trees of its `use` items, and qualified paths in its code.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        rest = &rest[i + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = rest.find(';') else { break };
        out.extend(
            expand(&rest[..end])
                .into_iter()
                .map(|p| p.trim_end_matches("::").to_string()),
        );
        rest = &rest[end..];
    }
    for anchor in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(anchor) {
            if code[..i]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            {
                continue;
            }
            let path: String = code[i..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // `super::{a, b}` and `super::*` are use trees: the `use` reader above has them.
            if path.ends_with("::") {
                continue;
            }
            out.push(path);
        }
    }
    out
}

/// The module a path from `from` names, if it is one of ours (not std or another crate).
fn resolve(from: &Module, path: &str, known: &BTreeSet<Module>) -> Option<Module> {
    let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let (mut base, mut rest): (Module, &[&str]) = match segments.first()? {
        &"crate" => (vec![], &segments[1..]),
        &"self" => (from.clone(), &segments[1..]),
        &"super" => (from.clone(), &segments[..]),
        first => {
            let mut child = from.clone();
            child.push(first.to_string());
            if !known.contains(&child) {
                return None;
            }
            (from.clone(), &segments[..])
        }
    };
    while rest.first() == Some(&"super") {
        base.pop();
        rest = &rest[1..];
    }
    let mut target = base;
    for s in rest {
        let mut next = target.clone();
        next.push(s.to_string());
        if !known.contains(&next) {
            break;
        }
        target = next;
    }
    Some(target)
}

/// Split inline `mod name { ... }` blocks (test modules) out of a file's code: each is a module of
/// its own, a child of the file's, where `super` means the file's module.
fn inline_modules(module: &Module, code: &str, out: &mut Vec<(Module, String)>) {
    let mut outer = String::new();
    let mut rest = code;
    while let Some(i) = rest.find("mod ") {
        let after = &rest[i + 4..];
        let ident: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let tail = after[ident.len()..].trim_start();
        let word_start = rest[..i]
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if ident.is_empty() || !word_start || !tail.starts_with('{') {
            outer.push_str(&rest[..i + 4]);
            rest = after;
            continue;
        }
        let body_start = rest.len() - tail.len() + 1;
        let mut depth = 1;
        let mut end = rest.len();
        for (j, c) in rest[body_start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = body_start + j;
                break;
            }
        }
        outer.push_str(&rest[..i]);
        let mut child = module.clone();
        child.push(ident);
        inline_modules(&child, &rest[body_start..end], out);
        rest = &rest[(end + 1).min(rest.len())..];
    }
    outer.push_str(rest);
    out.push((module.clone(), outer));
}

fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<(Module, String)> = Vec::new();
    for e in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let e = e.unwrap();
        if e.path().extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let Some(module) = module_of(e.path().strip_prefix(&src).unwrap()) else {
            continue;
        };
        let text = std::fs::read_to_string(e.path()).unwrap();
        inline_modules(&module, &code(&text), &mut files);
    }
    let known: BTreeSet<Module> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, text) in &files {
        let targets = edges.entry(module.clone()).or_default();
        for path in paths(text) {
            if let Some(t) = resolve(module, &path, &known) {
                if &t != module {
                    targets.insert(t);
                }
            }
        }
    }
    edges
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// A cycle through `node`, if there is one (depth-first, with the path so far).
fn find_cycle(
    edges: &BTreeMap<Module, BTreeSet<Module>>,
    node: &Module,
    stack: &mut Vec<Module>,
    done: &mut BTreeSet<Module>,
) -> Option<Vec<Module>> {
    if let Some(i) = stack.iter().position(|m| m == node) {
        let mut cycle = stack[i..].to_vec();
        cycle.push(node.clone());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    stack.push(node.clone());
    for next in edges.get(node).into_iter().flatten() {
        if let Some(c) = find_cycle(edges, next, stack, done) {
            return Some(c);
        }
    }
    stack.pop();
    done.insert(node.clone());
    None
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let edges = graph();
    assert!(edges.len() > 30, "found only {} modules", edges.len());
    // The reader itself: a module's imports are found, grouped and relative ones included.
    let cli = edges.get(&vec!["cli".to_string()]).unwrap();
    assert!(cli.contains(&vec!["cli".to_string(), "common".to_string()]));
    let start = edges
        .get(&vec!["run".to_string(), "start".to_string()])
        .unwrap();
    for t in [vec!["run", "env"], vec!["components"], vec!["systemd"]] {
        let t: Module = t.into_iter().map(String::from).collect();
        assert!(start.contains(&t), "run::start -> {}", name(&t));
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        if let Some(cycle) = find_cycle(&edges, node, &mut Vec::new(), &mut done) {
            let cycle: Vec<String> = cycle.iter().map(name).collect();
            panic!("import cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_reader_sees_a_cycle_when_there_is_one() {
    let known: BTreeSet<Module> = [vec![], vec!["a".into()], vec!["a".into(), "b".into()]]
        .into_iter()
        .collect();
    let a: Module = vec!["a".into()];
    let b: Module = vec!["a".into(), "b".into()];
    // a/mod.rs: `pub use b::Thing;`, a/b.rs: `use super::{Other, b2};`
    assert_eq!(resolve(&a, "b::Thing", &known), Some(b.clone()));
    assert_eq!(resolve(&b, "super::Other", &known), Some(a.clone()));
    assert_eq!(resolve(&b, "std::fs", &known), None);
    assert_eq!(
        expand("crate::{a::{b, c}, d}"),
        vec!["crate::a::b", "crate::a::c", "crate::d"]
    );
    let edges: BTreeMap<Module, BTreeSet<Module>> = [
        (a.clone(), [b.clone()].into_iter().collect()),
        (b.clone(), [a.clone()].into_iter().collect()),
    ]
    .into_iter()
    .collect();
    assert!(find_cycle(&edges, &a, &mut Vec::new(), &mut BTreeSet::new()).is_some());
}

#[test]
fn the_reader_takes_use_items_not_strings_that_say_use() {
    let text = r##"
        let hint = "use one of: {}"; // a use in a comment: use crate::run::X;
        let raw = r#"use crate::cli::Y; "quoted" {"#;
        let quote = '"';
        use crate::spec::{Plan, profile::Ports as P};
        let url = "https://example";
    "##;
    let mut found = paths(&code(text));
    found.sort();
    assert_eq!(found, ["crate::spec::Plan", "crate::spec::profile::Ports"]);
}

/// The rooms of src/ (its top-level folders), each with its role. A new folder is named here, and
/// a folder that is gone leaves the table.
const ROOMS: &[(&str, &str)] = &[
    (
        "artifacts",
        "plan -> tree: PKI, kubeconfigs, component files, units",
    ),
    (
        "cis",
        "the CIS benchmark by kube-bench against a running environment",
    ),
    (
        "cli",
        "one file per command: its arguments, one exec, a report",
    ),
    ("components", "the component table and its instances"),
    ("fetch", "release binaries: sources, checksums, the cache"),
    (
        "ops",
        "operations on an existing environment, one module each; they use run",
    ),
    (
        "pipeline",
        "profile -> plan -> artifacts -> state dir, once",
    ),
    ("pki", "the certificate table, keys, issuing"),
    ("render", "templates and systemd quoting"),
    (
        "run",
        "a state dir at run time: the lifecycle (preflight, start, stop, status)",
    ),
    (
        "seed",
        "cloud-init seeds for the hosts of an environment across hosts",
    ),
    (
        "spec",
        "the profile: schema, loading, validation, host facts, the plan",
    ),
    (
        "state",
        "the state dir as files: tree, manifest, atomic writes, check",
    ),
    (
        "systemd",
        "systemd itself: the D-Bus client, calendar expressions; no kubeunit type",
    ),
    ("unit", "unit files -> transient-unit properties"),
];

/// "About a fifth": a room that holds more of src/'s lines than this is split in two.
const MAX_ROOM_SHARE: f64 = 0.21;

/// The lines of the .rs files under `dir`, as `wc -l` counts them.
fn lines_under(dir: &Path) -> usize {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| {
            let text = std::fs::read(e.path()).unwrap();
            text.iter().filter(|b| **b == b'\n').count()
        })
        .sum()
}

/// src/'s top-level folders.
fn rooms_on_disk() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn every_room_of_src_is_named_with_its_role() {
    let on_disk = rooms_on_disk();
    let named: BTreeSet<String> = ROOMS.iter().map(|(r, _)| r.to_string()).collect();
    assert_eq!(named.len(), ROOMS.len(), "a room is named twice");
    let unnamed: Vec<&String> = on_disk.difference(&named).collect();
    let gone: Vec<&String> = named.difference(&on_disk).collect();
    assert!(
        unnamed.is_empty() && gone.is_empty(),
        "src/ has folders ROOMS does not name (add each with its role): {unnamed:?}; \
         ROOMS names folders src/ no longer has (remove them): {gone:?}"
    );
    for (room, role) in ROOMS {
        assert!(!role.trim().is_empty(), "{room} has no role");
    }
}

#[test]
fn no_room_holds_more_than_about_a_fifth_of_src() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let total = lines_under(&src);
    assert!(total > 10_000, "found only {total} lines in src/");
    let mut big = Vec::new();
    for room in rooms_on_disk() {
        let lines = lines_under(&src.join(&room));
        let share = lines as f64 / total as f64;
        if share > MAX_ROOM_SHARE {
            big.push(format!(
                "src/{room}/: {lines} of {total} lines ({:.1}%)",
                share * 100.0
            ));
        }
    }
    assert!(
        big.is_empty(),
        "a room holds more than {:.0}% of src/ (give part of it a room of its own, as ops/ was \
         split from run/):\n{}",
        MAX_ROOM_SHARE * 100.0,
        big.join("\n")
    );
}

/// `systemd` is systemd's, not kubeunit's: no module under it uses another room, so every room may use
/// it (spec's validation checks calendar expressions with it, run drives units through it).
#[test]
fn systemd_uses_no_other_room() {
    let edges = graph();
    let in_systemd = |m: &Module| m.first().is_some_and(|r| r == "systemd");
    let spec_uses_calendar: Module = vec!["systemd".into(), "calendar".into()];
    assert!(
        edges[&vec!["spec".to_string(), "validate".into()]].contains(&spec_uses_calendar),
        "spec::validate -> systemd::calendar not found"
    );
    let outward: Vec<String> = edges
        .iter()
        .filter(|(from, _)| in_systemd(from))
        .flat_map(|(from, to)| {
            to.iter()
                .filter(|t| !in_systemd(t))
                .map(move |t| format!("{} -> {}", name(from), name(t)))
        })
        .collect();
    assert!(
        outward.is_empty(),
        "src/systemd/ uses kubeunit's own modules (it knows systemd alone): {outward:?}"
    );
}

/// The arrow between the lifecycle and the operations points one way: `ops` uses `run`, and no
/// module under `run` uses `ops`, directly or through other modules.
#[test]
fn run_never_uses_ops() {
    let edges = graph();
    let under = |m: &Module, room: &str| m.first().is_some_and(|r| r == room);
    // The reader sees the arrow that is there: upgrade uses run.
    let upgrade: Module = vec!["ops".into(), "upgrade".into()];
    assert!(
        edges[&upgrade].iter().any(|t| under(t, "run")),
        "ops::upgrade -> run not found"
    );
    // Breadth first from every module under run, each reached module with the one it was reached by.
    let mut reached_by: BTreeMap<Module, Option<Module>> = edges
        .keys()
        .filter(|m| under(m, "run"))
        .map(|m| (m.clone(), None))
        .collect();
    let mut queue: Vec<Module> = reached_by.keys().cloned().collect();
    while let Some(m) = queue.pop() {
        for t in edges.get(&m).into_iter().flatten() {
            if !reached_by.contains_key(t) {
                reached_by.insert(t.clone(), Some(m.clone()));
                queue.push(t.clone());
            }
        }
    }
    let wrong: Vec<String> = reached_by
        .keys()
        .filter(|m| under(m, "ops"))
        .map(|m| {
            let mut path = vec![name(m)];
            let mut at = m;
            while let Some(Some(by)) = reached_by.get(at) {
                path.push(name(by));
                at = by;
            }
            path.reverse();
            path.join(" -> ")
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "run (the lifecycle) uses ops (the operations); move what both need into run:\n{}",
        wrong.join("\n")
    );
}

/// A function says one thing: none in src/ (tests aside) is over 100 lines, from its `fn` line to
/// its closing brace. Read from the source: rustfmt puts that brace alone on a line, at the
/// indentation of the `fn` line.
#[test]
fn no_function_in_src_is_over_100_lines() {
    const MAX: usize = 100;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut long = Vec::new();
    for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        // A file's unit tests sit at its end, in `#[cfg(test)] mod tests` (test helpers elsewhere count).
        let code = text
            .split("\n#[cfg(test)]\nmod ")
            .next()
            .unwrap_or_default();
        let lines: Vec<&str> = code.lines().collect();
        for (start, line) in lines.iter().enumerate() {
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            let is_fn = [
                "fn ",
                "pub fn ",
                "async fn ",
                "pub async fn ",
                "const fn ",
                "unsafe fn ",
            ]
            .iter()
            .any(|p| body.starts_with(p))
                || (body.starts_with("pub(")
                    && (body.contains(") fn ") || body.contains(") async fn ")));
            if !is_fn || body.ends_with(';') {
                continue;
            }
            let close = format!("{indent}}}");
            if let Some(len) = lines[start..].iter().position(|l| *l == close) {
                if len + 1 > MAX {
                    let name = body.split('(').next().unwrap_or(body);
                    let rel = path.strip_prefix(&src).unwrap().display();
                    long.push(format!(
                        "src/{rel}:{}: {name} is {} lines",
                        start + 1,
                        len + 1
                    ));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "split these (at most {MAX} lines each):\n{}",
        long.join("\n")
    );
}
