//! What `start` says about `network.egress` (`spec::egress`): which is in force, and where pods reach
//! nothing beyond this host, that they do not and the fix.

use std::fmt;

use serde::Serialize;

use crate::spec::egress::Egress;
use crate::spec::Plan;

/// `network.egress` as `start` found it (`-o json`: `egress`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressReport {
    /// `host`, `on`, `off`, or `only`.
    pub mode: &'static str,
    /// The networks of `only`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    /// `offline` (or `KUBEUNIT_OFFLINE=1` at `gen`) made it `off`.
    pub offline: bool,
    /// Whether this host forwards (net.ipv4.ip_forward=1), which `host` follows.
    pub host_forwards: bool,
    /// Whether pods reach anything beyond this host.
    pub pods_reach_beyond: bool,
    /// What lets them, when they reach nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl EgressReport {
    /// The report of an environment with a node (none without: nothing of it leaves anyway).
    pub fn of(plan: &Plan) -> Option<EgressReport> {
        if !plan.enabled("node-network") {
            return None;
        }
        let host_forwards =
            std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").is_ok_and(|v| v.trim() == "1");
        let pods_reach_beyond = plan.egress.reaches_out(host_forwards);
        let dir = plan.state_dir.display();
        let fix = match (pods_reach_beyond, plan.profile.offline) {
            (true, _) => None,
            (false, true) => Some(format!(
                "kubeunit stop --state-dir {dir}, then kubeunit gen --state-dir {dir} --set offline=false --set network.egress=on without KUBEUNIT_OFFLINE, and start"
            )),
            (false, false) => Some(format!(
                "kubeunit stop --state-dir {dir}, then kubeunit gen --state-dir {dir} --set network.egress=on, and start"
            )),
        };
        Some(EgressReport {
            mode: plan.egress.word(),
            allowed: match &plan.egress {
                Egress::Only(nets) => nets.iter().map(|n| n.to_string()).collect(),
                _ => vec![],
            },
            offline: plan.profile.offline,
            host_forwards,
            pods_reach_beyond,
            fix,
        })
    }
}

/// One line: the mode, what it means here, and the fix when pods reach nothing.
impl fmt::Display for EgressReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match (self.mode, self.host_forwards) {
            ("host", true) => "pods reach beyond this host by its routes, as it forwards".to_string(),
            ("host", false) => "pods reach nothing beyond this host, which does not forward (net.ipv4.ip_forward=0)".to_string(),
            ("on", _) => "pods reach beyond this host by its routes; kubeunit forwards for the node links alone".to_string(),
            ("only", _) => format!("pods reach {} beyond this host, nothing else", self.allowed.join(", ")),
            _ => "pods reach nothing beyond this host".to_string(),
        };
        let offline = if self.offline { " (offline)" } else { "" };
        write!(f, "egress: {}{offline}: {what}", self.mode)?;
        match &self.fix {
            Some(fix) => write!(f, "; fix: {fix}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(sets: &[&str]) -> EgressReport {
        EgressReport::of(&Plan::for_tests("dev", sets)).expect("dev has a node")
    }

    #[test]
    fn off_and_offline_say_that_pods_reach_nothing_with_the_fix() {
        let off = report(&["network.egress=off"]);
        assert!(!off.pods_reach_beyond);
        let line = off.to_string();
        assert!(line.starts_with("egress: off: "), "{line}");
        assert!(line.contains("--set network.egress=on"), "{line}");
        let offline = report(&["network.egress=on", "offline=true"]);
        assert_eq!(offline.mode, "off");
        assert!(
            offline.to_string().contains("KUBEUNIT_OFFLINE"),
            "{offline}"
        );
    }

    #[test]
    fn on_and_lists_reach_out_without_a_fix() {
        let on = report(&["network.egress=on"]);
        assert!(on.pods_reach_beyond && on.fix.is_none(), "{on}");
        let only = report(&["network.egress=[203.0.113.0/24]"]);
        assert_eq!(only.allowed, ["203.0.113.0/24"]);
        assert!(only.to_string().contains("203.0.113.0/24"), "{only}");
        assert!(!only.to_string().contains('\n'));
    }

    #[test]
    fn no_node_no_report() {
        assert!(EgressReport::of(&Plan::for_tests("control-plane", &[])).is_none());
    }
}
