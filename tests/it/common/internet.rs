//! A simulated internet for the tests of connected features (binary downloads, a pull-through registry,
//! pod egress): a network namespace at a /28 of 198.19.255.0/24 (`SIM_NET`: the last /24 of RFC 2544's
//! benchmarking range, never routed on the real internet, and the one no `node.link: auto` picks; not
//! TEST-NET-3, where this workplace reaches its package registries, at 203.0.113.80), reached only from this
//! host over a veth pair, with stand-ins for the sites kubeunit
//! would reach: an HTTPS file server ("dl.k8s.io"), TLS registries ("registry.k8s.io", "docker.io"), a DNS
//! server, a plain HTTP server for pods. Each has its own address and a certificate of a CA made for the
//! one `Internet`; each logs what it was asked. A `LeakCounter` counts the packets of the test ranges that
//! leave through the host's default-route interface, which must stay 0.
//!
//! Nothing here resolves a name: the names in certificates are never looked up, and the DNS server answers
//! only names under reserved suffixes (`.test`, `.example`, `.invalid`) from its own table.
//!
//! Two tests run at a time in one process (and other test processes may run beside it), so each test that
//! starts an `Internet` has a slot of its own in `SLOTS`; a slot is also locked across processes while used.
//! An `Internet` belongs to the test thread that started it: its servers die with that thread.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{built_dir, text};

mod dns;
mod leak;
mod tls;

// Not every user of `common` (the benches include it) uses these.
#[allow(unused_imports)]
pub use dns::query_a;
#[allow(unused_imports)]
pub use leak::{default_route_interfaces, LeakCounter};
use tls::issue_certificates;

/// Which test uses which slot (0..=15: slot N is 198.19.255.16N/28, netns and
/// veth `ku-inet-N`). One row per test that starts an `Internet` or takes a slot; `Internet::start`
/// refuses a slot of no row, and one that another test's row names.
pub const SLOTS: &[(u8, &str)] = &[
    (
        0,
        "internet::files_are_served_over_https_trusting_the_test_ca_only",
    ),
    (1, "internet::file_faults_hang_truncate_and_fail"),
    (
        2,
        "internet::the_registry_answers_over_tls_with_and_without_auth",
    ),
    (3, "internet::dns_answers_the_given_names_and_logs_them"),
    (
        4,
        "internet::routes_go_through_the_veth_and_nothing_is_left_after_drop",
    ),
    (
        6,
        "internet::the_leak_counter_counts_packets_out_of_its_interface",
    ),
    (
        5,
        "egress::a_dev_node_reaches_the_simulated_internet_as_egress_says",
    ),
    (
        7,
        "fetch::a_fetch_checks_every_file_and_a_second_asks_nothing",
    ),
    (
        8,
        "fetch::each_broken_download_is_refused_and_leaves_the_cache_as_it_was",
    ),
    (9, "fetch::two_fetches_at_once_download_each_file_once"),
    (10, "fetch::dev_comes_up_from_the_fetched_binaries"),
    (
        11,
        "fetch::a_fetch_killed_midway_leaves_no_set_and_the_next_one_completes",
    ),
    (12, "fetch::bad_input_is_refused_before_any_request"),
    (
        13,
        "registry::dev_pulls_what_only_the_upstream_has_through_its_cache_and_keeps_it",
    ),
    (
        14,
        "registry::a_worker_pulls_through_the_caches_on_the_first_nodes_link",
    ),
    (
        15,
        "host_names::names_resolve_at_gen_as_their_addresses_and_bad_ones_are_refused",
    ),
];

/// Where the slots are: the /24 of 198.18.0.0/15 that kubeunit never picks for a node link
/// (`kubeunit::spec::plan::SIMULATED_INTERNET`). scripts/lib.sh `keep_test_networks_local` rejects
/// 198.18.0.0/15 when no slot is up.
pub const SIM_NET: &str = kubeunit::spec::plan::SIMULATED_INTERNET;

