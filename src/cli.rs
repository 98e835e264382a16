//! Command line: parsing, output formats and exit codes (0 ok, 1 failed check or operation, 2 bad input).

use std::io::Write;
use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use crate::artifacts::{self, Options};
use crate::error::Error;
use crate::pki::Entropy;
use crate::plan::Plan;
use crate::profile::{self, Profile};
use crate::state::{self, Existing};

#[derive(Parser, Debug)]
#[command(
    name = "kubeunit",
    version,
    about = "A real Kubernetes environment on one Linux host, run by systemd",
    long_about = "kubeunit renders a Kubernetes environment (PKI, kubeconfigs, component configs, systemd units) \
into a state directory, then runs each component as a transient systemd unit.",
    after_help = "Examples:\n  kubeunit gen --profile dev\n  kubeunit gen --profile ci --set ports.apiserver=7443 --state-dir /tmp/ci\n  kubeunit gen --check\n  kubeunit profile show control-plane"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Render an environment into a state directory (PKI, kubeconfigs, configs, units).
    #[command(after_help = "Examples:\n  \
        kubeunit gen --profile dev\n  \
        kubeunit gen --profile ./my-profile.yaml --state-dir /srv/k8s\n  \
        kubeunit gen --profile ci --set network.serviceCIDR=10.96.0.0/16 --set logging.verbosity=4\n  \
        SOURCE_DATE_EPOCH=1767225600 kubeunit gen --seed 42   # byte-identical output\n  \
        kubeunit gen --check                                   # exit 1 if the state dir differs\n\n\
        Re-running gen keeps keys and CAs and reissues only the certificates whose inputs changed.")]
    Gen(GenArgs),
    /// Inspect built-in profiles.
    Profile {
        #[command(subcommand)]
        command: ProfileCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, ...).
    #[command(
        after_help = "Example:\n  kubeunit completion bash > /etc/bash_completion.d/kubeunit"
    )]
    Completion { shell: clap_complete::Shell },
}

#[derive(clap::Args, Debug)]
pub struct GenArgs {
    /// Built-in profile name (dev, control-plane, ci) or a path to a YAML profile.
    #[arg(short, long, default_value = "dev")]
    pub profile: String,
    /// State directory [default: $KUBEUNIT_STATE_DIR, /var/lib/kubeunit/NAME as root, else $XDG_STATE_HOME/kubeunit/NAME].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Override a profile field by dotted path; repeatable (e.g. --set ports.apiserver=7443).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Directory of the component binaries (same as --set binDir=DIR).
    #[arg(long, env = "KUBEUNIT_BIN_DIR", value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Derive every key from this seed: same profile + seed + epoch = byte-identical state dir.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Replace CAs, keys and certificates instead of keeping them.
    #[arg(long)]
    pub force: bool,
    /// Compare the state dir with its manifest and the profile; write nothing; exit 1 on any difference.
    #[arg(long)]
    pub check: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(Subcommand, Debug)]
pub enum ProfileCommand {
    /// List the built-in profiles.
    List,
    /// Print a profile fully resolved (extends and --set applied).
    Show {
        #[arg(default_value = "dev")]
        profile: String,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
}

/// Run the CLI; returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

fn dispatch(cli: Cli) -> Result<i32, Error> {
    match cli.command {
        Command::Gen(args) => gen(args),
        Command::Profile { command } => {
            match command {
                ProfileCommand::List => {
                    for (name, text) in profile::BUILTIN {
                        let about = text
                            .lines()
                            .next()
                            .unwrap_or("")
                            .trim_start_matches('#')
                            .trim();
                        println!("{name:<15} {about}");
                    }
                }
                ProfileCommand::Show { profile, sets } => {
                    print!("{}", profile::load(&profile, &sets)?.to_yaml())
                }
            }
            Ok(0)
        }
        Command::Completion { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "kubeunit",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
    }
}

fn gen(args: GenArgs) -> Result<i32, Error> {
    let mut sets = Vec::new();
    if let Some(dir) = &args.bin_dir {
        sets.push(format!("binDir={}", dir.display()));
    }
    sets.extend(args.sets.iter().cloned());
    let explicit_profile =
        std::env::args().any(|a| a == "--profile" || a == "-p" || a.starts_with("--profile="));
    let mut profile: Profile = profile::load(&args.profile, &sets)?;
    let dir = args
        .state_dir
        .clone()
        .unwrap_or_else(|| state::default_state_dir(&profile.name));
    // `gen --check` without a profile checks the state dir against the profile it was generated from.
    if args.check && !explicit_profile {
        let resolved = dir.join(state::PROFILE);
        if resolved.exists() {
            profile = profile::load_resolved(&resolved)?;
        }
    }
    let plan = Plan::new(profile, &dir)?;
    let opts = Options {
        entropy: args.seed.map(Entropy::Seed).unwrap_or(Entropy::Os),
        force: args.force,
    };
    let mut out = std::io::stdout().lock();
    if args.check {
        let old = Existing::load(&plan.state_dir)?;
        let generated = artifacts::generate(&plan, &old, &opts)?;
        let diffs = state::check(&plan.state_dir, &old, &generated.tree)?;
        if args.output == Output::Json {
            let v = serde_json::json!({ "stateDir": plan.state_dir, "ok": diffs.is_empty(), "differences": diffs });
            let _ = writeln!(out, "{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        } else if diffs.is_empty() {
            let _ = writeln!(out, "{}: matches its manifest and profile", plan.state_dir.display());
        } else {
            let _ = writeln!(out, "{}: {} difference(s)", plan.state_dir.display(), diffs.len());
            for d in &diffs {
                let kind = serde_json::to_value(d.kind).unwrap_or_default();
                let _ = writeln!(out, "  {:<9} {}", kind.as_str().unwrap_or(""), d.path);
            }
            let _ = writeln!(out, "run `kubeunit gen` to bring the state dir back in line (keys and CAs are kept)");
        }
        return Ok(if diffs.is_empty() { 0 } else { 1 });
    }
    let (generated, summary) = crate::gen(&plan, &opts)?;
    if args.output == Output::Json {
        let v = serde_json::json!({
            "stateDir": plan.state_dir,
            "name": plan.name(),
            "written": summary.written,
            "unchanged": summary.unchanged,
            "removed": summary.removed,
            "certificates": generated.notes,
        });
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        );
        return Ok(0);
    }
    let count = |w: &str| generated.notes.iter().filter(|n| n.ends_with(w)).count();
    let _ = writeln!(
        out,
        "environment '{}' in {}: {} files written, {} unchanged, {} removed",
        plan.name(),
        plan.state_dir.display(),
        summary.written.len(),
        summary.unchanged,
        summary.removed.len()
    );
    let _ = writeln!(
        out,
        "certificates: {} created, {} reissued, {} kept",
        count(": created"),
        count(": reissued"),
        count(": kept")
    );
    let _ = writeln!(
        out,
        "next: kubeunit start --state-dir {}",
        plan.state_dir.display()
    );
    Ok(0)
}
