#!/usr/bin/env python3
"""The measuring half of scripts/bench-peers.sh, which builds the peers, boots the systemd container and
exports BENCH_* (see there). Runs on the host: the container shares the host's network, so the readiness
checks reach the components on 127.0.0.1, and the state, certificates and logs live in a directory bound at
the same path inside and out. The tools themselves run inside, through `scripts/container.sh exec`.

Per run: a tool's command starts with nothing running (checked), one poller runs the same four checks every
0.1 s (etcd /health, kube-apiserver /readyz, kube-controller-manager and kube-scheduler /healthz), "all
ready" is the first instant at which every check has passed. Then the tool stops its environment; "stopped"
is the first instant at which none of its processes runs in the container and no port of the four (nor
etcd's peer port 2380) listens. Runs alternate between the tools and the floor (kube-apiserver alone on a
running etcd); each run starts from fresh data.
"""

import http.client
import json
import os
import platform
import shlex
import signal
import ssl
import statistics
import subprocess
import sys
import threading
import time

PERIOD = 0.1
PORTS = {"etcd": 2379, "kube-apiserver": 6443, "kube-controller-manager": 10257, "kube-scheduler": 10259}
# Listening ports that must be free before a run and after a stop (2380: etcd's peer port, fixed for kubeunit).
CHECKED_PORTS = sorted(set(PORTS.values()) | {2380})
# Processes a tool may leave behind (the executable's name), and scripts by a word of their command line.
BINARIES = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwokctl",
            "kubectl", "kubeunit", "sudo"}
SCRIPTS = ("local-up-cluster.sh",)

env = os.environ.get
CONTAINER = env("BENCH_CONTAINER", "kubeunit-bench-peers")
CONTAINER_SH = env("BENCH_CONTAINER_SH")
WORK = env("BENCH_WORK")
RUNS = int(env("BENCH_RUNS", "3"))
TOOLS = env("BENCH_TOOLS", "kubeunit kwokctl local-up").split()
TIMEOUT = float(env("BENCH_TIMEOUT", "180"))
KUBEUNIT = env("BENCH_KUBEUNIT")
K8S_VERSION = env("BENCH_K8S_VERSION")
ETCD_VERSION = env("BENCH_ETCD_VERSION")
K8S_BIN = env("BENCH_K8S_BIN")
ETCD_BIN = env("BENCH_ETCD_BIN")
KWOK_DIR = env("BENCH_KWOK_DIR")
KWOK_VERSION = env("BENCH_KWOK_VERSION")
KWOK_CONTROLLER = env("BENCH_KWOK_CONTROLLER", "0") == "1"
CFSSL_DIR = env("BENCH_CFSSL_DIR")
CFSSL_VERSION = env("BENCH_CFSSL_VERSION")
K8S_SRC = env("BENCH_K8S_SRC")
JSON_OUT = env("BENCH_JSON")
# Inside the container: what a login shell of root would have, plus what a tool needs.
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
            "LANG": "C.UTF-8", "TERM": "dumb", "USER": "root"}
# container.sh itself finds the container there.
if env("KUBEUNIT_CONTAINERS_DIR"):
    BASE_ENV["KUBEUNIT_CONTAINERS_DIR"] = env("KUBEUNIT_CONTAINERS_DIR")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def in_container(argv, extra_env=None, new_session=False, stdout=None):
    """Popen of argv inside the container (its mount, PID, UTS, IPC namespaces; the host's network)."""
    e = dict(BASE_ENV)
    e.update(extra_env or {})
    out = stdout if stdout is not None else subprocess.DEVNULL
    return subprocess.Popen([CONTAINER_SH, "exec", CONTAINER, "--", *argv], env=e, stdin=subprocess.DEVNULL,
                            stdout=out, stderr=subprocess.STDOUT if stdout is not None else subprocess.DEVNULL,
                            start_new_session=new_session)


