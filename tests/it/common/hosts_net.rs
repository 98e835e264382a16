//! What the tests of environments across hosts share, containers (`hosts`) and VMs (`vms`): the
//! hosts' network, a bridge at test addresses (this machine its gateway, forwarding nothing beyond
//! it), and kubectl from this machine as a host's admin.

use std::path::Path;
use std::process::{Command, Output};

use super::{kubernetes_bin_dir, run, script, text};

pub const BRIDGE: &str = "ku-hosts";
pub const GATEWAY: &str = "198.19.254.1";
/// Where the hosts' state dirs are (`gen --state-dir` of the `--out` host dirs).
pub const STATE: &str = "/var/lib/kubeunit/ha";

/// The bridge the hosts share, gone with the test.
pub struct Bridge;

impl Bridge {
    pub fn up() -> Bridge {
        let out = run(Command::new(script("container.sh")).args([
            "bridge",
            BRIDGE,
            &format!("{GATEWAY}/24"),
        ]));
        assert!(out.status.success(), "container.sh bridge: {}", text(&out));
        Bridge
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = run(Command::new(script("container.sh")).args(["unbridge", BRIDGE]));
    }
}

/// kubectl from this machine as the admin of `host`'s state dir under `out` (its API server).
pub fn kubectl(out: &Path, host: &str, args: &[&str]) -> Output {
    let kubectl = kubernetes_bin_dir().join("kubectl");
    run(Command::new(kubectl)
        .env(
            "KUBECONFIG",
            out.join(host).join("kubeconfig/admin.kubeconfig"),
        )
        .args(["--request-timeout=30s"])
        .args(args))
}

/// (30 s: cp-1 of three TCG VMs on two cores answered an apply in more than 10 s, three times in a
/// row, in a run of 2026-11-28.)
/// kubectl as `host`'s admin, which must succeed. A request that outlasted `--request-timeout` (busy
/// TCG VMs on two cores can take that long) is asked again, twice at most; any other failure fails.
pub fn kubectl_ok(out: &Path, host: &str, args: &[&str]) -> String {
    let mut o = kubectl(out, host, args);
    for _ in 0..2 {
        if o.status.success() || !timed_out(&o) {
            break;
        }
        eprintln!("kubectl {args:?} at {host} timed out; asking again");
        o = kubectl(out, host, args);
    }
    assert!(
        o.status.success(),
        "kubectl {args:?} at {host}: {}",
        text(&o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// kubectl as `host`'s admin inside a wait: its output if it succeeded, None ("not yet") if not.
pub fn kubectl_now(out: &Path, host: &str, args: &[&str]) -> Option<String> {
    let o = kubectl(out, host, args);
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Whether kubectl gave up on the request itself (`--request-timeout`), rather than the server
/// refusing it.
fn timed_out(o: &Output) -> bool {
    let err = String::from_utf8_lossy(&o.stderr);
    [
        "context deadline exceeded",
        "Client.Timeout",
        "i/o timeout",
        "TLS handshake timeout",
    ]
    .iter()
    .any(|s| err.contains(s))
}

/// The nodes whose Ready condition is True, sorted, as `host`'s API server says.
pub fn ready_nodes(out: &Path, host: &str) -> Vec<String> {
    let o = kubectl(
        out,
        host,
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
        ],
    );
    let mut ready: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix("=True").map(String::from))
        .collect();
    ready.sort();
    ready
}
