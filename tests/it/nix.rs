//! Nix: every .nix file parses, the library (nix/lib.nix, through default.nix and flake.nix)
//! evaluates without nixpkgs, `lib.mkState` builds a state dir with real `nix-build` that rebuilds
//! bit for bit (`--check`) and equals `kubeunit gen` outside Nix (`lib.mkHostDirs` too, every
//! host's dir of a profile with hosts, which `hosts check` accepts), that state dir starts under real
//! systemd once imported, and the NixOS module's setup script (lib.setupScript) generates, installs
//! and starts an environment and its stop script takes it down; the module itself is evaluated by
//! a stand-in for nixpkgs' lib (tests/nix/eval-module.nix). What needs nixpkgs (the package build,
//! NixOS's own evaluation of the module) cannot run here: nix/README.md lists it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::common::container::{control_plane_args, Container};
use crate::common::ports::Ports;
use crate::common::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A Nix command that asks no binary cache (there is none to reach here).
fn nix(cmd: &str) -> Command {
    let mut c = Command::new(cmd);
    c.args(["--option", "substituters", ""]);
    c.current_dir(repo());
    c
}

fn ok(out: Output, what: &str) -> String {
    assert!(out.status.success(), "{what}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A Nix string literal.
fn nix_str(s: &str) -> String {
    serde_json::to_string(s).unwrap().replace("${", "\\${")
}

/// `--set K=V` pairs (and `--bin-dir D`) of a gen argument list as a Nix attribute set of settings.
fn settings_of(args: &[String]) -> String {
    let mut out = String::from("{");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let kv = match a.as_str() {
            "--set" => it.next().unwrap().clone(),
            "--bin-dir" => format!("binDir={}", it.next().unwrap()),
            _ => continue,
        };
        let (k, v) = kv.split_once('=').unwrap();
        out.push_str(&format!(" {} = {};", nix_str(k), nix_str(v)));
    }
    out.push_str(" }");
    out
}

/// The kubeunit under test as a package directory in the Nix store (`bin/kubeunit`), once per run.
fn kubeunit_in_store() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = PathBuf::from(format!("/tmp/kubeunit-it/nix-pkg-{}", std::process::id()));
        let bin = dir.join("kubeunit/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(env!("CARGO_BIN_EXE_kubeunit"), bin.join("kubeunit")).unwrap();
        let path = ok(
            run(nix("nix-store").arg("--add").arg(dir.join("kubeunit"))),
            "nix-store --add",
        );
        let _ = std::fs::remove_dir_all(&dir);
        path
    })
}

/// A Nix expression that calls `lib.mkState` of default.nix (no nixpkgs) on the test's kubeunit.
fn mk_state_expr(args: &str) -> String {
    lib_call("mkState", args)
}

/// A Nix expression that calls `lib.<function>` of default.nix (no nixpkgs) on the test's kubeunit.
fn lib_call(function: &str, args: &str) -> String {
    format!(
        "(import {}/default.nix {{ pkgs = throw \"no nixpkgs here\"; }}).lib.{function} ({{ kubeunit = builtins.storePath {}; }} // {args})",
        repo().display(),
        nix_str(kubeunit_in_store())
    )
}

/// nix/module.nix evaluated as a NixOS configuration by tests/nix/eval-module.nix (a stand-in for
/// nixpkgs' lib and pkgs: there is no nixpkgs here), `configuration` being the machine's module.
fn eval_module(configuration: &str) -> Output {
    run(nix("nix-instantiate")
        .args(["--eval", "--strict", "--json"])
        .arg(repo().join("tests/nix/eval-module.nix"))
        .args(["--arg", "configuration", configuration]))
}

/// A configuration for eval_module: `services.kubeunit` with stand-in packages (`kubeunit` at
/// `kubeunit_out`, its binary in `bin/`) and `environments`.
fn module_configuration(kubeunit_out: &str, environments: &str) -> String {
    format!(
        "let fake = name: out: {{ type = \"derivation\"; inherit name; outPath = out; meta.mainProgram = name; }}; \
         lib = import {}/nix/lib.nix; in \
         {{ services.kubeunit = {{ package = fake \"kubeunit\" {}; \
         kubernetesPackage = fake \"kubernetes\" \"/nix/store/00000000000000000000000000000000-kubernetes\"; \
         etcdPackage = fake \"etcd\" \"/nix/store/00000000000000000000000000000000-etcd\"; \
         environments = {environments}; }}; }}",
        repo().display(),
        nix_str(kubeunit_out)
    )
}

fn nix_build(expr: &str, extra: &[&str]) -> Output {
    run(nix("nix-build")
        .args(["--no-out-link", "-E", expr])
        .args(extra))
}

