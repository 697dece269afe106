//! The runtime as the streaming server's [`StreamBackend`].

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::streaming::{StreamBackend, Streams};

#[async_trait::async_trait]
impl StreamBackend for Runtime {
    async fn exec(&self, container_id: &str, _cmd: Vec<String>, _streams: Streams) -> Result<i32> {
        self.require_running(container_id).await?;
        Err(Error::Internal(anyhow::anyhow!(
            "streaming exec is not available yet (container/exec_stream.rs)"
        )))
    }

    async fn attach(&self, container_id: &str, _streams: Streams) -> Result<()> {
        self.require_running(container_id).await?;
        Err(Error::Internal(anyhow::anyhow!(
            "streaming attach is not available yet (container/attach.rs)"
        )))
    }

    async fn port_forward(&self, sandbox_id: &str, port: u16) -> Result<tokio::net::TcpStream> {
        self.connect_in_sandbox(sandbox_id, port).await
    }
}
