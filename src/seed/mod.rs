//! Cloud-init NoCloud seeds for the hosts of an environment across hosts: from the host dirs
//! `gen --out DIR` wrote (checked together first, as `hosts check` does), one seed per host,
//! `OUT/HOST/{meta-data,user-data,network-config}`. At the host's first boot cloud-init writes the
//! host dir (every file with its mode), trusts the CAs given, and runs a script that gets the
//! binaries (a volume shipped beside the seed, or `kubeunit fetch`), then `kubeunit import` and
//! `kubeunit install`, and starts the environment's target as boot does: the host comes up then and
//! at every boot after, with no command typed.
//!
//! A seed holds the host's keys: it is written 0700/0600, and a new directory only.

pub mod cloud_config;

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use ipnet::Ipv4Net;
use serde_json::json;

use crate::components;
use crate::error::Error;
use crate::render::{quote, Renderer, Template};
use crate::spec::host::HostFacts;
use crate::spec::paths;
use crate::spec::profile::Profile;
use crate::spec::Plan;
use crate::state::{hosts, import};
use cloud_config::{
    CaCerts, Ethernet, Match, MetaData, Nameservers, NetworkConfig, Route, UserData, WriteFile,
};

/// The first-boot script (its steps can each run twice: a power cut can come mid-way).
pub const UP_SCRIPT: Template = Template {
    name: "configs/seed-up.sh.hbs",
    text: include_str!("../../configs/seed-up.sh.hbs"),
};

/// Where the seed puts the host dir and its script on the host: below /root, which is 0700,
/// because cloud-init makes the directories it writes into 0755.
pub const SEED_DIR: &str = "/root/kubeunit-seed";

/// The documents of a seed, as a NoCloud volume (label `cidata`) holds them.
pub const META_DATA: &str = "meta-data";
pub const USER_DATA: &str = "user-data";
pub const NETWORK_CONFIG: &str = "network-config";

/// What `kubeunit hosts seed` was asked for beyond the host dirs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The hosts' network: a static address for each host (its inventory address) in it. None:
    /// no network-config, and the host's network comes from DHCP or the cloud.
    pub network: Option<Ipv4Net>,
    pub gateway: Option<Ipv4Addr>,
    pub nameservers: Vec<IpAddr>,
    /// The interface the address goes on: a name, or a glob where the image's renderer takes one
    /// (systemd-networkd, netplan; not ifupdown).
    pub interface: String,
    /// The label of a volume shipped beside the seed whose tree is copied to `files_dir`.
    pub files_volume: Option<String>,
    pub files_dir: PathBuf,
    /// Run `kubeunit fetch` for the host's profile.
    pub fetch: bool,
    /// kubeunit on the host.
    pub kubeunit: PathBuf,
    /// CA certificates the host trusts (PEM), each with the file it came from.
    pub ca_certs: Vec<(PathBuf, String)>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            network: None,
            gateway: None,
            nameservers: Vec::new(),
            interface: "e*".into(),
            files_volume: None,
            files_dir: PathBuf::from("/opt/kubeunit"),
            fetch: false,
            kubeunit: PathBuf::from("/usr/local/bin/kubeunit"),
            ca_certs: Vec::new(),
        }
    }
}

/// One host's seed: its documents, in the order they are listed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Seed {
    pub host: String,
    pub address: Ipv4Addr,
    pub instance_id: String,
    #[serde(skip)]
    pub documents: Vec<(&'static str, String)>,
}

fn usage(message: String, fix: &str) -> Error {
    Error::Usage {
        message,
        fix: fix.into(),
    }
}

/// A path the script names: absolute, plain (no `..`, no control character).
fn plain_path(flag: &str, p: &Path) -> Result<String, Error> {
    let s = p.to_string_lossy();
    let plain = p.is_absolute()
        && s.len() <= 4096
        && !s.chars().any(char::is_control)
        && !p
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
    if !plain {
        return Err(usage(
            format!("{flag} {s:?}: not a plain absolute path"),
            "give an absolute path on the host, without `..` or control characters",
        ));
    }
    Ok(s.into_owned())
}

