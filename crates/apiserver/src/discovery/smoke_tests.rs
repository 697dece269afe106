//! Real kubectl (1.27 and 1.33) against the discovery and OpenAPI routers, with a minimal
//! in-memory stand-in for the resource endpoints: `version`, `api-versions`,
//! `api-resources`, `explain`, `get`, `create` and `apply` with the default
//! `--validate=strict`. The full API is the end-to-end suite's.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Value, json};

use crate::error::ApiError;

/// The kubectl releases the server must serve.
const KUBECTLS: [&str; 2] = ["1.27", "1.33"];

/// Every request (`METHOD /path?query`, Accept) the server saw.
type Log = Arc<Mutex<Vec<(String, String)>>>;
/// Objects by their item path.
type Store = Arc<Mutex<BTreeMap<String, Value>>>;

/// The stand-in for the REST layer: creates store the body, gets and patches return what
/// is stored, lists return the stored items of the collection.
async fn objects(State(store): State<Store>, request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let body = axum::body::to_bytes(request.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    let mut store = store.lock().unwrap();
    let not_found = || ApiError::new(404, "NotFound", format!("{path} not found")).into_response();
    match method {
        Method::GET => match store.get(&path) {
            Some(object) => axum::Json(object.clone()).into_response(),
            None if path.ends_with('s') => {
                let prefix = format!("{path}/");
                let items: Vec<Value> = store
                    .iter()
                    .filter(|(k, _)| k.starts_with(&prefix))
                    .map(|(_, v)| v.clone())
                    .collect();
                axum::Json(json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items})).into_response()
            }
            None => not_found(),
        },
        Method::POST => {
            let Ok(object) = serde_json::from_slice::<Value>(&body) else {
                return ApiError::bad_request("not JSON").into_response();
            };
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            store.insert(format!("{path}/{name}"), object.clone());
            (StatusCode::CREATED, axum::Json(object)).into_response()
        }
        Method::PATCH => match store.get(&path) {
            Some(object) => axum::Json(object.clone()).into_response(),
            None => not_found(),
        },
        _ => ApiError::new(405, "MethodNotAllowed", "not here").into_response(),
    }
}

