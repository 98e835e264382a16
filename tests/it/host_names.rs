//! `hosts[].address` given as DNS names, which `gen` resolves through the system's resolver
//! (getaddrinfo): here the simulated internet's DNS server (`common::internet`). gen runs in a
//! mount namespace of its own, over whose /etc/resolv.conf, /etc/hosts and /etc/nsswitch.conf the
//! test's are bound (files, then that server alone). Every name is under `.test`, which the server
//! answers from its own table and forwards nothing; no packet leaves this host (its leak counter).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::internet::{Internet, Site};
use crate::common::*;

/// The simulated internet's slot (`SLOTS`).
const SLOT: u8 = 15;

/// `ha`'s hosts, at addresses of TEST-NET-2 (no packet goes there: gen only renders them).
const HOSTS: [(&str, &str); 5] = [
    ("cp-1", "198.51.100.11"),
    ("cp-2", "198.51.100.12"),
    ("cp-3", "198.51.100.13"),
    ("worker-1", "198.51.100.21"),
    ("worker-2", "198.51.100.22"),
];
const POOL: &str = "198.51.100.240/28";
const NETWORK: &str = "198.51.100.0/24";

/// `records` as `Internet::dns` takes them.
fn refs(records: &[(String, Ipv4Addr)]) -> Vec<(&str, Ipv4Addr)> {
    records.iter().map(|(n, a)| (n.as_str(), *a)).collect()
}

/// The name a host has in the test's DNS.
fn name_of(host: &str) -> String {
    format!("{host}.hosts.test")
}

