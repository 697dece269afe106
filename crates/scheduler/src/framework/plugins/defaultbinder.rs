//! DefaultBinder (upstream `framework/plugins/defaultbinder`): binds the pod by POSTing a
//! `Binding` to its `binding` subresource.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{BindPlugin, Plugin};
use crate::framework::runtime::Handle;
use crate::framework::status::Status;
use crate::framework::types::PodInfo;

/// The plugin's name (upstream `names.DefaultBinder`).
pub const NAME: &str = "DefaultBinder";

/// Binds through the API (upstream `DefaultBinder`). Takes no args.
pub struct DefaultBinder {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for DefaultBinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultBinder")
            .field("client", &self.handle.client.is_some())
            .finish()
    }
}

/// Builds the plugin; `args` are ignored.
pub fn new(
    _args: Option<&serde_json::Value>,
    handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(DefaultBinder {
        handle: Arc::clone(handle),
    }))
}

/// The Binding of `pod` to `node`: the pod's name, namespace and uid, target Node `node`.
pub fn binding(pod: &Pod, node: &str) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        },
        target: ObjectReference {
            kind: Some("Node".to_owned()),
            name: Some(node.to_owned()),
            ..Default::default()
        },
    }
}

impl Plugin for DefaultBinder {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        Some(self)
    }
}

#[async_trait]
impl BindPlugin for DefaultBinder {
    /// Error when there is no client or the API refuses (the message is the API's).
    async fn bind(&self, _state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        let Some(client) = self.handle.client.clone() else {
            return Status::error("no API client to bind with");
        };
        let pod = &pod.pod;
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        tracing::debug!(pod = %format!("{ns}/{name}"), node, "Attempting to bind pod to node");
        let api: Api<Pod> = Api::namespaced(client, ns);
        match api
            .create_subresource::<_, serde_json::Value>(
                "binding",
                name,
                &PostParams::default(),
                &binding(pod, node),
            )
            .await
        {
            Ok(_) => Status::success(),
            Err(kube::Error::Api(status)) => Status::error(status.message),
            Err(e) => Status::error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use axum::Router;
    use axum::extract::{Path, State};
    use axum::http::StatusCode;
    use axum::routing::post;

    use super::*;
    use crate::framework::plugins::helper::testing;
    use crate::framework::runtime::LogRecorder;
    use crate::framework::status::Code;
    use crate::informers::Listers;

    type Seen = Arc<Mutex<Vec<(String, String, serde_json::Value)>>>;

    async fn bind_handler(
        State(seen): State<Seen>,
        Path((ns, name)): Path<(String, String)>,
        axum::Json(body): axum::Json<serde_json::Value>,
    ) -> (StatusCode, axum::Json<serde_json::Value>) {
        let target = body["target"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Ok(mut s) = seen.lock() {
            s.push((ns, name, body));
        }
        if target == "taken" {
            return (
                StatusCode::CONFLICT,
                axum::Json(
                    serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "pod p is already assigned to node \"other\"", "reason": "Conflict", "code": 409}),
                ),
            );
        }
        (
            StatusCode::CREATED,
            axum::Json(
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}),
            ),
        )
    }

    fn plugin_with_fake_api(seen: &Seen) -> Arc<dyn Plugin> {
        let router = Router::new()
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}/binding",
                post(bind_handler),
            )
            .with_state(Arc::clone(seen));
        let client = kube::Client::new(router, "default");
        let handle = Arc::new(Handle::new(
            Some(client),
            Arc::new(Listers::default()),
            testing::handle().nominator.clone(),
            Arc::new(LogRecorder),
        ));
        new(None, &handle).unwrap()
    }

    // Upstream default_binder_test.go.
    #[tokio::test]
    async fn binds_through_the_binding_subresource() {
        let seen: Seen = Arc::default();
        let plugin = plugin_with_fake_api(&seen);
        let pod = PodInfo::new(testing::pod("foo", &[]));
        let s = plugin
            .as_bind()
            .unwrap()
            .bind(&CycleState::new(), &pod, "foohost.kubernetes.mydomain.com")
            .await;
        assert!(s.is_success(), "{s}");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1);
        let (ns, name, body) = &seen[0];
        assert_eq!((ns.as_str(), name.as_str()), ("default", "foo"));
        assert_eq!(body["metadata"]["name"], "foo");
        assert_eq!(body["metadata"]["namespace"], "default");
        assert_eq!(body["metadata"]["uid"], "foo");
        assert_eq!(body["target"]["kind"], "Node");
        assert_eq!(body["target"]["name"], "foohost.kubernetes.mydomain.com");
    }

    #[tokio::test]
    async fn api_errors_and_no_client_are_errors() {
        let seen: Seen = Arc::default();
        let plugin = plugin_with_fake_api(&seen);
        let pod = PodInfo::new(testing::pod("p", &[]));
        let s = plugin
            .as_bind()
            .unwrap()
            .bind(&CycleState::new(), &pod, "taken")
            .await;
        assert_eq!(s.code(), Code::Error);
        assert_eq!(s.message(), "pod p is already assigned to node \"other\"");
        let no_client = new(None, &testing::handle()).unwrap();
        let s = no_client
            .as_bind()
            .unwrap()
            .bind(&CycleState::new(), &pod, "n")
            .await;
        assert_eq!(s.code(), Code::Error);
    }
}