def run_in(argv, extra_env=None, timeout=300):
    e = dict(BASE_ENV)
    e.update(extra_env or {})
    return subprocess.run([CONTAINER_SH, "exec", CONTAINER, "--", *argv], env=e, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


# ---- the readiness checks -------------------------------------------------------------------------------

class Check:
    """GET of one URL until it answers 200 (etcd: and reports itself healthy). TLS material comes from
    files the tool writes while it starts, so the SSL context is made once they exist."""

    def __init__(self, name, url, cert=None, key=None):
        self.name, self.url, self.cert, self.key = name, url, cert, key
        self.ctx = None
        # /readyz?verbose: when each of kube-apiserver's own checks first passed (time.monotonic()).
        self.sub = {}

    def context(self):
        if self.ctx is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            # Readiness, not identity: each tool's CA is checked by its own components.
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            if self.cert:
                ctx.load_cert_chain(self.cert, self.key)
            self.ctx = ctx
        return self.ctx

    def ok(self):
        scheme, rest = self.url.split("://", 1)
        hostport, path = rest.split("/", 1)
        host, port = hostport.rsplit(":", 1)
        try:
            if scheme == "https":
                if self.cert and not (os.path.exists(self.cert) and os.path.exists(self.key)):
                    return False
                conn = http.client.HTTPSConnection(host, int(port), context=self.context(), timeout=1)
            else:
                conn = http.client.HTTPConnection(host, int(port), timeout=1)
            conn.request("GET", "/" + path)
            r = conn.getresponse()
            body = r.read()
            conn.close()
        except (OSError, http.client.HTTPException, ssl.SSLError):
            return False
        if "?verbose" in path:
            now = time.monotonic()
            for line in body.decode(errors="replace").splitlines():
                if line.startswith("[+]") and line.endswith(" ok"):
                    self.sub.setdefault(line[3:-3], now)
        if r.status != 200:
            return False
        if self.name == "etcd":
            try:
                return json.loads(body).get("health") == "true"
            except ValueError:
                return False
        return True


def poll(checks, t0, deadline, stop_early=None):
    """Run every check on a 0.1 s grid from t0 (one thread each, so a slow handshake delays no other check)
    until all have passed; return {name: seconds from t0 to its first success} (None: not by the deadline).
    stop_early() true ends the wait (the tool failed)."""
    first = {c.name: None for c in checks}
    done = threading.Event()

    def worker(c):
        k = 0
        while not done.is_set():
            if c.ok():
                first[c.name] = time.monotonic() - t0
                return
            k += 1
            # The next tick of the grid; ticks missed by a slow attempt are skipped.
            now = time.monotonic()
            k = max(k, int((now - t0) / PERIOD) + 1)
            time.sleep(max(0.0, t0 + k * PERIOD - now))
            if time.monotonic() > deadline:
                return

    threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in checks]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        if stop_early is not None and stop_early():
            # One more grid period so a check that is about to pass still may.
            time.sleep(2 * PERIOD)
            break
        time.sleep(PERIOD / 2)
    done.set()
    for t in threads:
        t.join()
    return first


# ---- what runs in the container -------------------------------------------------------------------------

