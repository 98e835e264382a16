//! Where each set of binaries comes from: its project's own release downloads, laid out as the
//! project publishes them, with the checksum file it publishes next to them. One entry per source;
//! a mirror replaces `base` and keeps the layout below it.

/// One project's releases.
#[derive(Debug)]
pub struct Source {
    /// Its name on the command line (`--mirror NAME=URL`), in `KUBEUNIT_MIRROR_<NAME>` (upper case,
    /// `-` as `_`), in the profile's `fetch.mirrors` and in the cache (`bin/NAME-VERSION`).
    pub name: &'static str,
    /// The release downloads' base URL.
    pub base: &'static str,
    /// The version fetched unless the profile names another: the one kubeunit is tested with
    /// (scripts/versions.env builds the same from source; a test keeps the two equal).
    pub version: &'static str,
    /// When a profile needs it.
    pub when: When,
    /// The profile field that names its version (`versions.kubernetes`); none: the pinned one.
    pub version_field: Option<&'static str>,
    /// The profile field it fills when `binDir` is left empty (`fetch::layout`).
    pub fills: Fills,
    /// Its files: each download, relative to `base` (`{v}` the version, `{n}` the version without
    /// its `v`, `{arch}` Go's name of this machine's architecture), the checksum file published for
    /// it, and what it gives.
    pub downloads: &'static [Download],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Every environment (the control plane's binaries, kubectl).
    Always,
    /// When the profile enables this component.
    Component(&'static str),
}

/// The profile field a source's binaries fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fills {
    /// `binDir`: the directory itself.
    BinDir,
    /// A field naming one of its binaries (`components.etcd.binary`, `containerd.runtime`).
    Binary {
        field: &'static str,
        binary: &'static str,
    },
    /// A field naming its directory (`containerd.cniBinDir`).
    Dir(&'static str),
}

#[derive(Debug)]
pub struct Download {
    pub file: &'static str,
    pub sums: &'static str,
    pub gives: Gives,
}

