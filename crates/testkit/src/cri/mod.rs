//! The CRI integration-test harness: the same test case runs against Skiff's runtime
//! (`skiff runtime`) and against Debian's containerd 1.6 CRI plugin, so the tests are
//! about the CRI standard rather than about Skiff.
//!
//! [`CriRuntime::start`] starts one runtime of a [`Flavor`] with everything private to it:
//! a directory `/tmp/skc-<8 hex>` (see [`CriRuntime::dir`]), a CNI bridge `skc<8 hex>` on a
//! free /24 of 10.240.0.0/12 (bridge + host-local + portmap), a pod namespace `cri-<8
//! hex>`. Tests therefore run in parallel. Both flavors pull from one local registry per
//! test process, holding the busybox test image ([`CriRuntime::busybox`]) and, for
//! containerd, a pause stand-in ([`crate::pause`]).
//!
//! Dropping a [`CriRuntime`] stops and removes its pods through the CRI (if the runtime
//! runs), stops the runtime, then removes by force whatever is left: runc containers,
//! shims and other processes mentioning the directory, iptables rules of the network,
//! mounts, the bridge, pod cgroups, and the directory.
//!
//! # Writing a case
//!
//! In `crates/skiff/tests/cri_<area>.rs`, write `async fn my_case(rt: &CriRuntime) ->
//! anyhow::Result<()>` using [`CriRuntime::runtime_client`] / [`CriRuntime::image_client`]
//! and the config helpers, then list it in `common::cri_cases! { my_case, ... }`, which
//! makes the tests `my_case::skiff` and `my_case::containerd`. A case that hits a
//! documented containerd 1.6 bug or gap is listed as `my_case => skiff_only("reason")`:
//! its containerd test is generated `#[ignore = "reason"]`, so `cargo test` prints it as
//! ignored with the reason. Assert with `anyhow::ensure!` or `assert!`; a failing case
//! panics with the tail of the runtime's log. Cases must not depend on the flavor unless
//! the CRI leaves a behaviour open (then branch on [`CriRuntime::flavor`] and say why).
//!
//! Startup takes 60–80 ms for Skiff and 110–170 ms for containerd (debug build, 2
//! shared cores; figures in `crates/skiff/tests/common/cri.rs`), so every test gets its
//! own runtime.

mod client;
pub(crate) mod containerd;
mod shared;
mod skiff;
pub(crate) mod teardown;

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::{
    ContainerConfig, ContainerMetadata, CreateContainerRequest, ImageSpec, LinuxPodSandboxConfig,
    PodSandboxConfig, PodSandboxMetadata, PullImageRequest, RunPodSandboxRequest,
    StartContainerRequest,
};
use tonic::transport::Channel;

use crate::node::{cni, leftovers};
use crate::{spawn, sys};

pub use client::connect;
pub use skiff::{GATED_HANDLER, set_skiff_binary};

/// Where both flavors find the CNI plugins (Debian's containernetworking-plugins).
const CNI_BIN_DIR: &str = "/usr/lib/cni";
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);
const LOG_TAIL_LINES: usize = 60;

/// Which CRI runtime a [`CriRuntime`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// `skiff runtime` (the binary set with [`set_skiff_binary`] or `$SKIFF_BIN`).
    Skiff,
    /// Debian's `/usr/bin/containerd` 1.6 with its CRI plugin.
    Containerd,
}

impl std::fmt::Display for Flavor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Flavor::Skiff => "skiff",
            Flavor::Containerd => "containerd",
        })
    }
}

/// A running CRI runtime with private directories, network and namespace (module docs).
///
/// Layout of [`CriRuntime::dir`]: `rt/` (root), `st/` (state; runc's state in
/// `st/runc`), `cni/` (the conflist), `ipam/` (host-local `dataDir`), `logs/` (pod log
/// directories), `runtime.log` (the runtime's stdout and stderr); for Skiff `skiff.toml`
/// (the socket is `st/skiff.sock`), for containerd `containerd.toml`, `certs.d/` and the
/// socket `containerd.sock`.
pub struct CriRuntime {
    flavor: Flavor,
    id: String,
    dir: PathBuf,
    subnet: String,
    shared: &'static shared::Shared,
    process: Mutex<Option<Child>>,
    channel: Mutex<Option<Channel>>,
    /// UIDs handed out by [`CriRuntime::sandbox_config`], for leftovers and cleanup.
    uids: Mutex<BTreeSet<String>>,
}

