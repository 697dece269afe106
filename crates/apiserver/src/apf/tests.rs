//! Classification against upstream's bootstrap configuration, the configuration consumer,
//! and the acceptance test: through the server's real stack over HTTP, one user's flood of
//! LISTs is rejected with 429s while another user's GETs keep their latency.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::request_info::RequestInfo;
use super::*;
use crate::authn::{AUTHENTICATED, Authenticator, CertificateUser, TokenIssuer, UNAUTHENTICATED};
use crate::config::ClusterConfig;
use crate::registry::{Objects, Registry};
use crate::rest::objects::ServerObjects;
use crate::storage::{self, Storage};

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.to_owned(),
        uid: String::new(),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
    }
}

async fn server_state(dir: &std::path::Path) -> Arc<crate::rest::State> {
    let storage: Arc<dyn Storage> = storage::open(&storage::StorageConfig::new(dir))
        .await
        .expect("the store");
    Arc::new(crate::rest::State::new(
        Registry::builtin(),
        storage,
        ClusterConfig::default(),
    ))
}

async fn bootstrap(state: &crate::rest::State) {
    let admin = crate::bootstrap::system_user();
    let objects = ServerObjects::new(state, &admin, false);
    crate::bootstrap::run(
        &state.registry.current(),
        &objects,
        crate::bootstrap::Endpoint {
            service_ip: "10.96.0.1".parse().unwrap(),
            advertise_address: "10.0.0.1".parse().unwrap(),
            port: 6443,
        },
    )
    .await
    .expect("bootstrap objects");
}

fn classify(config: &Config, method: Method, uri: &str, who: &UserInfo) -> (String, String) {
    let info = RequestInfo::parse(&method, &uri.parse().unwrap());
    let (schema, level) = config.classify(&info, who).expect("classified");
    (
        schema.metadata.name.clone().unwrap_or_default(),
        level.name.clone(),
    )
}

/// Upstream's bootstrap schemas: masters are exempt, kubelets are `system-nodes`, service
/// accounts `workload-low`, other users `global-default`, anonymous requests `catch-all`
/// (health checks `probes`, exempt); leader election has its own level.
#[tokio::test]
async fn classifies_with_the_bootstrap_configuration() {
    use skiff_api::flowcontrol::bootstrap as apf;
    let dir = tempfile::tempdir().unwrap();
    let apf_state = Apf::new(server_state(dir.path()).await, 600);
    let dangling = apf_state.apply(apf::flow_schemas(), apf::priority_levels());
    assert!(dangling.is_empty(), "{dangling:?}");
    let config = apf_state.config();

    let admin = user("system:admin", &["system:masters", AUTHENTICATED]);
    let kubelet = user("system:node:n1", &["system:nodes", AUTHENTICATED]);
    let service_account = user(
        "system:serviceaccount:default:builder",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            AUTHENTICATED,
        ],
    );
    let alice = user("alice", &[AUTHENTICATED]);
    let anonymous = user("system:anonymous", &[UNAUTHENTICATED]);
    let controller_manager = user("system:kube-controller-manager", &[AUTHENTICATED]);

    let pods = "/api/v1/namespaces/default/pods";
    let cases = [
        (&admin, Method::DELETE, pods, "exempt", "exempt"),
        (
            &kubelet,
            Method::GET,
            "/api/v1/nodes/n1",
            "system-node-high",
            "node-high",
        ),
        (&kubelet, Method::GET, pods, "system-nodes", "system"),
        (
            &service_account,
            Method::GET,
            pods,
            "service-accounts",
            "workload-low",
        ),
        (
            &alice,
            Method::GET,
            pods,
            "global-default",
            "global-default",
        ),
        (
            &alice,
            Method::GET,
            "/version",
            "global-default",
            "global-default",
        ),
        (
            &anonymous,
            Method::GET,
            pods,
            "global-default",
            "global-default",
        ),
        (&anonymous, Method::GET, "/readyz", "probes", "exempt"),
        (
            &controller_manager,
            Method::PUT,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager",
            "system-leader-election",
            "leader-election",
        ),
        (
            &controller_manager,
            Method::GET,
            "/api/v1/namespaces/default/pods",
            "kube-controller-manager",
            "workload-high",
        ),
    ];
    for (who, method, uri, schema, level) in cases {
        assert_eq!(
            classify(&config, method.clone(), uri, who),
            (schema.to_owned(), level.to_owned()),
            "{} {method} {uri}",
            who.name
        );
    }

    // Seats: ceil(600 x shares / 245).
    let limit = |name: &str| config.levels[name].concurrency_limit;
    assert_eq!(
        (
            limit("global-default"),
            limit("workload-low"),
            limit("catch-all")
        ),
        (49, 245, 13)
    );
    assert!(config.levels["exempt"].queues.is_none());
    assert_eq!(
        config.levels["catch-all"].queuing, None,
        "catch-all rejects"
    );
    assert_eq!(
        config.levels["global-default"].queuing,
        Some(QueuingConfig {
            queues: 128,
            hand_size: 6,
            queue_length_limit: 50
        })
    );

    // A schema naming a missing level dangles and is skipped; the mandatory objects are
    // imagined when missing.
    let mut odd = apf::flow_schemas()
        .into_iter()
        .find(|s| s.metadata.name.as_deref() == Some("global-default"))
        .unwrap();
    odd.spec.priority_level_configuration.name = "nowhere".into();
    assert_eq!(
        apf_state.apply(vec![odd], Vec::new()),
        vec!["global-default"]
    );
    let config = apf_state.config();
    assert_eq!(
        classify(&config, Method::GET, pods, &alice),
        ("catch-all".to_owned(), "catch-all".to_owned())
    );
    assert_eq!(
        classify(&config, Method::GET, pods, &admin),
        ("exempt".to_owned(), "exempt".to_owned())
    );
}