/// The IPv4 ranges whose packets must never leave this host: the simulated internet's and the ones the
/// tests give environments (node links, pods, Services: scripts/lib.sh `keep_test_networks_local`).
pub const KEPT_LOCAL: [&str; 3] = [
    // SIM_NET is part of it.
    "198.18.0.0/15",
    "10.88.0.0/13",
    "10.0.0.0/16",
];

/// IPv6: the environments are IPv4-only; a unique local source other than the interface's own would be
/// a cluster's (or a test's) packet leaving.
pub const KEPT_LOCAL_V6: &str = "fd00::/8";

/// What the plain HTTP server answers at `/`.
pub const HTTP_BODY: &str = "kubeunit simulated internet: plain HTTP\n";

/// A server of the simulated internet. Each has its own address in the slot's /28.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Site {
    /// HTTPS file server: the docroot (the stand-in for dl.k8s.io).
    Files,
    /// TLS registry: the stand-in for registry.k8s.io.
    Registry,
    /// TLS registry: the stand-in for docker.io.
    DockerHub,
    /// Plain HTTP, a fixed body: what a pod reaches.
    Http,
    /// DNS on port 53.
    Dns,
}

struct SiteRow {
    site: Site,
    /// Its address: the slot's network address plus this.
    offset: u8,
    /// DNS names in its certificate besides its address (never resolved: clients connect by address).
    names: &'static [&'static str],
    /// The port it listens on.
    port: u16,
}

/// Who answers where. Offset 1 is this host's end of the veth.
const SITES: &[SiteRow] = &[
    SiteRow {
        site: Site::Files,
        offset: 2,
        names: &["dl.k8s.io", "files.sim.test"],
        port: 443,
    },
    SiteRow {
        site: Site::Registry,
        offset: 3,
        names: &["registry.k8s.io", "registry.sim.test"],
        port: 443,
    },
    SiteRow {
        site: Site::DockerHub,
        offset: 4,
        names: &["docker.io", "registry-1.docker.io", "hub.sim.test"],
        port: 443,
    },
    SiteRow {
        site: Site::Http,
        offset: 5,
        names: &["http.sim.test"],
        port: 80,
    },
    SiteRow {
        site: Site::Dns,
        offset: 6,
        names: &["dns.sim.test"],
        port: 53,
    },
];

const HOST_OFFSET: u8 = 1;
/// The veth's end in the namespace.
const NS_LINK: &str = "inet0";
const LOCK_DIR: &str = "/tmp/kubeunit-it/inet";
/// How long a server may take to listen (python and Go start slowly on a busy 2-core machine).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// What the file server does for one path (`Internet::fault`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Serve it (undo an earlier fault).
    None,
    /// Accept the request and never answer.
    Hang,
    /// Headers with the full Content-Length, then half the body, then close.
    Truncate,
    /// Headers with the full Content-Length, then the body a byte every this many seconds.
    Trickle(u16),
    /// 404.
    NotFound,
    /// This status, no body of the file.
    Status(u16),
}

impl Fault {
    /// As sim_http.py reads it.
    fn word(self) -> Option<String> {
        match self {
            Fault::None => None,
            Fault::Hang => Some("hang".into()),
            Fault::Truncate => Some("truncate".into()),
            Fault::Trickle(every) => Some(format!("trickle:{every}")),
            Fault::NotFound => Some("status:404".into()),
            Fault::Status(s) => Some(format!("status:{s}")),
        }
    }
}

fn row(site: Site) -> &'static SiteRow {
    SITES
        .iter()
        .find(|r| r.site == site)
        .expect("every Site has a row in SITES")
}

/// Address `offset` of slot `slot`'s /28.
pub fn slot_addr(slot: u8, offset: u8) -> Ipv4Addr {
    assert!(slot <= 15 && offset <= 15);
    Ipv4Addr::new(198, 19, 255, 16 * slot + offset)
}

/// A slot, held (flock) across processes until dropped; checked against `SLOTS` first.
pub struct SlotLock {
    slot: u8,
    _file: File,
}

