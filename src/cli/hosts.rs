//! `kubeunit hosts check DIR`: the state dirs `gen --out DIR` wrote for the hosts of an
//! environment across hosts, checked together before they go out.

use std::path::PathBuf;

use super::common::{print_json, Output};
use crate::error::Error;
use crate::spec::host;
use crate::state::hosts;

pub const AFTER_HELP: &str = "Examples:
  kubeunit gen --profile ha --out ./hosts && kubeunit hosts check ./hosts
  kubeunit hosts check ./hosts -o json";

const CHECK_HELP: &str = "Examples:
  kubeunit hosts check ./hosts
  kubeunit hosts check ./hosts -o json | jq -r '.hosts[].host'

Each DIR/HOST must be intact against its manifest; the CAs, the service-account key pair and the
encryption key and config must be the same on every host that has them; a host that is no
control-plane host may hold no CA key, no service-account key and no encryption key.
Exit codes: 0 consistent, 2 a dir that is not (the file, the hosts and the fix are named).";

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Check that the hosts' state dirs agree on what they share, and hold only their own keys.
    #[command(after_help = CHECK_HELP)]
    Check(CheckArgs),
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// The directory `kubeunit gen --out DIR` wrote (DIR/HOST for each host).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub fn exec(command: Command) -> Result<i32, Error> {
    match command {
        Command::Check(args) => {
            let dir = host::absolute(&args.dir)?;
            let checked = hosts::check(&dir)?;
            match args.output {
                Output::Json => print_json(&serde_json::json!({ "ok": true, "hosts": checked })),
                Output::Text => {
                    for h in &checked {
                        println!(
                            "{}: {} ({}), {} files: intact, shared values agree",
                            h.host,
                            h.dir.display(),
                            h.roles.join(", "),
                            h.files
                        );
                    }
                }
            }
            Ok(0)
        }
    }
}