/// Tree hash of a directory as Nix computes it (the NAR: names, contents, the executable bit).
fn tree_hash(dir: &Path) -> String {
    ok(
        run(Command::new("nix-hash").args(["--type", "sha256"]).arg(dir)),
        "nix-hash",
    )
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn every_nix_file_parses_and_the_library_evaluates_without_nixpkgs() {
    let mut files = vec![repo().join("flake.nix"), repo().join("default.nix")];
    for dir in ["nix", "tests/nix"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "nix") {
                files.push(e.path());
            }
        }
    }
    assert!(files.len() >= 6, "{files:?}");
    for f in &files {
        ok(
            run(nix("nix-instantiate").arg("--parse").arg(f)),
            &format!("parse {}", f.display()),
        );
    }
    // The same library through the flake's outputs, default.nix and nix/lib.nix, none touching nixpkgs.
    let root = repo();
    let root = root.display();
    let libs = [
        format!("((import {root}/flake.nix).outputs {{ self = {{ }}; nixpkgs = throw \"no nixpkgs here\"; }}).lib"),
        format!("(import {root}/default.nix {{ pkgs = throw \"no nixpkgs here\"; }}).lib"),
        format!("(import {root}/nix/lib.nix)"),
    ];
    let args =
        "{ kubeunit = /nonexistent; profile = \"control-plane\"; seed = 1; epoch = 1767225600; \
                hostFacts = { advertiseAddress = \"192.0.2.7\"; }; system = \"x86_64-linux\"; }";
    let mut drvs = Vec::new();
    for lib in &libs {
        let names = ok(
            run(nix("nix-instantiate").args([
                "--eval",
                "--json",
                "-E",
                &format!("builtins.attrNames {lib}"),
            ])),
            lib,
        );
        assert_eq!(names, r#"["mkHostDirs","mkState","setupScript"]"#, "{lib}");
        // The derivation (its arguments, not a build): the same from all three.
        drvs.push(ok(
            run(nix("nix-instantiate").args([
                "--eval",
                "--strict",
                "--json",
                "-E",
                &format!("let d = {lib}.mkState {args}; in {{ inherit (d) args name; }}"),
            ])),
            lib,
        ));
    }
    assert_eq!(drvs[0], drvs[1]);
    assert_eq!(drvs[1], drvs[2]);
    let d: serde_json::Value = serde_json::from_str(&drvs[0]).unwrap();
    let argv: Vec<&str> = d["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for want in [
        "--hermetic",
        "--seed",
        "pki.epoch=1767225600",
        "network.advertiseAddress=192.0.2.7",
        "/var/lib/kubeunit/control-plane",
    ] {
        assert!(argv.contains(&want), "{want} missing from {argv:?}");
    }
    assert_eq!(d["name"], "kubeunit-state-control-plane");

    // Wrong arguments are named at evaluation.
    let lib = &libs[2];
    for (bad, says) in [
        ("{ kubeunit = /x; profile = \"dev\"; seed = 1; }", "epoch"),
        (
            "{ kubeunit = /x; profile = \"dev\"; seed = 1; epoch = 0; hostFacts = { cpus = 2; }; }",
            "unknown hostFacts [\"cpus\"]",
        ),
        (
            "{ kubeunit = /x; profile = ./profiles/dev.yaml; seed = 1; epoch = 0; }",
            "give stateDir",
        ),
        (
            "{ kubeunit = /x; profile = \"dev\"; seed = \"1\"; epoch = 0; }",
            "seed must be an integer",
        ),
        (
            "{ kubeunit = /x; profile = \"ha\"; seed = 1; epoch = 0; host = \"../cp-1\"; }",
            "host must be the name of one of the profile's hosts",
        ),
        (
            "{ kubeunit = /x; profile = \"ha\"; seed = 1; epoch = 0; host = \"cp-1\"; settings.host = \"cp-2\"; }",
            "give the host once",
        ),
    ] {
        let out = run(nix("nix-instantiate").args([
            "--eval",
            "--strict",
            "-E",
            &format!("({lib}.mkState {bad}).drvPath"),
        ]));
        assert!(!out.status.success(), "{bad} evaluated");
        assert!(text(&out).contains(says), "{bad}: {}", text(&out));
    }
}

