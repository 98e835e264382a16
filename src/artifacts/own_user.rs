//! A component that runs as a user of its own instead of root (`Component::own_user`: etcd with
//! `etcd.user`, as the CIS benchmark asks, 1.1.12): what its unit adds so that the user reaches
//! what it needs of the state dir, whose keys stay root's 0600 files in root's 0700 dirs.
//!
//! - Its keys and certificates come through systemd's credentials (LoadCredential=): systemd reads
//!   them as root when the unit starts and gives the service private copies; its flags name the
//!   copies.
//! - Its data dirs are its user's (ExecStartPre=+chown, run as root), and visible to it through a
//!   private mount namespace: the top dir above them is an empty tmpfs (TemporaryFileSystem=) with
//!   only the data dirs (BindPaths=) and its binary (BindReadOnlyPaths=) bound in, each at its own
//!   path. So no 0700 dir above them needs opening to the user, and nothing outside the state dir
//!   is written: the dirs of the mount points exist only in the tmpfs.

use std::path::{Component as PathPart, Path};

use crate::components::Component;
use crate::error::{Error, FieldError, FieldErrors};
use crate::spec::Plan;

/// The top dirs a component's data dir may not be under when it runs as its own user: its
/// namespace replaces the top dir with an empty tmpfs, and these hold what systemd and the service
/// need (the credentials and the notify socket in /run, the loader and libraries in /usr).
const KEPT_TOP_DIRS: &[&str] = &[
    "/run", "/usr", "/etc", "/proc", "/sys", "/dev", "/bin", "/lib",
];

/// What the unit of a component that runs as `user` adds.
#[derive(Debug, Default, PartialEq)]
pub struct OwnUser {
    pub user: String,
    /// LoadCredential=: (id, path in the state dir).
    pub credentials: Vec<(String, String)>,
    /// TemporaryFileSystem=: the top dirs above its data dirs and binary.
    pub hidden: Vec<String>,
    /// BindPaths=: its data dirs (`-`: the ExecStartPre= commands that make them run without).
    pub data_dirs: Vec<String>,
    /// BindReadOnlyPaths=: its binary, when under a hidden dir.
    pub read_only: Vec<String>,
    /// ExecStartPre=+ commands (as root): the data dirs made and given to the user.
    pub pre_start: Vec<Vec<String>>,
}

/// What `c`'s unit `unit` needs to run as its own user, with `argv`'s flags that name files of the
/// state dir's pki/ rewritten to name their credentials; None when it runs as root.
pub fn own_user(
    plan: &Plan,
    c: &Component,
    unit: &str,
    argv: &mut [String],
) -> Result<Option<OwnUser>, Error> {
    let user = (c.own_user)(&plan.profile);
    if user.is_empty() {
        return Ok(None);
    }
    // Where paths::cert and paths::key put every key and certificate.
    let pki = plan.state_dir.join("pki");
    let mut out = OwnUser {
        user: user.to_string(),
        ..OwnUser::default()
    };
    for word in argv.iter_mut().skip(1) {
        let Some((flag, value)) = word.split_once('=') else {
            continue;
        };
        let Ok(rel) = Path::new(value).strip_prefix(&pki) else {
            continue;
        };
        let id = rel.to_string_lossy().replace('/', "-");
        let credential = (id.clone(), value.to_string());
        if !out.credentials.contains(&credential) {
            out.credentials.push(credential);
        }
        // systemd.exec(5): a system service's credentials are in /run/credentials/<unit name>
        // ($CREDENTIALS_DIRECTORY, which a unit file's ExecStart= would have to write as $$).
        *word = format!("{flag}=/run/credentials/{unit}/{id}");
    }
    for dir in c.data_dirs {
        let dir = plan.data(dir);
        let top = top_dir(&dir)
            .filter(|t| !KEPT_TOP_DIRS.contains(&t.as_str()))
            // ':' separates BindPaths='s source from its destination.
            .filter(|_| !dir.contains(':'))
            .ok_or_else(|| refused(plan, "dataDir", &dir))?;
        push_new(&mut out.hidden, top);
        // systemd (252) sets the namespace up for `+` commands too: they reach the host's dir
        // through PID 1's root, and the bind is optional (`-`) for them, the dir not made yet.
        let host_dir = format!("/proc/1/root{dir}");
        out.pre_start
            .push(vec![MKDIR.into(), "-p".into(), host_dir.clone()]);
        out.pre_start.push(vec![
            CHOWN.into(),
            "-R".into(),
            format!("{user}:"),
            host_dir,
        ]);
        out.data_dirs.push(dir);
    }
    // Its binary, unless under a system dir anyone can read (/usr/bin): bound in the same way, as
    // the dirs above it may be root's 0700 ones (/root/.cache).
    let binary = argv.first().cloned().unwrap_or_default();
    if let Some(top) = top_dir(&binary).filter(|t| !KEPT_TOP_DIRS.contains(&t.as_str())) {
        if binary.contains(':') {
            return Err(refused(
                plan,
                &format!("components.{}.binary", c.name),
                &binary,
            ));
        }
        push_new(&mut out.hidden, top);
        out.read_only.push(binary);
    }
    Ok(Some(out))
}

/// coreutils' mkdir and chown, where every distribution with a /bin has them (merged /usr too).
const MKDIR: &str = "/bin/mkdir";
const CHOWN: &str = "/bin/chown";

fn push_new(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// `/top` of an absolute path below it.
fn top_dir(path: &str) -> Option<String> {
    let mut parts = Path::new(path).components();
    match (parts.next(), parts.next(), parts.next()) {
        (Some(PathPart::RootDir), Some(PathPart::Normal(top)), Some(_)) => {
            Some(format!("/{}", top.to_string_lossy()))
        }
        _ => None,
    }
}

/// A path `field` names that an own-user unit cannot bind in.
fn refused(plan: &Plan, field: &str, path: &str) -> Error {
    Error::Profile(FieldErrors {
        source_name: format!("profile '{}'", plan.name()),
        errors: vec![FieldError::new(
            field,
            path,
            format!(
                "a component that runs as its own user sees an empty top dir above its data dirs and binary, each bound in by a path without ':', and {} must stay whole",
                top_dir(path).unwrap_or_else(|| path.to_string())
            ),
            "put it under another top dir without ':' in its path, e.g. /var/lib or /home",
        )],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_dirs() {
        assert_eq!(top_dir("/var/lib/x/data/etcd").as_deref(), Some("/var"));
        assert_eq!(top_dir("/tmp/a").as_deref(), Some("/tmp"));
        assert_eq!(top_dir("/etcd"), None);
        assert_eq!(top_dir("relative/dir"), None);
    }
}
