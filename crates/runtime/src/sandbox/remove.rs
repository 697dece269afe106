//! RemovePodSandbox: remove the pod's containers, namespaces, files and record.

use k8s_cri::v1::{RemovePodSandboxRequest, RemovePodSandboxResponse};

use super::{Sandbox, ns};
use crate::error::Result;
use crate::runtime::Runtime;

impl Runtime {
    /// Stops the sandbox if needed, removes its containers, then its namespace pins, files
    /// and cgroup parent (when the runtime made it up). Removing an absent sandbox is OK.
    pub(crate) async fn remove_pod_sandbox(
        &self,
        req: RemovePodSandboxRequest,
    ) -> Result<RemovePodSandboxResponse> {
        let Some(entry) = self.sandboxes.get(&req.pod_sandbox_id) else {
            return Ok(RemovePodSandboxResponse {});
        };
        let mut sandbox = entry.lock().await;
        self.stop_sandbox(&mut sandbox).await?;
        for id in self.container_ids_of(&sandbox.id).await {
            self.remove_container_by_id(&id).await?;
        }
        self.teardown_sandbox(&mut sandbox).await?;
        self.sandbox_store.delete(&sandbox.id)?;
        self.sandboxes.remove(&sandbox.id);
        Ok(RemovePodSandboxResponse {})
    }

    /// Releases what [`Runtime::run_pod_sandbox`] set up: network (CNI DEL runs before the
    /// netns pin goes), pins, files, cgroup parent.
    pub(crate) async fn teardown_sandbox(&self, sandbox: &mut Sandbox) -> Result<()> {
        self.detach_network(sandbox).await?;
        self.release_sandbox(sandbox).await
    }

    /// Best-effort cleanup after a failed RunPodSandbox, as containerd's deferred cleanup
    /// does: a CNI DEL that fails is logged, and the namespace pins, files, cgroup parent and
    /// record go regardless, since nothing would be left to retry from.
    pub(crate) async fn abandon_sandbox(&self, sandbox: &mut Sandbox) {
        let id = sandbox.id.clone();
        if let Err(err) = self.detach_network(sandbox).await {
            tracing::warn!(%id, "CNI DEL of a sandbox that failed to start: {err:#}");
        }
        if let Err(err) = self.release_sandbox(sandbox).await {
            tracing::warn!(%id, "cleaning up a sandbox that failed to start: {err:#}");
        }
        if let Err(err) = self.sandbox_store.delete(&id) {
            tracing::warn!(%id, "removing the record of a sandbox that failed to start: {err:#}");
        }
    }

    /// Releases the node-local parts of a sandbox: PID namespace holder, namespace pins,
    /// shm, files, cgroup parent.
    async fn release_sandbox(&self, sandbox: &mut Sandbox) -> Result<()> {
        self.stop_pid_holder(sandbox).await?;
        let paths = self.sandbox_paths(&sandbox.id);
        super::shm::unmount(&paths.files)?;
        let ns_dir = paths.ns.clone();
        tokio::task::spawn_blocking(move || ns::unpin(&ns_dir))
            .await
            .map_err(|err| anyhow::anyhow!("namespace task: {err}"))??;
        crate::store::remove_dir_if_exists(&paths.files)?;
        if sandbox.owns_cgroup {
            crate::cgroup::remove(std::path::Path::new(&sandbox.cgroup_parent));
        }
        Ok(())
    }
}
