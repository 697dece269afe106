//! A running `skiff kubelet` with private directories, CNI network and read-only port,
//! on its embedded runtime or on a private containerd 1.6.

pub(crate) mod cleanup;
pub(crate) mod cni;
mod containerd;
pub(crate) mod leftovers;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::daemon::Daemon;
use crate::sys;

const HEALTHZ_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);
const STOP_GRACE: Duration = Duration::from_secs(10);
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
const LOG_TAIL_LINES: usize = 80;
/// Hard eviction thresholds of test kubelets (see [`NodeOptions::extra_args`]).
const TEST_EVICTION_HARD: &str = "memory.available<1Mi,nodefs.available<1%,imagefs.available<1%";

/// Which CRI runtime the kubelet drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeRuntime {
    /// The runtime embedded in `skiff kubelet`.
    Embedded,
    /// Debian's containerd 1.6, started by the [`Node`] on its own directories and
    /// given to the kubelet as `--container-runtime-endpoint`. `registry` (`IP:PORT`)
    /// is reached over plain HTTP and receives the pause stand-in ([`crate::pause`]),
    /// containerd's `sandbox_image`.
    Containerd {
        /// The test registry, `IP:PORT`.
        registry: String,
    },
}

/// How to run the kubelet.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// The `skiff` binary (in tests: `env!("CARGO_BIN_EXE_skiff")`).
    pub skiff_bin: PathBuf,
    /// Flags appended after the ones [`Node`] sets. Without `--eviction-hard` or
    /// `--config` among them, the kubelet gets thresholds of 1% disk and 1 MiB memory, so
    /// that a nearly full CI disk does not evict test pods.
    pub extra_args: Vec<String>,
    /// The runtime under the kubelet.
    pub runtime: NodeRuntime,
}

/// A `skiff kubelet` process on its embedded runtime or on containerd, for end-to-end
/// tests.
///
/// Layout of [`Node::dir`] (`/tmp/sk-<8 hex>`, short for unix socket paths):
/// `manifests/` (`--pod-manifest-path`), `kubelet/` (`--root-dir`), `rt/` and `st/`
/// (the runtime's root and state: `--runtime-root` / `--runtime-state` with the CRI
/// socket `st/skiff.sock` for the embedded runtime; containerd's `root` / `state` with
/// runc's state in `st/runc`), `cni/` (`--cni-conf-dir` or containerd's CNI `conf_dir`,
/// holding `10-test.conflist`: bridge + host-local on a random /24 of 10.240.0.0/12 +
/// portmap), `ipam/` (host-local `dataDir`), `kubelet.log` (stdout and stderr,
/// `RUST_LOG=info`); with containerd also `containerd.toml`, `certs.d/`,
/// `containerd.sock` and `containerd.log`.
///
/// The kubelet runs with `--cgroup-root` [`Node::cgroup_root`].
///
/// Dropping it removes all manifests, waits (up to 60 s) for `/pods` to be empty, stops
/// the kubelet (and containerd, after removing its remaining pods through the CRI), then
/// force-cleans whatever is left (runc containers, processes, mounts, iptables rules, the
/// bridge, pod cgroups, the cgroup root and log dirs) and removes the directory.
pub struct Node {
    opts: NodeOptions,
    containerd: Option<containerd::Containerd>,
    id: String,
    dir: PathBuf,
    port: u16,
    main_port: u16,
    pod_cidr: String,
    kubelet: Option<Daemon>,
    /// `skiff server`'s API server port, when the node is a whole server
    /// ([`Node::start_server`]); None for `skiff kubelet`.
    server_port: Option<u16>,
    /// UIDs of every pod seen in `/pods`, for leftover checks and cleanup.
    seen_uids: Mutex<BTreeSet<String>>,
}

