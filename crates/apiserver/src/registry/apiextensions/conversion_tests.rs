//! Conversion webhooks end to end through the REST layer: a definition whose v1 (stored)
//! and v2 differ (`spec.cronSpec` / `spec.schedule`) converts through a webhook served
//! over TLS in the test (a certificate of a test CA, the CA as `caBundle`), by `url` and by
//! `service`; reads, lists and watches of v2 see converted objects, a create through v2 is
//! stored as v1, and a webhook that fails gives upstream's errors and stores nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use base64::Engine;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::registry::testing::{Reply, Server};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CRD: &str =
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com";
const V1: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";
const V2: &str = "/apis/stable.example.com/v2/namespaces/default/crontabs";
const STORED: &str = "/registry/stable.example.com/crontabs/default/";

/// How the test webhook answers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Convert,
    WrongUid,
    Garbage,
    Failure,
}

/// The test webhook: its port, CA (PEM), answer mode and call count.
struct Webhook {
    port: u16,
    ca_pem: String,
    mode: Arc<Mutex<Mode>>,
    calls: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Webhook {
    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn client_config(&self) -> Value {
        json!({
            "url": format!("https://127.0.0.1:{}/convert", self.port),
            "caBundle": base64::engine::general_purpose::STANDARD.encode(&self.ca_pem),
        })
    }
}

/// v1 `spec.cronSpec` is v2 `spec.schedule`.
fn convert_object(mut object: Value, desired: &str) -> Value {
    let spec = object["spec"].as_object_mut().cloned().unwrap_or_default();
    let mut converted = serde_json::Map::new();
    for (key, value) in spec {
        let key = match (desired, key.as_str()) {
            ("stable.example.com/v2", "cronSpec") => "schedule".to_owned(),
            ("stable.example.com/v1", "schedule") => "cronSpec".to_owned(),
            _ => key,
        };
        converted.insert(key, value);
    }
    object["spec"] = Value::Object(converted);
    object["apiVersion"] = desired.into();
    // Metadata other than labels and annotations is not the webhook's to change.
    object["metadata"]["generation"] = json!(99);
    object["metadata"]["labels"]["converted"] = json!("true");
    object
}

fn answer(mode: Mode, review: &Value) -> String {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or("");
    let objects: Vec<Value> = request["objects"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|o| convert_object(o, desired))
        .collect();
    let (uid, result) = match mode {
        Mode::Garbage => return "this is not JSON".to_owned(),
        Mode::Convert => (request["uid"].clone(), json!({"status": "Success"})),
        Mode::WrongUid => (json!("not-the-uid"), json!({"status": "Success"})),
        Mode::Failure => (
            request["uid"].clone(),
            json!({"status": "Failure", "message": "cannot convert today"}),
        ),
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {"uid": uid, "result": result, "convertedObjects": objects}
    })
    .to_string()
}

/// Serves the webhook over TLS on 127.0.0.1 with a certificate (for `127.0.0.1` and
/// `conv.default.svc`) of a fresh CA.
async fn start_webhook() -> Webhook {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "webhook-ca");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "conv.default.svc".to_owned()])
            .unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mode = Arc::new(Mutex::new(Mode::Convert));
    let calls = Arc::new(AtomicUsize::new(0));
    let app = {
        let (mode, calls) = (mode.clone(), calls.clone());
        axum::Router::new().route(
            "/convert",
            axum::routing::post(move |body: axum::body::Bytes| {
                let (mode, calls) = (mode.clone(), calls.clone());
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let review: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let mode = *mode.lock().unwrap();
                    (
                        [("content-type", "application/json")],
                        answer(mode, &review),
                    )
                }
            }),
        )
    };
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        app.clone().oneshot(request.map(axum::body::Body::new))
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Webhook {
        port,
        ca_pem: ca.pem(),
        mode,
        calls,
        task,
    }
}

fn definition(client_config: Value) -> Value {
    let version = |name: &str, storage: bool, field: &str| {
        json!({
            "name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    field: {"type": "string"},
                    "replicas": {"type": "integer", "default": 1}
                }}}
            }}
        })
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": [version("v1", true, "cronSpec"), version("v2", false, "schedule")],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {"clientConfig": client_config, "conversionReviewVersions": ["v1", "v1beta1"]}
            }
        }
    })
}