impl CriRuntime {
    /// Starts a runtime of `flavor` and waits (up to 60 s) until Version answers on its
    /// socket. Starts the shared registry first if this is the process's first runtime.
    ///
    /// Errors: the registry, directories or config cannot be made, the binary cannot be
    /// spawned, or it exits or does not answer in time (with the tail of its log).
    /// Everything made so far is removed on error.
    pub async fn start(flavor: Flavor) -> anyhow::Result<CriRuntime> {
        let shared = shared::get().await?;
        let (id, dir) = crate::node::create_unique_dir("skc")?;
        let rt = CriRuntime {
            flavor,
            id,
            dir,
            subnet: String::new(),
            shared,
            process: Mutex::new(None),
            channel: Mutex::new(None),
            uids: Mutex::new(BTreeSet::new()),
        };
        // From here on, Drop cleans up if anything fails.
        let rt = rt.prepare()?;
        rt.spawn().await?;
        Ok(rt)
    }

    fn prepare(mut self) -> anyhow::Result<CriRuntime> {
        for sub in ["rt", "st", "cni", "ipam", "logs"] {
            std::fs::create_dir(self.dir.join(sub))?;
        }
        self.subnet = cni::free_subnet()?;
        cni::write_conflist(
            &self.dir.join("cni"),
            &self.network_name(),
            &self.bridge(),
            &self.subnet,
            &self.dir.join("ipam"),
        )?;
        Ok(self)
    }

    /// Which runtime this is.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The runtime's directory, `/tmp/skc-<8 hex>` (layout in the type docs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CRI socket.
    pub fn socket(&self) -> PathBuf {
        match self.flavor {
            Flavor::Skiff => skiff::socket(&self.dir),
            Flavor::Containerd => containerd::socket(&self.dir),
        }
    }

    /// The pod subnet of the CNI config (`10.243.17.0/24`).
    pub fn pod_cidr(&self) -> &str {
        &self.subnet
    }

    /// The CNI bridge, `skc<8 hex>`.
    pub fn bridge(&self) -> String {
        format!("skc{}", self.id)
    }

    /// The CNI network name, `skc-<8 hex>` (in iptables rule comments).
    pub fn network_name(&self) -> String {
        format!("skc-{}", self.id)
    }

    /// The pod namespace of [`CriRuntime::sandbox_config`], `cri-<8 hex>`.
    pub fn namespace(&self) -> String {
        format!("cri-{}", self.id)
    }

