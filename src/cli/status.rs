//! `kubeunit status`: a row per component; exit 3 when any is not running or not healthy.

use std::fmt;

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::run::{self, ComponentStatus};

pub const AFTER_HELP: &str = "Examples:
  kubeunit status
  kubeunit status -o json | jq '.[] | select(.healthy | not)'

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
    let sd = args.target.systemd().await?;
    let rows = run::status(&env, &sd).await?;
    match args.output {
        Output::Json => print_json(&rows),
        Output::Text => print!("{}", Table(&rows)),
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
            if let Some(binary) = &r.binary_override {
                writeln!(
                    f,
                    "{} runs {binary} (components.{}.binary)",
                    r.component, r.component
                )?;
            }
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
