//! What an entry of the component table says, and what follows from it.

use crate::error::FieldError;
use crate::pki::Secrets;
use crate::render::Template;
use crate::spec::hosts::OnHosts;
use crate::spec::profile::Versions;
use crate::spec::{Plan, Profile};

#[derive(Clone, Copy)]
pub struct Component {
    /// Profile key and unit suffix: `kubeunit-<env>-<name>.service` (`<name>@<node>` for a per-node
    /// component on a node after the first).
    pub name: &'static str,
    /// Runs once on every node, an instance each (`components::instances`), rendered and run with
    /// the plan of its node (`Plan::on_node`); otherwise once per environment, seeing the first
    /// node.
    pub per_node: bool,
    /// Runs once per pull-through cache of the plan (`Plan::upstreams`: a registry name and its
    /// upstream), an instance each, `<name>@<registry name>`, rendered and run with the plan of its
    /// cache (`Plan::on_upstream`); its files name `{upstream}` (`paths::upstream_file`).
    pub per_upstream: bool,
    /// Default binary name inside binDir.
    pub binary: &'static str,
    /// Runs another component's program: that one's `components.NAME.binary` (which `gen` fills
    /// in from the fetched binaries) is its own.
    pub binary_of: Option<&'static str>,
    /// Needs root (network namespaces, iptables, mounts, cgroups): refused in a rootless profile.
    pub needs_root: bool,
    /// Every environment has it (or what stands in for it).
    pub required: bool,
    /// Something outside the environment the profile can name instead (etcd: `datastore`): it is then
    /// disabled, and those that need it use that one.
    pub stand_in: Option<StandIn>,
    /// Sends sd_notify READY=1 (Type=notify); otherwise Type=exec plus the health probe.
    pub notify: bool,
    /// Components it needs: a profile enabling this one must enable them, `start` waits until they are
    /// healthy, and the unit gets Wants= + After= on them. Not Requires=: systemd would stop the
    /// dependent (for good) whenever the dependency crashes and is restarted.
    pub needs: &'static [&'static str],
    /// Of `needs`, those it waits for by itself (it retries until they answer): it starts alongside
    /// them, so their start-up times overlap instead of adding up. `start` submits its start job once
    /// theirs are submitted (not once they are healthy), in systemd's ignore-dependencies mode; its
    /// unit keeps Wants= and After= on them, so that stopping (and a start by systemd, at boot) still
    /// goes in order.
    pub starts_alongside: &'static [&'static str],
    /// Of `needs`, those it starts after once their unit is up, not once they are healthy: `start`
    /// submits its start job once theirs are done (a notify unit's: READY=1, which kube-apiserver
    /// sends once it listens, well before /readyz). systemd cannot hold it by After=: it ignores
    /// the ordering against a job started with ignore-dependencies (kube-apiserver's, alongside etcd).
    /// Started earlier (alongside), the Kubernetes clients' start-up took CPU from kube-apiserver's
    /// and made it ready about 0.2 s later on 2 cores.
    pub starts_once_up: &'static [&'static str],
    /// Ordering only, when that component is enabled (e.g. kubelet after a kubeunit-managed containerd).
    pub after_if_enabled: &'static [&'static str],
    /// A Kubernetes component: gets the profile's global featureGates and `--v`.
    pub kubernetes: bool,
    /// Feature gates go into the component's config file instead of `--feature-gates`.
    pub gates_in_config: bool,
    /// Manages cgroups below its own (Delegate=yes).
    pub delegate: bool,
    /// KillMode= other than systemd's default (containerd must leave shims running).
    pub kill_mode: Option<&'static str>,
    /// How `start` and `status` tell it is healthy.
    pub probe: Option<Probe>,
    /// Runs once and stays active (Type=oneshot, RemainAfterExit=yes): it sets something up.
    pub oneshot: bool,
    /// Runs in the node's network namespace (NetworkNamespacePath=): its ports are the node's, its
    /// iptables chains and links are gone with the namespace, and it is probed at the node's address.
    pub netns: bool,
    /// Runs in the node's UTS namespace (its hostname the node's name; node-network makes it),
    /// through nsenter: the pods on the host's network it starts see their node's name as their
    /// hostname, as on a machine of its own, not this host's, which every node shares.
    pub uts: bool,
    /// TCP ports it listens on (checked free before `start`, and free again after `stop`): each
    /// port is declared by the one component that listens on it, nowhere else.
    pub ports: &'static [Port],
    /// The version its binary must report (`--version`), from the profile's `versions`.
    pub version: fn(&Versions) -> &str,
    /// The Go module its releases are built from: a binary whose Go build info names this module at
    /// the wanted release is that version without running it; any other is asked `--version`.
    pub go_module: &'static str,
    /// How far its minor version may be from kube-apiserver's, by upstream's version skew policy
    /// (<https://kubernetes.io/releases/version-skew-policy/#supported-version-skew>); `None` for one
    /// the policy does not name. `upgrade` refuses a plan that would leave it outside.
    pub skew: Option<Skew>,
    /// Flags kubeunit sets (name without dashes, value); profile extraArgs override by name.
    pub flags: fn(&Plan) -> Vec<(String, String)>,
    /// Arguments after the binary, before the flags.
    pub args: fn(&Plan) -> Vec<String>,
    /// Environment of its process that is no secret and no choice of the profile's: Environment= in
    /// its unit. The profile's `env` (its EnvironmentFile=, which systemd reads after) overrides a
    /// variable.
    pub environment: &'static [(&'static str, &'static str)],
    /// More of it that depends on the plan (paths in the state dir), after `environment`.
    pub environment_of: fn(&Plan) -> Vec<(String, String)>,
    /// A user of its own it runs as instead of root (its primary group too), when not empty
    /// (`artifacts::own_user`: its keys through systemd's credentials, its data dirs its own).
    pub own_user: fn(&Profile) -> &str,
    /// Commands systemd runs before it (ExecStartPre=), each an argv.
    pub pre_start: fn(&Plan) -> Vec<Vec<String>>,
    /// Commands systemd runs once it stopped, or failed to start (ExecStopPost=), each an argv.
    pub stop_post: fn(&Plan) -> Vec<Vec<String>>,
    /// Files it reads, written into the state dir by `gen`; a per-node component's into its node's
    /// directory (`NodePlan::file`), and it names them with `Plan::node_file`.
    pub files: &'static [File],
    /// What `start` does once it is healthy (and again on a `start` that finds it running).
    pub after_healthy: Option<Hook>,
    /// Directories of the data dir it owns (runtime data: `destroy` deletes exactly these), in its
    /// node's data dir for a per-node component (`NodePlan::data_dir`).
    pub data_dirs: &'static [&'static str],
    /// What `stop` removes once it no longer runs: what it leaves behind when it is killed.
    pub after_stop: &'static [Cleanup],
    /// A listener (of its `ports`) whose connections hold its exit after it stopped listening (its
    /// own loopback client's, and watches): a graceful `stop` ends the connections it serves there
    /// once the listener is closed (`run::own_connections`).
    pub connections_ended_on_stop: Option<Port>,
    /// Checks of the profile particular to this component (run when it is enabled).
    pub validate: fn(&Profile) -> Vec<FieldError>,
    /// What the host must offer it, checked by `start`'s preflight before anything starts.
    pub host_checks: &'static [HostCheck],
    /// Kernel modules it needs. Its unit loads them first (`ExecStartPre=-/sbin/modprobe`, as
    /// containerd's own unit does for overlay), so that a host that boots into the installed units
    /// has them; `start`'s preflight accepts one that is not loaded yet but can be.
    pub kernel_modules: &'static [&'static str],
    /// Enabled by another setting of the profile instead of `components.NAME.enabled` (which
    /// must then stay unset).
    pub enabled_by: Option<EnabledBy>,
    /// Runs on a schedule: a oneshot service (no restart, not kept active) that a timer of the same
    /// name starts. `start` starts the timer (its service loaded, not run), `status` shows its next
    /// run, `stop` stops both.
    pub timer: Option<Timer>,
    /// The hosts of an environment across hosts it runs on (`hosts:` roles).
    pub on_hosts: OnHosts,
}

