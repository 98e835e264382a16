//! `binDir: ""`: the release binaries of the profile's versions that `kubeunit fetch` keeps in the
//! user's cache. `gen` turns it into paths (what the fetch table says each source fills, where the
//! profile left that field empty) and records the versions, so the state dir names exact files and
//! `start` checks them like any other binaries.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::Error;
use crate::fetch::{self, sources::Fills, sources::When, Source, SOURCES};
use crate::spec::Profile;

/// Where CNI plugins are when binDir is a directory of the user's own.
const CNI_BIN_DIR: &str = "/opt/cni/bin";
/// binDir when there is no fetch cache to name (`gen --hermetic`).
const HERMETIC_BIN_DIR: &str = "/usr/local/bin";

/// The sets of release binaries `profile` needs, each at the version it asks for (or the pinned
/// one).
pub fn wanted(profile: &Profile) -> Result<Vec<(&'static Source, String)>, Error> {
    let mut out = Vec::new();
    for source in SOURCES {
        let needed = match source.when {
            When::Always => true,
            When::Component(name) => profile.component(name).enabled,
        };
        if !needed {
            continue;
        }
        let version = match source.version_field {
            Some(field) => {
                let asked = text_at(profile, field).unwrap_or_default();
                fetch::version_of(source, field, &asked)?
            }
            None => source.version.to_string(),
        };
        out.push((source, version));
    }
    Ok(out)
}

/// `--set`s that fill in what an empty binDir leaves to the fetched sets in `cache` (`None`: no
/// cache to read, as with `--hermetic`: /usr/local/bin), and containerd.cniBinDir's default
/// otherwise.
pub fn fills(profile: &Profile, cache: Option<&Path>) -> Result<Vec<String>, Error> {
    let empty = |field: &str| text_at(profile, field).unwrap_or_default().is_empty();
    if !profile.bin_dir.as_os_str().is_empty() {
        return Ok(if empty("containerd.cniBinDir") {
            vec![set("containerd.cniBinDir", Path::new(CNI_BIN_DIR))]
        } else {
            Vec::new()
        });
    }
    // Without a cache to read (--hermetic, or no home): the binaries of the machine the state dir
    // is built for, where they were before `kubeunit fetch` existed.
    let Some(cache) = cache else {
        return Ok(vec![
            set("binDir", Path::new(HERMETIC_BIN_DIR)),
            set("containerd.cniBinDir", Path::new(CNI_BIN_DIR)),
        ]
        .into_iter()
        .filter(|s| s.starts_with("binDir") || empty("containerd.cniBinDir"))
        .collect());
    };
    let mut sets = Vec::new();
    let mut cni_filled = false;
    for (source, version) in wanted(profile)? {
        let dir = fetch::cache::set_dir(cache, source.name, &version);
        match source.fills {
            Fills::BinDir => sets.push(set("binDir", &dir)),
            Fills::Binary { field, binary } if empty(field) => {
                sets.push(set(field, &dir.join(binary)))
            }
            Fills::Dir(field) if empty(field) => {
                cni_filled |= field == "containerd.cniBinDir";
                sets.push(set(field, &dir))
            }
            Fills::Binary { .. } | Fills::Dir(_) => {}
        }
        if let Some(field) = source.version_field {
            sets.push(format!("{field}={}", quoted(&version)));
        }
    }
    // No node fetched (a control plane): CNI's usual place, as with a binDir of one's own.
    if !cni_filled && empty("containerd.cniBinDir") {
        sets.push(set("containerd.cniBinDir", Path::new(CNI_BIN_DIR)));
    }
    // The etcd-snapshot timer runs kubeunit, which no release set holds: this one.
    if !profile.etcd.snapshot.schedule.is_empty() && empty("components.etcd-snapshot.binary") {
        if let Ok(exe) = std::env::current_exe() {
            sets.push(set("components.etcd-snapshot.binary", &exe));
        }
    }
    Ok(sets)
}

