//! `restart COMPONENT`: stop it and start it again from its unit file, so an edited file or a
//! swapped binary takes effect; waits until it is healthy.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::env::{debug_unit_name, Env};
use super::preflight::preflight;
use super::start::{start_one, start_slice, Progress, Timing};
use crate::error::Error;
use crate::systemd::Systemd;

/// Stop one component and start it again from its unit file (so an edited file or a swapped binary
/// takes effect), waiting until it is healthy.
pub async fn restart(
    env: &Env,
    sd: &Systemd,
    component: &str,
    timeout: Duration,
) -> Result<Timing, Error> {
    let (c, unit) = env.unit(component)?;
    let t0 = Instant::now();
    // Under a debugger: that unit goes, the normal one comes back.
    let debug = debug_unit_name(&env.plan, c.name);
    if sd.state(&debug).await?.is_some() {
        sd.stop(&debug).await?;
        sd.wait_gone(&debug, Duration::from_secs(60)).await?;
        sd.reset_failed(&debug).await?;
    }
    let timer = env.timer(c.name);
    // A timer first (it would start its service again), then the service.
    for name in timer.iter().map(|t| &t.name).chain([&unit.name]) {
        sd.stop(name).await?;
        sd.wait_gone(name, Duration::from_secs(60)).await?;
        sd.reset_failed(name).await?;
    }
    // Its names are free for the new transient units only once systemd unloaded the old ones.
    for name in timer.iter().map(|t| &t.name).chain([&unit.name]) {
        sd.wait_unloaded(name, Duration::from_secs(10)).await?;
    }
    let mut others: BTreeSet<&str> = env.units.iter().map(|(c, _)| c.name).collect();
    others.remove(c.name);
    preflight(env, &others)?;
    start_slice(env, sd).await?;
    let mut quiet = |_: Progress| {};
    let progress: RefCell<&mut dyn FnMut(Progress)> = RefCell::new(&mut quiet);
    start_one(&env.plan, sd, c, unit, timer, t0, t0 + timeout, &progress).await
}
