//! The simulated internet (`common::internet`) that connected features are tested against: its HTTPS
//! file server is trusted through the test CA only and injects the faults a test sets, its registries
//! answer over TLS with and without basic auth, its DNS server answers the given names and no other, every
//! server logs what it was asked, its addresses are reached through its veth and never the default route
//! (during or after), the leak counter counts what it should and reads 0 through all of this, and a
//! dropped `Internet` leaves nothing behind.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;

use crate::common::internet::{
    default_route_interfaces, leftovers, put_file, query_a, slot_addr, Fault, Internet,
    LeakCounter, Site, HTTP_BODY, KEPT_LOCAL, SIM_NET, SLOTS,
};
use crate::common::*;

const SOON: Duration = Duration::from_secs(10);

/// GET `url`: status and body (what arrived before an error).
fn get(agent: &ureq::Agent, url: &str) -> (u16, Vec<u8>) {
    let resp = agent
        .get(url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = resp.status().as_u16();
    let mut body = Vec::new();
    let _ = resp.into_body().into_reader().read_to_end(&mut body);
    (status, body)
}

/// A client with the default (public) roots, which do not include the test CA.
fn public_roots_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(SOON))
        .build()
        .new_agent()
}

fn assert_untrusted(err: ureq::Error) {
    assert!(
        err.to_string()
            .contains("invalid peer certificate: UnknownIssuer"),
        "want a certificate of an unknown issuer refused, got: {err}"
    );
}

#[test]
fn slots_are_one_per_test() {
    let mut slots: Vec<u8> = SLOTS.iter().map(|(s, _)| *s).collect();
    let mut tests: Vec<&str> = SLOTS.iter().map(|(_, t)| *t).collect();
    slots.sort();
    slots.dedup();
    tests.sort();
    tests.dedup();
    assert_eq!(slots.len(), SLOTS.len(), "a slot in two rows: {SLOTS:?}");
    assert_eq!(tests.len(), SLOTS.len(), "a test in two rows: {SLOTS:?}");
    assert!(slots.iter().all(|s| *s <= 15), "{slots:?}");
}

#[test]
fn the_simulated_internet_is_the_range_no_node_link_picks() {
    let sim: ipnet::Ipv4Net = SIM_NET.parse().unwrap();
    for slot in 0..=15u8 {
        for offset in 0..=15u8 {
            assert!(sim.contains(&slot_addr(slot, offset)), "{slot}/{offset}");
        }
    }
    assert_eq!(slot_addr(6, 2), Ipv4Addr::new(198, 19, 255, 98));
    // Never TEST-NET-3: this workplace reaches its package registries there.
    let test_net_3: ipnet::Ipv4Net = "203.0.113.0/24".parse().unwrap();
    assert!(!test_net_3.contains(&sim.network()));
    // scripts/lib.sh rejects what must stay here, as scripts/test-networks.py finds it in the tests:
    // SIM_NET and every range of KEPT_LOCAL are within what it prints, and nothing of TEST-NET-3 is.
    let out = run(Command::new("python3").arg(script("test-networks.py")));
    assert!(out.status.success(), "test-networks.py: {}", text(&out));
    let kept: Vec<ipnet::IpNet> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let covered = |net: ipnet::Ipv4Net| {
        kept.iter().any(|k| match k {
            ipnet::IpNet::V4(k) => k.contains(&net),
            ipnet::IpNet::V6(_) => false,
        })
    };
    for net in KEPT_LOCAL.iter().chain([&SIM_NET]) {
        let net: ipnet::Ipv4Net = net.parse().unwrap();
        assert!(covered(net), "test-networks.py lacks {net}: {kept:?}");
    }
    assert!(
        !kept.iter().any(|k| match k {
            ipnet::IpNet::V4(k) =>
                k.contains(&test_net_3.network()) || test_net_3.contains(&k.network()),
            ipnet::IpNet::V6(_) => false,
        }),
        "{kept:?}"
    );
}

