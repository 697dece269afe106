//! A plain-TCP to TLS forwarder: lets the plain-HTTP clients of [`crate::stream`] talk
//! to an HTTPS server (the kubelet's main port), verifying the server's certificate
//! against a given CA (or self-signed) certificate. Async (tokio).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

/// A listening tunnel; dropping it stops accepting (open connections end with their
/// peers).
pub struct TlsTunnel {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl TlsTunnel {
    /// Listens on 127.0.0.1 (a free port) and forwards every connection over TLS to
    /// `target`, checking that its certificate is valid for `server_name` and chains to
    /// the PEM certificate `ca_file`. Installs rustls' ring provider if none is.
    ///
    /// Errors: unreadable certificate, bind failure. Handshake failures close the
    /// client's connection.
    pub async fn start(
        target: SocketAddr,
        server_name: &str,
        ca_file: &Path,
    ) -> anyhow::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(ca_file)
            .with_context(|| format!("reading {}", ca_file.display()))?
        {
            roots.add(cert?)?;
        }
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = TlsConnector::from(Arc::new(config));
        let name = ServerName::try_from(server_name.to_owned())?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let connector = connector.clone();
                let name = name.clone();
                tokio::spawn(async move {
                    let Ok(tcp) = TcpStream::connect(target).await else {
                        return;
                    };
                    let Ok(mut tls) = connector.connect(name, tcp).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut tls).await;
                });
            }
        });
        Ok(Self { addr, task })
    }

    /// `http://127.0.0.1:PORT`: the base URL that reaches the TLS server.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for TlsTunnel {
    fn drop(&mut self) {
        self.task.abort();
    }
}
