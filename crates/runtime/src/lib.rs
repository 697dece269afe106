//! Skiff's CRI runtime: the role containerd's CRI plugin or CRI-O plays on a node.
//!
//! Layout (see ARCHITECTURE.md): [`image`] (content store, pull, image metadata),
//! [`snapshot`] (overlayfs snapshots keyed by chain ID), [`sandbox`] (pod sandboxes:
//! pinned namespaces, hostname, resolv.conf), [`cni`] (CNI plugin invocation),
//! [`container`] (OCI runtime spec, OCI runtime CLI), [`shim`] (the per-container
//! monitor), [`stats`] (cgroup, filesystem and network statistics, metrics), [`events`]
//! (container lifecycle events), [`server`] (tonic RuntimeService + ImageService).

mod cgroup;
pub mod cni;
pub mod config;
pub mod container;
pub mod error;
pub mod events;
mod id;
pub mod image;
mod oom;
pub mod process;
mod registry;
mod runtime;
pub mod sandbox;
pub mod server;
pub mod shim;
pub mod snapshot;
pub mod stats;
mod store;
pub mod streaming;

pub use config::RuntimeConfig;
pub use error::Error;
pub use runtime::Runtime;

/// The CRI v1 types and gRPC traits, re-exported for embedders and tests.
pub use k8s_cri;
/// The gRPC library the CRI traits are expressed in (`tonic::Request`, `tonic::Status`).
pub use tonic;
