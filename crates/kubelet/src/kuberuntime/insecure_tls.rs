//! HTTPS without certificate verification, as upstream's lifecycle hook HTTP client
//! (`InsecureSkipVerify`): the handshake signatures are still checked, the certificate
//! chain and name are not.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

/// A TLS client config that skips certificate verification (also used by httpGet probes).
pub(crate) fn client_config() -> Result<ClientConfig, rustls::Error> {
    Ok(skiff_bootstrap::tls::insecure_client_config()?.with_no_client_auth())
}

/// The outcome of an HTTPS exchange.
pub enum TlsError {
    /// The server answered in plain HTTP (upstream retries the request over HTTP).
    HttpResponse,
    /// Any other failure, as text.
    Other(String),
}

/// Sends `request` to `host:port` over TLS and returns the first bytes of the response
/// (at most `max` bytes, up to the end of its head). Blocking.
pub fn exchange(host: &str, port: u16, request: &[u8], max: usize) -> Result<Vec<u8>, TlsError> {
    let other = |e: &dyn std::fmt::Display| TlsError::Other(e.to_string());
    let config = client_config().map_err(|e| other(&e))?;
    let name = ServerName::try_from(host.to_owned()).map_err(|e| other(&e))?;
    let conn = ClientConnection::new(Arc::new(config), name).map_err(|e| other(&e))?;
    let tcp = TcpStream::connect((host, port)).map_err(|e| other(&e))?;
    let mut tls = StreamOwned::new(conn, tcp);
    let classify = |e: std::io::Error| match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidMessage(_)) => TlsError::HttpResponse,
        _ => TlsError::Other(e.to_string()),
    };
    tls.write_all(request).map_err(classify)?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < max {
        let n = tls.read(&mut buf).map_err(classify)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}
