//! The plan: a validated profile resolved into concrete addresses, paths, names and dates.
//! Everything downstream (pki, render, state, systemd) reads the plan, never the raw profile defaults.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use time::OffsetDateTime;

use crate::components::{Component, COMPONENTS};
use crate::error::Error;
use crate::profile::{parse_epoch, Profile};

#[derive(Debug, Clone)]
pub struct Plan {
    pub profile: Profile,
    pub state_dir: PathBuf,
    pub data_dir: PathBuf,
    pub node_name: String,
    pub service_cidr: IpNet,
    /// The `kubernetes` Service ClusterIP: the first address of the service CIDR.
    pub first_service_ip: IpAddr,
    pub dns_ip: IpAddr,
    pub pod_cidr: IpNet,
    pub bind: IpAddr,
    pub advertise: IpAddr,
    /// Address clients on this host use to reach our listeners (the bind address, or loopback for a
    /// wildcard bind).
    pub local: IpAddr,
    pub epoch: OffsetDateTime,
    pub ca_validity: Duration,
    pub cert_validity: Duration,
}

impl Plan {
    pub fn new(profile: Profile, state_dir: &Path) -> Result<Plan, Error> {
        let state_dir = absolute(state_dir)?;
        let net = &profile.network;
        // The profile was validated; parse failures below cannot happen, but are not unwrapped either.
        let bad = |f: &str| Error::Other(format!("internal: unvalidated profile field {f}"));
        let service_cidr: IpNet = net.service_cidr.parse().map_err(|_| bad("serviceCIDR"))?;
        let pod_cidr: IpNet = net.pod_cidr.parse().map_err(|_| bad("podCIDR"))?;
        let first_service_ip = nth_address(&service_cidr, 1);
        let dns_ip = if net.dns_ip.is_empty() {
            nth_address(&service_cidr, 10)
        } else {
            net.dns_ip.parse().map_err(|_| bad("dnsIP"))?
        };
        let bind: IpAddr = net.bind_address.parse().map_err(|_| bad("bindAddress"))?;
        let local = if bind.is_unspecified() {
            loopback_of(&bind)
        } else {
            bind
        };
        let advertise = if !net.advertise_address.is_empty() {
            net.advertise_address
                .parse()
                .map_err(|_| bad("advertiseAddress"))?
        } else if !bind.is_unspecified() && !bind.is_loopback() {
            bind
        } else {
            host_address(service_cidr.network().is_ipv6()).ok_or_else(|| Error::Profile {
                source_name: "profile".into(),
                field: "network.advertiseAddress".into(),
                message: "empty, and this host has no global address to default to (value: \"\")".into(),
                fix: "set network.advertiseAddress to this host's address (kube-apiserver rejects loopback \
                      addresses in the `kubernetes` Service endpoints)"
                    .into(),
            })?
        };
        let data_dir = match &profile.data_dir {
            Some(d) if !d.as_os_str().is_empty() => d.clone(),
            _ => state_dir.join("data"),
        };
        let node_name = if profile.node.name.is_empty() {
            profile.name.clone()
        } else {
            profile.node.name.clone()
        };
        let epoch = resolve_epoch(profile.pki.epoch.as_deref());
        let dur = |s: &str| humantime::parse_duration(s).map_err(|_| bad("pki validity"));
        let ca_validity = dur(&profile.pki.ca_validity)?;
        let cert_validity = dur(&profile.pki.cert_validity)?;
        // The state dir's profile.yaml records what was resolved here, so `start` on another machine
        // (or a later `gen --check`) sees the same addresses and names, not this host's.
        let mut profile = profile;
        profile.network.advertise_address = advertise.to_string();
        profile.network.dns_ip = dns_ip.to_string();
        profile.node.name = node_name.clone();
        profile.data_dir = Some(data_dir.clone());
        Ok(Plan {
            state_dir,
            data_dir,
            node_name,
            service_cidr,
            first_service_ip,
            dns_ip,
            pod_cidr,
            bind,
            advertise,
            local,
            epoch,
            ca_validity,
            cert_validity,
            profile,
        })
    }