impl SlotLock {
    pub fn take(slot: u8) -> SlotLock {
        assert!(slot <= 15, "slot {slot}: 0..=15 (a /28 of {SIM_NET} each)");
        let (_, owner) = SLOTS
            .iter()
            .find(|(s, _)| *s == slot)
            .unwrap_or_else(|| panic!("slot {slot} is in no row of SLOTS (internet.rs): add one"));
        // libtest names a test's thread after the test when tests run in parallel ("main" otherwise).
        if let Some(name) = std::thread::current().name().filter(|n| *n != "main") {
            assert_eq!(
                name, *owner,
                "slot {slot} is {owner}'s (SLOTS in internet.rs)"
            );
        }
        let path = Path::new(LOCK_DIR).join(format!("{slot}.lock"));
        let file = super::lock_file(&path);
        // Another process's test of the same slot: wait for it.
        file.lock()
            .unwrap_or_else(|e| panic!("flock {}: {e}", path.display()));
        SlotLock { slot, _file: file }
    }

    pub fn slot(&self) -> u8 {
        self.slot
    }
}

/// One slot's simulated internet. Dropping it stops its servers and removes the namespace, the veth (and
/// with it the host's route to the /28), the counting rules and the work dir (kept when the test failed).
pub struct Internet {
    slot: u8,
    ns: String,
    work: PathBuf,
    servers: Mutex<BTreeMap<Site, Child>>,
    faults: Mutex<BTreeMap<String, Fault>>,
    counter: LeakCounter,
    _lock: SlotLock,
}

impl Internet {
    /// Set up slot `slot` (see `SLOTS`), after removing what a killed earlier run of it left.
    pub fn start(slot: u8) -> Internet {
        let lock = SlotLock::take(slot);
        keep_test_networks_local();
        remove_network(slot);
        let routes = routes_into(slot);
        assert!(
            routes.is_empty(),
            "this host routes into slot {slot}'s /28 already (not a simulated internet's): {routes:?}"
        );
        let work = Path::new(LOCK_DIR).join(slot.to_string());
        if work.exists() {
            std::fs::remove_dir_all(&work).unwrap();
        }
        for dir in ["tls", "docroot", "http-root", "logs"] {
            std::fs::create_dir_all(work.join(dir)).unwrap();
        }
        std::fs::write(work.join("http-root/index.html"), HTTP_BODY).unwrap();
        // Counting starts before anything of the slot exists.
        let counter = LeakCounter::new(slot);
        let inet = Internet {
            slot,
            ns: format!("ku-inet-{slot}"),
            work,
            servers: Mutex::new(BTreeMap::new()),
            faults: Mutex::new(BTreeMap::new()),
            counter,
            _lock: lock,
        };
        // From here a panic drops `inet`, which removes whatever was made.
        inet.link_up();
        issue_certificates(&inet.work.join("tls"), slot);
        inet
    }

