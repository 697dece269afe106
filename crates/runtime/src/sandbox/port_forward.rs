//! PortForward: a TCP connection inside a pod's network namespace.

use crate::error::{Error, Result};
use crate::runtime::Runtime;

// replaced by the stream helper
impl Runtime {
    /// A TCP connection to `port` on the loopback address of pod sandbox `sandbox_id`.
    pub(crate) async fn port_forward_stream(
        &self,
        _sandbox_id: &str,
        _port: u16,
    ) -> Result<tokio::net::TcpStream> {
        Err(Error::Internal(anyhow::anyhow!(
            "port-forward is not implemented yet"
        )))
    }
}