#[test]
fn files_are_served_over_https_trusting_the_test_ca_only() {
    let inet = Internet::start(0);
    let body = b"a kubelet, simulated\n".repeat(1000);
    put_file(&inet.docroot(), "/v1.36.3/bin/linux/amd64/kubelet", &body);
    let url = format!("{}/v1.36.3/bin/linux/amd64/kubelet", inet.files_url());
    assert!(url.starts_with("https://198.19.255."), "{url}");

    let (status, got) = get(&inet.agent(SOON), &url);
    assert_eq!(status, 200);
    assert!(got == body, "{} bytes of {}", got.len(), body.len());
    assert_eq!(inet.file_requests(), ["/v1.36.3/bin/linux/amd64/kubelet"]);

    // The same GET with the usual roots: the handshake fails, and no request reaches the server.
    assert_untrusted(public_roots_agent().get(&url).call().unwrap_err());
    assert_eq!(inet.file_requests().len(), 1, "{:?}", inet.file_requests());

    // The plain HTTP server a pod reaches.
    let (status, got) = get(&inet.agent(SOON), &inet.http());
    assert_eq!(
        (status, String::from_utf8_lossy(&got)),
        (200, HTTP_BODY.into())
    );
    assert_eq!(inet.http_requests(), ["/"]);
    inet.assert_no_leak();
}

#[test]
fn file_faults_hang_truncate_and_fail() {
    let inet = Internet::start(1);
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    for name in ["hang", "truncate", "missing", "broken", "fine"] {
        put_file(&inet.docroot(), name, &body);
    }
    let base = inet.files_url();
    inet.fault("/hang", Fault::Hang);
    inet.fault("/truncate", Fault::Truncate);
    inet.fault("/missing", Fault::NotFound);
    inet.fault("/broken", Fault::Status(500));
    let timeout = Duration::from_secs(3);
    let agent = inet.agent(timeout);

    // Hang: the client's timeout fires, not the server's answer.
    let t = Instant::now();
    let err = agent.get(&format!("{base}/hang")).call().unwrap_err();
    assert!(matches!(err, ureq::Error::Timeout(_)), "{err}");
    assert!(t.elapsed() >= timeout, "{:?}", t.elapsed());

    // Truncate: the full Content-Length, then fewer bytes (the first ones).
    let resp = agent.get(&format!("{base}/truncate")).call().unwrap();
    assert_eq!(resp.status(), 200);
    let length: usize = resp.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(length, body.len());
    let mut got = Vec::new();
    let mut reader = resp.into_body().into_reader();
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    assert!(got.len() < length, "{} of {length} bytes", got.len());
    assert!(body.starts_with(&got));

    // NotFound and Status, though the files are there; Fault::None serves them again.
    assert_eq!(get(&agent, &format!("{base}/missing")).0, 404);
    assert_eq!(get(&agent, &format!("{base}/broken")).0, 500);
    assert_eq!(get(&agent, &format!("{base}/fine")), (200, body.clone()));
    inet.fault("/missing", Fault::None);
    assert_eq!(get(&agent, &format!("{base}/missing")), (200, body));

    assert_eq!(
        inet.file_requests(),
        [
            "/hang",
            "/truncate",
            "/missing",
            "/broken",
            "/fine",
            "/missing"
        ]
    );
    inet.assert_no_leak();
}

