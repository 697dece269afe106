//! UpdateContainerResources: new cgroup limits for a container (containerd's
//! `updateContainerResources`).

use k8s_cri::v1::{UpdateContainerResourcesRequest, UpdateContainerResourcesResponse};
use oci_spec::runtime::{LinuxResources, Spec};

use super::{State, resources};
use crate::error::Result;
use crate::runtime::Runtime;

impl Runtime {
    /// Applies the non-zero fields of the request's Linux resources over the container's
    /// current ones: a running container gets them at once (`runc update`), a created one
    /// when it starts (its `config.json` is rewritten), an exited one only in its record.
    /// The result is what ContainerStatus reports as `resources`. `NotFound` for an
    /// unknown container; runc's refusal (e.g. a memory limit below the current usage)
    /// fails the call and leaves the record unchanged.
    pub(crate) async fn update_container_resources(
        &self,
        req: UpdateContainerResourcesRequest,
    ) -> Result<UpdateContainerResourcesResponse> {
        let mut container = self.current_container(&req.container_id).await?;
        let Some(update) = req.linux else {
            return Ok(UpdateContainerResourcesResponse {});
        };
        let linux = container.config.linux.get_or_insert_default();
        let merged = resources::merge(&linux.resources.clone().unwrap_or_default(), &update);
        if container.state == State::Running {
            let mut oci = LinuxResources::default();
            resources::apply(&merged, &mut oci, crate::cgroup::hugetlb_available())?;
            self.runc(&container.runtime_handler)
                .update(&container.id, &oci)
                .await?;
        }
        if container.state != State::Exited {
            self.rewrite_spec_resources(&container.id, &update)?;
        }
        container.config.linux.get_or_insert_default().resources = Some(merged);
        self.container_store.save(&container.id, &*container)?;
        Ok(UpdateContainerResourcesResponse {})
    }

    /// Applies `update` to the resources in the bundle's `config.json`.
    fn rewrite_spec_resources(
        &self,
        id: &str,
        update: &k8s_cri::v1::LinuxContainerResources,
    ) -> Result<()> {
        let path = self.bundle(id).join("config.json");
        let mut spec = Spec::load(&path)
            .map_err(|err| anyhow::anyhow!("reading {}: {err}", path.display()))?;
        let mut linux = spec.linux().clone().unwrap_or_default();
        let mut current = linux.resources().clone().unwrap_or_default();
        resources::apply(update, &mut current, crate::cgroup::hugetlb_available())?;
        linux.set_resources(Some(current));
        spec.set_linux(Some(linux));
        let json = serde_json::to_vec_pretty(&spec)
            .map_err(|err| anyhow::anyhow!("serializing config.json: {err}"))?;
        crate::store::write_volatile(&path, &json)?;
        Ok(())
    }
}