#[derive(Debug)]
pub enum Gives {
    /// The download is the binary, installed under this name.
    Binary(&'static str),
    /// A gzipped tar: each member (path in the archive) installed under a name.
    Archive(&'static [(&'static str, &'static str)]),
}

const fn k8s(file: &'static str, sums: &'static str, name: &'static str) -> Download {
    Download {
        file,
        sums,
        gives: Gives::Binary(name),
    }
}

pub const SOURCES: &[Source] = &[
    // https://dl.k8s.io/release/v1.36.3/bin/linux/amd64/kube-apiserver, with a .sha256 holding
    // only the digest (kwokctl and minikube download the same).
    Source {
        name: "kubernetes",
        base: "https://dl.k8s.io/release",
        version: "v1.36.3",
        when: When::Always,
        version_field: Some("versions.kubernetes"),
        fills: Fills::BinDir,
        downloads: &[
            k8s(
                "{v}/bin/linux/{arch}/kube-apiserver",
                "{v}/bin/linux/{arch}/kube-apiserver.sha256",
                "kube-apiserver",
            ),
            k8s(
                "{v}/bin/linux/{arch}/kube-controller-manager",
                "{v}/bin/linux/{arch}/kube-controller-manager.sha256",
                "kube-controller-manager",
            ),
            k8s(
                "{v}/bin/linux/{arch}/kube-scheduler",
                "{v}/bin/linux/{arch}/kube-scheduler.sha256",
                "kube-scheduler",
            ),
            k8s(
                "{v}/bin/linux/{arch}/kubelet",
                "{v}/bin/linux/{arch}/kubelet.sha256",
                "kubelet",
            ),
            k8s(
                "{v}/bin/linux/{arch}/kube-proxy",
                "{v}/bin/linux/{arch}/kube-proxy.sha256",
                "kube-proxy",
            ),
            k8s(
                "{v}/bin/linux/{arch}/kubectl",
                "{v}/bin/linux/{arch}/kubectl.sha256",
                "kubectl",
            ),
        ],
    },
    // etcd-v3.6.16-linux-amd64.tar.gz, listed in the release's SHA256SUMS.
    Source {
        name: "etcd",
        base: "https://github.com/etcd-io/etcd/releases/download",
        version: "v3.6.16",
        when: When::Component("etcd"),
        version_field: Some("versions.etcd"),
        fills: Fills::Binary {
            field: "components.etcd.binary",
            binary: "etcd",
        },
        downloads: &[Download {
            file: "{v}/etcd-{v}-linux-{arch}.tar.gz",
            sums: "{v}/SHA256SUMS",
            gives: Gives::Archive(&[
                ("etcd-{v}-linux-{arch}/etcd", "etcd"),
                ("etcd-{v}-linux-{arch}/etcdctl", "etcdctl"),
                ("etcd-{v}-linux-{arch}/etcdutl", "etcdutl"),
            ]),
        }],
    },
    // containerd-2.4.2-linux-amd64.tar.gz with its .sha256sum; the binaries under bin/.
    Source {
        name: "containerd",
        base: "https://github.com/containerd/containerd/releases/download",
        version: "v2.4.2",
        when: When::Component("containerd"),
        version_field: None,
        fills: Fills::Binary {
            field: "components.containerd.binary",
            binary: "containerd",
        },
        downloads: &[Download {
            file: "{v}/containerd-{n}-linux-{arch}.tar.gz",
            sums: "{v}/containerd-{n}-linux-{arch}.tar.gz.sha256sum",
            gives: Gives::Archive(&[
                ("bin/containerd", "containerd"),
                ("bin/containerd-shim-runc-v2", "containerd-shim-runc-v2"),
                ("bin/ctr", "ctr"),
            ]),
        }],
    },
    // runc.amd64, listed in the release's runc.sha256sum.
    Source {
        name: "runc",
        base: "https://github.com/opencontainers/runc/releases/download",
        version: "v1.5.2",
        when: When::Component("containerd"),
        version_field: None,
        fills: Fills::Binary {
            field: "containerd.runtime",
            binary: "runc",
        },
        downloads: &[Download {
            file: "{v}/runc.{arch}",
            sums: "{v}/runc.sha256sum",
            gives: Gives::Binary("runc"),
        }],
    },
    // cni-plugins-linux-amd64-v1.9.1.tgz with its .sha256; the plugins at the archive's top.
    Source {
        name: "cni-plugins",
        base: "https://github.com/containernetworking/plugins/releases/download",
        version: "v1.9.1",
        when: When::Component("containerd"),
        version_field: None,
        fills: Fills::Dir("containerd.cniBinDir"),
        downloads: &[Download {
            file: "{v}/cni-plugins-linux-{arch}-{v}.tgz",
            sums: "{v}/cni-plugins-linux-{arch}-{v}.tgz.sha256",
            gives: Gives::Archive(&[
                ("bridge", "bridge"),
                ("host-local", "host-local"),
                ("loopback", "loopback"),
                ("portmap", "portmap"),
            ]),
        }],
    },
    // distribution's registry_3.1.2_linux_amd64.tar.gz with its .sha256.
    Source {
        name: "registry",
        base: "https://github.com/distribution/distribution/releases/download",
        version: "v3.1.2",
        when: When::Component("registry"),
        version_field: None,
        fills: Fills::Binary {
            field: "components.registry.binary",
            binary: "registry",
        },
        downloads: &[Download {
            file: "{v}/registry_{n}_linux_{arch}.tar.gz",
            sums: "{v}/registry_{n}_linux_{arch}.tar.gz.sha256",
            gives: Gives::Archive(&[("registry", "registry")]),
        }],
    },
];

/// The source named `name`.
pub fn find(name: &str) -> Option<&'static Source> {
    SOURCES.iter().find(|s| s.name == name)
}

/// Every source's name, for messages.
pub fn names() -> Vec<&'static str> {
    SOURCES.iter().map(|s| s.name).collect()
}

/// A layout template with the version and architecture filled in.
pub fn expand(template: &str, version: &str, arch: &str) -> String {
    template
        .replace("{v}", version)
        .replace("{n}", version.strip_prefix('v').unwrap_or(version))
        .replace("{arch}", arch)
}

/// Go's name of this machine's architecture, as release file names have it.
pub fn arch() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("amd64"),
        "aarch64" => Some("arm64"),
        "powerpc64" if cfg!(target_endian = "little") => Some("ppc64le"),
        "s390x" => Some("s390x"),
        _ => None,
    }
}

/// The environment variable that takes a mirror of `source`.
/// The environment variable that names where SOURCE's trusted checksum files are.
pub fn checksums_env(source: &str) -> String {
    format!(
        "KUBEUNIT_CHECKSUMS_{}",
        source.to_ascii_uppercase().replace('-', "_")
    )
}

pub fn mirror_env(source: &str) -> String {
    format!(
        "KUBEUNIT_MIRROR_{}",
        source.to_ascii_uppercase().replace('-', "_")
    )
}
