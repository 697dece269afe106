//! CreateContainer: rootfs snapshot, OCI bundle, persisted record.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use k8s_cri::v1::{CreateContainerRequest, CreateContainerResponse};

use super::{Container, State, spec};
use crate::error::{Error, Result, required};
use crate::runtime::Runtime;

impl Runtime {
    /// Creates a container in a ready sandbox: prepares and mounts a writable snapshot of
    /// the image at `<bundle>/rootfs`, writes `<bundle>/config.json` and records the
    /// container as CREATED. Errors: `NotFound` (sandbox, image), `FailedPrecondition`
    /// (sandbox not ready, name taken), `InvalidArgument` (bad config).
    pub(crate) async fn create_container(
        &self,
        req: CreateContainerRequest,
    ) -> Result<CreateContainerResponse> {
        let config = required(req.config, "container config")?;
        required(config.metadata.as_ref(), "container metadata")?;
        let image_ref = config
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default();
        let sandbox = self
            .sandboxes
            .require(&req.pod_sandbox_id)?
            .lock()
            .await
            .clone();
        if !sandbox.ready {
            return Err(Error::FailedPrecondition(format!(
                "pod sandbox {} is not ready",
                sandbox.id
            )));
        }
        let image = self
            .images
            .get(&image_ref)
            .ok_or_else(|| Error::not_found("image", &image_ref))?;
        let name = Container::reserved_name(&sandbox.name(), &config);
        for other in self.containers.all() {
            if other.lock().await.name == name {
                return Err(Error::FailedPrecondition(format!(
                    "container name {name:?} is reserved"
                )));
            }
        }

        let id = crate::id::generate()?;
        let bundle = self.bundle(&id);
        let cgroups_path = Path::new(&sandbox.cgroup_parent).join(&id);
        let log_path = match (
            sandbox.config.log_directory.as_str(),
            config.log_path.as_str(),
        ) {
            (_, "") => PathBuf::new(),
            (dir, path) => Path::new(dir).join(path),
        };
        let container = Container {
            id: id.clone(),
            sandbox_id: sandbox.id.clone(),
            name,
            image_id: image.id.clone(),
            image_name: image.repo_tags.first().cloned().unwrap_or(image_ref),
            stop_signal: image
                .config
                .config()
                .as_ref()
                .and_then(|c| c.stop_signal().clone())
                .unwrap_or_default(),
            state: State::Created,
            created_at: crate::id::now_nanos(),
            started_at: 0,
            finished_at: 0,
            exit_code: 0,
            reason: String::new(),
            message: String::new(),
            init: None,
            shim: None,
            shim_lost: false,
            log_path,
            cgroups_path: cgroups_path.clone(),
            runtime_handler: sandbox.runtime_handler.clone(),
            config,
        };
        let prepared = self.prepare_bundle(&container, &sandbox, &image, &bundle);
        if let Err(err) = prepared.and_then(|()| Ok(self.container_store.save(&id, &container)?)) {
            if let Err(cleanup) = self.release_bundle(&id) {
                tracing::warn!(%id, "cleaning up a failed create: {cleanup:#}");
            }
            return Err(err);
        }
        self.containers.insert(id.clone(), container);
        Ok(CreateContainerResponse { container_id: id })
    }

    fn prepare_bundle(
        &self,
        container: &Container,
        sandbox: &crate::sandbox::Sandbox,
        image: &crate::image::ImageRecord,
        bundle: &Path,
    ) -> Result<()> {
        let rootfs = bundle.join("rootfs");
        std::fs::create_dir_all(&rootfs)
            .with_context(|| format!("creating {}", rootfs.display()))?;
        let snapshot = self
            .images
            .snapshotter()
            .prepare(&container.id, &image.chain_ids)?;
        snapshot.mount(&rootfs)?;
        let spec = spec::build(&spec::Inputs {
            config: &container.config,
            sandbox,
            sandbox_paths: &self.sandbox_paths(&sandbox.id),
            image: &image.config,
            rootfs: &rootfs,
            cgroups_path: &container.cgroups_path,
            oom_floor: self.oom_floor,
        })?;
        let json = serde_json::to_vec_pretty(&spec).context("serializing config.json")?;
        crate::store::write_atomic(&bundle.join("config.json"), &json)?;
        Ok(())
    }

    /// Unmounts the rootfs, removes the snapshot and the bundle directory (absent is OK).
    pub(crate) fn release_bundle(&self, id: &str) -> Result<()> {
        let bundle = self.bundle(id);
        crate::snapshot::unmount(&bundle.join("rootfs"))?;
        self.images.snapshotter().remove(id)?;
        crate::store::remove_dir_if_exists(&bundle)?;
        Ok(())
    }
}
