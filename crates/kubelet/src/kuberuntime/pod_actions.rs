//! What SyncPod must do to bring a pod to its spec (upstream `computePodActions`,
//! `podSandboxChanged`, `ShouldContainerBeRestarted` in kuberuntime_manager.go).

use k8s_cri::v1::{ContainerState, PodSandboxState};
use k8s_openapi::api::core::v1::{Container, Pod};

use super::labels::container_hash;
use super::pod_status::PodStatus;
use crate::prober::results::{ProbeResult, ResultsManager};

/// A running container to kill, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerToKill {
    /// Runtime container ID.
    pub id: String,
    /// Container name.
    pub name: String,
    /// Why it is killed (logged).
    pub message: String,
    /// Grace period in seconds instead of the pod's: the failed probe's
    /// `terminationGracePeriodSeconds`.
    pub grace_period: Option<i64>,
}

/// The actions of one SyncPod (upstream `podActions`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodActions {
    /// Stop every container and sandbox of the pod.
    pub kill_pod: bool,
    /// Create a new sandbox (after killing the pod).
    pub create_sandbox: bool,
    /// The current sandbox, when kept.
    pub sandbox_id: String,
    /// Attempt number of the sandbox to create.
    pub attempt: u32,
    /// Indexes into `spec.containers` of the containers to start.
    pub containers_to_start: Vec<usize>,
    /// Containers to kill before starting others.
    pub containers_to_kill: Vec<ContainerToKill>,
}

/// The pod's restart policy (`Always` when unset).
pub fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// True unless restartPolicy is `Never`.
fn should_restart_on_failure(pod: &Pod) -> bool {
    restart_policy(pod) != "Never"
}

/// True when the newest container of that name exited with code 0.
fn container_succeeded(container: &Container, status: &PodStatus) -> bool {
    status
        .find_container_status_by_name(&container.name)
        .is_some_and(|c| c.state == ContainerState::ContainerExited && c.exit_code == 0)
}

/// Whether `container` must be (re)started: never created, or dead (created, unknown,
/// exited) and allowed by the restart policy (Never: no; OnFailure: only after failure).
pub fn should_container_be_restarted(container: &Container, pod: &Pod, status: &PodStatus) -> bool {
    let Some(c) = status.find_container_status_by_name(&container.name) else {
        return true;
    };
    match c.state {
        ContainerState::ContainerRunning => false,
        ContainerState::ContainerUnknown | ContainerState::ContainerCreated => true,
        ContainerState::ContainerExited => match restart_policy(pod) {
            "Never" => false,
            "OnFailure" => c.exit_code != 0,
            _ => true,
        },
    }
}

/// Whether a new sandbox is needed: none yet, more than one ready, the newest not ready,
/// or it has no IP (unless host network). Returns (create, next attempt, current sandbox ID).
fn pod_sandbox_changed(pod: &Pod, status: &PodStatus) -> (bool, u32, String) {
    let Some(newest) = status.sandboxes.first() else {
        return (true, 0, String::new());
    };
    let ready = |s: &k8s_cri::v1::PodSandboxStatus| s.state == PodSandboxState::SandboxReady as i32;
    let attempt = newest.metadata.as_ref().map_or(0, |m| m.attempt);
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    let has_ip = newest.network.as_ref().is_some_and(|n| !n.ip.is_empty());
    let changed = status.sandboxes.iter().filter(|s| ready(s)).count() > 1
        || !ready(newest)
        || (!host_network && !has_ip);
    if changed {
        (true, attempt + 1, newest.id.clone())
    } else {
        (false, attempt, newest.id.clone())
    }
}