def leader():
    out = subprocess.run([CONTAINER_SH, "leader", CONTAINER], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


PIDNS = None


def container_procs():
    """(pid, name, command line) of every process of a tool in the container."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{d}/ns/pid") != PIDNS:
                continue
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            exe = os.path.basename(os.readlink(f"/proc/{d}/exe"))
        except OSError:
            continue
        if not argv:
            continue
        if exe in BINARIES or os.path.basename(argv[0]) in BINARIES or any(
                s in a for a in argv[:3] for s in SCRIPTS):
            found.append((int(d), exe, " ".join(argv)[:160]))
    return found


def listening(ports=CHECKED_PORTS):
    """Ports of `ports` with a listening TCP socket (the host's network, which the container shares)."""
    busy = set()
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(f) as fh:
                next(fh)
                for line in fh:
                    parts = line.split()
                    if parts[3] == "0A":
                        port = int(parts[1].rsplit(":", 1)[1], 16)
                        if port in ports:
                            busy.add(port)
        except OSError:
            pass
    return sorted(busy)


def cpu_cgroup(pid):
    """The cgroup of pid in the hierarchy with the cpu controller (v1) or the unified one (v2)."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return "?"
    for _, ctrls, path in lines:
        if "cpu" in ctrls.split(","):
            return f"cpu:{path}"
    return next((f"0::{path}" for h, _, path in lines if h == "0"), "?")


TICKS = os.sysconf("SC_CLK_TCK")


def started_at(pid):
    """When pid started, in seconds of CLOCK_BOOTTIME (/proc/PID/stat; 1/CLK_TCK resolution)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[19]) / TICKS
    except (OSError, IndexError, ValueError):
        return None


def alive(pid):
    """pid runs (exists and is no zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def clean():
    return not container_procs() and not listening()


def kill_leftovers():
    for pid, _, _ in container_procs():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(1)


# ---- the tools ------------------------------------------------------------------------------------------

def kubeunit_gen_argv(state):
    return [KUBEUNIT, "gen", "--state-dir", state, "--profile", "control-plane", "--bin-dir", K8S_BIN,
            "--set", f"components.etcd.binary={ETCD_BIN}/etcd", "--set", f"versions.kubernetes={K8S_VERSION}",
            "--set", f"versions.etcd={ETCD_VERSION}",
            # The short unit names of a default state dir (kubeunit-control-plane-*), which the
            # checks below look for: elsewhere `instance: auto` adds the state dir's hash.
            "--set", "instance="]


class Kubeunit:
    name = "kubeunit"
    returns = True  # the start command returns once the environment is up
    command = "kubeunit gen --profile control-plane && kubeunit start"
    stop_what = "kubeunit stop (returns once units, processes and ports are gone)"

    def __init__(self, run):
        self.run = run
        self.dir = f"{WORK}/runs/kubeunit-{run}"

    def start(self, logf):
        gen = shlex.join(kubeunit_gen_argv(self.dir))
        start = shlex.join([KUBEUNIT, "start", "--state-dir", self.dir])
        return in_container(["sh", "-c", f"{gen} && exec {start}"], stdout=logf)

    def checks(self):
        p = f"{self.dir}/pki"
        return [Check("etcd", "https://127.0.0.1:2379/health", cert=f"{p}/etcd/healthcheck-client.crt",
                      key=f"{p}/etcd/healthcheck-client.key"),
                Check("kube-apiserver", "https://127.0.0.1:6443/readyz?verbose", cert=f"{p}/admin.crt",
                      key=f"{p}/admin.key")] + component_checks()

    def stop(self, logf):
        return in_container([KUBEUNIT, "stop", "--state-dir", self.dir], stdout=logf)

    def systemd_started(self, t0):
        """When systemd says each component's process started (ExecMainStartTimestampMonotonic; the
        host and the container share CLOCK_MONOTONIC), from t0: a second account next to /proc's."""
        found = {}
        for c in PORTS:
            out = run_in(["systemctl", "show", "-p", "ExecMainStartTimestampMonotonic", "--value",
                          f"kubeunit-control-plane-{c}.service"])
            if out.stdout.strip().isdigit() and int(out.stdout.strip()) > 0:
                found[c] = round(int(out.stdout.strip()) / 1e6 - t0, 3)
        return found

    def cleanup(self):
        out = run_in(["systemctl", "list-units", "--all", "--no-legend", "--plain", "kubeunit-*"])
        # Its services and its slice; systemd's implied parents of the slice (kubeunit.slice,
        # kubeunit-control.slice for kubeunit-control-plane.slice) stay, empty, as they do for any slice.
        left = [u for u in out.stdout.splitlines()
                if u.split()[0].endswith(".service") or u.split()[0] == "kubeunit-control-plane.slice"]
        # systemd's own account of the start and the stop (Starting/Started/Stopping/Stopped on the
        # monotonic clock, which the host shares), for a look at where the time went.
        journal = run_in(["journalctl", "-q", "-o", "short-monotonic", "_PID=1", "--since=-5min",
                          "--grep", "kubeunit-control-plane"])
        with open(f"{WORK}/logs/kubeunit-{self.run}.systemd.log", "w") as f:
            f.write(journal.stdout)
        run_in([KUBEUNIT, "destroy", "--all", "--state-dir", self.dir])
        return [f"unit left after stop: {u}" for u in left]