    fn link_up(&self) {
        let (ns, host) = (&self.ns, &self.ns);
        // `ip netns exec` puts these over /etc/resolv.conf and /etc/hosts: a server that looks a name
        // up by mistake asks nobody (the namespace's loopback) instead of this host's resolver.
        let etc = netns_etc(self.slot);
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(
            etc.join("resolv.conf"),
            "# kubeunit's simulated internet (tests/it/common/internet.rs): no resolver\n\
             nameserver 127.0.0.1\noptions attempts:1 timeout:1\n",
        )
        .unwrap();
        std::fs::write(etc.join("hosts"), "127.0.0.1 localhost\n").unwrap();
        ip(&["netns", "add", ns]);
        ip(&[
            "link", "add", host, "type", "veth", "peer", "name", NS_LINK, "netns", ns,
        ]);
        ip(&[
            "addr",
            "add",
            &format!("{}/28", self.host_addr()),
            "dev",
            host,
        ]);
        ip(&["link", "set", host, "up"]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        for r in SITES {
            let addr = format!("{}/28", slot_addr(self.slot, r.offset));
            ip(&["-n", ns, "addr", "add", &addr, "dev", NS_LINK]);
        }
        ip(&["-n", ns, "link", "set", NS_LINK, "up"]);
        let host_addr = self.host_addr().to_string();
        ip(&["-n", ns, "route", "add", "default", "via", &host_addr]);
    }

    pub fn slot(&self) -> u8 {
        self.slot
    }

    /// The network namespace (`ku-inet-N`); also the name of the veth's end on this host.
    pub fn netns(&self) -> &str {
        &self.ns
    }

    /// This host's end of the veth: the source of what the host sends to the sites.
    pub fn host_addr(&self) -> Ipv4Addr {
        slot_addr(self.slot, HOST_OFFSET)
    }

    /// The address of `site` (it listens there once started).
    pub fn addr(&self, site: Site) -> Ipv4Addr {
        slot_addr(self.slot, row(site).offset)
    }

    /// Where logs, certificates, storage and the docroot are.
    pub fn work_dir(&self) -> &Path {
        &self.work
    }

    /// The test CA's certificate (PEM): every site's certificate is signed by it, nothing else is.
    pub fn ca_pem(&self) -> PathBuf {
        self.work.join("tls/ca.pem")
    }

    /// An HTTP(S) client that trusts the test CA only; statuses are responses, not errors.
    pub fn agent(&self, timeout: Duration) -> ureq::Agent {
        use ureq::tls::{Certificate, RootCerts, TlsConfig};
        let pem = std::fs::read(self.ca_pem()).unwrap();
        let ca = Certificate::from_pem(&pem).unwrap();
        ureq::Agent::config_builder()
            .tls_config(
                TlsConfig::builder()
                    .root_certs(RootCerts::Specific(Arc::new(vec![ca])))
                    .build(),
            )
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .new_agent()
    }

    /// The file server's docroot: a test puts files here, before or after `files_url`.
    pub fn docroot(&self) -> PathBuf {
        self.work.join("docroot")
    }

    /// `https://ADDR` of the file server (started on the first call).
    pub fn files_url(&self) -> String {
        self.serve_http(Site::Files, &self.docroot());
        format!("https://{}", self.addr(Site::Files))
    }

    /// Make the file server answer `path` (as requested, e.g. "/v1.36.3/bin/linux/amd64/kubelet") so,
    /// from the next request on.
    pub fn fault(&self, path: &str, fault: Fault) {
        assert!(
            path.starts_with('/') && !path.contains(['\t', '\n']),
            "{path:?}"
        );
        let mut faults = self.faults.lock().unwrap();
        match fault {
            Fault::None => faults.remove(path),
            f => faults.insert(path.to_string(), f),
        };
        let text: String = faults
            .iter()
            .filter_map(|(p, f)| f.word().map(|w| format!("{p}\t{w}\n")))
            .collect();
        // Whole or not at all: the server reads it at any moment.
        let tmp = self.work.join("faults.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.faults_file()).unwrap();
    }

    fn faults_file(&self) -> PathBuf {
        self.work.join("faults")
    }

    /// The paths the file server was asked for, in order.
    pub fn file_requests(&self) -> Vec<String> {
        self.requests(Site::Files)
    }

    /// `http://ADDR/` of the plain HTTP server (started on the first call); `/` answers `HTTP_BODY`.
    pub fn http(&self) -> String {
        self.serve_http(Site::Http, &self.work.join("http-root"));
        format!("http://{}/", self.addr(Site::Http))
    }

    pub fn http_requests(&self) -> Vec<String> {
        self.requests(Site::Http)
    }

    fn serve_http(&self, site: Site, docroot: &Path) {
        let r = row(site);
        let mut argv: Vec<OsString> = vec![
            "/usr/bin/python3".into(),
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/it/common/sim_http.py")
                .into(),
            "--addr".into(),
            self.addr(site).to_string().into(),
            "--port".into(),
            r.port.to_string().into(),
            "--docroot".into(),
            docroot.into(),
            "--log".into(),
            self.request_log(site).into(),
        ];
        // The faults are the file server's; the plain server reads a file never written.
        argv.push("--faults".into());
        argv.push(match site {
            Site::Files => self.faults_file().into(),
            _ => self.work.join("no-faults").into(),
        });
        if r.port == 443 {
            let (cert, key) = self.cert(site);
            argv.extend(["--cert".into(), cert.into(), "--key".into(), key.into()]);
        }
        self.serve(site, &argv, &[], None);
    }

    /// Start a TLS registry (distribution, the pinned `registry`) as registry.k8s.io's stand-in, with
    /// htpasswd basic auth for `auth` (user, password); `HOST:PORT`.
    pub fn registry(&self, auth: Option<(&str, &str)>) -> String {
        self.registry_on(Site::Registry, auth)
    }

    /// A TLS registry at `site` (`Registry` or `DockerHub`), storage under the work dir; `HOST:PORT`.
    pub fn registry_on(&self, site: Site, auth: Option<(&str, &str)>) -> String {
        assert!(
            matches!(site, Site::Registry | Site::DockerHub),
            "{site:?} is no registry"
        );
        let name = format!("{site:?}").to_lowercase();
        let addr = format!("{}:{}", self.addr(site), row(site).port);
        let (cert, key) = self.cert(site);
        let q = |p: &Path| serde_json::to_string(&p.to_string_lossy()).unwrap();
        let mut config = format!(
            "version: 0.1\n\
             log:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: false\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             \x20 maintenance:\n    uploadpurging:\n      enabled: false\n\
             validation:\n  manifests:\n    indexes:\n      platforms: none\n\
             http:\n  addr: {addr}\n  tls:\n    certificate: {}\n    key: {}\n",
            q(&self.work.join(format!("storage-{name}"))),
            q(&cert),
            q(&key),
        );
        if let Some((user, password)) = auth {
            assert!(!user.is_empty() && !user.contains([':', '\n']), "{user:?}");
            let htpasswd = self.work.join(format!("htpasswd-{name}"));
            let hash = bcrypt::hash(password, 4).unwrap();
            std::fs::write(&htpasswd, format!("{user}:{hash}\n")).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: kubeunit-sim\n    path: {}\n",
                q(&htpasswd)
            ));
        }
        let config_path = self.work.join(format!("registry-{name}.yml"));
        std::fs::write(&config_path, config).unwrap();
        let argv: Vec<OsString> = vec![
            built_dir("registry-").join("registry").into(),
            "serve".into(),
            config_path.into(),
        ];
        // No tracing exporter (it would dial a collector), as the node's registry has it.
        self.serve(site, &argv, &[("OTEL_TRACES_EXPORTER", "none")], None);
        addr
    }

