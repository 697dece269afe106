//! The scheduler's one error type.

/// Everything that can go wrong in the scheduler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration (KubeSchedulerConfiguration, flags, plugin args) is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A configuration or kubeconfig file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A call to the API server failed.
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
    /// The kubeconfig could not be loaded.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// The cache's bookkeeping was asked something inconsistent (assuming a pod twice,
    /// forgetting one never assumed).
    #[error("scheduler cache: {0}")]
    Cache(String),
    /// The scheduling queue was asked something inconsistent (re-adding a pod that is
    /// already queued).
    #[error("scheduling queue: {0}")]
    Queue(String),
    /// The HTTP server for /healthz, /readyz and /metrics could not start.
    #[error("serving {addr}: {source}")]
    Serve {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}