/// Whether a profile enables a component, and the setting that does (`etcd.snapshot.schedule`).
#[derive(Clone, Copy)]
pub struct EnabledBy {
    pub field: &'static str,
    pub when: fn(&Profile) -> bool,
}

/// A component's timer (`units/timer.hbs`).
#[derive(Clone, Copy)]
pub struct Timer {
    /// OnCalendar=: a calendar expression the profile's validation checked.
    pub on_calendar: fn(&Plan) -> String,
    /// Persistent=: catch up on a run missed while the timer was stopped.
    pub persistent: bool,
}

/// An existing service that replaces a component.
#[derive(Debug, Clone, Copy)]
pub struct StandIn {
    /// The profile field that names it (for messages).
    pub field: &'static str,
    /// Whether the profile names one.
    pub named: fn(&Profile) -> bool,
}

/// Minor versions a component may run behind and ahead of kube-apiserver (of the oldest one, when
/// several run: "must not be newer than the oldest kube-apiserver"); kube-apiserver's own is
/// between API servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skew {
    pub older: u64,
    pub newer: u64,
}

impl Component {
    /// Whether the profile replaces it with an existing service.
    pub fn replaced(&self, p: &Profile) -> bool {
        self.stand_in.is_some_and(|s| (s.named)(p))
    }
}

