//! `kubeunit profile list|show`: the built-in profiles, and any profile fully resolved.

use clap::Subcommand;

use crate::error::Error;
use crate::pipeline;
use crate::spec::profile::BUILTIN;

#[derive(Subcommand, Debug)]
pub enum Command {
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

pub fn exec(command: Command) -> Result<i32, Error> {
    match command {
        Command::List => {
            for (name, text) in BUILTIN {
                // The first comment line of a profile says what it is for.
                let about = text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches('#')
                    .trim();
                println!("{name:<15} {about}");
            }
        }
        Command::Show { profile, sets } => {
            print!("{}", pipeline::profile(&profile, &sets)?.to_yaml())
        }
    }
    Ok(0)
}
