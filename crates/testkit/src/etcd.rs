//! A private etcd: Debian's `etcd` (etcd-server, 3.4) for the etcd backend's tests.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tempfile::TempDir;

use crate::{spawn, sys};

const ETCD_BIN: &str = "/usr/bin/etcd";
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const START_ATTEMPTS: usize = 3;

/// A single-member etcd on free loopback ports (client and peer), with its data in a
/// temporary directory. Dropping it kills the process and removes the directory; the
/// process also gets SIGKILL if the test process dies first.
pub struct Etcd {
    child: Child,
    endpoint: String,
    log_path: PathBuf,
    _dir: TempDir,
}

impl Etcd {
    /// Starts etcd and waits (up to 30 s) until `GET /health` answers healthy.
    ///
    /// Errors: the binary is missing (`apt install etcd-server`), it exits early (its
    /// log tail is included) or does not become ready. A port lost to a race is retried
    /// with other ports.
    pub fn start() -> anyhow::Result<Etcd> {
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            match Self::try_start() {
                Ok(etcd) => return Ok(etcd),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("etcd did not start")))
    }

    /// The client URL, `http://127.0.0.1:<port>` (for `--etcd-servers`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn try_start() -> anyhow::Result<Etcd> {
        let dir = tempfile::Builder::new()
            .prefix("skiff-etcd-")
            .tempdir()
            .context("creating the etcd directory")?;
        let endpoint = format!("http://127.0.0.1:{}", sys::free_port()?);
        let peer = format!("http://127.0.0.1:{}", sys::free_port()?);
        let log_path = dir.path().join("etcd.log");
        let log = File::create(&log_path)?;
        let mut cmd = Command::new(ETCD_BIN);
        cmd.arg("--name=skiff-test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=skiff-test={peer}"))
            .arg("--logger=zap")
            .arg("--log-outputs=stderr")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = spawn::spawn_tied(cmd).with_context(|| format!("spawning {ETCD_BIN}"))?;
        let mut etcd = Etcd {
            child,
            endpoint,
            log_path,
            _dir: dir,
        };
        etcd.wait_ready()?;
        Ok(etcd)
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let agent = sys::http_agent();
        let url = format!("{}/health", self.endpoint);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "etcd exited with {status} before serving on {}; log:\n{}",
                    self.endpoint,
                    sys::tail(&self.log_path, 30)
                );
            }
            if let Ok(mut response) = agent.get(&url).call()
                && response.status() == 200
                && response
                    .body_mut()
                    .read_to_string()
                    .is_ok_and(|body| body.contains("\"health\":\"true\""))
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "etcd on {} not ready after {READY_TIMEOUT:?}; log:\n{}",
                    self.endpoint,
                    sys::tail(&self.log_path, 30)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