    pub fn name(&self) -> &str {
        &self.profile.name
    }

    /// `kubeunit-<name>.slice`: every unit of the environment lives in it.
    pub fn slice_name(&self) -> String {
        format!("kubeunit-{}.slice", self.profile.name)
    }

    pub fn unit_name(&self, component: &str) -> String {
        format!("kubeunit-{}-{}.service", self.profile.name, component)
    }

    /// Enabled components in table order (which is start order).
    pub fn components(&self) -> impl Iterator<Item = &'static Component> + '_ {
        COMPONENTS
            .iter()
            .filter(move |c| self.profile.component(c.name).enabled)
    }

    pub fn enabled(&self, component: &str) -> bool {
        self.profile.component(component).enabled
    }

    /// Absolute path of a file in the state dir, as a string for flags and configs.
    pub fn path(&self, rel: &str) -> String {
        self.state_dir.join(rel).to_string_lossy().into_owned()
    }

    pub fn data(&self, rel: &str) -> String {
        self.data_dir.join(rel).to_string_lossy().into_owned()
    }

    /// `https://<local address>:<port>` with IPv6 brackets.
    pub fn local_url(&self, port: u16) -> String {
        format!("https://{}", host_port(self.local, port))
    }

    pub fn apiserver_url(&self) -> String {
        self.local_url(self.profile.ports.apiserver)
    }

    pub fn etcd_url(&self) -> String {
        self.local_url(self.profile.ports.etcd_client)
    }

    /// Absolute path of a component's binary.
    pub fn binary(&self, component: &Component) -> PathBuf {
        let settings = self.profile.component(component.name);
        let name = if settings.binary.is_empty() {
            component.binary
        } else {
            settings.binary.as_str()
        };
        let p = Path::new(name);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.profile.bin_dir.join(p)
        }
    }
}

pub fn host_port(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    }
}

fn loopback_of(ip: &IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    }
}

/// The n-th address of a network (n = 1 is the first host address).
pub fn nth_address(net: &IpNet, n: u128) -> IpAddr {
    match net.network() {
        IpAddr::V4(a) => IpAddr::V4((u32::from(a).wrapping_add(n as u32)).into()),
        IpAddr::V6(a) => IpAddr::V6((u128::from(a).wrapping_add(n)).into()),
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
                IpAddr::V4(a) => !a.is_link_local(),
                IpAddr::V6(a) => (a.segments()[0] & 0xffc0) != 0xfe80,
            }
    })
}

/// Validity start: the profile's epoch, else SOURCE_DATE_EPOCH, else the start of today (UTC), so
/// that runs on the same day agree to the byte.
fn resolve_epoch(profile_epoch: Option<&str>) -> OffsetDateTime {
    if let Some(t) = profile_epoch
        .filter(|s| !s.is_empty())
        .and_then(parse_epoch)
    {
        return t;
    }
    if let Some(t) = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| parse_epoch(&s))
    {
        return t;
    }
    let now = OffsetDateTime::now_utc();
    now.replace_time(time::Time::MIDNIGHT)
}

fn absolute(p: &Path) -> Result<PathBuf, Error> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_address_ipv4_and_ipv6() {
        let v4: IpNet = "10.96.0.0/12".parse().unwrap();
        assert_eq!(nth_address(&v4, 1).to_string(), "10.96.0.1");
        assert_eq!(nth_address(&v4, 10).to_string(), "10.96.0.10");
        let v6: IpNet = "fd00:10:96::/108".parse().unwrap();
        assert_eq!(nth_address(&v6, 1).to_string(), "fd00:10:96::1");
        assert_eq!(nth_address(&v6, 10).to_string(), "fd00:10:96::a");
    }
}
