//! `kubeunit cmdline COMPONENT`: the exact command line and environment a component runs with, read
//! from its unit file (for IDE launch configurations, strace, perf, a debugger of your own).

use std::fmt;

use serde::Serialize;

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::unit::Value;

pub const AFTER_HELP: &str = "Examples:
  kubeunit cmdline kube-apiserver                  # one argument per line, then the environment
  kubeunit cmdline kube-scheduler --shell          # one shell-quoted line to paste
  eval \"strace -f $(kubeunit cmdline kube-scheduler --shell)\"
  kubeunit cmdline kubelet -o json | jq -r '.argv[]'";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// The component as `kubeunit status` names it: `kubelet`, or `kubelet@NODE` on a further node.
    pub component: String,
    /// One shell-quoted line (`env K=V ... BINARY ARGS`) instead of one argument per line.
    #[arg(long, conflicts_with = "output")]
    pub shell: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cmdline {
    pub component: String,
    pub unit: String,
    pub argv: Vec<String>,
    /// NAME=value, from the unit's environment files (they may hold secrets: kept 0600).
    pub env: Vec<String>,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    let env = args.target.env()?;
    let (c, unit) = env.unit(&args.component)?;
    let Some((_, argv, _)) = unit.exec_start() else {
        return Err(Error::Artifact {
            path: unit.path.clone(),
            message: "no ExecStart=".into(),
            fix: "regenerate it with `kubeunit gen`".into(),
        });
    };
    let mut vars = Vec::new();
    for (name, value) in &unit.properties {
        if let (Some(list), "Environment") = (strings(value), name.as_str()) {
            vars.extend(list.iter().cloned());
        }
        if let Value::EnvFiles(files) = value {
            for (path, optional) in files {
                match std::fs::read_to_string(path) {
                    Ok(text) => vars.extend(env_file(&text)),
                    Err(_) if *optional => {}
                    Err(e) => return Err(Error::io(std::path::Path::new(path), "read")(e)),
                }
            }
        }
    }
    let out = Cmdline {
        component: c.name.clone(),
        unit: unit.name.clone(),
        argv: argv.clone(),
        env: vars,
    };
    match (args.shell, args.output) {
        (true, _) => println!("{}", shell_line(&out)),
        (false, Output::Json) => print_json(&out),
        (false, Output::Text) => print!("{}", Text(&out)),
    }
    Ok(0)
}

fn strings(v: &Value) -> Option<&Vec<String>> {
    match v {
        Value::Strings(s) => Some(s),
        _ => None,
    }
}

/// `NAME="value"` lines as kubeunit writes them (render::quote::env_file_line), unescaped; other
/// lines (`NAME=value`, comments) as systemd reads the simple cases.
fn env_file(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            let v = match v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                Some(inner) => {
                    let mut out = String::new();
                    let mut chars = inner.chars();
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => out.extend(chars.next()),
                            c => out.push(c),
                        }
                    }
                    out
                }
                None => v.to_string(),
            };
            format!("{}={v}", k.trim())
        })
        .collect()
}

fn quote(word: &str) -> String {
    // shlex refuses only NUL, which a unit's argument cannot hold.
    shlex::try_quote(word)
        .map(|q| q.into_owned())
        .unwrap_or_else(|_| word.replace('\0', ""))
}

fn shell_line(c: &Cmdline) -> String {
    let mut words: Vec<String> = Vec::new();
    if !c.env.is_empty() {
        words.push("env".into());
        words.extend(c.env.iter().map(|v| quote(v)));
    }
    words.extend(c.argv.iter().map(|a| quote(a)));
    words.join(" ")
}

struct Text<'a>(&'a Cmdline);

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# {} ({})", self.0.component, self.0.unit)?;
        for a in &self.0.argv {
            writeln!(f, "{a}")?;
        }
        if !self.0.env.is_empty() {
            writeln!(f, "# environment")?;
            for v in &self.0.env {
                writeln!(f, "{v}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::quote::env_file_line;

    #[test]
    fn env_files_read_back_what_kubeunit_writes() {
        let value = "x509sha1=1 $HOME \"q\" back\\slash `cmd` 100%";
        let text = env_file_line("GODEBUG", value) + "# comment\nPLAIN=a b\n";
        assert_eq!(
            env_file(&text),
            [format!("GODEBUG={value}"), "PLAIN=a b".to_string()]
        );
    }

    #[test]
    fn the_shell_line_round_trips() {
        let c = Cmdline {
            component: "x".into(),
            unit: "u".into(),
            argv: vec!["/bin/kube-x".into(), "--a=b c".into(), "--q='x'".into()],
            env: vec!["K=$v w".into()],
        };
        let line = shell_line(&c);
        assert_eq!(
            shlex::split(&line).unwrap(),
            ["env", "K=$v w", "/bin/kube-x", "--a=b c", "--q='x'"]
        );
    }
}
