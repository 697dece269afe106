//! Containers: OCI bundle generation and the CRI container verbs, one file per verb
//! (create, start, stop, remove, status, exec, streaming exec, attach, reopen-log), runc
//! invocations in [`runc`].

mod attach;
mod create;
mod exec;
mod exec_stream;
mod mounts;
mod refresh;
mod remove;
mod reopen_log;
pub mod resources;
pub(crate) mod root_path;
pub mod runc;
pub mod seccomp;
pub mod security;
pub mod spec;
mod start;
mod status;
mod stop;
mod stream_request;
mod update;
pub mod user;

use std::path::PathBuf;

use k8s_cri::v1::{ContainerConfig, ContainerState};

use crate::process::ProcessId;

/// Exit code reported when the container could not be started (containerd's value).
pub const START_ERROR_EXIT_CODE: i32 = 128;

/// Exit code reported when the container is gone but its exit status could not be
/// recorded because its shim died first (containerd's value for a dead shim's task).
pub const UNKNOWN_EXIT_CODE: i32 = 255;

/// Lifecycle state, persisted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Bundle and rootfs prepared, not started.
    Created,
    /// The shim reported the container started.
    Running,
    /// The container's init exited (or never started).
    Exited,
}

impl State {
    /// The CRI enum value.
    pub fn to_cri(self) -> ContainerState {
        match self {
            State::Created => ContainerState::ContainerCreated,
            State::Running => ContainerState::ContainerRunning,
            State::Exited => ContainerState::ContainerExited,
        }
    }
}

/// A container as persisted in `<root>/containers/<id>.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Container {
    /// Container ID (64 hex characters).
    pub id: String,
    /// The sandbox it belongs to.
    pub sandbox_id: String,
    /// Reserved name, see [`Container::reserved_name`].
    pub name: String,
    /// The CRI config it was created with.
    pub config: ContainerConfig,
    /// Image ID (`sha256:...`) the rootfs was made from.
    pub image_id: String,
    /// The image's first repo tag, or the reference the kubelet asked for.
    pub image_name: String,
    /// Signal sent by StopContainer before SIGKILL (the image's `StopSignal`, else SIGTERM).
    pub stop_signal: String,
    /// Lifecycle state.
    pub state: State,
    /// Times in ns since the epoch; 0 when not reached yet.
    pub created_at: i64,
    /// See [`Container::created_at`].
    pub started_at: i64,
    /// See [`Container::created_at`].
    pub finished_at: i64,
    /// Exit code once exited.
    pub exit_code: i32,
    /// CRI reason once exited: `Completed`, `Error`, `OOMKilled`, `StartError`.
    pub reason: String,
    /// Human readable detail (the start error).
    pub message: String,
    /// The container's init process while running (absent before the start and after the
    /// exit).
    #[serde(default)]
    pub init: Option<ProcessId>,
    /// The shim monitoring the container while running.
    #[serde(default)]
    pub shim: Option<ProcessId>,
    /// Set once the shim was found dead while the container still ran: its output is no
    /// longer logged and its exit status will not be known (warned about once).
    #[serde(default)]
    pub shim_lost: bool,
    /// Absolute CRI log path (sandbox log directory + container log path), or empty.
    pub log_path: PathBuf,
    /// linux.cgroupsPath of the container.
    pub cgroups_path: PathBuf,
    /// The runtime handler of its sandbox (which OCI runtime runs it); empty means the
    /// default handler.
    #[serde(default)]
    pub runtime_handler: String,
    /// Held by an operation that must not overlap another on this container but runs
    /// without the container's state lock (StartContainer while the shim starts it,
    /// RemoveContainer), so that status and list calls are never blocked by it.
    #[serde(skip)]
    pub(crate) busy: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl Container {
    /// `container_sandboxname_attempt`, unique among live containers.
    pub fn reserved_name(sandbox_name: &str, config: &ContainerConfig) -> String {
        let meta = config.metadata.clone().unwrap_or_default();
        format!("{}_{}_{}", meta.name, sandbox_name, meta.attempt)
    }
}
