//! `kubeunit completion SHELL`: a completion script from the clap definition.

use clap::CommandFactory;

use super::Cli;
use crate::error::Error;

pub const AFTER_HELP: &str = "Example:
  kubeunit completion bash > /etc/bash_completion.d/kubeunit";

#[derive(clap::Args, Debug)]
pub struct Args {
    pub shell: clap_complete::Shell,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    clap_complete::generate(
        args.shell,
        &mut Cli::command(),
        "kubeunit",
        &mut std::io::stdout(),
    );
    Ok(0)
}