/// Serves discovery, OpenAPI and the stand-in on a local port.
async fn serve() -> (String, Log) {
    let registry = super::testing::registry();
    let log: Log = Arc::default();
    let store: Store = Arc::default();
    let logged = log.clone();
    // The REST layer's own route patterns, to prove the routers merge with them.
    let rest: Router = Router::new()
        .route("/api/v1/{*path}", any(objects))
        .route("/apis/{group}/{version}/{*path}", any(objects))
        .with_state(store);
    let app: Router = super::router(
        crate::registry::LiveRegistry::shared(registry.clone()),
        super::testing::addresses(),
    )
    .merge(crate::openapi::router(
        crate::registry::LiveRegistry::shared(registry.clone()),
    ))
    .merge(rest)
    .layer(axum::middleware::from_fn(
        move |request: Request<Body>, next: Next| {
            let log = logged.clone();
            async move {
                let accept = request
                    .headers()
                    .get("accept")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                log.lock()
                    .unwrap()
                    .push((format!("{} {}", request.method(), request.uri()), accept));
                next.run(request).await
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), log)
}

/// Runs kubectl `release` with a kubeconfig for `server` and caches under `home`;
/// returns stdout and stderr, failing the test on a non-zero exit.
fn kubectl(release: &str, home: &Path, server: &str, args: &[&str]) -> (String, String) {
    let binary = format!("/usr/lib/google-cloud-sdk/bin/kubectl.{release}");
    let kubeconfig = home.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {server}\n\
             contexts:\n- name: t\n  context:\n    cluster: t\n    user: u\n    namespace: default\n\
             current-context: t\nusers:\n- name: u\n  user:\n    token: test\n"
        ),
    )
    .unwrap();
    let output = Command::new(&binary)
        .args(["--kubeconfig", &kubeconfig.to_string_lossy()])
        .args(["--cache-dir", &home.join("cache").to_string_lossy()])
        .args(args)
        .env("HOME", home)
        .output()
        .unwrap_or_else(|e| panic!("{binary}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "kubectl {release} {args:?}: {stderr}\n{stdout}"
    );
    (stdout, stderr)
}

fn write(home: &Path, name: &str, manifest: &str) -> String {
    let path = home.join(name);
    std::fs::write(&path, manifest).unwrap();
    path.to_string_lossy().into_owned()
}

const CONFIGMAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: smoke\ndata:\n  a: b\n";
const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx\n        ports:\n        - containerPort: 80\n";

fn smoke(release: &str, server: &str, log: &Log) {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let run = |args: &[&str]| kubectl(release, home, server, args).0;
    // A client-side apply computes its patch from the kind's OpenAPI schema (v2 in 1.27,
    // v3 in 1.33) and warns, or logs at -v=5, when it cannot and falls back.
    let apply = |file: &str| {
        let (stdout, stderr) = kubectl(release, home, server, &["apply", "-f", file, "-v=5"]);
        for complaint in ["error calculating patch", "OpenAPI V3 path"] {
            assert!(!stderr.contains(complaint), "{stderr}");
        }
        stdout
    };

    let version: Value = serde_json::from_str(&run(&["version", "-o", "json"])).unwrap();
    assert_eq!(version["serverVersion"]["gitVersion"], "v1.37.0+skiff");

    assert_eq!(run(&["api-versions"]), "apps/v1\nv1\n");

    let resources = run(&["api-resources", "--no-headers"]);
    let rows: Vec<Vec<&str>> = resources
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows.contains(&vec!["pods", "po", "v1", "true", "Pod"]),
        "{resources}"
    );
    assert!(
        rows.contains(&vec!["namespaces", "ns", "v1", "false", "Namespace"]),
        "{resources}"
    );
    assert!(
        rows.contains(&vec![
            "deployments",
            "deploy",
            "apps/v1",
            "true",
            "Deployment"
        ]),
        "{resources}"
    );

    let explain = run(&["explain", "pods.spec.containers"]);
    assert!(
        explain.contains("KIND:") && explain.contains("Pod"),
        "{explain}"
    );
    assert!(explain.contains("containers"), "{explain}");
    assert!(explain.contains("imagePullPolicy"), "{explain}");
    let explain = run(&[
        "explain",
        "deployments.spec.template.spec.containers.resources.limits",
    ]);
    assert!(explain.contains("Quantity"), "{explain}");
    // The OpenAPI v2 form (protobuf), as kubectl explain read it before v3.
    let explain = run(&[
        "explain",
        "deployments.spec",
        "--output=plaintext-openapiv2",
    ]);
    assert!(explain.contains("RESOURCE: spec <Object>"), "{explain}");
    assert!(explain.contains("replicas\t<integer>"), "{explain}");

    assert!(run(&["get", "configmaps"]).is_empty());

    let configmap = write(home, "cm.yaml", CONFIGMAP);
    assert_eq!(
        run(&["create", "-f", &configmap]),
        "configmap/smoke created\n"
    );
    let deployment = write(home, "deploy.yaml", DEPLOYMENT);
    assert_eq!(apply(&deployment), "deployment.apps/web created\n");
    let changed = write(
        home,
        "deploy2.yaml",
        &DEPLOYMENT.replace("nginx", "nginx:2"),
    );
    assert_eq!(apply(&changed), "deployment.apps/web configured\n");

    let log = log.lock().unwrap();
    // kubectl left validation to the server: it saw fieldValidation on PATCH in OpenAPI.
    let create = log
        .iter()
        .find(|(r, _)| r.starts_with("POST /api/v1/namespaces/default/configmaps"))
        .unwrap();
    assert!(create.0.contains("fieldValidation=Strict"), "{create:?}");
    let patch = log
        .iter()
        .find(|(r, _)| r.starts_with("PATCH /apis/apps/v1/namespaces/default/deployments/web"))
        .unwrap();
    assert!(patch.0.contains("fieldValidation=Strict"), "{patch:?}");
    // The v2 explain fetched the protobuf OpenAPI v2 document and parsed it.
    assert!(
        log.iter()
            .any(|(r, accept)| r.starts_with("GET /openapi/v2?") && accept.contains("protobuf")),
        "{log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_discovers_explains_creates_and_applies() {
    for release in KUBECTLS {
        let (server, log) = serve().await;
        tokio::task::spawn_blocking(move || smoke(release, &server, &log))
            .await
            .unwrap();
    }
}
