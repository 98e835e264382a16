//! Library errors. Each one names what was wrong (file, field, value) and how to fix it; the CLI maps
//! them to exit codes (2 for bad input, 1 for a failed check or operation).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{source_name}: field '{field}': {message}.\n  fix: {fix}")]
    Profile {
        source_name: String,
        field: String,
        message: String,
        fix: String,
    },
    #[error("cannot read profile {source_name}: {reason}.\n  fix: pass a built-in name (dev, control-plane, ci) or a readable YAML file")]
    ProfileRead { source_name: String, reason: String },
    #[error("--set '{set}': {message}.\n  fix: write --set KEY=VALUE with a dotted key, e.g. --set network.serviceCIDR=10.96.0.0/16")]
    Set { set: String, message: String },
    #[error("state dir {path}: {message}.\n  fix: {fix}")]
    State {
        path: PathBuf,
        message: String,
        fix: String,
    },
    #[error("{path}: {message}.\n  fix: {fix}")]
    Artifact {
        path: PathBuf,
        message: String,
        fix: String,
    },
    /// Something on this host stops an environment from starting (busy port, missing binary, ...).
    #[error("{message}.\n  fix: {fix}")]
    Preflight { message: String, fix: String },
    /// A component did not come up; the message carries the reason and its journal.
    #[error("{0}")]
    Start(String),
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// Exit code: 2 for input the user must fix, 1 for everything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Profile { .. }
            | Error::ProfileRead { .. }
            | Error::Set { .. }
            | Error::State { .. } => 2,
            Error::Artifact { .. }
            | Error::Preflight { .. }
            | Error::Start(_)
            | Error::Other(_) => 1,
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
}