class Kwokctl:
    name = "kwokctl"
    returns = True
    stop_what = "kwokctl delete cluster (SIGKILLs the processes, removes the cluster's directory)"

    def __init__(self, run):
        self.workdir = f"{WORK}/runs/kwokctl-{run}"
        self.cluster = f"{self.workdir}/clusters/bench"
        self.env = {"KWOK_WORKDIR": self.workdir, "KWOK_KUBE_VERSION": K8S_VERSION,
                    "KWOK_KUBECTL_BINARY": f"{K8S_BIN}/kubectl"}
        self.command = "kwokctl create cluster --runtime binary" + (
            "" if KWOK_CONTROLLER else " --disable kwok-controller")

    def start(self, logf):
        argv = [f"{KWOK_DIR}/kwokctl", "create", "cluster", "--name", "bench", "--runtime", "binary",
                "--kube-apiserver-port", "6443", "--etcd-port", "2379",
                "--kube-controller-manager-port", "10257", "--kube-scheduler-port", "10259",
                "--etcd-binary", f"{ETCD_BIN}/etcd",
                "--kube-apiserver-binary", f"{K8S_BIN}/kube-apiserver",
                "--kube-controller-manager-binary", f"{K8S_BIN}/kube-controller-manager",
                "--kube-scheduler-binary", f"{K8S_BIN}/kube-scheduler",
                "--kwok-controller-binary", f"{KWOK_DIR}/kwok",
                "--kubeconfig", f"{self.workdir}/kubeconfig"]
        if not KWOK_CONTROLLER:
            argv += ["--disable", "kwok-controller"]
        return in_container(argv, self.env, stdout=logf)

    def checks(self):
        p = f"{self.cluster}/pki"
        return [Check("etcd", "http://127.0.0.1:2379/health"),
                Check("kube-apiserver", "https://127.0.0.1:6443/readyz?verbose", cert=f"{p}/admin.crt",
                      key=f"{p}/admin.key")] + component_checks()

    def stop(self, logf):
        return in_container([f"{KWOK_DIR}/kwokctl", "delete", "cluster", "--name", "bench",
                             "--kubeconfig", f"{self.workdir}/kubeconfig"], self.env, stdout=logf)

    def cleanup(self):
        left = [f"left after delete: {self.cluster}"] if os.path.exists(self.cluster) else []
        subprocess.run(["rm", "-rf", self.workdir])
        return left


class LocalUp:
    name = "local-up"
    returns = False  # runs in the foreground until Ctrl-C; its exit (even 0, after its cleanup) is a failure
    command = "hack/local-up-cluster.sh (START_MODE=nokubelet,nokubeproxy)"
    stop_what = "Ctrl-C: SIGINT to its process group; its trap kills the components and waits for etcd"

    def __init__(self, run):
        self.run = run
        self.dir = f"{WORK}/runs/local-up-{run}"
        self.proc = None

    def start(self, logf):
        # The components' logs outside the run's directory, which goes after the run.
        self.logs = f"{WORK}/logs/local-up-{self.run}-components"
        for d in (f"{self.dir}/certs", f"{self.dir}/tmp", self.logs):
            os.makedirs(d, exist_ok=True)
        e = {
            "PATH": f"{ETCD_BIN}:{K8S_BIN}:{CFSSL_DIR}:" + BASE_ENV["PATH"],
            "GO_OUT": K8S_BIN,
            # The control plane only, as kubeunit's control-plane profile: no kubelet, kube-proxy, CoreDNS
            # (it needs a node) or StorageClass.
            "START_MODE": "nokubelet,nokubeproxy",
            "KUBE_ENABLE_CLUSTER_DNS": "false",
            "KUBE_DEFAULT_STORAGE_CLASS": "false",
            "CERT_DIR": f"{self.dir}/certs",
            "LOG_DIR": self.logs,
            "TMP_DIR": f"{self.dir}/tmp",
            "ETCD_DIR": f"{self.dir}/etcd",
        }
        # Its own session: Ctrl-C in a terminal signals the foreground process group; so does stop().
        self.proc = in_container(["bash", f"{K8S_SRC}/hack/local-up-cluster.sh"], e, new_session=True,
                                 stdout=logf)
        return self.proc

    def checks(self):
        c = f"{self.dir}/certs"
        return [Check("etcd", "http://127.0.0.1:2379/health"),
                Check("kube-apiserver", "https://127.0.0.1:6443/readyz?verbose", cert=f"{c}/client-admin.crt",
                      key=f"{c}/client-admin.key")] + component_checks()

    def stop(self, logf):
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc

    def cleanup(self):
        subprocess.run(["rm", "-rf", self.dir])
        return []


def component_checks():
    # The secure ports allow /healthz without credentials (--authorization-always-allow-paths' default).
    return [Check("kube-controller-manager", "https://127.0.0.1:10257/healthz"),
            Check("kube-scheduler", "https://127.0.0.1:10259/healthz")]


TOOL_CLASSES = {"kubeunit": Kubeunit, "kwokctl": Kwokctl, "local-up": LocalUp}


