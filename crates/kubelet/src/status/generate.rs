//! The v1 PodStatus of a pod from its runtime state (upstream
//! `kubelet_pods.go` `generateAPIPodStatus`, `convertToAPIContainerStatuses`, `getPhase`,
//! `prober_manager.go` `UpdatePodStatus`, and `pkg/kubelet/status/generate.go`).

use std::collections::HashMap;

use k8s_cri::v1::ContainerState;
use k8s_openapi::api::core::v1::{
    self as api, Container, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    HostIP, Pod, PodCondition, PodIP,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::cm::qos::pod_qos;
use crate::kuberuntime::pod_actions::{
    containers, init_containers, is_restartable_init_container, should_container_be_restarted,
};
use crate::kuberuntime::pod_status::{ContainerStatus, PodStatus};
use crate::prober::managers::ResultsManagers;
use crate::prober::results::ProbeResult;
use crate::reason_cache::ReasonCache;

/// Waiting reason of a container not created yet in a pod without init containers.
pub const CONTAINER_CREATING: &str = "ContainerCreating";
/// Waiting reason of a container not created yet in a pod with init containers.
pub const POD_INITIALIZING: &str = "PodInitializing";
/// Condition reason: some containers are not ready.
pub const CONTAINERS_NOT_READY: &str = "ContainersNotReady";
/// Condition reason: some init containers have not completed.
pub const CONTAINERS_NOT_INITIALIZED: &str = "ContainersNotInitialized";
/// Condition reason: the pod succeeded.
pub const POD_COMPLETED: &str = "PodCompleted";
/// Condition reason: the pod failed.
pub const POD_FAILED: &str = "PodFailed";

/// Node-level inputs of a pod status.
pub struct StatusContext<'a> {
    /// The node's IP.
    pub host_ip: &'a str,
    /// Runtime name for container IDs (`<runtime_name>://<id>`).
    pub runtime_name: &'a str,
    /// Last start failures.
    pub reasons: &'a ReasonCache,
    /// Startup and readiness results: they set `started` and `ready` of running
    /// containers ([`ResultsManagers::default`] when the kubelet runs no probes).
    pub probes: ResultsManagers<'a>,
}

/// Builds the pod's v1 status from its runtime state. `lastTransitionTime` and
/// `startTime` are left for the status manager to fill.
pub fn generate_api_pod_status(
    pod: &Pod,
    status: &PodStatus,
    ctx: &StatusContext<'_>,
) -> api::PodStatus {
    let has_init_containers = !init_containers(pod).is_empty();
    let mut container_statuses =
        convert_container_statuses(pod, status, ctx, containers(pod), has_init_containers);
    let mut init_statuses =
        convert_container_statuses(pod, status, ctx, init_containers(pod), has_init_containers);
    set_started_and_ready(containers(pod), &mut container_statuses, &ctx.probes, false);
    set_started_and_ready(init_containers(pod), &mut init_statuses, &ctx.probes, true);
    let has_initialized = containers(pod)
        .iter()
        .any(|c| status.find_container_status_by_name(&c.name).is_some());
    let phase = get_phase(pod, &container_statuses, &init_statuses, has_initialized);
    let host_ips = (!ctx.host_ip.is_empty()).then(|| {
        vec![HostIP {
            ip: ctx.host_ip.to_owned(),
        }]
    });
    // A host-network pod has the node's addresses (upstream generateAPIPodStatus).
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
    let pod_ips: Vec<String> = match status.ips.is_empty() && host_network {
        true => host_ips.iter().flatten().map(|h| h.ip.clone()).collect(),
        false => status.ips.clone(),
    };
    let ready = containers_ready_condition(pod, &container_statuses, &init_statuses, phase);
    api::PodStatus {
        phase: Some(phase.to_owned()),
        conditions: Some(vec![
            condition(
                "PodReadyToStartContainers",
                status.sandbox_ready(),
                None,
                None,
            ),
            initialized_condition(pod, &container_statuses, &init_statuses, phase),
            PodCondition {
                type_: "Ready".to_owned(),
                ..ready.clone()
            },
            ready,
            condition("PodScheduled", true, None, None),
        ]),
        host_ip: (!ctx.host_ip.is_empty()).then(|| ctx.host_ip.to_owned()),
        pod_ip: pod_ips.first().cloned(),
        pod_ips: (!pod_ips.is_empty())
            .then(|| pod_ips.into_iter().map(|ip| PodIP { ip }).collect()),
        host_ips,
        qos_class: Some(pod_qos(pod).as_str().to_owned()),
        container_statuses: Some(container_statuses),
        init_container_statuses: has_init_containers.then_some(init_statuses),
        ..Default::default()
    }
}

