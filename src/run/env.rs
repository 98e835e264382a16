//! A generated state dir loaded for running: its resolved plan and its unit files.

use std::path::Path;

use crate::components::{self, Component, COMPONENTS};
use crate::error::Error;
use crate::pipeline;
use crate::spec::{paths, HostFacts, Plan};
use crate::state::Root;
use crate::unit::UnitFile;

/// A state dir loaded for running: its resolved plan and its unit files.
pub struct Env {
    pub plan: Plan,
    pub slice: UnitFile,
    /// Each enabled component's service.
    pub units: Vec<(&'static Component, UnitFile)>,
    /// The timers of the components that run on a schedule (`Component::timer`), by component.
    pub timers: Vec<(&'static str, UnitFile)>,
}

impl Env {
    pub fn load(state_dir: &Path, host: &HostFacts) -> Result<Env, Error> {
        let plan = pipeline::plan_of(state_dir, host)?;
        let root = Root::open(&plan.state_dir).map_err(Error::io(&plan.state_dir, "open"))?;
        let read = |unit_name: &str| {
            let rel = paths::unit(unit_name);
            let path = plan.state_dir.join(&rel);
            let text = root.read_string(&rel).map_err(|e| Error::Artifact {
                path: path.clone(),
                message: format!("cannot read unit file: {e}"),
                fix: "run `kubeunit gen` to regenerate the state dir".into(),
            })?;
            crate::unit::parse(&path, &text)
        };
        let slice = read(&plan.slice_name())?;
        let units = components::enabled(COMPONENTS, &plan.profile)
            .map(|c| Ok((c, read(&plan.unit_name(c.name))?)))
            .collect::<Result<Vec<_>, Error>>()?;
        let timers = units
            .iter()
            .filter(|(c, _)| c.timer.is_some())
            .map(|(c, _)| Ok((c.name, read(&plan.timer_name(c.name))?)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Env {
            plan,
            slice,
            units,
            timers,
        })
    }

    /// The timer of a component that runs on a schedule.
    pub fn timer(&self, component: &str) -> Option<&UnitFile> {
        self.timers
            .iter()
            .find(|(c, _)| *c == component)
            .map(|(_, u)| u)
    }

    /// The unit that says whether a component runs: its timer if it has one, else its service.
    pub fn running_unit<'a>(&'a self, component: &str, service: &'a UnitFile) -> &'a UnitFile {
        self.timer(component).unwrap_or(service)
    }

    /// A component of this environment, or an error listing the ones there are.
    pub fn unit(&self, component: &str) -> Result<&(&'static Component, UnitFile), Error> {
        self.units
            .iter()
            .find(|(c, _)| c.name == component)
            .ok_or_else(|| {
                let names: Vec<_> = self.units.iter().map(|(c, _)| c.name).collect();
                Error::Preflight {
                    message: format!(
                        "no component '{component}' in environment '{}'",
                        self.plan.name()
                    ),
                    fix: format!("use one of: {}", names.join(", ")),
                }
            })
    }

    /// Every port the environment's components listen on in this host's network namespace (those
    /// in the node's namespace have it to themselves).
    pub fn ports(&self) -> Vec<u16> {
        self.units
            .iter()
            .filter(|(c, _)| !c.netns)
            .flat_map(|(c, _)| c.ports(&self.plan.ports))
            .map(|(_, p)| p)
            .collect()
    }
}

/// Whether the environment is installed (`kubeunit install`): systemd has its target's unit file.
pub async fn installed(plan: &Plan, sd: &crate::systemd::Systemd) -> Result<bool, Error> {
    Ok(sd.unit_file_state(&plan.target_name()).await?.is_some())
}

/// How many of the environment's units are active (or activating).
pub async fn running_units(env: &Env, sd: &crate::systemd::Systemd) -> Result<usize, Error> {
    let mut n = 0;
    for (_, unit) in &env.units {
        if sd
            .state(&unit.name)
            .await?
            .is_some_and(|s| !s.active_state.is_stopped())
        {
            n += 1;
        }
    }
    Ok(n)
}

/// The transient unit a component runs in under a debugger: `kubeunit-<env>-<component>-debug.service`.
pub fn debug_unit_name(plan: &Plan, component: &str) -> String {
    plan.unit_of(&format!("{component}-debug"), "service")
}

/// The listen address a debug unit's description names (`kubeunit debug` writes it there).
pub fn debugger_address(description: &str) -> Option<&str> {
    description.split(" under dlv at ").nth(1)
}

/// The last lines of a unit's journal (for failure reports); a rootless environment's units are in
/// the user's journal.
pub fn journal_tail(plan: &Plan, unit: &str, lines: usize) -> String {
    let mut cmd = std::process::Command::new("journalctl");
    if plan.profile.rootless {
        cmd.arg("--user");
    }
    let out = cmd
        .args(["--no-pager", "--no-hostname", "-o", "short-precise", "-n"])
        .arg(lines.to_string())
        .arg("-u")
        .arg(unit)
        .output();
    match out {
        Ok(o) if !o.stdout.is_empty() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => format!(
            "(no journal entries: {})",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("(journalctl not available: {e})"),
    }
}
