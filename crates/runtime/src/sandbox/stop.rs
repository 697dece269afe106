//! StopPodSandbox: kill the pod's containers and detach its network.

use k8s_cri::v1::{StopPodSandboxRequest, StopPodSandboxResponse};

use super::{Sandbox, ns};
use crate::error::Result;
use crate::runtime::Runtime;

impl Runtime {
    /// Stops every container of the sandbox without grace period (containerd does the same)
    /// and tears down the pod network. Idempotent; an unknown sandbox is not an error.
    pub(crate) async fn stop_pod_sandbox(
        &self,
        req: StopPodSandboxRequest,
    ) -> Result<StopPodSandboxResponse> {
        let Some(entry) = self.sandboxes.get(&req.pod_sandbox_id) else {
            return Ok(StopPodSandboxResponse {});
        };
        let mut sandbox = entry.lock().await;
        self.stop_sandbox(&mut sandbox).await?;
        Ok(StopPodSandboxResponse {})
    }

    /// Kills the containers and the PID namespace holder, runs CNI DEL and marks the
    /// sandbox not ready (persisted).
    pub(crate) async fn stop_sandbox(&self, sandbox: &mut Sandbox) -> Result<()> {
        for id in self.container_ids_of(&sandbox.id).await {
            self.stop_container_by_id(&id, 0).await?;
        }
        self.stop_pid_holder(sandbox).await?;
        self.detach_network(sandbox).await?;
        if sandbox.ready {
            sandbox.ready = false;
            self.sandbox_store.save(&sandbox.id, &*sandbox)?;
        }
        Ok(())
    }

    /// CNI DEL, before the network namespace goes away. When the pin is already gone the
    /// plugins get an empty `CNI_NETNS` and still release IPs and port mappings.
    pub(crate) async fn detach_network(&self, sandbox: &mut Sandbox) -> Result<()> {
        if !sandbox.pinned.contains(&ns::Kind::Net) {
            return Ok(());
        }
        // A sandbox being created may have been attached without its record knowing.
        if sandbox.network.is_none() && !sandbox.ready && !sandbox.creating {
            return Ok(());
        }
        let pin = ns::pin_path(&self.sandbox_paths(&sandbox.id).ns, ns::Kind::Net);
        let netns = if ns::is_pinned(&pin) {
            pin.to_string_lossy().into_owned()
        } else {
            String::new()
        };
        self.cni
            .del(&self.attachment(sandbox, &netns), sandbox.network.as_ref())
            .await?;
        sandbox.network = None;
        self.sandbox_store.save(&sandbox.id, &*sandbox)?;
        Ok(())
    }

    /// IDs of the containers of sandbox `sandbox_id`.
    pub(crate) async fn container_ids_of(&self, sandbox_id: &str) -> Vec<String> {
        let mut ids = Vec::new();
        for entry in self.containers.all() {
            let container = entry.lock().await;
            if container.sandbox_id == sandbox_id {
                ids.push(container.id.clone());
            }
        }
        ids
    }
}
