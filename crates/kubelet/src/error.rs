//! The kubelet's error type: one enum for the whole crate, with a variant per area.
//!
//! Upstream's kubelet returns Go `error` values built with `fmt.Errorf`; their text ends
//! up in events (`FailedMount`, `Failed`, `Unhealthy`, ...), pod status messages and
//! logs. Each variant here displays exactly the text upstream (and earlier Skiff)
//! shows, so that the text users and tests see does not depend on the variant; the
//! variant tells callers where the failure came from. The small enums of single areas
//! stay where they are handled within their area (`DnsError`, `AuthnError`, `SinkError`,
//! `TlsError`); [`ObjectError`] crosses into volumes and environments and converts into
//! [`Error::Object`].

use std::io;
use std::path::{Path, PathBuf};

use crate::objects::ObjectError;

/// A kubelet failure. `Display` is the message upstream shows for it (events, pod status,
/// logs); the variant names the area that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A kubelet configuration file, flag or KubeletConfiguration field is invalid
    /// (upstream `kubeletconfigvalidation`, flag parsing), or a pod source (manifest
    /// file or URL) could not be read.
    #[error("{0}")]
    Config(String),
    /// A pod (static manifest or API object) is invalid or references something that
    /// cannot be resolved (upstream `validation.ValidatePod`, env and downward API
    /// resolution, image names).
    #[error("{0}")]
    InvalidPod(String),
    /// A volume could not be set up or torn down; the message is upstream's `SetUp` or
    /// `TearDown` error (e.g. `hostPath type check failed: /x is not a directory`).
    #[error("{0}")]
    Volume(String),
    /// A probe could not be run (upstream prober errors, e.g. `dial tcp ...: connection
    /// refused`).
    #[error("{0}")]
    Probe(String),
    /// A container runtime (CRI) call failed, or the work the kubelet built on it (a
    /// lifecycle hook, a container's config); the message names the call and the
    /// runtime's gRPC message.
    #[error("{0}")]
    Runtime(String),
    /// Image management (garbage collection, listing) failed.
    #[error("{0}")]
    Image(String),
    /// A cgroup could not be created, updated or removed.
    #[error("{0}")]
    Cgroup(String),
    /// Container log handling (rotation, compression, parsing) failed.
    #[error("{0}")]
    Log(String),
    /// A pod cannot be admitted to the node (upstream admission handlers' unexpected
    /// errors).
    #[error("{0}")]
    Admission(String),
    /// The PLEG is unhealthy (upstream `pleg was last seen active ...`).
    #[error("{0}")]
    Pleg(String),
    /// A file system operation on `path` failed (`<op> <path>: <error>`, e.g.
    /// `mkdir /var/lib/kubelet/pods/<uid>/volumes/...: Permission denied (os error 13)`).
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// The operation, as a verb: `mkdir`, `chmod`, `write`, `remove`, ...
        op: &'static str,
        /// The file or directory operated on.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// An API object (ConfigMap, Secret, PVC, token) could not be read.
    #[error(transparent)]
    Object(#[from] ObjectError),
}

impl Error {
    /// An [`Error::Io`] of operation `op` on `path`.
    pub(crate) fn io(op: &'static str, path: impl AsRef<Path>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.as_ref().to_path_buf(),
            source,
        }
    }
}

/// Errors are equal when they come from the same area and read the same (the sources of
/// [`Error::Io`] compare by their text).
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

/// The kubelet crate's result type; the error defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
