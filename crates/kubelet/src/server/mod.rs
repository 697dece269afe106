//! The kubelet's HTTP API (upstream `pkg/kubelet/server`).
//!
//! Two ports, as upstream, each with `/healthz` ([`healthz`]):
//! - the read-only port (`readOnlyPort`, plain HTTP, [`router`]): `/pods`,
//!   `/stats/summary`, `/metrics`, `/metrics/resource`;
//! - the main port (`port`, HTTPS with the certificate of [`tls`], [`main_router`]):
//!   the same plus `/runningpods/`, `/containerLogs/...`, `/exec/...`, `/attach/...`,
//!   `/portForward/...` and `/logs/`, every request authenticated and authorized by
//!   [`auth`].

pub mod auth;
mod container_logs;
pub mod cri_log;
pub mod healthz;
mod host_logs;
mod lookup;
mod streaming;
pub mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use k8s_cri::v1::{ContainerState, PodSandboxState};
use k8s_openapi::List;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;
use tracing::{debug, warn};

use crate::cri::Cri;
use crate::kuberuntime::labels::{
    CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL,
};
use crate::metrics;
use crate::pod_manager::PodManager;
use crate::stats::SummaryProvider;
use crate::status::StatusManager;

/// What the handlers read.
#[derive(Clone)]
pub struct ServerState {
    /// Desired pods.
    pub pod_manager: Arc<PodManager>,
    /// Their statuses.
    pub status_manager: Arc<StatusManager>,
    /// The runtime (streaming URLs, container status, running pods).
    pub cri: Arc<dyn Cri>,
    /// Summary API figures.
    pub summary: SummaryProvider,
    /// Root of pod log directories (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// Directory served at `/logs/` (`/var/log`).
    pub log_root: PathBuf,
}

/// The router of the read-only port.
pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/pods", get(pods))
        .route("/stats/summary", get(stats_summary))
        .route("/metrics", get(kubelet_metrics))
        .route("/metrics/resource", get(resource_metrics))
        .with_state(state)
}

/// The router of the main port: the read-only endpoints and the node-admin ones.
pub fn main_router(state: ServerState) -> Router {
    Router::new()
        .route("/runningpods/", get(running_pods))
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(container_logs::container_logs),
        )
        .route("/exec/{namespace}/{pod}/{container}", any(streaming::exec))
        .route(
            "/attach/{namespace}/{pod}/{container}",
            any(streaming::attach),
        )
        .route(
            "/portForward/{namespace}/{pod}",
            any(streaming::port_forward),
        )
        .route("/logs", get(host_logs::logs))
        .route("/logs/", get(host_logs::logs))
        .route("/logs/{*path}", get(host_logs::logs))
        .with_state(state.clone())
        .merge(router(state))
}

/// Binds `addr` (errors if the port is taken).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves `app` over TLS on `listener` until the task is dropped: HTTP/1.1 with
/// connection upgrades (for the streaming endpoints). Handshake and connection errors
/// only end that connection.
pub async fn serve_tls(listener: TcpListener, tls: Arc<rustls::ServerConfig>, app: Router) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                warn!(error = %e, "accepting a connection on the kubelet port");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(tls) => tls,
                Err(e) => {
                    debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            // The client's certificates, for the authenticator of every request.
            let certificates = tls.get_ref().1.peer_certificates().map(|chain| {
                auth::authn::PeerCertificates(Arc::new(
                    chain.iter().map(|c| c.clone().into_owned()).collect(),
                ))
            });
            let service = TowerToHyperService::new(app.map_request(
                move |mut request: axum::http::Request<hyper::body::Incoming>| {
                    if let Some(certificates) = &certificates {
                        request.extensions_mut().insert(certificates.clone());
                    }
                    request
                },
            ));
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .with_upgrades();
            if let Err(e) = conn.await {
                debug!(%peer, error = %e, "kubelet connection ended");
            }
        });
    }
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

/// `/runningpods/`: the pods the runtime is running (a ready sandbox or a running
/// container), as upstream's `podToAPIPod`: name, namespace, UID and each running
/// container's name and image.
async fn running_pods(State(state): State<ServerState>) -> Response {
    let (sandboxes, containers) = match crate::cri::list_all(&*state.cri).await {
        Ok(lists) => lists,
        Err(e) => {
            return (StatusCode::INTERNAL_SERVER_ERROR, e.message().to_owned()).into_response();
        }
    };
    let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
    for s in sandboxes
        .iter()
        .filter(|s| s.state == PodSandboxState::SandboxReady as i32)
    {
        running_pod(&mut pods, &s.labels);
    }
    for c in containers
        .iter()
        .filter(|c| c.state == ContainerState::ContainerRunning as i32)
    {
        if let Some(spec) = running_pod(&mut pods, &c.labels).and_then(|p| p.spec.as_mut()) {
            spec.containers.push(Container {
                name: c
                    .labels
                    .get(CONTAINER_NAME_LABEL)
                    .cloned()
                    .unwrap_or_default(),
                image: c.image.as_ref().map(|i| i.image.clone()),
                ..Default::default()
            });
        }
    }
    Json(List {
        items: pods.into_values().collect(),
        metadata: Default::default(),
    })
    .into_response()
}

/// The entry of the pod a sandbox or container is labelled with, created on first use.
fn running_pod<'a>(
    pods: &'a mut BTreeMap<String, Pod>,
    labels: &std::collections::HashMap<String, String>,
) -> Option<&'a mut Pod> {
    let uid = labels.get(POD_UID_LABEL)?;
    Some(pods.entry(uid.clone()).or_insert_with(|| Pod {
        metadata: ObjectMeta {
            name: labels.get(POD_NAME_LABEL).cloned(),
            namespace: labels.get(POD_NAMESPACE_LABEL).cloned(),
            uid: Some(uid.clone()),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        ..Default::default()
    }))
}

/// `/stats/summary` (the Summary API).
async fn stats_summary(State(state): State<ServerState>) -> Response {
    match state.summary.summary().await {
        Ok(summary) => Json(summary).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to get summary stats: {}", e.message()),
        )
            .into_response(),
    }
}

/// `/metrics`: the kubelet's own metrics.
async fn kubelet_metrics(State(state): State<ServerState>) -> Response {
    let text = metrics::metrics().encode(state.cri.as_ref()).await;
    (
        [(header::CONTENT_TYPE, metrics::OPENMETRICS_CONTENT_TYPE)],
        text,
    )
        .into_response()
}

/// `/metrics/resource`: CPU and memory of the node, pods and containers.
async fn resource_metrics(State(state): State<ServerState>) -> Response {
    let summary = state.summary.summary().await.ok();
    let text = metrics::resource::encode(summary.as_ref());
    (
        [(header::CONTENT_TYPE, metrics::resource::TEXT_CONTENT_TYPE)],
        text,
    )
        .into_response()
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
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cri: Arc<dyn Cri> = Arc::new(crate::cri::fake::FakeCri::default());
        let app = router(ServerState {
            pod_manager,
            status_manager,
            summary: SummaryProvider::new(
                cri.clone(),
                "n".into(),
                "/".into(),
                "/var/log/pods".into(),
            ),
            cri,
            pod_logs_dir: "/var/log/pods".into(),
            log_root: "/var/log".into(),
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