#[test]
fn the_registry_answers_over_tls_with_and_without_auth() {
    let inet = Internet::start(2);
    let agent = inet.agent(SOON);
    let open = inet.registry_on(Site::DockerHub, None);
    assert_eq!(open, format!("{}:443", inet.addr(Site::DockerHub)));
    assert_eq!(get(&agent, &format!("https://{open}/v2/")).0, 200);

    let locked = inet.registry(Some(("sim-user", "sim-password")));
    let v2 = format!("https://{locked}/v2/");
    let resp = agent.get(&v2).call().unwrap();
    assert_eq!(resp.status(), 401);
    let challenge = resp.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.starts_with("Basic "), "{challenge}");
    let basic = |user: &str, password: &str| {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        agent
            .get(&v2)
            .header("Authorization", format!("Basic {token}"))
            .call()
            .unwrap()
            .status()
    };
    assert_eq!(basic("sim-user", "sim-password"), 200);
    assert_eq!(basic("sim-user", "another"), 401);
    assert_untrusted(public_roots_agent().get(&v2).call().unwrap_err());

    // Each registry logs what it was asked (after answering: poll).
    wait_for("the registries' access logs", SOON, || {
        inet.registry_requests().len() == 3 && inet.requests(Site::DockerHub).len() == 1
    });
    assert_eq!(inet.registry_requests(), ["/v2/", "/v2/", "/v2/"]);
    assert_eq!(inet.requests(Site::DockerHub), ["/v2/"]);
    inet.assert_no_leak();
}

#[test]
fn dns_answers_the_given_names_and_logs_them() {
    let inet = Internet::start(3);
    let web = inet.addr(Site::Http);
    let files = inet.addr(Site::Files);
    let server = inet.dns(&[("web.sim.test", web), ("dl.sim.example", files)]);
    assert_eq!(server, inet.addr(Site::Dns));

    assert_eq!(query_a(server, "web.sim.test", SOON), Ok((0, vec![web])));
    assert_eq!(
        query_a(server, "dl.sim.example", SOON),
        Ok((0, vec![files]))
    );
    // Another name: NXDOMAIN (3) in a zone it has, REFUSED (5) elsewhere; nothing is forwarded.
    assert_eq!(query_a(server, "absent.sim.test", SOON), Ok((3, vec![])));
    assert_eq!(query_a(server, "elsewhere.invalid", SOON), Ok((5, vec![])));

    wait_for("CoreDNS's query log", SOON, || {
        inet.dns_queries().len() == 4
    });
    // In order within a zone only.
    let mut asked = inet.dns_queries();
    asked.sort();
    assert_eq!(
        asked,
        [
            "absent.sim.test",
            "dl.sim.example",
            "elsewhere.invalid",
            "web.sim.test"
        ]
    );
    inet.assert_no_leak();
}

/// `ip route get ADDR`: (succeeded, output).
fn route_get(addr: Ipv4Addr) -> (bool, String) {
    let o = run(Command::new("ip").args(["route", "get", &addr.to_string()]));
    (o.status.success(), text(&o))
}

#[test]
fn routes_go_through_the_veth_and_nothing_is_left_after_drop() {
    let sites = [
        Site::Files,
        Site::Registry,
        Site::DockerHub,
        Site::Http,
        Site::Dns,
    ];
    let defaults = default_route_interfaces();
    let via_default = |out: &str| defaults.iter().any(|d| out.contains(&format!("dev {d} ")));
    let inet = Internet::start(4);
    inet.files_url();
    inet.http();
    inet.registry(None);
    inet.registry_on(Site::DockerHub, Some(("u", "p")));
    inet.dns(&[("web.sim.test", inet.addr(Site::Http))]);
    let pids = inet.server_pids();
    assert_eq!(pids.len(), sites.len());
    let work = inet.work_dir().to_path_buf();
    for site in sites {
        let (ok, out) = route_get(inet.addr(site));
        assert!(ok, "{out}");
        assert!(out.contains("dev ku-inet-4 "), "{site:?}: {out}");
        assert!(out.contains(&format!("src {} ", inet.host_addr())), "{out}");
        assert!(!via_default(&out), "{site:?} by the default route: {out}");
    }
    // The namespace's only way out is this host.
    let o = run(Command::new("ip").args(["-n", "ku-inet-4", "-4", "route", "show"]));
    let routes = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        routes.lines().next().map(str::trim),
        Some(format!("default via {} dev inet0", inet.host_addr()).as_str()),
        "{routes}"
    );
    assert_eq!(routes.lines().count(), 2, "{routes}");
    inet.assert_no_leak();
    assert!(leftovers(4).len() >= 3, "{:?}", leftovers(4));
    // A connection still open at the drop is reset by it, not left to send to addresses gone.
    let mut open = TcpStream::connect((inet.addr(Site::Http), 80)).unwrap();
    let slot_net = format!("{}/28", slot_addr(4, 0));
    let sockets = || {
        let o = run(Command::new("ss").args(["-tanH", "dst", &slot_net]));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.starts_with("TIME-WAIT"))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(sockets().len(), 1, "{:?}", sockets());

    drop(inet);
    assert_eq!(leftovers(4), Vec::<String>::new());
    assert_eq!(sockets(), Vec::<String>::new());
    let mut buf = [0u8; 1];
    assert!(
        open.read(&mut buf).is_err() || open.write_all(b"GET / HTTP/1.0\r\n\r\n").is_err(),
        "the connection outlived the drop"
    );
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "server {pid} still runs"
        );
    }
    assert!(!work.exists(), "{} left", work.display());
    // With the veth gone, the reject route answers, not the default route.
    for offset in [1, 2, 6, 14] {
        let (ok, out) = route_get(slot_addr(4, offset));
        assert!(
            !ok && !via_default(&out) && !out.contains("ku-inet-4"),
            "after the drop: {out}(is `unreachable 198.18.0.0/15` gone? scripts/lib.sh \
             keep_test_networks_local adds it)"
        );
    }
}

