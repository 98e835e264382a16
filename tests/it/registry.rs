//! The node's local registry, on real systemd with the pinned binaries: `start` loads it with the
//! profile's images, every pull of the node goes to it (a pod with imagePullPolicy: Always runs),
//! `kubeunit images load` puts a fresh archive into containerd and the registry (and refuses a
//! missing or damaged one without changing anything), `stop` leaves nothing of it, and two dev
//! environments side by side each have their own.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::container::{dev_args, gen_in, offline_image_refs, Container, Env};
use crate::common::internet::push_archive;
use crate::common::ports::Ports;
use crate::common::*;

impl Env<'_> {
    /// A recorded value of the state dir's profile.yaml (`containerd.socket`).
    fn recorded(&self, key: &str) -> String {
        let text = std::fs::read_to_string(self.state.join("profile.yaml")).unwrap();
        let mut v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        for k in key.split('.') {
            v = v[k].clone();
        }
        v.as_str()
            .unwrap_or_else(|| panic!("{key} in profile.yaml"))
            .into()
    }

    /// `HOST:PORT` the registry serves at, as its config has it.
    fn registry(&self) -> String {
        let text = std::fs::read_to_string(self.state.join("config/registry.yml")).unwrap();
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        v["http"]["addr"].as_str().unwrap().to_string()
    }

    /// `ctr -n k8s.io ARGS...` on the environment's containerd, in the container.
    fn ctr(&self, args: &[&str]) -> Output {
        let ctr = built_dir("containerd-").join("ctr");
        let socket = self.recorded("containerd.socket");
        let mut argv = vec![
            ctr.to_str().unwrap(),
            "--address",
            &socket,
            "--namespace",
            "k8s.io",
        ];
        argv.extend_from_slice(args);
        self.c.run(&argv)
    }

    /// containerd's image names, sorted.
    fn images(&self) -> Vec<String> {
        let out = self.ctr(&["images", "ls", "-q"]);
        assert!(out.status.success(), "ctr images ls: {}", text(&out));
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect();
        names.sort();
        names
    }

    /// A GET on the registry from this host, across the node link: (status line, body).
    fn get(&self, path: &str) -> (String, String) {
        // Only while the node's link is there: without it the node's address is routed off this
        // host.
        let netns = self.c.run(&["ip", "netns", "list"]);
        assert!(
            text(&netns).contains(&unit_prefix(&self.state)),
            "the node is not up: {}",
            text(&netns)
        );
        let mut s = std::net::TcpStream::connect(self.registry())
            .unwrap_or_else(|e| panic!("connect to the registry at {}: {e}", self.registry()));
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: registry\r\n\r\n").unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        (
            head.lines().next().unwrap_or("").to_string(),
            body.to_string(),
        )
    }

    /// The registry's repositories with their tags: `busybox:1.37.0`, sorted.
    fn registry_tags(&self) -> Vec<String> {
        let (status, body) = self.get("/v2/_catalog");
        assert!(status.contains(" 200 "), "{status}: {body}");
        let catalog: serde_json::Value = serde_json::from_str(&body).unwrap();
        let mut out = Vec::new();
        for repo in catalog["repositories"].as_array().unwrap() {
            let repo = repo.as_str().unwrap();
            let (_, body) = self.get(&format!("/v2/{repo}/tags/list"));
            let tags: serde_json::Value = serde_json::from_str(&body).unwrap();
            for t in tags["tags"].as_array().into_iter().flatten() {
                out.push(format!("{repo}:{}", t.as_str().unwrap()));
            }
        }
        out.sort();
        out
    }

    /// The registry's journal (what it served).
    fn registry_log(&self) -> String {
        let out = self.c.run(&[
            "journalctl",
            "--no-pager",
            "-o",
            "cat",
            "-u",
            &unit(&self.state, "registry"),
        ]);
        text(&out)
    }

    /// A pod of `image`, pulled always, that runs `script`; waits until it is Ready.
    fn run_pod(&self, name: &str, image: &str, script: &str) {
        self.run_pod_on(name, image, script, None)
    }

    /// `run_pod` on node `node` (`spec.nodeName`), or where the scheduler puts it.
    fn run_pod_on(&self, name: &str, image: &str, script: &str, node: Option<&str>) {
        let node_name = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
        let manifest = self.state.parent().unwrap().join(format!("{name}.yaml"));
        std::fs::write(
            &manifest,
            format!(
                r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
{node_name}  containers:
  - name: c
    image: {image}
    imagePullPolicy: Always
    command: [sh, -c, {script:?}]
"#
            ),
        )
        .unwrap();
        // The default ServiceAccount comes a moment after the API server.
        wait_for("the pod created", Duration::from_secs(60), || {
            self.kubectl(&["apply", "-f", &manifest.to_string_lossy()])
                .status
                .success()
        });
        let out = self.kubectl(&[
            "wait",
            "--for=condition=Ready",
            &format!("pod/{name}"),
            "--timeout=120s",
        ]);
        assert!(
            out.status.success(),
            "pod {name} ({image}) not Ready: {}\n{}",
            text(&out),
            self.kubectl_ok(&["describe", "pod", name])
        );
    }
}

