//! CRI Exec and Attach: check the container, then hand out a streaming URL (containerd's
//! `Exec` / `Attach`; the session itself is served by [`crate::streaming`]).

use k8s_cri::v1::{AttachRequest, AttachResponse, ExecRequest, ExecResponse};

use super::State;
use crate::error::{Error, Result};
use crate::runtime::Runtime;

impl Runtime {
    /// The URL of an exec session. `NotFound` for an unknown container,
    /// `FailedPrecondition` when it is not running, `InvalidArgument` for the request
    /// checks of [`crate::streaming::StreamServer::exec`].
    pub(crate) async fn exec(&self, req: ExecRequest) -> Result<ExecResponse> {
        self.require_running(&req.container_id).await?;
        self.streaming.exec(req)
    }

    /// The URL of an attach session (the checks of [`Runtime::exec`]).
    pub(crate) async fn attach(&self, req: AttachRequest) -> Result<AttachResponse> {
        self.require_running(&req.container_id).await?;
        self.streaming.attach(req)
    }

    /// `NotFound` unless container `id` exists, `FailedPrecondition` unless it runs.
    pub(crate) async fn require_running(&self, id: &str) -> Result<()> {
        let state = self.current_container(id).await?.state;
        if state != State::Running {
            return Err(Error::FailedPrecondition(format!(
                "container {id} is in {} state",
                state.to_cri().as_str_name()
            )));
        }
        Ok(())
    }
}