/// What to fetch for `profile`: each set it needs, from `--mirror` (`flags`: source -> base URL),
/// else `KUBEUNIT_MIRROR_<SOURCE>`, else the profile's `fetch.mirrors`, else its release page.
pub fn fetch_wanted(
    profile: &Profile,
    flags: &BTreeMap<String, String>,
) -> Result<Vec<fetch::Wanted>, Error> {
    if let Some(unknown) = flags.keys().find(|k| fetch::sources::find(k).is_none()) {
        return Err(Error::Usage {
            message: format!("--mirror {unknown}=...: no such source of release binaries"),
            fix: format!("name one of: {}", fetch::sources::names().join(", ")),
        });
    }
    wanted(profile)?
        .into_iter()
        .map(|(source, version)| {
            let (base, _) = fetch::base_of(
                source,
                flags.get(source.name).map(String::as_str),
                profile.fetch.mirrors.get(source.name).map(String::as_str),
            )?;
            let sums_base = fetch::sums_base_of(
                source,
                profile.fetch.checksums.get(source.name).map(String::as_str),
            )?;
            Ok(fetch::Wanted {
                source,
                version,
                base,
                sums_base,
            })
        })
        .collect()
}

fn set(field: &str, path: &Path) -> String {
    format!("{field}={}", quoted(&path.to_string_lossy()))
}

/// A `--set` value that is this string whatever it holds (JSON is YAML).
fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// The text at a dotted field of the profile (`components.etcd.binary`).
fn text_at(profile: &Profile, field: &str) -> Option<String> {
    let mut value = serde_json::to_value(profile).ok()?;
    for key in field.split('.') {
        value = value.get(key)?.clone();
    }
    value.as_str().map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;

    fn dev(sets: &[&str]) -> Profile {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        load::layered("dev", &sets).unwrap().1
    }

    #[test]
    fn an_empty_bin_dir_is_the_fetched_sets_of_the_profiles_versions() {
        let sets = fills(&dev(&["versions.kubernetes=v1.36"]), Some(Path::new("/c"))).unwrap();
        let k8s = fetch::sources::find("kubernetes").unwrap().version;
        assert!(
            sets.contains(&format!("binDir=\"/c/bin/kubernetes-{k8s}\"")),
            "{sets:?}"
        );
        assert!(
            sets.contains(&format!("versions.kubernetes=\"{k8s}\"")),
            "{sets:?}"
        );
        assert!(sets
            .iter()
            .any(|s| s.starts_with("components.etcd.binary=\"/c/bin/etcd-v")));
        assert!(sets
            .iter()
            .any(|s| s.starts_with("containerd.runtime=\"/c/bin/runc-v")));
        assert!(sets
            .iter()
            .any(|s| s.starts_with("containerd.cniBinDir=\"/c/bin/cni-plugins-v")));
        assert!(sets
            .iter()
            .any(|s| s.starts_with("components.registry.binary=")));
    }

    #[test]
    fn what_the_profile_names_stays() {
        let sets = fills(
            &dev(&["components.etcd.binary=/my/etcd"]),
            Some(Path::new("/c")),
        )
        .unwrap();
        assert!(
            !sets.iter().any(|s| s.starts_with("components.etcd.binary")),
            "{sets:?}"
        );
        let own = fills(&dev(&["binDir=/usr/local/bin"]), Some(Path::new("/c"))).unwrap();
        assert_eq!(own, ["containerd.cniBinDir=\"/opt/cni/bin\""]);
    }

    #[test]
    fn a_control_plane_needs_no_node_binaries() {
        let cp = load::layered("control-plane", &[]).unwrap().1;
        let names: Vec<&str> = wanted(&cp).unwrap().iter().map(|(s, _)| s.name).collect();
        assert_eq!(names, ["kubernetes", "etcd"]);
        // No CNI plugins fetched: containerd.cniBinDir still names a directory.
        let sets = fills(&cp, Some(Path::new("/c"))).unwrap();
        assert!(
            sets.contains(&"containerd.cniBinDir=\"/opt/cni/bin\"".to_string()),
            "{sets:?}"
        );
    }

    #[test]
    fn hermetic_names_the_usual_directories_and_a_version_must_be_a_release() {
        assert_eq!(
            fills(&dev(&[]), None).unwrap(),
            [
                "binDir=\"/usr/local/bin\"",
                "containerd.cniBinDir=\"/opt/cni/bin\""
            ]
        );
        let e = fills(
            &dev(&["versions.kubernetes=v1.2.3/../x"]),
            Some(Path::new("/c")),
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
    }
}