/// Starts a server with the controller and the definition, served in both versions.
async fn serve(client_config: Value) -> Server {
    let server = Server::start().await;
    tokio::spawn(super::controller::run(server.state.clone()));
    let created = server.send("POST", CRDS, &definition(client_config)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let wait = server.state.registry.wait_for(|registry| {
        registry
            .lookup("stable.example.com", "v2", "crontabs")
            .is_some()
    });
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("crontabs served");
    server
}

fn crontab(api_version: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": "CronTab", "metadata": {"name": name}, "spec": spec})
}

/// The object as stored, or `None`.
async fn stored(server: &Server, name: &str) -> Option<Value> {
    let kv = server
        .state
        .storage
        .get(&format!("{STORED}{name}"))
        .await
        .unwrap()?;
    Some(serde_json::from_slice(&kv.value).unwrap())
}

fn message(reply: &Reply) -> &str {
    reply.body["message"].as_str().unwrap_or_default()
}

/// The events of a watch that ends by its timeout, as JSON.
async fn watch_events(server: &Server, uri: &str) -> Vec<Value> {
    let reply = server.send("GET", uri, &Value::Null).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let text = match reply.body {
        Value::String(text) => text,
        one => one.to_string(),
    };
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn a_conversion_webhook_serves_every_version_from_the_stored_one() {
    let webhook = start_webhook().await;
    let server = serve(webhook.client_config()).await;

    // A v1 object is stored as is: no call.
    let created = server
        .send(
            "POST",
            V1,
            &crontab(
                "stable.example.com/v1",
                "a",
                json!({"cronSpec": "* * * * */5"}),
            ),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(webhook.calls(), 0);
    let uid = created.body["metadata"]["uid"].clone();
    let rv = created.body["metadata"]["resourceVersion"].clone();

    // Read as v2 through the webhook; metadata stays the stored one but for labels.
    let got = server.send("GET", &format!("{V2}/a"), &Value::Null).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.body);
    assert_eq!(got.body["apiVersion"], "stable.example.com/v2");
    assert_eq!(
        got.body["spec"],
        json!({"schedule": "* * * * */5", "replicas": 1})
    );
    assert_eq!(got.body["metadata"]["uid"], uid);
    assert_eq!(got.body["metadata"]["resourceVersion"], rv);
    assert_eq!(got.body["metadata"]["generation"], 1);
    assert_eq!(got.body["metadata"]["labels"], json!({"converted": "true"}));
    assert_eq!(webhook.calls(), 1);

    // A create through v2 is stored as v1, converted by the webhook.
    let created = server
        .send(
            "POST",
            V2,
            &crontab(
                "stable.example.com/v2",
                "b",
                json!({"schedule": "0 * * * *"}),
            ),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["spec"]["schedule"], "0 * * * *");
    let raw = stored(&server, "b").await.expect("b stored");
    assert_eq!(raw["apiVersion"], "stable.example.com/v1");
    assert_eq!(raw["spec"], json!({"cronSpec": "0 * * * *", "replicas": 1}));
    let as_v1 = server.send("GET", &format!("{V1}/b"), &Value::Null).await;
    assert_eq!(
        as_v1.body["spec"]["cronSpec"], "0 * * * *",
        "{}",
        as_v1.body
    );

    // A list converts all its objects in one call.
    let before = webhook.calls();
    let list = server.send("GET", V2, &Value::Null).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert_eq!(list.body["kind"], "CronTabList");
    let schedules: Vec<&Value> = list.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| &item["spec"]["schedule"])
        .collect();
    assert_eq!(schedules, [&json!("* * * * */5"), &json!("0 * * * *")]);
    assert_eq!(webhook.calls(), before + 1);

    // A watch of v2 sees the changes converted.
    let from = list.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let patch = json!({"spec": {"cronSpec": "1 * * * *"}});
    let patched = server.send("PATCH", &format!("{V1}/a"), &patch).await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let events = watch_events(
        &server,
        &format!("{V2}?watch=1&resourceVersion={from}&timeoutSeconds=1"),
    )
    .await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "MODIFIED");
    assert_eq!(events[0]["object"]["apiVersion"], "stable.example.com/v2");
    assert_eq!(events[0]["object"]["spec"]["schedule"], "1 * * * *");

    // By service: resolved through its EndpointSlice to the webhook, verified as
    // conv.default.svc.
    let mut crd = server.send("GET", CRD, &Value::Null).await.body;
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = json!({
        "service": {"namespace": "default", "name": "conv", "path": "/convert"},
        "caBundle": webhook.client_config()["caBundle"],
    });
    let updated = server.send("PUT", CRD, &crd).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.body);
    let missing = "conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post \"https://conv.default.svc:443/convert?timeout=30s\": service \"conv\" not found";
    let mut reply = server.send("GET", &format!("{V2}/a"), &Value::Null).await;
    for _ in 0..100 {
        if message(&reply) == missing {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        reply = server.send("GET", &format!("{V2}/a"), &Value::Null).await;
    }
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(message(&reply), missing, "{}", reply.body);
    let service = json!({
        "metadata": {"name": "conv"},
        "spec": {"ports": [{"port": 443, "targetPort": webhook.port}]}
    });
    let created = server
        .send("POST", "/api/v1/namespaces/default/services", &service)
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    // Validation keeps loopback addresses out of EndpointSlices: the test writes its own.
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "conv-1", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "conv"}},
        "addressType": "IPv4",
        "ports": [{"port": webhook.port}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]
    });
    server
        .state
        .storage
        .create(
            "/registry/endpointslices/default/conv-1",
            serde_json::to_vec(&slice).unwrap(),
        )
        .await
        .unwrap();
    let got = server.send("GET", &format!("{V2}/a"), &Value::Null).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.body);
    assert_eq!(got.body["spec"]["schedule"], "1 * * * *");
}