    /// The paths registry.k8s.io's stand-in was asked for, in order (from its access log).
    pub fn registry_requests(&self) -> Vec<String> {
        self.requests(Site::Registry)
    }

    /// Start the DNS server (the pinned CoreDNS, port 53) answering each `(name, address)` with an A
    /// record, another name of the same reserved top-level domain with NXDOMAIN and any other name with
    /// REFUSED: it forwards nothing. Its address.
    pub fn dns(&self, names: &[(&str, Ipv4Addr)]) -> Ipv4Addr {
        let addr = self.addr(Site::Dns);
        let corefile = dns::corefile(&self.work, addr, names);
        let conf = self.work.join("Corefile");
        std::fs::write(&conf, corefile).unwrap();
        let argv: Vec<OsString> = vec![
            built_dir("coredns-").join("coredns").into(),
            "-conf".into(),
            conf.into(),
        ];
        self.serve(Site::Dns, &argv, &[], Some(&self.work));
        addr
    }

    /// The names the DNS server was asked (without the final dot), from its `log` plugin: in order
    /// within a zone, not across zones.
    pub fn dns_queries(&self) -> Vec<String> {
        self.requests(Site::Dns)
    }

    /// What `site` was asked, in order: request paths of the web servers and registries, query names of
    /// the DNS server. Empty when it never started.
    pub fn requests(&self, site: Site) -> Vec<String> {
        let log = std::fs::read_to_string(self.request_log(site)).unwrap_or_default();
        log.lines()
            .filter_map(|l| match site {
                Site::Files | Site::Http => l.split(' ').nth(1).map(String::from),
                Site::Registry | Site::DockerHub => access_log_path(l),
                Site::Dns => dns_log_name(l),
            })
            .collect()
    }

