//! QEMU VMs for the tests: the bookworm image of scripts/build-vm-image.sh (cached), a copy-on-write
//! overlay of it per VM, a tap on a test bridge, a cloud-init seed volume (`genisoimage -V cidata`,
//! as cloud-localds makes it), an optional read-only files volume, and QEMU's guest agent to run a
//! command inside (no SSH, no network of the test's own into the VM). TCG (software emulation)
//! unless the CPU offers hardware virtualization: /dev/kvm here is PVM, under which stock kernels
//! die, and PVM shows neither vmx nor svm.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;

use super::{run, script, text};

/// The image's directory (`root.qcow2`, `vmlinuz`, `initrd.img`), built once.
pub fn image() -> PathBuf {
    let out = run(&mut Command::new(script("build-vm-image.sh")));
    assert!(out.status.success(), "build-vm-image.sh: {}", text(&out));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// `-accel kvm` only where the CPU says it virtualizes (vmx or svm) and /dev/kvm is there.
pub fn accel() -> &'static str {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let hardware = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    if hardware && Path::new("/dev/kvm").exists() {
        "kvm"
    } else {
        "tcg"
    }
}

/// A NoCloud seed volume of `seed_dir`'s documents.
pub fn seed_iso(seed_dir: &Path, iso: &Path) {
    let out = run(Command::new("genisoimage")
        .args(["-quiet", "-V", "cidata", "-r", "-J", "-o"])
        .arg(iso)
        .arg(seed_dir));
    assert!(out.status.success(), "genisoimage: {}", text(&out));
}

/// A read-only ext4 volume labelled `label` holding `files` (source, path in the volume).
pub fn files_volume(work: &Path, label: &str, files: &[(PathBuf, PathBuf)]) -> PathBuf {
    let tree = work.join(format!("{label}.tree"));
    let _ = std::fs::remove_dir_all(&tree);
    let mut bytes = 0u64;
    for (src, rel) in files {
        let dst = tree.join(rel);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        // A copy (not a link): mkfs reads the tree, and a test's cache stays untouched.
        let out = run(Command::new("cp").arg("-a").arg(src).arg(&dst));
        assert!(out.status.success(), "cp {}: {}", src.display(), text(&out));
        bytes += du(&dst);
    }
    let img = work.join(format!("{label}.img"));
    let _ = std::fs::remove_file(&img);
    let size_mb = bytes / (1 << 20) * 5 / 4 + 64;
    let out = run(Command::new("mkfs.ext4")
        .args(["-q", "-L", label, "-d"])
        .arg(&tree)
        .arg(&img)
        .arg(format!("{size_mb}M")));
    assert!(out.status.success(), "mkfs.ext4: {}", text(&out));
    std::fs::remove_dir_all(&tree).unwrap();
    img
}