def wait_stopped(t0, proc, deadline):
    """Seconds from t0 until proc has exited, no tool process runs and no checked port listens (0.1 s grid),
    or None at the deadline; and {"components_gone_s": when no component process ran and the ports were
    free, "command_returned_s": when proc exited}, which tell the components' own shutdown from the tool's."""
    k, marks = 0, {}
    while True:
        now = time.monotonic() - t0
        if proc.poll() is not None:
            marks.setdefault("command_returned_s", now)
        if "components_gone_s" not in marks and not listening() and not any(
                exe in PORTS for _, exe, _ in container_procs()):
            marks["components_gone_s"] = now
        if proc.poll() is not None and clean():
            marks.setdefault("components_gone_s", now)
            return now, marks
        if time.monotonic() > deadline:
            return None, marks
        k = max(k + 1, int((time.monotonic() - t0) / PERIOD) + 1)
        time.sleep(max(0.0, t0 + k * PERIOD - time.monotonic()))


def readyz_checks(checks, t0):
    """kube-apiserver's /readyz checks by when each first passed, seconds from t0 (0.1 s grid)."""
    api = next(c for c in checks if c.name == "kube-apiserver")
    return dict(sorted(((k, round(v - t0, 2)) for k, v in api.sub.items()), key=lambda kv: kv[1]))


def one_run(cls, run):
    tool = cls(run)
    logdir = f"{WORK}/logs"
    os.makedirs(logdir, exist_ok=True)
    result = {"run": run, "ok": False, "problems": [], "loadavg_1min": os.getloadavg()[0]}
    if not clean():
        result["problems"].append(f"not clean before the run: {container_procs()} ports {listening()}")
        kill_leftovers()
        if not clean():
            raise SystemExit(f"bench-peers: ports {listening()} busy or processes left: {container_procs()}")
    with open(f"{logdir}/{cls.name}-{run}.start.log", "w") as logf:
        t0 = time.monotonic()
        t0_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        proc = tool.start(logf)
        exit_at = {}

        def failed():
            if proc.poll() is not None and "s" not in exit_at:
                exit_at["s"] = time.monotonic() - t0
            return proc.poll() is not None and (proc.poll() != 0 or not cls.returns)

        checks = tool.checks()
        first = poll(checks, t0, t0 + TIMEOUT, failed)
        if proc.poll() is not None and "s" not in exit_at:
            exit_at["s"] = time.monotonic() - t0
    result["checks"] = first
    result["command_exit_s"] = exit_at.get("s")
    procs = container_procs()
    # Where the CPU time goes: the cgroups of the tool's processes (a fair race shares one CPU hierarchy).
    result["cgroups"] = sorted({cpu_cgroup(pid) for pid, _, _ in procs})
    # When each component's (running) process started, from t0: the tool's own time before it, and
    # kube-apiserver's exec -> /readyz to hold against the floor.
    result["started"] = {exe: round(started_at(pid) - t0_boot, 3) for pid, exe, _ in procs
                         if exe in PORTS and started_at(pid) is not None}
    if hasattr(tool, "systemd_started"):
        result["systemd_started"] = tool.systemd_started(t0)
    if first.get("kube-apiserver") is not None and "kube-apiserver" in result["started"]:
        result["apiserver_exec_to_readyz_s"] = first["kube-apiserver"] - result["started"]["kube-apiserver"]
    result["apiserver_readyz_checks"] = readyz_checks(checks, t0)
    if all(v is not None for v in first.values()):
        result["ready_s"] = max(first.values())
        result["ok"] = True
    else:
        result["problems"].append(f"not ready: {first} (exit code {proc.poll()}); see {logdir}")
    if cls.returns:
        # kubeunit start and kwokctl create return once the cluster serves: let them finish first.
        try:
            proc.wait(timeout=max(1.0, t0 + TIMEOUT - time.monotonic()))
        except subprocess.TimeoutExpired:
            result["problems"].append("the start command did not return")
            proc.kill()
        result["command_exit_s"] = result["command_exit_s"] or time.monotonic() - t0
        if proc.returncode != 0:
            result["ok"] = False
            result["problems"].append(f"the start command failed (exit code {proc.returncode})")
    result["exit_code"] = proc.poll()

    with open(f"{logdir}/{cls.name}-{run}.stop.log", "w") as logf:
        t1 = time.monotonic()
        sp = tool.stop(logf)
        stopped, marks = wait_stopped(t1, sp, t1 + 120)
        result.update(marks)
        try:
            sp.wait(timeout=5)
        except subprocess.TimeoutExpired:
            sp.kill()
    result["stop_s"] = stopped
    # local-up: none (what ran is the script, interrupted; its exit is part of stopped).
    result["stop_exit_code"] = sp.returncode if cls.returns else None
    if stopped is None:
        result["ok"] = False
        result["problems"].append(f"not stopped after 120 s: {container_procs()} ports {listening()}")
        kill_leftovers()
    result["problems"] += tool.cleanup()
    if not clean():
        result["problems"].append(f"left after cleanup: {container_procs()} ports {listening()}")
        kill_leftovers()
    return result


