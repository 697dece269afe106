//! The controller manager's one error type.

/// Everything that can go wrong in a controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The flags or configuration are invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A call to the API server failed.
    #[error("API request failed: {}", describe(.0))]
    Api(#[from] kube::Error),
    /// The client (kubeconfig, leader election) could not be set up.
    #[error(transparent)]
    Client(#[from] skiff_client::Error),
    /// An object cannot be acted on as it is (a selector that does not parse, an owner
    /// that is gone); retried with backoff like an API failure.
    #[error("{0}")]
    Invalid(String),
}

/// The API server's message and reason (`Operation cannot be fulfilled ...: Conflict`),
/// without kube's dump of the whole Status; other errors as they print.
fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({}, {})", s.message, s.reason, s.code),
        other => other.to_string(),
    }
}

impl Error {
    /// True for a 409 Conflict: the object changed since it was read, and the next sync
    /// reads it again (upstream requeues these without a warning).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Api(kube::Error::Api(s)) if s.code == 409)
    }

    /// The API server's message alone (`pods "x" is forbidden: ...`), as upstream's
    /// events quote it; other errors as they print.
    pub fn message(&self) -> String {
        match self {
            Error::Api(kube::Error::Api(s)) => s.message.clone(),
            other => other.to_string(),
        }
    }
}
