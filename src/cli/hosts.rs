//! `kubeunit hosts check DIR`: the state dirs `gen --out DIR` wrote for the hosts of an
//! environment across hosts, checked together before they go out. `kubeunit hosts seed DIR`:
//! a cloud-init seed for each, which brings its host up at first boot.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::seed;
use crate::spec::host;
use crate::state::hosts;

pub const AFTER_HELP: &str = "Examples:
  kubeunit gen --profile ha --out ./hosts && kubeunit hosts check ./hosts
  kubeunit hosts check ./hosts -o json
  kubeunit hosts seed ./hosts --out ./seeds --network 192.168.60.0/24 --fetch
  kubeunit hosts sync --state-dir /var/lib/kubeunit/ha    # routes to the hosts that joined later";

const SEED_HELP: &str = "Examples:
  kubeunit hosts seed ./hosts --out ./seeds --network 192.168.60.0/24 --gateway 192.168.60.1 --fetch
  kubeunit hosts seed ./hosts --out ./seeds --network 198.19.254.0/24 --files-volume kubeunit-files
  genisoimage -quiet -V cidata -r -J -o cp-1.iso ./seeds/cp-1     # a NoCloud volume (or: cloud-localds)

Each host's seed (OUT/HOST: meta-data, user-data, network-config) makes cloud-init write the host
dir below /root/kubeunit-seed (every file with its mode), trust the --ca-cert CAs, get the
binaries (--files-volume: copy that volume to --files-dir; --fetch: kubeunit fetch, from the
profile's mirrors if it names them), then run kubeunit import and kubeunit install, and start the
environment's target as boot does. The host comes up at first boot and at every boot after. kubeunit must be on the host at --kubeunit (in the
image, or on the files volume). A seed holds its host's keys: OUT is 0700, its files 0600; so is
cloud-init's copy on the host (/var/lib/cloud/instance/user-data.txt).
Exit codes: 0 written, 2 a host dir or option that will not do (named, with the fix).";

const CHECK_HELP: &str = "Examples:
  kubeunit hosts check ./hosts
  kubeunit hosts check ./hosts -o json | jq -r '.hosts[].host'

Each DIR/HOST must be intact against its manifest; the CAs, the service-account key pair and the
encryption key and config must be the same on every host that has them; a host that is no
control-plane host may hold no CA key, no service-account key and no encryption key.
Exit codes: 0 consistent, 2 a dir that is not (the file, the hosts and the fix are named).";

const SYNC_HELP: &str = "Examples:
  kubeunit hosts sync --state-dir /var/lib/kubeunit/ha          # what the hosts-sync timer runs every 10 s
  kubeunit hosts sync --state-dir /var/lib/kubeunit/ha -o json

A host that joined later (hosts[].join) publishes on its Node its address, pod network and node link;
on this host each claim that holds (inside the cluster's networks, clear of every host's and the other
claims', on the hosts' network) becomes a route through node-network, as the hosts gen rendered have,
and one that is gone or no longer holds is removed. On a control-plane host it also approves a joined
node's kubelet-serving CSR when it is that node's own (requested as system:node:NAME, naming only the
node's name and its Node's addresses): kube-apiserver trusts the kubelets' serving certificates by the
cluster CA. Running it again changes nothing. Claims and CSRs left alone are listed, with the reason.
Exit codes: 0 synced, 1 the API or node-network failed.";

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Route to the hosts that joined later, and approve their kubelets' serving certificates.
    #[command(after_help = SYNC_HELP)]
    Sync(SyncArgs),
    /// Check that the hosts' state dirs agree on what they share, and hold only their own keys.
    #[command(after_help = CHECK_HELP)]
    Check(CheckArgs),
    /// Write a cloud-init NoCloud seed per host, which brings the host up at its first boot.
    #[command(after_help = SEED_HELP)]
    Seed(SeedArgs),
}