/// The consumer follows the stored objects: a new level and schema classify requests, and
/// a schema that names a missing level gets `Dangling=True` (and `False` once it exists).
#[tokio::test]
async fn follows_the_stored_configuration_and_marks_dangling_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let state = server_state(dir.path()).await;
    bootstrap(&state).await;
    let apf = Apf::new(state.clone(), 600);
    let consumer = tokio::spawn(controller::run(apf.clone()));
    let admin = crate::bootstrap::system_user();
    let objects = ServerObjects::new(&state, &admin, false);
    let schemas = GroupResource::new("flowcontrol.apiserver.k8s.io", "flowschemas");
    let levels = GroupResource::new(
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
    );
    objects
        .create(&schemas, None, test_schema("later", "not-yet"))
        .await
        .unwrap();
    let carol = user("carol", &[AUTHENTICATED]);
    let condition = |schema: Value| {
        let conditions = schema["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        conditions
            .into_iter()
            .find(|c| c["type"] == "Dangling")
            .map(|c| (c["status"].clone(), c["reason"].clone()))
    };
    let dangling = eventually(|| async {
        let schema = objects.get(&schemas, None, "later").await.ok()?;
        condition(schema).filter(|(status, _)| status == "True")
    })
    .await;
    assert_eq!(dangling.1, "NotFound");
    let bootstrap_schema = objects.get(&schemas, None, "global-default").await.unwrap();
    assert_eq!(
        condition(bootstrap_schema),
        Some((json!("False"), json!("Found")))
    );
    assert_eq!(
        classify(&apf.config(), Method::GET, "/api/v1/pods", &carol).0,
        "global-default"
    );

    objects
        .create(&levels, None, test_level("not-yet", 10, 4, 1, 2))
        .await
        .unwrap();
    eventually(|| async {
        let schema = objects.get(&schemas, None, "later").await.ok()?;
        condition(schema).filter(|(status, _)| status == "False")
    })
    .await;
    let (schema, level) = classify(&apf.config(), Method::GET, "/api/v1/pods", &carol);
    assert_eq!((schema.as_str(), level.as_str()), ("later", "not-yet"));
    consumer.abort();
}

