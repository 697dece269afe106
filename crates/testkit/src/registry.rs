//! A local OCI registry: Debian's `docker-registry` (CNCF distribution 2.8).

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tempfile::TempDir;

use crate::image::Image;
use crate::{push, spawn, sys};

const REGISTRY_BIN: &str = "/usr/bin/docker-registry";
const HTPASSWD_BIN: &str = "/usr/bin/htpasswd";
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const START_ATTEMPTS: usize = 3;

/// A running registry on `127.0.0.1:<free port>` (or a chosen address), storing blobs in
/// a temporary directory, with deletes enabled. Plain HTTP; no auth, or htpasswd basic
/// auth ([`Registry::start_with_htpasswd`]). Its access log is kept, so tests can count
/// requests ([`Registry::blob_gets`]).
///
/// Dropping it kills the process and removes the directory. The process also gets
/// SIGKILL if the test process dies first.
pub struct Registry {
    child: Child,
    host: String,
    /// The htpasswd user and password, when auth is on.
    credentials: Option<(String, String)>,
    /// The registry's output: its access log and errors.
    log_path: PathBuf,
    /// Config, log and storage; removed (after the process is killed) on drop.
    _dir: TempDir,
}

impl Registry {
    /// Starts a registry on a free loopback port and waits (up to 20 s) until `GET /v2/`
    /// answers 200.
    ///
    /// Errors: the binary is missing, it exits early (its log tail is included), or it
    /// does not become ready. A port lost to a race is retried with another port.
    pub fn start() -> anyhow::Result<Registry> {
        Self::start_any_port(None)
    }

    /// Starts a registry, as [`Registry::start`], that requires HTTP basic auth as
    /// `user`/`password` (an htpasswd file with a bcrypt hash, made with `htpasswd` from
    /// apache2-utils) for every request but `GET /v2/`'s challenge.
    ///
    /// Errors: as [`Registry::start`], or `htpasswd` is missing or fails.
    pub fn start_with_htpasswd(user: &str, password: &str) -> anyhow::Result<Registry> {
        Self::start_any_port(Some((user.to_string(), password.to_string())))
    }

    fn start_any_port(credentials: Option<(String, String)>) -> anyhow::Result<Registry> {
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            let host = format!("127.0.0.1:{}", sys::free_port()?);
            match Self::try_start(host, credentials.clone()) {
                Ok(registry) => return Ok(registry),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("registry did not start")))
    }

    /// Starts a registry listening on `addr` (`127.0.0.1:5000`) and waits (up to 20 s)
    /// until `GET /v2/` answers 200.
    ///
    /// Errors: `addr` is not an `IP:PORT` socket address or is already in use, or as
    /// [`Registry::start`].
    pub fn start_on(addr: &str) -> anyhow::Result<Registry> {
        let socket: SocketAddr = addr
            .parse()
            .with_context(|| format!("{addr:?} is not an IP:PORT address"))?;
        // Another server answering /v2/ on the address would look like a ready registry.
        drop(TcpListener::bind(socket).with_context(|| format!("cannot listen on {addr}"))?);
        Self::try_start(socket.to_string(), None)
    }

    /// `IP:PORT`, the registry part of image references.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The `(user, password)` the registry accepts, when it requires auth.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.credentials
            .as_ref()
            .map(|(user, password)| (user.as_str(), password.as_str()))
    }

    /// Pushes `image` as `repo:tag` (with the registry's credentials, if any) and returns
    /// the reference `host/repo:tag`. See [`push`](crate::push).
    pub fn push(&self, repo: &str, tag: &str, image: &Image) -> anyhow::Result<String> {
        push::push_as(&self.host, self.credentials(), repo, tag, image)
    }

    /// How many `GET`s of the blob `digest` the registry answered with 200 so far (from
    /// its access log).
    pub fn blob_gets(&self, digest: &str) -> anyhow::Result<usize> {
        let log = std::fs::read_to_string(&self.log_path)
            .with_context(|| format!("reading {}", self.log_path.display()))?;
        let path = format!("/blobs/{digest} ");
        Ok(log
            .lines()
            .filter(|line| line.contains("\"GET /v2/") && line.contains(&path))
            .filter(|line| line.contains("\" 200 "))
            .count())
    }

    fn try_start(host: String, credentials: Option<(String, String)>) -> anyhow::Result<Registry> {
        let dir = tempfile::Builder::new()
            .prefix("skiff-registry-")
            .tempdir()
            .context("creating the registry directory")?;
        let htpasswd = match &credentials {
            Some((user, password)) => {
                let path = dir.path().join("htpasswd");
                write_htpasswd(&path, user, password)?;
                Some(path)
            }
            None => None,
        };
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            config_yaml(&dir.path().join("data"), &host, htpasswd.as_deref()),
        )?;
        let log_path = dir.path().join("registry.log");
        let log = File::create(&log_path)?;

        let mut cmd = Command::new(REGISTRY_BIN);
        cmd.arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = spawn::spawn_tied(cmd).with_context(|| format!("spawning {REGISTRY_BIN}"))?;
        let mut registry = Registry {
            child,
            host,
            credentials,
            log_path,
            _dir: dir,
        };
        registry.wait_ready()?;
        Ok(registry)
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let log_path = self.log_path.clone();
        let log_path = log_path.as_path();
        let deadline = Instant::now() + READY_TIMEOUT;
        let agent = sys::http_agent();
        let url = format!("http://{}/v2/", self.host);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "docker-registry exited with {status} before serving on {}; log:\n{}",
                    self.host,
                    sys::tail(log_path, 30)
                );
            }
            // With auth, the unauthenticated probe gets the 401 challenge.
            let ready = if self.credentials.is_some() { 401 } else { 200 };
            if let Ok(r) = agent.get(&url).call()
                && r.status() == ready
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "docker-registry on {} not ready after {READY_TIMEOUT:?}; log:\n{}",
                    self.host,
                    sys::tail(log_path, 30)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes an htpasswd file for `user` with a bcrypt hash of `password` (the only hash
/// docker-registry accepts).
fn write_htpasswd(path: &Path, user: &str, password: &str) -> anyhow::Result<()> {
    let output = Command::new(HTPASSWD_BIN)
        .args(["-B", "-b", "-n", user, password])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {HTPASSWD_BIN} (apt install apache2-utils)"))?;
    if !output.status.success() {
        bail!(
            "{HTPASSWD_BIN} failed with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    std::fs::write(path, &output.stdout).with_context(|| format!("writing {}", path.display()))
}

/// The distribution configuration (version 0.1 format), with htpasswd auth when
/// `htpasswd` is given. The access log goes to the registry's output.
fn config_yaml(data_dir: &Path, host: &str, htpasswd: Option<&Path>) -> String {
    let auth = htpasswd
        .map(|path| {
            format!(
                "auth:\n  htpasswd:\n    realm: skiff-test\n    path: {}\n",
                path.display()
            )
        })
        .unwrap_or_default();
    format!(
        "version: 0.1\n\
         log:\n  level: warn\n  accesslog:\n    disabled: false\n\
         storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
         http:\n  addr: {host}\n{auth}",
        data_dir.display()
    )
}
