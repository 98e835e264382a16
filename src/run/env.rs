//! A generated state dir loaded for running: its resolved plan and its unit files.

use std::path::Path;

use crate::components::{self, Instance, Namespace};
use crate::error::Error;
use crate::pipeline;
use crate::spec::{paths, HostFacts, Plan};
use crate::state::Root;
use crate::unit::UnitFile;

/// A state dir loaded for running: its resolved plan and its unit files.
pub struct Env {
    pub plan: Plan,
    pub slice: UnitFile,
    /// Each instance of an enabled component (`components::instances`: a per-node component's on
    /// every node), with its service.
    pub units: Vec<(Instance<'static>, UnitFile)>,
    /// The timers of the instances that run on a schedule (`Component::timer`), by instance name.
    pub timers: Vec<(String, UnitFile)>,
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
        let units = components::instances(&plan)
            .into_iter()
            .map(|i| {
                let unit = read(&i.unit)?;
                Ok((i, unit))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let timers = units
            .iter()
            .filter_map(|(i, _)| Some((i.name.clone(), i.timer()?)))
            .map(|(name, timer)| Ok((name, read(&timer)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Env {
            plan,
            slice,
            units,
            timers,
        })
    }

    /// The timer of an instance that runs on a schedule, by its name.
    pub fn timer(&self, instance: &str) -> Option<&UnitFile> {
        self.timers
            .iter()
            .find(|(i, _)| i == instance)
            .map(|(_, u)| u)
    }

    /// The unit that says whether an instance runs: its timer if it has one, else its service.
    pub fn running_unit<'a>(&'a self, instance: &str, service: &'a UnitFile) -> &'a UnitFile {
        self.timer(instance).unwrap_or(service)
    }

    /// The names of the instances that `instance` depends on, of the components `deps` (its own
    /// node's where they run on every node): those of them that run.
    pub fn deps_of<'e>(&'e self, instance: &Instance<'static>, deps: &[&str]) -> Vec<&'e str> {
        deps.iter()
            .filter_map(|d| instance.dep(d, self.units.iter().map(|(i, _)| i)))
            .map(|d| d.name.as_str())
            .collect()
    }

    /// An instance of this environment by its name (a component's, `<component>@<node>` on a node
    /// after the first), or a usage error (exit 2) listing the ones there are.
    pub fn unit(&self, component: &str) -> Result<&(Instance<'static>, UnitFile), Error> {
        self.units
            .iter()
            .find(|(i, _)| i.name == component)
            .ok_or_else(|| {
                let names: Vec<_> = self.units.iter().map(|(i, _)| i.name.as_str()).collect();
                Error::Usage {
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
            .flat_map(|(i, _)| i.component.listeners(&i.plan))
            .filter(|(p, _)| p.namespace == Namespace::Host)
            .map(|(_, port)| port)
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

/// How many of the environment's services are active (or activating), of how many: what `kubeunit
/// list` says of it. A scheduled one (etcd's snapshots) runs only now and then: it is not counted.
pub async fn units_up(env: &Env, sd: &crate::systemd::Systemd) -> Result<(usize, usize), Error> {
    let mut up = 0;
    let mut total = 0;
    for (i, unit) in env
        .units
        .iter()
        .filter(|(i, _)| env.timer(&i.name).is_none())
    {
        total += 1;
        let debug = sd.state(&i.debug_unit()).await?;
        let main = sd.state(&unit.name).await?;
        // A component under dlv (`kubeunit debug`) runs as its debug unit instead.
        if [debug, main]
            .iter()
            .flatten()
            .any(|s| !s.active_state.is_stopped())
        {
            up += 1;
        }
    }
    Ok((up, total))
}

#[cfg(test)]
impl Env {
    /// gen a built-in profile with `sets` into a temp dir and load it as `start` does.
    pub fn generated_for_tests(profile: &str, sets: &[&str]) -> (tempfile::TempDir, Env) {
        let tmp = tempfile::tempdir().unwrap();
        let env = Env::generated_at_for_tests(&tmp.path().join("state"), profile, sets);
        (tmp, env)
    }

    /// gen a built-in profile with `sets` into `dir` (seeded, fixed host facts) and load it.
    pub fn generated_at_for_tests(dir: &Path, profile: &str, sets: &[&str]) -> Env {
        use crate::spec::HostFacts;
        let sets: Vec<String> = ["binDir=/usr/local/bin"]
            .iter()
            .chain(sets)
            .map(|s| s.to_string())
            .collect();
        let profile = crate::pipeline::profile_with_binaries(profile, &sets, None).unwrap();
        let host = HostFacts::fixed(Some("192.0.2.5"));
        let plan = Plan::new(profile, dir, &host).unwrap();
        let opts = crate::artifacts::Options {
            entropy: crate::pki::Entropy::Seed(7),
            force: false,
        };
        crate::pipeline::gen(
            &plan,
            &opts,
            None,
            std::time::Duration::from_secs(5),
            &mut |_| {},
        )
        .unwrap();
        Env::load(dir, &host).unwrap()
    }
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