/// A profile extending `ha` with its hosts at `address(host, its address)`, written to `dir/file`.
fn profile(dir: &Path, file: &str, address: impl Fn(&str, &str) -> String) -> PathBuf {
    let hosts: Vec<String> = HOSTS
        .iter()
        .map(|(host, a)| {
            let roles = match host.starts_with("cp-") {
                true => "[etcd, control-plane]",
                false => "[worker]",
            };
            format!(
                "  - {{name: {host}, address: {:?}, roles: {roles}}}",
                address(host, a)
            )
        })
        .collect();
    let path = dir.join(file);
    let text = format!(
        "extends: ha\naddons:\n  loadBalancerPool: {POOL}\nhosts:\n{}\n",
        hosts.join("\n")
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The first line of the test's resolv.conf: the sandbox checks it is the one gen sees.
const MARK: &str = "# kubeunit test host_names: the simulated internet's DNS server alone";

/// The resolver's files gen sees, in `dir/etc`: resolv.conf naming `dns` alone, /etc/hosts with
/// `hosts` (lines of its own), nsswitch.conf's files then dns.
fn resolver_etc(dir: &Path, dns: Ipv4Addr, hosts: &str) -> PathBuf {
    let etc = dir.join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let resolv = format!("{MARK}\nnameserver {dns}\noptions attempts:1 timeout:2\n");
    std::fs::write(etc.join("resolv.conf"), resolv).unwrap();
    std::fs::write(etc.join("hosts"), format!("127.0.0.1 localhost\n{hosts}")).unwrap();
    std::fs::write(etc.join("nsswitch.conf"), "hosts: files dns\n").unwrap();
    etc
}

/// The sandbox: `etc`'s files bound over /etc's (or nothing runs), then the command.
const SANDBOX: &str = r#"set -e
etc=$1; shift
for f in resolv.conf hosts nsswitch.conf; do mount --bind "$etc/$f" "/etc/$f"; done
head -n 1 /etc/resolv.conf | grep -qx "$MARK" || { echo "sandbox: /etc/resolv.conf is not the test's" >&2; exit 97; }
exec "$@""#;

/// `kubeunit ARGS` (with `common::kubeunit`'s environment) in a mount namespace of its own whose
/// resolver reads `etc`'s files.
fn kubeunit_resolving(etc: &Path, args: &[&str]) -> Output {
    let k = kubeunit();
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c", SANDBOX])
        .arg("sandbox")
        .arg(etc)
        .arg(k.get_program())
        .args(args)
        .env("MARK", MARK);
    for (key, value) in k.get_envs() {
        match value {
            Some(v) => c.env(key, v),
            None => c.env_remove(key),
        };
    }
    run(&mut c)
}

/// Every file and directory below `dir`: its path there, its bytes and mode.
fn files(dir: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    snapshot(dir)
        .into_iter()
        .map(|(p, (bytes, mode, _))| (p.to_string_lossy().into_owned(), (bytes, mode)))
        .collect()
}

/// Host `host`'s dir rendered from names (`named`) against the one rendered from the addresses
/// (`literal`, the same seed): the same files, byte for byte, but the manifest (digests),
/// profile.yaml (each name kept, with what it resolved to) and the certificates that name the
/// host's address, which name its DNS name too. Returns those certificates.
fn same_but_the_names(named: &Path, literal: &Path, host: &str) -> Vec<String> {
    let (named, literal) = (files(named), files(literal));
    assert_eq!(
        named.keys().collect::<Vec<_>>(),
        literal.keys().collect::<Vec<_>>(),
        "{host}"
    );
    let address = HOSTS.iter().find(|(h, _)| *h == host).unwrap().1;
    let mut with_name = Vec::new();
    for (rel, (bytes, mode)) in &literal {
        let (theirs, their_mode) = &named[rel];
        assert_eq!(mode, their_mode, "{host}: {rel}");
        if rel == "manifest.json" {
            continue;
        }
        if rel == "profile.yaml" {
            let yaml = |b: &[u8]| -> serde_yaml_ng::Value { serde_yaml_ng::from_slice(b).unwrap() };
            let mut recorded = yaml(theirs);
            for (entry, (h, a)) in recorded["hosts"]
                .as_sequence_mut()
                .unwrap()
                .iter_mut()
                .zip(HOSTS)
            {
                let entry = entry.as_mapping_mut().unwrap();
                assert_eq!(entry["address"], name_of(h).as_str(), "{host}: {entry:?}");
                assert_eq!(entry["resolvedAddress"], a, "{host}: {entry:?}");
                entry.remove("resolvedAddress");
                entry.insert("address".into(), a.into());
            }
            assert_eq!(recorded, yaml(bytes), "{host}: profile.yaml");
            continue;
        }
        if rel.ends_with(".crt") && theirs != bytes {
            let mut sans = sans_of_pem(bytes);
            assert!(sans.contains(address), "{host}: {rel} differs: {sans:?}");
            sans.insert(name_of(host));
            assert_eq!(sans_of_pem(theirs), sans, "{host}: {rel}");
            with_name.push(rel.clone());
            continue;
        }
        assert!(theirs == bytes, "{host}: {rel} differs");
    }
    with_name
}

/// `gen --out` of ha's hosts given by name renders what they are given by address renders, plus
/// each name in its host's certificates and profile.yaml, looking each name up once; `--hermetic`
/// takes the recorded addresses; a name that resolves nowhere, to no IPv4 address, to another
/// host's or into the cluster's network is refused (exit 2, the state dir untouched); `gen
/// --check` reports a name that resolves elsewhere now.
#[test]
fn names_resolve_at_gen_as_their_addresses_and_bad_ones_are_refused() {
    let inet = Internet::start(SLOT);
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let addr = |a: &str| a.parse::<Ipv4Addr>().unwrap();
    let table = |cp2: &str| {
        let mut records: Vec<(String, Ipv4Addr)> = vec![
            // cp-2's name has a higher address too, listed first: gen takes the lowest.
            (name_of("cp-2"), addr("198.51.100.99")),
            ("clash.hosts.test".into(), addr("198.51.100.11")),
            ("pods.hosts.test".into(), addr("10.88.7.7")),
            ("hermetic.hosts.test".into(), addr("198.51.100.31")),
        ];
        for (h, a) in HOSTS {
            records.push((name_of(h), addr(if h == "cp-2" { cp2 } else { a })));
        }
        records
    };
    let dns = inet.dns(&refs(&table("198.51.100.12")));
    // Names /etc/hosts gives: one of IPv6 only, one of a loopback address (Debian's own name).
    let etc = resolver_etc(
        t,
        dns,
        "fd00::66 v6only.hosts.test\n127.0.1.1 loop.hosts.test\n",
    );
    let bin = executable_bin_dir(t);
    let bin = bin.to_str().unwrap();
    let named = profile(t, "named.yaml", |h, _| name_of(h));
    let literal = profile(t, "literal.yaml", |_, a| a.to_string());
    let gen = |profile: &Path, more: &[&str]| {
        let profile = profile.to_str().unwrap();
        let mut args = vec!["gen", "--profile", profile, "--seed", "7", "--bin-dir", bin];
        args.extend(["--set", "pki.epoch=2026-01-01T00:00:00Z"]);
        args.extend_from_slice(more);
        kubeunit_resolving(&etc, &args)
    };
    let gen_out = |profile: &Path, out: &Path, more: &[&str]| {
        let out = out.to_str().unwrap();
        let mut args = vec!["--state-dir", "/var/lib/kubeunit/ha", "--out", out];
        args.extend_from_slice(more);
        gen(profile, &args)
    };

    // By name and by address, one seed: the same host dirs but for the names.
    for (profile, out) in [(&named, "by-name"), (&literal, "by-address")] {
        let o = gen_out(profile, &t.join(out), &[]);
        assert!(o.status.success(), "{out}: {}", text(&o));
    }
    let mut with_name = BTreeMap::new();
    for (host, _) in HOSTS {
        let certs = same_but_the_names(
            &t.join("by-name").join(host),
            &t.join("by-address").join(host),
            host,
        );
        with_name.insert(host, certs);
    }
    let serving = [
        "pki/apiserver.crt",
        "pki/controller-manager-server.crt",
        "pki/etcd/peer.crt",
        "pki/etcd/server.crt",
        "pki/scheduler-server.crt",
    ];
    for (host, certs) in &with_name {
        let expected: &[&str] = if host.starts_with("cp-") {
            &serving
        } else {
            &[]
        };
        assert_eq!(certs, expected, "{host}");
    }
    // Each name was asked (once a run: A and AAAA), and nothing else.
    let ours: Vec<String> = HOSTS.iter().map(|(h, _)| name_of(h)).collect();
    wait_for(
        "CoreDNS's query log",
        std::time::Duration::from_secs(10),
        || ours.iter().all(|n| inet.dns_queries().contains(n)),
    );
    let asked = inet.dns_queries();
    assert!(asked.iter().all(|q| ours.contains(q)), "{asked:?}");
    for name in &ours {
        let times = asked.iter().filter(|q| *q == name).count();
        assert!(times <= 2, "{name} asked {times} times: {asked:?}");
    }

    // The host dirs go together, and a seed puts each host at its address.
    let o = run(kubeunit().args(["hosts", "check"]).arg(t.join("by-name")));
    assert!(o.status.success(), "hosts check: {}", text(&o));
    let seeds = t.join("seeds");
    let o = run(kubeunit()
        .args(["hosts", "seed"])
        .arg(t.join("by-name"))
        .arg("--out")
        .arg(&seeds)
        .args(["--network", NETWORK, "--fetch"]));
    assert!(o.status.success(), "hosts seed: {}", text(&o));
    let network = std::fs::read_to_string(seeds.join("cp-2/network-config")).unwrap();
    assert!(network.contains("198.51.100.12/24"), "{network}");

    // --hermetic looks nothing up: it takes a name's address from the profile (the one gen
    // recorded), and renders the same; without it, the name is refused.
    let recorded = std::fs::read_to_string(t.join("by-name/cp-1/profile.yaml")).unwrap();
    let pinned = t.join("pinned.yaml");
    std::fs::write(&pinned, recorded.replace("\nhost: cp-1\n", "\n")).unwrap();
    let o = gen_out(&pinned, &t.join("hermetic"), &["--hermetic"]);
    assert!(o.status.success(), "--hermetic: {}", text(&o));
    for (host, _) in HOSTS {
        let (a, b) = (t.join("hermetic").join(host), t.join("by-name").join(host));
        let (a, b) = (files(&a), files(&b));
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        let differ: Vec<&String> = a
            .iter()
            .filter(|(k, v)| b[*k] != **v)
            .map(|(k, _)| k)
            .collect();
        assert!(differ.is_empty(), "{host}: {differ:?}");
    }
    let unresolved = profile(t, "hermetic.yaml", |h, a| match h {
        "cp-1" => "hermetic.hosts.test".into(),
        _ => a.to_string(),
    });
    let o = gen_out(&unresolved, &t.join("hermetic-2"), &["--hermetic"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    for says in [
        "hosts[0].address",
        "\"hermetic.hosts.test\"",
        "--hermetic",
        "fix:",
    ] {
        assert!(text(&o).contains(says), "{says}: {}", text(&o));
    }
    assert!(!t.join("hermetic-2").exists());

    // One host's state dir in place, then bad names for worker-2: each refused with the field,
    // the value and a fix; the state dir untouched, no --out dir written.
    let state = t.join("state");
    let in_place = ["--set", "host=cp-1", "--state-dir", state.to_str().unwrap()];
    let o = gen(&named, &in_place);
    assert!(o.status.success(), "{}", text(&o));
    let before = snapshot(&state);
    for (i, (bad, says)) in [
        ("nothere.hosts.test", "does not resolve"),
        (
            "v6only.hosts.test",
            "has no IPv4 address (it resolves to fd00::66)",
        ),
        (
            "clash.hosts.test",
            "another host has this address: \"cp-1\"",
        ),
        ("pods.hosts.test", "inside network.podCIDR"),
        ("loop.hosts.test", "not an address other hosts can reach"),
        ("bad..hosts.test", "neither an IPv4 address nor a DNS name"),
        ("bad\n.hosts.test", "neither an IPv4 address nor a DNS name"),
    ]
    .into_iter()
    .enumerate()
    {
        let p = profile(t, &format!("bad-{i}.yaml"), |h, _| match h {
            "worker-2" => bad.into(),
            _ => name_of(h),
        });
        let out = t.join(format!("bad-{i}"));
        for o in [gen(&p, &in_place), gen_out(&p, &out, &[])] {
            assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
            let msg = text(&o);
            // Every value as the messages quote it.
            let quoted = format!("{bad:?}");
            for needle in ["hosts[4].address", &quoted, says, "fix:"] {
                assert!(msg.contains(needle), "{bad}: no {needle:?} in:\n{msg}");
            }
        }
        assert!(!out.exists(), "{bad}: wrote {}", out.display());
        assert!(before == snapshot(&state), "{bad}: the state dir changed");
    }
    // Neither an invalid name nor a name under --hermetic was asked.
    let asked = inet.dns_queries();
    for never in ["bad..hosts.test", "bad\n.hosts.test", "hermetic.hosts.test"] {
        assert!(!asked.iter().any(|q| q == never), "{never}: {asked:?}");
    }

    // gen --check resolves the names again: none moved, no difference; cp-2's moved, the
    // state dir differs (profile.yaml records the old address, etcd's peers name it), until gen.
    let check = || {
        kubeunit_resolving(
            &etc,
            &["gen", "--check", "--state-dir", state.to_str().unwrap()],
        )
    };
    let o = check();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    inet.stop(Site::Dns);
    inet.dns(&refs(&table("198.51.100.14")));
    let o = check();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    for needle in ["changed", "profile.yaml", "etcd.service"] {
        assert!(text(&o).contains(needle), "{needle}: {}", text(&o));
    }
    let regen = state.join("profile.yaml");
    let o = gen(&regen, &in_place[2..]);
    assert!(o.status.success(), "{}", text(&o));
    let o = check();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let recorded = std::fs::read_to_string(&regen).unwrap();
    assert!(
        recorded.contains("address: cp-2.hosts.test")
            && recorded.contains("resolvedAddress: 198.51.100.14"),
        "{recorded}"
    );
    let etcd = std::fs::read_to_string(state.join("units").join(unit(&state, "etcd"))).unwrap();
    assert!(
        etcd.contains("198.51.100.14") && !etcd.contains("198.51.100.12"),
        "{etcd}"
    );

    // Host dirs of a run after the move do not go with those of before.
    let o = gen_out(&named, &t.join("moved"), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let mixed = t.join("mixed");
    std::fs::create_dir(&mixed).unwrap();
    for (host, _) in HOSTS {
        let from = if host == "cp-2" { "moved" } else { "by-name" };
        let o = run(Command::new("cp")
            .arg("-a")
            .arg(t.join(from).join(host))
            .arg(&mixed));
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = run(kubeunit().args(["hosts", "check"]).arg(&mixed));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    for needle in [
        "cp-2 at cp-2.hosts.test (198.51.100.14)",
        "cp-2 at cp-2.hosts.test (198.51.100.12)",
    ] {
        assert!(text(&o).contains(needle), "{needle}: {}", text(&o));
    }
    inet.assert_no_leak();
}
