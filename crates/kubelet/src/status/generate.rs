//! The v1 PodStatus of a pod from its runtime state (upstream
//! `kubelet_pods.go` `generateAPIPodStatus`, `convertToAPIContainerStatuses`, `getPhase`,
//! and `pkg/kubelet/status/generate.go`).

use std::collections::HashMap;

use k8s_cri::v1::ContainerState;
use k8s_openapi::api::core::v1::{
    self as api, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, HostIP,
    Pod, PodCondition, PodIP,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::cm::qos::pod_qos;
use crate::kuberuntime::pod_actions::should_container_be_restarted;
use crate::kuberuntime::pod_status::{ContainerStatus, PodStatus};
use crate::prober::results::ResultsManager;
use crate::prober::status::update_container_statuses;
use crate::reason_cache::ReasonCache;

/// Waiting reason of a container that has not been created yet.
pub const CONTAINER_CREATING: &str = "ContainerCreating";

/// Node-level inputs of a pod status.
pub struct StatusContext<'a> {
    /// The node's IP.
    pub host_ip: &'a str,
    /// Runtime name for container IDs (`<runtime_name>://<id>`).
    pub runtime_name: &'a str,
    /// Last start failures.
    pub reasons: &'a ReasonCache,
    /// Readiness probe results: `ready`, and the Ready and ContainersReady conditions.
    pub readiness: &'a ResultsManager,
    /// Startup probe results: `started`.
    pub startup: &'a ResultsManager,
}

/// Builds the pod's v1 status from its runtime state. `lastTransitionTime` and
/// `startTime` are left for the status manager to fill.
pub fn generate_api_pod_status(
    pod: &Pod,
    status: &PodStatus,
    ctx: &StatusContext<'_>,
) -> api::PodStatus {
    let mut container_statuses = convert_container_statuses(pod, status, ctx);
    let specs = pod.spec.as_ref().map_or(&[][..], |s| &s.containers);
    update_container_statuses(specs, &mut container_statuses, ctx.readiness, ctx.startup);
    let phase = get_phase(pod, &container_statuses);
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
    api::PodStatus {
        phase: Some(phase.to_owned()),
        conditions: Some(conditions(status, &container_statuses, phase)),
        host_ip: (!ctx.host_ip.is_empty()).then(|| ctx.host_ip.to_owned()),
        pod_ip: pod_ips.first().cloned(),
        pod_ips: (!pod_ips.is_empty())
            .then(|| pod_ips.into_iter().map(|ip| PodIP { ip }).collect()),
        host_ips,
        qos_class: Some(pod_qos(pod).as_str().to_owned()),
        container_statuses: Some(container_statuses),
        ..Default::default()
    }
}

fn time(nanos: i64) -> Option<Time> {
    (nanos > 0)
        .then(|| Timestamp::from_nanosecond(i128::from(nanos)).ok().map(Time))
        .flatten()
}

/// The API state of one runtime container.
fn convert_container_status(c: &ContainerStatus, runtime_name: &str) -> api::ContainerStatus {
    let container_id = format!("{runtime_name}://{}", c.id);
    let state = match c.state {
        ContainerState::ContainerRunning => api::ContainerState {
            running: Some(ContainerStateRunning {
                started_at: time(c.started_at),
            }),
            ..Default::default()
        },
        ContainerState::ContainerCreated => api::ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(CONTAINER_CREATING.to_owned()),
                message: None,
            }),
            ..Default::default()
        },
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
    let running = c.state == ContainerState::ContainerRunning;
    api::ContainerStatus {
        name: c.name.clone(),
        container_id: Some(container_id),
        image: c.image.clone(),
        image_id: c.image_ref.clone(),
        restart_count: c.restart_count,
        ready: running,
        started: Some(running),
        state: Some(state),
        ..Default::default()
    }
}

/// Container statuses in spec order: the newest runtime container gives `state`, the one
/// before it `lastState`; containers due to (re)start show their last start failure as
/// the waiting reason.
fn convert_container_statuses(
    pod: &Pod,
    status: &PodStatus,
    ctx: &StatusContext<'_>,
) -> Vec<api::ContainerStatus> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let mut seen: HashMap<&str, Vec<&ContainerStatus>> = HashMap::new();
    for c in &status.containers {
        let entry = seen.entry(c.name.as_str()).or_default();
        if entry.len() < 2 {
            entry.push(c);
        }
    }
    containers
        .iter()
        .map(|spec| {
            let runtime = seen.get(spec.name.as_str());
            let mut out = match runtime.and_then(|v| v.first()) {
                Some(newest) => convert_container_status(newest, ctx.runtime_name),
                None => api::ContainerStatus {
                    name: spec.name.clone(),
                    image: spec.image.clone().unwrap_or_default(),
                    started: Some(false),
                    state: Some(api::ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some(CONTAINER_CREATING.to_owned()),
                            message: None,
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            };
            if let Some(previous) = runtime.and_then(|v| v.get(1)) {
                out.last_state = convert_container_status(previous, ctx.runtime_name).state;
            }
            if should_container_be_restarted(spec, pod, status)
                && let Some(reason) = ctx.reasons.get(uid, &spec.name)
            {
                if out.state.as_ref().is_some_and(|s| s.terminated.is_some()) {
                    out.last_state = out.state.take();
                }
                out.state = Some(api::ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some(reason.reason.to_owned()),
                        message: Some(reason.message),
                    }),
                    ..Default::default()
                });
                out.ready = false;
                out.started = Some(false);
            }
            out
        })
        .collect()
}

/// The pod phase from its container statuses (upstream `getPhase`).
pub fn get_phase(pod: &Pod, statuses: &[api::ContainerStatus]) -> &'static str {
    let (mut running, mut waiting, mut stopped, mut succeeded, mut unknown) = (0, 0, 0, 0, 0);
    let spec = pod.spec.as_ref();
    for container in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
        let Some(state) = statuses
            .iter()
            .find(|s| s.name == container.name)
            .and_then(|s| s.state.as_ref().map(|st| (st, s)))
        else {
            unknown += 1;
            continue;
        };
        let (state, status) = state;
        if state.running.is_some() {
            running += 1;
        } else if let Some(t) = state.terminated.as_ref() {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if state.waiting.is_some() {
            if status
                .last_state
                .as_ref()
                .is_some_and(|l| l.terminated.is_some())
            {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }
    let policy = spec
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    match () {
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
        reason: reason.filter(|_| !ok).map(str::to_owned),
        message: message.filter(|_| !ok),
        ..Default::default()
    }
}

/// PodReadyToStartContainers, Initialized, ContainersReady, Ready, PodScheduled.
fn conditions(
    status: &PodStatus,
    statuses: &[api::ContainerStatus],
    phase: &str,
) -> Vec<PodCondition> {
    let unready: Vec<&str> = statuses
        .iter()
        .filter(|s| !s.ready)
        .map(|s| s.name.as_str())
        .collect();
    let all_ready = unready.is_empty() && !statuses.is_empty();
    let (reason, message) = if phase == "Succeeded" {
        ("PodCompleted", None)
    } else {
        (
            "ContainersNotReady",
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    };
    let ready = all_ready && phase != "Succeeded";
    vec![
        condition(
            "PodReadyToStartContainers",
            status.sandbox_ready(),
            None,
            None,
        ),
        condition("Initialized", true, None, None),
        condition("Ready", ready, Some(reason), message.clone()),
        condition("ContainersReady", ready, Some(reason), message),
        condition("PodScheduled", true, None, None),
    ]
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
                readiness: &ResultsManager::new().0,
                startup: &ResultsManager::new().0,
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
}