async fn eventually<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "condition not reached in 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A schema for `carol`, `alice` and `bob`, by user, at precedence 500.
fn test_schema(name: &str, level: &str) -> Value {
    let user = |name: &str| json!({"kind": "User", "user": {"name": name}});
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": level},
            "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [user("carol"), user("alice"), user("bob")],
                "resourceRules": [{
                    "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                    "namespaces": ["*"], "clusterScope": true
                }],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
            }]
        }
    })
}

fn test_level(name: &str, shares: i32, queues: i32, hand: i32, length: i32) -> Value {
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": shares,
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length}
                }
            }
        }
    })
}

/// The server's router on a loopback port over plain HTTP/1.1; the `x-test-user` header
/// stands for the client certificate the TLS layer would have verified.
async fn serve_plain(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let app = app.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |mut request: hyper::Request<hyper::body::Incoming>| {
                        let name = request
                            .headers()
                            .get("x-test-user")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned);
                        let certificate = name.map(|name| user(&name, &[AUTHENTICATED]));
                        request
                            .extensions_mut()
                            .insert(CertificateUser(certificate));
                        app.clone().oneshot(request.map(Body::new))
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    addr
}

/// One request on a fresh connection: status, headers, body and latency.
async fn call(addr: SocketAddr, who: &str, path: &str) -> (StatusCode, HeaderMap, Bytes, Duration) {
    let started = Instant::now();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header("host", "apiserver")
        .header("x-test-user", who)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, body, started.elapsed())
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Whether the acceptance test runs with its schema on the exempt level (no APF), to see
/// the latency it guards against: `SKIFF_APF_TEST_EXEMPT=1`.
fn exempt_for_comparison() -> bool {
    std::env::var_os("SKIFF_APF_TEST_EXEMPT").is_some()
}

