//! What `auto` in a profile resolves to, so that environments side by side on one host never meet:
//! `instance: auto` (the units' names) and `ports: auto` (the ports). `gen` resolves both once and
//! records the result in the state dir's `profile.yaml`; every later command (and a later `gen`
//! with `auto` again) uses the recorded values, so ports picked as free do not move once the
//! environment holds them.

use std::path::Path;

use sha2::Digest;

use super::profile::{PortSpec, Ports, Profile};

/// `ports: auto` takes a block of eleven ports (one per `ports.*` field) from 12000-20997: below the tests' blocks (21000 and up,
/// tests/common/ports.rs) and the kernel's ephemeral range (32768 and up, where outgoing
/// connections take their ports), above the well-known ones of Kubernetes (2379, 6443, 10248-10259).
pub const FIRST_PORT: u16 = 12000;
pub const BLOCK_SIZE: u16 = 11;
pub const BLOCKS: u16 = 818;
const _: () = assert!(
    FIRST_PORT + BLOCKS * BLOCK_SIZE <= 21000,
    "below the tests' ports"
);

/// Replace `auto` with what the state dir recorded (its `profile.yaml`), where it recorded something.
pub fn keep_recorded(profile: &mut Profile, recorded: Option<&Profile>) {
    let Some(recorded) = recorded else {
        return;
    };
    if profile.ports == PortSpec::Auto {
        if let PortSpec::Fixed(p) = &recorded.ports {
            profile.ports = PortSpec::Fixed(p.clone());
        }
    }
    if profile.instance == "auto" && recorded.instance != "auto" {
        profile.instance = recorded.instance.clone();
    }
}

/// A block of `BLOCK_SIZE` ports in schema order (etcdClient first) of which `free` says each is free. The
/// search starts at a block picked by the state dir's path, so that two state dirs generated one
/// after the other (neither listening yet) get different blocks unless their paths' hashes meet
/// (1 in `BLOCKS`); it goes on block by block. `None`: no block is free.
pub fn port_block(state_dir: &Path, free: impl Fn(u16) -> bool) -> Option<Ports> {
    let digest = sha2::Sha256::digest(state_dir.as_os_str().as_encoded_bytes());
    let start = u16::from_be_bytes([digest[0], digest[1]]) % BLOCKS;
    (0..BLOCKS)
        .map(|i| FIRST_PORT + ((start + i) % BLOCKS) * BLOCK_SIZE)
        .find(|&base| (base..base + BLOCK_SIZE).all(&free))
        .map(|base| Ports::from_list(std::array::from_fn(|i| base + i as u16)))
}

/// What `instance: auto` resolves to: none in the name's default state dir (`<state home>/NAME`),
/// elsewhere the first 8 hex digits of the SHA-256 of the state dir's path.
pub fn instance(name: &str, state_dir: &Path, state_home: Option<&Path>) -> String {
    if state_home.is_some_and(|h| h.join(name) == state_dir) {
        return String::new();
    }
    let digest = sha2::Sha256::digest(state_dir.as_os_str().as_encoded_bytes());
    hex::encode(&digest[..4])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;

    fn profile(sets: &[&str]) -> Profile {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        load::layered("control-plane", &sets).unwrap().1
    }

    #[test]
    fn a_block_is_one_free_port_per_field_in_the_range() {
        let p = port_block(Path::new("/srv/a"), |_| true).unwrap();
        let ports: Vec<u16> = p.all().iter().map(|(_, p)| *p).collect();
        let base = ports[0];
        assert_eq!(ports, (base..base + BLOCK_SIZE).collect::<Vec<_>>());
        assert!((FIRST_PORT..FIRST_PORT + BLOCKS * BLOCK_SIZE).contains(&base));
        assert_eq!((base - FIRST_PORT) % BLOCK_SIZE, 0);
        assert!(crate::spec::validate::validate(&Profile {
            ports: PortSpec::Fixed(p.clone()),
            ..profile(&[])
        })
        .is_empty());
        // The same state dir, the same block; another one (almost always) another block.
        assert_eq!(port_block(Path::new("/srv/a"), |_| true), Some(p.clone()));
        assert_ne!(port_block(Path::new("/srv/b"), |_| true), Some(p));
    }

    #[test]
    fn a_block_with_a_busy_port_is_skipped() {
        let first = port_block(Path::new("/srv/a"), |_| true).unwrap();
        let busy = first.apiserver;
        let next = port_block(Path::new("/srv/a"), |port| port != busy).unwrap();
        assert_ne!(next, first);
        assert!(next.all().iter().all(|(_, p)| *p != busy));
        // The search wraps around the range and gives up only when every block is taken.
        let last = FIRST_PORT + (BLOCKS - 1) * BLOCK_SIZE;
        let only_last = port_block(Path::new("/srv/a"), |p| p >= last).unwrap();
        assert_eq!(only_last.etcd_client, last);
        assert_eq!(port_block(Path::new("/srv/a"), |_| false), None);
    }

    #[test]
    fn the_default_state_dir_has_no_instance_others_a_stable_hash() {
        let home = Path::new("/var/lib/kubeunit");
        let default = Path::new("/var/lib/kubeunit/control-plane");
        assert_eq!(instance("control-plane", default, Some(home)), "");
        let a = instance("control-plane", Path::new("/a"), Some(home));
        let b = instance("control-plane", Path::new("/b"), Some(home));
        assert_eq!(a.len(), 8);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
        assert_eq!(a, instance("control-plane", Path::new("/a"), Some(home)));
        // Another name's default dir is not this name's, and no known home means a hash everywhere.
        assert_ne!(instance("dev", default, Some(home)), "");
        assert_ne!(instance("control-plane", default, None), "");
    }

    #[test]
    fn recorded_values_replace_auto_and_only_auto() {
        let mut p = profile(&["ports=auto"]);
        let dir = Path::new("/srv/a");
        p.ports = PortSpec::Fixed(port_block(dir, |_| true).unwrap());
        let facts = crate::spec::HostFacts::fixed(Some("192.0.2.5"));
        let recorded = Plan::new(p, dir, &facts).unwrap().resolved_profile();
        let PortSpec::Fixed(ports) = &recorded.ports else {
            panic!("recorded ports are numbers");
        };
        let mut p = profile(&["ports=auto"]);
        keep_recorded(&mut p, Some(&recorded));
        assert_eq!(p.ports, PortSpec::Fixed(ports.clone()));
        assert_eq!(p.instance, recorded.instance);
        assert_ne!(p.instance, "auto");
        // Named ports and an explicit instance win over the record.
        let mut p = profile(&["ports.apiserver=7443", "instance=mine"]);
        keep_recorded(&mut p, Some(&recorded));
        assert_eq!(p.ports.fixed().unwrap().apiserver, 7443);
        assert_eq!(p.instance, "mine");
        // Nothing recorded: `auto` stays for the plan (instance) and `gen` (ports) to resolve.
        let mut p = profile(&["ports=auto"]);
        keep_recorded(&mut p, None);
        assert_eq!((p.ports, p.instance.as_str()), (PortSpec::Auto, "auto"));
    }

    use crate::spec::Plan;
}
