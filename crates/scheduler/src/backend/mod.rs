//! The scheduler's internal state: the cache of nodes and pods with assumed pods
//! ([`cache`]), the scheduling queue ([`queue`]) and the ordered status patches of
//! failed pods (`api_dispatcher`) (upstream `pkg/scheduler/backend`).

pub(crate) mod api_dispatcher;
pub mod cache;
pub mod queue;
