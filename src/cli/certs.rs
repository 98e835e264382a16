//! `kubeunit certs check-expiration` and `kubeunit certs renew`: when the state dir's certificates
//! expire, and re-issuing leaf certificates from the existing CAs.

use std::fmt;
use std::time::Duration;

use super::common::{lock_wait, print_json, say, Output, Target};
use crate::error::Error;
use crate::ops::certs::{restart_users, RestartAction, RestartOutcome};
use crate::pipeline;
use crate::pki::Renewal;
use crate::run::certs::{self, CertExpiry};
use crate::spec::host;
use crate::state::{self, Access};

pub const AFTER_HELP: &str = "Examples:
  kubeunit certs check-expiration
  kubeunit certs renew all
  kubeunit certs renew apiserver etcd/server --state-dir /srv/k8s";

pub const CHECK_HELP: &str = "Examples:
  kubeunit certs check-expiration
  kubeunit certs check-expiration --state-dir /srv/k8s
  kubeunit certs check-expiration -o json | jq '.certificates[] | select(.residualSeconds < 86400) | .name'

One row per certificate of the state dir: when it expires, the time left (RESIDUAL TIME), its CA
and the components that use it. Certificates start at pki.epoch (SOURCE_DATE_EPOCH or the start of
the day gen ran) and last pki.certValidity (CAs: pki.caValidity); renewed ones start at their renewal.";

pub const RENEW_HELP: &str = "Examples:
  kubeunit certs renew all                          # every leaf certificate, then restart their users
  kubeunit certs renew apiserver                    # restarts kube-apiserver only
  kubeunit certs renew admin                        # rewrites kubeconfig/admin.kubeconfig, restarts nothing
  kubeunit certs renew scheduler scheduler-server --no-restart   # then: systemctl restart UNIT
  kubeunit certs renew all -o json | jq '.components[] | select(.action == \"restarted\")'

Each named certificate is issued again with its own key, signed by its unchanged CA, valid from now
for pki.certValidity (not from pki.epoch); the kubeconfigs that embed it are rewritten. The running
components that use a renewed certificate (their unit or config files name it, its key or its
kubeconfig) are restarted in place one by one and waited for until healthy; the others keep
running. CAs are never renewed (`kubeunit gen --force` replaces the whole PKI). A state dir that
differs from what `gen` would write is refused (run `kubeunit gen` first), except for your edited
unit files and addons, which stay. Later gens keep the renewed certificates, and `gen --check` finds
the state dir as consistent as before.";

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Show when each certificate of the state dir expires, its residual time, CA and users.
    #[command(after_help = CHECK_HELP)]
    CheckExpiration(CheckArgs),
    /// Re-issue leaf certificates from the existing CAs, rewrite the kubeconfigs that embed them
    /// and restart the components that use them.
    #[command(after_help = RENEW_HELP)]
    Renew(RenewArgs),
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub target: Target,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(clap::Args, Debug)]
pub struct RenewArgs {
    #[command(flatten)]
    pub target: Target,
    /// Leaf certificates to renew, by the names check-expiration shows (apiserver, etcd/server,
    /// admin, ...), or `all`.
    #[arg(value_name = "NAME|all", required = true)]
    pub names: Vec<String>,
    /// Do not restart the components that use them (they keep the old certificates until restarted).
    #[arg(long)]
    pub no_restart: bool,
    /// Seconds to wait for the restarted components to be healthy again.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub async fn exec(command: Command) -> Result<i32, Error> {
    match command {
        Command::CheckExpiration(args) => check_expiration(args),
        Command::Renew(args) => renew(args).await,
    }
}

fn check_expiration(args: CheckArgs) -> Result<i32, Error> {
    let dir = host::local_state_dir(&args.target.state_dir())?;
    // A `gen` or `renew` in progress is waited for, not read half-way.
    let _lock = state::lock::acquire(&dir, Access::Shared, false, lock_wait()?, &mut say)?;
    let env = args.target.env()?;
    let users = certs::users(&env);
    let all = certs::expiration(&env.plan, &users, time::OffsetDateTime::now_utc())?;
    match args.output {
        Output::Json => {
            let (cas, leaves): (Vec<&CertExpiry>, Vec<&CertExpiry>) =
                all.iter().partition(|c| c.is_ca);
            print_json(&serde_json::json!({
                "stateDir": env.plan.state_dir,
                "certificates": leaves,
                "certificateAuthorities": cas,
            }));
        }
        Output::Text => print!("{}", ExpirationTable(&all)),
    }
    Ok(0)
}

/// kubeadm's two tables: leaf certificates, then CAs.
struct ExpirationTable<'a>(&'a [CertExpiry]);

