//! What `auto` in a profile resolves to, so that environments side by side on one host never meet:
//! `instance: auto` (the units' names) and `ports: auto` (the ports). `gen` resolves both once and
//! records the result in the state dir's `profile.yaml`; every later command (and a later `gen`
//! with `auto` again) uses the recorded values, so ports picked as free do not move once the
//! environment holds them.

use std::path::Path;

use sha2::Digest;

use super::profile::{Nodes, PortSpec, Ports, Profile};

/// `ports: auto` takes a block of ports, one per port the component table declares, from
/// 12000-20999: below the tests' blocks (`END_PORT` and up, tests/it/common/ports.rs) and the kernel's
/// ephemeral range (32768 and up, where outgoing connections take their ports), above the
/// well-known ones of Kubernetes (2379, 6443, 10248-10259).
pub const FIRST_PORT: u16 = 12000;
/// The first port after the range.
pub const END_PORT: u16 = 21000;

/// How many blocks of `size` ports the range holds (818 of 11). A block's place depends on it: a
/// state dir's block moves when the number of declared ports does (the ports a state dir recorded
/// stay, `keep_recorded`).
pub fn blocks(size: u16) -> u16 {
    (END_PORT - FIRST_PORT) / size.max(1)
}

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
    // Each node keeps the share of the pod network it had (one that is running holds it).
    if let Nodes::List(had) = &recorded.nodes {
        let mut entries = super::nodes::entries(profile);
        let before = entries.clone();
        super::nodes::keep_recorded_pod_cidrs(&mut entries, had);
        if entries != before {
            profile.nodes = Nodes::List(entries);
        }
    }
}

/// A block of ports, one per field of `fields` in that order (`components::port_fields`: the
/// component table's ports), of which `free` says each is free. The search starts at a block picked
/// by the state dir's path, so that two state dirs generated one after the other (neither listening
/// yet) get different blocks unless their paths' hashes meet (1 in `blocks`); it goes on block by
/// block. `None`: no block is free (or more fields than the range has ports).
pub fn port_block(state_dir: &Path, fields: &[&str], free: impl Fn(u16) -> bool) -> Option<Ports> {
    let size = u16::try_from(fields.len()).ok()?;
    let blocks = blocks(size);
    if blocks == 0 {
        return None;
    }
    let digest = sha2::Sha256::digest(state_dir.as_os_str().as_encoded_bytes());
    let start = u16::from_be_bytes([digest[0], digest[1]]) % blocks;
    (0..blocks)
        .map(|i| FIRST_PORT + ((start + i) % blocks) * size)
        .find(|&base| (base..base + size).all(&free))
        .map(|base| Ports::from_fields(fields.iter().copied().zip(base..)))
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

    /// The fields of `ports:` as base.yaml lists them (the component table's, which spec cannot
    /// see; `components::tests` holds the two equal).
    fn fields() -> Vec<String> {
        let p = profile(&[]);
        let ports = p.ports.fixed().cloned().unwrap_or_default();
        ports.all().iter().map(|(f, _)| f.to_string()).collect()
    }

    fn block(dir: &str, free: impl Fn(u16) -> bool) -> Option<Ports> {
        let fields = fields();
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        port_block(Path::new(dir), &fields, free)
    }

    #[test]
    fn a_block_is_one_free_port_per_field_in_the_range() {
        let p = block("/srv/a", |_| true).unwrap();
        let size = fields().len() as u16;
        assert_eq!(size, 12);
        let ports: Vec<u16> = p.all().iter().map(|(_, p)| *p).collect();
        let base = ports[0];
        assert_eq!(ports, (base..base + size).collect::<Vec<_>>());
        assert!((FIRST_PORT..FIRST_PORT + blocks(size) * size).contains(&base));
        assert!(FIRST_PORT + blocks(size) * size <= END_PORT);
        assert_eq!((base - FIRST_PORT) % size, 0);
        // In the fields' order, each field once.
        let named: Vec<String> = p.all().iter().map(|(f, _)| f.to_string()).collect();
        assert_eq!(named, fields());
        assert!(crate::spec::validate::validate(&Profile {
            ports: PortSpec::Fixed(p.clone()),
            ..profile(&[])
        })
        .is_empty());
        // The same state dir, the same block; another one (almost always) another block.
        assert_eq!(block("/srv/a", |_| true), Some(p.clone()));
        assert_ne!(block("/srv/b", |_| true), Some(p));
    }

    #[test]
    fn the_block_size_is_the_number_of_fields() {
        let three = port_block(Path::new("/srv/a"), &["a", "b", "c"], |_| true).unwrap();
        let base = three.get("a").unwrap();
        assert_eq!(
            three.all(),
            vec![("a", base), ("b", base + 1), ("c", base + 2)]
        );
        assert_eq!((base - FIRST_PORT) % 3, 0);
        assert_eq!(blocks(3), 3000);
        assert_eq!(blocks(11), 818);
        // No fields: nothing to pick; more fields than the range holds: no block.
        assert_eq!(
            port_block(Path::new("/srv/a"), &[], |_| true),
            Some(Ports::default())
        );
        let many: Vec<String> = (0..9001).map(|i| format!("p{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(port_block(Path::new("/srv/a"), &many, |_| true), None);
    }

    #[test]
    fn a_block_with_a_busy_port_is_skipped() {
        let first = block("/srv/a", |_| true).unwrap();
        let busy = first.get("apiserver").unwrap();
        let next = block("/srv/a", |port| port != busy).unwrap();
        assert_ne!(next, first);
        assert!(next.all().iter().all(|(_, p)| *p != busy));
        // The search wraps around the range and gives up only when every block is taken.
        let size = fields().len() as u16;
        let last = FIRST_PORT + (blocks(size) - 1) * size;
        let only_last = block("/srv/a", |p| p >= last).unwrap();
        assert_eq!(only_last.get("etcdClient"), Some(last));
        assert_eq!(block("/srv/a", |_| false), None);
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
        p.ports = PortSpec::Fixed(block("/srv/a", |_| true).unwrap());
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
        assert_eq!(p.ports.fixed().unwrap().get("apiserver"), Some(7443));
        assert_eq!(p.instance, "mine");
        // Nothing recorded: `auto` stays for the plan (instance) and `gen` (ports) to resolve.
        let mut p = profile(&["ports=auto"]);
        keep_recorded(&mut p, None);
        assert_eq!((p.ports, p.instance.as_str()), (PortSpec::Auto, "auto"));
    }

    use crate::spec::Plan;
}
