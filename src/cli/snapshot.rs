//! `kubeunit snapshot save|list|restore`: etcd snapshots of an environment.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::common::{print_json, say, Output, Target};
use crate::error::Error;
use crate::ops;
use crate::ops::snapshot::{self, SaveReport, SaveRequest, SnapshotInfo};
use crate::run::Progress;

pub const AFTER_HELP: &str = "Examples:
  kubeunit snapshot save                              # into the snapshot dir (etcd.snapshot.dir)
  kubeunit snapshot save /backup/before-upgrade.db
  kubeunit snapshot save --prefix nightly --prune-to 7
  kubeunit snapshot list -o json
  kubeunit snapshot restore /var/lib/kubeunit/dev/data/snapshots/manual-20261123T090507.042Z.db --yes

Scheduled snapshots: set etcd.snapshot.schedule (a systemd calendar expression, e.g. hourly) and
etcd.snapshot.retention in the profile; `start` then runs the etcd-snapshot timer.";

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Save a snapshot of the running etcd (into the snapshot dir unless PATH is given).
    #[command(after_help = SAVE_HELP)]
    Save(SaveArgs),
    /// List the snapshots in the snapshot dir, with etcd's revision and hash of each.
    #[command(after_help = LIST_HELP)]
    List(ListArgs),
    /// Replace etcd's data with a snapshot: stops the environment, restores, starts it again.
    #[command(after_help = RESTORE_HELP)]
    Restore(RestoreArgs),
}

const SAVE_HELP: &str = "Examples:
  kubeunit snapshot save                              # SNAPSHOT_DIR/manual-<UTC time>.db
  kubeunit snapshot save /backup/                     # /backup/manual-<UTC time>.db
  kubeunit snapshot save /backup/before-upgrade.db    # that file (must not exist)
  kubeunit snapshot save --prefix nightly --prune-to 7  # keep the newest 7 nightly-*.db

The file is written next to its final name, checked with `etcdutl snapshot status` and renamed
into place (0600: it holds everything in etcd). Needs etcd running, etcdctl and etcdutl
(next to etcd's binary, or etcd.snapshot.etcdctl/etcdutl).
Exit codes: 0 saved, 1 etcd not healthy or etcdctl failed, 2 bad arguments or state dir.";

const LIST_HELP: &str = "Examples:
  kubeunit snapshot list
  kubeunit snapshot list -o json | jq -r '.[-1].path'   # the newest";

const RESTORE_HELP: &str = "Examples:
  kubeunit snapshot restore /backup/before-upgrade.db --yes
  kubeunit snapshot restore \"$(kubeunit snapshot list -o json | jq -r '.[-1].path')\" --yes

Restores with `etcdutl snapshot restore --bump-revision 1000000000 --mark-compacted` into a new
dir next to etcd's data dir, stops the environment, swaps the two dirs atomically and starts the
environment again. Objects created after the snapshot are gone. The old data is deleted once the
start succeeded; if it fails, the old data is swapped back and started.
Exit codes: 0 restored and healthy, 1 restore or start failed (rolled back), 2 bad arguments, not a
snapshot, or not a generated state dir (nothing changed).";

#[derive(clap::Args, Debug)]
pub struct SaveArgs {
    #[command(flatten)]
    pub target: Target,
    /// File to write (must not exist), or a directory to write into.
    pub path: Option<PathBuf>,
    /// Name prefix of the snapshot file: PREFIX-<UTC time>.db.
    #[arg(long, default_value = "manual")]
    pub prefix: String,
    /// After saving, keep only the newest N snapshots of this prefix in that directory.
    #[arg(long, value_name = "N")]
    pub prune_to: Option<u32>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub target: Target,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub target: Target,
    /// The snapshot file.
    pub path: PathBuf,
    /// Yes, replace etcd's data (objects created since the snapshot are lost).
    #[arg(long)]
    pub yes: bool,
    /// Seconds to wait for every component to become healthy again.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub async fn exec(command: Command) -> Result<i32, Error> {
    match command {
        Command::Save(args) => save(args),
        Command::List(args) => list(args),
        Command::Restore(args) => restore(args).await,
    }
}

fn save(args: SaveArgs) -> Result<i32, Error> {
    let env = args.target.env()?;
    let path = match &args.path {
        Some(p) => Some(absolute(p)?),
        None => None,
    };
    let report = snapshot::save(
        &env.plan,
        &SaveRequest {
            path: path.as_deref(),
            prefix: &args.prefix,
            prune_to: args.prune_to,
        },
    )?;
    match args.output {
        Output::Json => print_json(&report),
        Output::Text => print!("{}", Saved(&report)),
    }
    Ok(0)
}

fn list(args: ListArgs) -> Result<i32, Error> {
    let env = args.target.env()?;
    let rows = snapshot::list(&env.plan)?;
    match args.output {
        Output::Json => print_json(&rows),
        Output::Text => print!(
            "{}",
            Table {
                dir: &env.plan.snapshot_dir,
                rows: &rows
            }
        ),
    }
    Ok(0)
}

async fn restore(args: RestoreArgs) -> Result<i32, Error> {
    if !args.yes {
        return Err(Error::Usage {
            message: format!(
                "restoring {} replaces etcd's data (objects created since the snapshot are lost) and restarts the environment",
                args.path.display()
            ),
            fix: "add --yes to go ahead".into(),
        });
    }
    let path = absolute(&args.path)?;
    let (env, _lock) = args.target.env_locked()?;
    // Bad input is refused before anything else (restore checks it again).
    snapshot::check_file(&env.plan, &path)?;
    let sd = args.target.systemd(&env).await?;
    let text = args.output == Output::Text;
    let mut progress = |p: Progress| {
        if let (true, Progress::Healthy(t)) = (text, &p) {
            println!("  ok {:<26} healthy after {:>5.2}s", t.component, t.healthy);
        }
    };
    let mut note = |m: &str| say(m);
    let report = ops::snapshot::restore(
        &env,
        &sd,
        &path,
        Duration::from_secs(args.timeout),
        &mut progress,
        &mut note,
    )
    .await?;
    // The data is from before any upgrade that stopped half-way: its record would resume it.
    if ops::upgrade::forget_record(&env.plan.data_dir)? {
        say(&format!(
            "the record of an upgrade that stopped half-way ({}) is removed: the environment is back at its snapshot",
            env.plan.data_dir.join(ops::upgrade::RECORD).display()
        ));
    }
    match args.output {
        Output::Json => print_json(&report),
        Output::Text => println!(
            "environment '{}' restored from {} (revision {}, now above {}) and up in {:.1}s",
            env.plan.name(),
            report.snapshot.display(),
            report.status.revision,
            report.status.revision as u64 + snapshot::BUMP_REVISION,
            report.seconds
        ),
    }
    Ok(0)
}

/// A snapshot path from the command line, made absolute (the unit and etcdutl get it).
fn absolute(p: &std::path::Path) -> Result<PathBuf, Error> {
    std::path::absolute(p).map_err(|e| Error::Usage {
        message: format!("{}: cannot resolve the path: {e}", p.display()),
        fix: "give an absolute path".into(),
    })
}

struct Saved<'a>(&'a SaveReport);

