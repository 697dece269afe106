//! Container readiness and startup in the API status from the probe results (upstream
//! `prober_manager.go` `UpdatePodStatus` and `isContainerStarted`).

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::api::core::v1::{ContainerStatus, Probe};

use super::results::{ProbeResult, ResultsManager};
use super::runtime_container_id;

/// Sets `started` and `ready` of `statuses` (containers of `specs`): a container has
/// started when it runs and its startup probe succeeded (or it has none); it is ready
/// when it has started and its readiness probe succeeded (or it has none). A probe that
/// has not produced a result yet counts as not passed.
pub fn update_container_statuses(
    specs: &[Container],
    statuses: &mut [ContainerStatus],
    readiness: &ResultsManager,
    startup: &ResultsManager,
) {
    for status in statuses {
        let spec = specs.iter().find(|c| c.name == status.name);
        let running = status.state.as_ref().is_some_and(|s| s.running.is_some());
        let id = runtime_container_id(status.container_id.as_deref().unwrap_or(""));
        let passed = |results: &ResultsManager, probe: Option<&Probe>| match results.get(id) {
            Some(result) => result == ProbeResult::Success,
            None => probe.is_none(),
        };
        let started = running && passed(startup, spec.and_then(|c| c.startup_probe.as_ref()));
        status.started = Some(started);
        status.ready = started && passed(readiness, spec.and_then(|c| c.readiness_probe.as_ref()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateRunning};

    fn spec(name: &str, readiness: bool, startup: bool) -> Container {
        Container {
            name: name.into(),
            readiness_probe: readiness.then(Probe::default),
            startup_probe: startup.then(Probe::default),
            ..Default::default()
        }
    }

    fn status(name: &str, running: bool) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            container_id: Some(format!("skiff://id-{name}")),
            ready: running,
            state: Some(ContainerState {
                running: running.then(ContainerStateRunning::default),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn flags(statuses: &[ContainerStatus]) -> Vec<(bool, Option<bool>)> {
        statuses.iter().map(|s| (s.ready, s.started)).collect()
    }

    #[test]
    fn probes_gate_started_and_ready() {
        let specs = [
            spec("plain", false, false),
            spec("ready", true, false),
            spec("gated", true, true),
            spec("stopped", false, false),
        ];
        let mut statuses = [
            status("plain", true),
            status("ready", true),
            status("gated", true),
            status("stopped", false),
        ];
        let (readiness, _r) = ResultsManager::new();
        let (startup, _s) = ResultsManager::new();
        update_container_statuses(&specs, &mut statuses, &readiness, &startup);
        assert_eq!(
            flags(&statuses),
            [
                (true, Some(true)),
                (false, Some(true)),
                (false, Some(false)),
                (false, Some(false))
            ],
            "probes without results yet hold ready and started off"
        );
        readiness.set("id-ready", ProbeResult::Success, "u");
        readiness.set("id-gated", ProbeResult::Success, "u");
        startup.set("id-gated", ProbeResult::Unknown, "u");
        update_container_statuses(&specs, &mut statuses, &readiness, &startup);
        assert_eq!(
            flags(&statuses)[1..3],
            [(true, Some(true)), (false, Some(false))],
            "readiness counts only once started"
        );
        startup.set("id-gated", ProbeResult::Success, "u");
        readiness.set("id-ready", ProbeResult::Failure, "u");
        update_container_statuses(&specs, &mut statuses, &readiness, &startup);
        assert_eq!(
            flags(&statuses)[1..3],
            [(false, Some(true)), (true, Some(true))]
        );
    }
}
