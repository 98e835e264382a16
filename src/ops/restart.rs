//! `restart COMPONENT`: stop it and start it again from its unit file, so an edited file or a
//! swapped binary takes effect; waits until it is healthy.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::components::Instance;
use crate::error::Error;
use crate::run::own_connections::Watches;
use crate::run::preflight::{before_stopping, ports_released};
use crate::run::start::{start_one, start_slice};
use crate::run::{Env, Progress, Timing};
use crate::systemd::Systemd;
use crate::unit::UnitFile;

/// Stop one component and start it again from its unit file (so an edited file or a swapped binary
/// takes effect), waiting until it is healthy.
///
/// A transient unit that loaded units refer to (Wants=, After=) stays loaded when it stops, with its
/// old properties, and its name cannot be given to a new one: the components that need it (and
/// theirs) go down first and come back after it, as systemd does with Requires=.
pub async fn restart(
    env: &Env,
    sd: &Systemd,
    component: &str,
    timeout: Duration,
) -> Result<Timing, Error> {
    let (c, unit) = env.unit(component)?;
    let t0 = Instant::now();
    // Under a debugger: that unit goes, the normal one comes back.
    let debug = c.debug_unit();
    if sd.state(&debug).await?.is_some() {
        sd.stop(&debug).await?;
        sd.wait_gone(&debug, Duration::from_secs(60)).await?;
        sd.reset_failed(&debug).await?;
    }
    let timer = env.timer(&c.name);
    // An installed unit starts from its file again whatever refers to it.
    let installed = crate::run::installed(&env.plan, sd).await?;
    let dependents = if installed {
        vec![]
    } else {
        loaded_dependents(env, sd, &c.name).await?
    };
    // Dependents first (last started, first stopped), then the component; a timer before its
    // service (it would start it again).
    let names_of = |d: &Instance<'static>, u: &UnitFile| {
        env.timer(&d.name)
            .map(|t| t.name.clone())
            .into_iter()
            .chain([u.name.clone()])
            .collect::<Vec<String>>()
    };
    let dependent_names: Vec<String> = dependents
        .iter()
        .rev()
        .flat_map(|(d, u)| names_of(d, u))
        .collect();
    let own_names = names_of(c, unit);
    // Checked while it still serves: a refusal stops nothing, and only the ports are left for
    // after the stop.
    let mut others: BTreeSet<&str> = env.units.iter().map(|(i, _)| i.name.as_str()).collect();
    others.remove(c.name.as_str());
    for (d, _) in &dependents {
        others.remove(d.name.as_str());
    }
    before_stopping(env, &others)?;
    // As `stop` does: a component's connections are ended once it closed its listener.
    let watches = Watches::start(
        sd,
        dependents.iter().map(|(d, u)| (*d, u)).chain([(c, unit)]),
    )
    .await?;
    // The dependents go, and are unloaded, while the component still serves: systemd unloads a
    // stopped transient unit only once no loaded unit refers to it, so between the component's
    // stop and its start (while it answers nothing: the API server's /readyz gap of an upgrade)
    // only its own unload is waited for.
    stop_all(sd, &dependent_names).await?;
    if !installed {
        unload_all(sd, &dependent_names).await?;
    }
    stop_all(sd, &own_names).await?;
    watches.finish().await;
    if !installed {
        // Its name is free for the new transient unit only once systemd unloaded the old one.
        unload_all(sd, &own_names).await?;
    }
    ports_released(env, &others)?;
    start_slice(env, sd).await?;
    let mut quiet = |_: Progress| {};
    let progress: RefCell<&mut dyn FnMut(Progress)> = RefCell::new(&mut quiet);
    let deadline = t0 + timeout;
    let timing = start_one(c, sd, unit, timer, t0, deadline, &progress, |_| {}).await?;
    for (d, u) in &dependents {
        start_one(
            d,
            sd,
            u,
            env.timer(&d.name),
            t0,
            deadline,
            &progress,
            |_| {},
        )
        .await?;
    }
    Ok(timing)
}

/// Stop each unit of `names` in turn, each gone before the next.
async fn stop_all(sd: &Systemd, names: &[String]) -> Result<(), Error> {
    for name in names {
        sd.stop(name).await?;
        sd.wait_gone(name, Duration::from_secs(60)).await?;
        sd.reset_failed(name).await?;
    }
    Ok(())
}

/// Wait until systemd unloaded each unit of `names`, in order (what refers to a unit first).
async fn unload_all(sd: &Systemd, names: &[String]) -> Result<(), Error> {
    for name in names {
        sd.wait_unloaded(name, Duration::from_secs(10)).await?;
    }
    Ok(())
}

/// The loaded units of the instances that need instance `name`, directly or through others, in
/// table order.
async fn loaded_dependents<'e>(
    env: &'e Env,
    sd: &Systemd,
    name: &str,
) -> Result<Vec<(&'e Instance<'static>, UnitFile)>, Error> {
    let mut needing: BTreeSet<&str> = BTreeSet::from([name]);
    let mut out = Vec::new();
    for (d, u) in &env.units {
        if env
            .deps_of(d, &d.component.deps(&d.plan))
            .iter()
            .any(|dep| needing.contains(dep))
            && sd.state(&u.name).await?.is_some()
        {
            needing.insert(d.name.as_str());
            out.push((d, u.clone()));
        }
    }
    Ok(out)
}
