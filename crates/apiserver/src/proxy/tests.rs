//! The `proxy` subresources through the REST layer: a pod and a service reaching an
//! in-process HTTP server on 127.0.0.1 (the pod's IP), a node reaching a fake kubelet over
//! TLS with the kubelet client, an upgrade spliced through, and upstream's errors.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::config::ClusterConfig;
use crate::proxy::KubeletClient;
use crate::registry::Registry;
use crate::rest::{State, router};

/// The test backend: answers every request with what it received, `/moved` with a
/// redirect, and `/upgrade` by switching to an echo protocol.
fn backend() -> Router {
    Router::new().fallback(echo)
}

async fn echo(mut request: Request) -> Response {
    {
        let path = request.uri().path().to_owned();
        if path == "/moved" {
            return (StatusCode::FOUND, [("location", "/landing")]).into_response();
        }
        if path == "/upgrade" {
            let upgrade = hyper::upgrade::on(&mut request);
            tokio::spawn(async move {
                let Ok(upgraded) = upgrade.await else { return };
                let mut io = TokioIo::new(upgraded);
                let mut buf = [0u8; 64];
                if let Ok(n) = io.read(&mut buf).await {
                    let mut reply = b"echo:".to_vec();
                    reply.extend_from_slice(&buf[..n]);
                    let _ = io.write_all(&reply).await;
                }
            });
            return Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .header("connection", "upgrade")
                .header("upgrade", "test-echo")
                .body(Body::empty())
                .unwrap();
        }
        let (parts, body) = request.into_parts();
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let seen = json!({
            "method": parts.method.as_str(),
            "path": path,
            "query": parts.uri.query(),
            "forwardedUri": header("x-forwarded-uri"),
            "authorization": header("authorization"),
            "custom": header("x-custom"),
        });
        let body = axum::body::to_bytes(body, 1 << 20)
            .await
            .unwrap_or_default();
        let mut seen = seen;
        seen["body"] = String::from_utf8_lossy(&body).into_owned().into();
        axum::Json(seen).into_response()
    }
}

/// Serves [`backend`] on 127.0.0.1; returns its port.
async fn start_backend() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, backend()).await });
    port
}

