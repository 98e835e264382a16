//! `kubeunit status`: a row per component; exit 3 when any is not running or not healthy.

use std::fmt;

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::run::certs::CertExpiry;
use crate::run::{self, ComponentStatus};

pub const AFTER_HELP: &str = "Examples:
  kubeunit status
  kubeunit status -o json | jq '.[] | select(.healthy | not)'
  kubeunit status -o json | jq '.[] | {component, certificatesExpiring}'

Certificates that expire within 30 days are named below the table (and per component in
`certificatesExpiring` of -o json); `kubeunit certs check-expiration` lists them all.

Exit codes: 0 every component healthy, 3 any not running or unhealthy (like systemctl is-active).";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    let env = args.target.env()?;
    let sd = args.target.systemd(&env).await?;
    let rows = run::status(&env, &sd).await?;
    match args.output {
        Output::Json => print_json(&rows),
        Output::Text => {
            print!("{}", Table(&rows));
            match run::certificates_expiring(&env) {
                Ok(certs) => print!("{}", ExpiryWarning(&certs)),
                Err(e) => println!("WARNING: cannot read the certificates: {e}"),
            }
        }
    }
    Ok(if rows.iter().all(|r| r.healthy) { 0 } else { 3 })
}

struct Table<'a>(&'a [ComponentStatus]);

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<26} {:<20} {:>8} {:>9} {:>8} {:>8}  HEALTH",
            "COMPONENT", "STATE", "PID", "MEMORY", "RESTARTS", "UPTIME"
        )?;
        for r in self.0 {
            let mem = r
                .memory_bytes
                .map(|m| format!("{}Mi", m / (1 << 20)))
                .unwrap_or_else(|| "-".into());
            let up = r
                .uptime_seconds
                .map(human_duration)
                .unwrap_or_else(|| "-".into());
            let pid = if r.pid == 0 {
                "-".to_string()
            } else {
                r.pid.to_string()
            };
            let health = if r.healthy { "ok" } else { &r.health_detail };
            writeln!(
                f,
                "{:<26} {:<20} {:>8} {:>9} {:>8} {:>8}  {}",
                r.component,
                format!("{}/{}", r.active_state, r.sub_state),
                pid,
                mem,
                r.restarts,
                up,
                health
            )?;
        }
        let mut overrides_shown = std::collections::BTreeSet::new();
        for r in self.0 {
            if let Some(at) = &r.debugger {
                writeln!(
                    f,
                    "{} runs under dlv ({}): dlv connect {at}; back to normal: kubeunit debug {} --stop",
                    r.component, r.unit, r.component
                )?;
            }
            if let Some(next) = &r.next_run {
                let last = r.last_run.as_deref().unwrap_or("never");
                writeln!(
                    f,
                    "{} ({}): next run {next}, last run {last}",
                    r.component, r.unit
                )?;
            }
            // A per-node component's binary is the component's setting, once for every node.
            let component = r.component.split('@').next().unwrap_or(&r.component);
            if let Some(binary) = &r.binary_override {
                if overrides_shown.insert(component) {
                    writeln!(
                        f,
                        "{component} runs {binary} (components.{component}.binary)"
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// One line when certificates expire within 30 days, with the command that renews them.
struct ExpiryWarning<'a>(&'a [CertExpiry]);

impl fmt::Display for ExpiryWarning<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = self
            .0
            .iter()
            .map(|c| match c.residual_seconds {
                s if s < 0 => format!("{} (expired)", c.name),
                _ => format!("{} (in {})", c.name, c.residual()),
            })
            .collect();
        writeln!(
            f,
            "WARNING: certificates expire within 30 days: {}",
            list.join(", ")
        )?;
        let (cas, leaves): (Vec<&CertExpiry>, Vec<&CertExpiry>) =
            self.0.iter().partition(|c| c.is_ca);
        if !leaves.is_empty() {
            writeln!(
                f,
                "  renew them: kubeunit certs renew all (see kubeunit certs check-expiration)"
            )?;
        }
        if !cas.is_empty() {
            writeln!(
                f,
                "  a CA is not renewed: kubeunit gen --force replaces the whole PKI"
            )?;
        }
        Ok(())
    }
}

fn human_duration(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}
