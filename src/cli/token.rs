//! `kubeunit token create|list|delete`: bootstrap tokens, with which a host joins a running
//! environment across hosts later (`hosts[].join.tokenFile`), as `kubeadm token` does.

use std::time::Duration;

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::ops::token;

pub const AFTER_HELP: &str = "Examples:
  kubeunit token create --state-dir /var/lib/kubeunit/ha > worker-3.token   # on a control-plane host
  kubeunit token create --ttl 2h --description worker-3 -o json
  kubeunit token list
  kubeunit token delete abcdef

A host joins with the token: give the file as its hosts[].join.tokenFile (and a copy of this host's
pki/ca.crt as its caFile), render its dir with `kubeunit gen --out` and put it there (`kubeunit
import`, `install`, or `kubeunit hosts seed`). Its kubelet asks for its certificate with the token;
kube-controller-manager approves it, and `kubeunit hosts sync` (every host's timer) routes to it.";

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Make a new random token in the cluster and print it (ID.SECRET).
    Create(CreateArgs),
    /// List the cluster's bootstrap tokens: id, expiry, groups (never the secret).
    List(ListArgs),
    /// Delete a token: no further host joins with it (joined ones keep their certificates).
    Delete(DeleteArgs),
}

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    #[command(flatten)]
    pub target: Target,
    /// How long the token authenticates, e.g. 24h, 30m; 0: it never expires.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    pub ttl: Duration,
    /// What the token is for (kept in its Secret).
    #[arg(long, default_value = "")]
    pub description: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub target: Target,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(clap::Args, Debug)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub target: Target,
    /// The token's id (or the whole token).
    pub id: String,
}

pub fn exec(command: Command) -> Result<i32, Error> {
    match command {
        Command::Create(args) => {
            if args.description.chars().any(char::is_control) || args.description.len() > 256 {
                return Err(Error::Usage {
                    message: "--description holds control characters or is over 256 bytes".into(),
                    fix: "give a short line, e.g. --description worker-3".into(),
                });
            }
            let env = args.target.env()?;
            let ttl = (!args.ttl.is_zero()).then_some(args.ttl);
            let token = token::create(&env.plan, ttl, &args.description)?;
            match args.output {
                Output::Json => print_json(&serde_json::json!({
                    "token": token.to_string(),
                    "id": token.id,
                    "ttlSeconds": ttl.map(|t| t.as_secs()),
                })),
                Output::Text => println!("{token}"),
            }
            Ok(0)
        }
        Command::List(args) => {
            let env = args.target.env()?;
            let tokens = token::list(&env.plan)?;
            match args.output {
                Output::Json => print_json(&tokens),
                Output::Text => {
                    println!("{:<8}{:<22}{:<52}DESCRIPTION", "ID", "EXPIRES", "GROUPS");
                    for t in tokens {
                        let expires = if t.expires.is_empty() {
                            "never"
                        } else {
                            &t.expires
                        };
                        println!(
                            "{:<8}{:<22}{:<52}{}",
                            t.id,
                            expires,
                            t.groups.join(","),
                            t.description
                        );
                    }
                }
            }
            Ok(0)
        }
        Command::Delete(args) => {
            let env = args.target.env()?;
            token::delete(&env.plan, &args.id)?;
            println!(
                "token {} deleted",
                args.id.split('.').next().unwrap_or_default()
            );
            Ok(0)
        }
    }
}
