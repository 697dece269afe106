//! The Kubernetes release Skiff implements, one constant for every component that reports
//! it: the API server's `/version` and the kubelet's `status.nodeInfo.kubeletVersion`.

/// The Kubernetes major version Skiff implements.
pub const KUBERNETES_MAJOR: &str = "1";
/// See [`KUBERNETES_MAJOR`].
pub const KUBERNETES_MINOR: &str = "37";
/// The release as `kubectl version` prints it (`gitVersion`, upstream `version.Get()`).
pub const GIT_VERSION: &str = "v1.37.0+skiff";
