//! An environment across hosts: the `ha` profile (3 control-plane hosts with a stacked etcd member
//! each, 2 workers behind HAProxy) rendered by one `gen --out`, each host's state dir imported into
//! its own systemd container with a network namespace of its own on a bridge (198.19.254.0/24, as
//! the profile's addresses), on the pinned binaries and the offline images. The hosts route each
//! other's pods; nothing of the cluster goes by a host's default route; a LoadBalancer Service's
//! address is announced on the hosts' network, where this machine and every host reach it; the
//! control plane keeps serving with one control-plane host's power cut, and the host rejoins when
//! it is back; a worker's pods move to the other worker once it is gone.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::container::{dev_args, Container};
use crate::common::hosts_net::{kubectl, kubectl_ok, ready_nodes, Bridge, BRIDGE, GATEWAY, STATE};
use crate::common::*;

/// Its runtime data, on a directory of this machine's bound there: containerd's overlay
/// snapshots cannot live on the container's overlay root.
const DATA: &str = "/var/lib/kubeunit-data/ha";
/// name, address, control plane
const HOSTS: [(&str, &str, bool); 5] = [
    ("cp-1", "198.19.254.11", true),
    ("cp-2", "198.19.254.12", true),
    ("cp-3", "198.19.254.13", true),
    ("worker-1", "198.19.254.21", false),
    ("worker-2", "198.19.254.22", false),
];

struct Host {
    name: &'static str,
    address: &'static str,
    control_plane: bool,
    c: Container,
}

impl Host {
    fn ku(&self, args: &[&str]) -> std::process::Output {
        let mut argv = args.to_vec();
        argv.extend(["--state-dir", STATE]);
        self.c.kubeunit(&argv)
    }
}

/// `kubectl create ...` retried until it is there: a create that timed out (an etcd election)
/// may have been stored, and its retry then answers AlreadyExists, which is success here.
fn create_or_keep(out: &Path, host: &str, args: &[&str]) {
    wait_for(
        &format!("kubectl {args:?}"),
        Duration::from_secs(60),
        || {
            let o = kubectl(out, host, args);
            o.status.success() || text(&o).contains("(AlreadyExists)")
        },
    );
}

/// The addresses of the `kubernetes` Service's endpoints, sorted.
fn apiserver_endpoints(out: &Path, host: &str) -> Vec<String> {
    let o = kubectl(
        out,
        host,
        &[
            "get",
            "endpointslices",
            "-n",
            "default",
            "-l",
            "kubernetes.io/service-name=kubernetes",
            "-o",
            "jsonpath={.items[*].endpoints[*].addresses[*]}",
        ],
    );
    let mut a: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(String::from)
        .collect();
    a.sort();
    a
}

