//! etcd snapshots: `save` (etcdctl from the running etcd, into a temporary file in the snapshot dir,
//! checked, then renamed; `prune_to` keeps the newest of one prefix), `list` (with what `etcdutl
//! snapshot status` says of each) and `restore` (check the file, restore it with etcdutl into a fresh
//! dir next to etcd's data dir, stop the environment, swap the two dirs atomically, start again;
//! the old data stays until the start succeeded and is swapped back if it did not).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::components::{self, etcd_tool};
use crate::error::Error;
use crate::run::{probe, start, stop, Env, Progress, StartReport, Until};
use crate::spec::{paths, Plan};
use crate::systemd::Systemd;
use crate::unit::flag_value;

/// etcd's revision jumps by this much on a restore, so that every client watching from a revision
/// before the snapshot sees a compaction instead of old revisions again (what the etcd docs advise
/// for restoring a cluster that Kubernetes used: `--bump-revision` with `--mark-compacted`).
pub const BUMP_REVISION: u64 = 1_000_000_000;

/// One snapshot file and what etcdutl says of it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotInfo {
    pub name: String,
    pub path: PathBuf,
    pub size_bytes: u64,
    /// Last modification (RFC 3339, UTC).
    pub time: String,
    #[serde(flatten)]
    pub status: Option<Status>,
    /// Why etcdutl could not read it.
    pub error: Option<String>,
}

/// `etcdutl snapshot status -w json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub hash: u32,
    pub revision: i64,
    pub total_key: u64,
    pub total_size: u64,
    #[serde(default)]
    pub version: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SaveReport {
    pub snapshot: SnapshotInfo,
    /// Older snapshots of the prefix deleted (`prune_to`).
    pub pruned: Vec<PathBuf>,
    pub seconds: f64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreReport {
    pub snapshot: PathBuf,
    pub status: Status,
    pub data_dir: PathBuf,
    pub start: StartReport,
    pub seconds: f64,
}

/// What `save` is asked for.
pub struct SaveRequest<'a> {
    /// A file to write, or a directory to write into; `None`: the snapshot dir.
    pub path: Option<&'a Path>,
    pub prefix: &'a str,
    /// Keep only the newest N snapshots of `prefix` in the directory it wrote to.
    pub prune_to: Option<u32>,
}

fn usage(message: impl Into<String>, fix: impl Into<String>) -> Error {
    Error::Usage {
        message: message.into(),
        fix: fix.into(),
    }
}

/// A prefix that is one file-name word: letters, digits, '_', '.', '-' (not first).
fn check_prefix(prefix: &str) -> Result<(), Error> {
    let ok = prefix
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
        && prefix.len() <= 64
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        return Ok(());
    }
    Err(usage(
        format!("--prefix {prefix:?} is not a file-name word"),
        "pick a prefix of letters, digits, '_', '.' and '-', starting with a letter or digit (at most 64), e.g. --prefix before-upgrade",
    ))
}

/// `PREFIX-YYYYMMDDTHHMMSS.mmmZ.db`: sorts by time.
fn file_name(prefix: &str, now: time::OffsetDateTime) -> String {
    format!(
        "{prefix}-{:04}{:02}{:02}T{:02}{:02}{:02}.{:03}Z.db",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.millisecond()
    )
}

/// Whether `name` is a snapshot `save` named for `prefix` (what pruning may delete).
fn is_named_for(name: &str, prefix: &str) -> bool {
    let Some(stamp) = name
        .strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.strip_suffix(".db"))
    else {
        return false;
    };
    let b = stamp.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            8 => *c == b'T',
            15 => *c == b'.',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// etcdctl or etcdutl, or the fix.
fn tool(plan: &Plan, name: &str) -> Result<PathBuf, Error> {
    let path = etcd_tool(plan, name);
    if crate::spec::host::executable(&path).is_ok() {
        return Ok(path);
    }
    Err(Error::Preflight {
        message: format!("{name} {}: not an executable file", path.display()),
        fix: format!(
            "install {name} of etcd's version there (scripts/build-test-binaries.sh builds it next to etcd), or set etcd.snapshot.{name}: kubeunit gen --state-dir {} --set etcd.snapshot.{name}=PATH",
            plan.state_dir.display()
        ),
    })
}

