//! Probes (upstream `pkg/kubelet/prober`): liveness, readiness and startup probes of
//! running containers; their latest results are kept in [`results`] managers that the
//! SyncLoop, the runtime manager and the status manager read.

pub mod managers;
pub mod results;
