//! What SyncPod must do to bring a pod to its spec (upstream `computePodActions`,
//! `computeInitContainerActions`, `podSandboxChanged`, `ShouldContainerBeRestarted` in
//! kuberuntime_manager.go and kuberuntime_container.go).

use k8s_cri::v1::{ContainerState, PodSandboxState};
use k8s_openapi::api::core::v1::{Container, Pod};

use super::labels::container_hash;
use super::pod_status::{ContainerStatus, PodStatus};
use crate::prober::managers::ResultsManagers;
use crate::prober::results::ProbeResult;

/// A running container to kill, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerToKill {
    /// Runtime container ID.
    pub id: String,
    /// Container name.
    pub name: String,
    /// Why it is killed (logged).
    pub message: String,
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
    /// Indexes into `spec.initContainers` of the init containers to start, in order.
    pub init_containers_to_start: Vec<usize>,
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

/// True for a native sidecar: an init container with restartPolicy `Always` (KEP-753,
/// upstream `IsRestartableInitContainer`).
pub fn is_restartable_init_container(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// The pod's init containers (empty when unset).
pub fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
}

/// The pod's regular containers.
pub fn containers(pod: &Pod) -> &[Container] {
    pod.spec.as_ref().map_or(&[], |s| &s.containers)
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

/// An init container failed: OOM-killed, exited non-zero, or in an unknown state
/// (upstream `isInitContainerFailed`).
fn is_init_container_failed(c: &ContainerStatus) -> bool {
    c.reason == "OOMKilled"
        || (c.state == ContainerState::ContainerExited && c.exit_code != 0)
        || c.state == ContainerState::ContainerUnknown
}

/// Whether `container` must be (re)started: never created, or dead (created, unknown,
/// exited) and allowed by the restart policy (Never: no; OnFailure: only after failure).
/// Native sidecars always restart.
pub fn should_container_be_restarted(container: &Container, pod: &Pod, status: &PodStatus) -> bool {
    let Some(c) = status.find_container_status_by_name(&container.name) else {
        return true;
    };
    match c.state {
        ContainerState::ContainerRunning => false,
        ContainerState::ContainerUnknown | ContainerState::ContainerCreated => true,
        ContainerState::ContainerExited if is_restartable_init_container(container) => true,
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

fn kill(c: &ContainerStatus, message: String) -> ContainerToKill {
    ContainerToKill {
        id: c.id.clone(),
        name: c.name.clone(),
        message,
    }
}

/// Computes the actions that bring `pod` from `status` to its spec. `probes` gives the
/// liveness and startup results that restart containers and gate native sidecars.
pub fn compute_pod_actions(
    pod: &Pod,
    status: &PodStatus,
    probes: &ResultsManagers<'_>,
) -> PodActions {
    let containers = containers(pod);
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
        let to_start: Vec<usize> = containers
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                !(restart_policy(pod) == "OnFailure" && container_succeeded(c, status))
            })
            .map(|(i, _)| i)
            .collect();
        if to_start.is_empty() {
            actions.create_sandbox = false;
            return actions;
        }
        // A new sandbox runs its init containers again, from the first.
        if init_containers(pod).is_empty() {
            actions.containers_to_start = to_start;
        } else {
            actions.init_containers_to_start = vec![0];
        }
        return actions;
    }
    let initialized = compute_init_container_actions(pod, status, probes, &mut actions);
    if actions.kill_pod || !initialized {
        return actions;
    }
    let mut keep_count = 0;
    for (i, container) in containers.iter().enumerate() {
        let current = status.find_container_status_by_name(&container.name);
        let running = current.filter(|c| c.state == ContainerState::ContainerRunning);
        let Some(running) = running else {
            if should_container_be_restarted(container, pod, status) {
                actions.containers_to_start.push(i);
                // An instance in an unknown state may run: kill it before the restart. One
                // that was created but never started is removed by the start itself.
                if let Some(c) = current.filter(|c| c.state == ContainerState::ContainerUnknown) {
                    actions
                        .containers_to_kill
                        .push(kill(c, "container is in an unknown state".to_owned()));
                }
            }
            continue;
        };
        let mut restart = should_restart_on_failure(pod);
        let message = if running.hash != container_hash(container) {
            restart = true;
            format!("Container {} definition changed", container.name)
        } else if probes.liveness(&running.id) == Some(ProbeResult::Failure) {
            format!("Container {} failed liveness probe", container.name)
        } else if probes.startup(&running.id) == Some(ProbeResult::Failure) {
            format!("Container {} failed startup probe", container.name)
        } else {
            keep_count += 1;
            continue;
        };
        let message = if restart {
            actions.containers_to_start.push(i);
            format!("{message}, will be restarted")
        } else {
            message
        };
        actions.containers_to_kill.push(kill(running, message));
    }
    if keep_count == 0 && actions.containers_to_start.is_empty() {
        actions.kill_pod = true;
        // Native sidecars must not keep a finished pod alive.
        actions.init_containers_to_start.clear();
    }
    actions
}

