//! The runtime's one error type and its mapping onto gRPC status codes.

/// Errors returned by the CRI runtime service.
///
/// Mapped onto gRPC codes the way containerd's CRI plugin does (`errdefs.ToGRPC`):
/// missing objects are `NotFound`, bad requests `InvalidArgument`, requests that do not
/// fit the object's state `FailedPrecondition`, everything else `Internal`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A sandbox, container or image that does not exist.
    #[error("{kind} {id:?} not found")]
    NotFound {
        /// What was looked up: `"pod sandbox"`, `"container"`, `"image"`.
        kind: &'static str,
        /// The ID or reference asked for.
        id: String,
    },
    /// The request itself is malformed (missing config, bad user, empty command).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The object exists but is in the wrong state (e.g. starting an exited container).
    #[error("{0}")]
    FailedPrecondition(String),
    /// A limit was reached (too many streaming requests waiting for their client).
    #[error("{0}")]
    ResourceExhausted(String),
    /// An operation ran out of its time budget (ExecSync timeout).
    #[error("{0}")]
    Timeout(String),
    /// A failure containerd reports as a plain error (gRPC `Unknown`), e.g. an unknown
    /// runtime handler at RunPodSandbox.
    #[error("{0}")]
    Unknown(String),
    /// Anything else: I/O, runc, CNI plugin failures.
    #[error("{0:#}")]
    Internal(#[from] anyhow::Error),
}

impl Error {
    /// Shorthand for [`Error::NotFound`].
    pub fn not_found(kind: &'static str, id: &str) -> Self {
        Self::NotFound {
            kind,
            id: id.to_string(),
        }
    }
}

/// `value`, or `InvalidArgument("<what> is required")` when it is absent (a CRI request
/// without its config or metadata).
pub fn required<T>(value: Option<T>, what: &str) -> Result<T> {
    value.ok_or_else(|| Error::InvalidArgument(format!("{what} is required")))
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Self::Internal(err.into())
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let msg = err.to_string();
        match err {
            Error::NotFound { .. } => tonic::Status::not_found(msg),
            Error::InvalidArgument(_) => tonic::Status::invalid_argument(msg),
            Error::FailedPrecondition(_) => tonic::Status::failed_precondition(msg),
            Error::ResourceExhausted(_) => tonic::Status::resource_exhausted(msg),
            Error::Timeout(_) => tonic::Status::deadline_exceeded(msg),
            Error::Unknown(_) => tonic::Status::unknown(msg),
            Error::Internal(_) => tonic::Status::internal(msg),
        }
    }
}

/// Result alias used across the runtime.
pub type Result<T, E = Error> = std::result::Result<T, E>;