/// Output of a finished command, or its stderr (last lines) as the error.
/// Why an etcd tool did not give what was asked of it.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("cannot run {what}: {source}")]
    Spawn {
        what: String,
        source: std::io::Error,
    },
    /// Its exit status and the last lines it wrote to stderr.
    #[error("{what} failed ({status}): {tail}")]
    Failed {
        what: String,
        status: std::process::ExitStatus,
        tail: String,
    },
    #[error("etcdutl snapshot status printed no status ({0})")]
    NoStatus(serde_json::Error),
}

fn output(cmd: &mut Command, what: &str) -> Result<Vec<u8>, ToolError> {
    let out = cmd.output().map_err(|source| ToolError::Spawn {
        what: what.to_string(),
        source,
    })?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = err.lines().rev().take(3).collect();
    Err(ToolError::Failed {
        what: what.to_string(),
        status: out.status,
        tail: tail.into_iter().rev().collect::<Vec<_>>().join(" / "),
    })
}

/// What etcdutl says of a snapshot file; `Err` when it is not one.
pub fn status(plan: &Plan, file: &Path) -> Result<Result<Status, ToolError>, Error> {
    let etcdutl = tool(plan, "etcdutl")?;
    let out = output(
        Command::new(&etcdutl)
            .args(["snapshot", "status", "-w", "json"])
            .arg(file),
        "etcdutl snapshot status",
    );
    Ok(out.and_then(|o| serde_json::from_slice::<Status>(&o).map_err(ToolError::NoStatus)))
}