impl Options {
    /// Every option that stands on its own; the hosts' addresses are checked against the network in
    /// `seeds`.
    fn check(&self) -> Result<(), Error> {
        let net = self.network;
        if net.is_none() && (self.gateway.is_some() || !self.nameservers.is_empty()) {
            return Err(usage(
                "--gateway and --nameserver go with --network".into(),
                "pass --network CIDR, the hosts' network (each host gets its inventory address in it)",
            ));
        }
        if let (Some(net), Some(gw)) = (net, self.gateway) {
            if !net.contains(&gw) || gw == net.network() || gw == net.broadcast() {
                return Err(usage(
                    format!("--gateway {gw}: no host address of --network {net}"),
                    "give the router's address on the hosts' network",
                ));
            }
        }
        let glob_ok = !self.interface.is_empty()
            && self.interface.len() <= 15
            && self
                .interface
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '*' | '?' | '-' | '_' | '.'));
        if !glob_ok {
            return Err(usage(
                format!(
                    "--interface {:?}: not an interface name or glob",
                    self.interface
                ),
                "give e.g. --interface 'e*' or --interface ens3",
            ));
        }
        if let Some(label) = &self.files_volume {
            // ext4's and vfat's limits (16 and 11), and the characters blkid gives /dev/disk/by-label.
            let ok = !label.is_empty()
                && label.len() <= 16
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
            if !ok {
                return Err(usage(
                    format!("--files-volume {label:?}: not a volume label"),
                    "give the volume's label: up to 16 letters, digits, '-' or '_'",
                ));
            }
        }
        if self.files_volume.is_none() && !self.fetch {
            return Err(usage(
                "no way for the host to get its binaries".into(),
                "pass --files-volume LABEL (a volume shipped beside the seed) or --fetch (kubeunit fetch on the host)",
            ));
        }
        plain_path("--files-dir", &self.files_dir)?;
        plain_path("--kubeunit", &self.kubeunit)?;
        Ok(())
    }
}

/// A CA certificate file for `--ca-cert`: PEM certificates only, of a sane size.
pub fn read_ca_cert(path: &Path) -> Result<(PathBuf, String), Error> {
    const MAX: u64 = 1 << 20;
    let size = std::fs::metadata(path)
        .map_err(Error::io(path, "read"))?
        .len();
    let text = (size <= MAX)
        .then(|| std::fs::read_to_string(path).ok())
        .flatten()
        .filter(|t| t.trim_start().starts_with("-----BEGIN CERTIFICATE-----"))
        .ok_or_else(|| {
            Error::state(
                path,
                "is no PEM certificate (of at most 1 MiB)",
                "pass the CA's certificate as PEM (-----BEGIN CERTIFICATE-----)",
            )
        })?;
    Ok((path.to_path_buf(), text))
}

/// The seeds of every host in `dir` (what `gen --out DIR` wrote), checked together first.
pub fn seeds(dir: &Path, opts: &Options) -> Result<Vec<Seed>, Error> {
    opts.check()?;
    let renderer = Renderer::new();
    hosts::check(dir)?
        .iter()
        .map(|h| host_seed(h, opts, &renderer))
        .collect()
}

/// The hosts-sync timer's unit names kubeunit's path on the host: the seed must put it there, or
/// the timer fails every 10 s and hosts that join later get no routes.
fn hosts_sync_runs_the_seeds_kubeunit(
    h: &hosts::CheckedHost,
    plan: &Plan,
    opts: &Options,
) -> Result<(), Error> {
    if let Some(sync) = components::find("hosts-sync").filter(|c| c.is_enabled(&plan.profile)) {
        let runs = sync.binary_path(plan);
        if runs != opts.kubeunit {
            return Err(usage(
                format!(
                    "--kubeunit {}: host {}'s hosts-sync timer runs {} (components.hosts-sync.binary)",
                    opts.kubeunit.display(),
                    h.host,
                    runs.display()
                ),
                &format!(
                    "pass --kubeunit {}, or render the host dirs with --set components.hosts-sync.binary={}",
                    runs.display(),
                    opts.kubeunit.display()
                ),
            ));
        }
    }
    Ok(())
}

