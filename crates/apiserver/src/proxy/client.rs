//! The API server's client for kubelets' HTTPS API (upstream `--kubelet-client-certificate`):
//! it authenticates with `apiserver-kubelet-client.crt` and, as upstream without
//! `--kubelet-certificate-authority`, does not verify the kubelet's serving certificate
//! (kubelets serve self-signed certificates by default).

use std::sync::Arc;

use anyhow::Context;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use skiff_bootstrap::pki::CertKey;
use skiff_bootstrap::tls;

/// Sends requests to kubelets.
pub struct KubeletClient {
    connector: TlsConnector,
}

impl std::fmt::Debug for KubeletClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletClient").finish_non_exhaustive()
    }
}

impl KubeletClient {
    /// A client presenting `client` (PEM certificate and key). Errors: invalid PEM.
    pub fn new(client: &CertKey) -> anyhow::Result<Self> {
        let (chain, key) = client.rustls_pair("kubelet client")?;
        let mut config = tls::insecure_client_config()
            .context("TLS protocol versions")?
            .with_client_auth_cert(chain, key)
            .context("the kubelet client certificate")?;
        // Streaming upgrades need HTTP/1.1.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(KubeletClient {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// Sends `request` (its URI: path and query) to the kubelet at `host:port` over a new
    /// HTTP/1.1 connection that allows upgrades. Errors: the kubelet cannot be reached.
    pub async fn send<B>(
        &self,
        host: &str,
        port: u16,
        mut request: hyper::Request<B>,
    ) -> anyhow::Result<hyper::Response<Incoming>>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let tcp = TcpStream::connect((host, port))
            .await
            .with_context(|| format!("dialing kubelet {host}:{port}"))?;
        let server_name = ServerName::try_from(host.to_owned())
            .with_context(|| format!("kubelet address {host:?}"))?;
        let tls = self
            .connector
            .connect(server_name, tcp)
            .await
            .with_context(|| format!("TLS handshake with kubelet {host}:{port}"))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(error = %e, "kubelet connection");
            }
        });
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        request
            .headers_mut()
            .insert(hyper::header::HOST, authority.parse()?);
        Ok(sender.send_request(request).await?)
    }
}
