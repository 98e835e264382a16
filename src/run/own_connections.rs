//! Ending a stopping component's connections once it closed its listener, so that its graceful exit
//! does not wait on them (the component table's `connections_ended_on_stop`).
//!
//! kube-apiserver is its own client (the loopback client of its informers and controllers), and its
//! other clients hold watches. Once it has drained the requests that end and closed its listener,
//! its HTTP server still waits for those connections: golang.org/x/net/http2 gives a client a fixed
//! 1 s after GOAWAY (`goAwayTimeout`), over HTTP/1.1 net/http waits 5 s for a connection that was
//! dialed but never used, and watches (which it does not wait for: "not going to wait for active
//! watch request(s) to drain") hold its server's shutdown until its 2 s deadline ("Failed to shutdown
//! server: context deadline exceeded"; measured in an upgrade: 2.0 s of the API's 5.6 s gap). Nothing
//! more is served on them, and they end with the process anyway, so `stop` ends them (SOCK_DESTROY
//! of the server side; a client gets a reset and reconnects) once the listener is gone: the process
//! then finishes its shutdown at once and exits 0. Where this cannot be done (another PID or network
//! namespace, no CAP_NET_ADMIN, a kernel without SOCK_DESTROY) the component simply takes its time.

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use procfs::net::{TcpNetEntry, TcpState};
use procfs::process::{FDTarget, Process};
use serde::Serialize;
use tokio::task::JoinHandle;

use crate::components::Instance;
use crate::error::Error;
use crate::systemd::Systemd;
use crate::unit::UnitFile;

/// How often the process's sockets are looked at while it runs.
const PERIOD: Duration = Duration::from_millis(5);

/// What one watch did: how many connections it ended, or why it did nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// The listener closed and these many of the process's own connections were ended.
    Ended(usize),
    /// Nothing to do or nothing possible: why.
    Skipped(String),
}

/// The watches of the instances about to be stopped, by instance name.
#[derive(Default)]
pub struct Watches(Vec<(String, JoinHandle<Outcome>)>);

impl Watches {
    /// Watch every running unit of `units` whose component has `connections_ended_on_stop`; call
    /// before their stop jobs are queued.
    pub async fn start<'a>(
        sd: &Systemd,
        units: impl Iterator<Item = (&'a Instance<'static>, &'a UnitFile)>,
    ) -> Result<Watches, Error> {
        let mut watches = Vec::new();
        for (i, unit) in units {
            let c = i.component;
            let Some(listener) = c.connections_ended_on_stop else {
                continue;
            };
            let port = listener.of(&i.plan);
            let Some(state) = sd.state(&unit.name).await? else {
                continue;
            };
            if state.main_pid == 0 {
                continue;
            }
            let name = unit.name.clone();
            let watch = tokio::spawn(async move {
                end_after_listener_closes(state.main_pid, &name, port).await
            });
            watches.push((i.name.clone(), watch));
        }
        Ok(Watches(watches))
    }

    /// What each watch did; call once the components stopped (a watch still running then is
    /// ended: its process is gone or stopped without closing its listener).
    pub async fn finish(self) -> BTreeMap<String, Outcome> {
        let mut outcomes = BTreeMap::new();
        for (name, watch) in self.0 {
            let outcome = if watch.is_finished() {
                watch
                    .await
                    .unwrap_or_else(|e| Outcome::Skipped(format!("the watch failed: {e}")))
            } else {
                watch.abort();
                Outcome::Skipped("it stopped without closing its listener first".into())
            };
            outcomes.insert(name, outcome);
        }
        outcomes
    }
}

/// Watch `pid` (the main process of `unit`) until its listener on `port` closes, then end every
/// connection it serves on that port. Returns when that is done, when the
/// process is gone, or with `Skipped` when the process cannot be watched from here.
pub async fn end_after_listener_closes(pid: u32, unit: &str, port: u16) -> Outcome {
    if let Err(why) = watchable(pid, unit) {
        return Outcome::Skipped(why.to_string());
    }
    let listening = || Sockets::of(pid).map(|s| s.listening_on(port));
    match listening() {
        None => return Outcome::Skipped("the process exited".into()),
        // Not serving (yet): its connections may still be in use; leave them alone.
        Some(false) => return Outcome::Skipped(format!("not listening on port {port}")),
        Some(true) => {}
    }
    loop {
        tokio::time::sleep(PERIOD).await;
        match listening() {
            None => return Outcome::Skipped("the process exited".into()),
            Some(false) => break,
            Some(true) => {}
        }
    }
    match watchable(pid, unit) {
        Ok(()) => {}
        // It closed its listener and exited (between two looks, 5 ms): its connections ended
        // with it.
        Err(Unwatchable::Exited { .. }) => return Outcome::Ended(0),
        // (Once its listener is gone: still the unit's process, not its PID reused since.)
        Err(why) => return Outcome::Skipped(why.to_string()),
    }
    match end_served(pid, port) {
        Ok(n) => Outcome::Ended(n),
        Err(e) => Outcome::Skipped(e.to_string()),
    }
}

