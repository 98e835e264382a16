//! A unit file read back (`start` reads the state dir's units and turns them into D-Bus properties):
//! any text must parse or be refused with an error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let path = std::path::Path::new("/var/lib/kubeunit/fuzz/units/kubeunit-fuzz-etcd.service");
    if let Ok(unit) = kubeunit::unit::parse(path, text) {
        let _ = kubeunit::unit::properties(&unit);
        let _ = unit.exec_start();
    }
});