/// One host's seed, from its checked dir.
fn host_seed(h: &hosts::CheckedHost, opts: &Options, renderer: &Renderer) -> Result<Seed, Error> {
    let (tree, manifest) = import::read(&h.dir)?;
    let profile = hosts::recorded_profile(&h.dir, &tree)?;
    // The name as the profile's validation let it through (a name), not as the manifest says it:
    // the script and the user-data's comment take it verbatim.
    let name = profile.name.clone();
    let address = host_address(h, &profile, opts)?;
    // The units' names follow the state dir the host dir was rendered for (its `instance`).
    let plan = Plan::new(profile, &manifest.state_dir, &HostFacts::none())?;
    let target = plan.target_name();
    hosts_sync_runs_the_seeds_kubeunit(h, &plan, opts)?;
    let manifest_bytes = std::fs::read(h.dir.join(paths::MANIFEST))
        .map_err(Error::io(h.dir.join(paths::MANIFEST), "read"))?;
    let host_dir = format!("{SEED_DIR}/host");
    // As gen writes it: public (it holds digests and modes, no secret).
    let mut write_files = vec![WriteFile::new(
        format!("{host_dir}/{}", paths::MANIFEST),
        &manifest_bytes,
        0o644,
    )];
    for (rel, artifact) in &tree {
        write_files.push(WriteFile::new(
            format!("{host_dir}/{rel}"),
            &artifact.bytes,
            artifact.mode,
        ));
    }
    let sh = |s: &str| quote::shell_word(s);
    let script = renderer.render(
        &UP_SCRIPT,
        &json!({
            "host": h.host,
            "name": name,
            "seed_dir": sh(SEED_DIR),
            "kubeunit": sh(&opts.kubeunit.to_string_lossy()),
            "state_dir": sh(&manifest.state_dir.to_string_lossy()),
            "files_volume": opts.files_volume.as_deref().map(|l| sh(&format!("LABEL={l}"))),
            "files_dir": sh(&opts.files_dir.to_string_lossy()),
            "fetch": opts.fetch,
            "target": sh(&target),
            "useradds": crate::components::own_users(&plan)
                .iter()
                .map(|u| (sh(u), crate::components::useradd_command(&sh(u))))
                .collect::<Vec<_>>(),
        }),
    )?;
    let script_path = format!("{SEED_DIR}/up.sh");
    write_files.push(WriteFile::new(
        script_path.clone(),
        script.as_bytes(),
        0o700,
    ));
    let user_data = UserData {
        hostname: h.host.clone(),
        ca_certs: (!opts.ca_certs.is_empty()).then(|| CaCerts {
            trusted: opts.ca_certs.iter().map(|(_, pem)| pem.clone()).collect(),
        }),
        write_files,
        runcmd: vec![vec!["/bin/sh".into(), script_path]],
    };
    let user_data = cloud_config::yaml(
        &format!(
            "#cloud-config\n# kubeunit hosts seed: host {} of environment {}. It holds the host's keys: keep it as private.\n",
            h.host, name
        ),
        &user_data,
    )?;
    // A new instance whenever the host dir or the options change: cloud-init runs the seed again.
    let digest = crate::state::manifest::sha256_hex(user_data.as_bytes());
    let instance_id = format!("kubeunit-{name}-{}-{}", h.host, &digest[..12]);
    let meta_data = cloud_config::yaml(
        "",
        &MetaData {
            instance_id: instance_id.clone(),
            local_hostname: h.host.clone(),
        },
    )?;
    let mut documents = vec![(META_DATA, meta_data), (USER_DATA, user_data)];
    if let Some(net) = opts.network {
        documents.push((NETWORK_CONFIG, network_config(opts, net, address)?));
    }
    Ok(Seed {
        host: h.host.clone(),
        address,
        instance_id,
        documents,
    })
}