fn kubectl_path(version: &str) -> PathBuf {
    cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl")
}

/// A docker archive of a one-layer image `reference` (scripts/docker-archive.py) whose command
/// prints `marker`: busybox taken from the offline test image, and a file no other image has.
fn fresh_archive(dir: &Path, file: &str, reference: &str, marker: &str) -> PathBuf {
    let busybox = dir.join("busybox");
    if !busybox.exists() {
        std::fs::write(&busybox, busybox_binary()).unwrap();
    }
    let marker_file = dir.join(format!("{file}.marker"));
    // A whole line: the container's log holds a partial one back while the pod runs.
    std::fs::write(&marker_file, format!("{marker}\n")).unwrap();
    let out_path = dir.join(file);
    let out = run(Command::new("python3")
        .arg(script("docker-archive.py"))
        .arg(&out_path)
        .args([
            "--ref",
            reference,
            "--arch",
            kubeunit::run::archive::go_arch(),
        ])
        .args(["--cmd", r#"["sh"]"#])
        .arg("--file")
        .arg(format!("{}:/bin/busybox:755", busybox.display()))
        .args(["--symlink", "/bin/sh:busybox"])
        .args(["--symlink", "/bin/cat:busybox"])
        .args(["--symlink", "/bin/sleep:busybox"])
        .arg("--file")
        .arg(format!("{}:/marker:644", marker_file.display())));
    assert!(out.status.success(), "docker-archive.py: {}", text(&out));
    out_path
}

/// bin/busybox of the offline test image (its one layer).
fn busybox_binary() -> Vec<u8> {
    let archive = built_dir("images-").join("busybox.tar");
    let mut outer = tar::Archive::new(std::fs::File::open(&archive).unwrap());
    for e in outer.entries().unwrap() {
        let e = e.unwrap();
        if !e.path().unwrap().to_string_lossy().ends_with("layer.tar") {
            continue;
        }
        let mut layer = tar::Archive::new(e);
        for f in layer.entries().unwrap() {
            let mut f = f.unwrap();
            if f.path().unwrap().to_string_lossy() == "bin/busybox" {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes).unwrap();
                return bytes;
            }
        }
    }
    panic!("no bin/busybox in {}", archive.display());
}

fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    format!("{}-{}", std::process::id(), t.as_nanos())
}