#[tokio::test]
async fn a_failing_conversion_webhook_gives_upstream_errors_and_stores_nothing() {
    let webhook = start_webhook().await;
    let server = serve(webhook.client_config()).await;
    let created = server
        .send(
            "POST",
            V1,
            &crontab(
                "stable.example.com/v1",
                "a",
                json!({"cronSpec": "* * * * *"}),
            ),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let failed = "conversion webhook for stable.example.com/v1, Kind=CronTab failed: ";

    webhook.set(Mode::WrongUid);
    let reply = server.send("GET", &format!("{V2}/a"), &Value::Null).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    let text = message(&reply);
    assert!(
        text.starts_with(&format!("{failed}expected response.uid=\"")),
        "{text}"
    );
    assert!(text.ends_with("\", got \"not-the-uid\""), "{text}");

    webhook.set(Mode::Garbage);
    let reply = server.send("GET", &format!("{V2}/a"), &Value::Null).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    let text = message(&reply);
    assert!(
        text.starts_with(&format!(
            "{failed}couldn't get version/kind; json parse error: "
        )),
        "{text}"
    );

    webhook.set(Mode::Failure);
    let reply = server.send("GET", &format!("{V2}/a"), &Value::Null).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(message(&reply), format!("{failed}cannot convert today"));
    let list = server.send("GET", V2, &Value::Null).await;
    assert_eq!(list.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        message(&list),
        "conversion webhook for stable.example.com/v2, Kind=CronTabList failed: cannot convert today"
    );
    let create = server
        .send(
            "POST",
            V2,
            &crontab(
                "stable.example.com/v2",
                "b",
                json!({"schedule": "0 * * * *"}),
            ),
        )
        .await;
    assert_eq!(
        create.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        create.body
    );
    assert_eq!(
        message(&create),
        "conversion webhook for stable.example.com/v2, Kind=CronTab failed: cannot convert today"
    );
    assert_eq!(stored(&server, "b").await, None);

    // The webhook is down: client-go's dial error.
    let port = webhook.port;
    webhook.task.abort();
    let _ = webhook.task.await;
    let post = format!(
        "Post \"https://127.0.0.1:{port}/convert?timeout=30s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
    );
    let reply = server.send("GET", &format!("{V2}/a"), &Value::Null).await;
    assert_eq!(
        reply.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        reply.body
    );
    assert_eq!(reply.body["kind"], "Status");
    assert_eq!(message(&reply), format!("{failed}{post}"));
    let create = server
        .send(
            "POST",
            V2,
            &crontab(
                "stable.example.com/v2",
                "c",
                json!({"schedule": "0 * * * *"}),
            ),
        )
        .await;
    assert_eq!(
        create.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        create.body
    );
    assert_eq!(
        message(&create),
        format!("conversion webhook for stable.example.com/v2, Kind=CronTab failed: {post}")
    );
    assert_eq!(stored(&server, "c").await, None);
    // The stored version needs no webhook.
    let reply = server.send("GET", &format!("{V1}/a"), &Value::Null).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}