fn time(nanos: i64) -> Option<Time> {
    (nanos > 0)
        .then(|| Timestamp::from_nanosecond(i128::from(nanos)).ok().map(Time))
        .flatten()
}

fn waiting(reason: Option<&str>, message: Option<String>) -> api::ContainerState {
    api::ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: reason.map(str::to_owned),
            message,
        }),
        ..Default::default()
    }
}

/// The API state of one runtime container (upstream `convertContainerStatus`); `ready`
/// and `started` are set later from the probe results.
fn convert_container_status(c: &ContainerStatus, runtime_name: &str) -> api::ContainerStatus {
    let container_id = format!("{runtime_name}://{}", c.id);
    let state = match c.state {
        ContainerState::ContainerRunning => api::ContainerState {
            running: Some(ContainerStateRunning {
                started_at: time(c.started_at),
            }),
            ..Default::default()
        },
        // Created but not started: waiting to run.
        ContainerState::ContainerCreated => waiting(None, None),
        ContainerState::ContainerExited | ContainerState::ContainerUnknown => {
            let reason = if !c.reason.is_empty() {
                c.reason.clone()
            } else if c.state == ContainerState::ContainerUnknown {
                "ContainerStatusUnknown".to_owned()
            } else if c.exit_code == 0 {
                "Completed".to_owned()
            } else {
                "Error".to_owned()
            };
            api::ContainerState {
                terminated: Some(ContainerStateTerminated {
                    container_id: Some(container_id.clone()),
                    exit_code: c.exit_code,
                    reason: Some(reason),
                    message: (!c.message.is_empty()).then(|| c.message.clone()),
                    started_at: time(c.started_at),
                    finished_at: time(c.finished_at),
                    signal: None,
                }),
                ..Default::default()
            }
        }
    };
    api::ContainerStatus {
        name: c.name.clone(),
        container_id: Some(container_id),
        image: c.image.clone(),
        image_id: c.image_ref.clone(),
        restart_count: c.restart_count,
        state: Some(state),
        ..Default::default()
    }
}

