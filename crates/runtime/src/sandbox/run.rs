//! RunPodSandbox: pin namespaces, write the pod's files, attach the network.

use k8s_cri::v1::{NamespaceMode, RunPodSandboxRequest, RunPodSandboxResponse};

use super::{Sandbox, files, ns};
use crate::error::{Error, Result, required};
use crate::runtime::Runtime;

/// The cgroup parent the runtime makes up for a sandbox the kubelet gave none:
/// `/skiff-pod-<sandbox id>`, directly under the hierarchy roots. Each sandbox gets its own
/// top-level parent, removed with the sandbox; a shared parent (containerd puts such
/// containers under `/<namespace>`, e.g. `/k8s.io`) would outlive every sandbox.
const OWN_CGROUP_PREFIX: &str = "/skiff-pod-";

impl Runtime {
    /// Creates a ready sandbox. Fails with `InvalidArgument` without config or metadata, and
    /// with `FailedPrecondition` when the pod name (name, namespace, uid, attempt) is already
    /// taken by another sandbox. An unconfigured `runtime_handler` fails with `Unknown`
    /// ("no runtime for ... is configured"), the code and text containerd's
    /// `getSandboxRuntime` error gets. Everything created is undone on failure; the record
    /// is saved (`creating`) before anything is created, so that a runtime killed midway
    /// undoes it when it starts again.
    pub(crate) async fn run_pod_sandbox(
        &self,
        req: RunPodSandboxRequest,
    ) -> Result<RunPodSandboxResponse> {
        let config = required(req.config, "sandbox config")?;
        required(config.metadata.as_ref(), "sandbox metadata")?;
        if self.config.handler(&req.runtime_handler).is_none() {
            return Err(Error::Unknown(format!(
                "failed to get sandbox runtime: no runtime for {:?} is configured",
                req.runtime_handler
            )));
        }
        let name = super::reserved_name(&config);
        for other in self.sandboxes.all() {
            if other.lock().await.name() == name {
                return Err(Error::FailedPrecondition(format!(
                    "sandbox name {name:?} is reserved"
                )));
            }
        }
        let id = crate::id::generate()?;
        let (network, _, ipc) = super::namespace_modes(&config);
        let mut pinned = Vec::new();
        if network != NamespaceMode::Node {
            pinned.extend([ns::Kind::Net, ns::Kind::Uts]);
        }
        if ipc != NamespaceMode::Node {
            pinned.push(ns::Kind::Ipc);
        }
        let (cgroup_parent, owns_cgroup) = match config
            .linux
            .as_ref()
            .map(|l| l.cgroup_parent.as_str())
            .filter(|p| !p.is_empty())
        {
            Some(parent) => (parent.to_string(), false),
            None => (format!("{OWN_CGROUP_PREFIX}{id}"), true),
        };
        let mut sandbox = Sandbox {
            id: id.clone(),
            config,
            runtime_handler: req.runtime_handler,
            ready: false,
            creating: true,
            created_at: crate::id::now_nanos(),
            pinned,
            network: None,
            cgroup_parent,
            owns_cgroup,
            pid_holder: None,
        };
        self.sandbox_store.save(&id, &sandbox)?;
        if let Err(err) = self.setup_sandbox(&mut sandbox).await {
            self.abandon_sandbox(&mut sandbox).await;
            return Err(err);
        }
        sandbox.ready = true;
        sandbox.creating = false;
        if let Err(err) = self.sandbox_store.save(&id, &sandbox) {
            self.abandon_sandbox(&mut sandbox).await;
            return Err(err.into());
        }
        self.sandboxes.insert(id.clone(), sandbox);
        Ok(RunPodSandboxResponse { pod_sandbox_id: id })
    }

    async fn setup_sandbox(&self, sandbox: &mut Sandbox) -> Result<()> {
        let started = std::time::Instant::now();
        let paths = self.sandbox_paths(&sandbox.id);
        let hostname = match sandbox.pinned.contains(&ns::Kind::Uts) {
            true => sandbox.config.hostname.clone(),
            false => nix::unistd::gethostname()
                .map_err(std::io::Error::from)?
                .to_string_lossy()
                .into_owned(),
        };
        let (ns_dir, kinds, pin_hostname) =
            (paths.ns.clone(), sandbox.pinned.clone(), hostname.clone());
        tokio::task::spawn_blocking(move || ns::pin(&ns_dir, &kinds, &pin_hostname))
            .await
            .map_err(|err| anyhow::anyhow!("namespace task: {err}"))??;
        let pinned = started.elapsed();
        files::write_initial(&paths.files, &hostname, sandbox.config.dns_config.as_ref())?;
        let (_, pid, ipc) = sandbox.namespace_modes();
        if ipc != NamespaceMode::Node {
            super::shm::mount(&paths.files)?;
        }
        if pid == NamespaceMode::Pod {
            sandbox.pid_holder = Some(self.start_pid_holder(sandbox).await?);
            self.sandbox_store.save(&sandbox.id, &*sandbox)?;
        }
        let network_started = std::time::Instant::now();
        if sandbox.pinned.contains(&ns::Kind::Net) {
            let netns = ns::pin_path(&paths.ns, ns::Kind::Net);
            let netns = netns.to_string_lossy();
            let attached = self.cni.add(&self.attachment(sandbox, &netns)).await?;
            sandbox.network = Some(attached);
            self.sandbox_store.save(&sandbox.id, &*sandbox)?;
        }
        tracing::debug!(
            id = %sandbox.id,
            namespaces_ms = pinned.as_secs_f64() * 1e3,
            network_ms = network_started.elapsed().as_secs_f64() * 1e3,
            total_ms = started.elapsed().as_secs_f64() * 1e3,
            "sandbox set up"
        );
        match sandbox.pinned.contains(&ns::Kind::Net) {
            true => files::write_hosts(&paths.files, &hostname, sandbox.ip())?,
            false => files::copy_host_hosts(&paths.files)?,
        }
        Ok(())
    }

    /// CNI attachment parameters of a sandbox with network namespace path `netns`.
    pub(crate) fn attachment<'a>(
        &self,
        sandbox: &'a Sandbox,
        netns: &'a str,
    ) -> crate::cni::Attachment<'a> {
        let meta = sandbox.config.metadata.as_ref();
        crate::cni::Attachment {
            sandbox_id: &sandbox.id,
            netns,
            pod_name: meta.map_or("", |m| m.name.as_str()),
            pod_namespace: meta.map_or("", |m| m.namespace.as_str()),
            pod_uid: meta.map_or("", |m| m.uid.as_str()),
            port_mappings: &sandbox.config.port_mappings,
        }
    }
}
