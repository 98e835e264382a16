//! Health: component probes over HTTP(S) with the generated certificates, and who holds a port.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};

use crate::components::{Component, Probe};
use crate::error::Error;
use crate::spec::plan::host_port;
use crate::spec::{paths, Plan};

/// The URL a component's probe reads.
pub fn probe_url(plan: &Plan, component: &Component, probe: &Probe) -> String {
    let host: IpAddr = if component.netns {
        plan.node().link.node.into()
    } else if probe.link_host {
        plan.nodes[0].link.host.into()
    } else if probe.loopback {
        std::net::Ipv4Addr::LOCALHOST.into()
    } else {
        plan.local
    };
    let scheme = if probe.https { "https" } else { "http" };
    format!(
        "{scheme}://{}{}",
        host_port(host, probe.port.of(plan)),
        probe.path
    )
}

/// An HTTP(S) client that trusts `ca` and presents `client` (pki names under the state dir), for
/// health probes and for the API calls of the addon bootstrap.
pub fn https_agent(
    plan: &Plan,
    ca: Option<&str>,
    client: Option<&str>,
    timeout: Duration,
) -> Result<ureq::Agent, Error> {
    let identity = match client {
        Some(client) => {
            let (path, pem) = read_pki(plan, paths::cert(client))?;
            let cert = Certificate::from_pem(&pem).map_err(|e| unusable(path, &e))?;
            let (path, pem) = read_pki(plan, paths::key(client))?;
            let key = PrivateKey::from_pem(&pem).map_err(|e| unusable(path, &e))?;
            Some(ClientCert::new_with_certs(&[cert], key))
        }
        None => None,
    };
    agent_of(plan, ca, identity, timeout)
}

/// The client this host calls the API servers as: the admin on a control-plane host, else the
/// node's own identity (a node may list the Nodes: system:node-proxier, addons/rbac.yaml.hbs); a
/// host that joined later, the certificate its kubelet was issued.
pub fn api_client(plan: &Plan, timeout: Duration) -> Result<ureq::Agent, Error> {
    if plan.joins() {
        let pem = plan
            .kubelet_cert_dir()
            .join(crate::spec::join::KUBELET_CLIENT_PEM);
        return https_agent_pem(plan, Some("ca"), &pem, timeout);
    }
    let client = match plan.here_has(crate::spec::profile::HostRole::ControlPlane) {
        true => "admin",
        false => "kubelet-client",
    };
    https_agent(plan, Some("ca"), Some(client), timeout)
}

/// `https_agent` presenting the certificate and key of one PEM file outside the state dir (a
/// joined node's, which its kubelet was issued and rotates: `spec::join::KUBELET_CLIENT_PEM`).
pub fn https_agent_pem(
    plan: &Plan,
    ca: Option<&str>,
    pem_file: &std::path::Path,
    timeout: Duration,
) -> Result<ureq::Agent, Error> {
    let pem = std::fs::read(pem_file).map_err(Error::io(pem_file, "read"))?;
    let cert = Certificate::from_pem(&pem).map_err(|e| unusable(pem_file.into(), &e))?;
    let key = PrivateKey::from_pem(&pem).map_err(|e| unusable(pem_file.into(), &e))?;
    let identity = ClientCert::new_with_certs(&[cert], key);
    agent_of(plan, ca, Some(identity), timeout)
}

fn read_pki(plan: &Plan, rel: String) -> Result<(std::path::PathBuf, Vec<u8>), Error> {
    let path = plan.state_dir.join(&rel);
    let bytes =
        crate::state::root::read_in(&plan.state_dir, &rel).map_err(Error::io(&path, "read"))?;
    Ok((path, bytes))
}

fn unusable(path: std::path::PathBuf, e: &dyn std::fmt::Display) -> Error {
    Error::Artifact {
        path,
        message: format!("not usable for TLS: {e}"),
        fix: "repair the state dir with `kubeunit gen`".into(),
    }
}

fn agent_of(
    plan: &Plan,
    ca: Option<&str>,
    identity: Option<ClientCert>,
    timeout: Duration,
) -> Result<ureq::Agent, Error> {
    let mut tls = TlsConfig::builder();
    if let Some(ca) = ca {
        let (path, pem) = read_pki(plan, paths::cert(ca))?;
        let cert = Certificate::from_pem(&pem).map_err(|e| unusable(path, &e))?;
        tls = tls.root_certs(RootCerts::Specific(Arc::new(vec![cert])));
    }
    if identity.is_some() {
        tls = tls.client_cert(identity);
    }
    Ok(ureq::Agent::config_builder()
        .tls_config(tls.build())
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .new_agent())
}

/// Why a component is not healthy (yet): what `status` shows and `start` reports at its timeout.
#[derive(Debug, thiserror::Error)]
pub enum Unhealthy {
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: {source}")]
    Request { url: String, source: ureq::Error },
    /// The probe's certificates cannot be read from the state dir.
    #[error("{0}")]
    Certificates(Error),
    #[error("the probe did not finish: {0}")]
    Aborted(String),
}