# ---- the floor: kube-apiserver exec -> /readyz with etcd running ----------------------------------------

def unit_exec(path):
    """ExecStart= of a unit file kubeunit generated, as argv (continuation lines joined), and the
    environment its Environment= and then EnvironmentFile= lines give the process (KEY="value" lines, as
    kubeunit writes them; a file's setting overrides, as in systemd)."""
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    argv, env = None, {}
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            argv = shlex.split(line[len("ExecStart="):])
        elif line.startswith("Environment="):
            env.update(w.split("=", 1) for w in shlex.split(line[len("Environment="):]) if "=" in w)
        elif line.startswith("EnvironmentFile="):
            with open(line[len("EnvironmentFile="):].lstrip("-")) as ef:
                for kv in ef:
                    if "=" in kv and not kv.lstrip().startswith("#"):
                        k, v = kv.rstrip("\n").split("=", 1)
                        env[k] = shlex.split(v)[0] if v else ""
    if argv is None:
        raise SystemExit(f"bench-peers: no ExecStart= in {path}")
    return argv, env


def floor_run(run):
    """kube-apiserver run directly with the flags and environment of kubeunit's generated unit, on a fresh
    etcd (itself run from its unit's ExecStart= and EnvironmentFile=, healthy before the clock starts)."""
    d = f"{WORK}/runs/floor-{run}"
    result = {"run": run, "ok": False, "problems": [], "loadavg_1min": os.getloadavg()[0]}
    if not clean():
        kill_leftovers()
    gen = run_in(kubeunit_gen_argv(d))
    if gen.returncode != 0:
        raise SystemExit(f"bench-peers: kubeunit gen failed: {gen.stdout}{gen.stderr}")
    os.makedirs(f"{d}/data/audit", exist_ok=True)
    units = f"{d}/units"
    etcd_argv, etcd_env = unit_exec(f"{units}/kubeunit-control-plane-etcd.service")
    api_argv, api_env = unit_exec(f"{units}/kubeunit-control-plane-kube-apiserver.service")
    p = f"{d}/pki"
    logdir = f"{WORK}/logs"
    with open(f"{logdir}/floor-{run}.etcd.log", "w") as elog, open(f"{logdir}/floor-{run}.apiserver.log",
                                                                      "w") as alog:
        etcd = in_container(etcd_argv, etcd_env, new_session=True, stdout=elog)
        te = time.monotonic()
        ok = poll([Check("etcd", "https://127.0.0.1:2379/health", cert=f"{p}/etcd/healthcheck-client.crt",
                         key=f"{p}/etcd/healthcheck-client.key")], te, te + 60)
        if ok["etcd"] is None:
            result["problems"].append("etcd not healthy")
        else:
            t0 = time.monotonic()
            t0_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
            api = in_container(api_argv, api_env, new_session=True, stdout=alog)
            checks = [Check("kube-apiserver", "https://127.0.0.1:6443/readyz?verbose", cert=f"{p}/admin.crt",
                            key=f"{p}/admin.key")]
            first = poll(checks, t0, t0 + TIMEOUT, lambda: api.poll() is not None)
            result["apiserver_readyz_checks"] = readyz_checks(checks, t0)
            result["etcd_ready_s"] = ok["etcd"]
            result["ready_s"] = first["kube-apiserver"]
            # From its process start, as for the tools (ready_s also counts entering the container).
            pids = [pid for pid, exe, _ in container_procs() if exe == "kube-apiserver"]
            if first["kube-apiserver"] is not None and pids and started_at(pids[0]) is not None:
                result["apiserver_exec_to_readyz_s"] = first["kube-apiserver"] - (started_at(pids[0]) - t0_boot)
            result["ok"] = first["kube-apiserver"] is not None
            # Its own graceful stop, etcd still running: SIGTERM to the process until it is gone.
            if pids:
                ts = time.monotonic()
                os.kill(pids[0], signal.SIGTERM)
                while alive(pids[0]) and time.monotonic() - ts < 60:
                    time.sleep(0.01)
                result["apiserver_sigterm_to_exit_s"] = time.monotonic() - ts
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(timeout=60)
        os.killpg(etcd.pid, signal.SIGKILL)
        etcd.wait(timeout=60)
    deadline = time.monotonic() + 60
    while not clean() and time.monotonic() < deadline:
        time.sleep(PERIOD)
    if not clean():
        result["problems"].append(f"left: {container_procs()} ports {listening()}")
        kill_leftovers()
    subprocess.run(["rm", "-rf", d])
    return result


