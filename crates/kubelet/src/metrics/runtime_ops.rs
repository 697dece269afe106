//! [`InstrumentedCri`]: counts and times every CRI call (upstream
//! `kuberuntime/instrumented_services.go`).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use k8s_cri::v1::*;
use tonic::Status;

use super::{label, metrics};
use crate::cri::{ContainerEventStream, Cri, cri_calls};

/// A [`Cri`] that records `kubelet_runtime_operations_total`,
/// `kubelet_runtime_operations_errors_total` and
/// `kubelet_runtime_operations_duration_seconds` per call, and
/// `kubelet_started_pods_total` / `kubelet_started_containers_total` (with their
/// `_errors_total`) on RunPodSandbox / StartContainer, then delegates to the runtime.
pub struct InstrumentedCri {
    inner: Arc<dyn Cri>,
}

impl InstrumentedCri {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Cri>) -> Self {
        Self { inner }
    }
}

/// Upstream's `operation_type` for a call: the method name, with `pod_sandbox` spelled
/// `podsandbox` and UpdateContainerResources as `update_container`.
pub fn operation_type(method: &str) -> String {
    match method {
        "update_container_resources" => "update_container".to_owned(),
        _ => method.replace("pod_sandbox", "podsandbox"),
    }
}

/// Records one finished call.
fn record<T>(method: &str, started: Instant, result: &Result<T, Status>) {
    tracing::trace!(
        target: "skiff::cri",
        operation = method,
        ms = started.elapsed().as_secs_f64() * 1e3,
        ok = result.is_ok(),
        "CRI call"
    );
    let m = metrics();
    let op = label("operation_type", &operation_type(method));
    m.runtime_operations.get_or_create(&op).inc();
    m.runtime_operations_duration
        .get_or_create(&op)
        .observe(started.elapsed().as_secs_f64());
    if let Err(status) = result {
        m.runtime_operations_errors.get_or_create(&op).inc();
        match method {
            "run_pod_sandbox" => {
                m.started_pods_errors.inc();
            }
            "start_container" => {
                let mut labels = label("container_type", "container");
                labels.push(("code".to_owned(), format!("{:?}", status.code())));
                m.started_containers_errors.get_or_create(&labels).inc();
            }
            _ => {}
        }
    }
    match method {
        "run_pod_sandbox" => {
            m.started_pods.inc();
        }
        "start_container" => {
            m.started_containers
                .get_or_create(&label("container_type", "container"))
                .inc();
        }
        _ => {}
    }
}

macro_rules! instrumented_impl {
    ($($(#[$doc:meta])* $service:ident $method:ident($req:ty) -> $resp:ty;)*) => {
        #[async_trait]
        impl Cri for InstrumentedCri {
            $(
                async fn $method(&self, req: $req) -> Result<$resp, Status> {
                    let started = Instant::now();
                    let result = self.inner.$method(req).await;
                    record(stringify!($method), started, &result);
                    result
                }
            )*
            async fn get_container_events(
                &self,
                req: GetEventsRequest,
            ) -> Result<ContainerEventStream, Status> {
                let started = Instant::now();
                let result = self.inner.get_container_events(req).await;
                record("get_container_events", started, &result);
                result
            }
        }
    };
}
cri_calls!(instrumented_impl);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::FakeCri;

    #[test]
    fn operation_types_are_upstream() {
        assert_eq!(operation_type("run_pod_sandbox"), "run_podsandbox");
        assert_eq!(
            operation_type("list_pod_sandbox_stats"),
            "list_podsandbox_stats"
        );
        assert_eq!(
            operation_type("update_container_resources"),
            "update_container"
        );
        assert_eq!(operation_type("list_containers"), "list_containers");
    }

    #[tokio::test]
    async fn counts_calls_and_errors() {
        let cri = InstrumentedCri::new(Arc::new(FakeCri::default()));
        let op = label("operation_type", "list_metric_descriptors");
        let before = metrics().runtime_operations_errors.get_or_create(&op).get();
        // The fake lacks this call: an error.
        assert!(
            cri.list_metric_descriptors(Default::default())
                .await
                .is_err()
        );
        assert_eq!(
            metrics().runtime_operations_errors.get_or_create(&op).get(),
            before + 1
        );
        assert!(metrics().runtime_operations.get_or_create(&op).get() > before);
    }
}