    /// Packets of the test ranges that left through the host's default-route interface since `start`.
    pub fn packets_out(&self) -> u64 {
        self.counter.packets_out()
    }

    /// Fail unless `packets_out` is 0, naming the rules that counted and this host's TCP connections to
    /// the test ranges (with their processes) when it is not.
    pub fn assert_no_leak(&self) {
        self.counter.assert_none();
    }

    /// The counter itself (its rules' counts).
    pub fn counter(&self) -> &LeakCounter {
        &self.counter
    }

    /// Stop `site`'s server (the upstream goes away; its address stays, refusing connections).
    pub fn stop(&self, site: Site) {
        let child = self.servers.lock().unwrap().remove(&site);
        if let Some(mut child) = child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The PIDs of the running servers.
    pub fn server_pids(&self) -> Vec<u32> {
        self.servers
            .lock()
            .unwrap()
            .values()
            .map(|c| c.id())
            .collect()
    }

    fn request_log(&self, site: Site) -> PathBuf {
        self.work.join(format!("logs/{site:?}.log").to_lowercase())
    }

    fn cert(&self, site: Site) -> (PathBuf, PathBuf) {
        let base = self
            .work
            .join("tls")
            .join(format!("{site:?}").to_lowercase());
        (base.with_extension("pem"), base.with_extension("key"))
    }

    /// Run `argv` in the namespace as `site`'s server: stdout to its request log (where the registry and
    /// CoreDNS write theirs; sim_http.py writes its own), stderr to `logs/SITE.err`. Returns once it
    /// listens on its port.
    fn serve(&self, site: Site, argv: &[OsString], env: &[(&str, &str)], cwd: Option<&Path>) {
        let mut servers = self.servers.lock().unwrap();
        // Started once: a later call (another `files_url()`) finds it running.
        if servers.contains_key(&site) {
            return;
        }
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.request_log(site))
            .unwrap();
        let err_path = self.request_log(site).with_extension("err");
        let err = File::create(&err_path).unwrap();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns])
            .args(argv)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        // `ip netns exec` execs the server (no fork): it is this child, and dies with the test's thread
        // even when the test process is killed.
        // SAFETY: prctl only, between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("ip netns exec {argv:?}: {e}"));
        let at = SocketAddr::from((self.addr(site), row(site).port));
        let deadline = Instant::now() + START_TIMEOUT;
        // CoreDNS's TCP listener comes up with its UDP one: a connect asks it nothing it would log.
        while TcpStream::connect_timeout(&at, Duration::from_millis(500)).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                let log = std::fs::read_to_string(&err_path).unwrap_or_default();
                panic!(
                    "{site:?} server {argv:?} exited ({status}) before listening on {at}:\n{log}"
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(&err_path).unwrap_or_default();
                panic!("{site:?} server {argv:?} not listening on {at} after {START_TIMEOUT:?}:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        servers.insert(site, child);
    }
}

impl Drop for Internet {
    fn drop(&mut self) {
        // This host's TCP connections to the slot (a test's client, a node's containerd: all from the
        // veth's host end), reset while the veth still carries the resets: closed later, they would
        // send to addresses no longer here. Nothing else matches: no other socket has that source.
        let host = self.host_addr().to_string();
        let slot_net = format!("{}/28", slot_addr(self.slot, 0));
        let _ = Command::new("ss")
            .args(["-K", "-t", "-n", "src", &host, "dst", &slot_net])
            .output();
        let servers = std::mem::take(&mut *self.servers.lock().unwrap_or_else(|e| e.into_inner()));
        for (_, mut child) in servers {
            let _ = child.kill();
            let _ = child.wait();
        }
        // From here scripts/lib.sh's reject route refuses the slot's addresses.
        remove_network(self.slot);
        if std::thread::panicking() {
            eprintln!(
                "simulated internet {}: work dir kept in {}",
                self.slot,
                self.work.display()
            );
        } else if let Err(e) = std::fs::remove_dir_all(&self.work) {
            eprintln!("{}: {e}", self.work.display());
        }
        // Then the fields: the counter's rules go, the slot's lock last.
    }
}