/// End the established connections `pid` serves on `port` (the server side of each is destroyed;
/// its client, in the same process or another, gets a reset). Returns how many.
pub fn end_served(pid: u32, port: u16) -> Result<usize, EndFailed> {
    let Some(sockets) = Sockets::of(pid) else {
        return Ok(0);
    };
    let mut ended = 0;
    for s in sockets.served(port) {
        destroy_tcp(s.local_address, s.remote_address).map_err(|source| EndFailed {
            remote: s.remote_address,
            local: s.local_address,
            source,
        })?;
        ended += 1;
    }
    Ok(ended)
}

/// Whether `pid` is `unit`'s process as this process sees it: same PID namespace (its cgroup
/// names the unit) and same network namespace (where the netlink socket acts).
fn watchable(pid: u32, unit: &str) -> Result<(), Unwatchable> {
    if pid == 0 {
        return Err(Unwatchable::NoMainProcess);
    }
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|source| Unwatchable::Cgroup { pid, source })?;
    if !cgroup.lines().any(|l| l.ends_with(&format!("/{unit}"))) {
        return Err(Unwatchable::OtherUnit {
            pid,
            unit: unit.to_string(),
        });
    }
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    // A process that exited but is not reaped yet keeps its cgroup file and loses its namespaces:
    // that is an exit, not another network.
    let Some(its) = ns(&pid.to_string()) else {
        return Err(Unwatchable::Exited { pid });
    };
    if ns("self") != Some(its) {
        return Err(Unwatchable::OtherNetwork { pid });
    }
    Ok(())
}

/// Why a unit's process cannot be watched from this process.
#[derive(Debug, thiserror::Error)]
pub enum Unwatchable {
    #[error("no main process")]
    NoMainProcess,
    #[error("/proc/{pid}/cgroup: {source}")]
    Cgroup { pid: u32, source: io::Error },
    #[error("PID {pid} here is not {unit} (another PID namespace)")]
    OtherUnit { pid: u32, unit: String },
    #[error("PID {pid} is in another network namespace")]
    OtherNetwork { pid: u32 },
    #[error("PID {pid} exited")]
    Exited { pid: u32 },
}

/// A connection the kernel would not end.
#[derive(Debug, thiserror::Error)]
#[error("ending {remote} -> {local}: {source}")]
pub struct EndFailed {
    remote: SocketAddr,
    local: SocketAddr,
    source: io::Error,
}

/// A process's TCP sockets: the entries of its network namespace's tables whose inode it holds.
struct Sockets(Vec<TcpNetEntry>);

impl Sockets {
    fn of(pid: u32) -> Option<Sockets> {
        let p = Process::new(pid as i32).ok()?;
        let inodes: HashSet<u64> = p
            .fd()
            .ok()?
            .flatten()
            .filter_map(|fd| match fd.target {
                FDTarget::Socket(inode) => Some(inode),
                _ => None,
            })
            .collect();
        let mut entries = p.tcp().ok()?;
        entries.extend(p.tcp6().unwrap_or_default());
        entries.retain(|e| e.inode != 0 && inodes.contains(&e.inode));
        Some(Sockets(entries))
    }

    fn listening_on(&self, port: u16) -> bool {
        self.0
            .iter()
            .any(|e| e.state == TcpState::Listen && e.local_address.port() == port)
    }

    /// Server sides of its established connections on `port` (local port `port`).
    fn served(&self, port: u16) -> Vec<&TcpNetEntry> {
        self.0
            .iter()
            .filter(|e| e.state == TcpState::Established && e.local_address.port() == port)
            .collect()
    }
}

