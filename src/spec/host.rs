//! Facts about the machine and the moment that `gen` depends on, gathered once at the edge (the CLI)
//! and passed in, so that the rest of the pipeline is a pure function of its inputs. A Nix build or a
//! test passes its own.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use time::OffsetDateTime;

use super::profile::parse_epoch;
use crate::error::Error;

#[derive(Debug, Clone, PartialEq)]
pub struct HostFacts {
    /// This host's first global IPv4 address (by interface name): the advertise address of a profile
    /// that leaves it empty and binds loopback.
    pub address_v4: Option<IpAddr>,
    /// The same for IPv6 service networks.
    pub address_v6: Option<IpAddr>,
    /// Validity start when the profile has no `pki.epoch`: SOURCE_DATE_EPOCH, else the start of today
    /// (UTC), so that runs on the same day agree to the byte.
    pub epoch: OffsetDateTime,
    /// Where the default state dirs are (`<state home>/NAME`): an environment there keeps the short
    /// unit names (`instance: auto`). `None`: nowhere known.
    pub state_home: Option<PathBuf>,
    /// What the DNS names among `hosts[].address` resolved to (`spec::resolve::lookup`): `gen`
    /// looks them up. Empty at run time and under `gen --hermetic`, where a name's address is
    /// the one the profile records (`hosts[].resolvedAddress`).
    pub host_addresses: BTreeMap<String, Ipv4Addr>,
}

/// The system manager's state home: default state dirs of root.
pub const SYSTEM_STATE_HOME: &str = "/var/lib/kubeunit";

impl HostFacts {
    /// Read this host's interfaces, SOURCE_DATE_EPOCH and the clock (no name is looked up:
    /// `spec::resolve::lookup` does, for `gen`).
    pub fn gather() -> HostFacts {
        let epoch = std::env::var("SOURCE_DATE_EPOCH")
            .ok()
            .and_then(|s| parse_epoch(&s))
            .unwrap_or_else(|| OffsetDateTime::now_utc().replace_time(time::Time::MIDNIGHT));
        HostFacts {
            address_v4: host_address(false),
            address_v6: host_address(true),
            epoch,
            state_home: Some(state_home()),
            host_addresses: BTreeMap::new(),
        }
    }

    /// No facts (`gen --hermetic`): no address, and the Unix epoch, which a caller only passes on
    /// with the profile's own `pki.epoch` set. The system's state home is a convention, not a
    /// fact of the machine; a user's is not known.
    pub fn none() -> HostFacts {
        HostFacts {
            address_v4: None,
            address_v6: None,
            epoch: OffsetDateTime::UNIX_EPOCH,
            state_home: Some(PathBuf::from(SYSTEM_STATE_HOME)),
            host_addresses: BTreeMap::new(),
        }
    }

    /// Fixed facts for tests: one documentation address (192.0.2.5), the Unix epoch, or none.
    #[cfg(test)]
    pub fn fixed(address_v4: Option<&str>) -> HostFacts {
        HostFacts {
            address_v4: address_v4.and_then(|a| a.parse().ok()),
            address_v6: None,
            epoch: OffsetDateTime::UNIX_EPOCH,
            state_home: Some(PathBuf::from(SYSTEM_STATE_HOME)),
            host_addresses: BTreeMap::new(),
        }
    }

    pub fn address(&self, v6: bool) -> Option<IpAddr> {
        if v6 {
            self.address_v6
        } else {
            self.address_v4
        }
    }
}

/// Where default state dirs live: `/var/lib/kubeunit` for root, else `$XDG_STATE_HOME/kubeunit`
/// (default `~/.local/state/kubeunit`). `$KUBEUNIT_STATE_DIR` is a state dir, not a home: see
/// `cli::common::default_state_dir`.
pub fn state_home() -> PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from(SYSTEM_STATE_HOME);
    }
    std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("/tmp"))
        .join("kubeunit")
}

