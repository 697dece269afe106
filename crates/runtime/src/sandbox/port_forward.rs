//! CRI PortForward: the URL of a port-forward session, and the TCP connections it makes
//! to `127.0.0.1:<port>` inside a pod's network namespace.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use k8s_cri::v1::{PortForwardRequest, PortForwardResponse};
use nix::sched::CloneFlags;

use super::ns;
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// How long a connection to a pod port may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Runtime {
    /// The URL of a port-forward session to sandbox `pod_sandbox_id`. `NotFound` for an
    /// unknown sandbox, `FailedPrecondition` when it is not ready.
    pub(crate) async fn port_forward(
        &self,
        req: PortForwardRequest,
    ) -> Result<PortForwardResponse> {
        self.forwarding_target(&req.pod_sandbox_id).await?;
        self.streaming.port_forward(req)
    }

    /// A TCP connection to `127.0.0.1:port` in sandbox `sandbox_id`'s network namespace
    /// (the host's for host-network sandboxes). Errors as [`Runtime::port_forward`], or
    /// with the connect error.
    pub(crate) async fn port_forward_stream(
        &self,
        sandbox_id: &str,
        port: u16,
    ) -> Result<tokio::net::TcpStream> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let stream = match self.forwarding_target(sandbox_id).await? {
            Some(netns) => connect_in_netns(netns, address).await,
            None => tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(address))
                .await
                .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())),
        };
        stream
            .with_context(|| format!("connecting to {address} in pod sandbox {sandbox_id}"))
            .map_err(Error::Internal)
    }

    /// The pinned network namespace of a ready sandbox (`None`: host network).
    async fn forwarding_target(&self, sandbox_id: &str) -> Result<Option<PathBuf>> {
        let sandbox = self.sandboxes.require(sandbox_id)?;
        let sandbox = sandbox.lock().await;
        if !sandbox.ready {
            return Err(Error::FailedPrecondition(format!(
                "pod sandbox {sandbox_id} is not ready"
            )));
        }
        Ok(sandbox
            .pinned
            .contains(&ns::Kind::Net)
            .then(|| ns::pin_path(&self.sandbox_paths(sandbox_id).ns, ns::Kind::Net)))
    }
}

/// Connects from a short-lived thread that joined the network namespace pinned at
/// `netns` (tokio's workers never change namespace); the socket keeps the namespace it
/// was created in and is used from anywhere afterwards.
async fn connect_in_netns(
    netns: PathBuf,
    address: SocketAddr,
) -> std::io::Result<tokio::net::TcpStream> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("netns-connect".into())
        .spawn(move || {
            let connect = || -> std::io::Result<std::net::TcpStream> {
                let file = std::fs::File::open(&netns)?;
                nix::sched::setns(&file, CloneFlags::CLONE_NEWNET)?;
                std::net::TcpStream::connect_timeout(&address, CONNECT_TIMEOUT)
            };
            let _ = tx.send(connect());
        })?;
    let stream = rx
        .await
        .map_err(|_| std::io::Error::other("the namespace thread died"))??;
    stream.set_nonblocking(true)?;
    tokio::net::TcpStream::from_std(stream)
}