/// The init container actions (upstream `computeInitContainerActions`): walks the init
/// containers from the last to find the next one to run, restarts failed ones (or kills
/// the pod when restartPolicy is Never), and keeps native sidecars running. Returns true
/// once the pod is initialized: every regular init container succeeded and every native
/// sidecar started (its startup probe, if any, succeeded).
fn compute_init_container_actions(
    pod: &Pod,
    status: &PodStatus,
    probes: &ResultsManagers<'_>,
    actions: &mut PodActions,
) -> bool {
    let inits = init_containers(pod);
    if inits.is_empty() {
        return true;
    }
    // A created or running main container means initialization finished before, even if
    // the runtime no longer has the init containers.
    let mut initialized = containers(pod).iter().any(|c| {
        status
            .find_container_status_by_name(&c.name)
            .is_some_and(|s| {
                matches!(
                    s.state,
                    ContainerState::ContainerCreated | ContainerState::ContainerRunning
                )
            })
    });
    let mut previously_initialized = initialized;
    let restart_on_failure = should_restart_on_failure(pod);
    let last = inits.len() - 1;
    let mut to_start = Vec::new();
    for (i, container) in inits.iter().enumerate().rev() {
        let sidecar = is_restartable_init_container(container);
        let Some(c) = status.find_container_status_by_name(&container.name) else {
            if previously_initialized && sidecar {
                to_start.push(i);
            }
            continue;
        };
        if previously_initialized && !sidecar {
            continue;
        }
        match c.state {
            ContainerState::ContainerCreated => to_start.push(i),
            ContainerState::ContainerRunning if sidecar => {
                let startup = container
                    .startup_probe
                    .as_ref()
                    .map(|_| probes.startup(&c.id));
                match startup {
                    // Not started yet: wait for the startup probe.
                    Some(None | Some(ProbeResult::Unknown)) => {}
                    Some(Some(ProbeResult::Failure)) => {
                        actions.containers_to_kill.push(kill(
                            c,
                            format!("Init container {} failed startup probe", container.name),
                        ));
                        to_start.push(i);
                    }
                    None | Some(Some(ProbeResult::Success)) => {
                        if i == last {
                            initialized = true;
                        } else if !previously_initialized {
                            to_start.push(i + 1);
                        }
                        if c.hash != container_hash(container) {
                            actions.containers_to_kill.push(kill(
                                c,
                                format!(
                                    "Init container {} definition changed, will be restarted",
                                    container.name
                                ),
                            ));
                            to_start.push(i);
                        } else if probes.liveness(&c.id) == Some(ProbeResult::Failure) {
                            actions.containers_to_kill.push(kill(
                                c,
                                format!("Init container {} failed liveness probe", container.name),
                            ));
                            to_start.push(i);
                        }
                    }
                }
            }
            // A regular init container runs to completion.
            ContainerState::ContainerRunning => {}
            ContainerState::ContainerExited if sidecar => to_start.push(i),
            ContainerState::ContainerExited if is_init_container_failed(c) => {
                if !restart_on_failure {
                    actions.kill_pod = true;
                    actions.init_containers_to_start.clear();
                    return false;
                }
                to_start.push(i);
            }
            ContainerState::ContainerExited => {
                if i == last {
                    initialized = true;
                } else {
                    to_start.push(i + 1);
                }
            }
            ContainerState::ContainerUnknown => {
                if !sidecar && !restart_on_failure {
                    actions.kill_pod = true;
                    actions.init_containers_to_start.clear();
                    return false;
                }
                actions
                    .containers_to_kill
                    .push(kill(c, "init container is in an unknown state".to_owned()));
                to_start.push(i);
            }
        }
        previously_initialized = true;
    }
    if !previously_initialized {
        to_start.push(0);
    }
    to_start.reverse();
    actions.init_containers_to_start = to_start;
    initialized
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

    #[test]
    fn new_pod_creates_sandbox_and_starts_all() {
        let p = pod("Always", &["a", "b"]);
        let a = compute_pod_actions(&p, &status(vec![], vec![]), &ResultsManagers::default());
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
            compute_pod_actions(&p, &s, &ResultsManagers::default()),
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
            let a = compute_pod_actions(&p, &s, &ResultsManagers::default());
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
        let a = compute_pod_actions(&p, &s, &ResultsManagers::default());
        assert!(a.kill_pod && !a.create_sandbox && a.containers_to_start.is_empty());
        let s = status(
            vec![sandbox("s1", false, 0)],
            vec![container(&p, "a", ContainerState::ContainerExited, 0)],
        );
        let a = compute_pod_actions(&p, &s, &ResultsManagers::default());
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
        let a = compute_pod_actions(&p, &s, &ResultsManagers::default());
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
        let a = compute_pod_actions(
            &p,
            &status(vec![sandbox("s1", true, 0)], vec![running]),
            &ResultsManagers::default(),
        );
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
        let a = compute_pod_actions(&p, &s, &ResultsManagers::default());
        assert_eq!(a.containers_to_start, vec![0]);
        // The start removes it; nothing to kill.
        assert!(a.containers_to_kill.is_empty());
    }

    /// A pod with init containers `inits` (`name` or `name:sidecar`) and main `names`.
    fn pod_with_inits(policy: &str, inits: &[&str], names: &[&str]) -> Pod {
        let mut p = pod(policy, names);
        if let Some(spec) = p.spec.as_mut() {
            spec.init_containers = Some(
                inits
                    .iter()
                    .map(|n| {
                        let (name, sidecar) = n.split_once(':').unwrap_or((n, ""));
                        Container {
                            name: name.into(),
                            image: Some("busybox".into()),
                            restart_policy: (sidecar == "sidecar").then(|| "Always".into()),
                            ..Default::default()
                        }
                    })
                    .collect(),
            );
        }
        p
    }

    /// Like `container`, for init containers (their hash must match their spec).
    fn init(pod: &Pod, name: &str, state: ContainerState, exit_code: i32) -> ContainerStatus {
        let spec = init_containers(pod)
            .iter()
            .find(|c| c.name == name)
            .cloned();
        ContainerStatus {
            hash: spec.map(|c| container_hash(&c)).unwrap_or_default(),
            ..container(pod, name, state, exit_code)
        }
    }

    fn actions(p: &Pod, containers: Vec<ContainerStatus>) -> PodActions {
        let s = status(vec![sandbox("s1", true, 0)], containers);
        compute_pod_actions(p, &s, &ResultsManagers::default())
    }

    #[test]
    fn init_containers_run_one_after_another() {
        use ContainerState::*;
        let p = pod_with_inits("Always", &["i1", "i2"], &["a"]);
        let a = compute_pod_actions(&p, &status(vec![], vec![]), &ResultsManagers::default());
        assert_eq!(
            (a.init_containers_to_start, a.containers_to_start),
            (vec![0], vec![])
        );
        // A fresh sandbox without any container yet starts the first one.
        assert_eq!(actions(&p, vec![]).init_containers_to_start, vec![0]);
        // i1 still running: wait.
        let a = actions(&p, vec![init(&p, "i1", ContainerRunning, 0)]);
        assert!(a.init_containers_to_start.is_empty() && a.containers_to_start.is_empty());
        assert!(!a.kill_pod);
        // i1 done: i2 next.
        let a = actions(&p, vec![init(&p, "i1", ContainerExited, 0)]);
        assert_eq!(
            (a.init_containers_to_start, a.containers_to_start),
            (vec![1], vec![])
        );
        // Both done: the main container.
        let a = actions(
            &p,
            vec![
                init(&p, "i2", ContainerExited, 0),
                init(&p, "i1", ContainerExited, 0),
            ],
        );
        assert_eq!(
            (a.init_containers_to_start, a.containers_to_start),
            (vec![], vec![0])
        );
        // Once the main container ran, removed init containers are not run again.
        let a = actions(&p, vec![container(&p, "a", ContainerRunning, 0)]);
        assert_eq!(
            a,
            PodActions {
                sandbox_id: "s1".into(),
                ..Default::default()
            }
        );
    }

    #[test]
    fn failed_init_container_restarts_or_fails_the_pod() {
        use ContainerState::*;
        for policy in ["Always", "OnFailure"] {
            let p = pod_with_inits(policy, &["i1", "i2"], &["a"]);
            let a = actions(&p, vec![init(&p, "i1", ContainerExited, 1)]);
            assert_eq!(a.init_containers_to_start, vec![0], "{policy}");
            assert!(a.containers_to_start.is_empty() && !a.kill_pod, "{policy}");
        }
        let p = pod_with_inits("Never", &["i1", "i2"], &["a"]);
        let a = actions(&p, vec![init(&p, "i1", ContainerExited, 1)]);
        assert!(a.kill_pod && a.init_containers_to_start.is_empty());
        assert!(a.containers_to_start.is_empty());
        // An OOM-killed init container failed even if its exit code says otherwise.
        let mut oom = init(&p, "i1", ContainerExited, 0);
        oom.reason = "OOMKilled".into();
        assert!(actions(&p, vec![oom]).kill_pod);
    }

    #[test]
    fn sidecars_start_in_order_and_stay_running() {
        use ContainerState::*;
        let p = pod_with_inits("Never", &["s1:sidecar", "i1", "s2:sidecar"], &["a"]);
        // s1 started: the next init container may start while s1 keeps running.
        let a = actions(&p, vec![init(&p, "s1", ContainerRunning, 0)]);
        assert_eq!(
            (a.init_containers_to_start, a.containers_to_start),
            (vec![1], vec![])
        );
        // i1 done: s2; s2 started: the pod is initialized and the main container starts.
        let mut running = vec![
            init(&p, "i1", ContainerExited, 0),
            init(&p, "s1", ContainerRunning, 0),
        ];
        assert_eq!(
            actions(&p, running.clone()).init_containers_to_start,
            vec![2]
        );
        running.insert(0, init(&p, "s2", ContainerRunning, 0));
        let a = actions(&p, running.clone());
        assert_eq!(
            (a.init_containers_to_start, a.containers_to_start),
            (vec![], vec![0])
        );
        // A sidecar that exits is restarted even under restartPolicy Never; the main
        // container keeps running.
        running.insert(0, container(&p, "a", ContainerRunning, 0));
        running[1] = init(&p, "s2", ContainerExited, 0);
        let a = actions(&p, running.clone());
        assert_eq!(
            (a.init_containers_to_start, a.containers_to_start),
            (vec![2], vec![])
        );
        assert!(!a.kill_pod);
        // Main container done under Never: the pod is killed, sidecars are not restarted.
        running[0] = container(&p, "a", ContainerExited, 0);
        running[1] = init(&p, "s2", ContainerRunning, 0);
        let a = actions(&p, running);
        assert!(a.kill_pod && a.init_containers_to_start.is_empty());
    }

    #[test]
    fn sidecar_with_startup_probe_waits_for_success() {
        use crate::prober::results::ResultsManager;
        use ContainerState::*;
        let mut p = pod_with_inits("Always", &["s1:sidecar"], &["a"]);
        if let Some(c) = p
            .spec
            .as_mut()
            .and_then(|s| s.init_containers.as_mut())
            .and_then(|i| i.first_mut())
        {
            c.startup_probe = Some(Default::default());
        }
        let s = status(
            vec![sandbox("s1", true, 0)],
            vec![init(&p, "s1", ContainerRunning, 0)],
        );
        let (startup, _rx) = ResultsManager::new();
        let probes = ResultsManagers {
            startup: Some(&startup),
            ..Default::default()
        };
        let a = compute_pod_actions(&p, &s, &probes);
        assert!(a.containers_to_start.is_empty(), "no startup result yet");
        startup.set("id-s1", ProbeResult::Success, "u");
        assert_eq!(
            compute_pod_actions(&p, &s, &probes).containers_to_start,
            vec![0]
        );
        startup.set("id-s1", ProbeResult::Failure, "u");
        let a = compute_pod_actions(&p, &s, &probes);
        assert_eq!(a.init_containers_to_start, vec![0]);
        assert_eq!(a.containers_to_kill.len(), 1);
    }

    #[test]
    fn failed_liveness_probe_restarts_per_policy() {
        use crate::prober::results::ResultsManager;
        let (liveness, _rx) = ResultsManager::new();
        liveness.set("id-a", ProbeResult::Failure, "u");
        let probes = ResultsManagers {
            liveness: Some(&liveness),
            ..Default::default()
        };
        for (policy, restart) in [("Always", true), ("Never", false)] {
            let p = pod(policy, &["a"]);
            let s = status(
                vec![sandbox("s1", true, 0)],
                vec![container(&p, "a", ContainerState::ContainerRunning, 0)],
            );
            let a = compute_pod_actions(&p, &s, &probes);
            assert_eq!(a.containers_to_kill.len(), 1);
            assert_eq!(a.containers_to_start == vec![0], restart, "{policy}");
            let expected = match restart {
                true => "Container a failed liveness probe, will be restarted",
                false => "Container a failed liveness probe",
            };
            assert_eq!(a.containers_to_kill[0].message, expected);
        }
    }
}
