//! Finding the pod and container a request names, with upstream's error statuses.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use k8s_cri::v1::{ListPodSandboxRequest, PodSandboxFilter, PodSandboxState, PodSandboxStateValue};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

use super::ServerState;
use crate::kuberuntime::labels::POD_UID_LABEL;

/// An error answer: status and plain-text message.
#[derive(Debug)]
pub struct HttpError(pub StatusCode, pub String);

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

/// A desired pod and its latest status.
pub struct FoundPod {
    /// The pod.
    pub pod: Arc<Pod>,
    /// Its status, if synced once.
    pub status: Option<PodStatus>,
}

impl FoundPod {
    /// The pod UID.
    pub fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or_default()
    }

    /// The pod name.
    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or_default()
    }

    /// Whether the spec declares `container` (regular, init or ephemeral).
    pub fn has_container(&self, container: &str) -> bool {
        let Some(spec) = &self.pod.spec else {
            return false;
        };
        spec.containers.iter().any(|c| c.name == container)
            || spec
                .init_containers
                .iter()
                .flatten()
                .any(|c| c.name == container)
            || spec
                .ephemeral_containers
                .iter()
                .flatten()
                .any(|c| c.name == container)
    }

    /// The status of `container` (regular, init or ephemeral).
    pub fn container_status(&self, container: &str) -> Option<&ContainerStatus> {
        let status = self.status.as_ref()?;
        [
            &status.container_statuses,
            &status.init_container_statuses,
            &status.ephemeral_container_statuses,
        ]
        .into_iter()
        .flatten()
        .flatten()
        .find(|c| c.name == container)
    }

    /// The runtime ID of the running instance of `container` (upstream `findContainer`),
    /// or 404-style error `container not found ("name")`.
    pub fn running_container_id(&self, container: &str) -> Result<String, HttpError> {
        self.container_status(container)
            .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
            .and_then(|c| c.container_id.as_deref())
            .map(strip_runtime)
            .ok_or_else(|| {
                HttpError(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("container not found ({container:?})"),
                )
            })
    }

    /// The ready sandbox of the pod, or error `pod not found ("name")`.
    pub async fn sandbox_id(&self, state: &ServerState) -> Result<String, HttpError> {
        let filter = PodSandboxFilter {
            state: Some(PodSandboxStateValue {
                state: PodSandboxState::SandboxReady as i32,
            }),
            label_selector: [(POD_UID_LABEL.to_owned(), self.uid().to_owned())].into(),
            ..Default::default()
        };
        let sandboxes = state
            .cri
            .list_pod_sandbox(ListPodSandboxRequest {
                filter: Some(filter),
            })
            .await
            .map_err(|e| HttpError(StatusCode::INTERNAL_SERVER_ERROR, e.message().to_owned()))?;
        sandboxes
            .items
            .into_iter()
            .max_by_key(|s| s.created_at)
            .map(|s| s.id)
            .ok_or_else(|| {
                HttpError(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("pod not found ({:?})", self.name()),
                )
            })
    }
}

/// `docker://abc` -> `abc` (a status containerID without its runtime scheme).
pub fn strip_runtime(id: &str) -> String {
    id.split_once("://").map_or(id, |(_, id)| id).to_owned()
}

/// The desired pod `namespace/name`, or `None`.
pub fn find_pod(state: &ServerState, namespace: &str, name: &str) -> Option<FoundPod> {
    let pod = state.pod_manager.pods().into_iter().find(|p| {
        p.metadata.name.as_deref() == Some(name)
            && p.metadata.namespace.as_deref().unwrap_or("default") == namespace
    })?;
    let status = state
        .status_manager
        .get_pod_status(pod.metadata.uid.as_deref().unwrap_or_default());
    Some(FoundPod { pod, status })
}

/// Parses a query boolean as Go's `strconv.ParseBool`.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_booleans_and_runtime_ids() {
        assert_eq!(parse_bool("1"), Some(true));
        assert_eq!(parse_bool("False"), Some(false));
        assert_eq!(parse_bool("yes"), None);
        assert_eq!(strip_runtime("containerd://abc"), "abc");
        assert_eq!(strip_runtime("abc"), "abc");
    }
}
