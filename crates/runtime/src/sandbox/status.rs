//! PodSandboxStatus and ListPodSandbox.

use k8s_cri::v1::{
    LinuxPodSandboxStatus, ListPodSandboxRequest, ListPodSandboxResponse, Namespace, NamespaceMode,
    NamespaceOption, PodIp, PodSandbox, PodSandboxFilter, PodSandboxNetworkStatus,
    PodSandboxStatus, PodSandboxStatusRequest, PodSandboxStatusResponse,
};

use super::Sandbox;
use crate::error::Result;
use crate::runtime::Runtime;

impl Runtime {
    /// Status of one sandbox; `NotFound` when unknown.
    pub(crate) async fn pod_sandbox_status(
        &self,
        req: PodSandboxStatusRequest,
    ) -> Result<PodSandboxStatusResponse> {
        let sandbox = self
            .sandboxes
            .require(&req.pod_sandbox_id)?
            .lock_owned()
            .await;
        Ok(PodSandboxStatusResponse {
            status: Some(status(&sandbox)),
            timestamp: crate::id::now_nanos(),
            ..Default::default()
        })
    }

    /// Sandboxes matching the filter (ID, state, labels).
    pub(crate) async fn list_pod_sandbox(
        &self,
        req: ListPodSandboxRequest,
    ) -> Result<ListPodSandboxResponse> {
        let filter = req.filter.unwrap_or_default();
        let mut items = Vec::new();
        for entry in self.sandboxes.all() {
            let sandbox = entry.lock().await;
            if matches(&sandbox, &filter) {
                items.push(PodSandbox {
                    id: sandbox.id.clone(),
                    metadata: sandbox.config.metadata.clone(),
                    state: sandbox.state() as i32,
                    created_at: sandbox.created_at,
                    labels: sandbox.config.labels.clone(),
                    annotations: sandbox.config.annotations.clone(),
                    runtime_handler: sandbox.runtime_handler.clone(),
                });
            }
        }
        items.sort_by_key(|s| s.created_at);
        Ok(ListPodSandboxResponse { items })
    }
}

fn status(sandbox: &Sandbox) -> PodSandboxStatus {
    let (network, pid, ipc) = sandbox.namespace_modes();
    let network_status = match (sandbox.ready, &sandbox.network) {
        (true, Some(attached)) => Some(PodSandboxNetworkStatus {
            ip: attached.ips.first().cloned().unwrap_or_default(),
            additional_ips: attached
                .ips
                .iter()
                .skip(1)
                .map(|ip| PodIp { ip: ip.clone() })
                .collect(),
        }),
        _ => Some(PodSandboxNetworkStatus::default()),
    };
    PodSandboxStatus {
        id: sandbox.id.clone(),
        metadata: sandbox.config.metadata.clone(),
        state: sandbox.state() as i32,
        created_at: sandbox.created_at,
        network: network_status,
        linux: Some(LinuxPodSandboxStatus {
            namespaces: Some(Namespace {
                options: Some(NamespaceOption {
                    network: network as i32,
                    // Only a sandbox with a PID namespace holder shares one.
                    pid: match (pid, sandbox.pid_holder.is_some() || !sandbox.ready) {
                        (NamespaceMode::Node, _) | (NamespaceMode::Pod, true) => pid as i32,
                        _ => NamespaceMode::Container as i32,
                    },
                    ipc: ipc as i32,
                    ..Default::default()
                }),
            }),
        }),
        labels: sandbox.config.labels.clone(),
        annotations: sandbox.config.annotations.clone(),
        runtime_handler: sandbox.runtime_handler.clone(),
    }
}

fn matches(sandbox: &Sandbox, filter: &PodSandboxFilter) -> bool {
    (filter.id.is_empty() || sandbox.id.starts_with(&filter.id))
        && filter
            .state
            .as_ref()
            .is_none_or(|s| s.state == sandbox.state() as i32)
        && filter
            .label_selector
            .iter()
            .all(|(k, v)| sandbox.config.labels.get(k) == Some(v))
}
