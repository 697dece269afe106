//! The controller manager's one error type.

/// Everything that can go wrong in a controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The flags or configuration are invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A call to the API server failed.
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
    /// The client (kubeconfig, leader election) could not be set up.
    #[error(transparent)]
    Client(#[from] skiff_client::Error),
    /// An object cannot be acted on as it is (a selector that does not parse, an owner
    /// that is gone); retried with backoff like an API failure.
    #[error("{0}")]
    Invalid(String),
}
