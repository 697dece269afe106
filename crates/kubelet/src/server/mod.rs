//! The kubelet's read-only HTTP port (upstream `pkg/kubelet/server`, `--read-only-port`):
//! `GET /healthz` ([`healthz`]) and `GET /pods`.

pub mod healthz;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use k8s_openapi::List;
use k8s_openapi::api::core::v1::Pod;

use crate::pod_manager::PodManager;
use crate::status::StatusManager;

/// What the handlers read.
#[derive(Clone)]
pub struct ServerState {
    /// Desired pods.
    pub pod_manager: Arc<PodManager>,
    /// Their statuses.
    pub status_manager: Arc<StatusManager>,
}

/// The router of the read-only port.
pub fn router(state: ServerState) -> Router {
    Router::new().route("/pods", get(pods)).with_state(state)
}

/// Binds `0.0.0.0:port` (errors if the port is taken) and serves until the task is dropped.
pub async fn bind(port: u16) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port))).await
}

/// A v1 PodList of the desired pods, each with its latest status.
async fn pods(State(state): State<ServerState>) -> Json<List<Pod>> {
    let items = state
        .pod_manager
        .pods()
        .iter()
        .map(|pod| {
            let mut pod = Pod::clone(pod);
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            pod.status = state.status_manager.get_pod_status(&uid);
            pod
        })
        .collect();
    Json(List {
        items,
        metadata: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[tokio::test]
    async fn serves_pod_list() {
        let pod_manager = Arc::new(PodManager::default());
        let status_manager = Arc::new(StatusManager::default());
        pod_manager.add_or_update(Pod {
            metadata: ObjectMeta {
                name: Some("web-n".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            ..Default::default()
        });
        status_manager.set_pod_status(
            "u",
            k8s_openapi::api::core::v1::PodStatus {
                phase: Some("Running".into()),
                ..Default::default()
            },
        );
        let listener = bind(0).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = router(ServerState {
            pod_manager,
            status_manager,
        });
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let get = |path: &'static str| async move {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            stream
                .write_all(
                    format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await
                .unwrap();
            let mut out = String::new();
            stream.read_to_string(&mut out).await.unwrap();
            out.split_once("\r\n\r\n")
                .map(|(_, b)| b.to_owned())
                .unwrap_or_default()
        };
        let list: serde_json::Value = serde_json::from_str(&get("/pods").await).unwrap();
        assert_eq!(list["kind"], "PodList");
        assert_eq!(list["apiVersion"], "v1");
        assert_eq!(list["items"][0]["metadata"]["name"], "web-n");
        assert_eq!(list["items"][0]["status"]["phase"], "Running");
        server.abort();
    }
}
