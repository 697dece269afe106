//! A private etcd: Debian's `etcd` (etcd-server, 3.4) for the etcd backend's tests.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use tempfile::TempDir;

use crate::daemon::Daemon;
use crate::sys;

const ETCD_BIN: &str = "/usr/bin/etcd";
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const START_ATTEMPTS: usize = 3;

/// A single-member etcd on free loopback ports (client and peer), with its data in a
/// temporary directory. Dropping it kills the process and removes the directory; the
/// process also gets SIGKILL if the test process dies first.
pub struct Etcd {
    _daemon: Daemon,
    endpoint: String,
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
        let mut cmd = Command::new(ETCD_BIN);
        cmd.arg("--name=skiff-test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=skiff-test={peer}"))
            .arg("--logger=zap")
            .arg("--log-outputs=stderr");
        let agent = sys::http_agent();
        let url = format!("{endpoint}/health");
        let healthy = || {
            let mut response = agent.get(&url).call()?;
            let body = response.body_mut().read_to_string()?;
            if response.status() != 200 || !body.contains("\"health\":\"true\"") {
                bail!("GET /health answered {}: {body}", response.status());
            }
            Ok(())
        };
        let daemon = Daemon::start(
            format!("etcd on {endpoint}"),
            cmd,
            &dir.path().join("etcd.log"),
            READY_TIMEOUT,
            healthy,
        )
        .with_context(|| format!("starting {ETCD_BIN}"))?;
        Ok(Etcd {
            _daemon: daemon,
            endpoint,
            _dir: dir,
        })
    }
}