/// A component's probe, ready to be asked again and again while the component comes up: one
/// agent, whose pooled connection the next probe reuses, so that a repeated probe costs neither
/// side a TLS handshake (nor a read of the certificates).
#[derive(Clone)]
pub struct Prober {
    /// `None`: the component has no probe (it counts as healthy once running).
    target: Option<(String, ureq::Agent)>,
}

impl Prober {
    pub fn new(plan: &Plan, component: &Component, timeout: Duration) -> Result<Prober, Unhealthy> {
        let Some(probe) = component.probe else {
            return Ok(Prober { target: None });
        };
        let url = probe_url(plan, component, &probe);
        let agent =
            https_agent(plan, probe.ca, probe.client, timeout).map_err(Unhealthy::Certificates)?;
        Ok(Prober {
            target: Some((url, agent)),
        })
    }

    /// Probe once: Ok(()) when it answers 200, else why not. Blocking.
    pub fn probe(&self) -> Result<(), Unhealthy> {
        let Some((url, agent)) = &self.target else {
            return Ok(());
        };
        match agent.get(url).call() {
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                // Read to the end, so that the connection goes back to the agent's pool.
                let body = resp.body_mut().read_to_string().unwrap_or_default();
                if status == 200 {
                    return Ok(());
                }
                Err(Unhealthy::Status {
                    url: url.clone(),
                    status,
                    body: body.lines().take(5).collect::<Vec<_>>().join(" / "),
                })
            }
            Err(source) => Err(Unhealthy::Request {
                url: url.clone(),
                source,
            }),
        }
    }

    /// `probe` off the async runtime.
    pub async fn probe_async(&self) -> Result<(), Unhealthy> {
        let prober = self.clone();
        tokio::task::spawn_blocking(move || prober.probe())
            .await
            .unwrap_or_else(|e| Err(Unhealthy::Aborted(e.to_string())))
    }
}

/// Probe a component once: Ok(()) when it answers 200, else why not. Blocking.
pub fn probe(plan: &Plan, component: &Component, timeout: Duration) -> Result<(), Unhealthy> {
    Prober::new(plan, component, timeout)?.probe()
}

/// Probe until the component answers or `deadline` passes (blocking); the last reason if not.
pub fn wait_healthy(
    plan: &Plan,
    component: &Component,
    deadline: Instant,
) -> Result<(), Unhealthy> {
    let prober = Prober::new(plan, component, Duration::from_secs(2))?;
    loop {
        match prober.probe() {
            Ok(()) => return Ok(()),
            Err(why) if Instant::now() >= deadline => return Err(why),
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// `probe` off the async runtime.
pub async fn probe_async(
    plan: &Plan,
    component: &Component,
    timeout: Duration,
) -> Result<(), Unhealthy> {
    Prober::new(plan, component, timeout)?.probe_async().await
}

/// A process listening on a TCP port.
#[derive(Debug, Clone)]
pub struct PortOwner {
    pub port: u16,
    pub address: String,
    /// `pid (command line)`, or why it is unknown.
    pub process: String,
}

/// Listening sockets on any of `ports`, with the owning process where /proc shows it.
pub fn listeners(ports: &[u16]) -> Vec<PortOwner> {
    let mut sockets = Vec::new();
    for table in [procfs::net::tcp(), procfs::net::tcp6()] {
        for e in table.unwrap_or_default() {
            if e.state == procfs::net::TcpState::Listen && ports.contains(&e.local_address.port()) {
                sockets.push(e);
            }
        }
    }
    if sockets.is_empty() {
        return Vec::new();
    }
    // inode -> pid, from every process's fd table we can read.
    let mut owners = std::collections::HashMap::new();
    if let Ok(procs) = procfs::process::all_processes() {
        for p in procs.flatten() {
            let Ok(fds) = p.fd() else { continue };
            for fd in fds.flatten() {
                if let procfs::process::FDTarget::Socket(inode) = fd.target {
                    owners.entry(inode).or_insert(p.pid);
                }
            }
        }
    }
    sockets
        .into_iter()
        .map(|e| {
            let process = match owners.get(&e.inode) {
                Some(pid) => {
                    let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                        .map(|b| {
                            String::from_utf8_lossy(&b)
                                .split('\0')
                                .filter(|s| !s.is_empty())
                                .take(3)
                                .collect::<Vec<_>>()
                                .join(" ")
                        })
                        .unwrap_or_default();
                    format!("pid {pid} ({cmd})")
                }
                None => "a process not visible from here (another namespace or user)".into(),
            };
            PortOwner {
                port: e.local_address.port(),
                address: e.local_address.to_string(),
                process,
            }
        })
        .collect()
}