#[test]
fn mk_state_rebuilds_bit_for_bit_and_equals_gen_outside_nix() {
    let work = PathBuf::from(format!("/tmp/kubeunit-it/nix-same-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let state = work.join("state");
    let expr = mk_state_expr(&format!(
        "{{ profile = \"control-plane\"; seed = 42; epoch = \"2026-01-01T00:00:00Z\"; \
         hostFacts = {{ advertiseAddress = \"192.0.2.7\"; }}; \
         settings = {{ \"ports.apiserver\" = 7443; \"logging.verbosity\" = 3; binDir = \"/usr/local/bin\"; }}; \
         stateDir = {}; }}",
        nix_str(state.to_str().unwrap())
    ));
    let out = PathBuf::from(ok(nix_build(&expr, &[]), "nix-build"));
    assert!(out.starts_with("/nix/store"), "{}", out.display());
    assert!(out.join("manifest.json").is_file());
    assert!(out.join("pki/ca.key").is_file());
    // Nix builds it again and compares: a difference fails with "may not be deterministic".
    let again = nix_build(&expr, &["--check"]);
    assert!(
        again.status.success(),
        "nix-build --check: {}",
        text(&again)
    );

    // The same inputs outside Nix, by plain gen (it may read this host; the inputs say it all).
    let gen = run(kubeunit()
        .env_remove("SOURCE_DATE_EPOCH")
        .args(["gen", "--profile", "control-plane", "--seed", "42"])
        .arg("--state-dir")
        .arg(&state)
        .args([
            "--set",
            "pki.epoch=2026-01-01T00:00:00Z",
            "--set",
            "network.advertiseAddress=192.0.2.7",
            "--set",
            "ports.apiserver=7443",
            "--set",
            "logging.verbosity=3",
            // Named, not left to where each looks (the fetch cache outside Nix, none inside).
            "--set",
            "binDir=/usr/local/bin",
        ]));
    ok(gen, "gen outside Nix");
    assert_eq!(tree_hash(&out), tree_hash(&state));

    // A different seed is a different output (the hash above is not blind).
    let other = expr.replace("seed = 42;", "seed = 43;");
    let out2 = PathBuf::from(ok(nix_build(&other, &[]), "nix-build seed 43"));
    assert_ne!(tree_hash(&out), tree_hash(&out2));

    // gen in the build reads nothing of the machine: this host has addresses, yet without the
    // advertiseAddress fact the build fails, naming the field.
    let blind = expr.replace("hostFacts = { advertiseAddress = \"192.0.2.7\"; };", "");
    assert_ne!(blind, expr);
    let failed = nix_build(&blind, &[]);
    assert!(!failed.status.success(), "built without an address");
    assert!(
        text(&failed).contains("network.advertiseAddress"),
        "{}",
        text(&failed)
    );

    // Imported: the modes the manifest records (the store made every file 0444).
    let imported = work.join("imported");
    let renders_for_another = run(kubeunit()
        .args(["import"])
        .arg(&out)
        .arg("--state-dir")
        .arg(&imported));
    assert_eq!(
        renders_for_another.status.code(),
        Some(2),
        "{}",
        text(&renders_for_another)
    );
    assert!(text(&renders_for_another).contains("was generated for"));
    assert!(!imported.exists());
    std::fs::remove_dir_all(&state).unwrap();
    ok(run(kubeunit().args(["import"]).arg(&out)), "import");
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("pki/ca.key")), 0o600);
    assert_eq!(mode(&state.join("pki/ca.crt")), 0o644);
    assert_eq!(tree_hash(&out), tree_hash(&state));
    let check = run(kubeunit()
        .args(["gen", "--check", "--state-dir"])
        .arg(&state));
    ok(check, "gen --check after import");
    let _ = std::fs::remove_dir_all(&work);
}

