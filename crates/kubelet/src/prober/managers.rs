//! The probe results SyncPod and the status generator read (upstream `livenessManager`,
//! `readinessManager`, `startupManager` of the kubelet).

use super::results::{ProbeResult, ResultsManager};

/// The latest liveness, readiness and startup results by container ID. [`Default`] is a
/// kubelet without prober: no result is ever known, so a probed container counts as not
/// yet started / not yet ready, and no container is killed for a failed probe.
#[derive(Clone, Copy, Default)]
pub struct ResultsManagers<'a> {
    /// Liveness results: a `Failure` restarts the container.
    pub liveness: Option<&'a ResultsManager>,
    /// Readiness results: `Success` makes a running container ready.
    pub readiness: Option<&'a ResultsManager>,
    /// Startup results: `Success` marks a running container started; `Failure` restarts it.
    pub startup: Option<&'a ResultsManager>,
}

impl ResultsManagers<'_> {
    /// The latest liveness result of container `id`.
    pub fn liveness(&self, id: &str) -> Option<ProbeResult> {
        self.liveness.and_then(|m| m.get(id))
    }

    /// The latest readiness result of container `id`.
    pub fn readiness(&self, id: &str) -> Option<ProbeResult> {
        self.readiness.and_then(|m| m.get(id))
    }

    /// The latest startup result of container `id`.
    pub fn startup(&self, id: &str) -> Option<ProbeResult> {
        self.startup.and_then(|m| m.get(id))
    }
}
