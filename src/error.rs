//! Library errors. Each one names what was wrong (file, field, value) and how to fix it; the CLI maps
//! them to exit codes: 2 for input the user must fix, 1 for a failed check, operation or I/O.

use std::fmt;
use std::path::PathBuf;

/// One wrong field of a profile (kubeadm's field.Error): where, what was there, why, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path, e.g. `network.serviceCIDR`; `(document)` for the whole file.
    pub field: String,
    pub value: String,
    pub message: String,
    pub fix: String,
}

impl FieldError {
    pub fn new(
        field: impl Into<String>,
        value: impl fmt::Display,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> FieldError {
        FieldError {
            field: field.into(),
            value: value.to_string(),
            message: message.into(),
            fix: fix.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "field '{}': {} (value: {}).\n  fix: {}",
            self.field, self.message, self.value, self.fix
        )
    }
}

/// Every wrong field of one profile, reported together.
#[derive(Debug, Clone)]
pub struct FieldErrors {
    /// Where the profile came from (file path or `built-in profile 'dev'`).
    pub source_name: String,
    pub errors: Vec<FieldError>,
}

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [only] = self.errors.as_slice() {
            return write!(f, "{}: {only}", self.source_name);
        }
        write!(
            f,
            "{}: {} fields are wrong:",
            self.source_name,
            self.errors.len()
        )?;
        for e in &self.errors {
            write!(f, "\n- {e}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A profile with wrong fields (all of them listed).
    #[error("{0}")]
    Profile(FieldErrors),
    #[error("cannot read profile {source_name}: {reason}.\n  fix: pass a built-in name (dev, control-plane, ci) or a readable YAML file")]
    ProfileRead { source_name: String, reason: String },
    /// A command-line argument or environment variable that is wrong.
    #[error("{message}.\n  fix: {fix}")]
    Usage { message: String, fix: String },
    #[error("--set '{set}': {message}.\n  fix: write --set KEY=VALUE with a dotted key, e.g. --set network.serviceCIDR=10.96.0.0/16")]
    Set { set: String, message: String },
    /// The state dir is not one kubeunit can use as it is (not ours, not writable, does not match).
    #[error("state dir {path}: {message}.\n  fix: {fix}")]
    State {
        path: PathBuf,
        message: String,
        fix: String,
    },
    /// A file of the state dir (or one it names) that kubeunit cannot use.
    #[error("{path}: {message}.\n  fix: {fix}")]
    Artifact {
        path: PathBuf,
        message: String,
        fix: String,
    },
    /// An image archive given to load that cannot be (missing, unreadable, damaged, unnamed images).
    #[error("image archive {path}: {problem}.\n  fix: {}", .problem.fix())]
    ImageArchive {
        path: PathBuf,
        problem: crate::run::archive::Problem,
    },
    /// Reading or writing failed (disk full, permissions changed underneath, ...).
    #[error("{path}: cannot {op}: {source}.\n  fix: check free space and permissions there")]
    Io {
        path: PathBuf,
        op: &'static str,
        source: std::io::Error,
    },
    /// Another kubeunit process holds the state dir's lock, and did not let go in time.
    #[error("state dir {path} is locked by {holder} (waited {waited_secs}s for it).\n  fix: wait until that command has finished and run this one again, or wait longer with KUBEUNIT_LOCK_TIMEOUT=SECONDS")]
    Busy {
        path: PathBuf,
        holder: String,
        waited_secs: u64,
    },
    /// Something on this host stops an environment from starting (busy port, missing binary, ...).
    #[error("{message}.\n  fix: {fix}")]
    Preflight { message: String, fix: String },
    /// A component did not come up; the message carries the reason and its journal.
    #[error("{0}")]
    Start(String),
    /// Applying the addon manifests failed.
    #[error("{0}")]
    Addon(String),
    /// A call to the environment's API failed (`kubeunit token`): what was asked, and the answer.
    #[error("{0}")]
    Api(String),
    /// The components are healthy, but the environment is not usable yet (`run::usable`).
    #[error("every component is healthy, but after {seconds:.1}s still waiting for: {}.\n  fix: see `kubectl get nodes,pods -A` and `kubeunit logs`; the environment keeps running (`kubeunit start --wait healthy` returns without waiting, `kubeunit stop` stops it)", .missing.join(", "))]
    NotUsable { missing: Vec<String>, seconds: f64 },
    #[error(transparent)]
    Systemd(#[from] crate::systemd::SystemdError),
    /// Downloading release binaries failed, or what came was not what was published.
    #[error(transparent)]
    Fetch(#[from] crate::fetch::FetchError),
    /// A bug in kubeunit: an invariant that the code above should have made impossible.
    #[error("internal error (please report it): {0}")]
    Internal(String),
}

impl Error {
    /// Exit code: 2 for input the user must fix, 1 for everything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Fetch(e) if e.is_input() => 2,
            Error::Fetch(_) => 1,
            Error::Profile(_)
            | Error::ProfileRead { .. }
            | Error::Set { .. }
            | Error::Usage { .. }
            | Error::ImageArchive { .. }
            | Error::State { .. } => 2,
            Error::Artifact { .. }
            | Error::Io { .. }
            | Error::Busy { .. }
            | Error::Preflight { .. }
            | Error::Start(_)
            | Error::Addon(_)
            | Error::Api(_)
            | Error::NotUsable { .. }
            | Error::Systemd(_)
            | Error::Internal(_) => 1,
        }
    }

    pub fn state(
        path: impl Into<PathBuf>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Error::State {
            path: path.into(),
            message: message.into(),
            fix: fix.into(),
        }
    }

    /// A closure for `map_err` on an I/O result about `path`.
    pub fn io(path: impl Into<PathBuf>, op: &'static str) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, op, source }
    }

    /// One field error of a profile.
    pub fn field(source_name: impl Into<String>, error: FieldError) -> Self {
        Error::fields(source_name, vec![error])
    }

    /// Every wrong field of one profile (`source_name`), reported together.
    pub fn fields(source_name: impl Into<String>, errors: Vec<FieldError>) -> Self {
        Error::Profile(FieldErrors {
            source_name: source_name.into(),
            errors,
        })
    }
}
