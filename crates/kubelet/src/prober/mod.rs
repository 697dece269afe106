//! Probes (upstream `pkg/kubelet/prober`): liveness, readiness and startup probes of
//! running containers; their latest results are kept in [`results`] managers that the
//! SyncLoop, the runtime manager and the status manager read.
//!
//! [`ProbeManager`] runs one [`worker`] per (pod, container, probe type); each worker
//! probes through a [`ProbeRunner`] (in production the [`Prober`], whose handlers are
//! [`exec`], [`http`], [`tcp`] and [`grpc`]) and records results with thresholds applied.
//! The status generation turns the results into `containerStatuses[].ready` / `started`
//! ([`managers::ResultsManagers`]).

pub mod exec;
pub mod grpc;
pub mod http;
pub mod manager;
pub mod managers;
pub mod probe;
pub mod results;
pub mod tcp;
pub mod worker;

use std::fmt;

use k8s_openapi::api::core::v1::{Container, Probe};

pub use manager::ProbeManager;
pub use probe::{ProbeRunner, Prober};
use results::ProbeResult;

/// The `User-Agent` of HTTP and gRPC probes (upstream `kube-probe/<major>.<minor>`).
pub const USER_AGENT: &str = "kube-probe/1.37";

/// Which probe of a container (upstream `probeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeType {
    /// `livenessProbe`: a failure restarts the container.
    Liveness,
    /// `readinessProbe`: drives `ready` and the Ready condition.
    Readiness,
    /// `startupProbe`: holds the other probes off until it succeeds.
    Startup,
}

impl ProbeType {
    /// All probe types, in the order upstream starts their workers.
    pub const ALL: [ProbeType; 3] = [
        ProbeType::Startup,
        ProbeType::Readiness,
        ProbeType::Liveness,
    ];

    /// The container's probe of this type.
    pub fn spec(self, container: &Container) -> Option<&Probe> {
        match self {
            ProbeType::Liveness => container.liveness_probe.as_ref(),
            ProbeType::Readiness => container.readiness_probe.as_ref(),
            ProbeType::Startup => container.startup_probe.as_ref(),
        }
    }

    /// The result recorded when a new container is first seen (upstream `newWorker`):
    /// not ready until proven, alive until proven dead, startup unknown.
    pub fn initial_result(self) -> ProbeResult {
        match self {
            ProbeType::Liveness => ProbeResult::Success,
            ProbeType::Readiness => ProbeResult::Failure,
            ProbeType::Startup => ProbeResult::Unknown,
        }
    }
}

impl fmt::Display for ProbeType {
    /// `Liveness`, `Readiness` or `Startup`, as in upstream's event messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        })
    }
}

/// The runtime container ID of an API `containerID` (`<runtime>://<id>`).
pub fn runtime_container_id(api_id: &str) -> &str {
    api_id.split_once("://").map_or(api_id, |(_, id)| id)
}