/// Statuses of `specs` (the pod's containers or init containers) in spec order: the
/// newest runtime container gives `state`, the one before it `lastState`; containers never
/// created wait with `ContainerCreating` (`PodInitializing` in a pod with init
/// containers); containers due to (re)start show their last start failure as the waiting
/// reason (upstream `convertToAPIContainerStatuses`).
fn convert_container_statuses(
    pod: &Pod,
    status: &PodStatus,
    ctx: &StatusContext<'_>,
    specs: &[Container],
    has_init_containers: bool,
) -> Vec<api::ContainerStatus> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let default_reason = match has_init_containers {
        true => POD_INITIALIZING,
        false => CONTAINER_CREATING,
    };
    let mut seen: HashMap<&str, Vec<&ContainerStatus>> = HashMap::new();
    for c in &status.containers {
        let entry = seen.entry(c.name.as_str()).or_default();
        if entry.len() < 2 {
            entry.push(c);
        }
    }
    specs
        .iter()
        .map(|spec| {
            let runtime = seen.get(spec.name.as_str());
            let mut out = match runtime.and_then(|v| v.first()) {
                Some(newest) => convert_container_status(newest, ctx.runtime_name),
                None => api::ContainerStatus {
                    name: spec.name.clone(),
                    image: spec.image.clone().unwrap_or_default(),
                    state: Some(waiting(Some(default_reason), None)),
                    ..Default::default()
                },
            };
            if let Some(previous) = runtime.and_then(|v| v.get(1)) {
                out.last_state = convert_container_status(previous, ctx.runtime_name).state;
            }
            // A succeeded init container stays done.
            let succeeded = runtime.and_then(|v| v.first()).is_some_and(|c| {
                c.state == ContainerState::ContainerExited
                    && c.exit_code == 0
                    && init_containers(pod).iter().any(|i| i.name == spec.name)
                    && !is_restartable_init_container(spec)
            });
            if !succeeded
                && should_container_be_restarted(spec, pod, status)
                && let Some(reason) = ctx.reasons.get(uid, &spec.name)
            {
                if out.state.as_ref().is_some_and(|s| s.terminated.is_some()) {
                    out.last_state = out.state.take();
                }
                out.state = Some(waiting(Some(reason.reason), Some(reason.message)));
            }
            out
        })
        .collect()
}

/// Sets `started` and `ready` (upstream prober `UpdatePodStatus`): a running container is
/// started once its startup probe succeeded (at once without one), and ready once started
/// and its readiness probe succeeded (at once without one). A regular init container is
/// ready when it exited with code 0.
fn set_started_and_ready(
    specs: &[Container],
    statuses: &mut [api::ContainerStatus],
    probes: &ResultsManagers<'_>,
    init: bool,
) {
    for (spec, status) in specs.iter().zip(statuses.iter_mut()) {
        let id = status
            .container_id
            .as_deref()
            .and_then(|id| id.split_once("://"))
            .map_or("", |(_, id)| id);
        let state = status.state.as_ref();
        let running = state.is_some_and(|s| s.running.is_some());
        let succeeded = |p: Option<ProbeResult>| p == Some(ProbeResult::Success);
        let started = running && (spec.startup_probe.is_none() || succeeded(probes.startup(id)));
        status.started = Some(started);
        status.ready = if init && !is_restartable_init_container(spec) {
            state
                .and_then(|s| s.terminated.as_ref())
                .is_some_and(|t| t.exit_code == 0)
        } else {
            started && (spec.readiness_probe.is_none() || succeeded(probes.readiness(id)))
        };
    }
}

fn status_of<'a>(
    statuses: &'a [api::ContainerStatus],
    name: &str,
) -> Option<(&'a api::ContainerState, &'a api::ContainerStatus)> {
    statuses
        .iter()
        .find(|s| s.name == name)
        .and_then(|s| s.state.as_ref().map(|st| (st, s)))
}

fn last_terminated(status: &api::ContainerStatus) -> Option<&ContainerStateTerminated> {
    status
        .last_state
        .as_ref()
        .and_then(|l| l.terminated.as_ref())
}

