//! The scheduling framework (upstream `pkg/scheduler/framework`, KEP-624): the extension
//! points ([`interface`]), the per-cycle state ([`cycle_state`]), the view of pods and
//! nodes ([`types`], [`snapshot`]), the runner of a profile's plugins ([`runtime`]), the
//! unschedulable message ([`fit_error`]) and the in-tree plugins ([`plugins`]).

pub mod cycle_state;
pub mod fit_error;
pub mod interface;
pub mod plugins;
pub mod preemption;
pub mod runtime;
pub mod snapshot;
pub mod status;
pub mod types;

pub use cycle_state::CycleState;
pub use interface::*;
pub use runtime::{ExtensionPoint, Framework, Handle, ProfileSpec, Registry};
pub use snapshot::Snapshot;
pub use status::{Code, Status};
pub use types::{NodeInfo, NodeScore, PodInfo};