/// Apply `manifest` at cp-1 once the default service account is there (the controller-manager's
/// leader makes it a moment after it starts leading), and wait until `pods` are Ready.
fn apply_pods(out: &Path, work: &Path, manifest: &str, pods: &[&str], seconds: u64) {
    wait_for(
        "the default service account",
        Duration::from_secs(60),
        || {
            kubectl(out, "cp-1", &["get", "serviceaccount", "default"])
                .status
                .success()
        },
    );
    let file = work.join("pods.yaml");
    std::fs::write(&file, manifest).unwrap();
    kubectl_ok(out, "cp-1", &["apply", "-f", &file.to_string_lossy()]);
    let mut args = vec!["wait".to_string(), "--for=condition=Ready".into()];
    args.extend(pods.iter().map(|p| format!("pod/{p}")));
    args.push(format!("--timeout={seconds}s"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    kubectl_ok(out, "cp-1", &args);
}

/// Start every host at once (the etcd members wait for each other), each `kubeunit start`.
fn start_all(hosts: &[&Host]) {
    std::thread::scope(|s| {
        let runs: Vec<_> = hosts
            .iter()
            .map(|h| s.spawn(move || (h.name, h.ku(&["start"]))))
            .collect();
        for r in runs {
            let (name, out) = r.join().unwrap();
            assert!(out.status.success(), "start on {name}: {}", text(&out));
        }
    });
}

#[test]
fn five_hosts_serve_with_a_control_plane_host_or_a_worker_powered_off() {
    let _lock = node_lock();
    let _bridge = Bridge::up();
    let work = PathBuf::from(format!("/tmp/kubeunit-it/hosts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let out = work.join("out");

    // One gen renders every host's state dir, for the state dir each imports it to.
    let mut args = dev_args(&pinned("KUBERNETES_VERSIONS")[0]);
    args[1] = "ha".into();
    for set in [
        // A worker that is gone: its pods are evicted 10 s after its Node is unreachable (which
        // the node controller says 20 s after its last heartbeat), not after 5 minutes.
        "components.kube-apiserver.extraArgs.default-unreachable-toleration-seconds=10",
        "components.kube-apiserver.extraArgs.default-not-ready-toleration-seconds=10",
        "components.kube-controller-manager.extraArgs.node-monitor-grace-period=20s",
        &format!("dataDir={DATA}"),
        &format!(
            "components.hosts-sync.binary={}",
            env!("CARGO_BIN_EXE_kubeunit")
        ),
    ] {
        args.push("--set".into());
        args.push(set.into());
    }
    let mut gen = kubeunit();
    gen.env("SOURCE_DATE_EPOCH", test_epoch())
        .arg("gen")
        .args(&args)
        .args(["--state-dir", STATE, "--out"])
        .arg(&out);
    let o = run(&mut gen);
    assert!(o.status.success(), "gen: {}", text(&o));

    // Five hosts, each importing its own dir.
    let hosts: Vec<Host> = HOSTS
        .iter()
        .map(|(name, address, control_plane)| {
            let c = Container::boot_host(
                &format!("h-{name}"),
                &format!("{BRIDGE},{address}/24,{GATEWAY}"),
                &[
                    &format!("--bind-ro={}", out.display()),
                    &format!(
                        "--bind={}:{DATA}",
                        work.join(format!("{name}.data")).display()
                    ),
                ],
            );
            Host {
                name,
                address,
                control_plane: *control_plane,
                c,
            }
        })
        .collect();
    for h in &hosts {
        let src = out.join(h.name);
        let o =
            h.c.kubeunit(&["import", &src.to_string_lossy(), "--state-dir", STATE]);
        assert!(o.status.success(), "import on {}: {}", h.name, text(&o));
    }
    start_all(&hosts.iter().collect::<Vec<_>>());

    // Every node Ready (the workers' through HAProxy), an endpoint per API server.
    let all: Vec<String> = HOSTS.iter().map(|h| h.0.to_string()).collect();
    wait_for("5 Ready nodes", Duration::from_secs(180), || {
        ready_nodes(&out, "cp-1") == all
    });
    let cp_addresses: Vec<String> = hosts
        .iter()
        .filter(|h| h.control_plane)
        .map(|h| h.address.to_string())
        .collect();
    wait_for(
        "the kubernetes Service's 3 endpoints",
        Duration::from_secs(60),
        || apiserver_endpoints(&out, "cp-1") == cp_addresses,
    );

    // Pods on the two workers reach each other by their own addresses, across hosts (no NAT),
    // and the Service of a pod on a control-plane host's node; `kubectl exec` goes from cp-1's
    // API server to worker-1's kubelet at its node's address.
    let image = pinned("TEST_IMAGE")[0].clone();
    // busybox httpd runs /cgi-bin/* as CGI with REMOTE_ADDR set: the address the server saw.
    let serve = "mkdir -p /w/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho from $REMOTE_ADDR on $(hostname)\\n' >/w/cgi-bin/ip && chmod +x /w/cgi-bin/ip && exec httpd -f -p 8080 -h /w";
    let pods = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: server, labels: {{app: server}}}}
spec:
  nodeName: worker-2
  terminationGracePeriodSeconds: 1
  containers: [{{name: c, image: {image}, command: [sh, -c, {serve:?}]}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: client}}
spec:
  nodeName: worker-1
  terminationGracePeriodSeconds: 1
  containers: [{{name: c, image: {image}, command: [sleep, "3600"]}}]
"#
    );
    apply_pods(&out, &work, &pods, &["server", "client"], 120);
    let ip_of = |pod: &str| {
        kubectl_ok(
            &out,
            "cp-1",
            &["get", "pod", pod, "-o", "jsonpath={.status.podIP}"],
        )
    };
    let (client_ip, server_ip) = (ip_of("client"), ip_of("server"));
    let seen = kubectl_ok(
        &out,
        "cp-1",
        &[
            "exec",
            "client",
            "--",
            "sh",
            "-c",
            &format!("printf 'GET /cgi-bin/ip HTTP/1.0\r\n\r\n' | nc -w 5 {server_ip} 8080"),
        ],
    );
    assert!(
        seen.contains(&format!("from {client_ip}"))
            || seen.contains(&format!("from [::ffff:{client_ip}]")),
        "worker-2's pod saw {seen:?}, not worker-1's pod {client_ip}"
    );
    // DNS: the cluster's CoreDNS, through its Service, from a pod on a worker.
    kubectl_ok(
        &out,
        "cp-1",
        &[
            "-n",
            "kube-system",
            "rollout",
            "status",
            "deployment/coredns",
            "--timeout=120s",
        ],
    );
    // The rollout is the pod's readiness. The Service's EndpointSlice follows it (the leading
    // controller-manager), and worker-1's kube-proxy programs it a moment later: until then the
    // Service rejects (one CI run asked 0.1 s after the rollout and was refused).
    wait_shown(
        &out,
        "kube-dns's EndpointSlice to list a ready CoreDNS",
        Duration::from_secs(60),
        || {
            let o = kubectl(
                &out,
                "cp-1",
                &[
                    "-n",
                    "kube-system",
                    "get",
                    "endpointslices",
                    "-l",
                    "kubernetes.io/service-name=kube-dns",
                    "-o",
                    "jsonpath={.items[*].endpoints[?(@.conditions.ready==true)].addresses[0]}",
                ],
            );
            !String::from_utf8_lossy(&o.stdout).trim().is_empty()
        },
    );
    let asked = std::time::Instant::now();
    let mut dns = String::new();
    wait_shown(
        &out,
        "DNS answers in a pod on worker-1",
        Duration::from_secs(30),
        || {
            let o = kubectl(
                &out,
                "cp-1",
                &[
                    "exec",
                    "client",
                    "--",
                    "nslookup",
                    "kubernetes.default.svc.cluster.local",
                ],
            );
            dns = text(&o);
            o.status.success()
        },
    );
    eprintln!(
        "DNS answered {:.1}s after kube-dns's endpoint was ready",
        asked.elapsed().as_secs_f64()
    );
    assert_eq!(
        nslookup_answers(&dns),
        ["10.0.0.1"],
        "kubernetes.default's address:\n{dns}"
    );

    // Cluster addresses go to their hosts, never by a host's default route.
    for h in &hosts {
        for other in hosts.iter().filter(|o| o.name != h.name) {
            let pods = node_pod_cidr(&out, other.name);
            let first_pod = pods.replace(".0/24", ".1");
            let route = h.c.sh(&format!("ip -o route get {first_pod}"));
            let route = text(&route);
            assert!(
                route.contains(&format!("via {} dev eth0", other.address)),
                "{}: {first_pod} ({}'s pods) goes {route}",
                h.name,
                other.name
            );
        }
        // An address of the pod network no host has, and a Service's: not by the default route.
        let free = text(&h.c.sh("ip -o route get 10.88.200.9 2>&1"));
        assert!(
            free.contains("unreachable") || free.contains("No route"),
            "{}: a free pod address goes {free}",
            h.name
        );
        let svc = text(&h.c.sh("ip -o route get 10.0.0.1"));
        assert!(
            !svc.contains(&format!("via {GATEWAY}")),
            "{}: the Service network goes {svc}",
            h.name
        );
    }

    load_balancer_on_the_hosts_network(&out, &work, &hosts, &image, serve);

    let image = format!("--image={image}");

    // A worker host's upgrade holds the environment to the skew policy: it asks every control-plane
    // host's API server what it runs, over TLS as its node (it has no API server of its own).
    let seen = api_servers_seen_by_a_worker(&hosts).unwrap_or_else(|(code, out)| {
        panic!("upgrade --dry-run on a worker: exit {code:?}\n{out}")
    });
    let cps: Vec<(String, String)> = hosts
        .iter()
        .filter(|h| h.control_plane)
        .map(|h| (h.name.to_string(), pinned("KUBERNETES_VERSIONS")[0].clone()))
        .collect();
    assert_eq!(
        seen, cps,
        "the control-plane hosts' API servers as a worker's upgrade saw them"
    );

    // The history check (common::history): a client on each API server and on each etcd member
    // writes keys once each and reads back what others were told was written, before, during and
    // after two power cuts: the etcd leader's host first, then a follower's. Afterwards every
    // acknowledged write is there, with its value, on every member's own data and through every
    // API server, and nothing appears that no client wrote.
    kubectl_ok(&out, "cp-1", &["create", "namespace", HISTORY_NAMESPACE]);
    let members = etcd_members(&out);
    assert_eq!(members.len(), 3, "3 etcd members: {members:?}");
    let record = history::History::new();
    let api: Vec<ApiStore> = hosts
        .iter()
        .filter(|h| h.control_plane)
        .map(|h| ApiStore {
            out: &out,
            host: h.name,
        })
        .collect();
    let etcd: Vec<EtcdStore> = hosts
        .iter()
        .filter(|h| h.control_plane)
        .map(|h| EtcdStore {
            out: &out,
            host: h.name,
            address: h.address,
        })
        .collect();
    let mut hosts = hosts;
    let cut_hosts: Vec<&'static str> = std::thread::scope(|s| {
        for store in &api {
            let record = &record;
            s.spawn(move || record.client("api-", store));
        }
        for store in &etcd {
            let record = &record;
            s.spawn(move || record.client("etcd-", store));
        }
        // (A panic here stops the clients first: the scope waits for them.)
        let cuts = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            std::thread::sleep(Duration::from_secs(10));
            let leader = etcd_leader(&out);
            let first = power_cut_and_rejoin(
                &mut hosts,
                &out,
                &record,
                leader,
                "leader",
                &cp_addresses,
                &image,
            );
            // A follower other than the host cut first (which may follow now).
            let follower = {
                let now = etcd_leader(&out);
                HOSTS
                    .iter()
                    .find(|h| h.2 && h.0 != now && h.0 != first)
                    .unwrap()
                    .0
            };
            let second = power_cut_and_rejoin(
                &mut hosts,
                &out,
                &record,
                follower,
                "follower",
                &cp_addresses,
                &image,
            );
            vec![first, second]
        }));
        record.stop();
        cuts.unwrap_or_else(|p| std::panic::resume_unwind(p))
    });

    // The same 3 members, and every member's own data caught up with the leader's revision.
    assert_eq!(etcd_members(&out), members, "the members after both cuts");
    let leader_revision = etcd_status(&out).iter().map(|s| s.3).max().unwrap();
    wait_for(
        "every member at the leader's revision",
        Duration::from_secs(60),
        || {
            let status = etcd_status(&out);
            status.len() == 3 && status.iter().all(|s| s.3 >= leader_revision)
        },
    );
    let mut finals = Vec::new();
    for h in HOSTS.iter().filter(|h| h.2) {
        let member = member_holds(&out, h.1);
        finals.push((format!("{}'s etcd member", h.0), String::new(), member));
        let api = api_holds(&out, h.0);
        finals.push((format!("{}'s API server", h.0), "api-".into(), api));
    }
    let (ops, acked, unknown) = record.counts();
    eprintln!(
        "history: {ops} operations, {acked} acknowledged writes, {unknown} without an answer; cut: {cut_hosts:?}"
    );
    for phase in [
        "before",
        "leader off",
        "leader back",
        "follower off",
        "follower back",
    ] {
        let n = record.acked_in(phase).len();
        eprintln!("history: {n} writes acknowledged in phase {phase:?}");
        assert!(n > 0, "no write acknowledged in phase {phase:?}");
    }
    let anomalies = record.check(&finals);
    assert!(
        anomalies.is_empty(),
        "the cluster broke what it acknowledged ({} anomalies):\n{}",
        anomalies.len(),
        anomalies.join("\n")
    );

    volumes_stay_on_their_hosts(&out, &work, &pinned("TEST_IMAGE")[0]);

    // A worker's power cut: its pods go to the other worker once the eviction timeout is over.
    kubectl_ok(
        &out,
        "cp-1",
        &[
            "create",
            "deployment",
            "spread",
            &image,
            "--replicas=4",
            "--",
            "sleep",
            "3600",
        ],
    );
    let spread_on = |node: &str| {
        let o = kubectl(
            &out,
            "cp-1",
            &[
                "get",
                "pods",
                "-l",
                "app=spread",
                "--field-selector=status.phase=Running",
                "-o",
                "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
            ],
        );
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|n| *n == node)
            .count()
    };
    wait_shown(
        &out,
        "spread's 4 pods Running",
        Duration::from_secs(120),
        || spread_on("worker-1") + spread_on("worker-2") == 4,
    );
    assert!(
        spread_on("worker-2") > 0,
        "the scheduler put no pod on worker-2"
    );
    let w2 = hosts.iter().position(|h| h.name == "worker-2").unwrap();
    hosts[w2].c.power_cut();
    let cut = std::time::Instant::now();
    wait_shown(
        &out,
        "spread's 4 pods Running on worker-1",
        Duration::from_secs(180),
        || spread_on("worker-1") == 4,
    );
    eprintln!(
        "worker-2's pods Running on worker-1 {:.0}s after its power cut",
        cut.elapsed().as_secs_f64()
    );
    // `stop` on every host that runs; the LoadBalancer segment's macvlans go with the nodes.
    std::thread::scope(|s| {
        let stops: Vec<_> = hosts
            .iter()
            .filter(|h| h.name != "worker-2")
            .map(|h| s.spawn(move || (h.name, h.ku(&["stop"]))))
            .collect();
        for r in stops {
            let (name, o) = r.join().unwrap();
            assert!(o.status.success(), "stop on {name}: {}", text(&o));
        }
    });
    for h in hosts.iter().filter(|h| h.name != "worker-2") {
        let left =
            text(&h.c.sh("ip -o link show type macvlan; ip -o route show 198.19.254.240/28"));
        assert!(left.trim().is_empty(), "{} after stop: {left}", h.name);
    }
    drop(hosts);
    let _ = std::fs::remove_dir_all(&work);
}

/// A refused run: its exit code and output.
type Refused = (Option<i32>, String);

/// What a worker host's `kubeunit upgrade --dry-run -o json` found every other control-plane host's
/// API server runs (host, version), or its exit code and output when it refused.
fn api_servers_seen_by_a_worker(hosts: &[Host]) -> Result<Vec<(String, String)>, Refused> {
    let worker = hosts.iter().find(|h| !h.control_plane).unwrap();
    let o = worker.ku(&["upgrade", "--dry-run", "-o", "json"]);
    if !o.status.success() {
        return Err((o.status.code(), text(&o)));
    }
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("upgrade -o json: {e}\n{}", text(&o)));
    let seen = plan["apiServersElsewhere"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(seen
        .iter()
        .map(|a| {
            let field = |k: &str| a[k].as_str().unwrap_or_default().to_string();
            (field("host"), field("version"))
        })
        .collect())
}

/// What an HTTP/1.0 GET of `path` at `address`:80 from this machine answered (3 s at most).
fn http_get_here(address: &str, path: &str) -> String {
    let o = run(Command::new("timeout").args([
        "3",
        "bash",
        "-c",
        &format!(
            "exec 3<>/dev/tcp/{address}/80; printf 'GET {path} HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"
        ),
    ]));
    text(&o)
}