/// The pod phase (upstream `getPhase`): Pending while regular init containers have not
/// all succeeded (Failed if one failed under restartPolicy Never) or native sidecars have
/// not started before the pod initialized; then from the regular containers and the
/// running sidecars: Running, Succeeded or Failed per restartPolicy. `has_initialized`:
/// a regular container has run in this pod.
pub fn get_phase(
    pod: &Pod,
    statuses: &[api::ContainerStatus],
    init_statuses: &[api::ContainerStatus],
    has_initialized: bool,
) -> &'static str {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    let (mut pending_inits, mut pending_sidecars, mut failed_inits) = (0, 0, 0);
    let (mut running, mut waiting, mut stopped, mut succeeded, mut unknown) = (0, 0, 0, 0, 0);
    for container in init_containers(pod) {
        let found = status_of(init_statuses, &container.name);
        if is_restartable_init_container(container) {
            match found {
                Some((state, s)) if state.running.is_some() => {
                    if s.started != Some(true) {
                        pending_sidecars += 1;
                    }
                    running += 1;
                }
                // A stopped sidecar counts as neither running nor stopped.
                Some((state, _)) if state.terminated.is_some() => {}
                Some((state, s)) if state.waiting.is_some() => {
                    if last_terminated(s).is_none() {
                        pending_sidecars += 1;
                    }
                }
                _ => {
                    pending_sidecars += 1;
                    unknown += 1;
                }
            }
            continue;
        }
        match found {
            Some((state, _)) if state.running.is_some() => pending_inits += 1,
            Some((state, _)) if state.terminated.is_some() => {
                if state.terminated.as_ref().is_some_and(|t| t.exit_code != 0) {
                    failed_inits += 1;
                }
            }
            Some((state, s)) if state.waiting.is_some() => match last_terminated(s) {
                Some(t) if t.exit_code != 0 => failed_inits += 1,
                Some(_) => {}
                None => pending_inits += 1,
            },
            _ => pending_inits += 1,
        }
    }
    for container in containers(pod) {
        match status_of(statuses, &container.name) {
            Some((state, _)) if state.running.is_some() => running += 1,
            Some((state, _)) if state.terminated.is_some() => {
                stopped += 1;
                if state.terminated.as_ref().is_some_and(|t| t.exit_code == 0) {
                    succeeded += 1;
                }
            }
            Some((state, s)) if state.waiting.is_some() => {
                if last_terminated(s).is_some() {
                    stopped += 1;
                } else {
                    waiting += 1;
                }
            }
            _ => unknown += 1,
        }
    }
    if failed_inits > 0 && policy == "Never" {
        return "Failed";
    }
    match () {
        _ if pending_inits > 0 || (pending_sidecars > 0 && !has_initialized) => "Pending",
        _ if waiting > 0 => "Pending",
        _ if running > 0 && unknown == 0 => "Running",
        _ if running == 0 && stopped > 0 && unknown == 0 => {
            if policy == "Always" {
                "Running"
            } else if stopped == succeeded {
                "Succeeded"
            } else if policy == "Never" {
                "Failed"
            } else {
                "Running"
            }
        }
        _ => "Pending",
    }
}

fn condition(type_: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: type_.to_owned(),
        status: if ok { "True" } else { "False" }.to_owned(),
        reason: reason.map(str::to_owned),
        message,
        ..Default::default()
    }
}

/// Names as Go prints a `[]string`: `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

