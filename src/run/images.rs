//! Images on the node, with the `ctr` that ships with the containerd binary: the ImportImages hook
//! (image archives into containerd's `k8s.io` namespace, the CRI's, so pods run without a registry),
//! the LoadRegistry hook (their images from there to the node's local registry, which every pull of
//! containerd goes to), and `kubeunit images load` (more archives into both, while it runs).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::archive::{self, Archive, Reference};
use super::env::Env;
use super::probe;
use crate::components::{Component, Hook};
use crate::error::Error;
use crate::spec::plan::host_port;
use crate::spec::{paths, Plan};
use crate::systemd::Systemd;

/// Every archive to import: the profile's `images`, then `STATE/images/*.tar` by name.
pub fn archives(plan: &Plan) -> Vec<PathBuf> {
    let mut out = plan.profile.images.clone();
    let dir = plan.state_dir.join(paths::IMAGES);
    let mut dropped: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "tar"))
                .collect()
        })
        .unwrap_or_default();
    dropped.sort();
    out.extend(dropped);
    out
}

/// `ctr` next to the containerd binary (containerd's release and build put them side by side).
fn ctr(plan: &Plan, containerd: &Component) -> PathBuf {
    let binary = containerd.binary_path(plan);
    binary.parent().unwrap_or(Path::new("/")).join("ctr")
}

/// `ctr` with the environment's socket and the CRI's namespace.
fn ctr_command(plan: &Plan, ctr: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(ctr);
    cmd.arg("--address")
        .arg(&plan.node().containerd_socket)
        .args(["--namespace", "k8s.io"]);
    cmd
}

fn cannot_run(ctr: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::Preflight {
        message: format!("cannot run {}: {e}", ctr.display()),
        fix: "install ctr next to the containerd binary (containerd's build makes both)".into(),
    }
}

/// Image references in the namespace (digest-only names left out).
fn references(plan: &Plan, ctr: &Path) -> Result<Vec<String>, Error> {
    let out = ctr_command(plan, ctr)
        .args(["images", "ls", "-q"])
        .output()
        .map_err(cannot_run(ctr))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("sha256:"))
        .map(String::from)
        .collect())
}

/// The ImportImages hook: every archive of the profile. (ctr's own progress output is for
/// terminals; the image list is what counts.)
pub fn import(plan: &Plan, containerd: &Component) -> Result<Vec<String>, Error> {
    // A further node pulls through the registry, which the first node's containerd fills (an
    // import on every node would take as long, and as much disk, once per node).
    if plan.node_index > 0 && plan.enabled("registry") {
        return Ok(vec![]);
    }
    import_archives(plan, containerd, &archives(plan))
}

