//! ReopenContainerLog: the shim reopens the CRI log file, as after the kubelet rotated it.

use anyhow::Context as _;
use k8s_cri::v1::{ReopenContainerLogRequest, ReopenContainerLogResponse};
use tokio::io::AsyncWriteExt as _;

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::shim::protocol::Frame;

impl Runtime {
    /// Asks the container's shim to reopen its log file at the container's log path
    /// (creating it), so that output goes to a new file once the old one was renamed.
    /// Errors as containerd: `NotFound` (unknown container), `FailedPrecondition` (not
    /// running), `Internal` when the file cannot be opened.
    pub(crate) async fn reopen_container_log(
        &self,
        req: ReopenContainerLogRequest,
    ) -> Result<ReopenContainerLogResponse> {
        self.running_container(&req.container_id).await?;
        let mut conn = self.connect_shim(&req.container_id).await?;
        conn.write_all(&Frame::ReopenLog.encode())
            .await
            .context("writing to the shim")?;
        match Frame::read_async(&mut conn)
            .await
            .context("reading the shim's reply")?
        {
            Some(Frame::Reply(Ok(()))) => Ok(ReopenContainerLogResponse {}),
            Some(Frame::Reply(Err(text))) => Err(Error::Internal(anyhow::anyhow!(
                "reopening the log of container {}: {text}",
                req.container_id
            ))),
            other => Err(Error::Internal(anyhow::anyhow!(
                "unexpected reply from the shim of container {}: {other:?}",
                req.container_id
            ))),
        }
    }
}
