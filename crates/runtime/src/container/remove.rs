//! RemoveContainer: force-stop, `runc delete` unless the shim did it, rootfs and bundle
//! removal.

use k8s_cri::v1::{RemoveContainerRequest, RemoveContainerResponse};

use crate::error::Result;
use crate::runtime::Runtime;

impl Runtime {
    /// Removes a container, killing it first if it still runs. Removing an absent
    /// container is OK.
    pub(crate) async fn remove_container(
        &self,
        req: RemoveContainerRequest,
    ) -> Result<RemoveContainerResponse> {
        self.remove_container_by_id(&req.container_id).await?;
        Ok(RemoveContainerResponse {})
    }

    /// See [`Runtime::remove_container`].
    pub(crate) async fn remove_container_by_id(&self, id: &str) -> Result<()> {
        let Some(entry) = self.containers.get(id) else {
            return Ok(());
        };
        // Waits for a start in flight.
        let busy = entry.lock().await.busy.clone();
        let _busy = busy.lock().await;
        self.stop_container_by_id(id, 0).await?;
        let container = entry.lock().await;
        self.wait_for_shim(id).await;
        if !crate::shim::record::is_deleted(&self.bundle(id)) {
            self.runc(&container.runtime_handler).delete(id).await?;
        }
        self.release_bundle(id)?;
        self.container_store.delete(id)?;
        self.containers.remove(id);
        self.container_names.release(&container.name, id);
        drop(container);
        Ok(())
    }
}