/// Import `archives`; returns the references that were not in containerd before.
fn import_archives(
    plan: &Plan,
    containerd: &Component,
    archives: &[PathBuf],
) -> Result<Vec<String>, Error> {
    let ctr = ctr(plan, containerd);
    let before = references(plan, &ctr)?;
    for archive in archives {
        // Not unpacked here: the CRI unpacks an image into its snapshotter when a container first
        // needs it (internal/cri/opts WithNewSnapshot), so `start` (whose kubelet waits for this
        // import) pays only for copying the archives, and an image no pod runs is never unpacked.
        let out = ctr_command(plan, &ctr)
            .args(["images", "import", "--no-unpack"])
            .arg(archive)
            .output()
            .map_err(cannot_run(&ctr))?;
        if !out.status.success() {
            return Err(Error::Start(format!(
                "importing {} into containerd failed: {}",
                archive.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    let mut imported = references(plan, &ctr)?;
    imported.retain(|r| !before.contains(r));
    Ok(imported)
}

/// The enabled component whose hook imports the images (containerd): where they come from.
fn importer(plan: &Plan) -> Option<&'static Component> {
    crate::components::enabled(crate::components::COMPONENTS, &plan.profile)
        .find(|c| c.after_healthy == Some(Hook::ImportImages))
}

/// Where the registry serves: its probe's port, at the node's address when it runs in the node's
/// network namespace (where containerd, which pushes and pulls, runs too).
pub fn registry_host(plan: &Plan, registry: &Component) -> String {
    let port = registry.probe.map(|p| p.port.of(plan)).unwrap_or(0);
    let ip = if registry.netns {
        plan.node().link.node.into()
    } else {
        plan.local
    };
    host_port(ip, port)
}

/// The LoadRegistry hook: the images the profile's archives name, from containerd to `registry`.
pub fn load_registry(plan: &Plan, registry: &Component) -> Result<Vec<String>, Error> {
    let containerd = importer(plan).ok_or_else(|| {
        Error::Internal(format!(
            "{} loads images from containerd, which this environment lacks",
            registry.name
        ))
    })?;
    let mut names = Vec::new();
    for path in archives(plan) {
        let found = archive::names(&path).map_err(|problem| Error::ImageArchive {
            path: path.clone(),
            problem,
        })?;
        names.extend(found);
    }
    push(plan, containerd, registry, &names)
}

/// Push `names` (as containerd's `k8s.io` namespace has them) to `registry`, each under its
/// repository path and tag: `registry.k8s.io/e2e-test-images/agnhost:2.63.0` becomes
/// `HOST:PORT/e2e-test-images/agnhost:2.63.0`, which is where containerd's pulls of that name go
/// (the registry hosts config). A name without a tag (a digest only) has nothing to be pulled by
/// there. containerd does the pushing (ctr's transfer service), and sends no blob or manifest
/// that the registry has already: a second start pushes nothing. Returns the pushed references.
fn push(
    plan: &Plan,
    containerd: &Component,
    registry: &Component,
    names: &[String],
) -> Result<Vec<String>, Error> {
    let ctr = ctr(plan, containerd);
    let host = registry_host(plan, registry);
    let have = references(plan, &ctr)?;
    // Only this platform's content was imported (ctr's default), so only it is pushed.
    let platform = format!("linux/{}", archive::go_arch());
    let mut pushed = Vec::new();
    let unique: BTreeSet<&String> = names.iter().collect();
    for name in unique {
        if !have.contains(name) {
            return Err(Error::Start(format!(
                "containerd has no image {name} after importing the archives that name it"
            )));
        }
        let r = Reference::parse(name).map_err(|why| {
            Error::Internal(format!(
                "containerd's image name {name:?} is invalid: {why}"
            ))
        })?;
        let Some(tag) = r.tag else {
            continue;
        };
        let remote = format!("{host}/{}:{tag}", r.path);
        let out = ctr_command(plan, &ctr)
            .args(["images", "push", "--plain-http", "--platform", &platform])
            .arg(&remote)
            .arg(name)
            .output()
            .map_err(cannot_run(&ctr))?;
        if !out.status.success() {
            return Err(Error::Start(format!(
                "pushing {name} to the registry at {host} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        pushed.push(remote);
    }
    Ok(pushed)
}

/// What `kubeunit images load` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadReport {
    pub state_dir: PathBuf,
    /// The archives, checked, with the names of their images.
    pub archives: Vec<Archive>,
    /// Names containerd did not have before.
    pub imported: Vec<String>,
    /// Where the registry serves (`None`: the environment has none).
    pub registry: Option<String>,
    /// References pushed to the registry.
    pub pushed: Vec<String>,
}

/// The environment's component that imports images (containerd: the first node's) and the one
/// that serves them (the registry, if any), by their hooks.
fn node_image_units(env: &Env) -> Result<(&UnitEntry, Option<&UnitEntry>), Error> {
    let with_hook = |hook: Hook| {
        env.units
            .iter()
            .find(|(i, _)| i.component.after_healthy == Some(hook))
    };
    let Some(containerd) = with_hook(Hook::ImportImages) else {
        return Err(Error::Usage {
            message: format!(
                "environment '{}' has no node: no containerd to load images into",
                env.plan.name()
            ),
            fix: "load images into an environment with a node (profile dev)".into(),
        });
    };
    Ok((containerd, with_hook(Hook::LoadRegistry)))
}

type UnitEntry = (crate::components::Instance<'static>, crate::unit::UnitFile);

/// Read every archive at `paths` whole and check it (`archive::check`), its images named: the
/// first that is not refuses them all, before anything is loaded.
pub fn check_archives(env: &Env, paths: &[PathBuf]) -> Result<Vec<Archive>, Error> {
    node_image_units(env)?;
    paths
        .iter()
        .map(|path| {
            archive::check(path)
                .and_then(|a| {
                    if a.names.is_empty() {
                        Err(archive::Problem::Unnamed)
                    } else {
                        Ok(a)
                    }
                })
                .map_err(|problem| Error::ImageArchive {
                    path: path.clone(),
                    problem,
                })
        })
        .collect()
}

/// Put checked `archives` (`check_archives`) into the running environment's containerd and
/// registry.
pub async fn load(env: &Env, sd: &Systemd, archives: Vec<Archive>) -> Result<LoadReport, Error> {
    let plan = &env.plan;
    let (containerd, registry) = node_image_units(env)?;
    for (c, unit) in [Some(containerd), registry].into_iter().flatten() {
        if !sd
            .state(&unit.name)
            .await?
            .is_some_and(|s| s.active_state.is_running())
        {
            return Err(Error::Preflight {
                message: format!(
                    "environment '{}' is not running ({} is inactive): nothing loaded",
                    plan.name(),
                    c.name
                ),
                fix: format!(
                    "start it first: kubeunit start --state-dir {}",
                    plan.state_dir.display()
                ),
            });
        }
    }
    if let Some((c, _)) = registry {
        probe::probe_async(&c.plan, c.component, Duration::from_secs(5))
            .await
            .map_err(|why| Error::Preflight {
                message: format!("{} is not healthy, nothing loaded: {why}", c.name),
                fix: format!(
                    "see its log: kubeunit logs {} --state-dir {}",
                    c.name,
                    plan.state_dir.display()
                ),
            })?;
    }
    let paths: Vec<PathBuf> = archives.iter().map(|a| a.path.clone()).collect();
    let (containerd, _) = containerd;
    let mut imported = import_archives(&containerd.plan, containerd.component, &paths)?;
    // Without a registry, each node's containerd has only what is imported into it.
    if registry.is_none() {
        for (other, _) in env.units.iter().filter(|(i, _)| {
            i.component.after_healthy == Some(Hook::ImportImages) && i.name != containerd.name
        }) {
            for r in import_archives(&other.plan, other.component, &paths)? {
                if !imported.contains(&r) {
                    imported.push(r);
                }
            }
        }
    }
    let names: Vec<String> = archives.iter().flat_map(|a| a.names.clone()).collect();
    let pushed = match registry {
        Some((c, _)) => push(&c.plan, containerd.component, c.component, &names)?,
        None => vec![],
    };
    Ok(LoadReport {
        state_dir: plan.state_dir.clone(),
        archives,
        imported,
        registry: registry.map(|(c, _)| registry_host(&c.plan, c.component)),
        pushed,
    })
}
