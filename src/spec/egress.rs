//! `network.egress` and `offline`: where a node and its pods reach beyond this host. The profile's
//! word or list (`EgressSpec`) is checked here and resolved into `Egress`, which node-network.sh
//! carries out (the environment's routing table, forwarding, masquerading, a FORWARD filter) and
//! `start` reports.

use ipnet::{IpNet, Ipv4Net};

use super::profile::{EgressSpec, Profile};
use crate::error::{Error, FieldError};

/// Where the node's traffic may go beyond this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Egress {
    /// Where this host forwards anyway (net.ipv4.ip_forward=1), by its routes; nowhere else.
    Host,
    /// Anywhere this host's routes go: kubeunit forwards for the node links alone.
    On,
    /// Nowhere beyond this host.
    Off,
    /// To these networks only, as `On` does.
    Only(Vec<Ipv4Net>),
}

/// The words `network.egress` takes; anything else is a list of CIDRs.
pub const WORDS: &[&str] = &["host", "on", "off"];

const FIELD: &str = "network.egress";
const FIX: &str = "write host (the default: out only where this host forwards), on, off, or a list of networks such as [203.0.113.0/24] (--set 'network.egress=[203.0.113.0/24]')";

impl Egress {
    /// The profile's egress, validated (`errors`): `offline` makes it `Off` whatever it says.
    pub fn of(p: &Profile) -> Result<Egress, Error> {
        if p.offline {
            return Ok(Egress::Off);
        }
        let unvalidated = || Error::Internal(format!("unvalidated profile field {FIELD}"));
        match &p.network.egress {
            EgressSpec::Word(w) => match w.as_str() {
                "host" => Ok(Egress::Host),
                "on" => Ok(Egress::On),
                "off" => Ok(Egress::Off),
                _ => Err(unvalidated()),
            },
            EgressSpec::Only(list) => list
                .iter()
                .map(|c| c.parse::<Ipv4Net>().map_err(|_| unvalidated()))
                .collect::<Result<Vec<_>, _>>()
                .map(Egress::Only),
        }
    }

    /// As `profile.yaml` records it.
    pub fn spec(&self) -> EgressSpec {
        match self {
            Egress::Only(nets) => EgressSpec::Only(nets.iter().map(|n| n.to_string()).collect()),
            other => EgressSpec::Word(other.word().into()),
        }
    }

    /// `host`, `on`, `off`, or `only` for a list (node-network.sh's `$egress`).
    pub fn word(&self) -> &'static str {
        match self {
            Egress::Host => "host",
            Egress::On => "on",
            Egress::Off => "off",
            Egress::Only(_) => "only",
        }
    }

    /// The networks kubeunit forwards the node's traffic to (every address for `On`); none for
    /// `Host` (this host decides) and `Off`.
    pub fn allowed(&self) -> Vec<Ipv4Net> {
        match self {
            Egress::On => vec![Ipv4Net::default()],
            Egress::Only(nets) => nets.clone(),
            Egress::Host | Egress::Off => vec![],
        }
    }

    /// Whether pods reach anything beyond this host, `host_forwards` being whether this host
    /// forwards (net.ipv4.ip_forward).
    pub fn reaches_out(&self, host_forwards: bool) -> bool {
        match self {
            Egress::Host => host_forwards,
            Egress::On | Egress::Only(_) => true,
            Egress::Off => false,
        }
    }
}

/// Every wrong value of `network.egress`: a word it does not take, or a list entry that is not an
/// IPv4 network beyond the cluster's own.
pub fn errors(p: &Profile) -> Vec<FieldError> {
    match &p.network.egress {
        EgressSpec::Word(w) if WORDS.contains(&w.as_str()) => vec![],
        EgressSpec::Word(w) if w.parse::<IpNet>().is_ok() => vec![FieldError::new(
            FIELD,
            format!("{w:?}"),
            "one network, not a list of them",
            format!("write it as a list: [{w}] (--set 'network.egress=[{w}]')"),
        )],
        EgressSpec::Word(w) => vec![FieldError::new(
            FIELD,
            format!("{w:?}"),
            "not host, on, off or a list of networks",
            FIX,
        )],
        EgressSpec::Only(list) if list.is_empty() => vec![FieldError::new(
            FIELD,
            "[]",
            "an empty list (nothing beyond this host is what `off` says)",
            "write off, or list the networks pods may reach, e.g. [203.0.113.0/24]",
        )],
        EgressSpec::Only(list) => {
            let cluster: Vec<(&str, IpNet)> = [
                ("network.podCIDR", &p.network.pod_cidr),
                ("network.serviceCIDR", &p.network.service_cidr),
            ]
            .into_iter()
            .filter_map(|(f, v)| Some((f, v.parse().ok()?)))
            .collect();
            list.iter()
                .filter_map(|entry| {
                    let (why, fix) = entry_problem(entry, &cluster)?;
                    Some(FieldError::new(FIELD, format!("{entry:?}"), why, fix))
                })
                .collect()
        }
    }
}