/// The acceptance test. `alice` and `bob` share a priority level of 1 seat (a server of 2
/// seats, the level holding half the shares) with 16 queues, hands of 2 and 4 places per
/// queue. Alice floods it with 64 concurrent LISTs of 1.5 MB of ConfigMaps; bob sends GETs
/// one after another. Alice gets 429s with `Retry-After` and the classification headers;
/// all of bob's GETs succeed and their median latency stays low, because fair queuing
/// dispatches bob's queue next whenever a seat frees up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_lists_from_one_user_does_not_starve_another() {
    let dir = tempfile::tempdir().unwrap();
    let state = server_state(dir.path()).await;
    bootstrap(&state).await;
    let admin = crate::bootstrap::system_user();
    let objects = ServerObjects::new(&state, &admin, false);
    let level_name = if exempt_for_comparison() {
        "exempt"
    } else {
        "apf-test"
    };
    objects
        .create(
            &GroupResource::new(
                "flowcontrol.apiserver.k8s.io",
                "prioritylevelconfigurations",
            ),
            None,
            test_level("apf-test", 245, 16, 2, 4),
        )
        .await
        .unwrap();
    objects
        .create(
            &GroupResource::new("flowcontrol.apiserver.k8s.io", "flowschemas"),
            None,
            test_schema("apf-test", level_name),
        )
        .await
        .unwrap();
    let configmaps = GroupResource::new("", "configmaps");
    let filler = "x".repeat(10_000);
    for i in 0..150 {
        let configmap = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": "default"},
            "data": {"filler": filler},
        });
        objects
            .create(&configmaps, Some("default"), configmap)
            .await
            .unwrap();
    }

    let apf = Apf::new(state.clone(), 2);
    let consumer = tokio::spawn(controller::run(apf.clone()));
    let bob = user("bob", &[AUTHENTICATED]);
    eventually(|| async {
        let config = apf.config();
        let (schema, _) = classify(&config, Method::GET, "/api/v1/pods", &bob);
        (schema == "apf-test").then_some(())
    })
    .await;
    assert_eq!(apf.config().levels["apf-test"].concurrency_limit, 1);
    // Alice and bob have hands of their own.
    let dealer = super::shuffle::Dealer::new(16, 2).unwrap();
    let hand = |who: &str| dealer.deal(matching::hash_flow_id("apf-test", who));
    assert!(hand("alice").iter().all(|q| !hand("bob").contains(q)));

    let key = Arc::new(rcgen::KeyPair::generate().unwrap().serialize_pem());
    let tokens = TokenIssuer::new("https://kubernetes.default.svc", &key).unwrap();
    let authenticator = Arc::new(Authenticator::new(
        Arc::new(TokenIssuer::new("https://kubernetes.default.svc", &key).unwrap()),
        state.storage.clone(),
    ));
    let app = crate::server::app(
        &state,
        &tokens,
        authenticator,
        apf.clone(),
        crate::health::Health::new(state.storage.clone()),
        crate::discovery::ServerAddresses::new(
            "127.0.0.1".parse().unwrap(),
            6443,
            "10.96.0.0/12".parse().unwrap(),
            "10.96.0.1".parse().unwrap(),
        ),
    );
    let addr = serve_plain(app).await;
    let get = "/api/v1/namespaces/default/configmaps/cm-1";
    let list = "/api/v1/namespaces/default/configmaps?timeout=8s";

    let (status, headers, _, _) = call(addr, "bob", get).await;
    assert_eq!(status, StatusCode::OK);
    let level_uid = headers[PRIORITY_LEVEL_UID_HEADER]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!level_uid.is_empty());
    assert!(headers.contains_key(FLOW_SCHEMA_UID_HEADER));
    let mut idle = Vec::new();
    for _ in 0..10 {
        idle.push(call(addr, "bob", get).await.3);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let rejected = Arc::new(AtomicUsize::new(0));
    let mut flood = Vec::new();
    for _ in 0..64 {
        let (stop, served, rejected) = (stop.clone(), served.clone(), rejected.clone());
        flood.push(tokio::spawn(async move {
            let mut rejection = None;
            while !stop.load(Ordering::Relaxed) {
                let (status, headers, body, _) = call(addr, "alice", list).await;
                match status {
                    StatusCode::OK => {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                    StatusCode::TOO_MANY_REQUESTS => {
                        rejected.fetch_add(1, Ordering::Relaxed);
                        // As clients do, wait as told (at most a second here).
                        let wait = headers
                            .get("retry-after")
                            .and_then(|v| v.to_str().ok()?.parse().ok())
                            .unwrap_or(1u64)
                            .min(1);
                        rejection.get_or_insert((headers, body));
                        tokio::time::sleep(Duration::from_secs(wait)).await;
                    }
                    other => panic!("alice got {other}"),
                }
            }
            rejection
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut busy = Vec::new();
    for _ in 0..20 {
        let (status, _, _, latency) = call(addr, "bob", get).await;
        assert_eq!(status, StatusCode::OK, "bob's GET failed during the flood");
        busy.push(latency);
    }
    stop.store(true, Ordering::Relaxed);
    let mut rejection = None;
    for task in flood {
        if let Some(found) = task.await.unwrap() {
            rejection.get_or_insert(found);
        }
    }
    consumer.abort();

    let (idle, busy) = (median(idle), median(busy));
    let (served, rejected) = (
        served.load(Ordering::Relaxed),
        rejected.load(Ordering::Relaxed),
    );
    eprintln!(
        "bob's median GET: {idle:?} idle, {busy:?} during the flood; alice: {served} served, \
         {rejected} rejected"
    );
    assert!(served > 0, "some of alice's lists run");
    let (headers, body) = rejection.expect("alice's flood gets 429s");
    let retry_after: i64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=32).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!(body, "Too many requests, please try again later.\n");
    assert_eq!(headers[PRIORITY_LEVEL_UID_HEADER], level_uid.as_str());
    assert!(headers.contains_key(FLOW_SCHEMA_UID_HEADER));
    assert!(
        busy < Duration::from_millis(400).max(idle * 10),
        "bob's median GET took {busy:?} during the flood ({idle:?} idle)"
    );
}
