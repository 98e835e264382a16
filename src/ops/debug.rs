//! `debug COMPONENT`: the component's unit stopped, and the same command line started under dlv's
//! headless server as a transient unit of the same slice, with the same environment, credentials and
//! logs (journald, the same syslog identifier). Leaving: stop the debug unit, start the normal one.

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::restart::restart;
use crate::components::Instance;
use crate::error::Error;
use crate::run::start::{start_one, start_slice};
use crate::run::{debugger_address, journal_tail, probe, Env, Progress, Timing};
use crate::systemd::{JobResult, Systemd};
use crate::unit::{self, UnitFile, Value};

/// What `kubeunit debug` was asked for.
pub struct DebugRequest<'a> {
    pub component: &'a str,
    /// dlv's listen address; `None`: loopback and a free port.
    pub listen: Option<SocketAddr>,
    /// A non-loopback listen address is allowed (dlv has no authentication).
    pub allow_remote: bool,
    /// Let the component run at once (dlv --continue) and wait until it is healthy.
    pub run: bool,
    pub dlv: PathBuf,
    /// Debug this binary instead of the unit's (a build with `-gcflags=all=-N -l`).
    pub binary: Option<PathBuf>,
    pub timeout: Duration,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DebugReport {
    pub component: String,
    /// The transient unit dlv runs in.
    pub unit: String,
    pub listen: SocketAddr,
    pub binary: PathBuf,
    pub argv: Vec<String>,
    /// The component runs (dlv --continue) and passed its health probe.
    pub healthy: bool,
    pub seconds: f64,
}

