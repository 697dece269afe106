//! A `skiff scheduler` (or `skiff controller-manager`) process for end-to-end tests and
//! benchmarks, and an HTTPS probe of its health endpoints.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use tempfile::TempDir;

use crate::daemon::Daemon;
use crate::sys;

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A running `skiff scheduler --kubeconfig <kubeconfig> --bind-address 127.0.0.1
/// --secure-port <free port>` plus the caller's flags, logging (`RUST_LOG=info` unless the
/// caller's environment sets it) to `<dir>/scheduler.log` in a fresh
/// `/tmp/skiff-scheduler-*` directory.
///
/// [`Scheduler::start`] returns once `GET /healthz` on its secure port answers `ok`; with
/// `ready` it also waits for `/readyz`. Dropping it kills the process (SIGKILL) and
/// removes the directory.
pub struct Scheduler {
    /// The subcommand: `scheduler` or `controller-manager` (same flags for these).
    command: &'static str,
    skiff_bin: PathBuf,
    kubeconfig: PathBuf,
    args: Vec<String>,
    port: u16,
    daemon: Option<Daemon>,
    dir: TempDir,
}

impl Scheduler {
    /// Starts `skiff_bin scheduler` against `kubeconfig` with `args` appended and waits
    /// (up to 60 s) for `/healthz`.
    ///
    /// Errors: the binary cannot be spawned, or it exits or is not healthy in time (the
    /// message includes the tail of its log).
    pub fn start(
        skiff_bin: impl Into<PathBuf>,
        kubeconfig: &Path,
        args: &[&str],
    ) -> anyhow::Result<Scheduler> {
        Self::start_command("scheduler", skiff_bin, kubeconfig, args)
    }

    /// As [`Scheduler::start`], for `skiff controller-manager` (which takes the same
    /// `--kubeconfig`, `--bind-address` and `--secure-port` and serves `/healthz`
    /// likewise); its log is `<dir>/controller-manager.log`.
    pub fn start_controller_manager(
        skiff_bin: impl Into<PathBuf>,
        kubeconfig: &Path,
        args: &[&str],
    ) -> anyhow::Result<Scheduler> {
        Self::start_command("controller-manager", skiff_bin, kubeconfig, args)
    }

    fn start_command(
        command: &'static str,
        skiff_bin: impl Into<PathBuf>,
        kubeconfig: &Path,
        args: &[&str],
    ) -> anyhow::Result<Scheduler> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("skiff-{command}-"))
            .tempdir()
            .with_context(|| format!("creating the {command}'s directory"))?;
        let mut s = Scheduler {
            command,
            skiff_bin: skiff_bin.into(),
            kubeconfig: kubeconfig.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            port: sys::free_port()?,
            daemon: None,
            dir,
        };
        s.spawn()?;
        Ok(s)
    }

    /// The secure port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory the log is in (for config files a test writes).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The PID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.daemon.as_ref().map(Daemon::pid)
    }

    /// The whole log.
    pub fn log(&self) -> String {
        sys::read_lossy(&self.log_path())
    }

    /// The last lines of the log.
    pub fn log_tail(&self) -> String {
        sys::tail(&self.log_path(), sys::LOG_TAIL_LINES)
    }

    /// `GET path` on the secure port: the status code and the body.
    ///
    /// Errors: the connection or the TLS handshake fails.
    pub fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        https_get_insecure(self.port, path)
    }

    /// SIGKILLs the process and reaps it.
    ///
    /// Errors: the signal cannot be sent.
    pub fn kill9(&mut self) -> anyhow::Result<()> {
        if let Some(d) = self.daemon.take() {
            d.kill9()?;
        }
        Ok(())
    }

    /// SIGTERM, then SIGKILL after 10 s; the exit status.
    ///
    /// Errors: the process cannot be signalled or waited for.
    pub fn stop(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        match self.daemon.take() {
            Some(d) => Ok(Some(d.stop(STOP_GRACE)?)),
            None => Ok(None),
        }
    }

    /// Whether the process has exited (reaping it); its status.
    ///
    /// Errors: waiting fails.
    pub fn try_wait(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        match self.daemon.as_mut() {
            Some(d) => Ok(d.try_wait()?),
            None => Ok(None),
        }
    }

    /// Starts the process again with the same flags and port.
    ///
    /// Errors: as [`Scheduler::start`].
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.stop()?;
        self.spawn()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join(format!("{}.log", self.command))
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let mut cmd = Command::new(&self.skiff_bin);
        cmd.arg(self.command)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--bind-address")
            .arg("127.0.0.1")
            .arg("--secure-port")
            .arg(self.port.to_string())
            .args(&self.args);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        let port = self.port;
        let ready = || match https_get_insecure(port, "/healthz") {
            Ok((200, _)) => Ok(()),
            Ok((code, body)) => bail!("/healthz answered {code}: {body}"),
            Err(e) => Err(e),
        };
        self.daemon = Some(Daemon::start(
            format!("skiff {} on port {port}", self.command),
            cmd,
            &self.log_path(),
            READY_TIMEOUT,
            ready,
        )?);
        Ok(())
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}

/// Accepts any server certificate: the scheduler's serving certificate is self-signed.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `GET path` over HTTPS on `127.0.0.1:port` without verifying the certificate (the
/// components' self-signed serving certificates), blocking: the status and the body.
///
/// Errors: the connection, the handshake or the response fails.
pub fn https_get_insecure(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    use std::io::{Read as _, Write as _};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost")?.to_owned();
    let conn = rustls::ClientConnection::new(Arc::new(config), name)?;
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    match tls.read_to_end(&mut raw) {
        Ok(_) => {}
        // A server closing without close_notify still sent the whole response.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e.into()),
    }
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("no HTTP status line in {head:?}"))?;
    Ok((code, body.to_owned()))
}