/// The registry's access log (combined format): `... "GET /v2/ HTTP/1.1" 401 ...` -> "/v2/".
fn access_log_path(line: &str) -> Option<String> {
    let request = line.split('"').nth(1)?;
    let mut words = request.split(' ');
    let method = words.next()?;
    let path = words.next()?;
    let proto = words.next()?;
    (method.chars().all(|c| c.is_ascii_uppercase()) && proto.starts_with("HTTP/"))
        .then(|| path.to_string())
}

/// CoreDNS's `log` line: `[INFO] 198.19.255.1:4242 - 7 "A IN web.sim.test. udp ..." NOERROR ...` ->
/// "web.sim.test".
fn dns_log_name(line: &str) -> Option<String> {
    let query = line.split('"').nth(1)?;
    let name = query.split(' ').nth(2)?;
    Some(name.trim_end_matches('.').to_string())
}

fn ip_output(args: &[&str]) -> Output {
    Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip (iproute2): {e}"))
}

fn ip(args: &[&str]) {
    let o = ip_output(args);
    assert!(o.status.success(), "ip {args:?}: {}", text(&o));
}

/// scripts/lib.sh `keep_test_networks_local`: the lowest-priority reject routes for the test ranges
/// (`SIM_NET` among them), which scripts/test.sh adds, for a run of the tests without it. With no slot
/// up, a packet for a slot's address is refused here instead of following the default route.
fn keep_test_networks_local() {
    let lib = super::script("lib.sh");
    let o = Command::new("bash")
        .arg("-c")
        .arg(r#". "$1" && keep_test_networks_local"#)
        .arg("bash")
        .arg(&lib)
        .output()
        .unwrap_or_else(|e| panic!("bash {}: {e}", lib.display()));
    assert!(o.status.success(), "keep_test_networks_local: {}", text(&o));
}

/// The routes of this host into slot `slot`'s /28 other than the reject routes: someone else's.
fn routes_into(slot: u8) -> Vec<String> {
    let net: ipnet::Ipv4Net = format!("{}/28", slot_addr(slot, 0)).parse().unwrap();
    let o = ip_output(&["-4", "route", "show", "table", "all"]);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.starts_with("unreachable ") && !l.starts_with("broadcast "))
        .filter(|l| {
            let dest = l.split_whitespace().next().unwrap_or("");
            let dest = if dest.starts_with("local") {
                l.split_whitespace().nth(1).unwrap_or("")
            } else {
                dest
            };
            let dest: Option<ipnet::Ipv4Net> = dest
                .parse()
                .ok()
                .or_else(|| dest.parse::<Ipv4Addr>().ok().map(ipnet::Ipv4Net::from));
            dest.is_some_and(|d| d.prefix_len() > 0 && (net.contains(&d) || d.contains(&net)))
        })
        .map(String::from)
        .collect()
}

