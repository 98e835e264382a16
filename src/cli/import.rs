//! `kubeunit import`: put a state dir generated elsewhere (`gen --out`, a Nix build) in place.

use std::path::PathBuf;

use super::common::{lock_wait, print_json, say, Output};
use crate::error::Error;
use crate::pipeline;
use crate::spec::host;

pub const AFTER_HELP: &str = "Examples:
  kubeunit import ./built                                 # to the state dir it was generated for
  kubeunit import $(nix-build -A state) && kubeunit start --state-dir /var/lib/kubeunit/ci
  kubeunit import ./built --state-dir /var/lib/kubeunit/dev -o json

Every file is checked against the manifest (sha256) and written with the mode the manifest records
(keys 0600; a Nix store path has made every file 0444). The state dir must be new or empty, that
same state dir already (importing again restores its files and modes), or the same environment
rendered before (the same name and CA certificates: an update, which keeps the data below it). A
running environment goes on with the files it read: `kubeunit restart` takes the new ones.";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A state dir written by `kubeunit gen --out` (a Nix store path of lib.mkState, a copy of one).
    #[arg(value_name = "SRC")]
    pub src: PathBuf,
    /// Where it goes [default: the state dir it was generated for; another one is refused, since
    /// its units and configs name files there].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    let src = host::absolute(&args.src)?;
    let dst = args
        .state_dir
        .as_deref()
        .map(host::local_state_dir)
        .transpose()?;
    let (manifest, summary) = pipeline::import(&src, dst.as_deref(), lock_wait()?, &mut say)?;
    match args.output {
        Output::Json => print_json(&serde_json::json!({
            "stateDir": manifest.state_dir,
            "name": manifest.name,
            "from": src,
            "written": summary.written,
            "unchanged": summary.unchanged,
            "notes": summary.notes,
        })),
        Output::Text => {
            println!(
                "imported environment '{}' into {}: {} files written, {} unchanged",
                manifest.name,
                manifest.state_dir.display(),
                summary.written.len(),
                summary.unchanged
            );
            for note in &summary.notes {
                println!("note: {note}");
            }
            println!(
                "next: kubeunit start --state-dir {}",
                manifest.state_dir.display()
            );
        }
    }
    Ok(0)
}
