//! `impl StreamBackend for Runtime`: the streaming server's calls delegate to the runtime's
//! verbs ([`Runtime::port_forward_stream`]; exec and attach come with helper "shim"'s
//! `Runtime::exec_streams` / `Runtime::attach_streams` — on merge, take shim's version of
//! this file).

use super::{StreamBackend, Streams};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

#[async_trait::async_trait]
impl StreamBackend for Runtime {
    async fn exec(&self, container_id: &str, _cmd: Vec<String>, _streams: Streams) -> Result<i32> {
        self.require_running(container_id).await?;
        Err(Error::Internal(anyhow::anyhow!(
            "streaming exec is not merged yet"
        )))
    }

    async fn attach(&self, container_id: &str, _streams: Streams) -> Result<()> {
        self.require_running(container_id).await?;
        Err(Error::Internal(anyhow::anyhow!(
            "streaming attach is not merged yet"
        )))
    }

    async fn port_forward(&self, sandbox_id: &str, port: u16) -> Result<tokio::net::TcpStream> {
        self.port_forward_stream(sandbox_id, port).await
    }
}
