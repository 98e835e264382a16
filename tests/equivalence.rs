//! Every unit kubeunit renders (the dev profile, plus the optional cloud-controller-manager) means the
//! same to systemd whether kubeunit hands it over as a transient unit or the file is installed:
//! `systemctl show` agrees on every configuration property. Runs kubeunit's own translation and D-Bus
//! client against the systemd of a container; the components need not (and here do not) run.

mod common;

use std::time::Duration;

use common::container::{exec_argv, gen_in, show_unit, unit_differences, Container};
use common::ports::Ports;
use common::*;
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
        12,
        "slice + 10 components' services + a timer: {units:?}"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sd = rt
        .block_on(Systemd::connect(&Bus::Address(c.bus_address())))
        .expect("connect to the container's systemd");
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
    }
}
