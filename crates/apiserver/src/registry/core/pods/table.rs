//! The pod table of `kubectl get pods` (upstream `printPod`): READY counts, the STATUS
//! reason computed from the containers' states, RESTARTS with the time of the last one.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::registry::TableColumn;
use crate::registry::printers::{AGE, NAME, age, column, name, since_timestamp, wide};

/// NAME READY STATUS RESTARTS AGE, and with `-o wide` IP NODE NOMINATED NODE READINESS GATES.
pub fn columns() -> Vec<TableColumn> {
    vec![
        NAME,
        column(
            "Ready",
            "string",
            "The aggregate readiness state of this pod for accepting traffic.",
            0,
        ),
        column(
            "Status",
            "string",
            "The aggregate status of the containers in this pod.",
            0,
        ),
        column(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            0,
        ),
        AGE,
        wide(
            "IP",
            "string",
            "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
        ),
        wide(
            "Node",
            "string",
            "NodeName indicates in which node this pod is scheduled.",
        ),
        wide(
            "Nominated Node",
            "string",
            "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods.",
        ),
        wide(
            "Readiness Gates",
            "string",
            "If specified, all readiness gates will be evaluated for pod readiness.",
        ),
    ]
}

/// Sidecars: init containers with restartPolicy `Always`.
fn is_restartable(container: Option<&&Container>) -> bool {
    container.is_some_and(|c| c.restart_policy.as_deref() == Some("Always"))
}

fn last_termination(status: &ContainerStatus) -> Option<Timestamp> {
    status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.finished_at.as_ref())
        .map(|t| t.0)
}

fn has_condition(pod: &Pod, type_: &str) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// What the STATUS, READY and RESTARTS cells show.
struct Summary {
    reason: String,
    ready: usize,
    total: usize,
    restarts: i64,
    last_restart: Option<Timestamp>,
}

fn summarize(pod: &Pod) -> Summary {
    let default_spec = Default::default();
    let spec = pod.spec.as_ref().unwrap_or(&default_spec);
    let default_status = Default::default();
    let status = pod.status.as_ref().unwrap_or(&default_status);
    let phase = status.phase.clone().unwrap_or_default();
    let mut reason = status
        .reason
        .clone()
        .filter(|r| !r.is_empty())
        .unwrap_or(phase.clone());
    let conditions = status.conditions.iter().flatten();
    if conditions
        .clone()
        .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("SchedulingGated"))
    {
        reason = "SchedulingGated".to_owned();
    }
    let init_specs: HashMap<&str, &Container> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let mut summary = Summary {
        reason,
        ready: 0,
        total: spec.containers.len()
            + init_specs
                .values()
                .filter(|c| is_restartable(Some(c)))
                .count(),
        restarts: 0,
        last_restart: None,
    };
    let mut sidecar_restarts = 0;
    let mut sidecar_last_restart = None;
    let mut initializing = false;
    let init_count = spec.init_containers.as_ref().map_or(0, Vec::len);
    for (i, c) in status.init_container_statuses.iter().flatten().enumerate() {
        summary.restarts += i64::from(c.restart_count);
        summary.last_restart = summary.last_restart.max(last_termination(c));
        let sidecar = is_restartable(init_specs.get(c.name.as_str()));
        if sidecar {
            sidecar_restarts += i64::from(c.restart_count);
            sidecar_last_restart = sidecar_last_restart.max(last_termination(c));
        }
        let state = c.state.clone().unwrap_or_default();
        let terminated = state.terminated.as_ref();
        let waiting_reason = state
            .waiting
            .as_ref()
            .and_then(|w| w.reason.as_deref())
            .filter(|r| !r.is_empty() && *r != "PodInitializing");
        if terminated.is_some_and(|t| t.exit_code == 0) {
            continue;
        }
        if sidecar && c.started == Some(true) {
            if c.ready {
                summary.ready += 1;
            }
            continue;
        }
        summary.reason = if let Some(t) = terminated {
            match t.reason.as_deref().filter(|r| !r.is_empty()) {
                Some(r) => format!("Init:{r}"),
                None if t.signal.unwrap_or(0) != 0 => {
                    format!("Init:Signal:{}", t.signal.unwrap_or(0))
                }
                None => format!("Init:ExitCode:{}", t.exit_code),
            }
        } else if let Some(r) = waiting_reason {
            format!("Init:{r}")
        } else {
            format!("Init:{i}/{init_count}")
        };
        initializing = true;
        break;
    }
    if !initializing || has_condition(pod, "Initialized") {
        summary.restarts = sidecar_restarts;
        summary.last_restart = sidecar_last_restart;
        let mut has_running = false;
        for c in status.container_statuses.iter().flatten().rev() {
            summary.restarts += i64::from(c.restart_count);
            summary.last_restart = summary.last_restart.max(last_termination(c));
            let state = c.state.clone().unwrap_or_default();
            let waiting = state
                .waiting
                .as_ref()
                .and_then(|w| w.reason.clone())
                .filter(|r| !r.is_empty());
            if let Some(r) = waiting {
                summary.reason = r;
            } else if let Some(t) = &state.terminated {
                summary.reason = match t.reason.clone().filter(|r| !r.is_empty()) {
                    Some(r) => r,
                    None if t.signal.unwrap_or(0) != 0 => {
                        format!("Signal:{}", t.signal.unwrap_or(0))
                    }
                    None => format!("ExitCode:{}", t.exit_code),
                };
            } else if c.ready && state.running.is_some() {
                has_running = true;
                summary.ready += 1;
            }
        }
        if summary.reason == "Completed" && has_running {
            summary.reason = if has_condition(pod, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .to_owned();
        }
    }
    if pod.metadata.deletion_timestamp.is_some() {
        if status.reason.as_deref() == Some("NodeLost") {
            summary.reason = "Unknown".to_owned();
        } else if !matches!(phase.as_str(), "Succeeded" | "Failed") {
            summary.reason = "Terminating".to_owned();
        }
    }
    summary
}

/// One row: the cells of [`columns`].
pub fn row(pod: &Pod) -> Vec<Value> {
    let summary = summarize(pod);
    let restarts = match summary.last_restart {
        Some(at) if summary.restarts != 0 => {
            format!("{} ({} ago)", summary.restarts, since_timestamp(Some(at)))
        }
        _ => summary.restarts.to_string(),
    };
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let none = |v: Option<String>| {
        v.filter(|s| !s.is_empty())
            .unwrap_or_else(|| "<none>".to_owned())
    };
    let pod_ip = status
        .pod_ips
        .as_ref()
        .and_then(|ips| ips.first())
        .map(|ip| ip.ip.clone());
    let gates = spec.readiness_gates.unwrap_or_default();
    let readiness_gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let conditions = status.conditions.unwrap_or_default();
        let true_count = gates
            .iter()
            .filter(|g| {
                conditions
                    .iter()
                    .find(|c| c.type_ == g.condition_type)
                    .is_some_and(|c| c.status == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };
    vec![
        json!(name(&pod.metadata)),
        json!(format!("{}/{}", summary.ready, summary.total)),
        json!(summary.reason),
        json!(restarts),
        json!(age(&pod.metadata)),
        json!(none(pod_ip)),
        json!(none(spec.node_name)),
        json!(none(status.nominated_node_name)),
        json!(readiness_gates),
    ]
}
