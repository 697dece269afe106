//! `impl StreamBackend for Runtime`: the streaming server's calls delegate to the runtime's
//! verbs ([`Runtime::exec_streams`], [`Runtime::attach_streams`],
//! [`Runtime::port_forward_stream`]).

use super::{StreamBackend, Streams};
use crate::error::Result;
use crate::runtime::Runtime;

#[async_trait::async_trait]
impl StreamBackend for Runtime {
    async fn exec(&self, container_id: &str, cmd: Vec<String>, streams: Streams) -> Result<i32> {
        self.exec_streams(container_id, cmd, streams).await
    }

    async fn attach(&self, container_id: &str, streams: Streams) -> Result<()> {
        self.attach_streams(container_id, streams).await
    }

    async fn port_forward(&self, sandbox_id: &str, port: u16) -> Result<tokio::net::TcpStream> {
        self.port_forward_stream(sandbox_id, port).await
    }
}