impl Node {
    /// Creates the directories and CNI config, starts containerd if asked (waiting until
    /// it answers), spawns the kubelet and waits (up to 60 s) for `GET /healthz` on the
    /// read-only port.
    ///
    /// Errors: containerd or the kubelet cannot be started, or the kubelet exits or is
    /// not healthy in time (the message includes the tail of its log). Everything is
    /// removed on error.
    pub fn start(opts: NodeOptions) -> anyhow::Result<Node> {
        Node::start_as(opts, false)
    }

    /// [`Node::start`] with `skiff server` instead of `skiff kubelet`: the same kubelet
    /// flags and layout, plus the API server on SQLite in `<dir>/server` on a free port of
    /// 127.0.0.1 ([`Node::kubeconfig`]), the scheduler and the controller manager (their
    /// endpoints off). The test deletes its API objects before the node is dropped.
    pub fn start_server(opts: NodeOptions) -> anyhow::Result<Node> {
        Node::start_as(opts, true)
    }

    fn start_as(opts: NodeOptions, server: bool) -> anyhow::Result<Node> {
        let (id, dir) = create_unique_dir("sk")?;
        let mut node = Node {
            opts,
            containerd: None,
            dir,
            port: 0,
            main_port: 0,
            pod_cidr: String::new(),
            kubelet: None,
            server_port: None,
            seen_uids: Mutex::new(BTreeSet::new()),
            id,
        };
        // From here on, Drop cleans up if anything fails.
        for sub in ["manifests", "kubelet", "rt", "st", "cni", "ipam"] {
            std::fs::create_dir(node.dir.join(sub))?;
        }
        node.pod_cidr = cni::free_subnet()?;
        cni::write_conflist(
            &node.dir.join("cni"),
            &node.network_name(),
            &node.bridge(),
            &node.pod_cidr,
            &node.dir.join("ipam"),
        )?;
        node.port = sys::free_port()?;
        node.main_port = sys::free_port()?;
        if server {
            node.server_port = Some(sys::free_port()?);
        }
        if let NodeRuntime::Containerd { registry } = &node.opts.runtime {
            node.containerd = Some(containerd::Containerd::start(&node.dir, registry)?);
        }
        node.spawn()?;
        Ok(node)
    }

    /// The admin kubeconfig of a [`Node::start_server`] node.
    pub fn kubeconfig(&self) -> Option<PathBuf> {
        self.server_port
            .map(|_| self.dir.join("server/admin.kubeconfig"))
    }

    /// The API server's port of a [`Node::start_server`] node (on 127.0.0.1).
    pub fn server_port(&self) -> Option<u16> {
        self.server_port
    }

    /// The node name (`--hostname-override`): `node-<8 hex>`.
    pub fn node_name(&self) -> String {
        format!("node-{}", self.id)
    }

    /// The node's directory, `/tmp/sk-<8 hex>` (layout in the type docs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kubelet's read-only HTTP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The kubelet's HTTPS port (`--port`) on 127.0.0.1; its self-signed certificate is
    /// `<dir>/kubelet/pki/kubelet.crt`.
    pub fn main_port(&self) -> u16 {
        self.main_port
    }

    /// The pod subnet of the CNI config, e.g. `10.243.17.0/24`.
    pub fn pod_cidr(&self) -> &str {
        &self.pod_cidr
    }

    /// The kubelet's `--cgroup-root`, `/sk-<8 hex>`: each node's pod cgroups live in their
    /// own tree, so that a kubelet's orphan cleanup never touches another node's pods.
    pub fn cgroup_root(&self) -> String {
        format!("/sk-{}", self.id)
    }

    /// The CNI bridge name, `sk<8 hex>`.
    pub fn bridge(&self) -> String {
        format!("sk{}", self.id)
    }

    /// The CNI network name, `sk-<8 hex>` (it appears in iptables rule comments).
    fn network_name(&self) -> String {
        format!("sk-{}", self.id)
    }

    fn manifest_dir(&self) -> PathBuf {
        self.dir.join("manifests")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("kubelet.log")
    }

