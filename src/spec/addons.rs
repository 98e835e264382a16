//! The addons a user turns on and off by name (`kubeunit addons enable NAME`), each one profile key:
//! what `addons list` shows, and what `enable`/`disable` set before rendering the state dir again.

use super::profile::Addons;

/// One addon: its name on the command line, its profile key and what it gives.
pub struct Addon {
    pub name: &'static str,
    /// The profile key (`--set` path) that turns it on.
    pub key: &'static str,
    pub what: &'static str,
    /// Whether a profile has it on.
    pub on: fn(&Addons) -> bool,
    /// The addons it needs on (by name): enabled first, disabled after it.
    pub needs: &'static [&'static str],
}

pub const ADDONS: &[Addon] = &[
    Addon {
        name: "coredns",
        key: "addons.coredns",
        what: "cluster DNS (kube-dns at network.dnsIP)",
        on: |a| a.coredns,
        needs: &[],
    },
    Addon {
        name: "storage",
        key: "addons.defaultStorageClass",
        what: "the default StorageClass `standard` and its provisioner",
        on: |a| a.default_storage_class,
        needs: &[],
    },
    Addon {
        name: "metrics-server",
        key: "addons.metricsServer",
        what: "the resource metrics API: kubectl top, HorizontalPodAutoscalers",
        on: |a| a.metrics_server,
        needs: &[],
    },
    Addon {
        name: "loadbalancer",
        key: "addons.loadBalancer",
        what: "LoadBalancer Services reachable from this host (MetalLB, addons.loadBalancerPool)",
        on: |a| a.load_balancer,
        needs: &[],
    },
    Addon {
        name: "gateway",
        key: "addons.gateway",
        what: "the Gateway API with Traefik (GatewayClass traefik)",
        on: |a| a.gateway,
        needs: &["loadbalancer"],
    },
];

/// The addon named `name`.
pub fn find(name: &str) -> Option<&'static Addon> {
    ADDONS.iter().find(|a| a.name == name)
}

/// Every addon's name, for a message.
pub fn names() -> String {
    ADDONS.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each key is a profile key that sets what `on` reads, and each need is an addon.
    #[test]
    fn each_key_turns_its_addon_on_and_off() {
        for a in ADDONS {
            for value in [true, false] {
                let (_, p) = super::super::load::layered("dev", &[format!("{}={value}", a.key)])
                    .unwrap_or_else(|e| panic!("{}: {e}", a.key));
                assert_eq!((a.on)(&p.addons), value, "{}", a.key);
            }
            assert!(a.needs.iter().all(|n| find(n).is_some()), "{}", a.name);
        }
    }
}
