//! The scheduler's internal state: the cache of nodes and pods with assumed pods
//! ([`cache`]) and the scheduling queue ([`queue`]) (upstream `pkg/scheduler/backend`).

pub mod cache;
pub mod queue;