    /// Writes a static pod manifest atomically (a `.`-prefixed temporary file renamed
    /// into place, so the file watcher never reads half a file).
    pub fn write_manifest(&self, file_name: &str, contents: &str) -> anyhow::Result<()> {
        let tmp = self.manifest_dir().join(format!(".{file_name}.tmp"));
        std::fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, self.manifest_dir().join(file_name))
            .with_context(|| format!("renaming {} into place", tmp.display()))
    }

    /// Removes a manifest file; an absent file is not an error.
    pub fn remove_manifest(&self, file_name: &str) -> anyhow::Result<()> {
        match std::fs::remove_file(self.manifest_dir().join(file_name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing manifest {file_name}"))
            }
            _ => Ok(()),
        }
    }

    /// `GET /pods` on the read-only port: a `v1.PodList` as JSON (`{"items": [Pod..]}`).
    pub fn pods(&self) -> anyhow::Result<Value> {
        let url = format!("http://127.0.0.1:{}/pods", self.port);
        let mut response = sys::http_agent().get(&url).call()?;
        let body = response.body_mut().read_to_vec()?;
        if response.status() != 200 {
            bail!(
                "GET /pods: HTTP {}: {}",
                response.status(),
                String::from_utf8_lossy(&body)
            );
        }
        let list: Value = serde_json::from_slice(&body).context("GET /pods: bad JSON")?;
        if let Ok(mut seen) = self.seen_uids.lock() {
            for pod in items(&list) {
                if let Some(uid) = pod["metadata"]["uid"].as_str() {
                    seen.insert(uid.to_string());
                }
            }
        }
        Ok(list)
    }

    /// The pod named `<name>-<node name>` (a static pod's mirror name) from `/pods`, if
    /// present (`None` also when `/pods` cannot be fetched).
    pub fn pod(&self, name: &str) -> Option<Value> {
        let full = format!("{name}-{}", self.node_name());
        let list = self.pods().ok()?;
        items(&list)
            .iter()
            .find(|p| p["metadata"]["name"].as_str() == Some(full.as_str()))
            .cloned()
    }

    /// Polls `/pods` every 200 ms until `ready(&pod_list)` is true and returns that list.
    ///
    /// Errors after `timeout` with `desc`, the last `/pods` JSON (or fetch error) and the
    /// tail of `kubelet.log`.
    pub fn wait_for(
        &self,
        desc: &str,
        timeout: Duration,
        mut ready: impl FnMut(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.pods() {
                Ok(list) if ready(&list) => return Ok(list),
                Ok(list) => serde_json::to_string_pretty(&list).unwrap_or_default(),
                Err(e) => format!("error: {e:#}"),
            };
            if Instant::now() >= deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {desc}\n--- last /pods ---\n{last}\n--- kubelet.log (tail) ---\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// The CRI socket of the runtime (`st/skiff.sock` or `containerd.sock`), for CRI
    /// clients such as crictl.
    pub fn cri_socket(&self) -> PathBuf {
        match &self.containerd {
            Some(containerd) => containerd.socket().to_path_buf(),
            None => self.dir.join("st/skiff.sock"),
        }
    }

    /// The PID of containerd ([`NodeRuntime::Containerd`]); `None` for the embedded
    /// runtime, which lives in the kubelet process.
    pub fn runtime_pid(&self) -> Option<u32> {
        self.containerd.as_ref().map(containerd::Containerd::pid)
    }

    /// The PID of the running kubelet, if any.
    pub fn pid(&self) -> Option<u32> {
        self.kubelet.as_ref().map(Daemon::pid)
    }

    /// Kills the kubelet with SIGKILL (pods and shims keep running).
    pub fn kill9(&mut self) -> anyhow::Result<()> {
        match self.kubelet.take() {
            Some(kubelet) => Ok(kubelet.kill9()?),
            None => Ok(()),
        }
    }

    /// Stops the kubelet with SIGTERM (a graceful exit that leaves pods running; SIGKILL
    /// after 10 s) and returns its exit status (`None` if it was not running).
    pub fn stop(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        match self.kubelet.take() {
            Some(kubelet) => Ok(Some(kubelet.stop(STOP_GRACE)?)),
            None => Ok(None),
        }
    }

    /// Starts the kubelet again with the same directories and port (stopping it first
    /// if it is still running) and waits for `/healthz`.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.stop()?;
        self.spawn()
    }

    /// The whole `kubelet.log` (lossy UTF-8; empty if unreadable).
    pub fn log(&self) -> String {
        sys::read_lossy(&self.log_path())
    }

    /// `(pid, command line)` of every process whose command line mentions
    /// [`Node::dir`]: the kubelet, containerd and the per-container shims, while pods
    /// run.
    pub fn processes(&self) -> Vec<(u32, String)> {
        leftovers::processes_mentioning(&self.dir)
    }

    /// Everything the node's pods left behind, one human-readable line each: mounts
    /// under [`Node::dir`] (except the kubelet root's own rshared bind mount, which the
    /// kubelet keeps as upstream's does), host-local IP reservations, veths on the bridge,
    /// processes whose command line mentions the directory (other than the kubelet and
    /// containerd), iptables rules the CNI network's pods left (not the node's masquerade rule), and `pod<uid>` cgroups of pods this
    /// node ran.
    /// Empty means clean.
    pub fn leftovers(&self) -> Vec<String> {
        let mut found = Vec::new();
        let kubelet_root = self.dir.join("kubelet");
        found.extend(
            leftovers::mounts_under(&self.dir)
                .into_iter()
                .filter(|m| Path::new(m) != kubelet_root)
                .map(|m| format!("mount {m}")),
        );
        found.extend(leftovers::ip_reservations(&self.dir.join("ipam")));
        found.extend(leftovers::veths(&self.bridge()));
        let skip = [
            self.pid(),
            self.containerd.as_ref().map(containerd::Containerd::pid),
            Some(std::process::id()),
        ];
        found.extend(
            self.processes()
                .into_iter()
                .filter(|(pid, _)| !skip.contains(&Some(*pid)))
                .map(|(pid, cmd)| format!("process {pid}: {cmd}")),
        );
        found.extend(
            leftovers::pod_iptables_rules(&self.network_name())
                .into_iter()
                .map(|(t, r)| format!("iptables -t {t} {r}")),
        );
        found.extend(
            leftovers::pod_cgroups(&self.known_uids())
                .into_iter()
                .map(|p| format!("cgroup {}", p.display())),
        );
        found
    }

    /// Polls [`Node::leftovers`] every 200 ms until it is empty. Pod teardown finishes
    /// after the pod leaves `/pods` (as upstream, where the pod worker terminates it in
    /// the background), so tests check for leftovers with this, not once.
    ///
    /// Errors after `timeout` with the remaining leftovers and the tail of `kubelet.log`.
    pub fn wait_clean(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.leftovers();
            if found.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "still not clean after {timeout:?}:\n  {}\n--- kubelet.log (tail) ---\n{}",
                    found.join("\n  "),
                    self.log_tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// UIDs seen in `/pods` plus the pod directories under the kubelet root.
    fn known_uids(&self) -> BTreeSet<String> {
        let mut uids = self.seen_uids.lock().map(|s| s.clone()).unwrap_or_default();
        if let Ok(entries) = std::fs::read_dir(self.dir.join("kubelet/pods")) {
            uids.extend(
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned()),
            );
        }
        uids
    }

    fn log_tail(&self) -> String {
        sys::tail(&self.log_path(), LOG_TAIL_LINES)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let dir = |sub: &str| self.dir.join(sub);
        let mut cmd = Command::new(&self.opts.skiff_bin);
        match self.server_port {
            Some(port) => {
                cmd.arg("server")
                    .arg("--data-dir")
                    .arg(dir("server"))
                    .arg("--secure-port")
                    .arg(port.to_string())
                    .args(["--bind-address", "127.0.0.1"])
                    .args(["--scheduler-secure-port", "0"])
                    .args(["--controller-manager-secure-port", "0"]);
            }
            None => {
                cmd.arg("kubelet");
            }
        }
        cmd.arg("--pod-manifest-path")
            .arg(dir("manifests"))
            .arg("--root-dir")
            .arg(dir("kubelet"))
            .arg("--read-only-port")
            .arg(self.port.to_string())
            .arg("--port")
            .arg(self.main_port.to_string())
            .arg("--hostname-override")
            .arg(self.node_name())
            .arg("--file-check-frequency")
            .arg("1s")
            .arg("--cgroup-root")
            .arg(self.cgroup_root());
        match &self.containerd {
            Some(containerd) => {
                cmd.arg("--container-runtime-endpoint")
                    .arg(containerd.endpoint());
            }
            None => {
                cmd.arg("--runtime-root")
                    .arg(dir("rt"))
                    .arg("--runtime-state")
                    .arg(dir("st"))
                    .arg("--cni-conf-dir")
                    .arg(dir("cni"))
                    .arg("--pod-cidr")
                    .arg(&self.pod_cidr);
            }
        }
        // The host's disk fill level must not evict test pods: unless the test sets its own
        // thresholds, only an almost full disk or memory counts as pressure.
        if !self
            .opts
            .extra_args
            .iter()
            .any(|a| a.starts_with("--eviction-hard") || a == "--config")
        {
            cmd.arg(format!("--eviction-hard={TEST_EVICTION_HARD}"));
        }
        // `SKIFF_NODE_RUST_LOG` overrides the filter, e.g. `info,skiff::cri=trace` to log
        // every CRI call with its duration.
        let filter = std::env::var("SKIFF_NODE_RUST_LOG").unwrap_or_else(|_| "info".into());
        cmd.args(&self.opts.extra_args).env("RUST_LOG", filter);
        let agent = sys::http_agent();
        let url = format!("http://127.0.0.1:{}/healthz", self.port);
        let healthy = || {
            let status = agent.get(&url).call()?.status();
            if status != 200 {
                bail!("GET {url} answered {status}");
            }
            Ok(())
        };
        self.kubelet = Some(Daemon::start(
            "kubelet",
            cmd,
            &self.log_path(),
            HEALTHZ_TIMEOUT,
            healthy,
        )?);
        Ok(())
    }

    /// Removes every manifest and waits for `/pods` to be empty (only while the kubelet
    /// runs).
    fn drain(&mut self) {
        if let Ok(entries) = std::fs::read_dir(self.manifest_dir()) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let running = self.kubelet.as_mut().is_some_and(Daemon::is_running);
        if running {
            let _ = self.wait_for("all pods to be gone", DRAIN_TIMEOUT, |list| {
                items(list).is_empty()
            });
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.drain();
        let _ = self.stop();
        if let Some(containerd) = self.containerd.take() {
            containerd.stop();
        }
        let uids = self.known_uids();
        cleanup::force(
            &self.dir,
            &self.network_name(),
            &self.bridge(),
            &uids,
            Some(&self.cgroup_root()),
        );
    }
}

/// The `items` of a PodList (empty if absent).
fn items(list: &Value) -> &[Value] {
    list["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Creates `/tmp/<prefix>-<8 hex>` and returns the hex id and the path.
pub(crate) fn create_unique_dir(prefix: &str) -> anyhow::Result<(String, PathBuf)> {
    for _ in 0..16 {
        let id: String = sys::random_bytes::<4>()?
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let dir = PathBuf::from(format!("/tmp/{prefix}-{id}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok((id, dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!("could not create a unique /tmp/{prefix}-* directory")
}
