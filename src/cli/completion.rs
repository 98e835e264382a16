//! `kubeunit completion SHELL`: a completion script from the clap definition.

use crate::error::Error;

pub const AFTER_HELP: &str = "Example:
  kubeunit completion bash > /etc/bash_completion.d/kubeunit";

#[derive(clap::Args, Debug)]
pub struct Args {
    pub shell: clap_complete::Shell,
}

/// `cli`: the whole command line's definition.
pub fn exec(args: Args, mut cli: clap::Command) -> Result<i32, Error> {
    clap_complete::generate(args.shell, &mut cli, "kubeunit", &mut std::io::stdout());
    Ok(0)
}
