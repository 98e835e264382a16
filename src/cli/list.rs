//! `kubeunit list`: the environments on this host, whether they run, their version and where their
//! API server answers (kind's `get clusters`, k3d's `cluster list`).

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use super::common::{print_json, Output};
use crate::error::Error;
use crate::run::{self, Env};
use crate::spec::{host, paths, HostFacts};
use crate::state::{self, Found};
use crate::systemd::{Bus, Systemd};

pub const AFTER_HELP: &str = "Examples:
  kubeunit list
  kubeunit list -o json | jq -r '.[] | select(.status == \"running\") | .name'
  kubeunit list --state-dir /srv/k8s --state-dir /tmp/ci

Lists the state dirs below /var/lib/kubeunit (rootless: $XDG_STATE_HOME/kubeunit), the one
$KUBEUNIT_STATE_DIR names, and each --state-dir. STATUS is running (every unit up), stopped (none),
or partial UP/ALL; unknown when systemd cannot be asked.

Exit codes: 0 listed (none is fine), 1 a state dir that cannot be read (named below the table),
2 a --state-dir that is no state dir.";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A state dir to list besides those in the default place; repeatable.
    #[arg(long = "state-dir", value_name = "DIR")]
    pub state_dirs: Vec<PathBuf>,
    /// D-Bus address of the systemd to ask (e.g. a container's system bus socket).
    #[arg(long, env = "KUBEUNIT_BUS_ADDRESS", value_name = "ADDRESS")]
    pub bus: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

/// One environment, as `-o json` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    name: String,
    state_dir: PathBuf,
    /// running, stopped, partial, unknown (systemd not asked) or unreadable (the state dir).
    status: &'static str,
    units_up: Option<usize>,
    units: usize,
    /// What the API server's (or kubelet's) binary reports.
    version: Option<String>,
    nodes: usize,
    /// The API server's URL on this host.
    api: Option<String>,
    rootless: bool,
    /// Why the status is unknown or the state dir unreadable.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    let dirs = state_dirs(&args.state_dirs)?;
    let facts = HostFacts::gather();
    let mut managers = Managers::default();
    let mut rows = Vec::new();
    for dir in dirs {
        let row = match Env::load(&dir, &facts) {
            Ok(env) => row_of(&env, &args.bus, &mut managers).await,
            Err(e) => Row {
                name: dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                state_dir: dir,
                status: "unreadable",
                units_up: None,
                units: 0,
                version: None,
                nodes: 0,
                api: None,
                rootless: false,
                error: Some(e.to_string()),
            },
        };
        rows.push(row);
    }
    match args.output {
        Output::Json => print_json(&rows),
        Output::Text => print!("{}", Table(&rows)),
    }
    Ok(if rows.iter().any(|r| r.status == "unreadable") {
        1
    } else {
        0
    })
}

/// The state dirs to list, each once: those below the default home, `$KUBEUNIT_STATE_DIR`'s, and
/// the named ones (refused, exit 2, when one is no state dir).
fn state_dirs(named: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut dirs = state::dir::generated_below(&host::state_home());
    if let Some(d) = std::env::var_os("KUBEUNIT_STATE_DIR").filter(|d| !d.is_empty()) {
        let d = PathBuf::from(d);
        if matches!(state::dir::inspect(&d), Ok(Found::Ours)) {
            dirs.push(d);
        }
    }
    for d in named {
        let d = host::local_state_dir(d)?;
        let why = match state::dir::inspect(&d) {
            Ok(Found::Ours) => None,
            Ok(_) => Some(format!("no {}: not a generated state dir", paths::MANIFEST)),
            Err(Error::State { message, .. }) => Some(message),
            Err(e) => return Err(e),
        };
        if let Some(why) = why {
            return Err(Error::state(
                &d,
                format!("--state-dir: {why}"),
                "name a state dir `kubeunit gen` wrote, or leave --state-dir out",
            ));
        }
        dirs.push(d);
    }
    // The same dir named twice (or by a link) is one environment.
    let mut seen = BTreeSet::new();
    dirs.retain(|d| seen.insert(std::fs::canonicalize(d).unwrap_or_else(|_| d.clone())));
    Ok(dirs)
}

/// One connection per manager (the system's, the user's, an address), made when first needed; a
/// manager that cannot be reached is asked no more.
#[derive(Default)]
struct Managers {
    connected: Vec<(String, Result<Systemd, String>)>,
}

impl Managers {
    async fn get(&mut self, bus: &Bus) -> &Result<Systemd, String> {
        let key = format!("{bus:?}");
        let at = match self.connected.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                let sd = Systemd::connect(bus)
                    .await
                    .map_err(|e| format!("cannot ask systemd: {e}"));
                self.connected.push((key, sd));
                self.connected.len() - 1
            }
        };
        &self.connected[at].1
    }
}

async fn row_of(env: &Env, bus: &Option<String>, managers: &mut Managers) -> Row {
    let rootless = env.plan.profile.rootless;
    let bus = match (bus, rootless) {
        (Some(a), _) => Bus::Address(a.clone()),
        (None, true) => Bus::User,
        (None, false) => Bus::System,
    };
    let counted = match managers.get(&bus).await {
        Ok(sd) => run::units_up(env, sd).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.clone()),
    };
    let units = env
        .units
        .iter()
        .filter(|(i, _)| env.timer(&i.name).is_none())
        .count();
    let (status, units_up, error) = match counted {
        Ok((0, _)) => ("stopped", Some(0), None),
        Ok((up, all)) if up == all => ("running", Some(up), None),
        Ok((up, _)) => ("partial", Some(up), None),
        Err(e) => ("unknown", None, Some(e)),
    };
    Row {
        name: env.plan.name().to_string(),
        state_dir: env.plan.state_dir.clone(),
        status,
        units_up,
        units,
        version: run::kubernetes_version(env),
        nodes: env.plan.nodes.len(),
        api: Some(crate::components::apiserver_url(&env.plan)),
        rootless,
        error,
    }
}

struct Table<'a>(&'a [Row]);

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return writeln!(
                f,
                "no environment in {} (kubeunit gen --profile dev makes one)",
                host::state_home().display()
            );
        }
        writeln!(
            f,
            "{:<20} {:<14} {:<10} {:>5}  {:<28} STATE DIR",
            "NAME", "STATUS", "VERSION", "NODES", "API"
        )?;
        for r in self.0 {
            let status = match (r.status, r.units_up) {
                ("partial", Some(up)) => format!("partial {up}/{}", r.units),
                (s, _) => s.to_string(),
            };
            writeln!(
                f,
                "{:<20} {:<14} {:<10} {:>5}  {:<28} {}",
                r.name,
                status,
                r.version.as_deref().unwrap_or("-"),
                r.nodes,
                r.api.as_deref().unwrap_or("-"),
                r.state_dir.display()
            )?;
        }
        for r in self.0.iter().filter(|r| r.error.is_some()) {
            writeln!(f, "{}: {}", r.name, r.error.as_deref().unwrap_or_default())?;
        }
        Ok(())
    }
}