/// LoadBalancer Services on the hosts' network (ha's pool, 198.19.254.240/28): MetalLB's speaker on
/// the node of the Service's one pod (externalTrafficPolicy Local) answers ARP for its address on
/// the hosts' network, where this machine (198.19.254.1 on the bridge) and the hosts reach it, and
/// the pod sees each client's own address; the address follows the pod to the other worker. With
/// Cluster, it answers too.
fn load_balancer_on_the_hosts_network(
    out: &Path,
    work: &Path,
    hosts: &[Host],
    image: &str,
    serve: &str,
) {
    let pool = "198.19.254.240/28";
    for what in ["deploy/controller", "ds/speaker"] {
        kubectl_ok(
            out,
            "cp-1",
            &[
                "-n",
                "metallb-system",
                "rollout",
                "status",
                what,
                "--timeout=180s",
            ],
        );
    }
    let file = work.join("lb-web.yaml");
    let mut address = String::new();
    for node in ["worker-1", "worker-2"] {
        std::fs::write(&file, lb_web_on(node, image, serve)).unwrap();
        kubectl_ok(out, "cp-1", &["apply", "-f", &file.to_string_lossy()]);
        kubectl_ok(
            out,
            "cp-1",
            &["rollout", "status", "deploy/lb-web", "--timeout=120s"],
        );
        address = external_ip_of(
            |a| kubectl_ok(out, "cp-1", a),
            "lb-web",
            pool,
            Duration::from_secs(30),
        );
        let name = kubectl_ok(
            out,
            "cp-1",
            &[
                "get",
                "pods",
                "-l",
                "app=lb-web",
                &format!("--field-selector=status.phase=Running,spec.nodeName={node}"),
                "-o",
                "jsonpath={.items[0].metadata.name}",
            ],
        );
        assert!(!name.is_empty(), "no pod of lb-web Running on {node}");
        let host = hosts.iter().find(|h| h.name == node).unwrap();
        let link = text(&host.c.sh("ip -n kubeunit-ha -br link show lb0"));
        let mac = brief_link_mac(&link);
        assert_eq!(mac.len(), 17, "lb0 of {node}: {link}");
        // From this machine on the hosts' network: ARP names the node's lb0, and the pod saw
        // this machine's own address (busybox httpd writes it IPv4-mapped).
        wait_for_saying(
            &format!("{address} from this machine, answered by {node}"),
            Duration::from_secs(60),
            || {
                let answer = http_get_here(&address, "/cgi-bin/ip");
                let neigh = text(&run(
                    Command::new("ip").args(["neigh", "show", &address, "dev", BRIDGE])
                ));
                let done =
                    answer.contains(&format!("{GATEWAY}] on {name}")) && neigh.contains(&mac);
                (
                    done,
                    format!("{answer}\nARP: {neigh} (lb0 of {node}: {mac})"),
                )
            },
        );
        // From each host, the node's own and the others: each host from the link-local address of
        // its macvlan (169.254.108.N, N its place in `hosts:`), never by way of the host's own.
        for (i, h) in hosts.iter().enumerate() {
            wait_for_saying(
                &format!("{address} from {}, answered by {node}", h.name),
                Duration::from_secs(30),
                || {
                    let (_, answer) = http_get_from(&h.c, &address, "/cgi-bin/ip");
                    let from = format!("169.254.108.{}] on {name}", i + 1);
                    (answer.contains(&from), answer)
                },
            );
        }
    }
    kubectl_ok(
        out,
        "cp-1",
        &[
            "patch",
            "svc",
            "lb-web",
            "-p",
            r#"{"spec":{"externalTrafficPolicy":"Cluster"}}"#,
        ],
    );
    // Any node may announce it now, and forward to worker-2's pod masqueraded.
    wait_for_saying(
        "the address with externalTrafficPolicy Cluster",
        Duration::from_secs(60),
        || {
            let answer = http_get_here(&address, "/cgi-bin/ip");
            (answer.contains("from "), answer)
        },
    );
    for h in hosts {
        let (_, answer) = http_get_from(&h.c, &address, "/cgi-bin/ip");
        assert!(answer.contains("from "), "{} (Cluster): {answer}", h.name);
    }
    kubectl_ok(
        out,
        "cp-1",
        &["delete", "deploy/lb-web", "svc/lb-web", "--wait=true"],
    );
}

/// A StatefulSet of 5 with a claim each, one pod per host (the control-plane hosts' taint
/// tolerated): local-path-provisioner puts each volume in the data dir of its pod's host, on that
/// host's own disk, with node affinity to its node; a pod deleted comes back to its host with what
/// it wrote; deleting the claims deletes the directories on each host.
fn volumes_stay_on_their_hosts(out: &Path, work: &Path, image: &str) {
    let manifest = work.join("kept.yaml");
    std::fs::write(&manifest, kept_statefulset(5, image)).unwrap();
    kubectl_ok(out, "cp-1", &["apply", "-f", &manifest.to_string_lossy()]);
    kubectl_ok(
        out,
        "cp-1",
        &["rollout", "status", "sts/kept", "--timeout=300s"],
    );
    let get = |args: &[&str]| kubectl_ok(out, "cp-1", args).trim().to_string();
    let node_of = |pod: &str| get(&["get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"]);
    let id_of = |pod: &str| get(&["exec", pod, "--", "cat", "/data/id"]);
    let mut nodes = Vec::new();
    let mut dirs = Vec::new();
    for i in 0..5 {
        let pod = format!("kept-{i}");
        let node = node_of(&pod);
        let pv = get(&[
            "get",
            "pvc",
            &format!("data-{pod}"),
            "-o",
            "jsonpath={.spec.volumeName}",
        ]);
        let affinity = get(&[
            "get",
            "pv",
            &pv,
            "-o",
            "jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[*]}",
        ]);
        assert_eq!(affinity, node, "{pv} of {pod}: node affinity");
        // The host's data dir (DATA there) is this machine's WORK/HOST.data.
        let path = get(&["get", "pv", &pv, "-o", "jsonpath={.spec.hostPath.path}"]);
        let rel = Path::new(&path)
            .strip_prefix(Path::new(DATA).join("local-path"))
            .unwrap_or_else(|_| panic!("{pv} of {pod}: {path} is not in {DATA}/local-path"));
        let on_host = work.join(format!("{node}.data/local-path")).join(rel);
        let on_disk = std::fs::read_to_string(on_host.join("id")).unwrap_or_default();
        assert_eq!(
            on_disk.trim(),
            id_of(&pod),
            "{pod} on {node}: {}",
            on_host.display()
        );
        nodes.push(node);
        dirs.push(on_host);
    }
    let mut spread = nodes.clone();
    spread.sort();
    let all: Vec<String> = HOSTS.iter().map(|h| h.0.to_string()).collect();
    assert_eq!(spread, all, "one pod per host");
    // Two pods deleted come back to their hosts with their data (written once).
    for pod in ["kept-0", "kept-4"] {
        let i: usize = pod[5..].parse().unwrap();
        let before = id_of(pod);
        kubectl_ok(out, "cp-1", &["delete", "pod", pod, "--wait=true"]);
        kubectl_ok(
            out,
            "cp-1",
            &["rollout", "status", "sts/kept", "--timeout=180s"],
        );
        assert_eq!(node_of(pod), nodes[i], "{pod} back on its host");
        assert_eq!(id_of(pod), before, "{pod}'s data survived its deletion");
    }
    kubectl_ok(out, "cp-1", &["delete", "sts", "kept", "--wait=true"]);
    let claims: Vec<String> = (0..5).map(|i| format!("data-kept-{i}")).collect();
    let mut args = vec!["delete", "pvc", "--wait=true"];
    args.extend(claims.iter().map(String::as_str));
    kubectl_ok(out, "cp-1", &args);
    wait_shown(
        out,
        "the volumes' directories gone on every host",
        Duration::from_secs(120),
        || dirs.iter().all(|d| !d.exists()),
    );
}