/// What is wrong with one entry of the list, if anything: why, and the fix.
fn entry_problem(entry: &str, cluster: &[(&str, IpNet)]) -> Option<(String, String)> {
    let problem = |why: String, fix: String| Some((why, fix));
    let net = match entry.parse::<IpNet>() {
        Ok(n) => n,
        Err(_) => {
            return problem(
                "not a network (CIDR)".into(),
                "write networks such as 203.0.113.0/24 or 192.0.2.10/32".into(),
            )
        }
    };
    let IpNet::V4(v4) = net else {
        return problem(
            "an IPv6 network, which the node's IPv4 link cannot carry".into(),
            "list IPv4 networks".into(),
        );
    };
    if v4.trunc() != v4 {
        return problem(
            "has host bits set".into(),
            format!("use the network address: {}", v4.trunc()),
        );
    }
    if v4.prefix_len() == 0 {
        return problem(
            "every address".into(),
            "write network.egress: on for every address".into(),
        );
    }
    let (field, inside) = cluster.iter().find(|(_, c)| c.contains(&net))?;
    problem(
        format!("inside {field} {inside}, which pods reach in the cluster, never beyond this host"),
        "list networks beyond the cluster's own".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load::layered;

    fn profile(sets: &[&str]) -> Profile {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        layered("dev", &sets).unwrap().1
    }

    #[test]
    fn words_and_lists_resolve() {
        assert_eq!(Egress::of(&profile(&[])).unwrap(), Egress::Host);
        assert_eq!(
            Egress::of(&profile(&["network.egress=on"])).unwrap(),
            Egress::On
        );
        assert_eq!(
            Egress::of(&profile(&["network.egress=off"])).unwrap(),
            Egress::Off
        );
        let only = profile(&["network.egress=[203.0.113.0/24, 192.0.2.7/32]"]);
        assert!(errors(&only).is_empty(), "{:?}", errors(&only));
        let e = Egress::of(&only).unwrap();
        assert_eq!(e.word(), "only");
        assert_eq!(
            e.spec(),
            EgressSpec::Only(vec!["203.0.113.0/24".into(), "192.0.2.7/32".into()])
        );
        assert_eq!(
            Egress::On.allowed(),
            vec!["0.0.0.0/0".parse::<Ipv4Net>().unwrap()]
        );
        assert!(Egress::Off.allowed().is_empty() && Egress::Host.allowed().is_empty());
    }

    #[test]
    fn offline_forces_off() {
        let p = profile(&["network.egress=on", "offline=true"]);
        assert_eq!(Egress::of(&p).unwrap(), Egress::Off);
    }

    #[test]
    fn only_what_pods_can_reach_is_out() {
        assert!(!Egress::Host.reaches_out(false));
        assert!(Egress::Host.reaches_out(true));
        assert!(!Egress::Off.reaches_out(true));
        assert!(Egress::On.reaches_out(false));
    }

    #[test]
    fn wrong_values_are_named_with_a_fix() {
        for (set, needle) in [
            ("network.egress=yes", "not host, on, off"),
            ("network.egress=203.0.113.0/24", "one network, not a list"),
            ("network.egress=[]", "an empty list"),
            ("network.egress=[nope]", "not a network"),
            ("network.egress=[203.0.113.1/24]", "host bits"),
            ("network.egress=[\"2001:db8::/32\"]", "IPv6"),
            ("network.egress=[0.0.0.0/0]", "every address"),
            ("network.egress=[10.88.1.0/24]", "inside network.podCIDR"),
            ("network.egress=[10.0.0.0/24]", "inside network.serviceCIDR"),
        ] {
            let errs = errors(&profile(&[set]));
            assert_eq!(errs.len(), 1, "{set}: {errs:?}");
            assert_eq!(errs[0].field, "network.egress", "{set}");
            assert!(errs[0].message.contains(needle), "{set}: {:?}", errs[0]);
            assert!(!errs[0].fix.is_empty(), "{set}");
        }
        // A network around the cluster's is fine: the cluster's own routes are more specific.
        assert!(errors(&profile(&["network.egress=[10.0.0.0/8]"])).is_empty());
    }
}
