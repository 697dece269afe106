//! A running `skiff apiserver` on a free loopback port, with a temporary data directory,
//! on SQLite or on an etcd, for end-to-end tests of the Kubernetes API.

use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use tempfile::TempDir;

use crate::daemon::Daemon;
use crate::sys;

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(10);
const START_ATTEMPTS: usize = 3;
/// Where the machine's kubectl builds live, one per minor version (`kubectl.1.27` to
/// `kubectl.1.33`).
const KUBECTL_DIR: &str = "/usr/lib/google-cloud-sdk/bin";

/// The store behind the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// The embedded SQLite database in the data directory (the default).
    Sqlite,
    /// An etcd v3 cluster, given as `--etcd-servers` (comma-separated client URLs, such
    /// as [`crate::Etcd::endpoint`]).
    Etcd(String),
}

impl Backend {
    /// `sqlite` or `etcd`, for labels.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Etcd(_) => "etcd",
        }
    }
}

/// How to run the API server.
#[derive(Debug, Clone)]
pub struct ApiServerOptions {
    /// The `skiff` binary (in tests: `env!("CARGO_BIN_EXE_skiff")`).
    pub skiff_bin: PathBuf,
    /// The store.
    pub backend: Backend,
    /// Flags appended after the ones [`ApiServer`] sets.
    pub extra_args: Vec<String>,
}

impl ApiServerOptions {
    /// Options for `skiff_bin` on `backend`, without extra flags.
    pub fn new(skiff_bin: impl Into<PathBuf>, backend: Backend) -> ApiServerOptions {
        ApiServerOptions {
            skiff_bin: skiff_bin.into(),
            backend,
            extra_args: Vec::new(),
        }
    }
}

/// A `skiff apiserver` process for end-to-end tests:
/// `skiff apiserver --data-dir <dir>/data --secure-port <free port> --bind-address 127.0.0.1`
/// (plus `--etcd-servers` on [`Backend::Etcd`]), with `RUST_LOG=info` output in
/// `<dir>/apiserver.log`, where `<dir>` is a fresh `/tmp/skiff-apiserver-*` directory.
///
/// The server writes `<dir>/data/admin.kubeconfig` on its first start; [`ApiServer::start`]
/// returns once `GET /readyz` with that kubeconfig's client certificate answers 200.
/// [`ApiServer::kubectl`] runs the machine's kubectl builds against it (discovery cache in
/// `<dir>/kubectl-cache`), [`ApiServer::client`] gives a kube-rs client.
///
/// Dropping it kills the server (SIGKILL) and removes the directory; the server also gets
/// SIGKILL if the test process dies first. An etcd behind it is not touched.
pub struct ApiServer {
    opts: ApiServerOptions,
    port: u16,
    daemon: Option<Daemon>,
    dir: TempDir,
}