fn wait_shown(out: &Path, what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !f() {
        if std::time::Instant::now() >= deadline {
            for args in [
                &["get", "nodes", "-o", "wide"][..],
                &["get", "pods", "-A", "-o", "wide"][..],
                &["get", "events", "-A", "--sort-by=.lastTimestamp"][..],
            ] {
                for host in ["cp-1", "cp-2"] {
                    let o = kubectl(out, host, args);
                    if o.status.success() {
                        eprintln!("kubectl {args:?}:\n{}", text(&o));
                        break;
                    }
                }
            }
            panic!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `etcdctl endpoint health` of every member, from `host` with the health-check identity.
fn etcd_health(host: &Host) -> String {
    let etcdctl = etcd_bin_dir().join("etcdctl");
    let endpoints: Vec<String> = member_addresses()
        .iter()
        .map(|a| format!("https://{a}:2379"))
        .collect();
    let pki = |f: &str| format!("{STATE}/pki/etcd/{f}");
    let o = host.c.run(&[
        &etcdctl.to_string_lossy(),
        "--endpoints",
        &endpoints.join(","),
        "--cacert",
        &pki("ca.crt"),
        "--cert",
        &pki("healthcheck-client.crt"),
        "--key",
        &pki("healthcheck-client.key"),
        "--dial-timeout=2s",
        "--command-timeout=3s",
        "endpoint",
        "health",
    ]);
    text(&o)
}

/// The pod network of `node`, as its Node or the profile says.
fn node_pod_cidr(out: &Path, node: &str) -> String {
    let profile = std::fs::read_to_string(out.join("cp-1/profile.yaml")).unwrap();
    let p: serde_yaml_ng::Value = serde_yaml_ng::from_str(&profile).unwrap();
    p["nodes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|n| n["name"].as_str() == Some(node))
        .and_then(|n| n["podCIDR"].as_str())
        .unwrap_or_else(|| panic!("no podCIDR of {node} in profile.yaml"))
        .to_string()
}

/// `gen --profile ha --out DIR` with `args`, on fake binaries.
fn gen_hosts(out: &Path, args: &[&str]) -> std::process::Output {
    gen_profile_hosts("ha", out, args)
}

/// `gen_hosts` of another profile.
fn gen_profile_hosts(profile: &str, out: &Path, args: &[&str]) -> std::process::Output {
    let bin = executable_bin_dir(&out.parent().unwrap().join("bin"));
    run(kubeunit()
        .env("SOURCE_DATE_EPOCH", test_epoch())
        .args([
            "gen",
            "--profile",
            profile,
            "--state-dir",
            STATE,
            "--bin-dir",
        ])
        .arg(&bin)
        .arg("--out")
        .arg(out)
        .args(args))
}

/// Every file of every host's dir, relative to `out` (with the lock file's), sorted.
fn files_below(out: &Path) -> Vec<String> {
    let mut files: Vec<String> = walkdir::WalkDir::new(out)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(out).unwrap().display().to_string())
        .collect();
    files.sort();
    files
}

#[test]
fn host_dirs_are_reproducible_hold_only_their_own_keys_and_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    for dir in [&a, &b] {
        let o = gen_hosts(dir, &["--seed", "5"]);
        assert!(o.status.success(), "gen: {}", text(&o));
    }
    // Byte-identical, host by host, from the same profile and seed.
    let (sa, sb) = (snapshot(&a), snapshot(&b));
    let differing: Vec<_> = sa
        .iter()
        .filter(|(p, (bytes, mode, _))| sb.get(*p).is_none_or(|(b, m, _)| b != bytes || m != mode))
        .map(|(p, _)| p.clone())
        .collect();
    assert!(
        differing.is_empty() && sa.len() == sb.len(),
        "{differing:?}"
    );
    let hosts: Vec<&str> = HOSTS.iter().map(|h| h.0).collect();
    let dirs: Vec<String> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(dirs, hosts);

    // A worker's dir: its node's own identities and the cluster CA's certificate, nothing more.
    let worker: Vec<String> = files_below(&a.join("worker-1"))
        .into_iter()
        .filter(|f| f.starts_with("pki/") || f.starts_with("kubeconfig/"))
        .collect();
    assert_eq!(
        worker,
        [
            "kubeconfig/kube-proxy.kubeconfig",
            "kubeconfig/kubelet.kubeconfig",
            "pki/ca.crt",
            "pki/kube-proxy.crt",
            "pki/kube-proxy.key",
            "pki/kubelet-client.crt",
            "pki/kubelet-client.key",
            "pki/kubelet.crt",
            "pki/kubelet.key",
        ]
    );
    // A control-plane host's: the CA keys, the service-account key and the encryption key too,
    // and only its own node's identities.
    let cp = files_below(&a.join("cp-2"));
    for f in [
        "pki/ca.key",
        "pki/sa.key",
        "pki/front-proxy-ca.key",
        "pki/etcd/ca.key",
        "pki/encryption.key",
    ] {
        assert!(cp.contains(&f.to_string()), "cp-2 lacks {f}");
    }
    let kubelet_cn = |host: &str| {
        let pem = std::fs::read(a.join(host).join("pki/kubelet-client.crt")).unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
        let cert = pem.parse_x509().unwrap();
        cert.subject().to_string()
    };
    assert!(kubelet_cn("worker-1").contains("system:node:worker-1"));
    assert!(kubelet_cn("cp-2").contains("system:node:cp-2"));
    // No two hosts share a leaf key (one entropy renders them all: a leaf's key is its host's).
    let key = |host: &str| std::fs::read(a.join(host).join("pki/kubelet-client.key")).unwrap();
    assert_ne!(key("worker-1"), key("worker-2"));
    let apiserver_key = |host: &str| std::fs::read(a.join(host).join("pki/apiserver.key")).unwrap();
    assert_ne!(apiserver_key("cp-1"), apiserver_key("cp-2"));
    // Unseeded: the hosts still agree on what they share.
    let o = gen_hosts(&c, &[]);
    assert!(o.status.success(), "gen: {}", text(&o));
    let check = |dir: &Path| run(kubeunit().args(["hosts", "check"]).arg(dir));
    for dir in [&a, &c] {
        let o = check(dir);
        assert!(
            o.status.success(),
            "hosts check {}: {}",
            dir.display(),
            text(&o)
        );
    }
    assert_ne!(
        std::fs::read(a.join("cp-1/pki/ca.key")).unwrap(),
        std::fs::read(c.join("cp-1/pki/ca.key")).unwrap()
    );

    // A shared key changed on one host (its manifest too, as a careless hand would): refused,
    // naming the file and the hosts.
    let sa = c.join("cp-2/pki/sa.key");
    let other = std::fs::read(a.join("cp-2/pki/sa.key")).unwrap();
    std::fs::write(&sa, &other).unwrap();
    let manifest_path = c.join("cp-2/manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    use sha2::Digest;
    manifest["files"]["pki/sa.key"]["sha256"] = hex::encode(sha2::Sha256::digest(&other)).into();
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    let o = check(&c);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let msg = text(&o);
    assert!(
        msg.contains("pki/sa.key") && msg.contains("cp-1") && msg.contains("cp-2"),
        "{msg}"
    );
    // ... and without its manifest: refused too.
    std::fs::write(a.join("cp-3/pki/sa.key"), b"tampered").unwrap();
    let o = check(&a);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("pki/sa.key"), "{}", text(&o));

    // A CA key slipped into a worker's dir (and its manifest): refused.
    let o = gen_hosts(&b.with_file_name("d"), &["--seed", "5"]);
    assert!(o.status.success());
    let d = b.with_file_name("d");
    let key = std::fs::read(d.join("cp-1/pki/ca.key")).unwrap();
    std::fs::write(d.join("worker-2/pki/ca.key"), &key).unwrap();
    let manifest_path = d.join("worker-2/manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["files"]["pki/ca.key"] = serde_json::json!({
        "sha256": hex::encode(sha2::Sha256::digest(&key)),
        "mode": "0600",
    });
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    let o = check(&d);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("worker-2") && text(&o).contains("pki/ca.key"),
        "{}",
        text(&o)
    );
}

