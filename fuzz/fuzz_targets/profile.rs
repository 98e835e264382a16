//! A profile and `--set` values. The input is profile text, then optionally a NUL byte and one
//! `--set KEY=VALUE` per line (so the built-in profiles are seeds as they are). The text is read as a
//! state dir's `profile.yaml`, the sets on top of `dev`; each is validated and, when valid, planned.
#![no_main]

use kubeunit::spec::{self, HostFacts, Plan};
use libfuzzer_sys::fuzz_target;

fn validate_and_plan(profile: spec::Profile) {
    let errors = spec::validate::validate(&profile);
    let table_errors = kubeunit::components::validate(kubeunit::components::COMPONENTS, &profile);
    if errors.is_empty() && table_errors.is_empty() {
        let state_dir = std::path::Path::new("/var/lib/kubeunit/fuzz");
        let _ = Plan::new(profile, state_dir, &HostFacts::none());
    }
}

fuzz_target!(|bytes: &[u8]| {
    let Ok(input) = std::str::from_utf8(bytes) else {
        return;
    };
    let (text, sets) = input.split_once('\0').unwrap_or((input, ""));
    let sets: Vec<String> = sets.lines().map(String::from).collect();
    let path = std::path::Path::new("/var/lib/kubeunit/fuzz/profile.yaml");
    if let Ok((_, profile)) = spec::load::resolved(path, text) {
        validate_and_plan(profile);
    }
    if let Ok((_, profile)) = spec::load::layered("dev", &sets) {
        validate_and_plan(profile);
    }
});
