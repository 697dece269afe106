//! Pod sandboxes without a pause process: pinned namespaces, per-pod files and the CNI
//! attachment, with the CRI verbs RunPodSandbox, StopPodSandbox, RemovePodSandbox,
//! PodSandboxStatus and ListPodSandbox.

pub mod files;
pub mod ns;
pub mod pid;
mod port_forward;
mod recover;
mod remove;
mod run;
pub mod shm;
mod status;
mod stop;

use std::path::PathBuf;

use k8s_cri::v1::{NamespaceMode, PodSandboxConfig, PodSandboxState};

use crate::cni::Attached;

/// A pod sandbox as persisted in `<root>/sandboxes/<id>.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Sandbox {
    /// Sandbox ID (64 hex characters).
    pub id: String,
    /// The CRI config it was created with.
    pub config: PodSandboxConfig,
    /// CRI `runtime_handler` (RuntimeClass handler), reported back as given.
    pub runtime_handler: String,
    /// Ready from the end of RunPodSandbox until StopPodSandbox.
    pub ready: bool,
    /// Set while RunPodSandbox sets the sandbox up: the record is saved before the first
    /// side effect and after each step (as containerd saves a sandbox in its `Unknown`
    /// state first), so a runtime killed midway finds what it must undo
    /// (cleaned up when the runtime starts again).
    #[serde(default)]
    pub creating: bool,
    /// Creation time, ns since the epoch.
    pub created_at: i64,
    /// Namespaces pinned under `<state>/ns/<id>/` (those not shared with the node).
    pub pinned: Vec<ns::Kind>,
    /// The CNI attachment, present from a successful ADD until DEL.
    pub network: Option<Attached>,
    /// Parent cgroup of the pod's containers (cgroupfs path).
    pub cgroup_parent: String,
    /// Whether [`Sandbox::cgroup_parent`] was made up by the runtime (`/skiff-pod-<id>`)
    /// and so is removed with the sandbox.
    pub owns_cgroup: bool,
    /// The process holding the pod's PID namespace (pid mode `POD` only, see [`pid`]),
    /// until the sandbox is stopped.
    #[serde(default)]
    pub pid_holder: Option<crate::process::ProcessId>,
}

impl Sandbox {
    /// The CRI state.
    pub fn state(&self) -> PodSandboxState {
        if self.ready && !self.creating {
            PodSandboxState::SandboxReady
        } else {
            PodSandboxState::SandboxNotready
        }
    }

    /// `name_namespace_uid_attempt`, unique among live sandboxes (containerd's sandbox name).
    pub fn name(&self) -> String {
        reserved_name(&self.config)
    }

    /// The requested namespace mode for network, PID and IPC (POD when unset).
    pub fn namespace_modes(&self) -> (NamespaceMode, NamespaceMode, NamespaceMode) {
        namespace_modes(&self.config)
    }

    /// The pod's primary IP, if attached.
    pub fn ip(&self) -> Option<&str> {
        self.network
            .as_ref()
            .and_then(|n| n.ips.first())
            .map(String::as_str)
    }
}

/// See [`Sandbox::name`].
pub fn reserved_name(config: &PodSandboxConfig) -> String {
    let meta = config.metadata.clone().unwrap_or_default();
    format!(
        "{}_{}_{}_{}",
        meta.name, meta.namespace, meta.uid, meta.attempt
    )
}

/// See [`Sandbox::namespace_modes`].
pub fn namespace_modes(config: &PodSandboxConfig) -> (NamespaceMode, NamespaceMode, NamespaceMode) {
    let opts = config
        .linux
        .as_ref()
        .and_then(|l| l.security_context.as_ref())
        .and_then(|sc| sc.namespace_options.clone())
        .unwrap_or_default();
    let mode = |v: i32| NamespaceMode::try_from(v).unwrap_or(NamespaceMode::Pod);
    (mode(opts.network), mode(opts.pid), mode(opts.ipc))
}

/// Paths of one sandbox's volatile files.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `<state>/sandboxes/<id>`: hostname, resolv.conf, hosts.
    pub files: PathBuf,
    /// `<state>/ns/<id>`: namespace pins.
    pub ns: PathBuf,
}