fn du(p: &Path) -> u64 {
    walkdir::WalkDir::new(p)
        .into_iter()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// What a VM boots with.
#[derive(Clone, Debug)]
pub struct VmSpec {
    pub name: String,
    pub memory_mb: u32,
    pub cpus: u32,
    pub bridge: String,
    pub mac: String,
    pub seed_iso: PathBuf,
    pub files: Option<PathBuf>,
}

/// A running VM (or one powered off by `kill`). Dropped: qemu killed, its tap removed.
pub struct Vm {
    pub spec: VmSpec,
    pub dir: PathBuf,
    child: Option<Child>,
    pub started: Instant,
}

impl Vm {
    fn tap(&self) -> String {
        // IFNAMSIZ: 15 characters.
        let mut t = format!("kut-{}", self.spec.name);
        t.truncate(15);
        t
    }

    pub fn console(&self) -> PathBuf {
        self.dir.join("console.log")
    }

    fn qga_socket(&self) -> PathBuf {
        self.dir.join("qga.sock")
    }

    /// A new VM: an overlay of `image`'s disk in `work/NAME`, booted.
    pub fn boot(work: &Path, image: &Path, spec: VmSpec) -> Vm {
        let dir = work.join(&spec.name);
        std::fs::create_dir_all(&dir).unwrap();
        let out = run(Command::new("qemu-img")
            .args(["create", "-q", "-f", "qcow2", "-F", "qcow2", "-b"])
            .arg(image.join("root.qcow2"))
            .arg(dir.join("disk.qcow2")));
        assert!(out.status.success(), "qemu-img: {}", text(&out));
        for f in ["vmlinuz", "initrd.img"] {
            std::fs::copy(image.join(f), dir.join(f)).unwrap();
        }
        let mut vm = Vm {
            spec,
            dir,
            child: None,
            started: Instant::now(),
        };
        let tap = vm.tap();
        let _ = run(Command::new("ip").args(["link", "del", &tap]));
        for args in [
            vec!["tuntap", "add", &tap, "mode", "tap"],
            vec!["link", "set", &tap, "master", &vm.spec.bridge],
            vec!["link", "set", &tap, "up"],
        ] {
            let out = run(Command::new("ip").args(&args));
            assert!(out.status.success(), "ip {args:?}: {}", text(&out));
        }
        vm.power_on();
        vm
    }

    /// Start qemu on the VM's disk (again, after `kill`: the disk as the power cut left it).
    pub fn power_on(&mut self) {
        assert!(self.child.is_none(), "{} runs already", self.spec.name);
        let _ = std::fs::remove_file(self.qga_socket());
        let s = &self.spec;
        let mut cmd = Command::new("qemu-system-x86_64");
        // TCG's `max` CPU emulates AES-NI and the other extensions Go's crypto takes fast paths
        // for; the default qemu64 model has none of them.
        let cpu = if accel() == "kvm" { "host" } else { "max" };
        cmd.args(["-name", &s.name, "-accel", accel(), "-cpu", cpu])
            .args(["-m", &s.memory_mb.to_string(), "-smp", &s.cpus.to_string()])
            .args(["-nodefaults", "-display", "none", "-monitor", "none"])
            .arg("-kernel")
            .arg(self.dir.join("vmlinuz"))
            .arg("-initrd")
            .arg(self.dir.join("initrd.img"))
            // tsc=reliable: under TCG a guest of two vCPUs found its TSCs "unsynchronized" and
            // fell back to the HPET, an emulated device every clock read of every Go program
            // then traps to (cp-1: 44 % of its CPU time in the kernel, kube-apiserver's RBAC
            // bootstrap not done 9 minutes after its start, 2026-12-02). TCG's TSC is one clock
            // for all vCPUs, the host's; one-vCPU guests use it anyway.
            .args([
                "-append",
                "root=LABEL=root console=ttyS0 quiet tsc=reliable",
            ])
            .arg("-drive")
            .arg(format!(
                "file={},if=virtio,format=qcow2",
                self.dir.join("disk.qcow2").display()
            ))
            .arg("-drive")
            .arg(format!(
                "file={},if=virtio,format=raw,readonly=on",
                s.seed_iso.display()
            ));
        if let Some(files) = &s.files {
            cmd.arg("-drive").arg(format!(
                "file={},if=virtio,format=raw,readonly=on",
                files.display()
            ));
        }
        cmd.args([
            "-netdev",
            &format!("tap,id=n0,ifname={},script=no,downscript=no", self.tap()),
        ])
        .args([
            "-device",
            &format!("virtio-net-pci,netdev=n0,mac={}", s.mac),
        ])
        .arg("-chardev")
        .arg(format!(
            "socket,id=qga0,path={},server=on,wait=off",
            self.qga_socket().display()
        ))
        .args(["-device", "virtio-serial"])
        .args([
            "-device",
            "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
        ])
        .arg("-serial")
        .arg(format!("file:{}", self.console().display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(self.dir.join("qemu.err")).unwrap());
        self.started = Instant::now();
        self.child = Some(cmd.spawn().expect("qemu-system-x86_64"));
    }

    /// Every thread of qemu (under TCG each vCPU is one, wanting a whole core) at nice `n`: a
    /// process's nice value is its threads' own.
    pub fn renice(&self, n: i32) {
        let Some(pid) = self.child.as_ref().map(|c| c.id()) else {
            return;
        };
        let tasks: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let o = run(Command::new("renice")
            .args(["-n", &n.to_string(), "-p"])
            .args(&tasks));
        assert!(
            o.status.success(),
            "renice {}: {}",
            self.spec.name,
            text(&o)
        );
    }

    /// Power loss: kill -9 of qemu.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A clean shutdown: `systemctl poweroff` through the guest agent, then qemu's own exit (kill
    /// -9 if it has not exited after 180 s).
    pub fn power_off(&mut self) {
        let _ = self.exec("systemctl poweroff --no-block");
        let deadline = Instant::now() + Duration::from_secs(180);
        while self.running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_secs(1));
        }
        self.kill();
    }

    pub fn running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => c.try_wait().ok().flatten().is_none(),
            None => false,
        }
    }

    /// qemu's resident memory, in MiB.
    pub fn rss_mb(&self) -> u64 {
        let Some(c) = &self.child else { return 0 };
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", c.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kb| kb / 1024)
            .unwrap_or(0)
    }

    /// What the guest uses (MemTotal - MemAvailable), in MiB: the VM's own share of qemu's RSS,
    /// which adds TCG's translation cache and the guest's page cache.
    pub fn guest_used_mb(&self) -> Option<u64> {
        let (code, out) = self.exec("cat /proc/meminfo")?;
        let field = |name: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        };
        (code == 0).then_some(())?;
        Some((field("MemTotal:")? - field("MemAvailable:")?) / 1024)
    }

    /// Run `sh -c command` in the VM through its guest agent: (exit code, stdout + stderr). None
    /// while the agent does not answer (booting).
    pub fn exec(&self, command: &str) -> Option<(i64, String)> {
        let mut agent = Agent::connect(&self.qga_socket())?;
        let pid = agent.call(
            "guest-exec",
            serde_json::json!({"path": "/bin/sh", "arg": ["-c", command], "capture-output": true}),
        )?["pid"]
            .as_i64()?;
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            let st = agent.call("guest-exec-status", serde_json::json!({ "pid": pid }))?;
            if st["exited"].as_bool() == Some(true) {
                let decode = |k: &str| {
                    st[k]
                        .as_str()
                        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default()
                };
                return Some((
                    st["exitcode"].as_i64().unwrap_or(-1),
                    decode("out-data") + &decode("err-data"),
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        None
    }

    /// `exec`, waiting for the agent, which must succeed.
    pub fn exec_ok(&self, command: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            match self.exec(command) {
                Some((0, out)) => return out,
                Some((code, out)) => panic!("{}: `{command}` exited {code}: {out}", self.spec.name),
                None => {
                    assert!(
                        Instant::now() < deadline,
                        "{}: no guest agent; console:\n{}",
                        self.spec.name,
                        self.console_tail(40)
                    );
                    std::thread::sleep(Duration::from_secs(2));
                }
            }
        }
    }

    pub fn console_tail(&self, lines: usize) -> String {
        let text = std::fs::read(self.console()).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.kill();
        let _ = run(Command::new("ip").args(["link", "del", &self.tap()]));
    }
}

/// QEMU's guest agent protocol: one JSON command a line, one answer a line; `guest-sync` first so
/// that no answer left from an earlier client is taken for ours.
struct Agent {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Agent {
    fn connect(path: &Path) -> Option<Agent> {
        let stream = UnixStream::connect(path).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let reader = BufReader::new(stream.try_clone().ok()?);
        let mut agent = Agent { stream, reader };
        let id = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64 & 0xffff_ffff)
            .unwrap_or(1);
        agent.send("guest-sync", serde_json::json!({ "id": id }))?;
        loop {
            let answer = agent.read()?;
            if answer["return"].as_i64() == Some(id) {
                return Some(agent);
            }
        }
    }

    fn send(&mut self, command: &str, arguments: serde_json::Value) -> Option<()> {
        let line = serde_json::json!({"execute": command, "arguments": arguments}).to_string();
        self.stream.write_all(line.as_bytes()).ok()?;
        self.stream.write_all(b"\n").ok()
    }

    fn read(&mut self) -> Option<serde_json::Value> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).ok()?;
        // A 0xFF the agent may send after a sync is no JSON: skipped.
        let start = line.iter().position(|b| *b != 0xff).unwrap_or(line.len());
        serde_json::from_slice(&line[start..]).ok()
    }

    fn call(&mut self, command: &str, arguments: serde_json::Value) -> Option<serde_json::Value> {
        self.send(command, arguments)?;
        let answer = self.read()?;
        answer.get("return").cloned()
    }
}
