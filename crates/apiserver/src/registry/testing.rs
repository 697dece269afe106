//! The in-memory REST test server of the registry kind tests: [`Registry::builtin`] on a
//! SQLite store in a temporary directory, with namespace `default`, driven through the
//! router with `tower::ServiceExt::oneshot`.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::config::ClusterConfig;
use crate::registry::Registry;
use crate::rest::{State, router};

/// The `accept` of a GET as a meta.k8s.io/v1 Table, with JSON as the fallback.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// The router, its state and the directory that holds the store.
pub(crate) struct Server {
    pub app: axum::Router,
    pub state: Arc<State>,
    _dir: tempfile::TempDir,
}

/// A response: its status, its headers and its body as JSON (a string when not JSON).
pub(crate) struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Server {
    /// A server of [`Registry::builtin`] with namespace `default`.
    pub async fn start() -> Server {
        let dir = tempfile::tempdir().expect("temporary directory");
        let config = crate::storage::StorageConfig::new(dir.path());
        let storage = crate::storage::open(&config).await.expect("store");
        let state = Arc::new(State::new(
            Registry::builtin(),
            storage,
            ClusterConfig::default(),
        ));
        let server = Server {
            app: router(state.clone()),
            state,
            _dir: dir,
        };
        let namespace = json!({"metadata": {"name": "default"}});
        let reply = server.send("POST", "/api/v1/namespaces", &namespace).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        server
    }

    /// Sends `body` as JSON (a merge patch for PATCH; no body when null).
    pub async fn send(&self, method: &str, uri: &str, body: &Value) -> Reply {
        let content_type = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        let body = if body.is_null() {
            Body::empty()
        } else {
            Body::from(body.to_string())
        };
        self.request(method, uri, content_type, "application/json", body)
            .await
    }

    /// Sends `body` as JSON with `content_type` (`application/strategic-merge-patch+json`,
    /// `application/json-patch+json`, ...).
    pub async fn send_as(
        &self,
        method: &str,
        uri: &str,
        content_type: &str,
        body: &Value,
    ) -> Reply {
        let body = Body::from(body.to_string());
        self.request(method, uri, content_type, "application/json", body)
            .await
    }

    /// A GET of `uri` as a meta.k8s.io/v1 Table; the status must be 200.
    pub async fn table(&self, uri: &str) -> Value {
        let reply = self
            .request("GET", uri, "application/json", TABLE, Body::empty())
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        reply.body
    }

    async fn request(
        &self,
        method: &str,
        uri: &str,
        content_type: &str,
        accept: &str,
        body: Body,
    ) -> Reply {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", content_type)
            .header("accept", accept)
            .body(body)
            .expect("request");
        let response = self.app.clone().oneshot(request).await.expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Reply {
            status,
            headers,
            body,
        }
    }
}

/// The causes of a 422 as `field: message` strings; the status must be 422.
pub(crate) fn causes(reply: &Reply) -> Vec<String> {
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.body
    );
    reply.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}
