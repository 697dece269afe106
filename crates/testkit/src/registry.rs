//! A local OCI registry: Debian's `docker-registry` (CNCF distribution 2.8).

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tempfile::TempDir;

use crate::{spawn, sys};

const REGISTRY_BIN: &str = "/usr/bin/docker-registry";
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const START_ATTEMPTS: usize = 3;

/// A running registry on `127.0.0.1:<free port>` (or a chosen address), storing blobs in
/// a temporary directory, with deletes enabled. Plain HTTP, no auth.
///
/// Dropping it kills the process and removes the directory. The process also gets
/// SIGKILL if the test process dies first.
pub struct Registry {
    child: Child,
    host: String,
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
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            let host = format!("127.0.0.1:{}", sys::free_port()?);
            match Self::try_start(host) {
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
        Self::try_start(socket.to_string())
    }

    /// `IP:PORT`, the registry part of image references.
    pub fn host(&self) -> &str {
        &self.host
    }

    fn try_start(host: String) -> anyhow::Result<Registry> {
        let dir = tempfile::Builder::new()
            .prefix("skiff-registry-")
            .tempdir()
            .context("creating the registry directory")?;
        let config = dir.path().join("config.yml");
        std::fs::write(&config, config_yaml(&dir.path().join("data"), &host))?;
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
            _dir: dir,
        };
        registry.wait_ready(&log_path)?;
        Ok(registry)
    }

    fn wait_ready(&mut self, log_path: &Path) -> anyhow::Result<()> {
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
            if let Ok(r) = agent.get(&url).call()
                && r.status() == 200
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

/// The distribution configuration (version 0.1 format).
fn config_yaml(data_dir: &Path, host: &str) -> String {
    format!(
        "version: 0.1\n\
         log:\n  level: warn\n  accesslog:\n    disabled: true\n\
         storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
         http:\n  addr: {host}\n",
        data_dir.display()
    )
}