# ---- report ---------------------------------------------------------------------------------------------

def machine():
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    return {"nproc": os.cpu_count(), "model": model, "kernel": platform.release(),
            "memory_gib": round(mem_kb / 2**20, 1), "loadavg": list(os.getloadavg())}


def summary(runs, key):
    vals = [r[key] for r in runs if r.get("ok") and r.get(key) is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def exec_overhead():
    """Median seconds of `container.sh exec NAME true`: the same cost in every tool's time."""
    ts = []
    for _ in range(5):
        t = time.monotonic()
        run_in(["true"])
        ts.append(time.monotonic() - t)
    return statistics.median(ts)


def warm_up():
    """Every binary read once, so the first run of the first tool does not pay for a cold page cache."""
    for d in (K8S_BIN, ETCD_BIN, KWOK_DIR, CFSSL_DIR, os.path.dirname(KUBEUNIT)):
        for f in sorted(os.listdir(d)):
            p = os.path.join(d, f)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                with open(p, "rb") as fh:
                    while fh.read(1 << 20):
                        pass


def fmt(s):
    return "-" if s is None else f"{s:.2f} s"


def main():
    # Started in the background by a non-interactive shell (`cmd &`, nohup), this process and every child
    # would inherit SIGINT ignored, and a shell cannot trap a signal ignored on entry: local-up-cluster.sh's
    # Ctrl-C cleanup would never run (its Go components still exit, its kube-apiserver and loop stay).
    # Handled here, children start with the default action again.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    global PIDNS
    PIDNS = os.readlink(f"/proc/{leader()}/ns/pid")
    os.makedirs(f"{WORK}/runs", exist_ok=True)
    warm_up()
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    report = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), "poll_period_s": PERIOD,
        "runs_per_tool": RUNS,
        "versions": {"kubernetes": K8S_VERSION, "etcd": ETCD_VERSION, "kwok": KWOK_VERSION,
                     "cfssl": CFSSL_VERSION,
                     "kubeunit": subprocess.run([KUBEUNIT, "--version"], capture_output=True,
                                                text=True).stdout.strip()},
        "container_exec_overhead_s": exec_overhead(),
        "tools": {},
    }
    unknown = [t for t in TOOLS if t not in TOOL_CLASSES]
    if unknown:
        raise SystemExit(f"bench-peers: unknown tools {unknown} in BENCH_TOOLS (known: {list(TOOL_CLASSES)})")
    tools = [TOOL_CLASSES[t] for t in TOOLS]
    results = {c.name: [] for c in tools}
    floors = []
    for run in range(1, RUNS + 1):
        for cls in tools:
            r = one_run(cls, run)
            results[cls.name].append(r)
            log(f"run {run} {cls.name}: all ready {fmt(r.get('ready_s'))} "
                f"({', '.join(f'{k} {fmt(v)}' for k, v in r.get('checks', {}).items())}; "
                f"kube-apiserver exec -> /readyz {fmt(r.get('apiserver_exec_to_readyz_s'))}, last /readyz "
                f"checks {list(r.get('apiserver_readyz_checks', {}).items())[-3:]}), "
                f"stopped {fmt(r.get('stop_s'))} (components gone {fmt(r.get('components_gone_s'))})"
                + (f"; PROBLEMS: {r['problems']}" if r["problems"] else ""))
        # The floor takes its turn too, so that it sees the same machine (other jobs' load drifts).
        r = floor_run(run)
        floors.append(r)
        log(f"floor {run}: kube-apiserver exec -> /readyz {fmt(r.get('apiserver_exec_to_readyz_s'))}, SIGTERM -> "
            f"exit {fmt(r.get('apiserver_sigterm_to_exit_s'))}, last "
            f"/readyz checks {list(r.get('apiserver_readyz_checks', {}).items())[-3:]}"
            + (f"; PROBLEMS: {r['problems']}" if r["problems"] else ""))
    for cls in tools:
        c = cls(0)
        report["tools"][cls.name] = {
            "command": c.command, "stop": cls.stop_what, "runs": results[cls.name],
            "ready": summary(results[cls.name], "ready_s"), "stop_s": summary(results[cls.name], "stop_s"),
            "returned": summary(results[cls.name], "command_exit_s") if cls.returns else None,
            "apiserver_exec_to_readyz": summary(results[cls.name], "apiserver_exec_to_readyz_s"),
        }
    report["floor"] = {"what": "kube-apiserver run directly with the flags and environment of kubeunit's unit, "
                               "etcd (same) already healthy and fresh: exec to /readyz ok",
                       "runs": floors, "ready": summary(floors, "ready_s"),
                       "apiserver_exec_to_readyz": summary(floors, "apiserver_exec_to_readyz_s"),
                       "apiserver_sigterm_to_exit": summary(floors, "apiserver_sigterm_to_exit_s")}

    m = report["machine"]
    lines = [
        f"Control-plane bring-up: etcd {ETCD_VERSION} + Kubernetes {K8S_VERSION} (kube-apiserver, "
        f"kube-controller-manager, kube-scheduler), same binaries for every tool",
        "",
        f"{started}; {m['nproc']} CPUs ({m['model']}), {m['memory_gib']} GiB, Linux {m['kernel']}, "
        f"load {m['loadavg'][0]:.2f} at start; {RUNS} runs per tool, alternating; checks every {PERIOD} s",
        "",
        "| tool | all ready: median | min | max | kube-apiserver exec -> /readyz: median | "
        "command returned: median | stop: median |",
        "|---|---|---|---|---|---|---|",
    ]
    labels = {"kubeunit": f"kubeunit {report['versions']['kubeunit'].split()[-1]} (gen + start)",
              "kwokctl": f"kwokctl {KWOK_VERSION} (create cluster, binary runtime"
                         + (")" if KWOK_CONTROLLER else ", no kwok-controller)"),
              "local-up": f"hack/local-up-cluster.sh ({K8S_VERSION})"}
    for cls in tools:
        t = report["tools"][cls.name]
        rd, st, rt = t["ready"] or {}, t["stop_s"] or {}, t["returned"] or {}
        ap = t["apiserver_exec_to_readyz"] or {}
        bad = sum(1 for r in t["runs"] if not r["ok"])
        lines.append(f"| {labels[cls.name]}{f' ({bad} failed)' if bad else ''} | {fmt(rd.get('median'))} | "
                     f"{fmt(rd.get('min'))} | {fmt(rd.get('max'))} | {fmt(ap.get('median'))} | "
                     f"{fmt(rt.get('median')) if cls.returns else 'runs in the foreground'} | "
                     f"{fmt(st.get('median'))} |")
    fl = report["floor"]["ready"] or {}
    fa = report["floor"]["apiserver_exec_to_readyz"] or {}
    fs = report["floor"]["apiserver_sigterm_to_exit"] or {}
    lines.append(f"| floor: kube-apiserver alone (kubeunit's flags), etcd running | {fmt(fl.get('median'))} | "
                 f"{fmt(fl.get('min'))} | {fmt(fl.get('max'))} | {fmt(fa.get('median'))} | | "
                 f"{fmt(fs.get('median'))} (SIGTERM -> exit) |")
    lines.append("")
    lines.append(
        "All ready: from the tool's command start (nothing running; entering the container, median "
        f"{report['container_exec_overhead_s']:.3f} s, included) until etcd /health, kube-apiserver /readyz and "
        "kube-controller-manager and kube-scheduler /healthz have all passed. kube-apiserver exec -> /readyz: "
        "from its process start (/proc; 10 ms steps) within the same runs. Command returned: when `kubeunit "
        "start` / `kwokctl create cluster` exited. Stop: until none of the tool's processes runs and ports "
        f"{', '.join(map(str, CHECKED_PORTS))} are free; kubeunit stops gracefully (SIGTERM in dependency order), "
        "kwokctl SIGKILLs, local-up-cluster.sh on Ctrl-C signals twice (SIGINT, then SIGTERM), on which the "
        "components exit without their graceful shutdown.")
    table = "\n".join(lines)
    report["table"] = table
    print(table)
    if JSON_OUT:
        os.makedirs(os.path.dirname(os.path.abspath(JSON_OUT)), exist_ok=True)
        with open(JSON_OUT, "w") as f:
            json.dump(report, f, indent=2)
        log(f"JSON: {JSON_OUT}")
    failed = [r for rs in results.values() for r in rs if not r["ok"]] + [r for r in floors if not r["ok"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
