//! The aggregator's HTTPS client for extension API servers (upstream's proxy transport
//! with `--proxy-client-cert-file`): it presents the front-proxy client certificate and
//! verifies the backend against the APIService's `caBundle` for the name
//! `<service>.<namespace>.svc`, or not at all with `insecureSkipTLSVerify` (and for the
//! availability check, as upstream's).

use std::net::IpAddr;
use std::sync::Arc;

use anyhow::Context as _;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use skiff_bootstrap::pki::CertKey;
use skiff_bootstrap::tls;

/// How a backend's serving certificate is checked.
#[derive(Debug, Clone, Copy)]
pub enum Verify<'a> {
    /// Not at all (`insecureSkipTLSVerify`).
    Insecure,
    /// Against these PEM CA certificates (`caBundle`).
    Bundle(&'a [u8]),
}

/// Sends requests to extension API servers.
pub struct BackendClient {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for BackendClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendClient").finish_non_exhaustive()
    }
}

impl BackendClient {
    /// A client presenting `client` (the front-proxy client certificate and key, PEM).
    /// Errors: invalid PEM.
    pub fn new(client: &CertKey) -> anyhow::Result<Self> {
        let (chain, key) = client.rustls_pair("front-proxy client")?;
        Ok(BackendClient { chain, key })
    }

    fn config(&self, verify: Verify<'_>) -> anyhow::Result<rustls::ClientConfig> {
        let mut config = match verify {
            Verify::Insecure => tls::insecure_client_config()?
                .with_client_auth_cert(self.chain.clone(), self.key.clone_key())?,
            Verify::Bundle(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem) {
                    roots.add(cert.context("reading the APIService's caBundle")?)?;
                }
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()?
                    .with_root_certificates(roots)
                    .with_client_auth_cert(self.chain.clone(), self.key.clone_key())?
            }
        };
        // Upgrades (exec, attach, port-forward) need HTTP/1.1.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }

    /// Sends `request` (its URI: path and query) to `ip:port` over a new HTTP/1.1
    /// connection that allows upgrades, checking the certificate by `verify` for
    /// `server_name`. Errors: the backend cannot be reached or fails the TLS handshake.
    pub async fn send<B>(
        &self,
        ip: IpAddr,
        port: u16,
        server_name: &str,
        verify: Verify<'_>,
        mut request: hyper::Request<B>,
    ) -> anyhow::Result<hyper::Response<Incoming>>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let connector = TlsConnector::from(Arc::new(self.config(verify)?));
        let tcp = TcpStream::connect((ip, port))
            .await
            .with_context(|| format!("dial tcp {}", authority(ip, port)))?;
        let name = ServerName::try_from(server_name.to_owned())
            .with_context(|| format!("server name {server_name:?}"))?;
        let tls = connector
            .connect(name, tcp)
            .await
            .with_context(|| format!("tls handshake with {}", authority(ip, port)))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(error = %e, "extension API server connection");
            }
        });
        request
            .headers_mut()
            .insert(hyper::header::HOST, authority(ip, port).parse()?);
        Ok(sender.send_request(request).await?)
    }
}

/// `ip:port`, the IPv6 address in brackets.
pub fn authority(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(_) => format!("{ip}:{port}"),
        IpAddr::V6(_) => format!("[{ip}]:{port}"),
    }
}