/// A TCP port a component listens on: its `ports.*` field, declared once, in the entry of the
/// component that listens on it (`table::port`). What the profile schema knows of ports follows
/// from these: the fields `ports:` has, their defaults, and the `ports: auto` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Port {
    /// Its key under `ports:`, as the profile spells it (`etcdClient`).
    pub field: &'static str,
    /// Its number in `profiles/base.yaml`, which lists every port with its default (a test holds
    /// the two equal).
    pub default: u16,
    /// Its place in `ports:` and in a `ports: auto` block (0 first). A new port takes the next
    /// one: the blocks and the `profile.yaml`s written before keep the order of theirs.
    pub slot: u16,
    /// Whose network namespace it listens in.
    pub namespace: Namespace,
    /// The port of a per-upstream component's first instance: each further one listens on the
    /// next (its place in `Plan::upstreams`), so one field serves every cache.
    pub per_upstream: bool,
}

/// A network namespace a port can listen in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    /// This host's: another environment, or any process of the host, may hold the port.
    Host,
    /// The node's own (`Component::netns`): the port is the node's alone.
    Node,
}

impl Port {
    /// Its number in the plan. A plan's profile names every declared port (`components::validate`
    /// checks it); a profile that was not validated may not, and gets the default.
    pub fn of(&self, plan: &Plan) -> u16 {
        let base = plan.ports.get(self.field).unwrap_or(self.default);
        let step = match (self.per_upstream, plan.upstream_index) {
            (true, Some(i)) => u16::try_from(i).unwrap_or(u16::MAX),
            _ => 0,
        };
        base.saturating_add(step)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Probe {
    pub https: bool,
    /// The port it answers on.
    pub port: Port,
    pub path: &'static str,
    /// CA (pki name) that verifies the serving certificate.
    pub ca: Option<&'static str>,
    /// Client certificate (pki name) to present.
    pub client: Option<&'static str>,
    /// Host to connect to: the plan's local address, or loopback (for listeners kubeunit always binds
    /// there). A component in the node's network namespace is probed at the node's address.
    pub loopback: bool,
    /// Connect to the host's end of the first node's link instead (a listener of this host that
    /// the nodes reach there).
    pub link_host: bool,
}

/// A lifecycle step `start` runs for a component once it is healthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// Apply every manifest in `STATE/addons/` server-side (the API server is ready). Runs while
    /// the rest starts.
    ApplyAddons,
    /// Import the image archives (profile `images`, `STATE/images/`) into containerd's `k8s.io`
    /// namespace. Components that need this one start after it.
    ImportImages,
    /// Push the images of those archives from containerd (the component with `ImportImages`) to
    /// this registry. `start` reports it done like the import.
    LoadRegistry,
    /// Once the kubelet registered its Node, apply the node's `config/node.yaml` to it (role,
    /// labels, pod network).
    LabelNode,
}

impl Hook {
    /// Whether components that wait for this one wait for the hook too (and `start` reports it
    /// done).
    pub fn gates_dependents(self) -> bool {
        matches!(self, Hook::ImportImages | Hook::LoadRegistry)
    }

    /// Its name in a unit name (`kubeunit install`'s oneshot units).
    pub fn slug(self) -> &'static str {
        match self {
            Hook::ApplyAddons => "apply-addons",
            Hook::ImportImages => "import-images",
            Hook::LoadRegistry => "load-registry",
            Hook::LabelNode => "label-node",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Hook::ApplyAddons => "apply addons",
            Hook::ImportImages => "import images",
            Hook::LoadRegistry => "load registry",
            Hook::LabelNode => "label node",
        }
    }
}

/// A host requirement: `Err((what is wrong, the fix))` when the host lacks it.
pub type HostCheck = fn(&Plan) -> Result<(), (String, String)>;

