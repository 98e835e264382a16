//! `kubeunit debug COMPONENT`: run one component under dlv's headless server in place, or go back.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::ops::{self, debug::attach_hint, DebugReport, DebugRequest};

pub const AFTER_HELP: &str = "Examples:
  kubeunit debug kube-scheduler                    # halted at its entry point; attach and continue
  kubeunit debug kube-apiserver --continue         # runs at once; returns when it is healthy again
  kubeunit debug kube-scheduler --binary ~/k8s/_output/bin/kube-scheduler   # a -gcflags='all=-N -l' build
  kubeunit debug kube-scheduler --stop             # back to the normal unit (or: kubeunit restart)

The component's unit is stopped and the same command line (arguments, environment file, slice, logs)
runs under `dlv exec --headless --api-version=2 --accept-multiclient`, as the transient unit
kubeunit-ENV-COMPONENT-debug.service. dlv listens on loopback at a free port unless --listen says
otherwise; it has no authentication, so a non-loopback address also needs --allow-remote.
`kubeunit status` shows where it listens, `kubeunit logs COMPONENT -f` shows dlv's and the component's
output, `kubeunit stop` stops it with the rest. Debug builds: scripts/build-test-binaries.sh --debug.";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// The component as `kubeunit status` names it: `kubelet`, or `kubelet@NODE` on a further node.
    pub component: String,
    /// Address dlv listens on [default: 127.0.0.1 and a free port].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Allow a --listen address that is not loopback.
    #[arg(long)]
    pub allow_remote: bool,
    /// Let the component run at once (dlv --continue) and wait until it is healthy.
    #[arg(long = "continue")]
    pub run: bool,
    /// dlv to use [default: dlv on PATH].
    #[arg(long, env = "KUBEUNIT_DLV", value_name = "PATH")]
    pub dlv: Option<PathBuf>,
    /// Debug this binary instead of the unit's (e.g. a build with -gcflags='all=-N -l').
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Leave the debugger: stop the debug unit and start the normal one.
    #[arg(long, conflicts_with_all = ["listen", "allow_remote", "run", "dlv", "binary"])]
    pub stop: bool,
    /// Seconds to wait for dlv (and with --continue or --stop, for the component to be healthy).
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    let (env, _lock) = args.target.env_locked()?;
    // A name the environment does not have is bad input, before systemd or dlv is looked for.
    env.unit(&args.component)?;
    let sd = args.target.systemd(&env).await?;
    let timeout = Duration::from_secs(args.timeout);
    if args.stop {
        let t = ops::stop_debug(&env, &sd, &args.component, timeout).await?;
        match args.output {
            Output::Json => print_json(&t),
            Output::Text => println!(
                "{} left the debugger: its unit runs again, healthy after {:.2}s",
                t.component, t.healthy
            ),
        }
        return Ok(0);
    }
    let dlv = match args.dlv {
        Some(p) => p,
        None => on_path("dlv").ok_or_else(|| Error::Preflight {
            message: "no dlv on PATH".into(),
            fix: "install it (scripts/build-test-binaries.sh --debug builds the pinned one; or go install github.com/go-delve/delve/cmd/dlv@latest) and pass --dlv PATH or set KUBEUNIT_DLV".into(),
        })?,
    };
    let req = DebugRequest {
        component: &args.component,
        listen: args.listen,
        allow_remote: args.allow_remote,
        run: args.run,
        dlv,
        binary: args.binary,
        timeout,
    };
    let report = ops::debug(&env, &sd, &req).await?;
    match args.output {
        Output::Json => print_json(&report),
        Output::Text => print!("{}", Text(&report)),
    }
    Ok(0)
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

struct Text<'a>(&'a DebugReport);

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        if r.healthy {
            writeln!(
                f,
                "{} runs under dlv ({}) and is healthy after {:.2}s. Attach:",
                r.component, r.unit, r.seconds
            )?;
        } else {
            writeln!(
                f,
                "{} runs under dlv ({}), halted at its entry point until a client continues it. Attach:",
                r.component, r.unit
            )?;
        }
        writeln!(f, "{}", attach_hint(r.listen))?;
        writeln!(f, "binary: {}", r.binary.display())?;
        writeln!(f, "logs:   kubeunit logs {} -f", r.component)?;
        writeln!(f, "back:   kubeunit debug {} --stop", r.component)
    }
}
