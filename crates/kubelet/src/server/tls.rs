//! The serving certificate of the main port (upstream `kubelet.go`
//! `initializeServerCertificate` / `certutil.GenerateSelfSignedCertKey`).
//!
//! Either the configured `tlsCertFile` / `tlsPrivateKeyFile`, or a self-signed
//! certificate kept in `<root_dir>/pki/kubelet.crt` and `kubelet.key` (created on first
//! start, reused afterwards), valid one year for the node name, `localhost`, `127.0.0.1`
//! and the node IP.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, ServerConfig, SignatureScheme};

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum CertSource {
    /// PEM files given by the operator (`tlsCertFile`, `tlsPrivateKeyFile`).
    Files {
        /// PEM certificate chain.
        cert: PathBuf,
        /// PEM private key.
        key: PathBuf,
    },
    /// Self-signed into `<dir>/kubelet.crt|key` when absent.
    SelfSigned {
        /// The pki directory, `<root_dir>/pki`.
        dir: PathBuf,
        /// Node name (certificate subject and DNS SAN).
        node_name: String,
        /// Node IP (IP SAN).
        node_ip: IpAddr,
    },
}

/// The rustls server configuration for the main port (HTTP/1.1 only: the streaming
/// upgrades need it). Uses the process-wide default crypto provider (the binary
/// installs ring).
///
/// With `client_verifier` (from `--client-ca-file`) the server requests, but does not
/// require, a client certificate, as upstream's `tls.RequestClientCert`: the handshake
/// only checks that the client holds the certificate's key, and the authenticator checks
/// the chain, so that a request without (or with a bad) certificate can still present a
/// bearer token and is refused with 401 rather than a failed handshake.
///
/// Errors: unreadable or invalid PEM files, a failed certificate generation or write.
pub fn server_config(
    source: &CertSource,
    client_verifier: Option<Arc<dyn ClientCertVerifier>>,
) -> anyhow::Result<Arc<ServerConfig>> {
    let (cert, key) = match source {
        CertSource::Files { cert, key } => (cert.clone(), key.clone()),
        CertSource::SelfSigned {
            dir,
            node_name,
            node_ip,
        } => ensure_self_signed(dir, node_name, *node_ip)?,
    };
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading certificate {}", cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "no certificate in {}", cert.display());
    let key = PrivateKeyDer::from_pem_file(&key)
        .with_context(|| format!("reading private key {}", key.display()))?;
    let builder = ServerConfig::builder();
    let builder = match client_verifier {
        Some(inner) => builder.with_client_cert_verifier(Arc::new(RequestClientCert { inner })),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .context("building the TLS configuration")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Requests a client certificate and accepts any chain (upstream `tls.RequestClientCert`);
/// the handshake signatures are still checked by `inner`, which the authenticator uses
/// afterwards to verify the chain.
#[derive(Debug)]
struct RequestClientCert {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Returns the paths of `<dir>/kubelet.crt` and `<dir>/kubelet.key`, generating both
/// when either is missing.
fn ensure_self_signed(
    dir: &Path,
    node_name: &str,
    node_ip: IpAddr,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let cert_path = dir.join("kubelet.crt");
    let key_path = dir.join("kubelet.key");
    if cert_path.exists() && key_path.exists() {
        return Ok((cert_path, key_path));
    }
    let (cert, key) = self_signed_pem(node_name, node_ip)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write_private(&key_path, &key)?;
    std::fs::write(&cert_path, cert).with_context(|| format!("writing {}", cert_path.display()))?;
    Ok((cert_path, key_path))
}

/// A self-signed certificate and its key (PEM), subject `<node>@<unix time>` as upstream.
fn self_signed_pem(node_name: &str, node_ip: IpAddr) -> anyhow::Result<(String, String)> {
    let mut params = CertificateParams::default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, format!("{node_name}@{now}"));
    params.distinguished_name = subject;
    // Valid from today (midnight UTC) for a year, as upstream's one-year self-signed cert.
    use chrono::Datelike;
    let ymd = |d: chrono::NaiveDate| rcgen::date_time_ymd(d.year(), d.month() as u8, d.day() as u8);
    let today = chrono::Utc::now().date_naive();
    let next_year = today + chrono::Days::new(365);
    params.not_before = ymd(today);
    params.not_after = ymd(next_year);
    let mut sans = Vec::new();
    for name in [node_name, "localhost"] {
        if let Ok(name) = name.try_into() {
            sans.push(SanType::DnsName(name));
        }
    }
    let loopback = IpAddr::from([127, 0, 0, 1]);
    sans.push(SanType::IpAddress(loopback));
    if node_ip != loopback {
        sans.push(SanType::IpAddress(node_ip));
    }
    params.subject_alt_names = sans;
    let key = KeyPair::generate().context("generating the kubelet serving key")?;
    let cert = params
        .self_signed(&key)
        .context("self-signing the kubelet serving certificate")?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Writes a file readable by its owner only.
fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))
}
