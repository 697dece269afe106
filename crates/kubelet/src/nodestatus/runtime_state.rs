//! The container runtime's health as the Ready condition sees it (upstream
//! `pkg/kubelet/runtime.go` `runtimeState`, fed by `Kubelet.updateRuntimeUp`).

use std::time::{Duration, Instant};

use k8s_cri::v1::{RuntimeCondition, RuntimeFeatures, RuntimeHandler, StatusResponse};

/// How long the runtime may go without a successful, ready `Status` before the node is
/// NotReady with "container runtime is down" (upstream `maxWaitForContainerRuntime`).
pub(crate) const MAX_WAIT_FOR_CONTAINER_RUNTIME: Duration = Duration::from_secs(30);
/// The runtime condition type of the runtime itself (CRI `RuntimeReady`).
const RUNTIME_READY: &str = "RuntimeReady";
/// The runtime condition type of the pod network (CRI `NetworkReady`).
const NETWORK_READY: &str = "NetworkReady";

/// The last runtime status the kubelet saw.
#[derive(Debug, Default)]
pub(crate) struct RuntimeState {
    /// When the runtime last answered `Status` with RuntimeReady true.
    last_sync: Option<Instant>,
    runtime_error: Option<String>,
    network_error: Option<String>,
    handlers: Vec<RuntimeHandler>,
    features: Option<RuntimeFeatures>,
}

impl RuntimeState {
    /// Records a CRI `Status` answer received at `now` (upstream `updateRuntimeUp`): the
    /// network and runtime errors from the NetworkReady and RuntimeReady conditions; the
    /// handlers, features and sync time only while the runtime is ready.
    pub(crate) fn update(&mut self, status: &StatusResponse, now: Instant) {
        let conditions = status
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        let find = |kind: &str| conditions.iter().find(|c| c.r#type == kind);
        self.network_error = match find(NETWORK_READY) {
            Some(c) if c.status => None,
            other => Some(format!(
                "container runtime network not ready: {}",
                describe(other)
            )),
        };
        match find(RUNTIME_READY) {
            Some(c) if c.status => {
                self.runtime_error = None;
                self.handlers = status.runtime_handlers.clone();
                self.features = status.features;
                self.last_sync = Some(now);
            }
            other => {
                self.runtime_error =
                    Some(format!("container runtime not ready: {}", describe(other)));
            }
        }
    }

    /// The runtime's errors at `now` (upstream `runtimeErrors`): no ready status yet, or
    /// none for [`MAX_WAIT_FOR_CONTAINER_RUNTIME`]; the PLEG health check's failure; the
    /// last RuntimeReady failure.
    pub(crate) fn runtime_errors(
        &self,
        pleg: crate::error::Result<()>,
        now: Instant,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        match self.last_sync {
            None => errors.push("container runtime status check may not have completed yet".into()),
            Some(at) if now.saturating_duration_since(at) >= MAX_WAIT_FOR_CONTAINER_RUNTIME => {
                errors.push("container runtime is down".into());
            }
            Some(_) => {}
        }
        if let Err(e) = pleg {
            errors.push(format!("PLEG is not healthy: {e}"));
        }
        errors.extend(self.runtime_error.clone());
        errors
    }

    /// The pod network's error (upstream `networkErrors`).
    pub(crate) fn network_errors(&self) -> Vec<String> {
        self.network_error.iter().cloned().collect()
    }

    /// The runtime handlers of the last ready status.
    pub(crate) fn handlers(&self) -> &[RuntimeHandler] {
        &self.handlers
    }

    /// The runtime features of the last ready status.
    pub(crate) fn features(&self) -> Option<RuntimeFeatures> {
        self.features
    }
}

/// A runtime condition as upstream prints it (`RuntimeCondition.String`, `<nil>` when
/// absent): `NetworkReady=false reason:NetworkPluginNotReady message:...`.
fn describe(condition: Option<&RuntimeCondition>) -> String {
    match condition {
        None => "<nil>".to_owned(),
        Some(c) => format!(
            "{}={} reason:{} message:{}",
            c.r#type, c.status, c.reason, c.message
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_cri::v1::RuntimeStatus;

    pub(crate) fn status(runtime: bool, network: bool) -> StatusResponse {
        let condition = |kind: &str, ok: bool| RuntimeCondition {
            r#type: kind.into(),
            status: ok,
            reason: if ok { "" } else { "NetworkPluginNotReady" }.into(),
            message: if ok {
                ""
            } else {
                "Network plugin returns error: cni plugin not initialized"
            }
            .into(),
        };
        StatusResponse {
            status: Some(RuntimeStatus {
                conditions: vec![
                    condition(RUNTIME_READY, runtime),
                    condition(NETWORK_READY, network),
                ],
            }),
            runtime_handlers: vec![RuntimeHandler {
                name: "runc".into(),
                features: None,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn errors_follow_the_runtime_status() {
        let start = Instant::now();
        let mut state = RuntimeState::default();
        assert_eq!(
            state.runtime_errors(Ok(()), start),
            vec!["container runtime status check may not have completed yet"]
        );
        state.update(&status(true, false), start);
        assert!(state.runtime_errors(Ok(()), start).is_empty());
        assert_eq!(
            state.network_errors(),
            vec![
                "container runtime network not ready: NetworkReady=false \
                 reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin \
                 not initialized"
            ]
        );
        assert_eq!(state.handlers()[0].name, "runc");
        state.update(&status(true, true), start);
        assert!(state.network_errors().is_empty());
        assert_eq!(
            state.runtime_errors(
                Err(crate::error::Error::Pleg(
                    "pleg has yet to be successful".into()
                )),
                start
            ),
            vec!["PLEG is not healthy: pleg has yet to be successful"]
        );
        let later = start + MAX_WAIT_FOR_CONTAINER_RUNTIME;
        assert_eq!(
            state.runtime_errors(Ok(()), later),
            vec!["container runtime is down"]
        );
        // A runtime that answers but is not ready does not renew the sync time.
        let mut not_ready = status(false, true);
        not_ready.status.as_mut().unwrap().conditions.remove(0);
        state.update(&not_ready, later);
        assert_eq!(
            state.runtime_errors(Ok(()), later),
            vec![
                "container runtime is down",
                "container runtime not ready: <nil>"
            ]
        );
    }
}