impl fmt::Display for ExpirationTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (cas, leaves): (Vec<&CertExpiry>, Vec<&CertExpiry>) =
            self.0.iter().partition(|c| c.is_ca);
        writeln!(
            f,
            "{:<32} {:<22} {:<14} {:<16} USED BY",
            "CERTIFICATE", "EXPIRES", "RESIDUAL TIME", "CA"
        )?;
        for c in &leaves {
            let mut used: Vec<String> = c.used_by.clone();
            used.extend(c.kubeconfig.clone());
            writeln!(
                f,
                "{:<32} {:<22} {:<14} {:<16} {}",
                c.name,
                c.not_after,
                c.residual(),
                c.ca.as_deref().unwrap_or("-"),
                if used.is_empty() {
                    "-".to_string()
                } else {
                    used.join(", ")
                }
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<32} {:<22} {:<14}",
            "CERTIFICATE AUTHORITY", "EXPIRES", "RESIDUAL TIME"
        )?;
        for c in &cas {
            writeln!(f, "{:<32} {:<22} {:<14}", c.name, c.not_after, c.residual())?;
        }
        for c in self.0.iter().filter(|c| !c.signed_by_ca) {
            writeln!(
                f,
                "WARNING: {} does not verify against {}: bring the PKI in line with `kubeunit gen`",
                c.path,
                c.ca.as_deref()
                    .map_or_else(|| "itself".to_string(), |ca| format!("pki/{ca}.crt"))
            )?;
        }
        if self.0.iter().any(|c| !c.is_ca && c.expired) {
            writeln!(
                f,
                "expired certificates: renew them with `kubeunit certs renew NAME...|all`"
            )?;
        }
        Ok(())
    }
}

async fn renew(args: RenewArgs) -> Result<i32, Error> {
    // Bad input is refused before anything is written: a state dir that is not generated (exit 2
    // from here), unknown names or CAs (renewable).
    let (env, _lock) = args.target.env_locked()?;
    let names = pipeline::renewable(&env.plan, &args.names)?;
    // Connect before renewing: a systemd that cannot be reached fails before anything changed.
    let sd = if args.no_restart {
        None
    } else {
        Some(args.target.systemd(&env).await?)
    };
    let at = time::OffsetDateTime::now_utc();
    let renewal = Renewal {
        names: names.iter().cloned().collect(),
        at,
    };
    let (_, summary) = pipeline::renew(&env.plan, &renewal)?;
    let users = certs::users(&env);
    let renewed: Vec<CertExpiry> = certs::expiration(&env.plan, &users, at)?
        .into_iter()
        .filter(|c| names.contains(&c.name))
        .collect();
    // The kubeconfigs of the certificate table (a further node's are under nodes/<node>/).
    let all_kubeconfigs: Vec<String> = crate::pki::specs(&env.plan)
        .into_iter()
        .filter_map(|s| s.kubeconfig_path)
        .collect();
    let kubeconfigs: Vec<String> = summary
        .written
        .iter()
        .filter(|p| all_kubeconfigs.contains(p))
        .cloned()
        .collect();
    let components = match &sd {
        Some(sd) => {
            let timeout = Duration::from_secs(args.timeout);
            restart_users(&env, sd, &names, timeout).await?
        }
        None => certs::affected(&env, &users, &names)
            .into_iter()
            .map(|(c, unit, certificates)| RestartOutcome {
                component: c.name.clone(),
                unit: unit.name.clone(),
                action: RestartAction::Skipped,
                certificates,
                healthy_after: None,
            })
            .collect(),
    };
    let report = RenewReport {
        dir: env.plan.state_dir.display().to_string(),
        renewed: &renewed,
        kubeconfigs: &kubeconfigs,
        components: &components,
    };
    match args.output {
        Output::Json => print_json(&serde_json::json!({
            "stateDir": env.plan.state_dir,
            "renewed": renewed,
            "kubeconfigs": kubeconfigs,
            "components": components,
        })),
        Output::Text => print!("{report}"),
    }
    Ok(0)
}

struct RenewReport<'a> {
    dir: String,
    renewed: &'a [CertExpiry],
    kubeconfigs: &'a [String],
    components: &'a [RestartOutcome],
}

impl fmt::Display for RenewReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "renewed {} certificate(s) in {} (CAs unchanged):",
            self.renewed.len(),
            self.dir
        )?;
        for c in self.renewed {
            writeln!(
                f,
                "  {:<32} valid {} .. {} ({}), serial {}",
                c.name,
                c.not_before,
                c.not_after,
                c.residual(),
                c.serial
            )?;
        }
        for k in self.kubeconfigs {
            writeln!(f, "rewrote {k}")?;
        }
        if self.components.is_empty() {
            writeln!(f, "no component uses them: nothing restarted")?;
        }
        for o in self.components {
            match (o.action, o.healthy_after) {
                (RestartAction::Restarted, Some(s)) => {
                    writeln!(f, "{}: restarted, healthy after {s:.2}s", o.component)?
                }
                (RestartAction::UnderDebugger, _) => writeln!(
                    f,
                    "{}: {} ({}); it uses the old certificates until `kubeunit debug {} --stop` returns it to its unit",
                    o.component,
                    o.action.as_str(),
                    o.unit,
                    o.component
                )?,
                (RestartAction::Skipped, _) => writeln!(
                    f,
                    "{}: {}; it uses the old certificates until it restarts: systemctl restart {}",
                    o.component,
                    o.action.as_str(),
                    o.unit
                )?,
                (action, _) => writeln!(
                    f,
                    "{}: {}; it reads the new certificates when it starts",
                    o.component,
                    action.as_str()
                )?,
            }
        }
        Ok(())
    }
}