/// Computes the actions that bring `pod` from `status` to its spec. A running container
/// whose `liveness` or `startup` result is Failure is killed, and restarted unless the
/// restart policy is Never.
pub fn compute_pod_actions(
    pod: &Pod,
    status: &PodStatus,
    liveness: &ResultsManager,
    startup: &ResultsManager,
) -> PodActions {
    let containers: &[Container] = pod.spec.as_ref().map_or(&[], |s| &s.containers);
    let (create_sandbox, attempt, sandbox_id) = pod_sandbox_changed(pod, status);
    let mut actions = PodActions {
        kill_pod: create_sandbox,
        create_sandbox,
        sandbox_id,
        attempt,
        ..Default::default()
    };
    if create_sandbox {
        if !should_restart_on_failure(pod) && attempt != 0 && !status.containers.is_empty() {
            // A pod that must not restart already ran in a sandbox that is gone: done.
            actions.create_sandbox = false;
            return actions;
        }
        actions.containers_to_start = containers
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                !(restart_policy(pod) == "OnFailure" && container_succeeded(c, status))
            })
            .map(|(i, _)| i)
            .collect();
        if actions.containers_to_start.is_empty() {
            actions.create_sandbox = false;
        }
        return actions;
    }
    let mut keep_count = 0;
    for (i, container) in containers.iter().enumerate() {
        let current = status.find_container_status_by_name(&container.name);
        let running = current.filter(|c| c.state == ContainerState::ContainerRunning);
        let Some(running) = running else {
            if should_container_be_restarted(container, pod, status) {
                actions.containers_to_start.push(i);
                if let Some(c) = current.filter(|c| {
                    matches!(
                        c.state,
                        ContainerState::ContainerUnknown | ContainerState::ContainerCreated
                    )
                }) {
                    actions.containers_to_kill.push(ContainerToKill {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        message: "container is in an unknown or never-started state".to_owned(),
                        grace_period: None,
                    });
                }
            }
            continue;
        };
        if running.hash != container_hash(container) {
            actions.containers_to_start.push(i);
            actions.containers_to_kill.push(ContainerToKill {
                id: running.id.clone(),
                name: container.name.clone(),
                message: format!(
                    "container {} definition changed, will be restarted",
                    container.name
                ),
                grace_period: None,
            });
            continue;
        }
        let (failed_probe, probe) = if liveness.get(&running.id) == Some(ProbeResult::Failure) {
            ("liveness", container.liveness_probe.as_ref())
        } else if startup.get(&running.id) == Some(ProbeResult::Failure) {
            ("startup", container.startup_probe.as_ref())
        } else {
            keep_count += 1;
            continue;
        };
        // Upstream's kill message; the container comes back unless the policy is Never.
        let mut message = format!("Container {} failed {failed_probe} probe", container.name);
        if should_restart_on_failure(pod) {
            message.push_str(", will be restarted");
            actions.containers_to_start.push(i);
        }
        actions.containers_to_kill.push(ContainerToKill {
            id: running.id.clone(),
            name: container.name.clone(),
            message,
            grace_period: probe.and_then(|p| p.termination_grace_period_seconds),
        });
    }
    if keep_count == 0 && actions.containers_to_start.is_empty() {
        actions.kill_pod = true;
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kuberuntime::pod_status::ContainerStatus;
    use k8s_cri::v1::{PodSandboxMetadata, PodSandboxNetworkStatus, PodSandboxStatus};
    use k8s_openapi::api::core::v1::PodSpec;

    fn pod(policy: &str, names: &[&str]) -> Pod {
        Pod {
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
            ..Default::default()
        }
    }

    fn sandbox(id: &str, ready: bool, attempt: u32) -> PodSandboxStatus {
        PodSandboxStatus {
            id: id.into(),
            state: if ready { 0 } else { 1 },
            metadata: Some(PodSandboxMetadata {
                attempt,
                ..Default::default()
            }),
            network: Some(PodSandboxNetworkStatus {
                ip: "10.88.0.2".into(),
                additional_ips: vec![],
            }),
            ..Default::default()
        }
    }

    fn container(pod: &Pod, name: &str, state: ContainerState, exit_code: i32) -> ContainerStatus {
        let spec = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == name))
            .cloned();
        ContainerStatus {
            id: format!("id-{name}"),
            name: name.into(),
            state,
            created_at: 0,
            started_at: 0,
            finished_at: 0,
            exit_code,
            image: String::new(),
            image_ref: String::new(),
            hash: spec.map(|c| container_hash(&c)).unwrap_or_default(),
            restart_count: 0,
            reason: String::new(),
            message: String::new(),
        }
    }

    fn status(sandboxes: Vec<PodSandboxStatus>, containers: Vec<ContainerStatus>) -> PodStatus {
        PodStatus {
            uid: "u".into(),
            sandboxes,
            containers,
            ips: vec![],
        }
    }

    /// The actions without any probe results.
    fn actions(p: &Pod, s: &PodStatus) -> PodActions {
        let (liveness, _) = ResultsManager::new();
        let (startup, _) = ResultsManager::new();
        compute_pod_actions(p, s, &liveness, &startup)
    }

    #[test]
    fn failed_liveness_or_startup_probe_kills_and_restarts_per_policy() {
        for (policy, restarted) in [("Always", true), ("OnFailure", true), ("Never", false)] {
            let mut p = pod(policy, &["live", "boot", "fine"]);
            if let Some(live) = p.spec.as_mut().and_then(|s| s.containers.first_mut()) {
                // Its liveness probe gives its own grace period; the startup probe has none.
                live.liveness_probe = Some(k8s_openapi::api::core::v1::Probe {
                    termination_grace_period_seconds: Some(7),
                    ..Default::default()
                });
            }
            let s = status(
                vec![sandbox("s1", true, 0)],
                ["live", "boot", "fine"]
                    .map(|n| container(&p, n, ContainerState::ContainerRunning, 0))
                    .to_vec(),
            );
            let (liveness, _l) = ResultsManager::new();
            let (startup, _s) = ResultsManager::new();
            liveness.set("id-live", ProbeResult::Failure, "u");
            liveness.set("id-fine", ProbeResult::Success, "u");
            startup.set("id-boot", ProbeResult::Failure, "u");
            startup.set("id-live", ProbeResult::Success, "u");
            let a = compute_pod_actions(&p, &s, &liveness, &startup);
            let suffix = if restarted { ", will be restarted" } else { "" };
            assert_eq!(
                a.containers_to_kill,
                [
                    ContainerToKill {
                        id: "id-live".into(),
                        name: "live".into(),
                        message: format!("Container live failed liveness probe{suffix}"),
                        grace_period: Some(7),
                    },
                    ContainerToKill {
                        id: "id-boot".into(),
                        name: "boot".into(),
                        message: format!("Container boot failed startup probe{suffix}"),
                        grace_period: None,
                    },
                ],
                "{policy}"
            );
            let expected: &[usize] = if restarted { &[0, 1] } else { &[] };
            assert_eq!(a.containers_to_start, expected, "{policy}");
            assert!(!a.kill_pod, "{policy}: the healthy container keeps the pod");
        }
    }

    #[test]
    fn new_pod_creates_sandbox_and_starts_all() {
        let p = pod("Always", &["a", "b"]);
        let a = actions(&p, &status(vec![], vec![]));
        assert!(a.create_sandbox && a.kill_pod);
        assert_eq!(a.attempt, 0);
        assert_eq!(a.containers_to_start, vec![0, 1]);
    }

    #[test]
    fn running_pod_needs_nothing() {
        let p = pod("Always", &["a"]);
        let s = status(
            vec![sandbox("s1", true, 0)],
            vec![container(&p, "a", ContainerState::ContainerRunning, 0)],
        );
        assert_eq!(
            actions(&p, &s),
            PodActions {
                sandbox_id: "s1".into(),
                ..Default::default()
            }
        );
    }

    #[test]
    fn exited_container_restarts_per_policy() {
        for (policy, code, restart) in [
            ("Always", 0, true),
            ("Always", 1, true),
            ("OnFailure", 1, true),
            ("OnFailure", 0, false),
            ("Never", 1, false),
        ] {
            let p = pod(policy, &["a", "b"]);
            let s = status(
                vec![sandbox("s1", true, 0)],
                vec![
                    container(&p, "a", ContainerState::ContainerExited, code),
                    container(&p, "b", ContainerState::ContainerRunning, 0),
                ],
            );
            let a = actions(&p, &s);
            assert_eq!(
                a.containers_to_start == vec![0],
                restart,
                "{policy} exit {code}"
            );
            assert!(!a.kill_pod);
        }
    }

    #[test]
    fn all_done_pod_is_killed_and_not_recreated() {
        let p = pod("Never", &["a"]);
        let s = status(
            vec![sandbox("s1", true, 0)],
            vec![container(&p, "a", ContainerState::ContainerExited, 0)],
        );
        let a = actions(&p, &s);
        assert!(a.kill_pod && !a.create_sandbox && a.containers_to_start.is_empty());
        let s = status(
            vec![sandbox("s1", false, 0)],
            vec![container(&p, "a", ContainerState::ContainerExited, 0)],
        );
        let a = actions(&p, &s);
        assert!(
            !a.create_sandbox,
            "a Never pod whose sandbox died is not recreated"
        );
    }

    #[test]
    fn dead_sandbox_is_recreated_with_next_attempt() {
        let p = pod("OnFailure", &["ok", "bad"]);
        let s = status(
            vec![sandbox("s1", false, 2)],
            vec![
                container(&p, "ok", ContainerState::ContainerExited, 0),
                container(&p, "bad", ContainerState::ContainerExited, 1),
            ],
        );
        let a = actions(&p, &s);
        assert!(a.create_sandbox && a.kill_pod);
        assert_eq!(a.attempt, 3);
        assert_eq!(
            a.containers_to_start,
            vec![1],
            "succeeded OnFailure containers stay done"
        );
    }

    #[test]
    fn changed_spec_kills_and_restarts_container() {
        let p = pod("Always", &["a"]);
        let mut running = container(&p, "a", ContainerState::ContainerRunning, 0);
        running.hash = "old".into();
        let a = actions(&p, &status(vec![sandbox("s1", true, 0)], vec![running]));
        assert_eq!(a.containers_to_start, vec![0]);
        assert_eq!(a.containers_to_kill.len(), 1);
        assert!(!a.kill_pod);
    }

    #[test]
    fn created_but_never_started_container_is_replaced() {
        let p = pod("Always", &["a"]);
        let s = status(
            vec![sandbox("s1", true, 0)],
            vec![container(&p, "a", ContainerState::ContainerCreated, 0)],
        );
        let a = actions(&p, &s);
        assert_eq!(a.containers_to_start, vec![0]);
        assert_eq!(
            a.containers_to_kill.first().map(|k| k.id.as_str()),
            Some("id-a")
        );
    }
}