/// A profile with hosts (`ha`): `lib.mkHostDirs` is the tree `gen --hermetic --out` writes, one dir
/// per host; Nix builds it again and finds the same bytes, it equals gen's outside Nix, and `hosts
/// check` accepts it. `lib.mkState { host }` is one host's dir of it, byte for byte, holding that
/// host's keys only (a worker's has no CA key).
#[test]
fn mk_host_dirs_rebuilds_bit_for_bit_equals_gen_out_and_passes_hosts_check() {
    let work = PathBuf::from(format!("/tmp/kubeunit-it/nix-hosts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let args = "profile = \"ha\"; seed = 7; epoch = \"2026-01-01T00:00:00Z\";";
    let expr = lib_call("mkHostDirs", &format!("{{ {args} }}"));
    let dirs = PathBuf::from(ok(nix_build(&expr, &[]), "nix-build mkHostDirs"));
    assert!(
        dirs.to_str().unwrap().ends_with("-kubeunit-hosts-ha"),
        "{}",
        dirs.display()
    );
    // Evaluated again: the same derivation, so the same store path.
    let again = PathBuf::from(ok(nix_build(&expr, &[]), "nix-build mkHostDirs again"));
    assert_eq!(dirs, again);
    // Built again: Nix compares the bytes ("may not be deterministic" otherwise).
    let checked = nix_build(&expr, &["--check"]);
    assert!(
        checked.status.success(),
        "nix-build --check: {}",
        text(&checked)
    );
    let hosts = ["cp-1", "cp-2", "cp-3", "worker-1", "worker-2"];
    let mut listed: Vec<String> = std::fs::read_dir(&dirs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, hosts);

    // The same inputs outside Nix (tests/it/gen.rs renders these too).
    let outside = work.join("gen");
    gen_hermetic_ha(&outside, "7");
    assert_eq!(tree_hash(&dirs), tree_hash(&outside));

    let check = run(kubeunit().args(["hosts", "check", "-o", "json"]).arg(&dirs));
    let report: serde_json::Value = serde_json::from_str(&ok(check, "hosts check"))
        .unwrap_or_else(|e| panic!("hosts check -o json: {e}"));
    let checked: Vec<&str> = report["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(checked, hosts, "{report}");

    // One host alone: that host's dir of the tree, and no other host's keys.
    for host in ["cp-1", "worker-1"] {
        let one = PathBuf::from(ok(
            nix_build(
                &lib_call("mkState", &format!("{{ {args} host = \"{host}\"; }}")),
                &[],
            ),
            &format!("nix-build mkState host {host}"),
        ));
        assert!(
            one.to_str()
                .unwrap()
                .ends_with(&format!("-kubeunit-state-ha-{host}")),
            "{}",
            one.display()
        );
        assert_eq!(tree_hash(&one), tree_hash(&dirs.join(host)), "{host}");
    }
    assert!(dirs.join("cp-1/pki/ca.key").is_file());
    assert!(!dirs.join("worker-1/pki/ca.key").exists());

    // Another seed is another tree (the hashes above are not blind); a host not in the inventory
    // fails the build, naming the field.
    let other = PathBuf::from(ok(
        nix_build(&expr.replace("seed = 7;", "seed = 8;"), &[]),
        "nix-build mkHostDirs seed 8",
    ));
    assert_ne!(tree_hash(&dirs), tree_hash(&other));
    let stranger = nix_build(
        &lib_call("mkState", &format!("{{ {args} host = \"cp-9\"; }}")),
        &[],
    );
    assert!(!stranger.status.success(), "built a host not in hosts");
    assert!(
        text(&stranger).contains("not the name of one of hosts"),
        "{}",
        text(&stranger)
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// The NixOS module, evaluated (by the stand-in of tests/nix/eval-module.nix): an environment is a
/// oneshot setup service wanted by multi-user.target that runs lib.setupScript's commands for its
/// options, and undoes them on stop; an unknown option, a read-only one set and a value of the
/// wrong type fail the evaluation, naming the option.
#[test]
fn the_module_evaluates_to_a_setup_service_running_the_setup_script() {
    let out = "/nix/store/00000000000000000000000000000000-kubeunit";
    let evaluated = eval_module(&module_configuration(
        out,
        "{ dev.settings.\"logging.verbosity\" = 2; ci = { profile = \"ci\"; seed = 5; }; }",
    ));
    let v: serde_json::Value = serde_json::from_str(&ok(evaluated, "eval module")).unwrap();
    let services = v["services"].as_object().unwrap();
    assert_eq!(
        services.keys().collect::<Vec<_>>(),
        ["kubeunit-ci-setup", "kubeunit-dev-setup"]
    );
    let bin_dir = "/nix/store/00000000000000000000000000000000-kubeunit-components/bin";
    for (name, args) in [
        ("dev", "settings.\"logging.verbosity\" = 2;".to_string()),
        ("ci", "profile = \"ci\"; seed = 5;".to_string()),
    ] {
        let service = &services[&format!("kubeunit-{name}-setup")];
        assert_eq!(
            service["wantedBy"],
            serde_json::json!(["multi-user.target"])
        );
        assert_eq!(service["serviceConfig"]["Type"], "oneshot");
        assert_eq!(service["serviceConfig"]["RemainAfterExit"], true);
        let script: serde_json::Value = serde_json::from_str(&ok(
            run(nix("nix-instantiate").args([
                "--eval",
                "--strict",
                "--json",
                "-E",
                &format!(
                    "(import {}/nix/lib.nix).setupScript {{ kubeunit = \"{out}/bin/kubeunit\"; \
                     name = \"{name}\"; binDir = \"{bin_dir}\"; {args} }}",
                    repo().display()
                ),
            ])),
            "eval setupScript",
        ))
        .unwrap();
        assert_eq!(
            service["serviceConfig"]["ExecStart"]["text"], script["start"],
            "{name}"
        );
        assert_eq!(
            service["serviceConfig"]["ExecStop"]["text"], script["stop"],
            "{name}"
        );
        let start = script["start"].as_str().unwrap();
        assert!(
            start.contains(&format!("'{out}/bin/kubeunit' 'gen' '--profile'")),
            "{start}"
        );
    }
    assert_eq!(v["systemPackages"], serde_json::json!([out]));

    for (environments, says) in [
        (
            "{ dev.profle = \"dev\"; }",
            "The option `services.kubeunit.environments.dev.profle' does not exist",
        ),
        (
            "{ dev.stateDir = \"/srv/dev\"; }",
            "The option `services.kubeunit.environments.dev.stateDir' is read-only",
        ),
        (
            "{ dev.seed = \"5\"; }",
            "A definition for option `services.kubeunit.environments.dev.seed' is not of type",
        ),
    ] {
        let refused = eval_module(&module_configuration(out, environments));
        assert!(!refused.status.success(), "{environments} evaluated");
        assert!(
            text(&refused).contains(says),
            "{environments}: {}",
            text(&refused)
        );
    }
}

/// The module with `hostDir` (a host's dir of lib.mkState, or a directory on the machine outside the
/// store): its setup service imports that dir into /var/lib/kubeunit/NAME, installs the units and
/// starts the target without waiting for it (as at boot: the other hosts may not be up), and
/// generates nothing; a generated environment beside it is as before. The script, run with
/// recording stand-ins for kubeunit and systemctl, calls them in that order and stops at a failed
/// import.
#[test]
fn the_module_with_a_host_dir_imports_it_installs_and_starts_its_target() {
    let work = PathBuf::from(format!(
        "/tmp/kubeunit-it/nix-hostdir-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&work);
    let (pkg, path) = (work.join("kubeunit"), work.join("path"));
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::create_dir_all(&path).unwrap();
    let log = work.join("calls");
    for (file, name) in [
        (pkg.join("bin/kubeunit"), "kubeunit"),
        (path.join("systemctl"), "systemctl"),
    ] {
        std::fs::write(
            &file,
            format!(
                "#!/bin/sh\necho \"{name} $*\" >> '{}'\n[ \"${{FAIL:-}}\" != \"$1\" ]\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let host_dir = format!(
        "lib.mkState {{ kubeunit = builtins.storePath {}; profile = \"ha\"; host = \"cp-1\"; \
         seed = 7; epoch = \"2026-01-01T00:00:00Z\"; }}",
        nix_str(kubeunit_in_store())
    );
    let host_dir_out = ok(
        run(nix("nix-instantiate").args([
            "--eval",
            "--json",
            "-E",
            &format!(
                "let lib = import {}/nix/lib.nix; in ({host_dir}).outPath",
                repo().display()
            ),
        ])),
        "eval mkState outPath",
    );
    let host_dir_out: String = serde_json::from_str(&host_dir_out).unwrap();
    assert!(
        host_dir_out.ends_with("-kubeunit-state-ha-cp-1"),
        "{host_dir_out}"
    );
    let evaluated = eval_module(&module_configuration(
        pkg.to_str().unwrap(),
        &format!(
            "{{ ha.hostDir = {host_dir}; lab.hostDir = \"/etc/kubeunit/lab\"; \
             dev.settings.\"logging.verbosity\" = 2; }}"
        ),
    ));
    let v: serde_json::Value = serde_json::from_str(&ok(evaluated, "eval module")).unwrap();
    let ku = pkg.join("bin/kubeunit");
    let ku = ku.to_str().unwrap();
    let script = |name: &str, which: &str| -> String {
        v["services"][format!("kubeunit-{name}-setup")]["serviceConfig"][which]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no {which} for {name}: {v}"))
            .to_string()
    };
    let expected = |name: &str, dir: &str| -> String {
        let state = format!("/var/lib/kubeunit/{name}");
        [
            "set -eu".to_string(),
            format!("'{ku}' 'import' '{dir}' '--state-dir' '{state}'"),
            format!("'{ku}' 'install' '--runtime' '--state-dir' '{state}' '--kubeunit' '{ku}'"),
            format!("'systemctl' 'start' '--no-block' 'kubeunit-{name}.target'"),
            String::new(),
        ]
        .join("\n")
    };
    assert_eq!(script("ha", "ExecStart"), expected("ha", &host_dir_out));
    // A directory on the machine stays where it is: nothing of it is copied into the store.
    assert_eq!(
        script("lab", "ExecStart"),
        expected("lab", "/etc/kubeunit/lab")
    );
    assert_eq!(
        script("ha", "ExecStop"),
        format!("'{ku}' 'uninstall' '--runtime' '--state-dir' '/var/lib/kubeunit/ha'\n")
    );
    assert_eq!(
        v["services"]["kubeunit-ha-setup"]["description"],
        "kubeunit environment ha: import, install and start"
    );
    let dev = script("dev", "ExecStart");
    assert!(
        dev.contains(&format!("'{ku}' 'gen' '--profile' 'control-plane'"))
            && dev.contains("'install' '--runtime' '--now'")
            && !dev.contains("'import'"),
        "{dev}"
    );

    // Run: the calls, in order; a failed import stops it before anything is installed.
    let start = script("ha", "ExecStart");
    let run_script = |fail: &str| -> (bool, String) {
        let _ = std::fs::remove_file(&log);
        let out = run(Command::new("sh")
            .args(["-c", &start])
            .env("PATH", format!("{}:/usr/bin:/bin", path.display()))
            .env("FAIL", fail));
        let calls = std::fs::read_to_string(&log).unwrap_or_default();
        (out.status.success(), calls)
    };
    let (ran, calls) = run_script("");
    assert!(ran, "{calls}");
    assert_eq!(
        calls,
        format!(
            "kubeunit import {host_dir_out} --state-dir /var/lib/kubeunit/ha\n\
             kubeunit install --runtime --state-dir /var/lib/kubeunit/ha --kubeunit {ku}\n\
             systemctl start --no-block kubeunit-ha.target\n"
        )
    );
    let (ran, calls) = run_script("import");
    assert!(!ran, "{calls}");
    assert_eq!(
        calls,
        format!("kubeunit import {host_dir_out} --state-dir /var/lib/kubeunit/ha\n")
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// `hostDir` with `profile`, `settings` or `seed` fails the evaluation with the module's assertion,
/// naming the environment and what was given with it; lib.setupScript refuses the same, and a
/// hostDir that is no absolute path.
#[test]
fn the_module_refuses_a_host_dir_with_a_profile_settings_or_seed() {
    let out = "/nix/store/00000000000000000000000000000000-kubeunit";
    for (extra, given) in [
        ("profile = \"ha\";", "profile"),
        ("settings.\"logging.verbosity\" = 2;", "settings"),
        ("seed = 7;", "seed"),
        (
            "profile = ./profiles/ha.yaml; seed = 7;",
            "profile and seed",
        ),
        (
            "profile = { extends = \"ha\"; }; settings.\"logging.verbosity\" = 2; seed = 7;",
            "profile, settings and seed",
        ),
    ] {
        let environments =
            format!("{{ ha = {{ hostDir = \"/etc/kubeunit/ha\"; {extra} }}; dev = {{ }}; }}");
        let refused = eval_module(&module_configuration(out, &environments));
        assert!(!refused.status.success(), "{environments} evaluated");
        let says = text(&refused);
        assert!(
            says.contains("Failed assertions:"),
            "{environments}: {says}"
        );
        assert!(
            says.contains(&format!(
                "- services.kubeunit.environments.ha: give hostDir or {given}, not both: \
                 hostDir is a state dir rendered elsewhere, imported as it is"
            )),
            "{environments}: {says}"
        );
        assert!(!says.contains("environments.dev"), "{says}");
    }
    for (args, says) in [
        (
            "hostDir = \"/etc/kubeunit/ha\"; profile = \"ha\";",
            "environment 'ha' has a hostDir, which is imported as it was rendered, and profile",
        ),
        (
            "hostDir = \"/etc/kubeunit/ha\"; binDir = \"/opt/bin\";",
            "and binDir, which generate one",
        ),
        (
            "hostDir = \"hosts/cp-1\";",
            "hostDir \"hosts/cp-1\" is no absolute path",
        ),
    ] {
        let refused = run(nix("nix-instantiate").args([
            "--eval",
            "--strict",
            "-E",
            &format!(
                "(import {}/nix/lib.nix).setupScript {{ kubeunit = \"/k\"; name = \"ha\"; {args} }}",
                repo().display()
            ),
        ]));
        assert!(!refused.status.success(), "{args} evaluated");
        assert!(text(&refused).contains(says), "{args}: {}", text(&refused));
    }
}

/// `gen --out OUT` of control-plane (seed 9) for the state dir `target`, with `extra` arguments:
/// the import tests' host dir.
fn gen_out(target: &Path, out: &Path, extra: &[&str]) -> Output {
    run(kubeunit()
        .args(["gen", "--profile", "control-plane", "--seed", "9"])
        .arg("--state-dir")
        .arg(target)
        .arg("--out")
        .arg(out)
        .args(["--set", "network.advertiseAddress=192.0.2.7"])
        .args(extra))
}

#[test]
fn import_refuses_a_tampered_or_foreign_source_and_leaves_the_target_alone() {
    let work = PathBuf::from(format!(
        "/tmp/kubeunit-it/nix-import-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let target = work.join("target");
    let built = work.join("built");
    ok(gen_out(&target, &built, &[]), "gen --out");
    assert!(!target.exists(), "gen --out wrote the state dir itself");
    // --out writes a new state dir only, never over one, never the state dir itself.
    let before = snapshot(&built);
    for out in [&built, &target] {
        let again = gen_out(&target, out, &[]);
        assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    }
    assert_eq!(before, snapshot(&built));
    assert!(!target.exists());
    let copy = |name: &str| -> PathBuf {
        let dst = work.join(name);
        ok(
            run(Command::new("cp").arg("-a").arg(&built).arg(&dst)),
            "cp",
        );
        dst
    };
    let import = |src: &Path| run(kubeunit().arg("import").arg(src));
    let edited = copy("edited");
    std::fs::write(edited.join("pki/ca.crt"), "-----BEGIN CERTIFICATE-----\n").unwrap();
    let extra = copy("extra");
    std::fs::write(extra.join("units/evil.service"), "[Service]\n").unwrap();
    let linked = copy("linked");
    std::fs::remove_file(linked.join("pki/sa.key")).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", linked.join("pki/sa.key")).unwrap();
    for (src, says) in [
        (&edited, "pki/ca.crt differs"),
        (&extra, "units/evil.service"),
        (&linked, "pki/sa.key"),
        (&work.join("missing"), "cannot open it"),
    ] {
        let out = import(src);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}: {}",
            src.display(),
            text(&out)
        );
        assert!(
            text(&out).contains(says),
            "{}: {}",
            src.display(),
            text(&out)
        );
        assert!(
            !target.exists(),
            "{} left {}",
            src.display(),
            target.display()
        );
    }
    // A target that holds another environment is refused untouched.
    ok(
        run(kubeunit()
            .args(["gen", "--profile", "control-plane", "--seed", "10"])
            .arg("--state-dir")
            .arg(&target)
            .args(["--set", "network.advertiseAddress=192.0.2.7"])),
        "gen",
    );
    let before = snapshot(&target);
    let out = import(&built);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("importing would replace its keys"),
        "{}",
        text(&out)
    );
    assert_eq!(before, snapshot(&target));
    // Its own import again restores what was changed, modes included.
    std::fs::remove_dir_all(&target).unwrap();
    ok(import(&built), "import");
    std::fs::set_permissions(
        target.join("pki/ca.key"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::remove_file(target.join("kubeconfig/admin.kubeconfig")).unwrap();
    ok(import(&built), "import again");
    assert_eq!(mode(&target.join("pki/ca.key")), 0o600);
    assert!(target.join("kubeconfig/admin.kubeconfig").is_file());
    // The same environment rendered again with a changed setting (a new Nix build of the host
    // dir): an update. The changed unit is written, the keys and the data below are kept.
    let data = target.join("data/kept");
    std::fs::create_dir_all(data.parent().unwrap()).unwrap();
    std::fs::write(&data, "etcd's").unwrap();
    let key = std::fs::read(target.join("pki/ca.key")).unwrap();
    let changed = work.join("changed");
    ok(
        gen_out(
            &target,
            &changed,
            &["--set", "components.kube-scheduler.extraArgs.v=4"],
        ),
        "gen --out, changed",
    );
    ok(import(&changed), "import of the changed render");
    let unit = std::fs::read_dir(target.join("units"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-kube-scheduler.service"))
        .unwrap();
    assert!(std::fs::read_to_string(&unit).unwrap().contains("--v=4"));
    assert_eq!(std::fs::read(target.join("pki/ca.key")).unwrap(), key);
    assert_eq!(std::fs::read_to_string(&data).unwrap(), "etcd's");
    let _ = std::fs::remove_dir_all(&work);
}

/// Hostile input to `import`: several imports of one source into one target at once (all succeed,
/// the result is the source, modes included), a listed file far too large (refused before it is
/// read), a target spelled with `..` (not the path the source was made for: refused) and a source
/// path with a newline (refused).
#[test]
fn import_holds_against_concurrent_runs_huge_files_dotdot_and_newlines() {
    let work = PathBuf::from(format!(
        "/tmp/kubeunit-it/nix-hostile-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let target = work.join("target");
    let built = work.join("built");
    ok(gen_out(&target, &built, &[]), "gen --out");

    // Four at once into the same new target.
    let runs: Vec<_> = (0..4)
        .map(|_| {
            kubeunit()
                .arg("import")
                .arg(&built)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in runs {
        let out = r.wait_with_output().unwrap();
        assert!(out.status.success(), "concurrent import: {}", text(&out));
    }
    assert_eq!(tree_hash(&built), tree_hash(&target));
    assert_eq!(mode(&target.join("pki/ca.key")), 0o600);
    ok(
        run(kubeunit()
            .args(["gen", "--check", "--state-dir"])
            .arg(&target)),
        "gen --check after concurrent imports",
    );
    // Two renders of the environment (each an update of the other) imported at once, twice each:
    // every run succeeds, and the target is one of them whole, never a mixture.
    let changed = work.join("changed");
    ok(
        gen_out(
            &target,
            &changed,
            &["--set", "components.kube-scheduler.extraArgs.v=4"],
        ),
        "gen --out, changed",
    );
    let runs: Vec<_> = [&built, &changed, &built, &changed]
        .iter()
        .map(|src| {
            kubeunit()
                .arg("import")
                .arg(src)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in runs {
        let out = r.wait_with_output().unwrap();
        assert!(out.status.success(), "concurrent update: {}", text(&out));
    }
    let now = tree_hash(&target);
    assert!(
        now == tree_hash(&built) || now == tree_hash(&changed),
        "the target after concurrent updates is neither render"
    );
    std::fs::remove_dir_all(&target).unwrap();

    // A listed file of 17 MiB (sparse: nothing that size is ever read).
    let huge = work.join("huge");
    ok(
        run(Command::new("cp").arg("-a").arg(&built).arg(&huge)),
        "cp",
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(huge.join("pki/ca.crt"))
        .unwrap()
        .set_len(17 << 20)
        .unwrap();
    let out = run(kubeunit().arg("import").arg(&huge));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("too large"), "{}", text(&out));
    assert!(!target.exists());

    // `..` in the target: another spelling is another path than the one the units name.
    let dotted = work.join("x/../target");
    let out = run(kubeunit()
        .arg("import")
        .arg(&built)
        .arg("--state-dir")
        .arg(&dotted));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("was generated for"), "{}", text(&out));
    assert!(!target.exists() && !work.join("x").exists());

    // A newline in the source path.
    let out = run(kubeunit().arg("import").arg(work.join("bu\nilt")));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("control characters"), "{}", text(&out));
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn a_nix_built_state_dir_starts_under_systemd() {
    let c = Container::boot("nixstate");
    let ports = Ports::allocate();
    let version = &pinned("KUBERNETES_VERSIONS")[0];
    let state = c.work.join("state");
    let mut gen_args = control_plane_args(version);
    gen_args.extend(ports.sets());
    // An attribute-set profile (JSON, which is YAML) on top of a built-in one.
    let expr = mk_state_expr(&format!(
        "{{ profile = {{ extends = \"control-plane\"; name = \"nixcp\"; logging.verbosity = 1; }}; \
         seed = 7; epoch = {}; hostFacts = {{ advertiseAddress = \"192.0.2.7\"; }}; \
         settings = {}; stateDir = {}; }}",
        test_epoch(),
        settings_of(&gen_args),
        nix_str(state.to_str().unwrap())
    ));
    let out = PathBuf::from(ok(nix_build(&expr, &[]), "nix-build"));
    ok(run(kubeunit().arg("import").arg(&out)), "import");
    let ku = |args: &[&str]| {
        let mut argv = vec![args[0], "--state-dir", state.to_str().unwrap()];
        argv.extend_from_slice(&args[1..]);
        c.kubeunit(&argv)
    };
    let started = ku(&["start"]);
    assert!(started.status.success(), "start: {}", text(&started));
    let status = ku(&["status", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&status.stdout)
        .unwrap_or_else(|e| panic!("status -o json ({e}): {}", text(&status)));
    let comps = v.as_array().expect("status is an array");
    assert_eq!(comps.len(), 4, "{v}");
    for comp in comps {
        assert_eq!(comp["healthy"], true, "{comp}");
    }
    // The cluster serves, as the environment the profile named.
    let kubectl = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}/kubectl"));
    let ns = run(Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(state.join("kubeconfig/admin.kubeconfig"))
        .args(["get", "namespace", "kube-system", "-o", "name"]));
    assert_eq!(ok(ns, "kubectl"), "namespace/kube-system");
    assert!(c
        .list_units(&format!("{}-*", unit_prefix(&state)))
        .contains(&unit(&state, "kube-apiserver")));
    let stopped = ku(&["stop"]);
    assert!(stopped.status.success(), "stop: {}", text(&stopped));
}

#[test]
fn the_module_setup_script_generates_installs_and_starts_and_its_stop_script_uninstalls() {
    let c = Container::boot_with("nixmodule", &["--bind-ro=/nix/store"]);
    let ports = Ports::allocate();
    let version = &pinned("KUBERNETES_VERSIONS")[0];
    let mut gen_args = control_plane_args(version);
    gen_args.extend(ports.sets());
    let kubeunit_bin = format!("{}/bin/kubeunit", kubeunit_in_store());
    let expr = format!(
        "(import {}/default.nix {{ pkgs = throw \"no nixpkgs here\"; }}).lib.setupScript \
         {{ kubeunit = {}; name = \"nixmod\"; profile = \"control-plane\"; settings = {}; }}",
        repo().display(),
        nix_str(&kubeunit_bin),
        settings_of(&gen_args)
    );
    let scripts: serde_json::Value = serde_json::from_str(&ok(
        run(nix("nix-instantiate").args(["--eval", "--strict", "--json", "-E", &expr])),
        "eval setupScript",
    ))
    .unwrap();
    let (start, stop) = (
        scripts["start"].as_str().unwrap(),
        scripts["stop"].as_str().unwrap(),
    );
    let state = "/var/lib/kubeunit/nixmod";
    let sh = |script: &str, what: &str| {
        let out = c.run(&["sh", "-c", script]);
        assert!(out.status.success(), "{what}: {}", text(&out));
    };
    sh(start, "setup script");
    let stat = |p: &str| -> String {
        String::from_utf8_lossy(&c.run(&["stat", "-c", "%a", p]).stdout)
            .trim()
            .to_string()
    };
    assert_eq!(stat(state), "700");
    assert_eq!(stat(&format!("{state}/pki/ca.key")), "600");
    let runtime = c.run(&["ls", "/run/systemd/system"]);
    let listed = String::from_utf8_lossy(&runtime.stdout).into_owned();
    for unit in [
        "kubeunit-nixmod.target",
        "kubeunit-nixmod-etcd.service",
        "kubeunit-nixmod-kube-apiserver.service",
        "kubeunit-nixmod-kube-scheduler.service",
    ] {
        assert!(
            listed.contains(unit),
            "{unit} not in /run/systemd/system: {listed}"
        );
    }
    let active = c.run(&[
        "systemctl",
        "is-active",
        "kubeunit-nixmod-etcd.service",
        "kubeunit-nixmod-kube-apiserver.service",
        "kubeunit-nixmod-kube-controller-manager.service",
        "kubeunit-nixmod-kube-scheduler.service",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&active.stdout).trim(),
        "active\nactive\nactive\nactive"
    );
    // The installed units run it: the apiserver's unit file is the runtime one.
    let path = c.run(&[
        "systemctl",
        "show",
        "-P",
        "FragmentPath",
        "kubeunit-nixmod-kube-apiserver.service",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&path.stdout).trim(),
        "/run/systemd/system/kubeunit-nixmod-kube-apiserver.service"
    );
    let status = c.kubeunit(&["status", "--state-dir", state]);
    assert!(status.status.success(), "status: {}", text(&status));

    // What the next boot or a switch does: the same script again keeps the keys.
    let key = |c: &Container| c.run(&["sha256sum", &format!("{state}/pki/ca.key")]).stdout;
    let before = key(&c);
    sh(stop, "stop script");
    sh(start, "setup script again");
    assert_eq!(before, key(&c), "the CA key changed");

    // Stopping the service: nothing of it runs, its units are gone, the state dir stays.
    sh(stop, "stop script");
    let left = c.list_units("kubeunit-nixmod*");
    assert!(
        !left
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some("active")),
        "{left}"
    );
    let runtime = c.run(&["ls", "/run/systemd/system"]);
    assert!(
        !String::from_utf8_lossy(&runtime.stdout).contains("kubeunit-nixmod"),
        "{}",
        String::from_utf8_lossy(&runtime.stdout)
    );
    assert_eq!(stat(&format!("{state}/pki/ca.key")), "600");
}