/// Stop the component's unit and start it under dlv. Fails, changing nothing, when the component
/// does not run, already runs under a debugger, or dlv, the binary or the port is not usable; when
/// dlv then fails to come up, the normal unit is started again.
pub async fn debug(env: &Env, sd: &Systemd, req: &DebugRequest<'_>) -> Result<DebugReport, Error> {
    let plan = &env.plan;
    let (c, unit) = env.unit(req.component)?;
    if c.component.timer.is_some() {
        return Err(Error::Preflight {
            message: format!(
                "{} runs on a schedule, not as a process to attach to",
                c.name
            ),
            fix: format!(
                "run its command yourself: kubeunit cmdline {} --state-dir {}",
                c.name,
                plan.state_dir.display()
            ),
        });
    }
    let name = c.debug_unit();
    if let Some(st) = sd.state(&name).await? {
        if st.active_state.is_running() {
            let at = debugger_address(&st.description).unwrap_or("?");
            return Err(Error::Preflight {
                message: format!("{} runs under dlv already (at {at}, unit {name})", c.name),
                fix: format!(
                    "attach to it (dlv connect {at}), or leave it first: kubeunit debug {} --stop",
                    c.name
                ),
            });
        }
        sd.reset_failed(&name).await?;
        sd.wait_unloaded(&name, Duration::from_secs(10)).await?;
    }
    if !sd
        .state(&unit.name)
        .await?
        .is_some_and(|s| s.active_state.is_running())
    {
        return Err(Error::Preflight {
            message: format!("{} is not running ({} is inactive)", c.name, unit.name),
            fix: format!(
                "start the environment first: kubeunit start --state-dir {}",
                plan.state_dir.display()
            ),
        });
    }
    crate::spec::host::executable(&req.dlv).map_err(|why| Error::Preflight {
        message: format!("dlv {}: {why}", req.dlv.display()),
        fix: "install dlv (scripts/build-test-binaries.sh --debug builds the pinned one; or go install github.com/go-delve/delve/cmd/dlv@latest) and pass --dlv PATH or put it on PATH".into(),
    })?;
    let Some((unit_binary, unit_argv, _)) = unit.exec_start() else {
        return Err(Error::Artifact {
            path: unit.path.clone(),
            message: "no ExecStart=".into(),
            fix: "regenerate it with `kubeunit gen`".into(),
        });
    };
    let binary = req
        .binary
        .clone()
        .unwrap_or_else(|| PathBuf::from(unit_binary));
    crate::spec::host::executable(&binary).map_err(|why| Error::Preflight {
        message: format!("{}: binary {}: {why}", c.name, binary.display()),
        fix: "build it (scripts/build-test-binaries.sh --debug COMPONENT builds one with -gcflags=all=-N -l) and pass its path with --binary".into(),
    })?;
    let listen = listen_address(req)?;
    let argv = dlv_argv(&req.dlv, listen, req.run, &binary, &unit_argv[1..]);
    let debug_unit = debug_unit(unit, &name, &c.name, plan.name(), listen, &argv);

    let t0 = Instant::now();
    sd.stop(&unit.name).await?;
    sd.wait_gone(&unit.name, Duration::from_secs(60)).await?;
    sd.reset_failed(&unit.name).await?;
    start_slice(env, sd).await?;
    let healthy = match start_debug_unit(c, sd, &debug_unit, listen, req, t0).await {
        Ok(healthy) => healthy,
        Err(e) => {
            // Back to where it was: the normal unit.
            let _ = sd.stop(&name).await;
            let _ = sd.reset_failed(&name).await;
            let _ = restart(env, sd, &c.name, req.timeout).await;
            return Err(e);
        }
    };
    Ok(DebugReport {
        component: c.name.clone(),
        unit: name,
        listen,
        binary,
        argv,
        healthy,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Leave the debugger: stop the debug unit (dlv kills the component) and start the normal unit.
pub async fn stop_debug(
    env: &Env,
    sd: &Systemd,
    component: &str,
    timeout: Duration,
) -> Result<Timing, Error> {
    let (c, _) = env.unit(component)?;
    let name = c.debug_unit();
    if sd.state(&name).await?.is_none() {
        return Err(Error::Preflight {
            message: format!("{} does not run under a debugger (no {name})", c.name),
            fix: format!("kubeunit restart {} restarts its normal unit", c.name),
        });
    }
    restart(env, sd, &c.name, timeout).await
}

async fn start_debug_unit(
    instance: &Instance<'static>,
    sd: &Systemd,
    unit: &UnitFile,
    listen: SocketAddr,
    req: &DebugRequest<'_>,
    t0: Instant,
) -> Result<bool, Error> {
    let plan = &instance.plan;
    let deadline = t0 + req.timeout;
    let fail = |reason: String| {
        Error::Start(format!(
            "{} under dlv ({}) failed: {reason}\n--- last 20 lines of its journal ---\n{}--- see more: journalctl -u {} ---",
            instance.name,
            unit.name,
            journal_tail(plan, &unit.name, 20),
            unit.name
        ))
    };
    if req.run {
        let mut quiet = |_: Progress| {};
        let progress: RefCell<&mut dyn FnMut(Progress)> = RefCell::new(&mut quiet);
        start_one(instance, sd, unit, None, t0, deadline, &progress, |_| {}).await?;
        return Ok(true);
    }
    match sd
        .start_transient(&unit.name, unit::properties(unit)?)
        .await?
    {
        JobResult::Done => {}
        result => return Err(fail(format!("start job {result}"))),
    }
    // Halted at the entry point until a client continues it: ready once dlv accepts connections.
    loop {
        if TcpStream::connect_timeout(&listen, Duration::from_millis(200)).is_ok() {
            return Ok(false);
        }
        let st = sd.state(&unit.name).await?.unwrap_or_default();
        if st.active_state.is_stopped() {
            return Err(fail(format!(
                "dlv exited (Result={}, exit status {})",
                st.result, st.exec_main_status
            )));
        }
        if Instant::now() >= deadline {
            return Err(fail(format!("dlv does not listen on {listen}")));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The requested address (loopback unless allowed otherwise, and free), or loopback and a port the
/// kernel says is free.
fn listen_address(req: &DebugRequest) -> Result<SocketAddr, Error> {
    let Some(addr) = req.listen else {
        let free = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| Error::Preflight {
                message: format!("no free port on 127.0.0.1 for dlv: {e}"),
                fix: "pass --listen 127.0.0.1:PORT".into(),
            })?;
        return Ok(free);
    };
    if !addr.ip().is_loopback() && !req.allow_remote {
        return Err(Error::Preflight {
            message: format!(
                "--listen {addr} is not a loopback address: dlv has no authentication, and whoever reaches it runs code as the component"
            ),
            fix: format!("listen on loopback (127.0.0.1:{}), or add --allow-remote if you mean it", addr.port()),
        });
    }
    if addr.port() == 0 {
        return Err(Error::Preflight {
            message: format!("--listen {addr}: port 0"),
            fix: "give a port, or leave --listen out for a free loopback port".into(),
        });
    }
    if let Some(busy) = probe::listeners(&[addr.port()]).into_iter().next() {
        return Err(Error::Preflight {
            message: format!(
                "port {} for dlv is already in use: {} listens on {}",
                addr.port(),
                busy.process,
                busy.address
            ),
            fix: "pick another port with --listen, or leave --listen out for a free one".into(),
        });
    }
    Ok(addr)
}

/// `dlv exec --headless ... BINARY -- ARGS`.
pub fn dlv_argv(
    dlv: &Path,
    listen: SocketAddr,
    run: bool,
    binary: &Path,
    args: &[String],
) -> Vec<String> {
    let mut argv = vec![
        dlv.to_string_lossy().into_owned(),
        "exec".into(),
        "--headless".into(),
        "--api-version=2".into(),
        "--accept-multiclient".into(),
        format!("--listen={listen}"),
    ];
    if run {
        argv.push("--continue".into());
    }
    argv.push(binary.to_string_lossy().into_owned());
    argv.push("--".into());
    argv.extend(args.iter().cloned());
    argv
}

/// The component's unit, changed to run `argv` under dlv: Type=exec (dlv does not pass the
/// component's sd_notify on), no restarts (a crash under the debugger is the user's to see), and a
/// description naming the listen address (`status` reads it back).
fn debug_unit(
    unit: &UnitFile,
    name: &str,
    component: &str,
    env: &str,
    listen: SocketAddr,
    argv: &[String],
) -> UnitFile {
    let mut properties: Vec<(String, Value)> = unit
        .properties
        .iter()
        .filter(|(k, _)| k != "NotifyAccess")
        .cloned()
        .collect();
    let set = |props: &mut Vec<(String, Value)>, key: &str, v: Value| match props
        .iter_mut()
        .find(|(k, _)| k == key)
    {
        Some(slot) => slot.1 = v,
        None => props.push((key.to_string(), v)),
    };
    set(
        &mut properties,
        "Description",
        Value::Str(format!("kubeunit {env}: {component} under dlv at {listen}")),
    );
    set(&mut properties, "Type", Value::Str("exec".into()));
    set(&mut properties, "Restart", Value::Str("no".into()));
    set(
        &mut properties,
        "ExecStart",
        Value::Exec(vec![(argv[0].clone(), argv.to_vec(), Default::default())]),
    );
    UnitFile {
        path: unit.path.clone(),
        name: name.to_string(),
        properties,
    }
}

/// Where to attach, for people and IDEs.
pub fn attach_hint(listen: SocketAddr) -> String {
    let host = match listen.ip() {
        IpAddr::V4(a) if a.is_unspecified() => "127.0.0.1".to_string(),
        IpAddr::V6(a) if a.is_unspecified() => "::1".to_string(),
        ip => ip.to_string(),
    };
    format!(
        "  dlv connect {listen}\n  VS Code (launch.json): {{\"type\": \"go\", \"request\": \"attach\", \"mode\": \"remote\", \"host\": \"{host}\", \"port\": {}}}\n  GoLand: Run > Edit Configurations > Go Remote, host {host}, port {}",
        listen.port(),
        listen.port()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_debug_unit_runs_dlv_with_the_same_arguments() {
        let text = "[Unit]\nDescription=kubeunit dev: kube-apiserver\n[Service]\nType=notify\nNotifyAccess=main\nExecStartPre=/bin/true\nExecStart=/bin/kube-apiserver --a=1 --b=2\nEnvironmentFile=/s/env/x.env\nRestart=on-failure\nSlice=kubeunit-dev.slice\nSyslogIdentifier=kubeunit-dev-kube-apiserver\n";
        let unit = crate::unit::parse(Path::new("/s/units/u.service"), text).unwrap();
        let listen: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let (_, argv, _) = unit.exec_start().unwrap().clone();
        let dlv_argv = dlv_argv(
            Path::new("/d/dlv"),
            listen,
            true,
            Path::new("/dbg/kube-apiserver"),
            &argv[1..],
        );
        assert_eq!(
            dlv_argv,
            [
                "/d/dlv",
                "exec",
                "--headless",
                "--api-version=2",
                "--accept-multiclient",
                "--listen=127.0.0.1:4000",
                "--continue",
                "/dbg/kube-apiserver",
                "--",
                "--a=1",
                "--b=2"
            ]
        );
        let d = debug_unit(
            &unit,
            "kubeunit-dev-kube-apiserver-debug.service",
            "kube-apiserver",
            "dev",
            listen,
            &dlv_argv,
        );
        let get = |k: &str| {
            d.properties
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("Type"), Some(Value::Str("exec".into())));
        assert_eq!(get("Restart"), Some(Value::Str("no".into())));
        assert_eq!(get("NotifyAccess"), None);
        assert!(get("ExecStartPre").is_some(), "the same preparation");
        assert_eq!(get("Slice"), Some(Value::Str("kubeunit-dev.slice".into())));
        assert_eq!(
            get("SyslogIdentifier"),
            Some(Value::Str("kubeunit-dev-kube-apiserver".into()))
        );
        assert!(matches!(get("EnvironmentFiles"), Some(Value::EnvFiles(f)) if f.len() == 1));
        let Some(Value::Str(desc)) = get("Description") else {
            panic!()
        };
        assert_eq!(debugger_address(&desc), Some("127.0.0.1:4000"));
    }
}
