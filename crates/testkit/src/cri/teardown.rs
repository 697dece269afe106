//! Taking a runtime's pods down: politely through the CRI, and checks for what a
//! runtime left in the pod cgroups.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::{ListPodSandboxRequest, RemovePodSandboxRequest, StopPodSandboxRequest};

use crate::node::leftovers;

/// How long [`remove_pods`] may take before the forced cleanup takes over.
const REMOVE_TIMEOUT: Duration = Duration::from_secs(60);

/// StopPodSandbox + RemovePodSandbox for every sandbox of the runtime on `socket`, from
/// a thread of its own (callers may be inside an async runtime, in `Drop`). Errors are
/// ignored: the forced cleanup follows.
pub(crate) fn remove_pods(socket: &Path) {
    let socket = socket.to_path_buf();
    let worker = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async {
            let _ = tokio::time::timeout(REMOVE_TIMEOUT, remove_all(&socket)).await;
        });
    });
    let _ = worker.join();
}

async fn remove_all(socket: &Path) -> anyhow::Result<()> {
    let mut client = RuntimeServiceClient::new(super::connect(socket).await?);
    let sandboxes = client
        .list_pod_sandbox(ListPodSandboxRequest::default())
        .await?
        .into_inner()
        .items;
    for sandbox in sandboxes {
        let pod_sandbox_id = sandbox.id;
        let _ = client
            .stop_pod_sandbox(StopPodSandboxRequest {
                pod_sandbox_id: pod_sandbox_id.clone(),
            })
            .await;
        let _ = client
            .remove_pod_sandbox(RemovePodSandboxRequest { pod_sandbox_id })
            .await;
    }
    Ok(())
}

/// Cgroups inside the pod cgroups of `uids` (the sandbox's and containers' own), each
/// with the PIDs still in it: what a runtime must remove when it removes a pod.
pub(super) fn container_cgroups(uids: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    for pod in leftovers::pod_cgroups(uids) {
        let Ok(entries) = std::fs::read_dir(&pod) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let procs = std::fs::read_to_string(entry.path().join("cgroup.procs"))
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(",");
            found.push(format!(
                "cgroup {} (pids: [{procs}])",
                entry.path().display()
            ));
        }
    }
    found
}
