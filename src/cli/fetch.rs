//! `kubeunit fetch`: download a profile's release binaries into the cache, checked.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use super::common::{offline, print_json, Output};
use crate::error::Error;
use crate::fetch::{self, Event};
use crate::pipeline::{self, binaries};

pub const AFTER_HELP: &str = "Examples:
  kubeunit fetch                                   # dev's binaries, then: kubeunit gen && kubeunit start
  kubeunit fetch --profile control-plane --set versions.kubernetes=v1.35.4
  kubeunit fetch --mirror kubernetes=https://mirror.example/dl.k8s.io/release
  KUBEUNIT_MIRROR_ETCD=https://mirror.example/etcd kubeunit fetch -o json

Each file is checked against the checksum file its project publishes on its release page (dl.k8s.io's
.sha256, etcd's SHA256SUMS, ...) before anything goes into the cache, also when the file comes from a
mirror (a mirror's own checksum files are taken only where KUBEUNIT_CHECKSUMS_<SOURCE> or the
profile's fetch.checksums names them); a failure leaves the cache as it was. A set already in the cache is checked against what was fetched and not downloaded again,
unless it came from another origin (mirror or release page) or architecture.
Sources: kubernetes (https://dl.k8s.io/release), etcd, containerd, runc, cni-plugins and registry
(their GitHub release downloads). The cache: $KUBEUNIT_CACHE_DIR, else $XDG_CACHE_HOME/kubeunit,
else ~/.cache/kubeunit. SSL_CERT_FILE names CA certificates to trust instead of the usual roots.
Offline (KUBEUNIT_OFFLINE=1, or the profile's offline: true) it is refused, exit 2.";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Built-in profile name or a path to a YAML profile: its versions and components say what to
    /// fetch [default: dev].
    #[arg(short, long, default_value = "dev")]
    pub profile: String,
    /// Override a profile field by dotted path; repeatable (e.g. --set versions.kubernetes=v1.35.4).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Download SOURCE from a mirror laid out as its release downloads; repeatable. Also
    /// KUBEUNIT_MIRROR_<SOURCE> and the profile's fetch.mirrors.
    #[arg(long = "mirror", value_name = "SOURCE=URL")]
    pub mirrors: Vec<String>,
    /// Download every set again, even one the cache holds (and replace it).
    #[arg(long)]
    pub refresh: bool,
    /// Give up on a server that sends nothing for this long (connect, answer, each read).
    #[arg(
        long,
        env = "KUBEUNIT_FETCH_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub timeout: u64,
    /// Give up on one file's download after this long in all (a server that trickles).
    #[arg(
        long,
        env = "KUBEUNIT_FETCH_DEADLINE",
        value_name = "SECONDS",
        default_value_t = 900,
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub deadline: u64,
    /// The cache [default: $KUBEUNIT_CACHE_DIR, $XDG_CACHE_HOME/kubeunit, ~/.cache/kubeunit].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    let profile = pipeline::profile(&args.profile, &args.sets)?;
    // Offline is a promise that nothing leaves this machine: fetch would break it.
    let env_offline = offline()? == Some(true);
    if env_offline || profile.offline {
        let why = if env_offline {
            "KUBEUNIT_OFFLINE=1"
        } else {
            "the profile's offline: true"
        };
        return Err(Error::Usage {
            message: format!("offline ({why}): kubeunit fetch downloads from the internet"),
            fix: "on a connected machine run KUBEUNIT_OFFLINE=0 kubeunit fetch (and --set offline=false for a profile that says offline); offline, give gen the binaries with --bin-dir DIR".into(),
        });
    }
    let mut flags = BTreeMap::new();
    for m in &args.mirrors {
        let Some((source, url)) = m.split_once('=') else {
            return Err(Error::Usage {
                message: format!("--mirror {m:?}: not SOURCE=URL"),
                fix: "write e.g. --mirror kubernetes=https://mirror.example/dl.k8s.io/release"
                    .into(),
            });
        };
        flags.insert(source.to_string(), url.to_string());
    }
    let cache = match args.cache_dir.or_else(fetch::cache::default_dir) {
        Some(dir) => crate::spec::host::absolute(&dir)?,
        None => {
            return Err(Error::Usage {
                message: "no cache dir: neither KUBEUNIT_CACHE_DIR, XDG_CACHE_HOME nor HOME is set"
                    .into(),
                fix: "pass --cache-dir DIR or set KUBEUNIT_CACHE_DIR".into(),
            })
        }
    };
    let request = fetch::Request {
        cache,
        wanted: binaries::fetch_wanted(&profile, &flags)?,
        timeout: Duration::from_secs(args.timeout),
        deadline: Duration::from_secs(args.deadline),
        refresh: args.refresh,
    };
    let mut progress = Progress::new();
    let fetched = fetch::fetch(&request, &mut |e| progress.event(e))?;
    match args.output {
        Output::Json => print_json(&serde_json::json!({
            "cacheDir": request.cache,
            "sets": fetched,
        })),
        Output::Text => {
            println!("{:<12} {:<10} {:<11} DIR", "SOURCE", "VERSION", "STATE");
            for f in &fetched {
                let state = if f.cached { "cached" } else { "downloaded" };
                println!(
                    "{:<12} {:<10} {:<11} {}",
                    f.source,
                    f.version,
                    state,
                    f.dir.display()
                );
            }
            println!(
                "next: kubeunit gen --profile {} && kubeunit start",
                args.profile
            );
        }
    }
    Ok(0)
}

/// Progress on stderr: a line per file, and on a terminal its bytes as they come.
struct Progress {
    tty: bool,
    last_shown: u64,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            last_shown: 0,
        }
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Cached { wanted, dir } => eprintln!(
                "kubeunit: {} {} is in the cache ({}), checked",
                wanted.source.name,
                wanted.version,
                dir.display()
            ),
            Event::Replacing { wanted, dir, why } => eprintln!(
                "kubeunit: {} {} in the cache ({}) is not taken: {why}; fetching it again",
                wanted.source.name,
                wanted.version,
                dir.display()
            ),
            Event::Waiting {
                wanted,
                lock,
                holder,
            } => eprintln!(
                "kubeunit: waiting for {} {}: {} holds its lock ({}); this fetch goes on when it is done",
                wanted.source.name,
                wanted.version,
                match holder {
                    Some(pid) => format!("another fetch (PID {pid})"),
                    None => "another fetch".to_string(),
                },
                lock.display()
            ),
            Event::Downloading { url } => {
                self.last_shown = 0;
                eprintln!("kubeunit: downloading {url}");
            }
            Event::Progress { bytes, total } if self.tty && bytes - self.last_shown >= 4 << 20 => {
                self.last_shown = bytes;
                match total {
                    Some(t) => eprint!("\r  {} of {} MiB", bytes >> 20, t >> 20),
                    None => eprint!("\r  {} MiB", bytes >> 20),
                }
            }
            Event::Progress { .. } => {}
            Event::Verified {
                url: _,
                digest,
                bytes,
                seconds,
            } => {
                if self.tty {
                    eprint!("\r\x1b[K");
                }
                eprintln!(
                    "  {:.1} MiB in {seconds:.1}s, {} {} as published",
                    bytes as f64 / 1048576.0,
                    digest.algorithm(),
                    digest.hex()
                );
            }
            Event::Installed { wanted, dir } => eprintln!(
                "kubeunit: {} {} is in {}",
                wanted.source.name,
                wanted.version,
                dir.display()
            ),
        }
    }
}
