//! Every unit kubeunit renders (the dev profile, plus the optional cloud-controller-manager) means the
//! same to systemd whether kubeunit hands it over as a transient unit or the file is installed:
//! `systemctl show` agrees on every configuration property. Runs kubeunit's own translation and D-Bus
//! client against the systemd of a container; the components need not (and here do not) run.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::common::container::{
    exec_argv, exec_argv_of, gen_in, show_unit, unit_differences, Container,
};
use crate::common::ports::Ports;
use crate::common::*;
use kubeunit::systemd::{Bus, Systemd};
use kubeunit::unit::properties;
use kubeunit::unit::UnitFile;

#[test]
fn every_rendered_unit_translates_to_what_the_installed_file_means() {
    let ports = Ports::allocate();
    let c = Container::boot("equiv");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let k8s = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"));
    let args: Vec<String> = [
        "--profile",
        "dev",
        "--bin-dir",
        k8s.to_str().unwrap(),
        "--set",
        "network.advertiseAddress=192.0.2.5",
        // Its own name: the node-network unit really runs here (without the capabilities to make a
        // link, in a container that shares the host's network), and must not touch a node's link.
        "--set",
        "name=equiv",
        "--set",
        "components.cloud-controller-manager.enabled=true",
        "--set",
        "components.cloud-controller-manager.extraArgs.cloud-provider=external",
        // Quoting and escaping on the way to systemd: spaces, a percent sign, a dollar.
        "--set",
        "components.kube-apiserver.extraArgs.service-account-jwks-uri=https://example.test/a b%20$x",
        "--set",
        "components.kube-proxy.env.GODEBUG=x509sha1=1",
        // The etcd-snapshot service and its timer.
        "--set",
        "etcd.snapshot.schedule=Mon..Fri *-*-* 02:30",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let state = gen_in(&c, "equiv", &ports, &args);
    let mut units: Vec<String> = std::fs::read_dir(state.join("units"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    units.sort_by_key(|u| !u.ends_with(".slice"));
    assert_eq!(
        units.len(),
        13,
        "slice + 11 components' services + a timer: {units:?}"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sd = rt
        .block_on(Systemd::connect(&Bus::Address(c.bus_address())))
        .expect("connect to the container's systemd");
    let mut transients = BTreeMap::new();
    for unit in &units {
        let file = UnitFile::read(&state.join("units").join(unit)).unwrap();
        // Transient, through kubeunit's translation. The job result does not matter: the binaries
        // of a node cannot run here; the configuration is what is compared. A timer is started as
        // `start` does, with its service loaded alongside.
        let aux = match unit.strip_suffix(".timer") {
            Some(base) => {
                let service = format!("{base}.service");
                let f = UnitFile::read(&state.join("units").join(&service)).unwrap();
                vec![(service, properties(&f).unwrap())]
            }
            None => vec![],
        };
        rt.block_on(sd.start_transient_with(unit, properties(&file).unwrap(), aux.clone()))
            .unwrap();
        let transient = show_unit(&c, unit);
        assert_eq!(
            transient.get("Transient").map(String::as_str),
            Some("yes"),
            "{unit}"
        );
        if unit.ends_with(".timer") {
            assert_eq!(
                transient.get("ActiveState").map(String::as_str),
                Some("active"),
                "{unit}: the timer waits"
            );
            assert!(
                transient
                    .get("TimersCalendar")
                    .is_some_and(|v| v.contains("OnCalendar=Mon..Fri *-*-* 02:30:00")),
                "{unit}: {:?}",
                transient.get("TimersCalendar")
            );
        }
        rt.block_on(sd.stop(unit)).unwrap();
        rt.block_on(sd.reset_failed(unit)).unwrap();
        rt.block_on(sd.wait_gone(unit, Duration::from_secs(30)))
            .unwrap();
        for (aux, _) in &aux {
            rt.block_on(sd.wait_unloaded(aux, Duration::from_secs(30)))
                .unwrap();
        }

        // Installed: the same file under /run/systemd/system, loaded by systemd itself.
        let text = std::fs::read_to_string(state.join("units").join(unit)).unwrap();
        let path = format!("/run/systemd/system/{unit}");
        std::fs::write(c.work.join("unit.tmp"), &text).unwrap();
        assert!(c
            .run(&["cp", c.work.join("unit.tmp").to_str().unwrap(), &path])
            .status
            .success());
        assert!(c.run(&["systemctl", "daemon-reload"]).status.success());
        let installed = show_unit(&c, unit);
        assert_eq!(installed.get("FragmentPath"), Some(&path), "{unit}");

        let diffs = unit_differences(&transient, &installed);
        assert!(
            diffs.is_empty(),
            "{unit}: transient and installed differ:\n{}",
            diffs.join("\n")
        );
        if unit.ends_with("kube-apiserver.service") {
            // The value with a space and a percent sign arrived as one argument, unchanged.
            assert!(
                exec_argv(&transient).contains("example.test/a b%20"),
                "{}",
                exec_argv(&transient)
            );
        }
        assert!(c.run(&["rm", &path]).status.success());
        assert!(c.run(&["systemctl", "daemon-reload"]).status.success());
        transients.insert(unit.clone(), transient);
    }
    installed_units_are_the_transient_ones_plus_their_drop_ins(&c, &state, &transients);
}

/// `kubeunit install`: each unit systemd loads from /etc/systemd/system agrees with the transient one
/// on every property, but for what the install drop-in and the target add (PartOf= and the order
/// around the target and the start-hook oneshots, the `kubeunit wait` gate of components without
/// sd_notify); `systemd-analyze verify` accepts every file; `uninstall` leaves /etc/systemd/system as
/// it was.
fn installed_units_are_the_transient_ones_plus_their_drop_ins(
    c: &Container,
    state: &std::path::Path,
    transients: &BTreeMap<String, BTreeMap<String, String>>,
) {
    let listing = || {
        let out = c.sh("cd /etc/systemd/system && find . -printf '%p %y %m %l\\n' | sort");
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = listing();
    let sd = ["--state-dir", state.to_str().unwrap()];
    let out = c.kubeunit(&[&["install"], &sd[..], &["-o", "json"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let written: Vec<String> = report["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    // Unit files (their drop-ins are read with them); the link is the target.
    let files: Vec<&String> = written
        .iter()
        .filter(|p| !p.contains(".wants/") && !p.contains(".d/"))
        .collect();
    let out = c.run(
        &[
            &["systemd-analyze", "verify", "--man=no"][..],
            &files.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        ]
        .concat(),
    );
    // This test's bin dir has the Kubernetes binaries only: etcd's, the registry's, the cloud
    // controller manager's and kubeunit (the snapshot service runs the one in binDir) are missing,
    // which verify reports. Nothing else may be. (containerd's is missing too, but its ExecStart=
    // begins with nsenter, which verify looks at.)
    let complaints: Vec<&str> = std::str::from_utf8(&out.stderr)
        .unwrap()
        .lines()
        .filter(|l| !(l.contains("is not executable: No such file or directory")))
        .collect();
    assert!(
        complaints.is_empty(),
        "systemd-analyze verify: {}",
        text(&out)
    );
    let said = text(&out);
    let mut missing: Vec<&str> = said
        .lines()
        .filter_map(|l| l.split_once("Command ")?.1.split_once(" is not executable"))
        .filter_map(|(path, _)| path.rsplit('/').next())
        .collect();
    missing.sort();
    assert_eq!(
        missing,
        ["cloud-controller-manager", "etcd", "kubeunit", "registry"],
        "{said}"
    );
    let prefix = unit_prefix(state);
    let target = format!("{prefix}.target");
    let target = target.as_str();
    let out = c.run(&["systemctl", "is-enabled", target]);
    assert_eq!(text(&out).trim(), "enabled");
    let hooks = [
        "kube-apiserver-apply-addons",
        "containerd-import-images",
        "registry-load-registry",
    ]
    .map(|h| format!("{prefix}-{h}.service"));
    // Forward: the target and the hooks. Backward (Before= of what another unit is After=): the
    // environment's units, all loaded now, where the transient ones were loaded one at a time.
    let added = |v: &str| {
        v == target || hooks.contains(&v.to_string()) || v.starts_with(&format!("{prefix}-"))
    };
    for (unit, transient) in transients {
        let installed = show_unit(c, unit);
        assert_eq!(
            installed.get("FragmentPath").map(String::as_str),
            Some(format!("/etc/systemd/system/{unit}").as_str())
        );
        for diff in unit_differences(transient, &installed) {
            let key = diff.split(':').next().unwrap();
            let words = |m: &BTreeMap<String, String>| -> BTreeSet<String> {
                m.get(key)
                    .map(|v| v.split_whitespace().map(String::from).collect())
                    .unwrap_or_default()
            };
            match key {
                // The target and the hooks: ordered around it, stopped with the target.
                "After" | "Before" | "PartOf" | "WantedBy" | "RequiredBy" | "ConsistsOf"
                | "SliceOf" | "TriggeredBy" => {
                    let extra: Vec<String> = words(&installed)
                        .difference(&words(transient))
                        .cloned()
                        .collect();
                    assert!(
                        words(transient).is_subset(&words(&installed))
                            && extra.iter().all(|v| added(v)),
                        "{unit}: {diff}"
                    );
                }
                // Time for a slow host at boot (a VM without hardware virtualization).
                "TimeoutStartUSec" => {
                    assert_eq!(
                        installed.get(key).map(String::as_str),
                        Some("15min"),
                        "{unit}"
                    );
                }
                "ExecStartPost" | "ExecStartPostEx" => {
                    let wait = exec_argv_of(&installed, key);
                    assert!(
                        wait.contains(" wait --state-dir ")
                            && wait.contains(" --timeout 870 ")
                            && exec_argv_of(transient, key).is_empty(),
                        "{unit}: {diff}"
                    );
                }
                _ => panic!("{unit}: transient and installed differ beyond the drop-in: {diff}"),
            }
        }
    }
    // The gate is there exactly for the components without sd_notify that have a probe.
    for (component, gated) in [
        ("kube-scheduler", true),
        ("kubelet", false),
        ("kube-proxy", true),
        ("etcd", false),
        ("node-network", false),
    ] {
        let installed = show_unit(c, &unit(state, component));
        assert_eq!(
            exec_argv_of(&installed, "ExecStartPost").contains(" wait "),
            gated,
            "{component}"
        );
    }

    let out = c.kubeunit(&[&["uninstall"], &sd[..]].concat());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        listing(),
        before,
        "uninstall leaves /etc/systemd/system as it was"
    );
    let out = c.run(&["systemctl", "is-enabled", target]);
    assert!(!out.status.success(), "{}", text(&out));
}