/// Serves [`backend`] over TLS on 127.0.0.1 (a kubelet with a self-signed certificate);
/// returns its port.
async fn start_tls_backend() -> u16 {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        backend().oneshot(request.map(Body::new))
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection_with_upgrades(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

/// A kubelet client with a throwaway client certificate.
fn kubelet_client() -> KubeletClient {
    let cert = rcgen::generate_simple_self_signed(vec!["kube-apiserver".to_owned()]).unwrap();
    KubeletClient::new(&skiff_bootstrap::pki::CertKey {
        cert_pem: cert.cert.pem(),
        key_pem: cert.signing_key.serialize_pem(),
    })
    .unwrap()
}

struct Api {
    app: Router,
    _dir: tempfile::TempDir,
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl Api {
    /// The built-in registry on a temporary store, with namespace `default` and a kubelet
    /// client.
    async fn start() -> Api {
        let dir = tempfile::tempdir().unwrap();
        let storage = crate::storage::open(&crate::storage::StorageConfig::new(dir.path()))
            .await
            .unwrap();
        let config = ClusterConfig {
            kubelet_client: Some(Arc::new(kubelet_client())),
            ..ClusterConfig::default()
        };
        let state = Arc::new(State::new(Registry::builtin(), storage, config));
        let api = Api {
            app: router(state),
            _dir: dir,
        };
        let created = api
            .send(
                "POST",
                "/api/v1/namespaces",
                json!({"metadata": {"name": "default"}}),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        api
    }

    async fn send(&self, method: &str, uri: &str, body: Value) -> Reply {
        let body = if body.is_null() {
            Body::empty()
        } else {
            Body::from(body.to_string())
        };
        self.request(method, uri, &[("content-type", "application/json")], body)
            .await
    }

    async fn request(
        &self,
        method: &str,
        uri: &str,
        headers: &[(&str, &str)],
        body: Body,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = self
            .app
            .clone()
            .oneshot(request.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Reply {
            status,
            headers,
            body,
        }
    }

    /// Creates pod `name` with one container port and sets its IP.
    async fn pod(&self, name: &str, ip: &str, container_port: u16) {
        let pods = "/api/v1/namespaces/default/pods";
        let pod = json!({
            "metadata": {"name": name},
            "spec": {"containers": [{
                "name": "c", "image": "nginx",
                "ports": [{"containerPort": container_port}],
            }]},
        });
        let created = self.send("POST", pods, pod).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        let status = json!({"status": {"podIP": ip, "podIPs": [{"ip": ip}]}});
        let patched = self
            .request(
                "PATCH",
                &format!("{pods}/{name}/status"),
                &[("content-type", "application/merge-patch+json")],
                Body::from(status.to_string()),
            )
            .await;
        assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    }
}

#[tokio::test]
async fn pods_proxy_reaches_the_pod() {
    let port = start_backend().await;
    let api = Api::start().await;
    api.pod("web", "127.0.0.1", port).await;
    let base = "/api/v1/namespaces/default/pods";

    // The declared container port, a subpath and the query (with parameters the API
    // server itself would reject) pass through; the credentials do not.
    let reply = api
        .request(
            "GET",
            &format!("{base}/web/proxy/a/b/?x=1&limit=abc"),
            &[
                ("authorization", "Bearer secret"),
                ("accept", "text/html"),
                ("x-custom", "kept"),
            ],
            Body::empty(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["method"], "GET");
    assert_eq!(reply.body["path"], "/a/b/");
    assert_eq!(reply.body["query"], "x=1&limit=abc");
    assert_eq!(reply.body["custom"], "kept");
    assert_eq!(reply.body["authorization"], Value::Null);
    assert_eq!(reply.body["forwardedUri"], format!("{base}/web/proxy/a/b/"));

    // An explicit port, a POST body.
    let reply = api
        .request(
            "POST",
            &format!("{base}/http:web:{port}/proxy/submit"),
            &[("content-type", "text/plain")],
            Body::from("hello"),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["method"], "POST");
    assert_eq!(reply.body["path"], "/submit");
    assert_eq!(reply.body["body"], "hello");

    // `proxy` alone redirects to `proxy/`; a backend redirect stays under the proxy path.
    let reply = api
        .send("GET", &format!("{base}/web/proxy?q=1"), Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(
        reply.headers["location"],
        format!("{base}/web/proxy/?q=1").as_str()
    );
    let reply = api
        .send("GET", &format!("{base}/web/proxy/moved"), Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::FOUND);
    assert_eq!(
        reply.headers["location"],
        format!("{base}/web/proxy/landing").as_str()
    );

    // Upstream's errors.
    let reply = api
        .send("GET", &format!("{base}/ftp:web:21/proxy/"), Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.body["message"], r#"invalid pod request "ftp:web:21""#);
    let reply = api
        .send("GET", &format!("{base}/nope/proxy/"), Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.body["message"], r#"pods "nope" not found"#);
    let reply = api
        .send("GET", &format!("{base}/web:notaport/proxy/"), Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        reply.body["message"],
        "error trying to reach service: dial tcp: lookup tcp/notaport: unknown port"
    );
    api.pod("meta", "169.254.169.254", 80).await;
    let reply = api
        .send("GET", &format!("{base}/meta/proxy/"), Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.body["message"], "address not allowed");
}

#[tokio::test]
async fn services_proxy_reaches_an_endpoint() {
    let port = start_backend().await;
    let api = Api::start().await;
    api.pod("web-1", "127.0.0.1", port).await;
    let services = "/api/v1/namespaces/default/services";
    let service = json!({
        "metadata": {"name": "web"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]},
    });
    let created = api.send("POST", services, service).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);

    // Neither Endpoints nor EndpointSlices: upstream's 404 for the Endpoints.
    let reply = api
        .send("GET", &format!("{services}/web:80/proxy/"), Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);

    // Endpoints without subsets: 503.
    let endpoints = "/api/v1/namespaces/default/endpoints";
    let created = api
        .send("POST", endpoints, json!({"metadata": {"name": "web"}}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let reply = api
        .send("GET", &format!("{services}/web/proxy/"), Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        reply.body["message"],
        r#"no endpoints available for service "web""#
    );

    // An address of the pod on the named port.
    let subsets = json!({"subsets": [{
        "addresses": [{"ip": "127.0.0.1", "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-1"}}],
        "ports": [{"name": "http", "port": port}],
    }]});
    let patched = api
        .request(
            "PATCH",
            &format!("{endpoints}/web"),
            &[("content-type", "application/merge-patch+json")],
            Body::from(subsets.to_string()),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    for id in ["web:80", "web:http", "http:web:http"] {
        let reply = api
            .send(
                "GET",
                &format!("{services}/{id}/proxy/api/items?page=2"),
                Value::Null,
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{id}: {}", reply.body);
        assert_eq!(reply.body["path"], "/api/items");
        assert_eq!(reply.body["query"], "page=2");
    }
    let reply = api
        .send(
            "DELETE",
            &format!("{services}/web:80/proxy/items/1"),
            Value::Null,
        )
        .await;
    assert_eq!(reply.body["method"], "DELETE");

    // A port the service does not declare; an endpoint port of another name.
    let reply = api
        .send("GET", &format!("{services}/web:81/proxy/"), Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        reply.body["message"],
        r#"no service port 81 found for service "web""#
    );
    let reply = api
        .send(
            "GET",
            &format!("{services}/web:metrics/proxy/"),
            Value::Null,
        )
        .await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        reply.body["message"],
        r#"no endpoints available for service "web:metrics""#
    );

    // Without an Endpoints object, the service's EndpointSlices (validation keeps
    // loopback addresses out of them, so a slice whose only endpoint is not ready).
    let deleted = api
        .send("DELETE", &format!("{endpoints}/web"), Value::Null)
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    let slice = json!({
        "metadata": {"name": "web-abc", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{
            "addresses": ["192.0.2.10"],
            "conditions": {"ready": false},
            "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-1"},
        }],
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
    });
    let created = api
        .send(
            "POST",
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            slice,
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let reply = api
        .send("GET", &format!("{services}/web:80/proxy/"), Value::Null)
        .await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.body
    );
    assert_eq!(
        reply.body["message"],
        r#"no endpoints available for service "web:80""#
    );
}

#[tokio::test]
async fn nodes_proxy_reaches_the_kubelet() {
    let kubelet_port = start_tls_backend().await;
    let other_port = start_backend().await;
    let api = Api::start().await;
    let node = json!({
        "metadata": {"name": "n1"},
        "status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        },
    });
    let created = api.send("POST", "/api/v1/nodes", node).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let patched = api
        .request(
            "PATCH",
            "/api/v1/nodes/n1/status",
            &[("content-type", "application/merge-patch+json")],
            Body::from(
                json!({"status": {
                    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
                }})
                .to_string(),
            ),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);

    // The kubelet's HTTPS API through the kubelet client.
    let reply = api
        .send("GET", "/api/v1/nodes/n1/proxy/metrics?x=1", Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["path"], "/metrics");
    assert_eq!(reply.body["query"], "x=1");
    assert_eq!(reply.body["forwardedUri"], "/api/v1/nodes/n1/proxy/metrics");
    // Another port of the node: plain HTTP.
    let reply = api
        .send(
            "GET",
            &format!("/api/v1/nodes/n1:{other_port}/proxy/healthz"),
            Value::Null,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["path"], "/healthz");
    let reply = api
        .send("GET", "/api/v1/nodes/n2/proxy/", Value::Null)
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.body["message"], r#"nodes "n2" not found"#);
}

#[tokio::test]
async fn upgrades_are_spliced_through() {
    let port = start_backend().await;
    let api = Api::start().await;
    api.pod("web", "127.0.0.1", port).await;
    // The API server on a real connection, so the client side can upgrade too.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = api.app.clone();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mut tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = "GET /api/v1/namespaces/default/pods/web/proxy/upgrade HTTP/1.1\r\n\
                   Host: api\r\nConnection: Upgrade\r\nUpgrade: test-echo\r\n\r\n";
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(tcp.read(&mut byte).await.unwrap(), 1, "connection closed");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: test-echo"), "{head}");
    tcp.write_all(b"ping").await.unwrap();
    let mut reply = [0u8; 9];
    tcp.read_exact(&mut reply).await.unwrap();
    assert_eq!(&reply, b"echo:ping");
}
