//! CreateContainer: rootfs snapshot, OCI bundle, persisted record.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use k8s_cri::v1::{CreateContainerRequest, CreateContainerResponse, NamespaceMode};

use super::{Container, State, spec};
use crate::error::{Error, Result, required};
use crate::runtime::Runtime;

/// `<state>/removing`: bundles of removed containers, deleted in the background.
const REMOVING_DIR: &str = "removing";

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
        let id = crate::id::generate()?;
        if !self.container_names.reserve(&name, &id) {
            return Err(Error::FailedPrecondition(format!(
                "container name {name:?} is reserved"
            )));
        }
        let created = self
            .create_reserved(id.clone(), name.clone(), sandbox, image, image_ref, config)
            .await;
        if created.is_err() {
            self.container_names.release(&name, &id);
        }
        created
    }

    /// CreateContainer once the name is reserved for `id`.
    async fn create_reserved(
        &self,
        id: String,
        name: String,
        sandbox: crate::sandbox::Sandbox,
        image: crate::image::ImageRecord,
        image_ref: String,
        config: k8s_cri::v1::ContainerConfig,
    ) -> Result<CreateContainerResponse> {
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
            busy: Default::default(),
        };
        let pid_namespace = self.pid_namespace(&container.config, &sandbox).await?;
        let prepared = self.prepare_bundle(&container, &sandbox, &image, &bundle, pid_namespace);
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
        pid_namespace: spec::PidNamespace,
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
            volumes_dir: &bundle.join("volumes"),
            cgroups_path: &container.cgroups_path,
            pid_namespace,
            available_capabilities: &super::security::current_capabilities(),
            oom_floor: self.oom_floor,
        })?;
        let json = serde_json::to_vec_pretty(&spec).context("serializing config.json")?;
        crate::store::write_volatile(&bundle.join("config.json"), &json)?;
        Ok(())
    }

    /// The PID namespace the container asks for (its own namespace options, as containerd):
    /// `POD` joins the sandbox's holder (a new namespace when the sandbox shares none),
    /// `TARGET` the running target container's. Errors: the holder died
    /// (`FailedPrecondition`), unknown target (`NotFound`), target not running (`Unknown`).
    async fn pid_namespace(
        &self,
        config: &k8s_cri::v1::ContainerConfig,
        sandbox: &crate::sandbox::Sandbox,
    ) -> Result<spec::PidNamespace> {
        let options = config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref())
            .and_then(|sc| sc.namespace_options.clone())
            .unwrap_or_default();
        Ok(
            match NamespaceMode::try_from(options.pid).unwrap_or(NamespaceMode::Pod) {
                NamespaceMode::Node => spec::PidNamespace::Node,
                NamespaceMode::Container => spec::PidNamespace::New,
                NamespaceMode::Pod => match sandbox.pid_holder {
                    Some(holder) if holder.is_alive() => {
                        spec::PidNamespace::Join(crate::sandbox::pid::namespace_path(&holder))
                    }
                    Some(_) => {
                        return Err(Error::FailedPrecondition(format!(
                            "the PID namespace holder of pod sandbox {} is gone",
                            sandbox.id
                        )));
                    }
                    None => spec::PidNamespace::New,
                },
                NamespaceMode::Target => {
                    let target = self.current_container(&options.target_id).await?;
                    match (target.state, target.init) {
                        (State::Running, Some(init)) if init.is_alive() => {
                            spec::PidNamespace::Join(std::path::PathBuf::from(format!(
                                "/proc/{}/ns/pid",
                                init.pid
                            )))
                        }
                        _ => {
                            return Err(Error::Unknown(format!(
                                "target container {} is not running",
                                options.target_id
                            )));
                        }
                    }
                }
            },
        )
    }

    /// Releases the bundles (`<state>/containers/<id>`: rootfs mount, snapshot, directory)
    /// of containers without a record (`known` holds the IDs of every record): what a
    /// CreateContainer cut short by a runtime crash left, since the record is saved last.
    /// Called when the runtime starts; failures are logged.
    pub(crate) fn sweep_orphaned_bundles(&self, known: &std::collections::HashSet<String>) {
        let parent = self.config.state.join("containers");
        for bundle in crate::store::unknown_dirs(&parent, known) {
            let Some(id) = bundle.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            tracing::info!(%id, "removing the bundle of a container whose creation was cut short");
            if let Err(err) = self.release_bundle(id) {
                tracing::warn!(%id, "removing an orphaned bundle: {err:#}");
            }
        }
    }

    /// Unmounts the rootfs and takes the snapshot and the bundle directory out of use
    /// (absent is OK). Both are renamed away at once and deleted in the background, so
    /// that RemoveContainer does not wait for the disk: the snapshot to a temporary name the
    /// snapshotter sweeps when it opens, the bundle into `<state>/removing`, emptied when
    /// the runtime starts (see [`Runtime::sweep_removed_bundles`]).
    pub(crate) fn release_bundle(&self, id: &str) -> Result<()> {
        let bundle = self.bundle(id);
        crate::snapshot::unmount(&bundle.join("rootfs"))?;
        // Before the bundle moves: the exit watch is kept by path.
        self.unwatch_exit(id);
        let mut doomed: Vec<std::path::PathBuf> =
            self.images.snapshotter().detach(id)?.into_iter().collect();
        let removing = self.config.state.join(REMOVING_DIR);
        std::fs::create_dir_all(&removing)
            .with_context(|| format!("creating {}", removing.display()))?;
        let trash = removing.join(id);
        match std::fs::rename(&bundle, &trash) {
            Ok(()) => doomed.push(trash),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                return Err(anyhow::Error::from(err)
                    .context(format!("moving {} away", bundle.display()))
                    .into());
            }
        }
        let delete = move || {
            for dir in doomed {
                if let Err(err) = crate::store::remove_dir_if_exists(&dir) {
                    tracing::warn!("removing {}: {err:#}", dir.display());
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => drop(handle.spawn_blocking(delete)),
            Err(_) => delete(),
        }
        Ok(())
    }

    /// Empties `<state>/removing`: bundles whose background deletion a stop of the runtime
    /// cut short. Called when the runtime starts; failures are logged.
    pub(crate) fn sweep_removed_bundles(&self) {
        let removing = self.config.state.join(REMOVING_DIR);
        if let Err(err) = crate::store::remove_dir_if_exists(&removing) {
            tracing::warn!("removing {}: {err:#}", removing.display());
        }
    }
}