/// The sandbox of `a_remote_added_at_run_time_is_a_rendered_one`, in a network and mount
/// namespace of its own (a private /run), with this host's address (worker-1's) on `hosts0`: the
/// node-network.sh that names worker-2 as a remote (`$1`), and the one that does not (`$2`), which
/// adds it at run time (`$3`: its address, pod network and link). Prints `key: value` lines.
const REMOTE_SANDBOX: &str = r#"set -u
static=$1 dynamic=$2
mount -t tmpfs kubeunit-it /run
ip link set lo up
ip link add hosts0 type veth peer name hosts1
ip addr add 198.19.254.21/24 dev hosts0
ip link set hosts0 up
ip link set hosts1 up
# What the host has of kubeunit's (but node-network's marker of an added remote, which is how it
# knows it).
state() {
  grep -H . /proc/sys/net/ipv4/conf/*/forwarding
  ip rule
  ip route show table all | grep -v -e 'table local' -e '^local ' -e '^broadcast ' -e '^multicast '
  iptables-save | grep -e '^-' -e '^:KU'
  find /run/kubeunit 2>/dev/null | grep -v '\.remote\.' | sort
}
same() { if cmp -s "$1" "$2"; then echo yes; else echo no; diff "$1" "$2" >&2; fi; }
run() { sh "$@" >/run/log 2>&1 || { echo "$*: failed"; cat /run/log; }; }
state >/run/before
run "$static" up
state >/run/static
run "$static" down
run "$dynamic" up
state >/run/without
run "$dynamic" add $3
state >/run/added
echo "added as rendered: $(same /run/static /run/added)"
run "$dynamic" add $3
state >/run/again
echo "added again: $(same /run/added /run/again)"
echo "remotes: $(sh "$dynamic" remotes)"
run "$dynamic" remove "${3%% *}"
state >/run/removed
echo "removed: $(same /run/without /run/removed)"
run "$dynamic" add $3
run "$dynamic" down
state >/run/after
rmdir /run/kubeunit 2>/dev/null || true
state >/run/after
echo "after down: $(same /run/before /run/after)"
"#;

/// node-network.sh `add` of a remote (a host that joined later, as `kubeunit hosts sync` adds it)
/// has exactly the effects of the same remote rendered by `gen` (routes in both tables, the rule of
/// its uplink and the uplink's forwarding held, the egress filter's RETURN rules), again changes
/// nothing, `remove` takes exactly that away, and `down` removes an added one too.
#[test]
fn a_remote_added_at_run_time_is_a_rendered_one() {
    let tmp = tempfile::tempdir().unwrap();
    let hosts = [HOSTS[0], HOSTS[3], HOSTS[4]];
    let head = "network: {egress: on}\naddons: {loadBalancer: false}\n";
    let none = (Path::new(""), Path::new(""));
    let profile =
        |n: usize| hosts_profile(tmp.path(), &format!("{n}.yaml"), head, &hosts[..n], 0, none);
    let (with, without) = (tmp.path().join("with"), tmp.path().join("without"));
    for (out, n) in [(&with, 3), (&without, 2)] {
        let bin = executable_bin_dir(&out.parent().unwrap().join("bin"));
        let o = run(kubeunit()
            .env("SOURCE_DATE_EPOCH", test_epoch())
            // Rendered with egress on, as on a connected machine; the sandbox reaches nothing.
            .env("KUBEUNIT_OFFLINE", "0")
            .args(["gen", "--seed", "5", "--state-dir", STATE, "--bin-dir"])
            .arg(&bin)
            .arg("--profile")
            .arg(profile(n))
            .arg("--out")
            .arg(out));
        assert!(o.status.success(), "gen: {}", text(&o));
    }
    let script = |out: &Path| out.join("worker-1/config/node-network.sh");
    let rendered = std::fs::read_to_string(script(&with)).unwrap();
    let remote = rendered
        .lines()
        .map(|l| l.trim_start_matches("remotes='"))
        .find(|l| l.starts_with("198.19.254.22 "))
        .expect("worker-2 a remote of worker-1's")
        .to_string();
    // The state dir's scripts name their copies in /run; the sandbox's /run is its own.
    let out = in_net_sandbox(
        REMOTE_SANDBOX,
        &[
            script(&with).as_os_str(),
            script(&without).as_os_str(),
            remote.as_ref(),
        ],
    );
    let t = text(&out);
    let lines: BTreeMap<String, String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for key in ["added as rendered", "removed", "after down"] {
        assert_eq!(
            lines.get(key).map(String::as_str),
            Some("yes"),
            "{key}: {t}"
        );
    }
    assert_eq!(
        lines.get("added again").map(String::as_str),
        Some("yes"),
        "{t}"
    );
    assert_eq!(lines.get("remotes"), Some(&remote), "{t}");
}

/// A host of `HOSTS` as an entry of a profile's `hosts:`, with `more` (", join: {...}").
fn host_line((name, address, cp): (&str, &str, bool), more: &str) -> String {
    let roles = if cp {
        "[etcd, control-plane]"
    } else {
        "[worker]"
    };
    format!("  - {{name: {name}, address: {address}, roles: {roles}{more}}}")
}

/// A profile that extends `ha` with `head` (more of its keys) and `hosts`, the last `joins` of
/// them joining later with `join` (the token file and the CA's certificate), as `dir/name`.
fn hosts_profile(
    dir: &Path,
    name: &str,
    head: &str,
    hosts: &[(&'static str, &'static str, bool)],
    joins: usize,
    join: (&Path, &Path),
) -> PathBuf {
    let more = format!(
        ", join: {{tokenFile: {}, caFile: {}}}",
        join.0.display(),
        join.1.display()
    );
    let lines: Vec<String> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| host_line(*h, if i + joins >= hosts.len() { &more } else { "" }))
        .collect();
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("extends: ha\n{head}hosts:\n{}\n", lines.join("\n")),
    )
    .unwrap();
    path
}

/// What a host has of the environment, as hashes: every file of its state dir, and the units
/// `start` made (their transient unit files; not the pods' slices, the kubelet's).
fn host_hashes(h: &Host) -> String {
    let o = h.c.sh(&format!(
        "cd {STATE} && find . -type f ! -name .lock | sort | xargs sha256sum && \
         cd /run/systemd/transient && find . -maxdepth 2 -type f \\( -name 'kubeunit-ha-*.service' \
         -o -name 'kubeunit-ha-*.timer' -o -name 'kubeunit-ha.slice' \\) | sort | xargs sha256sum"
    ));
    assert!(o.status.success(), "hashes on {}: {}", h.name, text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_worker_joins_later_by_token_and_no_other_host_changes() {
    let _lock = node_lock();
    let _bridge = Bridge::up();
    let work = PathBuf::from(format!("/tmp/kubeunit-it/join-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let gen = |profile: &Path, out: &Path| {
        let mut args = dev_args(&pinned("KUBERNETES_VERSIONS")[0]);
        args[1] = profile.to_string_lossy().into_owned();
        for set in [
            format!("dataDir={DATA}"),
            format!(
                "components.hosts-sync.binary={}",
                env!("CARGO_BIN_EXE_kubeunit")
            ),
        ] {
            args.push("--set".into());
            args.push(set);
        }
        let o = run(kubeunit()
            .env("SOURCE_DATE_EPOCH", test_epoch())
            .arg("gen")
            .args(&args)
            .args(["--state-dir", STATE, "--out"])
            .arg(out));
        assert!(o.status.success(), "gen: {}", text(&o));
    };
    let boot = |name: &'static str, address: &'static str, out: &Path| {
        let c = Container::boot_host(
            &format!("j-{name}"),
            &format!("{BRIDGE},{address}/24,{GATEWAY}"),
            &[
                &format!("--bind-ro={}", out.display()),
                &format!(
                    "--bind={}:{DATA}",
                    work.join(format!("{name}.data")).display()
                ),
            ],
        );
        let h = Host {
            name,
            address,
            control_plane: name == "cp-1",
            c,
        };
        let src = out.join(name);
        let o =
            h.c.kubeunit(&["import", &src.to_string_lossy(), "--state-dir", STATE]);
        assert!(o.status.success(), "import on {name}: {}", text(&o));
        h
    };

    // Two hosts, up.
    let out = work.join("out");
    let lb_off = "addons: {loadBalancer: false}\n";
    let (none, first) = ((Path::new(""), Path::new("")), [HOSTS[0], HOSTS[3]]);
    gen(
        &hosts_profile(&work, "two.yaml", lb_off, &first, 0, none),
        &out,
    );
    let cp1 = boot("cp-1", HOSTS[0].1, &out);
    let w1 = boot("worker-1", HOSTS[3].1, &out);
    start_all(&[&cp1, &w1]);
    let two = vec!["cp-1".to_string(), "worker-1".to_string()];
    wait_for("2 Ready nodes", Duration::from_secs(180), || {
        ready_nodes(&out, "cp-1") == two
    });
    let before = [host_hashes(&cp1), host_hashes(&w1)];

    // A description that is no line, or too long: refused, naming the flag, and no token made.
    let listed = |c: &Host| {
        let o = c.ku(&["token", "list", "-o", "json"]);
        assert!(o.status.success(), "token list: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut ids: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    let none = listed(&cp1);
    for bad in ["worker-2\nExpires: never", &"w".repeat(300)] {
        let o = cp1.ku(&["token", "create", "--description", bad]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("--description"), "{}", text(&o));
    }
    assert_eq!(listed(&cp1), none);
    // Two `token create` at once: two tokens, both listed. One is for worker-2, the other deleted.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| cp1.ku(&["token", "create", "--description", "worker-2"]));
        let b = s.spawn(|| cp1.ku(&["token", "create", "--ttl", "5m"]));
        (a.join().unwrap(), b.join().unwrap())
    });
    for o in [&a, &b] {
        assert!(o.status.success(), "token create: {}", text(o));
    }
    let id = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout)
            .split('.')
            .next()
            .unwrap()
            .to_string()
    };
    let mut both = vec![id(&a), id(&b)];
    both.sort();
    assert_ne!(both[0], both[1]);
    let now: Vec<String> = listed(&cp1)
        .into_iter()
        .filter(|i| !none.contains(i))
        .collect();
    assert_eq!(now, both);
    let o = cp1.ku(&["token", "delete", &id(&b)]);
    assert!(o.status.success(), "token delete: {}", text(&o));
    assert_eq!(listed(&cp1).len(), none.len() + 1);

    // worker-2's dir alone, rendered with the token and cp-1's CA certificate.
    let token = work.join("token");
    std::fs::write(&token, &a.stdout).unwrap();
    let later = work.join("later");
    let ca = out.join("cp-1/pki/ca.crt");
    let all = [HOSTS[0], HOSTS[3], HOSTS[4]];
    let joining = hosts_profile(&work, "three.yaml", lb_off, &all, 1, (&token, &ca));
    gen(&joining, &later);
    let w2 = boot("worker-2", HOSTS[4].1, &later);
    let o = w2.ku(&["start"]);
    assert!(o.status.success(), "start on worker-2: {}", text(&o));

    // Its node Ready, its serving certificate approved by cp-1's sync.
    let three = vec![
        "cp-1".to_string(),
        "worker-1".to_string(),
        "worker-2".to_string(),
    ];
    wait_for("3 Ready nodes", Duration::from_secs(180), || {
        ready_nodes(&out, "cp-1") == three
    });
    wait_shown(
        &out,
        "worker-2's serving certificate approved",
        Duration::from_secs(120),
        || {
            let o = kubectl(
            &out,
            "cp-1",
            &["get", "csr", "-o", "jsonpath={range .items[*]}{.spec.signerName} {.spec.username} {.status.conditions[0].type}{\"\\n\"}{end}"],
        );
            text(&o).contains("kubernetes.io/kubelet-serving system:node:worker-2 Approved")
        },
    );

    // A pod on worker-2 behind a Service, reached from a pod on worker-1 (pod to pod across
    // hosts, by the routes each sync added); logs from worker-2's kubelet (cp-1's API server
    // to its serving certificate).
    let image = pinned("TEST_IMAGE")[0].clone();
    let pods = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: joined, labels: {{app: joined}}}}
spec:
  nodeName: worker-2
  terminationGracePeriodSeconds: 1
  containers: [{{name: c, image: {image}, command: [sh, -c, "mkdir -p /w && echo hello from worker-2 >/w/index.html && exec httpd -f -p 8080 -h /w"]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: joined}}
spec: {{selector: {{app: joined}}, ports: [{{port: 80, targetPort: 8080}}]}}
---
apiVersion: v1
kind: Pod
metadata: {{name: asker}}
spec:
  nodeName: worker-1
  terminationGracePeriodSeconds: 1
  containers: [{{name: c, image: {image}, command: [sleep, "3600"]}}]
"#
    );
    apply_pods(&out, &work, &pods, &["joined", "asker"], 180);
    let service = kubectl_ok(
        &out,
        "cp-1",
        &[
            "get",
            "service",
            "joined",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    let pod_ip = kubectl_ok(
        &out,
        "cp-1",
        &["get", "pod", "joined", "-o", "jsonpath={.status.podIP}"],
    );
    // What the hosts route, shown once when an ask fails (the routes of the pod networks, the
    // rules, the packets the filters and NAT saw).
    let diagnose = || {
        for h in [&cp1, &w1, &w2] {
            let o = h.c.sh(
                "ip rule; ip route show table all | grep -e 10.88 -e 198.18 -e 198.19; \
                 iptables-save -c | grep -v '^#'; \
                 nsenter --net=/run/netns/kubeunit-ha sh -c 'ip route; iptables-save -c -t nat | grep -e 10.88.2 -e 10.0.0'",
            );
            eprintln!("--- {}:\n{}", h.name, text(&o));
        }
    };
    for (what, address, port) in [
        ("worker-2's pod from worker-1's", pod_ip.as_str(), "8080"),
        (
            "worker-2's pod by its Service from worker-1's",
            service.as_str(),
            "80",
        ),
    ] {
        let ask =
            format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 10 nc -w 5 {address} {port}");
        let mut asked = 0;
        wait_shown(&out, what, Duration::from_secs(90), || {
            let o = kubectl(&out, "cp-1", &["exec", "asker", "--", "sh", "-c", &ask]);
            asked += 1;
            let ok = text(&o).contains("hello from worker-2");
            if !ok {
                eprintln!("{what}, ask {asked}: {}", text(&o));
                if asked == 3 {
                    diagnose();
                }
            }
            ok
        });
    }
    kubectl_ok(&out, "cp-1", &["logs", "joined"]);

    // kill -9 of `hosts sync` at any instant (the timer's runs go on beside): worker-1's route to
    // worker-2 taken away each time, then a sync killed some milliseconds in. One run to the end
    // puts back exactly the remote, and worker-2's pod answers worker-1's again.
    let script = format!("{STATE}/config/node-network.sh");
    let remotes = || text(&w1.c.sh(&format!("sh {script} remotes")));
    let want = remotes();
    assert!(want.contains(HOSTS[4].1), "worker-1's remotes: {want}");
    let sync = format!(
        "{} hosts sync --state-dir {STATE}",
        env!("CARGO_BIN_EXE_kubeunit")
    );
    for ms in [0, 10, 30, 60, 100, 150, 200, 300, 450, 700] {
        let o = w1.c.sh(&format!(
            "sh {script} remove {a}; {sync} >/dev/null 2>&1 & pid=$!; sleep {s}; kill -9 $pid; wait $pid; true",
            a = HOSTS[4].1,
            s = f64::from(ms) / 1000.0
        ));
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = w1.c.sh(&sync);
    assert!(
        o.status.success(),
        "hosts sync after the kills: {}",
        text(&o)
    );
    assert_eq!(remotes(), want);
    let ask = format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 10 nc -w 5 {pod_ip} 8080");
    let o = kubectl(&out, "cp-1", &["exec", "asker", "--", "sh", "-c", &ask]);
    assert!(
        text(&o).contains("hello from worker-2"),
        "after the killed syncs: {}",
        text(&o)
    );

    // Nothing of the other hosts changed: their state dirs and units are as before.
    assert_eq!(before, [host_hashes(&cp1), host_hashes(&w1)]);
    drop((cp1, w1, w2));
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn a_host_that_joins_later_holds_no_key_of_its_own_and_changes_no_other_hosts_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let token = tmp.path().join("token");
    let secret = "0123456789abcdef";
    std::fs::write(&token, format!("abcdef.{secret}\n")).unwrap();
    let (with, without) = (tmp.path().join("with"), tmp.path().join("without"));
    // The hosts first; worker-2 joins later, given their CA's certificate.
    let ca = without.join("cp-1/pki/ca.crt");
    for (out, profile) in [
        (
            &without,
            hosts_profile(tmp.path(), "4.yaml", "", &HOSTS[..4], 0, (&token, &ca)),
        ),
        (
            &with,
            hosts_profile(tmp.path(), "5.yaml", "", &HOSTS, 1, (&token, &ca)),
        ),
    ] {
        let o = gen_profile_hosts(&profile.to_string_lossy(), out, &["--seed", "5"]);
        assert!(o.status.success(), "gen: {}", text(&o));
    }
    // Every other host's dir is the same, byte for byte, whether the profile lists worker-2 or
    // not: those rendered before it joins need not be rendered again.
    for (host, _, _) in &HOSTS[..4] {
        let (a, b) = (snapshot(&with.join(host)), snapshot(&without.join(host)));
        let differing: Vec<_> = a
            .iter()
            .filter(|(p, (bytes, mode, _))| {
                b.get(*p).is_none_or(|(c, m, _)| c != bytes || m != mode)
            })
            .map(|(p, _)| p.clone())
            .collect();
        assert!(
            differing.is_empty() && a.len() == b.len(),
            "{host}: {differing:?}"
        );
    }
    // worker-2's: the cluster CA's certificate and no key, no certificate of its own; the token
    // in two 0600 files alone (the bootstrap kubeconfig and profile.yaml's copy), never in a
    // unit, its argv or profile.yaml.
    let dir = with.join("worker-2");
    let files = files_below(&dir);
    let pki: Vec<&String> = files.iter().filter(|f| f.starts_with("pki/")).collect();
    assert_eq!(pki, ["pki/ca.crt"]);
    assert_eq!(
        std::fs::read(dir.join("pki/ca.crt")).unwrap(),
        std::fs::read(&ca).unwrap()
    );
    assert!(!files.iter().any(|f| f.ends_with(".key")), "{files:?}");
    let holding: Vec<&String> = files
        .iter()
        .filter(|f| {
            std::fs::read(dir.join(f)).is_ok_and(|b| String::from_utf8_lossy(&b).contains(secret))
        })
        .collect();
    assert_eq!(
        holding,
        [
            "config/join-token",
            "kubeconfig/bootstrap-kubelet.kubeconfig"
        ]
    );
    for f in holding {
        let mode = std::fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{f}");
    }
    let kubelet = std::fs::read_to_string(dir.join("units/kubeunit-ha-kubelet.service")).unwrap();
    for flag in [
        "--bootstrap-kubeconfig=",
        "--cert-dir=",
        "--kubeconfig=/var/lib/kubeunit/ha/data/",
    ] {
        assert!(kubelet.contains(flag), "{flag}: {kubelet}");
    }
    let config = std::fs::read_to_string(dir.join("config/kubelet-config.yaml")).unwrap();
    assert!(
        config.contains("rotateCertificates: true") && config.contains("serverTLSBootstrap: true")
    );
    assert!(!config.contains("tlsCertFile"), "{config}");
    let profile = std::fs::read_to_string(dir.join("profile.yaml")).unwrap();
    assert!(
        profile.contains("tokenFile: /var/lib/kubeunit/ha/config/join-token")
            && profile.contains("caFile: /var/lib/kubeunit/ha/pki/ca.crt"),
        "{profile}"
    );
    let proxy = std::fs::read_to_string(dir.join("kubeconfig/kube-proxy.kubeconfig")).unwrap();
    assert!(proxy.contains("kubelet-client-current.pem"), "{proxy}");
    // Every host routes through a hosts-sync timer; the dirs pass `hosts check` together.
    for (host, _, _) in HOSTS {
        assert!(
            with.join(host)
                .join("units/kubeunit-ha-hosts-sync.timer")
                .exists(),
            "{host}"
        );
    }
    let o = run(kubeunit().args(["hosts", "check"]).arg(&with));
    assert!(o.status.success(), "hosts check: {}", text(&o));
}

/// `gen --out` again over the earlier render (an upgrade across hosts): every host's dir is rendered
/// for the new setting with its keys and certificates kept, and `import` takes it over the state dir
/// imported before, as an update. Another state dir, and a mix of present and missing host dirs, are
/// refused with exit 2, changing nothing.
#[test]
fn gen_out_again_renders_every_host_over_its_earlier_dir_keeping_its_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let (bin, bin2) = (
        executable_bin_dir(&tmp.path().join("old")),
        executable_bin_dir(&tmp.path().join("new")),
    );
    let out = tmp.path().join("out");
    let state = tmp.path().join("state");
    let gen = |bin: &Path, state: &Path| {
        run(kubeunit()
            .args(["gen", "--profile", "ha", "--bin-dir"])
            .arg(bin)
            .arg("--state-dir")
            .arg(state)
            .arg("--out")
            .arg(&out))
    };
    // Every key and CA certificate of every host.
    let keys = || -> BTreeMap<PathBuf, Vec<u8>> {
        snapshot(&out)
            .into_iter()
            .filter(|(p, _)| {
                let name = p.to_string_lossy();
                name.ends_with(".key") || name.ends_with("ca.crt") || name.ends_with(".pub")
            })
            .map(|(p, (bytes, _, _))| (p, bytes))
            .collect()
    };
    let o = gen(&bin, &state);
    assert!(o.status.success(), "{}", text(&o));
    let before = keys();
    assert!(before.len() > HOSTS.len(), "{before:?}");
    let import = || run(kubeunit().arg("import").arg(out.join("cp-1")));
    let o = import();
    assert!(o.status.success(), "import: {}", text(&o));

    let o = gen(&bin2, &state);
    assert!(o.status.success(), "gen again: {}", text(&o));
    assert_eq!(keys(), before, "keys or CAs changed");
    for host in HOSTS {
        let units = snapshot(&out.join(host.0).join("units"));
        let kubelet = units
            .iter()
            .find(|(p, _)| p.to_string_lossy().contains("kubelet"))
            .unwrap_or_else(|| panic!("{}: no kubelet unit", host.0));
        let unit = String::from_utf8_lossy(&kubelet.1 .0);
        assert!(
            unit.contains(&bin2.display().to_string()),
            "{}: {unit}",
            host.0
        );
    }
    let ca = std::fs::read(state.join("pki/ca.crt")).unwrap();
    let o = import();
    assert!(o.status.success(), "import again: {}", text(&o));
    assert_eq!(std::fs::read(state.join("pki/ca.crt")).unwrap(), ca);

    // Refused, changing nothing: the render of another state dir, and a host's dir gone.
    let files = snapshot(&out);
    let o = gen(&bin2, &tmp.path().join("other"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is not host 'cp-1'"), "{}", text(&o));
    assert_eq!(snapshot(&out), files, "the refused gen changed --out");
    std::fs::rename(out.join("worker-2"), tmp.path().join("worker-2")).unwrap();
    let files = snapshot(&out);
    let o = gen(&bin, &state);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("worker-2 does not"), "{}", text(&o));
    assert_eq!(snapshot(&out), files, "the refused gen changed --out");
    // Every host's dir a link to an empty dir elsewhere: no earlier render, refused, nothing written
    // through the links.
    let links = tmp.path().join("links");
    let elsewhere = tmp.path().join("elsewhere");
    for host in HOSTS {
        std::fs::create_dir_all(elsewhere.join(host.0)).unwrap();
        std::fs::create_dir_all(&links).unwrap();
        std::os::unix::fs::symlink(elsewhere.join(host.0), links.join(host.0)).unwrap();
    }
    let o = run(kubeunit()
        .args(["gen", "--profile", "ha", "--bin-dir"])
        .arg(&bin)
        .arg("--state-dir")
        .arg(&state)
        .arg("--out")
        .arg(&links));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("holds no state dir"), "{}", text(&o));
    let written: Vec<_> = walkdir::WalkDir::new(&elsewhere)
        .into_iter()
        .flatten()
        .filter(|e| !e.file_type().is_dir())
        .collect();
    assert!(written.is_empty(), "written through the links: {written:?}");
}

#[test]
fn a_profile_with_hosts_is_refused_when_wrong_and_needs_out() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = executable_bin_dir(&tmp.path().join("bin"));
    let gen = |args: &[&str]| {
        let profile = args
            .iter()
            .find_map(|a| a.strip_prefix("--profile="))
            .unwrap_or("ha");
        let args: Vec<&str> = args
            .iter()
            .copied()
            .filter(|a| !a.starts_with("--profile="))
            .collect();
        run(kubeunit()
            .args(["gen", "--profile", profile, "--bin-dir"])
            .arg(&bin)
            .args(["--state-dir"])
            .arg(tmp.path().join("state"))
            .args(args))
    };
    let o = gen(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--out"), "{}", text(&o));
    // A host's dir that is there already, or a link to elsewhere: refused before any host is
    // written, and nothing is written through the link.
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    for (i, make) in ["dir", "link", "dangling"].iter().enumerate() {
        let out = tmp.path().join(format!("taken-{i}"));
        std::fs::create_dir_all(&out).unwrap();
        match *make {
            "dir" => std::fs::create_dir(out.join("cp-2")).unwrap(),
            "link" => std::os::unix::fs::symlink(&elsewhere, out.join("cp-2")).unwrap(),
            _ => std::os::unix::fs::symlink(tmp.path().join("nowhere"), out.join("cp-2")).unwrap(),
        }
        let o = gen(&["--out", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{make}: {}", text(&o));
        assert!(text(&o).contains("cp-2"), "{make}: {}", text(&o));
        let entries: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(entries, ["cp-2"], "{make}: wrote {entries:?}");
        assert_eq!(
            std::fs::read_dir(&elsewhere).unwrap().count(),
            0,
            "{make}: wrote through the link"
        );
        assert!(!tmp.path().join("nowhere").exists(), "{make}");
    }
    // A host of the `ha` profile's list changed, as a profile of its own that extends it.
    let with_host = |i: usize, entry: &str| {
        let mut hosts: Vec<String> = HOSTS.iter().map(|h| host_line(*h, "")).collect();
        hosts[i] = format!("  - {entry}");
        let path = tmp
            .path()
            .join(format!("profile-{}.yaml", entry.len() * 10 + i));
        std::fs::write(
            &path,
            format!("extends: ha\nhosts:\n{}\n", hosts.join("\n")),
        )
        .unwrap();
        path
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![format!(
                "--profile={}",
                with_host(
                    1,
                    "{name: cp-1, address: 198.19.254.12, roles: [etcd, control-plane]}"
                )
                .display()
            )],
            "hosts[1].name",
        ),
        (
            vec![format!(
                "--profile={}",
                with_host(
                    0,
                    "{name: cp-1, address: cp-1..example, roles: [etcd, control-plane]}"
                )
                .display()
            )],
            "hosts[0].address",
        ),
        (
            vec![format!(
                "--profile={}",
                with_host(
                    0,
                    "{name: cp-1, address: 127.0.0.1, roles: [etcd, control-plane]}"
                )
                .display()
            )],
            "hosts[0].address",
        ),
        (
            vec![format!(
                "--profile={}",
                with_host(
                    3,
                    "{name: worker-1, address: 198.19.254.11, roles: [worker]}"
                )
                .display()
            )],
            "hosts[3].address",
        ),
        (
            vec![format!(
                "--profile={}",
                with_host(
                    0,
                    "{name: cp-1, address: 10.88.0.5, roles: [etcd, control-plane]}"
                )
                .display()
            )],
            "hosts[0].address",
        ),
        (
            vec![format!(
                "--profile={}",
                with_host(0, "{name: cp-1, address: 198.19.254.11, roles: [etcd]}").display()
            )],
            "hosts[0].roles",
        ),
        (
            vec![format!(
                "--profile={}",
                with_host(0, "{name: cp-1, address: 198.19.254.11, roles: []}").display()
            )],
            "hosts[0].roles",
        ),
        (
            vec![format!(
                "--profile={}",
                with_host(
                    0,
                    "{name: \"bad\\nname\", address: 198.19.254.11, roles: [etcd, control-plane]}"
                )
                .display()
            )],
            "hosts[0].name",
        ),
        (
            vec![format!(
                "--profile={}",
                with_host(
                    0,
                    "{name: ../../x, address: 198.19.254.11, roles: [etcd, control-plane]}"
                )
                .display()
            )],
            "hosts[0].name",
        ),
        (vec!["--set".into(), "host=nobody".into()], "host"),
        (vec!["--set".into(), "nodes=3".into()], "nodes"),
        (vec!["--set".into(), "rootless=true".into()], "rootless"),
        (vec!["--set".into(), "ports=auto".into()], "ports"),
    ];
    for (i, (args, field)) in cases.iter().enumerate() {
        let out = tmp.path().join(format!("out-{i}"));
        let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
        argv.extend(["--out", out.to_str().unwrap()]);
        let o = gen(&argv);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(field), "{args:?}: {}", text(&o));
        assert!(!out.exists(), "{args:?}: wrote {}", out.display());
    }
}

/// The etcd members' clients of the history check: etcdctl from this machine with the API
/// server's etcd identity of `out/HOST` (every control-plane host has one).
fn etcdctl_at(
    out: &Path,
    endpoints: &[&str],
    args: &[&str],
    stdin: Option<&str>,
) -> std::process::Output {
    use std::io::Write;
    let pki = |f: &str| out.join("cp-1").join(f);
    let endpoints: Vec<String> = endpoints
        .iter()
        .map(|a| format!("https://{a}:2379"))
        .collect();
    // Under coreutils' timeout: an etcdctl was seen hanging for good on a member whose host was
    // cut, its --command-timeout notwithstanding, which would hang the test (its clients' scope).
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "2", "20"])
        .arg(etcd_bin_dir().join("etcdctl"))
        .arg("--endpoints")
        .arg(endpoints.join(","))
        .arg("--cacert")
        .arg(pki("pki/etcd/ca.crt"))
        .arg("--cert")
        .arg(pki("pki/apiserver-etcd-client.crt"))
        .arg("--key")
        .arg(pki("pki/apiserver-etcd-client.key"))
        .args(["--dial-timeout=2s", "--command-timeout=5s"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("run etcdctl");
    if let Some(input) = stdin {
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("etcdctl output")
}

/// The control-plane hosts' addresses.
fn member_addresses() -> Vec<&'static str> {
    HOSTS.iter().filter(|h| h.2).map(|h| h.1).collect()
}

const HISTORY_PREFIX: &str = "/kubeunit-history/";
const HISTORY_NAMESPACE: &str = "history";

/// A history client on one etcd member (its endpoint only: it fails while its host is off).
struct EtcdStore<'a> {
    out: &'a Path,
    host: &'static str,
    address: &'static str,
}

impl history::Store for EtcdStore<'_> {
    fn name(&self) -> String {
        format!("etcd@{}", self.host)
    }

    fn create_or_get(&self, key: &str, value: &str) -> history::Written {
        // One transaction: put it when the key has no version yet, else get it.
        let k = format!("{HISTORY_PREFIX}{key}");
        let txn = format!("version(\"{k}\") = \"0\"\n\nput {k} {value}\n\nget {k}\n\n");
        let o = etcdctl_at(self.out, &[self.address], &["txn"], Some(&txn));
        let said = String::from_utf8_lossy(&o.stdout).into_owned();
        let lines: Vec<&str> = said.lines().filter(|l| !l.is_empty()).collect();
        match (o.status.success(), lines.first()) {
            (true, Some(&"SUCCESS")) => history::Written::Created,
            (true, Some(&"FAILURE")) if lines.len() == 3 && lines[1] == k => {
                history::Written::Exists(lines[2].to_string())
            }
            _ => history::Written::Unknown(text(&o)),
        }
    }

    fn read(&self, key: &str) -> history::Read {
        let k = format!("{HISTORY_PREFIX}{key}");
        let o = etcdctl_at(
            self.out,
            &[self.address],
            &["get", &k, "--print-value-only"],
            None,
        );
        let v = String::from_utf8_lossy(&o.stdout).trim().to_string();
        match (o.status.success(), v.is_empty()) {
            (true, true) => history::Read::Absent,
            (true, false) => history::Read::Value(v),
            _ => history::Read::Unknown(text(&o)),
        }
    }
}

/// A history client on one host's API server (ConfigMaps; the API server reaches every member).
struct ApiStore<'a> {
    out: &'a Path,
    host: &'static str,
}

impl ApiStore<'_> {
    fn kubectl(&self, args: &[&str]) -> std::process::Output {
        let kubectl = kubernetes_bin_dir().join("kubectl");
        // (Under timeout too, as etcdctl.)
        run(Command::new("timeout")
            .args(["-k", "2", "20"])
            .arg(kubectl)
            .env(
                "KUBECONFIG",
                self.out.join(self.host).join("kubeconfig/admin.kubeconfig"),
            )
            .args(["--request-timeout=5s", "-n", HISTORY_NAMESPACE])
            .args(args))
    }
}

impl history::Store for ApiStore<'_> {
    fn name(&self) -> String {
        format!("api@{}", self.host)
    }

    fn create_or_get(&self, key: &str, value: &str) -> history::Written {
        let o = self.kubectl(&[
            "create",
            "configmap",
            key,
            &format!("--from-literal=v={value}"),
        ]);
        if o.status.success() {
            return history::Written::Created;
        }
        if !String::from_utf8_lossy(&o.stderr).contains("(AlreadyExists)") {
            return history::Written::Unknown(text(&o));
        }
        match self.read(key) {
            history::Read::Value(v) => history::Written::Exists(v),
            other => history::Written::Unknown(format!("exists, then read {other:?}")),
        }
    }

    fn read(&self, key: &str) -> history::Read {
        let o = self.kubectl(&["get", "configmap", key, "-o", "jsonpath={.data.v}"]);
        if o.status.success() {
            return history::Read::Value(String::from_utf8_lossy(&o.stdout).into_owned());
        }
        if String::from_utf8_lossy(&o.stderr).contains("(NotFound)") {
            return history::Read::Absent;
        }
        history::Read::Unknown(text(&o))
    }
}

/// `endpoint status` of every member: (address, member ID, leader's ID, revision); a member that
/// does not answer is left out.
fn etcd_status(out: &Path) -> Vec<(String, u64, u64, u64)> {
    let mut found = Vec::new();
    for address in member_addresses() {
        let o = etcdctl_at(out, &[address], &["endpoint", "status", "-w", "json"], None);
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&o.stdout) else {
            continue;
        };
        for s in v.as_array().into_iter().flatten() {
            let st = &s["Status"];
            if let (Some(id), Some(leader), Some(rev)) = (
                st["header"]["member_id"].as_u64(),
                st["leader"].as_u64(),
                st["header"]["revision"].as_u64(),
            ) {
                found.push((address.to_string(), id, leader, rev));
            }
        }
    }
    found
}

/// The etcd leader's host, as the members that answer agree.
fn etcd_leader(out: &Path) -> &'static str {
    let mut leader = None;
    wait_for(
        "the etcd members to agree on a leader",
        Duration::from_secs(60),
        || {
            let status = etcd_status(out);
            let leaders: std::collections::BTreeSet<u64> = status.iter().map(|s| s.2).collect();
            leader = match leaders.iter().collect::<Vec<_>>()[..] {
                [id] => status.iter().find(|s| s.1 == *id).map(|s| s.0.clone()),
                _ => None,
            };
            leader.is_some()
        },
    );
    let address = leader.unwrap();
    HOSTS.iter().find(|h| h.1 == address).unwrap().0
}

/// `member list`: every member's ID and name, sorted.
fn etcd_members(out: &Path) -> Vec<(u64, String)> {
    let o = etcdctl_at(
        out,
        &member_addresses(),
        &["member", "list", "-w", "json"],
        None,
    );
    assert!(o.status.success(), "etcdctl member list: {}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut members: Vec<(u64, String)> = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["ID"].as_u64().unwrap(),
                m["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    members.sort();
    members
}

/// What one member holds of the history, read from it alone (a serializable read: its own data,
/// not the leader's): the etcd clients' keys and the API clients' ConfigMaps.
fn member_holds(out: &Path, address: &str) -> BTreeMap<String, String> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut held = BTreeMap::new();
    for prefix in [
        HISTORY_PREFIX.to_string(),
        format!("/registry/configmaps/{HISTORY_NAMESPACE}/"),
    ] {
        let o = etcdctl_at(
            out,
            &[address],
            &["get", "--prefix", &prefix, "--consistency=s", "-w", "json"],
            None,
        );
        assert!(o.status.success(), "etcdctl get at {address}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for kv in v["kvs"].as_array().into_iter().flatten() {
            let key = b64.decode(kv["key"].as_str().unwrap()).unwrap();
            let value = b64.decode(kv["value"].as_str().unwrap()).unwrap();
            let key = String::from_utf8_lossy(&key);
            let name = key.rsplit('/').next().unwrap().to_string();
            // (The namespace's own ConfigMaps are not the clients'.)
            if !name.starts_with("api-") && !name.starts_with("etcd-") {
                continue;
            }
            let value = if prefix == HISTORY_PREFIX {
                String::from_utf8_lossy(&value).into_owned()
            } else {
                configmap_value(&value)
            };
            held.insert(name, value);
        }
    }
    held
}

/// The value of key `v` of a ConfigMap as the API server stores it (protobuf). Its `data` map
/// entry is the bytes 0a 01 'v' 12 LEN VALUE; a hand-read because decoding the whole object would
/// need the Kubernetes types, and the values here are shorter than 128 bytes (one length byte).
fn configmap_value(stored: &[u8]) -> String {
    let marker = [0x0a, 0x01, b'v', 0x12];
    stored
        .windows(marker.len())
        .position(|w| w == marker)
        .and_then(|at| {
            let len = *stored.get(at + 4)? as usize;
            stored.get(at + 5..at + 5 + len)
        })
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_else(|| format!("<no data.v in {} stored bytes>", stored.len()))
}

/// What one API server serves of the history's ConfigMaps.
fn api_holds(out: &Path, host: &'static str) -> BTreeMap<String, String> {
    let store = ApiStore { out, host };
    let o = store.kubectl(&["get", "configmaps", "-o", "json"]);
    assert!(o.status.success(), "configmaps at {host}: {}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|cm| {
            Some((
                cm["metadata"]["name"].as_str()?.to_string(),
                cm["data"]["v"]
                    .as_str()
                    .unwrap_or("<no data.v>")
                    .to_string(),
            ))
        })
        .filter(|(name, _)| name.starts_with("api-"))
        .collect()
}

/// Cut the power of control-plane host `name` (`role`: the etcd leader's or a follower's) while
/// the history's clients run: writes go on (the history acknowledges one), new pods start and the
/// endpoints drop to 2; power it back on and start it: its member rejoins (3 healthy) and its API
/// server is an endpoint again. The phases are "ROLE off" and "ROLE back" (the clients go on
/// writing for a while after the rejoin, for the final reads to find on its own member).
#[allow(clippy::too_many_arguments)]
fn power_cut_and_rejoin(
    hosts: &mut [Host],
    out: &Path,
    record: &history::History,
    name: &'static str,
    role: &str,
    cp_addresses: &[String],
    image: &str,
) -> &'static str {
    let i = hosts.iter().position(|h| h.name == name).unwrap();
    let other = hosts
        .iter()
        .find(|h| h.control_plane && h.name != name)
        .unwrap()
        .name;
    eprintln!("power cut of {name}, the etcd {role}'s host");
    let acked_before = record.acked().len();
    hosts[i].c.power_cut();
    // After the cut (a write begun before it counts as before it).
    record.set_phase(&format!("{role} off"));
    let cut = std::time::Instant::now();
    // An upgrade elsewhere is refused now, changing nothing: what the host that is off runs is
    // not known.
    match api_servers_seen_by_a_worker(hosts) {
        Err((Some(1), said)) => assert!(
            said.contains(&format!(
                "host {name}'s API server did not say what it runs"
            )),
            "{said}"
        ),
        other => panic!("upgrade --dry-run on a worker with {name} off: {other:?}"),
    }
    // A write may go unanswered while etcd elects a leader (after the leader's cut): about the
    // election timeout, 1 s; then the clients' writes are acknowledged again.
    wait_for(
        &format!("a write acknowledged with {name} off"),
        Duration::from_secs(30),
        || !record.acked_in(&format!("{role} off")).is_empty(),
    );
    eprintln!(
        "first write acknowledged after the cut: {:.1}s ({} before it)",
        cut.elapsed().as_secs_f64(),
        acked_before
    );
    let deployment = format!("after-{role}-cut");
    create_or_keep(
        out,
        other,
        &[
            "create",
            "deployment",
            &deployment,
            image,
            "--replicas=2",
            "--",
            "sleep",
            "3600",
        ],
    );
    wait_shown(
        out,
        &format!("{deployment}'s 2 pods Running"),
        Duration::from_secs(120),
        || {
            let o = kubectl(
                out,
                other,
                &[
                    "get",
                    "pods",
                    "-l",
                    &format!("app={deployment}"),
                    "-o",
                    "jsonpath={.items[*].status.phase}",
                ],
            );
            String::from_utf8_lossy(&o.stdout).trim() == "Running Running"
        },
    );
    let without: Vec<String> = cp_addresses
        .iter()
        .filter(|a| *a != hosts[i].address)
        .cloned()
        .collect();
    wait_for(
        &format!("the endpoints without {name}"),
        Duration::from_secs(60),
        || apiserver_endpoints(out, other) == without,
    );

    hosts[i].c.power_on();
    record.set_phase(&format!("{role} back"));
    let o = hosts[i].ku(&["start"]);
    assert!(o.status.success(), "start on {name} again: {}", text(&o));
    wait_for("3 healthy etcd members", Duration::from_secs(60), || {
        etcd_health(&hosts[i]).matches("is healthy").count() == 3
    });
    wait_for(
        &format!("the endpoints with {name} again"),
        Duration::from_secs(60),
        || apiserver_endpoints(out, name) == cp_addresses,
    );
    // Writes after the rejoin, for its own member to hold at the end.
    let back = record.acked_in(&format!("{role} back")).len();
    wait_for(
        &format!("10 more writes acknowledged with {name} back"),
        Duration::from_secs(60),
        || record.acked_in(&format!("{role} back")).len() >= back + 10,
    );
    name
}