#[derive(clap::Args, Debug)]
pub struct SeedArgs {
    /// The directory `kubeunit gen --out DIR` wrote (DIR/HOST for each host).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Where the seeds go (OUT/HOST): a new or empty directory.
    #[arg(long, value_name = "OUT")]
    pub out: PathBuf,
    /// The hosts' network: each host gets its inventory address in it, statically
    /// [default: no network-config; DHCP or the cloud configures it].
    #[arg(long, value_name = "CIDR")]
    pub network: Option<ipnet::Ipv4Net>,
    /// The default route's gateway on --network [default: no default route].
    #[arg(long, value_name = "IP")]
    pub gateway: Option<Ipv4Addr>,
    /// A DNS server for the hosts; repeatable.
    #[arg(long = "nameserver", value_name = "IP")]
    pub nameservers: Vec<IpAddr>,
    /// The interface --network's address goes on: a name, or a glob where the image renders the
    /// network with systemd-networkd or netplan (with ifupdown, give the name: e.g. ens3).
    #[arg(long, value_name = "NAME", default_value = "e*")]
    pub interface: String,
    /// Copy the volume with this label, shipped beside the seed, to --files-dir at first boot.
    #[arg(long, value_name = "LABEL")]
    pub files_volume: Option<String>,
    /// Where the files volume's tree goes on the host.
    #[arg(long, value_name = "DIR", default_value = "/opt/kubeunit")]
    pub files_dir: PathBuf,
    /// Get the host profile's release binaries with `kubeunit fetch` at first boot.
    #[arg(long)]
    pub fetch: bool,
    /// kubeunit on the host.
    #[arg(long, value_name = "PATH", default_value = "/usr/local/bin/kubeunit")]
    pub kubeunit: PathBuf,
    /// A CA certificate (PEM) the hosts trust, e.g. a mirror's; repeatable.
    #[arg(long = "ca-cert", value_name = "FILE")]
    pub ca_certs: Vec<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(clap::Args, Debug)]
pub struct SyncArgs {
    #[command(flatten)]
    pub target: Target,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// The directory `kubeunit gen --out DIR` wrote (DIR/HOST for each host).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub fn exec(command: Command) -> Result<i32, Error> {
    match command {
        Command::Sync(args) => {
            let plan = args.target.plan()?;
            if plan.hosts.is_empty() {
                return Err(Error::Usage {
                    message: format!(
                        "{}: environment '{}' is on one host; `hosts sync` routes between hosts",
                        plan.state_dir.display(),
                        plan.name()
                    ),
                    fix:
                        "give the state dir of a host of an environment across hosts (--state-dir)"
                            .into(),
                });
            }
            let synced = crate::run::hosts_sync::sync(&plan)?;
            match args.output {
                Output::Json => print_json(&synced),
                Output::Text => {
                    for r in &synced.added {
                        println!(
                            "added {}: pods {}, link {}",
                            r.address, r.pod_cidr, r.link_net
                        );
                    }
                    for a in &synced.removed {
                        println!("removed {a}");
                    }
                    for c in &synced.approved {
                        println!("approved {c}");
                    }
                    for why in &synced.refused {
                        println!("left alone: {why}");
                    }
                    if let Some(why) = &synced.waiting {
                        println!("nothing to do yet: {why}");
                    }
                }
            }
            Ok(0)
        }
        Command::Check(args) => {
            let dir = host::absolute(&args.dir)?;
            let checked = hosts::check(&dir)?;
            match args.output {
                Output::Json => print_json(&serde_json::json!({ "ok": true, "hosts": checked })),
                Output::Text => {
                    for h in &checked {
                        println!(
                            "{}: {} ({}), {} files: intact, shared values agree",
                            h.host,
                            h.dir.display(),
                            h.roles.join(", "),
                            h.files
                        );
                    }
                }
            }
            Ok(0)
        }
        Command::Seed(args) => {
            let dir = host::absolute(&args.dir)?;
            let out = host::absolute(&args.out)?;
            let opts = seed::Options {
                network: args.network,
                gateway: args.gateway,
                nameservers: args.nameservers,
                interface: args.interface,
                files_volume: args.files_volume,
                files_dir: args.files_dir,
                fetch: args.fetch,
                kubeunit: args.kubeunit,
                ca_certs: args
                    .ca_certs
                    .iter()
                    .map(|p| seed::read_ca_cert(p))
                    .collect::<Result<_, _>>()?,
            };
            let seeds = seed::seeds(&dir, &opts)?;
            seed::write(&out, &seeds)?;
            match args.output {
                Output::Json => print_json(&serde_json::json!({ "out": out, "seeds": seeds })),
                Output::Text => {
                    for s in &seeds {
                        let docs: Vec<&str> = s.documents.iter().map(|(n, _)| *n).collect();
                        println!(
                            "{}: {} ({}, instance {})",
                            s.host,
                            out.join(&s.host).display(),
                            docs.join(", "),
                            s.instance_id
                        );
                    }
                }
            }
            Ok(0)
        }
    }
}