#[test]
fn dev_pulls_from_its_registry_and_images_load_into_it() {
    let _turn = node_lock();
    let c = Container::boot_node("registry");
    let ports = Ports::allocate();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let env = Env {
        c: &c,
        state: gen_in(&c, "dev", &ports, &dev_args(&version)),
        kubectl: kubectl_path(&version),
    };
    let registry = env.registry();

    // Start loads the registry with the profile's three images, progress as for the import.
    let t0 = Instant::now();
    let out = env.ku(&["start", "--timeout", "180"]);
    let t = text(&out);
    assert!(out.status.success(), "start:\n{t}");
    eprintln!("start: {:.1}s\n{t}", t0.elapsed().as_secs_f64());
    let refs = offline_image_refs();
    assert!(
        t.contains(&format!("load registry ({})", refs.len())),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "loaded {} images into the node's registry",
            refs.len()
        )),
        "{t}"
    );
    let test_image = pinned("TEST_IMAGE")[0].clone();
    // Each under its repository path: the name without its registry.
    let mut paths: Vec<String> = refs
        .iter()
        .map(|r| r.split_once('/').map_or(r.clone(), |(_, p)| p.to_string()))
        .collect();
    paths.sort();
    assert!(paths.contains(&format!("busybox:{}", pinned("BUSYBOX_VERSION")[0])));
    assert_eq!(
        env.registry_tags(),
        paths,
        "the profile's images under their repository paths"
    );

    // (a) A pod that always pulls an image of the profile's archives runs: containerd no longer
    // has the image, so it came from the registry, which says so.
    let out = env.ctr(&["images", "rm", &test_image]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!env.images().contains(&test_image));
    let logged = env.registry_log().len();
    env.run_pod("always", &test_image, "echo pulled; exec sleep 3600");
    assert_eq!(env.kubectl_ok(&["logs", "always"]).trim(), "pulled");
    let log = env.registry_log();
    // containerd asks the mirror with the name's own registry as `ns` (a push does not).
    assert!(
        log[logged..].contains(&format!(
            "/v2/busybox/manifests/{}?ns=kubeunit.local",
            pinned("BUSYBOX_VERSION")[0]
        )),
        "the registry served the pull:\n{}",
        &log[logged..]
    );
    assert!(env.images().contains(&test_image));

    // (b) A fresh archive: into containerd and the registry, and a pod of it runs.
    let work = env.state.parent().unwrap().to_path_buf();
    let marker = nonce();
    let fresh = fresh_archive(&work, "fresh.tar", "kubeunit.local/fresh:1", &marker);
    let t0 = Instant::now();
    let out = env.ku(&["images", "load", &fresh.to_string_lossy(), "-o", "json"]);
    let load_secs = t0.elapsed().as_secs_f64();
    assert!(out.status.success(), "images load: {}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["archives"][0]["names"][0], "kubeunit.local/fresh:1");
    assert_eq!(report["imported"][0], "kubeunit.local/fresh:1");
    assert_eq!(report["registry"], registry.as_str());
    assert_eq!(report["pushed"][0], format!("{registry}/fresh:1"));
    assert!(env.registry_tags().contains(&"fresh:1".to_string()));
    env.run_pod(
        "fresh",
        "kubeunit.local/fresh:1",
        "cat /marker; exec sleep 3600",
    );
    assert_eq!(env.kubectl_ok(&["logs", "fresh"]).trim(), marker);
    // Loading it again pushes nothing new (the registry has every blob): quick.
    let t0 = Instant::now();
    let out = env.ku(&["images", "load", &fresh.to_string_lossy()]);
    let again_secs = t0.elapsed().as_secs_f64();
    assert!(out.status.success(), "images load again: {}", text(&out));
    assert!(text(&out).contains("none new"), "{}", text(&out));
    eprintln!("images load: {load_secs:.2}s, again: {again_secs:.2}s");

    // Two loads at once of two fresh archives: one waits for the other (the state dir's lock),
    // and both images end up in containerd and in the registry.
    let pair: Vec<PathBuf> = ["a", "b"]
        .iter()
        .map(|n| {
            fresh_archive(
                &work,
                &format!("together-{n}.tar"),
                &format!("kubeunit.local/together-{n}:1"),
                &nonce(),
            )
        })
        .collect();
    std::thread::scope(|s| {
        for archive in &pair {
            let env = &env;
            s.spawn(move || {
                let out = env.ku(&["images", "load", &archive.to_string_lossy()]);
                assert!(
                    out.status.success(),
                    "concurrent images load: {}",
                    text(&out)
                );
            });
        }
    });
    for n in ["a", "b"] {
        assert!(
            env.images()
                .contains(&format!("kubeunit.local/together-{n}:1")),
            "{:?}",
            env.images()
        );
        assert!(env.registry_tags().contains(&format!("together-{n}:1")));
    }

    // (c) A missing, a truncated and a garbage archive are refused with exit 2 naming the file,
    // before the good archive next to them goes anywhere.
    let other = fresh_archive(&work, "other.tar", "kubeunit.local/other:1", &nonce());
    let bytes = std::fs::read(&other).unwrap();
    let truncated = work.join("truncated.tar");
    std::fs::write(&truncated, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let garbage = work.join("garbage.tar");
    std::fs::write(&garbage, vec![0x5a; 8192]).unwrap();
    let missing = work.join("missing.tar");
    let images_before = env.images();
    let tags_before = env.registry_tags();
    for bad in [&missing, &truncated, &garbage] {
        let out = env.ku(&[
            "images",
            "load",
            &other.to_string_lossy(),
            &bad.to_string_lossy(),
        ]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{}: {t}", bad.display());
        assert!(
            t.contains(&format!("image archive {}:", bad.display())) && t.contains("fix:"),
            "{t}"
        );
    }
    assert_eq!(env.images(), images_before, "containerd unchanged");
    assert_eq!(env.registry_tags(), tags_before, "registry unchanged");

    // A second start (everything running) loads the registry again, quickly.
    let t0 = Instant::now();
    let out = env.ku(&["start"]);
    assert!(out.status.success(), "{}", text(&out));
    eprintln!("start (running): {:.2}s", t0.elapsed().as_secs_f64());

    // (d) stop leaves nothing of the registry: no process, no listener, no mount, no unit.
    let binary = built_dir("registry-").join("registry");
    let out = env.ku(&["stop"]);
    assert!(out.status.success(), "stop: {}", text(&out));
    assert!(!text(&out).contains("left behind"), "{}", text(&out));
    let procs = c.sh(&format!("pgrep -f '^{} ' | wc -l", binary.display()));
    assert_eq!(String::from_utf8_lossy(&procs.stdout).trim(), "0");
    // Its listener was the node namespace's, which is gone (no connect: with the link gone the
    // node's address would be routed off this host); nothing took the port here either.
    let netns = c.run(&["ip", "netns", "list"]);
    assert!(
        !text(&netns).contains(&unit_prefix(&env.state)),
        "{}",
        text(&netns)
    );
    let port = registry.rsplit(':').next().unwrap();
    let listeners = c.run(&["ss", "-Htln", &format!("sport = :{port}")]);
    assert_eq!(text(&listeners).trim(), "", "nothing listens on {port}");
    let mounts = c.sh(&format!(
        "grep -c ' {}' /proc/self/mountinfo",
        env.state.join("data/registry").display()
    ));
    assert_eq!(String::from_utf8_lossy(&mounts.stdout).trim(), "0");
    assert_eq!(c.list_units(&unit(&env.state, "registry")), "");
    // Not running: loading is refused, naming what to do.
    let out = env.ku(&["images", "load", &other.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("is not running"), "{}", text(&out));
    assert!(text(&out).contains("kubeunit start"), "{}", text(&out));

    // Its storage is runtime data: a start has it back, destroy removes it.
    let out = env.ku(&["start", "--timeout", "180"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(env.registry_tags().contains(&"fresh:1".to_string()));
    let out = env.ku(&["destroy"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!env.state.join("data/registry").exists());
}

/// (e) Two dev environments side by side, each with its own registry: images loaded into one
/// are in neither the other's registry nor its containerd.
#[test]
fn side_by_side_environments_have_their_own_registries() {
    let _turn = node_lock();
    let c = Container::boot_node("registry-two");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let ports = [Ports::allocate(), Ports::allocate()];
    // Their own pod and Service networks, as the hosts' routes to both need.
    let networks = [
        ("10.88.0.0/16", "10.0.0.0/24"),
        ("10.89.0.0/16", "10.0.1.0/24"),
    ];
    let envs: Vec<Env> = ["one", "two"]
        .into_iter()
        .zip(&ports)
        .zip(networks)
        .map(|((name, ports), (pods, services))| {
            let mut args = dev_args(&version);
            for set in [
                format!("name={name}"),
                format!("network.podCIDR={pods}"),
                format!("network.serviceCIDR={services}"),
            ] {
                args.extend(["--set".into(), set]);
            }
            Env {
                c: &c,
                state: gen_in(&c, name, ports, &args),
                kubectl: kubectl_path(&version),
            }
        })
        .collect();
    std::thread::scope(|s| {
        for e in &envs {
            s.spawn(|| {
                let out = e.ku(&["start", "--timeout", "180"]);
                assert!(out.status.success(), "start:\n{}", text(&out));
            });
        }
    });
    assert_ne!(envs[0].registry(), envs[1].registry());
    let before = envs[1].registry_tags();
    let work = envs[0].state.parent().unwrap().to_path_buf();
    let marker = nonce();
    let fresh = fresh_archive(&work, "fresh.tar", "kubeunit.local/fresh:1", &marker);
    let out = envs[0].ku(&["images", "load", &fresh.to_string_lossy()]);
    assert!(out.status.success(), "images load: {}", text(&out));
    assert!(envs[0].registry_tags().contains(&"fresh:1".to_string()));
    assert!(envs[0]
        .images()
        .contains(&"kubeunit.local/fresh:1".to_string()));
    assert_eq!(
        envs[1].registry_tags(),
        before,
        "the other registry has not got it"
    );
    assert!(!envs[1]
        .images()
        .contains(&"kubeunit.local/fresh:1".to_string()));
    // Each pulls from its own: the first runs it, always pulled.
    envs[0].run_pod(
        "fresh",
        "kubeunit.local/fresh:1",
        "cat /marker; exec sleep 3600",
    );
    assert_eq!(envs[0].kubectl_ok(&["logs", "fresh"]).trim(), marker);
    for e in &envs {
        let out = e.ku(&["stop"]);
        assert!(out.status.success(), "stop: {}", text(&out));
        assert_eq!(c.list_units(&unit(&e.state, "registry")), "");
    }
}

/// `gen` of `profile` (a file extending dev or multi) into WORK/`dir` on the pinned binaries, with
/// the offline switch lifted: the test's registries are the simulated internet's.
fn gen_online<'c>(
    c: &'c Container,
    ports: &Ports,
    profile: &Path,
    dir: &str,
    version: &str,
) -> Env<'c> {
    let state = c.work.join(dir);
    let mut args = dev_args(version);
    args[1] = profile.to_string_lossy().into();
    let mut argv: Vec<String> = vec!["gen".into(), "--state-dir".into()];
    argv.push(state.to_string_lossy().into());
    argv.extend(ports.sets());
    argv.extend(args);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = c.kubeunit_online(&argv);
    assert!(out.status.success(), "gen: {}", text(&out));
    Env {
        c,
        state,
        kubectl: kubectl_path(version),
    }
}

/// Every line of the container's journal and every process's command line, for a secret.
fn journal_and_argv(c: &Container) -> String {
    let journal = text(&c.run(&["journalctl", "--no-pager", "-o", "verbose"]));
    let argv = text(&c.run(&["ps", "-eo", "args"]));
    format!("{journal}\n{argv}")
}

#[test]
fn dev_pulls_what_only_the_upstream_has_through_its_cache_and_keeps_it() {
    use crate::common::internet::{Internet, Site};
    use std::os::unix::fs::PermissionsExt;
    let _turn = node_lock();
    let inet = Internet::start(13);
    let (user, password) = ("sim-user", "sim-pw-0x5EC12E7");
    // docker.io's stand-in is open, registry.k8s.io's wants a password: each has an image no
    // one else has.
    let hub = inet.registry_on(Site::DockerHub, None);
    let locked = inet.registry_on(Site::Registry, Some((user, password)));
    let c = Container::boot_node("pull");
    let ports = Ports::allocate();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let work = c.work.clone();
    let (open_marker, locked_marker) = (nonce(), nonce());
    let agent = inet.agent(Duration::from_secs(60));
    let archive = fresh_archive(&work, "hub.tar", "sim-only:1", &open_marker);
    push_archive(&agent, &hub, "library/sim-only", "1", &archive, None);
    let archive = fresh_archive(&work, "locked.tar", "locked:1", &locked_marker);
    push_archive(
        &agent,
        &locked,
        "sim/locked",
        "1",
        &archive,
        Some((user, password)),
    );

    // The profile: each name's cache pulls from its stand-in, trusting the test CA; the password
    // in a file outside the state dir.
    let password_file = work.join("locked.password");
    std::fs::write(&password_file, format!("{password}\n")).unwrap();
    std::fs::set_permissions(&password_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The container sees its work dir only.
    let ca = work.join("sim-ca.pem");
    std::fs::copy(inet.ca_pem(), &ca).unwrap();
    let profile = work.join("pull.yaml");
    std::fs::write(
        &profile,
        format!(
            "extends: dev\nregistries:\n  mirrors:\n    docker.io: {{endpoint: [https://{hub}]}}\n    registry.k8s.io: {{endpoint: [https://{locked}]}}\n  configs:\n    {hub}: {{tls: {{caFile: {ca}}}}}\n    {locked}:\n      auth: {{username: {user}, passwordFile: {pw}}}\n      tls: {{caFile: {ca}}}\n",
            ca = ca.display(),
            pw = password_file.display(),
        ),
    )
    .unwrap();
    let env = gen_online(&c, &ports, &profile, "dev", &version);
    let t0 = Instant::now();
    let out = env.ku(&["start", "--timeout", "180"]);
    assert!(out.status.success(), "start: {}", text(&out));
    eprintln!("start: {:.1}s", t0.elapsed().as_secs_f64());

    // (a) Pods of images only the upstreams have run: through the caches.
    let t0 = Instant::now();
    env.run_pod("open", "sim-only:1", "cat /marker; exec sleep 3600");
    env.run_pod(
        "locked",
        "registry.k8s.io/sim/locked:1",
        "cat /marker; exec sleep 3600",
    );
    eprintln!(
        "two pods through the caches: {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(env.kubectl_ok(&["logs", "open"]).trim(), open_marker);
    assert_eq!(env.kubectl_ok(&["logs", "locked"]).trim(), locked_marker);
    let asked = inet.requests(Site::DockerHub);
    assert!(
        asked
            .iter()
            .any(|p| p.starts_with("/v2/library/sim-only/manifests/1")),
        "{asked:?}"
    );
    assert!(
        inet.registry_requests()
            .iter()
            .any(|p| p.starts_with("/v2/sim/locked/manifests/1")),
        "{:?}",
        inet.registry_requests()
    );
    // The password: in no unit, command line, journal line or world-readable file.
    for line in journal_and_argv(&c).lines() {
        assert!(!line.contains(password), "{line}");
    }
    let units = text(&c.run(&["sh", "-c", "systemctl show '*kubeunit*' 2>&1"]));
    assert!(!units.contains(password), "systemctl show names it");
    for e in walkdir::WalkDir::new(&env.state)
        .into_iter()
        .map(|e| e.unwrap())
    {
        let mode = e.metadata().unwrap().permissions().mode();
        if e.file_type().is_file() && mode & 0o004 != 0 {
            let body = std::fs::read(e.path()).unwrap();
            assert!(
                !String::from_utf8_lossy(&body).contains(password),
                "{} is world-readable and holds the password",
                e.path().display()
            );
        }
    }

    // (a2) The cache pulls with those credentials for whoever asks it, so only the nodes may: root on
    // this host gets the private image from it (kubeunit's probe is root's), a user of this host
    // does not, nor does a namespace that routes the node network to this host (the simulated
    // internet's: a stand-in for a machine of the LAN). The pods above pulled through it.
    let config = std::fs::read_to_string(
        env.state
            .join("config/registry-cache/registry.k8s.io/config.yml"),
    )
    .unwrap();
    let addr = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("addr: "))
        .expect("the cache's http.addr")
        .trim_matches('"')
        .to_string();
    let manifest = format!("http://{addr}/v2/sim/locked/manifests/1");
    // Python's urllib (the simulated internet's servers need /usr/bin/python3 anyway, and a user
    // other than root runs it): the status printed; a refused connection named.
    let get = "import sys, urllib.request as u; \
               r = u.urlopen(u.Request(sys.argv[1], headers={'Accept': sys.argv[2]}), timeout=10); \
               print(r.status)";
    let accept = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
    let ask = |prefix: &[&str]| {
        let mut argv: Vec<&str> = prefix.to_vec();
        argv.extend(["/usr/bin/python3", "-c", get, &manifest, accept]);
        let out = std::process::Command::new(argv[0])
            .args(&argv[1..])
            .output()
            .unwrap();
        (out.status.code(), text(&out))
    };
    let (code, said) = ask(&["env"]);
    assert_eq!((code, said.trim()), (Some(0), "200"), "root: {said}");
    let unprivileged = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    let netns = ["ip", "netns", "exec", inet.netns()];
    for (who, prefix) in [("a user", &unprivileged[..]), ("the LAN", &netns[..])] {
        let (code, said) = ask(prefix);
        assert!(
            code != Some(0) && said.contains("Connection refused"),
            "{who} was not refused by the cache's filter: {code:?} {said}"
        );
    }

    // (b) The upstreams go away; after a restart the pods' images still come, from the caches.
    env.ku_ok(&["stop"]);
    inet.stop(Site::DockerHub);
    inet.stop(Site::Registry);
    let cache_log = || {
        let unit = unit(&env.state, "registry-cache@docker.io");
        text(&c.run(&["journalctl", "--no-pager", "-o", "cat", "-u", &unit]))
            .matches("/v2/library/sim-only/manifests/1")
            .count()
    };
    let served_before = cache_log();
    let out = env.ku(&["start", "--timeout", "180"]);
    assert!(
        out.status.success(),
        "start without the upstreams: {}",
        text(&out)
    );
    for image in [
        "docker.io/library/sim-only:1",
        "registry.k8s.io/sim/locked:1",
    ] {
        let out = env.ctr(&["images", "rm", image]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let _ = env.kubectl(&["delete", "pod", "open", "locked", "--wait=false"]);
    env.run_pod("open-again", "sim-only:1", "cat /marker; exec sleep 3600");
    env.run_pod(
        "locked-again",
        "registry.k8s.io/sim/locked:1",
        "cat /marker; exec sleep 3600",
    );
    assert_eq!(env.kubectl_ok(&["logs", "open-again"]).trim(), open_marker);
    assert_eq!(
        env.kubectl_ok(&["logs", "locked-again"]).trim(),
        locked_marker
    );
    // The local registry has no such image: docker.io's cache answered, from what it kept.
    assert!(
        cache_log() > served_before,
        "the cache served the pull again"
    );
    env.ku_ok(&["stop"]);
    assert_eq!(inet.packets_out(), 0);
    inet.assert_no_leak();
}

#[test]
fn a_worker_pulls_through_the_caches_on_the_first_nodes_link() {
    use crate::common::internet::{Internet, Site};
    let _turn = node_lock();
    let inet = Internet::start(14);
    let hub = inet.registry_on(Site::DockerHub, None);
    let c = Container::boot_node("pull-multi");
    let ports = Ports::allocate();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let work = c.work.clone();
    let marker = nonce();
    let agent = inet.agent(Duration::from_secs(60));
    let archive = fresh_archive(&work, "hub.tar", "sim-only:1", &marker);
    push_archive(&agent, &hub, "library/sim-only", "1", &archive, None);
    let ca = work.join("sim-ca.pem");
    std::fs::copy(inet.ca_pem(), &ca).unwrap();
    // Both default names to the stand-in: nothing of the test may go to the real ones.
    let profile = work.join("pull-multi.yaml");
    std::fs::write(
        &profile,
        format!(
            "extends: multi\nnodes:\n  - {{name: control-plane, role: control-plane}}\n  - {{role: worker}}\nregistries:\n  mirrors:\n    docker.io: {{endpoint: [https://{hub}]}}\n    registry.k8s.io: {{endpoint: [https://{hub}]}}\n  configs:\n    {hub}: {{tls: {{caFile: {}}}}}\n",
            ca.display()
        ),
    )
    .unwrap();
    let env = gen_online(&c, &ports, &profile, "multi", &version);
    let out = env.ku(&["start", "--timeout", "240"]);
    assert!(out.status.success(), "start: {}", text(&out));
    // worker-1's containerd reaches docker.io's cache across its own link, on this host.
    env.run_pod_on(
        "on-worker",
        "sim-only:1",
        "cat /marker; exec sleep 3600",
        Some("worker-1"),
    );
    assert_eq!(env.kubectl_ok(&["logs", "on-worker"]).trim(), marker);
    let asked = inet.requests(Site::DockerHub);
    assert!(
        asked
            .iter()
            .any(|p| p.starts_with("/v2/library/sim-only/manifests/1")),
        "{asked:?}"
    );
    // With the upstream gone, another node, whose containerd never pulled it, gets the image
    // from the cache (nodeName: the control-plane node's NoSchedule taint is the scheduler's).
    inet.stop(Site::DockerHub);
    env.run_pod_on(
        "on-control-plane",
        "sim-only:1",
        "cat /marker; exec sleep 3600",
        Some("control-plane"),
    );
    assert_eq!(env.kubectl_ok(&["logs", "on-control-plane"]).trim(), marker);
    env.ku_ok(&["stop"]);
    assert_eq!(inet.packets_out(), 0);
    inet.assert_no_leak();
}