/// `containers with unknown status: [..], containers with <what> status: [..]`, or None.
fn status_message(unknown: &[&str], what: &str, names: &[&str]) -> Option<String> {
    let mut parts = Vec::new();
    if !unknown.is_empty() {
        parts.push(format!(
            "containers with unknown status: {}",
            go_list(unknown)
        ));
    }
    if !names.is_empty() {
        parts.push(format!("containers with {what} status: {}", go_list(names)));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The Initialized condition (upstream `GeneratePodInitializedCondition`): True once every
/// regular init container succeeded and every native sidecar started, or once a regular
/// container ran; else False with reason ContainersNotInitialized.
fn initialized_condition(
    pod: &Pod,
    statuses: &[api::ContainerStatus],
    init_statuses: &[api::ContainerStatus],
    phase: &str,
) -> PodCondition {
    let (mut unknown, mut incomplete) = (Vec::new(), Vec::new());
    for container in init_containers(pod) {
        let Some(s) = init_statuses.iter().find(|s| s.name == container.name) else {
            unknown.push(container.name.as_str());
            continue;
        };
        let done = match is_restartable_init_container(container) {
            true => s.started == Some(true),
            false => s.ready,
        };
        if !done {
            incomplete.push(container.name.as_str());
        }
    }
    if phase == "Succeeded" && unknown.is_empty() {
        return condition("Initialized", true, Some(POD_COMPLETED), None);
    }
    let regular_started = statuses.iter().any(|s| {
        s.state
            .as_ref()
            .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
            || s.last_state
                .as_ref()
                .is_some_and(|l| l.terminated.is_some())
    });
    match status_message(&unknown, "incomplete", &incomplete) {
        Some(message) if !regular_started => condition(
            "Initialized",
            false,
            Some(CONTAINERS_NOT_INITIALIZED),
            Some(message),
        ),
        _ => condition("Initialized", true, None, None),
    }
}

/// The ContainersReady condition (upstream `GenerateContainersReadyCondition`; Ready
/// copies it): True when every regular container and native sidecar is ready; False
/// with reason PodCompleted / PodFailed for a finished pod, else ContainersNotReady with
/// the unready names.
fn containers_ready_condition(
    pod: &Pod,
    statuses: &[api::ContainerStatus],
    init_statuses: &[api::ContainerStatus],
    phase: &str,
) -> PodCondition {
    let (mut unknown, mut unready) = (Vec::new(), Vec::new());
    let sidecars = init_containers(pod)
        .iter()
        .filter(|c| is_restartable_init_container(c))
        .map(|c| (c, init_statuses));
    let regular = containers(pod).iter().map(|c| (c, statuses));
    for (container, statuses) in sidecars.chain(regular) {
        match statuses.iter().find(|s| s.name == container.name) {
            Some(s) if !s.ready => unready.push(container.name.as_str()),
            Some(_) => {}
            None => unknown.push(container.name.as_str()),
        }
    }
    let ready = |ok, reason, message| condition("ContainersReady", ok, reason, message);
    if phase == "Succeeded" && unknown.is_empty() {
        return ready(false, Some(POD_COMPLETED), None);
    }
    if phase == "Failed" {
        return ready(false, Some(POD_FAILED), None);
    }
    match status_message(&unknown, "unready", &unready) {
        Some(message) => ready(false, Some(CONTAINERS_NOT_READY), Some(message)),
        None => ready(true, None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kuberuntime::sync_result::{CRASH_LOOP_BACK_OFF, PodSyncResult, SyncError};
    use k8s_cri::v1::{PodSandboxNetworkStatus, PodSandboxStatus};
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(policy: &str, names: &[&str]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some("u".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                restart_policy: Some(policy.into()),
                containers: names
                    .iter()
                    .map(|n| Container {
                        name: (*n).into(),
                        image: Some("busybox".into()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn c(
        name: &str,
        id: &str,
        state: ContainerState,
        exit_code: i32,
        restart_count: i32,
        created_at: i64,
    ) -> ContainerStatus {
        ContainerStatus {
            id: id.into(),
            name: name.into(),
            state,
            created_at,
            started_at: 1_700_000_000_000_000_000,
            finished_at: if state == ContainerState::ContainerExited {
                1_700_000_001_000_000_000
            } else {
                0
            },
            exit_code,
            image: "busybox:latest".into(),
            image_ref: "sha256:abc".into(),
            hash: String::new(),
            restart_count,
            reason: String::new(),
            message: String::new(),
        }
    }

    fn runtime(containers: Vec<ContainerStatus>) -> PodStatus {
        PodStatus {
            uid: "u".into(),
            sandboxes: vec![PodSandboxStatus {
                id: "s".into(),
                state: 0,
                network: Some(PodSandboxNetworkStatus {
                    ip: "10.88.0.3".into(),
                    additional_ips: vec![],
                }),
                ..Default::default()
            }],
            containers,
            ips: vec!["10.88.0.3".into()],
        }
    }

    fn generate(pod: &Pod, status: &PodStatus, reasons: &ReasonCache) -> api::PodStatus {
        generate_api_pod_status(
            pod,
            status,
            &StatusContext {
                host_ip: "192.168.0.2",
                runtime_name: "skiff",
                reasons,
                probes: ResultsManagers::default(),
            },
        )
    }

    fn cond<'a>(s: &'a api::PodStatus, t: &str) -> &'a str {
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == t)
            .map_or("", |c| c.status.as_str())
    }

    #[test]
    fn host_network_pod_has_the_node_ip() {
        let mut p = pod("Always", &["a"]);
        if let Some(spec) = p.spec.as_mut() {
            spec.host_network = Some(true);
        }
        let mut status = runtime(vec![]);
        status.ips.clear();
        let s = generate(&p, &status, &ReasonCache::default());
        assert_eq!(s.pod_ip.as_deref(), Some("192.168.0.2"));
        assert_eq!(
            s.pod_ips,
            Some(vec![PodIP {
                ip: "192.168.0.2".into()
            }])
        );
    }

    #[test]
    fn running_pod_is_ready() {
        let p = pod("Always", &["a"]);
        let s = generate(
            &p,
            &runtime(vec![c(
                "a",
                "id1",
                ContainerState::ContainerRunning,
                0,
                2,
                1,
            )]),
            &ReasonCache::default(),
        );
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(s.pod_ip.as_deref(), Some("10.88.0.3"));
        assert_eq!(s.host_ip.as_deref(), Some("192.168.0.2"));
        assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
        for t in [
            "PodScheduled",
            "PodReadyToStartContainers",
            "Initialized",
            "ContainersReady",
            "Ready",
        ] {
            assert_eq!(cond(&s, t), "True", "{t}");
        }
        let cs = &s.container_statuses.unwrap_or_default()[0];
        assert_eq!(cs.container_id.as_deref(), Some("skiff://id1"));
        assert_eq!(
            (cs.restart_count, cs.ready, cs.started),
            (2, true, Some(true))
        );
        assert_eq!(cs.image_id, "sha256:abc");
    }

    #[test]
    fn new_pod_is_pending_with_container_creating() {
        let p = pod("Always", &["a"]);
        let s = generate(
            &p,
            &PodStatus {
                uid: "u".into(),
                ..Default::default()
            },
            &ReasonCache::default(),
        );
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        assert_eq!(cond(&s, "Ready"), "False");
        assert_eq!(cond(&s, "PodReadyToStartContainers"), "False");
        let cs = &s.container_statuses.unwrap_or_default()[0];
        let waiting = cs
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone());
        assert_eq!(waiting.as_deref(), Some("ContainerCreating"));
    }

    #[test]
    fn phases_for_finished_pods() {
        let cases = [
            ("Never", 0, "Succeeded"),
            ("Never", 1, "Failed"),
            ("OnFailure", 0, "Succeeded"),
        ];
        for (policy, code, phase) in cases {
            let p = pod(policy, &["a"]);
            let s = generate(
                &p,
                &runtime(vec![c(
                    "a",
                    "id",
                    ContainerState::ContainerExited,
                    code,
                    0,
                    1,
                )]),
                &ReasonCache::default(),
            );
            assert_eq!(s.phase.as_deref(), Some(phase), "{policy} exit {code}");
            let cs = &s.container_statuses.unwrap_or_default()[0];
            let reason = cs
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .and_then(|t| t.reason.clone());
            assert_eq!(
                reason.as_deref(),
                Some(if code == 0 { "Completed" } else { "Error" })
            );
        }
    }

    #[test]
    fn crash_looping_container_waits_with_last_state() {
        let p = pod("Always", &["a"]);
        let reasons = ReasonCache::default();
        reasons.update(
            "u",
            &PodSyncResult {
                start_results: vec![(
                    "a".into(),
                    Some(SyncError::new(CRASH_LOOP_BACK_OFF, "back-off 10s")),
                )],
                ..Default::default()
            },
        );
        let status = runtime(vec![
            c("a", "new", ContainerState::ContainerExited, 1, 3, 2),
            c("a", "old", ContainerState::ContainerExited, 1, 2, 1),
        ]);
        let s = generate(&p, &status, &reasons);
        assert_eq!(s.phase.as_deref(), Some("Running"));
        let cs = &s.container_statuses.unwrap_or_default()[0];
        assert_eq!(cs.restart_count, 3);
        let waiting = cs
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone());
        assert_eq!(waiting.as_deref(), Some("CrashLoopBackOff"));
        let last = cs
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.container_id.clone());
        assert_eq!(last, Some(Some("skiff://new".to_owned())));
    }

    #[test]
    fn running_and_pending_mix() {
        let p = pod("Always", &["a", "b"]);
        let s = generate(
            &p,
            &runtime(vec![c("a", "1", ContainerState::ContainerRunning, 0, 0, 1)]),
            &ReasonCache::default(),
        );
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        assert_eq!(cond(&s, "ContainersReady"), "False");
        let ready = s
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .and_then(|c| c.message.clone());
        assert_eq!(
            ready.as_deref(),
            Some("containers with unready status: [b]")
        );
    }

    fn with_inits(mut p: Pod, inits: &[(&str, bool)]) -> Pod {
        if let Some(spec) = p.spec.as_mut() {
            spec.init_containers = Some(
                inits
                    .iter()
                    .map(|(name, sidecar)| Container {
                        name: (*name).into(),
                        image: Some("busybox".into()),
                        restart_policy: sidecar.then(|| "Always".into()),
                        ..Default::default()
                    })
                    .collect(),
            );
        }
        p
    }

    fn full_cond<'a>(s: &'a api::PodStatus, t: &str) -> &'a PodCondition {
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == t)
            .unwrap_or_else(|| panic!("no {t} condition"))
    }

    fn waiting_reason(cs: &api::ContainerStatus) -> Option<&str> {
        cs.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
    }

    #[test]
    fn running_init_container_keeps_the_pod_initializing() {
        let p = with_inits(pod("Always", &["a", "b"]), &[("i1", false), ("i2", false)]);
        let s = generate(
            &p,
            &runtime(vec![c(
                "i1",
                "1",
                ContainerState::ContainerRunning,
                0,
                0,
                1,
            )]),
            &ReasonCache::default(),
        );
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        let inits = s.init_container_statuses.clone().unwrap_or_default();
        assert_eq!(inits.len(), 2);
        assert_eq!((inits[0].ready, inits[0].started), (false, Some(true)));
        assert_eq!(waiting_reason(&inits[1]), Some("PodInitializing"));
        let main = s.container_statuses.clone().unwrap_or_default();
        assert_eq!(waiting_reason(&main[0]), Some("PodInitializing"));
        let init = full_cond(&s, "Initialized");
        assert_eq!(
            (
                init.status.as_str(),
                init.reason.as_deref(),
                init.message.as_deref()
            ),
            (
                "False",
                Some("ContainersNotInitialized"),
                Some("containers with incomplete status: [i1 i2]")
            )
        );
        let ready = full_cond(&s, "Ready");
        assert_eq!(
            (ready.reason.as_deref(), ready.message.as_deref()),
            (
                Some("ContainersNotReady"),
                Some("containers with unready status: [a b]")
            )
        );
    }

    #[test]
    fn failing_init_container_crash_loops_or_fails_the_pod() {
        let reasons = ReasonCache::default();
        reasons.update(
            "u",
            &PodSyncResult {
                start_results: vec![(
                    "i1".into(),
                    Some(SyncError::new(CRASH_LOOP_BACK_OFF, "back-off 10s")),
                )],
                ..Default::default()
            },
        );
        let failed = runtime(vec![c("i1", "1", ContainerState::ContainerExited, 1, 1, 1)]);
        let p = with_inits(pod("Always", &["a"]), &[("i1", false)]);
        let s = generate(&p, &failed, &reasons);
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        let inits = s.init_container_statuses.clone().unwrap_or_default();
        assert_eq!(waiting_reason(&inits[0]), Some("CrashLoopBackOff"));
        let last = inits[0]
            .last_state
            .as_ref()
            .and_then(|l| l.terminated.as_ref());
        assert_eq!(last.map(|t| t.exit_code), Some(1));
        assert!(!inits[0].ready);
        let p = with_inits(pod("Never", &["a"]), &[("i1", false)]);
        let s = generate(&p, &failed, &ReasonCache::default());
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert_eq!(
            full_cond(&s, "ContainersReady").reason.as_deref(),
            Some("PodFailed")
        );
    }

    #[test]
    fn sidecar_counts_for_readiness_and_not_for_completion() {
        let p = with_inits(pod("Never", &["a"]), &[("side", true)]);
        let running = runtime(vec![
            c("a", "2", ContainerState::ContainerRunning, 0, 0, 2),
            c("side", "1", ContainerState::ContainerRunning, 0, 0, 1),
        ]);
        let s = generate(&p, &running, &ReasonCache::default());
        assert_eq!(s.phase.as_deref(), Some("Running"));
        for t in ["Initialized", "ContainersReady", "Ready"] {
            assert_eq!(cond(&s, t), "True", "{t}");
        }
        let inits = s.init_container_statuses.clone().unwrap_or_default();
        assert_eq!((inits[0].ready, inits[0].started), (true, Some(true)));
        // Main container succeeded, sidecar stopped after it: Succeeded.
        let done = runtime(vec![
            c("side", "1", ContainerState::ContainerExited, 137, 0, 1),
            c("a", "2", ContainerState::ContainerExited, 0, 0, 2),
        ]);
        let s = generate(&p, &done, &ReasonCache::default());
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
        let ready = full_cond(&s, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("False", Some("PodCompleted"))
        );
        let init = full_cond(&s, "Initialized");
        assert_eq!(
            (init.status.as_str(), init.reason.as_deref()),
            ("True", Some("PodCompleted"))
        );
    }

    #[test]
    fn readiness_and_startup_results_set_ready_and_started() {
        use crate::prober::results::ResultsManager;
        let mut p = pod("Always", &["a"]);
        if let Some(c) = p.spec.as_mut().map(|s| &mut s.containers[0]) {
            c.readiness_probe = Some(Default::default());
            c.startup_probe = Some(Default::default());
        }
        let status = runtime(vec![c(
            "a",
            "id1",
            ContainerState::ContainerRunning,
            0,
            0,
            1,
        )]);
        let (readiness, _r) = ResultsManager::new();
        let (startup, _s) = ResultsManager::new();
        let reasons = ReasonCache::default();
        let generate = || {
            generate_api_pod_status(
                &p,
                &status,
                &StatusContext {
                    host_ip: "192.168.0.2",
                    runtime_name: "skiff",
                    reasons: &reasons,
                    probes: ResultsManagers {
                        readiness: Some(&readiness),
                        startup: Some(&startup),
                        liveness: None,
                    },
                },
            )
        };
        let flags = |s: &api::PodStatus| {
            let cs = &s.container_statuses.as_ref().unwrap()[0];
            (cs.started, cs.ready)
        };
        assert_eq!(flags(&generate()), (Some(false), false));
        readiness.set("id1", ProbeResult::Success, "u");
        assert_eq!(flags(&generate()), (Some(false), false), "not started yet");
        startup.set("id1", ProbeResult::Success, "u");
        let s = generate();
        assert_eq!(flags(&s), (Some(true), true));
        assert_eq!(cond(&s, "Ready"), "True");
        readiness.set("id1", ProbeResult::Failure, "u");
        let s = generate();
        assert_eq!(flags(&s), (Some(true), false));
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(
            full_cond(&s, "Ready").message.as_deref(),
            Some("containers with unready status: [a]")
        );
    }
}