impl ApiServer {
    /// Starts the server on a free port of 127.0.0.1 and waits (up to 60 s) until it is
    /// ready. A port lost to a race (the server exits before it is ready) is retried with
    /// another port, three times in all.
    ///
    /// Errors: the binary cannot be spawned, or the server exits early or is not ready in
    /// time (the message includes the tail of its log).
    pub fn start(opts: ApiServerOptions) -> anyhow::Result<ApiServer> {
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::Builder::new()
                .prefix("skiff-apiserver-")
                .tempdir()
                .context("creating the API server's directory")?;
            let mut server = ApiServer {
                opts: opts.clone(),
                port: sys::free_port()?,
                daemon: None,
                dir,
            };
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("the API server did not start")))
    }

    /// The store the server runs on.
    pub fn backend(&self) -> &Backend {
        &self.opts.backend
    }

    /// The `--secure-port` on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The `--data-dir`.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `<data-dir>/admin.kubeconfig`, written by the server: the cluster's CA and an admin
    /// client certificate.
    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir().join("admin.kubeconfig")
    }

    /// The PID of the running server, if any.
    pub fn pid(&self) -> Option<u32> {
        self.daemon.as_ref().map(Daemon::pid)
    }

    /// The server's whole log (lossy UTF-8; empty if unreadable).
    pub fn log(&self) -> String {
        sys::read_lossy(&self.log_path())
    }

    /// The last 60 lines of the server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        sys::tail(&self.log_path(), sys::LOG_TAIL_LINES)
    }

    /// A kube-rs client for the server, authenticated by the admin kubeconfig.
    ///
    /// Errors: the kubeconfig cannot be read or is not usable by kube-rs.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        client_for(&self.kubeconfig()).await
    }

    /// A `kubectl` command of the machine's build `1.<minor>` (27 to 33) against the
    /// server: `--kubeconfig` the admin kubeconfig and `--cache-dir` inside the server's
    /// directory, so that discovery is never shared between servers. The caller adds
    /// arguments, environment, stdin and runs it.
    pub fn kubectl_command(&self, minor: u32) -> Command {
        let mut cmd = Command::new(kubectl_path(minor));
        cmd.arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(self.dir.path().join("kubectl-cache"))
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `kubectl.1.<minor> args...` against the server (as
    /// [`ApiServer::kubectl_command`]) and returns its output. A kubectl that cannot be
    /// spawned gives exit status 127 with the reason on stderr.
    pub fn kubectl(&self, minor: u32, args: &[&str]) -> Output {
        let mut cmd = self.kubectl_command(minor);
        cmd.args(args);
        cmd.output().unwrap_or_else(|e| Output {
            status: ExitStatus::from_raw(127 << 8),
            stdout: Vec::new(),
            stderr: format!("cannot run {}: {e}", kubectl_path(minor).display()).into_bytes(),
        })
    }

    /// Kills the server with SIGKILL and reaps it.
    pub fn kill9(&mut self) -> anyhow::Result<()> {
        match self.daemon.take() {
            Some(daemon) => Ok(daemon.kill9()?),
            None => Ok(()),
        }
    }

    /// Stops the server with SIGTERM (SIGKILL after 10 s) and returns its exit status
    /// (`None` if it was not running).
    pub fn stop(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        match self.daemon.take() {
            Some(daemon) => Ok(Some(daemon.stop(STOP_GRACE)?)),
            None => Ok(None),
        }
    }

    /// Starts the server again on the same data directory, store and port (stopping it
    /// first if it still runs) and waits until it is ready.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.stop()?;
        self.spawn()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("apiserver.log")
    }

    /// Spawns the server and waits (every 50 ms, up to 60 s) for the kubeconfig, then for
    /// `GET /readyz` answering 200.
    fn spawn(&mut self) -> anyhow::Result<()> {
        let mut cmd = Command::new(&self.opts.skiff_bin);
        cmd.arg("apiserver")
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--secure-port")
            .arg(self.port.to_string())
            .arg("--bind-address")
            .arg("127.0.0.1");
        if let Backend::Etcd(servers) = &self.opts.backend {
            cmd.arg("--etcd-servers").arg(servers);
        }
        cmd.args(&self.opts.extra_args).env("RUST_LOG", "info");
        let kubeconfig = self.kubeconfig();
        let ready = || {
            if !kubeconfig.exists() {
                bail!("no admin.kubeconfig yet");
            }
            let kubeconfig = kubeconfig.clone();
            block_on(async move { readyz(&kubeconfig).await })
        };
        let name = format!("skiff apiserver on port {}", self.port);
        self.daemon = Some(Daemon::start(
            name,
            cmd,
            &self.log_path(),
            READY_TIMEOUT,
            ready,
        )?);
        Ok(())
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}

/// The machine's kubectl build `1.<minor>`: `/usr/lib/google-cloud-sdk/bin/kubectl.1.<minor>`.
pub fn kubectl_path(minor: u32) -> PathBuf {
    Path::new(KUBECTL_DIR).join(format!("kubectl.1.{minor}"))
}

/// A kube-rs client from a kubeconfig file (its current context).
///
/// Errors: the file cannot be read or parsed, or kube-rs cannot build a client from it.
pub async fn client_for(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading {}", kubeconfig.display()))?;
    // Tests see the API server's 429s and 503s as they are (kube would retry them for
    // minutes).
    config.default_retry = false;
    kube::Client::try_from(config).context("building a kube client")
}

/// `GET /readyz` must answer 200.
async fn readyz(kubeconfig: &Path) -> anyhow::Result<()> {
    let client = client_for(kubeconfig).await?;
    let request = http::Request::get("/readyz").body(Vec::new())?;
    client
        .request_text(request)
        .await
        .context("GET /readyz")
        .map(drop)
}

/// Runs `future` to completion on a current-thread tokio runtime of its own, on a scoped
/// thread: callable from plain threads and from inside another runtime alike.
fn block_on<F>(future: F) -> anyhow::Result<()>
where
    F: Future<Output = anyhow::Result<()>> + Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(future)
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the readiness probe thread panicked")))
    })
}