/// The host's inventory address, which must be a host address of `--network` and not its gateway.
fn host_address(
    h: &hosts::CheckedHost,
    profile: &Profile,
    opts: &Options,
) -> Result<Ipv4Addr, Error> {
    let profile_path = h.dir.join(paths::PROFILE);
    let address: Ipv4Addr = profile
        .hosts
        .iter()
        .find(|e| e.name == h.host)
        // A DNS name's as gen resolved and recorded it.
        .and_then(|e| crate::spec::resolve::address(e, &Default::default()))
        .ok_or_else(|| Error::Internal(format!("host {} checked without an address", h.host)))?;
    let Some(net) = opts.network else {
        return Ok(address);
    };
    if !net.contains(&address) || address == net.network() || address == net.broadcast() {
        return Err(usage(
            format!(
                "host {:?} has address {address} (hosts[] of {}), outside --network {net}",
                h.host,
                profile_path.display()
            ),
            "pass the hosts' network to --network, or render the host dirs with their addresses in it",
        ));
    }
    if opts.gateway == Some(address) {
        return Err(usage(
            format!("--gateway {address} is host {:?}'s own address", h.host),
            "give the router's address on the hosts' network",
        ));
    }
    Ok(address)
}

/// A static address on the hosts' network, the gateway as the default route if there is one.
fn network_config(opts: &Options, net: Ipv4Net, address: Ipv4Addr) -> Result<String, Error> {
    let ethernet = Ethernet {
        matching: Match {
            name: opts.interface.clone(),
        },
        dhcp4: false,
        addresses: vec![format!("{address}/{}", net.prefix_len())],
        routes: opts
            .gateway
            .map(|gw| Route {
                to: "0.0.0.0/0".into(),
                via: gw.to_string(),
            })
            .into_iter()
            .collect(),
        nameservers: (!opts.nameservers.is_empty()).then(|| Nameservers {
            addresses: opts.nameservers.iter().map(|a| a.to_string()).collect(),
        }),
    };
    cloud_config::yaml(
        "",
        &NetworkConfig {
            version: 2,
            // Keyed by the name too: cloud-init's systemd-networkd renderer (22.4, Debian 12) writes
            // the key as the link's Name= and ignores `match`.
            ethernets: [(opts.interface.clone(), ethernet)].into(),
        },
    )
}

/// Write the seeds to `out` (`out/HOST/...`), a new or empty directory: all of them, or nothing.
/// Private throughout (0700 directories, 0600 files): a seed holds its host's keys.
pub fn write(out: &Path, seeds: &[Seed]) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let occupied = match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(Error::io(out, "inspect")(e)),
        Ok(m) if m.is_dir() => std::fs::read_dir(out)
            .map_err(Error::io(out, "list"))?
            .next()
            .is_some(),
        Ok(_) => true,
    };
    if occupied {
        return Err(Error::state(
            out,
            "exists and is not an empty directory; seeds are written anew",
            "pass a new or empty directory to --out",
        ));
    }
    let parent = out.parent().unwrap_or(Path::new("/"));
    // Beside `out`, so that one rename puts every seed in place at once.
    let tmp = tempfile::Builder::new()
        .prefix(".kubeunit-seeds-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
        .map_err(Error::io(parent, "create a directory in"))?;
    for seed in seeds {
        let dir = tmp.path().join(&seed.host);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(Error::io(&dir, "create"))?;
        for (name, text) in &seed.documents {
            let path = dir.join(name);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(Error::io(&path, "create"))?;
            f.write_all(text.as_bytes())
                .and_then(|_| f.sync_all())
                .map_err(Error::io(&path, "write"))?;
        }
    }
    let tmp = tmp.keep();
    if let Err(e) = std::fs::rename(&tmp, out) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(Error::io(out, "create")(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
