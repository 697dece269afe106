//! The runtime's view of one pod (upstream `kubecontainer.PodStatus` and
//! `GetPodStatus`): its sandboxes and containers as the CRI reports them.

use std::collections::HashMap;

use k8s_cri::v1::{
    ContainerFilter, ContainerState, ContainerStatusRequest, ListContainersRequest,
    ListPodSandboxRequest, PodSandboxFilter, PodSandboxState, PodSandboxStatus,
    PodSandboxStatusRequest,
};
use tonic::Code;

use super::labels::{
    CONTAINER_HASH_ANNOTATION, CONTAINER_NAME_LABEL, CONTAINER_RESTART_COUNT_ANNOTATION,
    POD_UID_LABEL,
};
use super::termination_message::termination_message;
use crate::cri::Cri;

/// One container of a pod as reported by the runtime (upstream `kubecontainer.Status`).
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerStatus {
    /// Runtime container ID.
    pub id: String,
    /// Container name (from the `io.kubernetes.container.name` label).
    pub name: String,
    /// CRI state.
    pub state: ContainerState,
    /// Creation, start and finish times in Unix nanoseconds (0 when not yet).
    pub created_at: i64,
    /// See `created_at`.
    pub started_at: i64,
    /// See `created_at`.
    pub finished_at: i64,
    /// Exit code once exited.
    pub exit_code: i32,
    /// Image the container was created from, as requested.
    pub image: String,
    /// Image ID / digest reference of that image.
    pub image_ref: String,
    /// Spec hash from the `io.kubernetes.container.hash` annotation.
    pub hash: String,
    /// Restart count from the `io.kubernetes.container.restartCount` annotation.
    pub restart_count: i32,
    /// Runtime reason (`Completed`, `Error`, `OOMKilled`) and message.
    pub reason: String,
    /// See `reason`.
    pub message: String,
}

/// Sandboxes and containers of one pod, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodStatus {
    /// Pod UID.
    pub uid: String,
    /// Sandboxes of the pod, newest first.
    pub sandboxes: Vec<PodSandboxStatus>,
    /// Containers of the pod, newest first.
    pub containers: Vec<ContainerStatus>,
    /// IPs of the newest ready sandbox, primary first.
    pub ips: Vec<String>,
}

impl PodStatus {
    /// The newest container named `name`.
    pub fn find_container_status_by_name(&self, name: &str) -> Option<&ContainerStatus> {
        self.containers.iter().find(|c| c.name == name)
    }

    /// True when the newest sandbox exists and is ready.
    pub fn sandbox_ready(&self) -> bool {
        self.sandboxes
            .first()
            .is_some_and(|s| s.state == PodSandboxState::SandboxReady as i32)
    }
}

/// Reads the status of pod `uid` from the runtime: all its sandboxes (PodSandboxStatus)
/// and containers (ContainerStatus), found by the `io.kubernetes.pod.uid` label.
/// Objects removed while being read are skipped.
pub async fn get_pod_status(cri: &dyn Cri, uid: &str) -> Result<PodStatus, tonic::Status> {
    let selector = HashMap::from([(POD_UID_LABEL.to_owned(), uid.to_owned())]);
    let sandboxes = cri
        .list_pod_sandbox(ListPodSandboxRequest {
            filter: Some(PodSandboxFilter {
                label_selector: selector.clone(),
                ..Default::default()
            }),
        })
        .await?
        .items;
    let mut sandbox_statuses = Vec::new();
    for sandbox in sandboxes {
        let req = PodSandboxStatusRequest {
            pod_sandbox_id: sandbox.id,
            verbose: false,
        };
        match cri.pod_sandbox_status(req).await {
            Ok(resp) => sandbox_statuses.extend(resp.status),
            Err(e) if e.code() == Code::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    sandbox_statuses.sort_by_key(|s| std::cmp::Reverse(s.created_at));
    let containers = cri
        .list_containers(ListContainersRequest {
            filter: Some(ContainerFilter {
                label_selector: selector,
                ..Default::default()
            }),
        })
        .await?
        .containers;
    let mut container_statuses = Vec::new();
    for container in containers {
        let req = ContainerStatusRequest {
            container_id: container.id,
            verbose: false,
        };
        match cri.container_status(req).await {
            Ok(resp) => container_statuses.extend(resp.status.map(with_termination_message)),
            Err(e) if e.code() == Code::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    container_statuses.sort_by_key(|c| std::cmp::Reverse(c.created_at));
    let ips = sandbox_statuses
        .first()
        .filter(|s| s.state == PodSandboxState::SandboxReady as i32)
        .and_then(|s| s.network.as_ref())
        .map(|n| {
            std::iter::once(n.ip.clone())
                .chain(n.additional_ips.iter().map(|ip| ip.ip.clone()))
                .filter(|ip| !ip.is_empty())
                .collect()
        })
        .unwrap_or_default();
    Ok(PodStatus {
        uid: uid.to_owned(),
        sandboxes: sandbox_statuses,
        containers: container_statuses,
        ips,
    })
}

/// [`to_container_status`], with the container's termination message appended to the
/// runtime's message (`"<runtime message>: <termination message>"`) once it exited.
fn with_termination_message(s: k8s_cri::v1::ContainerStatus) -> ContainerStatus {
    let termination = termination_message(&s);
    let mut status = to_container_status(s);
    if let Some(message) = termination {
        if !status.message.is_empty() {
            status.message.push_str(": ");
        }
        status.message.push_str(&message);
    }
    status
}

/// Converts a CRI container status, reading name, hash and restart count from its
/// labels and annotations.
pub fn to_container_status(s: k8s_cri::v1::ContainerStatus) -> ContainerStatus {
    let name = s
        .labels
        .get(CONTAINER_NAME_LABEL)
        .cloned()
        .or_else(|| s.metadata.as_ref().map(|m| m.name.clone()))
        .unwrap_or_default();
    let restart_count = s
        .annotations
        .get(CONTAINER_RESTART_COUNT_ANNOTATION)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    ContainerStatus {
        id: s.id,
        name,
        state: ContainerState::try_from(s.state).unwrap_or(ContainerState::ContainerUnknown),
        created_at: s.created_at,
        started_at: s.started_at,
        finished_at: s.finished_at,
        exit_code: s.exit_code,
        image: s.image.map(|i| i.image).unwrap_or_default(),
        image_ref: s.image_ref,
        hash: s
            .annotations
            .get(CONTAINER_HASH_ANNOTATION)
            .cloned()
            .unwrap_or_default(),
        restart_count,
        reason: s.reason,
        message: s.message,
    }
}