impl fmt::Display for Saved<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.0.snapshot;
        write!(
            f,
            "saved {} ({})",
            s.path.display(),
            human_size(s.size_bytes)
        )?;
        if let Some(st) = &s.status {
            write!(f, ", revision {}, {} keys", st.revision, st.total_key)?;
        }
        writeln!(f, " in {:.1}s", self.0.seconds)?;
        for p in &self.0.pruned {
            writeln!(f, "pruned {}", p.display())?;
        }
        Ok(())
    }
}

struct Table<'a> {
    dir: &'a std::path::Path,
    rows: &'a [SnapshotInfo],
}

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rows.is_empty() {
            return writeln!(f, "no snapshots in {}", self.dir.display());
        }
        writeln!(
            f,
            "{:<40} {:>9} {:<20} {:>10} {:>8} {:>8}",
            "NAME", "SIZE", "TIME", "REVISION", "KEYS", "HASH"
        )?;
        for r in self.rows {
            let (rev, keys, hash) = match &r.status {
                Some(s) => (
                    s.revision.to_string(),
                    s.total_key.to_string(),
                    format!("{:08x}", s.hash),
                ),
                None => ("-".into(), "-".into(), "-".into()),
            };
            writeln!(
                f,
                "{:<40} {:>9} {:<20} {:>10} {:>8} {:>8}",
                r.name,
                human_size(r.size_bytes),
                r.time,
                rev,
                keys,
                hash
            )?;
            if let Some(e) = &r.error {
                writeln!(f, "  not readable as a snapshot: {e}")?;
            }
        }
        writeln!(f, "in {}", self.dir.display())
    }
}

fn human_size(bytes: u64) -> String {
    match bytes {
        b if b < 1 << 10 => format!("{b}B"),
        b if b < 1 << 20 => format!("{:.1}Ki", b as f64 / 1024.0),
        b if b < 1 << 30 => format!("{:.1}Mi", b as f64 / 1048576.0),
        b => format!("{:.1}Gi", b as f64 / 1073741824.0),
    }
}
