//! Pod lifecycle on the node (upstream `pkg/kubelet/lifecycle`): [`admission`] of new
//! pods (`canAdmitPod`, the predicate admit handler) and the [`sysctl`] allowlist.

pub mod admission;
pub mod sysctl;

pub use admission::{AdmissionNode, PodAdmission, PodAdmitRejection};