/// Something a stopped component leaves on the host, and how `stop` removes it.
#[derive(Debug, Clone, Copy)]
pub enum Cleanup {
    /// Unmount whatever is still mounted below these directories (volumes, rootfs, netns, shm).
    Unmount(fn(&Plan) -> Vec<std::path::PathBuf>),
    /// Delete a runtime directory (after `Unmount`): state that means nothing once it stopped.
    RemoveDir(fn(&Plan) -> std::path::PathBuf),
    /// Delete the symlinks in a directory that point below this one (the kubelet's links in
    /// /var/log/containers to the environment's pod logs).
    LinksInto(&'static str, fn(&Plan) -> std::path::PathBuf),
    /// Remove the (empty) cgroup directories below this path in every cgroup v1 controller: those
    /// systemd does not manage (cpuset) stay otherwise.
    CgroupDirs(fn(&Plan) -> String),
    /// Delete the temporary files of the snapshots a `kubeunit snapshot save` was writing when it
    /// was ended (by `stop`, or kill -9) in the plan's snapshot dir: never a finished snapshot.
    UnfinishedSnapshots,
}

/// A config file of a component.
pub struct File {
    /// Path in the state dir (see `spec::paths`).
    pub path: &'static str,
    /// Who may read it (and run it).
    pub mode: FileMode,
    /// Whether the plan has it (the component being enabled is implied).
    pub when: fn(&Plan) -> bool,
    pub content: fn(&FileContext) -> Result<Content, FieldError>,
}

/// A config file's mode in the state dir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// 0644: a certificate.
    Public,
    /// 0600: a config file or manifest, no secret, read by root's components alone.
    Private,
    /// Holds a secret: 0600.
    Secret,
    /// A script a component runs by its path (it holds no secret): 0755.
    Executable,
}

/// What a config file's content function sees.
pub struct FileContext<'a> {
    pub plan: &'a Plan,
    pub component: &'a Component,
    pub secrets: &'a Secrets,
}

pub enum Content {
    /// A template and its data.
    Template(&'static Template, serde_json::Value),
    /// Text taken as it is (a file the profile points at).
    Verbatim(String),
}

impl Component {
    /// Whether the profile runs it: `components.NAME.enabled`, or what `enabled_by` says.
    /// Whether it runs on the host a profile is the view of: enabled in the environment, and
    /// this host is one it runs on (`on_hosts`; every host on one host).
    pub fn is_enabled(&self, profile: &Profile) -> bool {
        self.in_environment(profile) && self.on_hosts.here(profile)
    }

    /// Whether the environment has it, on whichever of its hosts.
    pub fn in_environment(&self, profile: &Profile) -> bool {
        match &self.enabled_by {
            Some(by) => (by.when)(profile),
            None => profile.component(self.name).enabled,
        }
    }

    /// Absolute path of its binary: the profile's `binary` (absolute, or a name in binDir), else the
    /// usual name in binDir.
    pub fn binary_path(&self, plan: &Plan) -> std::path::PathBuf {
        self.binary_path_in(&plan.profile)
    }

    /// `binary_path` as a profile names it (`upgrade` asks the binaries of a profile before it
    /// renders one).
    pub fn binary_path_in(&self, profile: &Profile) -> std::path::PathBuf {
        let settings = profile.component(self.binary_of.unwrap_or(self.name));
        let name = if settings.binary.is_empty() {
            self.binary
        } else {
            settings.binary.as_str()
        };
        let p = std::path::Path::new(name);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            profile.bin_dir.join(p)
        }
    }

    /// The field of the profile's `versions` its binary follows (`kubernetes`, `etcd`), if any:
    /// the one its `version` reads, asked with each field holding its own name. `upgrade` checks
    /// and orders the components that follow one.
    pub fn follows(&self) -> Option<&'static str> {
        let names = Versions {
            kubernetes: "kubernetes".into(),
            etcd: "etcd".into(),
        };
        match (self.version)(&names) {
            "kubernetes" => Some("kubernetes"),
            "etcd" => Some("etcd"),
            _ => None,
        }
    }

    /// Every port it listens on, with its number in the plan.
    pub fn listeners(&self, plan: &Plan) -> Vec<(Port, u16)> {
        self.ports.iter().map(|p| (*p, p.of(plan))).collect()
    }

    /// The enabled components it must not start before: those of `deps` it does not start alongside.
    pub fn ordered_after(&self, plan: &Plan) -> Vec<&'static str> {
        self.deps(plan)
            .into_iter()
            .filter(|d| !self.starts_alongside.contains(d) && !self.starts_once_up.contains(d))
            .collect()
    }

    /// Components it waits for (needs, and the enabled ones it is ordered after).
    pub fn deps(&self, plan: &Plan) -> Vec<&'static str> {
        // Of those it is ordered after, whichever has an instance here (the caller's `deps_of`
        // keeps those: one a setting enables, haproxy, is no `components.*.enabled`). Across
        // hosts, what runs on another host (a worker's API servers) it waits for itself.
        self.needs
            .iter()
            .copied()
            .filter(|d| plan.enabled(d))
            .chain(self.after_if_enabled.iter().copied())
            .collect()
    }
}