fn info(plan: &Plan, path: &Path) -> Result<SnapshotInfo, Error> {
    let meta = std::fs::metadata(path).map_err(Error::io(path, "read"))?;
    let time = meta
        .modified()
        .ok()
        .map(time::OffsetDateTime::from)
        .and_then(|t| {
            t.replace_nanosecond(0)
                .ok()?
                .format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    let (status, error) = match status(plan, path)? {
        Ok(s) => (Some(s), None),
        Err(e) => (None, Some(e.to_string())),
    };
    Ok(SnapshotInfo {
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        path: path.to_path_buf(),
        size_bytes: meta.len(),
        time,
        status,
        error,
    })
}

/// The snapshot dir, made (0700) if it is not there.
fn snapshot_dir(plan: &Plan) -> Result<PathBuf, Error> {
    let dir = plan.snapshot_dir.clone();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(Error::io(&dir, "create"))?;
    Ok(dir)
}

/// Take a snapshot of the running etcd.
pub fn save(plan: &Plan, req: &SaveRequest) -> Result<SaveReport, Error> {
    let t0 = Instant::now();
    check_prefix(req.prefix)?;
    if req.prune_to == Some(0) {
        return Err(usage(
            "--prune-to 0 would delete the snapshot just taken",
            "keep at least 1 (--prune-to 1), or leave --prune-to out",
        ));
    }
    let (dir, name) = destination(plan, req)?;
    let etcdctl = tool(plan, "etcdctl")?;
    tool(plan, "etcdutl")?;
    let etcd = components::find(components::ETCD)
        .ok_or_else(|| Error::Internal("no etcd in the component table".into()))?;
    if let Err(e) = probe::probe(plan, etcd, Duration::from_secs(5)) {
        return Err(Error::Preflight {
            message: format!("etcd is not healthy, no snapshot taken: {e}"),
            fix: format!(
                "start the environment: kubeunit start --state-dir {}",
                plan.state_dir.display()
            ),
        });
    }
    let final_path = dir.join(&name);
    let tmp = dir.join(paths::unfinished_snapshot(&name));
    let cert = |n: &str| plan.state_dir.join(paths::cert(n));
    let saved = output(
        Command::new(&etcdctl)
            .arg(format!("--endpoints={}", components::etcd_url(plan)))
            .arg(format!("--cacert={}", cert("etcd/ca").display()))
            .arg(format!(
                "--cert={}",
                cert("apiserver-etcd-client").display()
            ))
            .arg(format!(
                "--key={}",
                plan.state_dir
                    .join(paths::key("apiserver-etcd-client"))
                    .display()
            ))
            .arg("--command-timeout=10m")
            .args(["snapshot", "save"])
            .arg(&tmp),
        "etcdctl snapshot save",
    );
    // Saved, and a snapshot etcdutl can read: else why not.
    let failed = match saved.map(|_| status(plan, &tmp)) {
        Err(e) | Ok(Ok(Err(e))) => Some(e.to_string()),
        Ok(Err(e)) => Some(e.to_string()),
        Ok(Ok(Ok(_))) => None,
    };
    if let Some(why) = failed {
        let _ = std::fs::remove_file(&tmp);
        let _ = std::fs::remove_file(tmp.with_extension("tmp.part"));
        return Err(Error::Preflight {
            message: format!("no snapshot taken: {why}"),
            fix: format!(
                "check etcd (kubeunit status --state-dir {0}; kubeunit logs etcd --state-dir {0}) and try again",
                plan.state_dir.display()
            ),
        });
    }
    // Everything in etcd but the Secrets is in plain text there: the snapshot is as secret.
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(Error::io(&tmp, "chmod"))?;
    std::fs::rename(&tmp, &final_path).map_err(Error::io(&final_path, "rename into place"))?;
    let snapshot = info(plan, &final_path)?;
    let pruned = match req.prune_to {
        Some(n) => prune(&dir, req.prefix, n as usize)?,
        None => vec![],
    };
    Ok(SaveReport {
        snapshot,
        pruned,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Where `save` writes: (directory, file name). A PATH that is a directory gets a name with the
/// time, as the snapshot dir does; any other must be a new file in an existing directory.
fn destination(plan: &Plan, req: &SaveRequest) -> Result<(PathBuf, String), Error> {
    let name = file_name(req.prefix, time::OffsetDateTime::now_utc());
    let Some(p) = req.path else {
        return Ok((snapshot_dir(plan)?, name));
    };
    if p.is_dir() {
        return Ok((p.to_path_buf(), name));
    }
    let parent = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match p.file_name().map(|n| n.to_string_lossy().into_owned()) {
        Some(f) if parent.is_dir() && !p.exists() => Ok((parent.to_path_buf(), f)),
        Some(_) if p.exists() => Err(usage(
            format!("{} exists", p.display()),
            "name a new file or a directory (the snapshot then gets a name with the time), or delete the old file",
        )),
        _ => Err(usage(
            format!("{}: no such directory", parent.display()),
            "create the directory first, or leave PATH out to save into the snapshot dir",
        )),
    }
}

/// Delete the oldest snapshots `save` named for `prefix` in `dir` beyond the newest `keep`.
fn prune(dir: &Path, prefix: &str, keep: usize) -> Result<Vec<PathBuf>, Error> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(Error::io(dir, "list"))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_named_for(n, prefix))
        .collect();
    names.sort();
    let excess = names.len().saturating_sub(keep);
    let mut pruned = Vec::new();
    for n in names.into_iter().take(excess) {
        let p = dir.join(n);
        std::fs::remove_file(&p).map_err(Error::io(&p, "delete"))?;
        pruned.push(p);
    }
    Ok(pruned)
}

/// Every snapshot (`*.db`) in the snapshot dir, oldest first.
pub fn list(plan: &Plan) -> Result<Vec<SnapshotInfo>, Error> {
    let dir = &plan.snapshot_dir;
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(Error::io(dir, "list")(e)),
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| {
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            n.ends_with(".db") && !n.starts_with('.')
        })
        .collect();
    let mtime = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    files.sort_by(|a, b| mtime(a).cmp(&mtime(b)).then_with(|| a.cmp(b)));
    files.iter().map(|p| info(plan, p)).collect()
}

/// Check a snapshot file before anything changes: a readable file that etcdutl takes for a
/// snapshot. Bad input (exit 2) otherwise.
pub fn check_file(plan: &Plan, file: &Path) -> Result<Status, Error> {
    let meta = std::fs::metadata(file).map_err(|e| {
        usage(
            format!("snapshot {}: {e}", file.display()),
            "name a snapshot file: kubeunit snapshot list shows them",
        )
    })?;
    if !meta.is_file() {
        return Err(usage(
            format!("snapshot {}: not a file", file.display()),
            "name a snapshot file: kubeunit snapshot list shows them",
        ));
    }
    std::fs::File::open(file).map_err(|e| {
        usage(
            format!("snapshot {}: {e}", file.display()),
            "make it readable, or name another snapshot",
        )
    })?;
    status(plan, file)?.map_err(|why| {
        usage(
            format!("{} is not an etcd snapshot: {why}", file.display()),
            "name a file `kubeunit snapshot save` (or etcdctl snapshot save) wrote: kubeunit snapshot list shows them",
        )
    })
}

/// `renameat2(a, b, RENAME_EXCHANGE)`: the two paths swap atomically.
fn exchange(a: &Path, b: &Path) -> Result<(), Error> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .map_err(|e| Error::io(b, "swap with the restored data")(e.into()))
}

/// Restore etcd's data from `file`: check it, restore it next to the data dir, stop the
/// environment, swap, start. A failed start swaps the old data back and starts that.
pub async fn restore(
    env: &Env,
    sd: &Systemd,
    file: &Path,
    timeout: Duration,
    progress: &mut dyn FnMut(Progress),
    say: &mut dyn FnMut(&str),
) -> Result<RestoreReport, Error> {
    let t0 = Instant::now();
    let plan = &env.plan;
    let status = check_file(plan, file)?;
    let (data, fresh) = restore_beside(env, file, &status, say)?;
    say("stopping the environment");
    if let Err(e) = stop(env, sd).await {
        let _ = std::fs::remove_dir_all(&fresh);
        return Err(e);
    }
    let had_data = data.exists();
    if had_data {
        exchange(&fresh, &data)?;
    } else {
        std::fs::rename(&fresh, &data).map_err(Error::io(&data, "rename into place"))?;
    }
    say("starting the environment on the restored data");
    match start(env, sd, timeout, Until::Healthy, progress).await {
        Ok(report) => {
            if had_data {
                // Now etcd's data from before the restore.
                std::fs::remove_dir_all(&fresh).map_err(Error::io(&fresh, "delete"))?;
            }
            Ok(RestoreReport {
                snapshot: file.to_path_buf(),
                status,
                data_dir: data,
                start: report,
                seconds: t0.elapsed().as_secs_f64(),
            })
        }
        Err(e) => {
            let again = roll_back(env, sd, timeout, &data, &fresh, had_data).await;
            Err(Error::Start(format!(
                "the environment did not start on the restored data: {e}\nrolled back: {again}"
            )))
        }
    }
}

/// Restore the snapshot with etcdutl into `DATA.restore`, next to etcd's data dir, with the
/// membership the etcd unit runs with (a restored member starts from its data, and ignores
/// --initial-cluster). Returns (etcd's data dir, the restored copy); nothing else changes.
fn restore_beside(
    env: &Env,
    file: &Path,
    status: &Status,
    say: &mut dyn FnMut(&str),
) -> Result<(PathBuf, PathBuf), Error> {
    let etcdutl = tool(&env.plan, "etcdutl")?;
    let (_, unit) = env.unit(components::ETCD)?;
    let argv = unit
        .exec_start()
        .map(|(_, a, _)| a.clone())
        .unwrap_or_default();
    let flag = |name: &str| {
        flag_value(&argv, name).ok_or_else(|| Error::Artifact {
            path: unit.path.clone(),
            message: format!("etcd's command line has no --{name}"),
            fix: "regenerate the unit with `kubeunit gen`".into(),
        })
    };
    let data = PathBuf::from(flag("data-dir")?);
    let fresh = PathBuf::from(format!("{}.restore", data.display()));
    if std::fs::symlink_metadata(&fresh).is_ok() {
        return Err(Error::Preflight {
            message: format!(
                "{} exists: an interrupted restore left it (the restored data, or etcd's data from before it)",
                fresh.display()
            ),
            fix: format!(
                "look at it, keep what you need, and delete it: rm -r {}",
                fresh.display()
            ),
        });
    }
    let mut restore = Command::new(&etcdutl);
    restore
        .args(["snapshot", "restore"])
        .arg(file)
        .arg(format!("--data-dir={}", fresh.display()))
        .arg(format!("--name={}", flag("name")?))
        .arg(format!("--initial-cluster={}", flag("initial-cluster")?))
        .arg(format!(
            "--initial-advertise-peer-urls={}",
            flag("initial-advertise-peer-urls")?
        ))
        .arg(format!("--bump-revision={BUMP_REVISION}"))
        .arg("--mark-compacted");
    if let Some(token) = flag_value(&argv, "initial-cluster-token") {
        restore.arg(format!("--initial-cluster-token={token}"));
    }
    say(&format!(
        "restoring {} (revision {}) into {}",
        file.display(),
        status.revision,
        fresh.display()
    ));
    if let Err(why) = output(&mut restore, "etcdutl snapshot restore") {
        let _ = std::fs::remove_dir_all(&fresh);
        return Err(Error::Preflight {
            message: format!("nothing changed: {why}"),
            fix: "check the snapshot (kubeunit snapshot list) and the free space next to etcd's data dir".into(),
        });
    }
    Ok((data, fresh))
}

/// After a failed start on the restored data (`start` stopped what it started): back to the data
/// from before and up again; the restored copy goes (the snapshot file is still there). What
/// happened, for the error.
async fn roll_back(
    env: &Env,
    sd: &Systemd,
    timeout: Duration,
    data: &Path,
    fresh: &Path,
    had_data: bool,
) -> String {
    let back = if had_data {
        exchange(fresh, data)
    } else {
        std::fs::rename(data, fresh).map_err(Error::io(fresh, "move the restored data away"))
    };
    match back {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(fresh);
            match start(env, sd, timeout, Until::Healthy, &mut |_| {}).await {
                Ok(_) => "etcd's data from before is back and the environment started on it".to_string(),
                Err(_) => format!(
                    "etcd's data from before is back in {}; the environment did not start on it either: see `kubeunit status --state-dir {}`",
                    data.display(),
                    env.plan.state_dir.display()
                ),
            }
        }
        Err(swap) => format!(
            "swapping back failed ({swap}): the restored data is in {}, the data from before in {}",
            data.display(),
            fresh.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_time_and_only_the_prefix_is_pruned() {
        // 2026-11-23T09:05:07.042Z
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(1_795_424_707_042_000_000).unwrap();
        let name = file_name("scheduled", t);
        assert_eq!(name, "scheduled-20261123T090507.042Z.db");
        assert!(is_named_for(&name, "scheduled"));
        assert!(!is_named_for(&name, "sched"));
        assert!(!is_named_for(
            "scheduled-x-20261123T090507.042Z.db",
            "scheduled"
        ));
        assert!(!is_named_for(
            "scheduled-20261123T090507.042Z.db.tmp",
            "scheduled"
        ));
        assert!(!is_named_for("mine.db", "scheduled"));
        assert!(paths::is_unfinished_snapshot(&paths::unfinished_snapshot(
            &name
        )));
        assert!(paths::is_unfinished_snapshot(
            ".scheduled-20261123T090507.042Z.db.tmp.part"
        ));
        assert!(!paths::is_unfinished_snapshot(&name));
        assert!(!paths::is_unfinished_snapshot(".profile.yaml.tmp"));
        let later = file_name("scheduled", t + time::Duration::milliseconds(1));
        assert!(later > name);

        let dir = tempfile::tempdir().unwrap();
        for n in [
            "scheduled-20261123T090507.042Z.db",
            "scheduled-20261123T090607.042Z.db",
            "scheduled-20261123T090707.042Z.db",
            "manual-20261123T090507.042Z.db",
            "mine.db",
        ] {
            std::fs::write(dir.path().join(n), "x").unwrap();
        }
        let pruned = prune(dir.path(), "scheduled", 2).unwrap();
        assert_eq!(
            pruned,
            vec![dir.path().join("scheduled-20261123T090507.042Z.db")]
        );
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "manual-20261123T090507.042Z.db",
                "mine.db",
                "scheduled-20261123T090607.042Z.db",
                "scheduled-20261123T090707.042Z.db"
            ]
        );
    }

    #[test]
    fn prefixes_are_file_name_words() {
        for ok in ["scheduled", "before-upgrade", "a.b_c"] {
            assert!(check_prefix(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", ".x", "a/b", "a b", "x\n"] {
            let e = check_prefix(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn flags_are_read_from_the_unit_command_line() {
        let argv: Vec<String> = ["/bin/etcd", "--name=n", "--data-dir", "/d", "--x=1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(flag_value(&argv, "name").as_deref(), Some("n"));
        assert_eq!(flag_value(&argv, "data-dir").as_deref(), Some("/d"));
        assert_eq!(flag_value(&argv, "initial-cluster"), None);
    }

    #[test]
    fn exchange_swaps_two_directories() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(a.join("from-a"), "").unwrap();
        exchange(&a, &b).unwrap();
        assert!(b.join("from-a").exists() && !a.join("from-a").exists());
    }
}