    /// The runtime process's PID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process
            .lock()
            .ok()
            .and_then(|p| p.as_ref().map(Child::id))
    }

    /// A RuntimeService client (cheap; clones share one connection).
    pub fn runtime_client(&self) -> RuntimeServiceClient<Channel> {
        RuntimeServiceClient::new(self.channel())
    }

    /// An ImageService client (cheap; clones share one connection).
    pub fn image_client(&self) -> ImageServiceClient<Channel> {
        ImageServiceClient::new(self.channel())
    }

    fn channel(&self) -> Channel {
        // Set by `spawn` before `start` returns; a lazy channel to the socket otherwise.
        match self.channel.lock().ok().and_then(|c| c.clone()) {
            Some(channel) => channel,
            None => client::lazy_channel(self.socket()),
        }
    }

    /// The busybox test image in the shared registry, `127.0.0.1:PORT/skiff/busybox:test`
    /// (the image of [`crate::busybox`]; its config digest is the image ID runtimes report).
    pub fn busybox(&self) -> String {
        self.shared.busybox.clone()
    }

    /// The shared registry, `127.0.0.1:PORT`; tests may push their own images there.
    pub fn registry_host(&self) -> &str {
        &self.shared.host
    }

    /// PullImage of `image` without credentials; returns the image reference the
    /// runtime reports (the image ID).
    pub async fn pull(&self, image: &str) -> anyhow::Result<String> {
        let response = self
            .image_client()
            .pull_image(PullImageRequest {
                image: Some(image_spec(image)),
                ..Default::default()
            })
            .await
            .with_context(|| format!("PullImage {image}"))?;
        Ok(response.into_inner().image_ref)
    }

    /// A PodSandboxConfig for pod `name`: the same for the same name, different from any
    /// other runtime's. Metadata `name` / uid `<8 hex>-<name>` / namespace
    /// [`CriRuntime::namespace`], attempt 0; hostname `name`; `log_directory`
    /// `<dir>/logs/<ns>_<name>_<uid>` (created here, as the kubelet does);
    /// `cgroup_parent` `/kubepods/besteffort/pod<uid>` (the kubelet's cgroupfs layout,
    /// which both flavors use on v1 and v2 hosts).
    pub fn sandbox_config(&self, name: &str) -> PodSandboxConfig {
        let uid = format!("{}-{name}", self.id);
        let namespace = self.namespace();
        let log_directory = self
            .dir
            .join("logs")
            .join(format!("{namespace}_{name}_{uid}"));
        // A missing directory shows up as the runtime's error when it writes the log.
        let _ = std::fs::create_dir_all(&log_directory);
        if let Ok(mut uids) = self.uids.lock() {
            uids.insert(uid.clone());
        }
        PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: name.to_string(),
                uid: uid.clone(),
                namespace,
                attempt: 0,
            }),
            hostname: name.to_string(),
            log_directory: log_directory.to_string_lossy().into_owned(),
            linux: Some(LinuxPodSandboxConfig {
                cgroup_parent: format!("/kubepods/besteffort/pod{uid}"),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// RunPodSandbox with [`CriRuntime::sandbox_config`]`(name)` and the default handler;
    /// returns the sandbox ID.
    pub async fn run_sandbox(&self, name: &str) -> anyhow::Result<String> {
        let response = self
            .runtime_client()
            .run_pod_sandbox(RunPodSandboxRequest {
                config: Some(self.sandbox_config(name)),
                runtime_handler: String::new(),
            })
            .await
            .with_context(|| format!("RunPodSandbox {name}"))?;
        Ok(response.into_inner().pod_sandbox_id)
    }

    /// A ContainerConfig for container `name` running `image` with CRI `args` (the
    /// image's entrypoint, if any, stays); attempt 0, `log_path` `<name>/0.log` (relative
    /// to the sandbox's `log_directory`, see [`CriRuntime::log_path`]).
    pub fn container_config(
        &self,
        name: &str,
        image: &str,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> ContainerConfig {
        ContainerConfig {
            metadata: Some(ContainerMetadata {
                name: name.to_string(),
                attempt: 0,
            }),
            image: Some(image_spec(image)),
            args: args.into_iter().map(Into::into).collect(),
            log_path: format!("{name}/0.log"),
            ..Default::default()
        }
    }

    /// CreateContainer (in sandbox `sandbox_id` of pod `sandbox_name`, whose config is
    /// [`CriRuntime::sandbox_config`]`(sandbox_name)`) + StartContainer; returns the
    /// container ID.
    pub async fn run_container(
        &self,
        sandbox_id: &str,
        sandbox_name: &str,
        config: ContainerConfig,
    ) -> anyhow::Result<String> {
        let name = config.metadata.as_ref().map(|m| m.name.clone());
        let mut client = self.runtime_client();
        let container_id = client
            .create_container(CreateContainerRequest {
                pod_sandbox_id: sandbox_id.to_string(),
                config: Some(config),
                sandbox_config: Some(self.sandbox_config(sandbox_name)),
            })
            .await
            .with_context(|| format!("CreateContainer {name:?}"))?
            .into_inner()
            .container_id;
        client
            .start_container(StartContainerRequest {
                container_id: container_id.clone(),
            })
            .await
            .with_context(|| format!("StartContainer {name:?} ({container_id})"))?;
        Ok(container_id)
    }

    /// The host path of the CRI log of `container` (attempt 0) in pod `sandbox_name`, as
    /// configured by [`CriRuntime::sandbox_config`] and [`CriRuntime::container_config`].
    pub fn log_path(&self, sandbox_name: &str, container: &str) -> PathBuf {
        PathBuf::from(self.sandbox_config(sandbox_name).log_directory)
            .join(format!("{container}/0.log"))
    }

    /// Kills the runtime process with SIGKILL and reaps it (containers, shims and pause
    /// processes keep running). A no-op when it is not running.
    pub async fn kill9(&self) -> anyhow::Result<()> {
        let child = self.process.lock().ok().and_then(|mut p| p.take());
        if let Some(mut child) = child {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// Stops the runtime gracefully if it runs (SIGTERM, SIGKILL after 10 s), starts it
    /// again on the same directories and waits until it answers.
    pub async fn restart(&self) -> anyhow::Result<()> {
        let child = self.process.lock().ok().and_then(|mut p| p.take());
        if let Some(mut child) = child {
            terminate(&mut child).await?;
        }
        self.spawn().await
    }

    /// The tail (60 lines) of the runtime's log, for failure messages.
    pub fn log_tail(&self) -> String {
        sys::tail(&self.log_file(), LOG_TAIL_LINES)
    }

    /// Everything the pods of this runtime left on the host, one readable line each:
    /// mounts under [`CriRuntime::dir`] (other than the runtime's own namespace-pin
    /// root), host-local IP reservations, veths on the bridge, processes other than the
    /// runtime whose command line mentions the directory (shims), iptables rules the
    /// network's pods left (not the node's masquerade rule, kept while the runtime runs), and container cgroups (with their processes) inside the pod cgroups of
    /// [`CriRuntime::sandbox_config`]. The pod cgroups themselves belong to the caller
    /// (the kubelet's role) and are removed on drop. Empty means clean.
    pub fn leftovers(&self) -> Vec<String> {
        let own_mounts = [self.dir.join("st/ns")];
        let mut found: Vec<String> = leftovers::mounts_under(&self.dir)
            .into_iter()
            .filter(|m| !own_mounts.iter().any(|o| o == Path::new(m)))
            .map(|m| format!("mount {m}"))
            .collect();
        found.extend(leftovers::ip_reservations(&self.dir.join("ipam")));
        found.extend(leftovers::veths(&self.bridge()));
        let skip = [self.pid(), Some(std::process::id())];
        found.extend(
            leftovers::processes_mentioning(&self.dir)
                .into_iter()
                .filter(|(pid, _)| !skip.contains(&Some(*pid)))
                .map(|(pid, cmd)| format!("process {pid}: {cmd}")),
        );
        found.extend(
            leftovers::pod_iptables_rules(&self.network_name())
                .into_iter()
                .map(|(t, r)| format!("iptables -t {t} {r}")),
        );
        found.extend(teardown::container_cgroups(&self.known_uids()));
        found
    }

    /// Polls [`CriRuntime::leftovers`] until it is empty (teardown may finish just after
    /// the RPC returns). Errors after `timeout` with what is left.
    pub async fn wait_clean(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.leftovers();
            if found.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} left behind after {timeout:?}:\n  {}",
                    self.flavor,
                    found.join("\n  ")
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn known_uids(&self) -> BTreeSet<String> {
        self.uids.lock().map(|u| u.clone()).unwrap_or_default()
    }

    fn log_file(&self) -> PathBuf {
        self.dir.join("runtime.log")
    }

    /// Spawns the runtime process and waits until Version answers on its socket.
    async fn spawn(&self) -> anyhow::Result<()> {
        let mut cmd = match self.flavor {
            Flavor::Skiff => skiff::command(&self.dir, &self.subnet)?,
            Flavor::Containerd => {
                containerd::command(&self.dir, &self.shared.host, &self.shared.pause)?
            }
        };
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_file())?;
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = spawn::spawn_tied(cmd).with_context(|| format!("spawning {}", self.flavor))?;
        if let Ok(mut process) = self.process.lock() {
            *process = Some(child);
        }
        let socket = self.socket();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.exited()? {
                bail!(
                    "{} exited with {status}; log (tail):\n{}",
                    self.flavor,
                    self.log_tail()
                );
            }
            let last = match connect(&socket).await {
                Ok(channel) => {
                    if let Ok(mut slot) = self.channel.lock() {
                        *slot = Some(channel);
                    }
                    return Ok(());
                }
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                bail!(
                    "{} not ready after {READY_TIMEOUT:?}: {last:#}; log (tail):\n{}",
                    self.flavor,
                    self.log_tail()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The exit status if the process has exited (and forgets it then).
    fn exited(&self) -> anyhow::Result<Option<std::process::ExitStatus>> {
        let mut process = self
            .process
            .lock()
            .map_err(|_| anyhow::anyhow!("process lock poisoned"))?;
        let status = match process.as_mut() {
            Some(child) => child.try_wait()?,
            None => bail!("{} is not running", self.flavor),
        };
        if status.is_some() {
            *process = None;
        }
        Ok(status)
    }
}

impl Drop for CriRuntime {
    fn drop(&mut self) {
        let running = self.exited().is_ok_and(|s| s.is_none());
        if running {
            teardown::remove_pods(&self.socket());
        }
        if let Some(mut child) = self.process.lock().ok().and_then(|mut p| p.take()) {
            let _ = sys::terminate(&mut child, STOP_GRACE);
        }
        crate::node::cleanup::force(
            &self.dir,
            &self.network_name(),
            &self.bridge(),
            &self.known_uids(),
            None,
        );
    }
}

/// SIGTERM, then SIGKILL after [`STOP_GRACE`], without blocking the async runtime.
async fn terminate(child: &mut Child) -> anyhow::Result<()> {
    sys::signal(child.id(), libc::SIGTERM);
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
    child.kill()?;
    child.wait()?;
    Ok(())
}

/// A path as a TOML basic string (JSON string escaping is valid TOML).
fn toml_string(path: &Path) -> String {
    serde_json::Value::from(path.to_string_lossy()).to_string()
}

fn image_spec(image: &str) -> ImageSpec {
    ImageSpec {
        image: image.to_string(),
        ..Default::default()
    }
}