/// An IPv4 address of this host outside the ranges the counter watches.
fn uncounted_local_address() -> Ipv4Addr {
    let nets: Vec<ipnet::Ipv4Net> = KEPT_LOCAL.iter().map(|n| n.parse().unwrap()).collect();
    let o = run(Command::new("ip").args(["-4", "-o", "addr", "show", "scope", "global"]));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let i = w.iter().position(|x| *x == "inet")?;
            w.get(i + 1)?.split('/').next()?.parse::<Ipv4Addr>().ok()
        })
        .find(|a| !nets.iter().any(|n| n.contains(a)))
        .expect("an IPv4 address of this host outside the test ranges")
}

#[test]
fn the_leak_counter_counts_packets_out_of_its_interface() {
    // The counter's rules on a test internet's veth: what it counts there stays on this host (a packet
    // counted on the default interface would have left it).
    let inet = Internet::start(6);
    let counter = LeakCounter::on_interfaces("6-veth", &[inet.netns().to_string()], &[]);
    let count = |rule: &str| {
        counter
            .counts()
            .iter()
            .find(|(r, _)| r == rule)
            .unwrap_or_else(|| panic!("no rule {rule}: {:?}", counter.counts()))
            .1
    };
    assert_eq!(counter.packets_out(), 0);
    let to = (inet.addr(Site::Http), 9);

    // From the veth's host end: a source in the simulated internet.
    let from_sim = UdpSocket::bind((inet.host_addr(), 0)).unwrap();
    from_sim.send_to(b"counted", to).unwrap();
    wait_for(
        "the packet from the simulated internet counted",
        SOON,
        || count("iptables -s 198.18.0.0/15") == 1,
    );
    // From this host's own address: the destination counts.
    let from_host = UdpSocket::bind((uncounted_local_address(), 0)).unwrap();
    from_host.send_to(b"counted", to).unwrap();
    wait_for("the packet to the simulated internet counted", SOON, || {
        count("iptables -d 198.18.0.0/15") == 1
    });
    // Once each; loopback is nobody's leak.
    let lo = UdpSocket::bind("127.0.0.1:0").unwrap();
    lo.send_to(b"not counted", "127.0.0.1:9").unwrap();
    assert_eq!(counter.packets_out(), 2, "{:?}", counter.counts());
    // None of it went out the default interface.
    inet.assert_no_leak();

    drop(counter);
    let o = run(Command::new("iptables").args(["-t", "mangle", "-S"]));
    assert!(
        !text(&o).contains("KU-INET-LEAK-6-veth"),
        "the counter's rules stayed:\n{}",
        text(&o)
    );
}