/// Remove slot `slot`'s namespace (after killing what runs in it) and veth; nothing when absent.
fn remove_network(slot: u8) {
    let ns = format!("ku-inet-{slot}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids: Vec<i32> = String::from_utf8_lossy(&ip_output(&["netns", "pids", &ns]).stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() || Instant::now() > deadline {
            break;
        }
        for pid in pids {
            // SAFETY: a signal to a process in this test's own namespace (a server of a killed run).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The veth's host end: the pair, and with it the host's route to the /28, goes.
    if ip_output(&["link", "show", &ns]).status.success() {
        let _ = ip_output(&["link", "del", &ns]);
    }
    if Path::new("/run/netns").join(&ns).exists() {
        let _ = ip_output(&["netns", "del", &ns]);
    }
    let etc = netns_etc(slot);
    if etc.exists() {
        if let Err(e) = std::fs::remove_dir_all(&etc) {
            eprintln!("{}: {e}", etc.display());
        }
    }
}

/// The namespace's own /etc files (`ip netns exec` mounts them over /etc's).
fn netns_etc(slot: u8) -> PathBuf {
    PathBuf::from(format!("/etc/netns/ku-inet-{slot}"))
}

/// What of slot `slot` is on this host: its namespace, veth or counting chain (none after a drop).
pub fn leftovers(slot: u8) -> Vec<String> {
    let ns = format!("ku-inet-{slot}");
    let mut out = Vec::new();
    if Path::new("/run/netns").join(&ns).exists() {
        out.push(format!("netns {ns}"));
    }
    if ip_output(&["link", "show", &ns]).status.success() {
        out.push(format!("link {ns}"));
    }
    if netns_etc(slot).exists() {
        out.push(netns_etc(slot).display().to_string());
    }
    out.extend(leak::chain_listed(&format!("KU-INET-LEAK-{slot}")));
    out
}

/// Write `bytes` to a file `name` under the docroot (directories made), for the file server.
pub fn put_file(docroot: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = docroot.join(name.trim_start_matches('/'));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut f = File::create(&path).unwrap();
    f.write_all(bytes).unwrap();
    path
}

/// Push the one-layer docker archive `archive` (scripts/docker-archive.py) to the registry at
/// `HOST:PORT` as `repo:tag` over distribution's HTTP API (an OCI manifest, its layer
/// uncompressed), with basic auth when given.
pub fn push_archive(
    agent: &ureq::Agent,
    registry: &str,
    repo: &str,
    tag: &str,
    archive: &Path,
    auth: Option<(&str, &str)>,
) {
    use base64::Engine;
    use sha2::Digest;
    use std::io::Read;
    let mut members = std::collections::BTreeMap::new();
    let mut tar = tar::Archive::new(std::fs::File::open(archive).unwrap());
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        e.read_to_end(&mut bytes).unwrap();
        members.insert(name, bytes);
    }
    let manifest: serde_json::Value = serde_json::from_slice(&members["manifest.json"]).unwrap();
    let config = &members[manifest[0]["Config"].as_str().unwrap()];
    let layer = &members[manifest[0]["Layers"][0].as_str().unwrap()];
    let header = auth.map(|(u, p)| {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        format!("Basic {token}")
    });
    let with_auth = |mut r: ureq::RequestBuilder<_>| {
        if let Some(h) = &header {
            r = r.header("Authorization", h);
        }
        r
    };
    let digest = |b: &[u8]| format!("sha256:{}", hex::encode(sha2::Sha256::digest(b)));
    let base = format!("https://{registry}");
    for blob in [config, layer] {
        let resp = with_auth(agent.post(format!("{base}/v2/{repo}/blobs/uploads/")))
            .send_empty()
            .unwrap();
        assert_eq!(resp.status(), 202, "start an upload to {registry}");
        let location = resp.headers()["location"].to_str().unwrap().to_string();
        let location = match location.starts_with('/') {
            true => format!("{base}{location}"),
            false => location,
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let resp = with_auth(agent.put(format!("{location}{sep}digest={}", digest(blob))))
            .header("Content-Type", "application/octet-stream")
            .send(&blob[..])
            .unwrap();
        assert_eq!(resp.status(), 201, "upload to {registry}");
    }
    let body = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": digest(config),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": digest(layer),
            "size": layer.len(),
        }],
    })
    .to_string();
    let resp = with_auth(agent.put(format!("{base}/v2/{repo}/manifests/{tag}")))
        .header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        .send(body.as_bytes())
        .unwrap();
    assert_eq!(resp.status(), 201, "push the manifest to {registry}");
}