/// Whether nothing listens on TCP `port` on any address of this host, and nothing binds it: a
/// bind to the wildcard address fails for a port any listener holds. `ports: auto` picks ports
/// this says are free; the port is not held after, so something else may take it before `start`
/// (whose preflight names it then).
pub fn port_free(port: u16) -> bool {
    use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};
    if TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_err() {
        return false;
    }
    match TcpListener::bind((Ipv6Addr::UNSPECIFIED, port)) {
        Ok(_) => true,
        // No IPv6 on this host: nothing can listen there either.
        Err(e) => e.kind() != std::io::ErrorKind::AddrInUse,
    }
}

/// This host's first global unicast address of the family, by interface name (stable order).
fn host_address(v6: bool) -> Option<IpAddr> {
    let mut ifs = if_addrs::get_if_addrs().ok()?;
    ifs.sort_by(|a, b| a.name.cmp(&b.name));
    ifs.into_iter().map(|i| i.ip()).find(|ip| {
        ip.is_ipv6() == v6
            && !ip.is_loopback()
            && !ip.is_unspecified()
            && !ip.is_multicast()
            && match ip {
                // 198.18.0.0/15 holds the links of kubeunit's own nodes (`node.link`).
                IpAddr::V4(a) => {
                    let benchmarking = a.octets()[0] == 198 && a.octets()[1] & 0xfe == 18;
                    !a.is_link_local() && !benchmarking
                }
                IpAddr::V6(a) => (a.segments()[0] & 0xffc0) != 0xfe80,
            }
    })
}

/// Why a file cannot be run (what execve would refuse before reading it).
#[derive(Debug, thiserror::Error)]
pub enum NotExecutable {
    #[error("{0}")]
    Unreadable(std::io::Error),
    #[error("not an executable file")]
    NotAnExecutableFile,
}

/// Ok when `path` is a regular file with an execute bit; the one check of binaries, dlv, kubeunit
/// and the tools a node needs.
pub fn executable(path: &Path) -> Result<(), NotExecutable> {
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::metadata(path).map_err(NotExecutable::Unreadable)?;
    if m.is_file() && m.permissions().mode() & 0o111 != 0 {
        Ok(())
    } else {
        Err(NotExecutable::NotAnExecutableFile)
    }
}

/// A state dir of this machine, as `absolute` makes it, that is not a symbolic link: the units and
/// configs name the state dir, and a link could be turned elsewhere under running units (and
/// `destroy` would empty its target). A link among its parents is a layout of the system
/// (`/home` -> `/var/home`), and is used as it is.
pub fn local_state_dir(p: &Path) -> Result<PathBuf, Error> {
    let dir = absolute(p)?;
    if let Ok(meta) = std::fs::symlink_metadata(&dir) {
        if meta.file_type().is_symlink() {
            // Where it ends up; a dangling link's own target.
            let to = std::fs::canonicalize(&dir)
                .or_else(|_| std::fs::read_link(&dir))
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            return Err(Error::state(
                &dir,
                format!("is a symbolic link (to {to}), not a directory"),
                format!(
                    "pass the directory itself: --state-dir {to} (the units name the state dir, and a link can be turned elsewhere under them)"
                ),
            ));
        }
    }
    Ok(dir)
}

/// A state-dir path made absolute against the working directory. Its path ends up in flags, unit
/// files (where `EnvironmentFile=` cannot quote) and configs: it must be UTF-8 without control
/// characters.
pub fn absolute(p: &Path) -> Result<PathBuf, Error> {
    let text = p.to_str().ok_or_else(|| {
        Error::state(
            p,
            "not valid UTF-8",
            "pick a state dir whose path is UTF-8 text",
        )
    })?;
    if text.chars().any(char::is_control) {
        return Err(Error::state(
            format!("{text:?}"),
            "holds control characters (a newline would end a line of the unit files)",
            "pick a state dir path without control characters",
        ));
    }
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    std::env::current_dir().map(|d| d.join(p)).map_err(|e| {
        Error::state(
            p,
            format!("cannot resolve a relative path: {e}"),
            "pass an absolute --state-dir",
        )
    })
}

/// Default state dir: `$KUBEUNIT_STATE_DIR`, else `/var/lib/kubeunit/<name>` for root and
/// `$XDG_STATE_HOME/kubeunit/<name>` (default `~/.local/state`) otherwise.
pub fn default_state_dir(name: &str) -> PathBuf {
    if let Some(d) = std::env::var_os("KUBEUNIT_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    state_home().join(name)
}