/// SOCK_DESTROY of one TCP socket by its addresses (what `ss -K` does). By hand: no well-kept crate
/// offers it (netlink-packet-sock-diag builds only SOCK_DIAG_BY_FAMILY requests), and it is one
/// fixed 72-byte request (linux/sock_diag.h, linux/inet_diag.h) answered by an ack.
fn destroy_tcp(local: SocketAddr, remote: SocketAddr) -> io::Result<()> {
    const SOCK_DESTROY: u16 = 21;
    const INET_DIAG_NOCOOKIE: u32 = !0;
    // SAFETY: plain system calls on a descriptor this function owns; the buffers outlive them.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let (family, src, dst) = match (local, remote) {
        (SocketAddr::V4(l), SocketAddr::V4(r)) => (
            libc::AF_INET,
            addr16(&l.ip().octets()),
            addr16(&r.ip().octets()),
        ),
        (l, r) => (libc::AF_INET6, v6(l), v6(r)),
    };
    let mut msg: Vec<u8> = Vec::with_capacity(72);
    // struct nlmsghdr
    msg.extend(72u32.to_ne_bytes());
    msg.extend(SOCK_DESTROY.to_ne_bytes());
    msg.extend(((libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16).to_ne_bytes());
    msg.extend(1u32.to_ne_bytes()); // seq
    msg.extend(0u32.to_ne_bytes()); // pid: the kernel
                                    // struct inet_diag_req_v2: family, protocol, ext, pad, states
    msg.extend([family as u8, libc::IPPROTO_TCP as u8, 0, 0]);
    msg.extend((!0u32).to_ne_bytes());
    // struct inet_diag_sockid: ports and addresses in network byte order, interface, cookie
    msg.extend(local.port().to_be_bytes());
    msg.extend(remote.port().to_be_bytes());
    msg.extend(src);
    msg.extend(dst);
    msg.extend(0u32.to_ne_bytes());
    msg.extend(INET_DIAG_NOCOOKIE.to_ne_bytes());
    msg.extend(INET_DIAG_NOCOOKIE.to_ne_bytes());
    debug_assert_eq!(msg.len(), 72);
    // SAFETY: see above.
    let sent = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 512];
    // SAFETY: see above.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // The ack: struct nlmsghdr of type NLMSG_ERROR, then the (negative) errno, 0 for success.
    let n = n as usize;
    let kind = u16::from_ne_bytes([buf[4], buf[5]]);
    if n < 20 || kind != libc::NLMSG_ERROR as u16 {
        return Err(io::Error::other(format!(
            "unexpected netlink answer (type {kind}, {n} bytes)"
        )));
    }
    let errno = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
    if errno != 0 {
        return Err(io::Error::from_raw_os_error(-errno));
    }
    Ok(())
}

fn addr16(v4: &[u8; 4]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(v4);
    a
}

fn v6(a: SocketAddr) -> [u8; 16] {
    match a {
        SocketAddr::V6(a) => a.ip().octets(),
        SocketAddr::V4(a) => a.ip().to_ipv6_mapped().octets(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    use std::net::{TcpListener, TcpStream};

    /// This process connected to itself and a child process to it: once the listener is closed,
    /// both connections are ended, and each client sees it; a connection this process made as a
    /// client to another port is left alone.
    #[test]
    fn ends_the_connections_it_serves_after_the_listener_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
        let pid = std::process::id();
        let mut own_client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut own_server, _) = listener.accept().unwrap();
        let mut outgoing = TcpStream::connect(elsewhere.local_addr().unwrap()).unwrap();
        let (mut outgoing_server, _) = elsewhere.accept().unwrap();
        // Another process's connection (a child holding it open until its stdin closes).
        let mut child = std::process::Command::new("bash")
            .args([
                "-c",
                "exec 3<>/dev/tcp/127.0.0.1/$1; echo up; read -r _; echo child 2>/dev/null >&3 || echo reset",
                "bash",
                &port.to_string(),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut up = [0u8; 3];
        child.stdout.as_mut().unwrap().read_exact(&mut up).unwrap();
        let (mut other_server, _) = listener.accept().unwrap();

        let sockets = Sockets::of(pid).unwrap();
        assert!(sockets.listening_on(port));
        assert_eq!(sockets.served(port).len(), 2);
        drop(listener);
        assert!(!Sockets::of(pid).unwrap().listening_on(port));

        assert_eq!(end_served(pid, port).unwrap(), 2, "both connections ended");
        // Both ends of each see the end (an error, not a timeout).
        for end in [&mut own_server, &mut own_client, &mut other_server] {
            end.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let got = end.read(&mut [0u8; 8]);
            assert!(
                matches!(&got, Ok(0))
                    || got.as_ref().is_err_and(|e| !matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    )),
                "{got:?}"
            );
        }
        drop(child.stdin.take());
        let mut said = String::new();
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_to_string(&mut said)
            .unwrap();
        assert_eq!(said.trim(), "reset", "the child's connection was ended");
        child.wait().unwrap();
        // The connection to another port still carries data.
        std::io::Write::write_all(&mut outgoing, b"hi").unwrap();
        let mut got = [0u8; 2];
        outgoing_server.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hi");
        assert_eq!(end_served(pid, port).unwrap(), 0, "nothing left to end");
    }

    #[test]
    fn an_exited_process_is_an_exit_not_another_network() {
        // A child not waited for: a zombie, whose cgroup file stays and whose namespaces go.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let gone = |p: u32| std::fs::read_link(format!("/proc/{p}/ns/net")).is_err();
        for _ in 0..100 {
            if gone(pid) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let unit = cgroup
            .lines()
            .next()
            .and_then(|l| l.rsplit('/').next())
            .unwrap_or_default()
            .to_string();
        let err = watchable(pid, &unit).unwrap_err();
        assert!(matches!(err, Unwatchable::Exited { .. }), "{err}");
        child.wait().unwrap();
    }

    #[test]
    fn a_process_of_another_unit_is_not_watched() {
        let pid = std::process::id();
        let err = watchable(pid, "kubeunit-nothing-kube-apiserver.service")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is not kubeunit-nothing-kube-apiserver.service"),
            "{err}"
        );
        assert!(watchable(0, "x.service").is_err());
    }
}
