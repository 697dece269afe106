use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request as HttpRequest};
use axum::routing::get;
use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo as ReviewUser};
use k8s_openapi::api::authorization::v1::{SubjectAccessReviewSpec, SubjectAccessReviewStatus};
use skiff_bootstrap::pki::{Pki, ServingNames, pem_to_der};
use tower::ServiceExt as _;

use super::authn::{ANONYMOUS, AUTHENTICATED, TokenReviewer, UNAUTHENTICATED};
use super::authz::AccessReviewer;
use super::*;

// ---- fakes ----

/// Answers TokenReviews from a table; counts the reviews it gets.
#[derive(Default)]
struct FakeTokens {
    users: HashMap<String, ReviewUser>,
    fail: bool,
    calls: AtomicUsize,
}

#[async_trait]
impl TokenReviewer for FakeTokens {
    async fn review(&self, token: &str) -> anyhow::Result<TokenReviewStatus> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        anyhow::ensure!(!self.fail, "connection refused");
        Ok(match self.users.get(token) {
            Some(user) => TokenReviewStatus {
                authenticated: Some(true),
                user: Some(user.clone()),
                ..Default::default()
            },
            None => TokenReviewStatus {
                authenticated: Some(false),
                ..Default::default()
            },
        })
    }
}

/// Allows the subresources it lists; records every spec it reviews.
#[derive(Default)]
struct FakeAccess {
    allowed: Vec<&'static str>,
    denied_explicitly: bool,
    fail: bool,
    specs: Mutex<Vec<SubjectAccessReviewSpec>>,
}

impl FakeAccess {
    fn calls(&self) -> usize {
        self.specs.lock().unwrap().len()
    }
}

#[async_trait]
impl AccessReviewer for FakeAccess {
    async fn review(
        &self,
        spec: SubjectAccessReviewSpec,
    ) -> anyhow::Result<SubjectAccessReviewStatus> {
        let subresource = spec
            .resource_attributes
            .as_ref()
            .and_then(|r| r.subresource.clone())
            .unwrap_or_default();
        self.specs.lock().unwrap().push(spec);
        anyhow::ensure!(!self.fail, "connection refused");
        let allowed = self.allowed.contains(&subresource.as_str());
        Ok(SubjectAccessReviewStatus {
            allowed,
            denied: (!allowed && self.denied_explicitly).then_some(true),
            ..Default::default()
        })
    }
}

fn review_user(name: &str, groups: &[&str]) -> ReviewUser {
    ReviewUser {
        username: Some(name.to_owned()),
        uid: Some(format!("{name}-uid")),
        groups: Some(groups.iter().map(|g| g.to_string()).collect()),
        extra: None,
    }
}

fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    headers
}

fn authenticator(
    x509: Option<Arc<dyn ClientCertVerifier>>,
    tokens: Option<Arc<FakeTokens>>,
    anonymous: bool,
) -> Authenticator {
    Authenticator {
        x509,
        token: tokens.map(|t| TokenAuthenticator::new(t, authn::DEFAULT_TOKEN_CACHE_TTL)),
        anonymous,
    }
}

fn peer(pem: &str) -> PeerCertificates {
    PeerCertificates(Arc::new(vec![CertificateDer::from(
        pem_to_der(pem).unwrap(),
    )]))
}

// ---- authentication ----

#[tokio::test]
async fn anonymous_requests_depend_on_anonymous_auth() {
    let on = authenticator(None, None, true);
    let user = on.authenticate(None, &HeaderMap::new()).await.unwrap();
    assert_eq!(user.name, ANONYMOUS);
    assert_eq!(user.groups, vec![UNAUTHENTICATED]);

    let off = authenticator(None, None, false);
    let refused = off.authenticate(None, &HeaderMap::new()).await;
    assert!(
        matches!(refused, Err(AuthnError::NoCredentials)),
        "{refused:?}"
    );
}

#[tokio::test]
async fn client_certificates_of_the_client_ca_name_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(&dir.path().join("pki"), &ServingNames::default()).unwrap();
    let other = Pki::ensure(&dir.path().join("other"), &ServingNames::default()).unwrap();
    let verifier = client_ca_verifier(&pki.dir.join("ca.crt")).unwrap();
    let authn = authenticator(Some(verifier), None, true);

    let admin = authn
        .authenticate(Some(&peer(&pki.admin.cert_pem)), &HeaderMap::new())
        .await
        .unwrap();
    assert_eq!(admin.name, "kubernetes-admin");
    assert_eq!(admin.groups, vec!["system:masters", AUTHENTICATED]);
    let apiserver = authn
        .authenticate(Some(&peer(&pki.kubelet_client.cert_pem)), &HeaderMap::new())
        .await
        .unwrap();
    assert_eq!(apiserver.name, "kube-apiserver-kubelet-client");
    assert_eq!(
        apiserver.groups,
        vec!["kubeadm:cluster-admins", AUTHENTICATED]
    );

    // A certificate of another CA fails, and is not let through as anonymous.
    let foreign = authn
        .authenticate(Some(&peer(&other.admin.cert_pem)), &HeaderMap::new())
        .await;
    assert!(matches!(foreign, Err(AuthnError::Failed(_))), "{foreign:?}");
    // Without a client CA, certificates are not looked at.
    let no_ca = authenticator(None, None, false);
    assert!(
        no_ca
            .authenticate(Some(&peer(&pki.admin.cert_pem)), &HeaderMap::new())
            .await
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn bearer_tokens_are_reviewed_and_cached() {
    let tokens = Arc::new(FakeTokens {
        users: HashMap::from([("good".to_owned(), review_user("bob", &["devs"]))]),
        ..Default::default()
    });
    let authn = authenticator(None, Some(tokens.clone()), true);

    let bob = authn.authenticate(None, &bearer("good")).await.unwrap();
    assert_eq!(bob.name, "bob");
    assert_eq!(bob.uid, "bob-uid");
    assert_eq!(bob.groups, vec!["devs", AUTHENTICATED]);
    // The scheme is case-insensitive.
    let mut lower = HeaderMap::new();
    lower.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("bearer good"),
    );
    assert_eq!(authn.authenticate(None, &lower).await.unwrap().name, "bob");
    assert_eq!(
        tokens.calls.load(Ordering::SeqCst),
        1,
        "the answer is cached"
    );

    // A refused token is a 401 even with anonymous requests on; refusals are cached too.
    for _ in 0..2 {
        let bad = authn.authenticate(None, &bearer("bad")).await;
        assert!(
            matches!(&bad, Err(AuthnError::Failed(e)) if e == &["invalid bearer token"]),
            "{bad:?}"
        );
    }
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 2);

    // Two minutes later the token is reviewed again.
    tokio::time::advance(authn::DEFAULT_TOKEN_CACHE_TTL).await;
    authn.authenticate(None, &bearer("good")).await.unwrap();
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 3);

    // Another scheme is no credential at all.
    let mut basic = HeaderMap::new();
    basic.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Basic Ym9i"),
    );
    assert_eq!(
        authn.authenticate(None, &basic).await.unwrap().name,
        ANONYMOUS
    );
}

#[tokio::test]
async fn failed_token_reviews_are_not_cached() {
    let tokens = Arc::new(FakeTokens {
        fail: true,
        ..Default::default()
    });
    let authn = authenticator(None, Some(tokens.clone()), true);
    for _ in 0..2 {
        let failed = authn.authenticate(None, &bearer("any")).await;
        assert!(matches!(failed, Err(AuthnError::Failed(_))), "{failed:?}");
    }
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 2);
}

// ---- authorization ----

fn attrs(subresource: &'static str) -> attributes::Attributes {
    attributes::Attributes {
        user: UserInfo {
            name: "bob".into(),
            uid: "u1".into(),
            groups: vec!["devs".into(), AUTHENTICATED.into()],
            extra: BTreeMap::new(),
        },
        verb: "get".into(),
        resource: "nodes",
        subresource,
        name: "node-a".into(),
        path: "/x".into(),
    }
}

fn webhook(fake: &Arc<FakeAccess>) -> Authorizer {
    Authorizer::Webhook(WebhookAuthorizer::new(
        fake.clone(),
        authz::DEFAULT_AUTHORIZED_TTL,
        authz::DEFAULT_UNAUTHORIZED_TTL,
    ))
}

#[tokio::test]
async fn always_allow_allows() {
    let decision = Authorizer::AlwaysAllow.authorize(&attrs("proxy")).await;
    assert_eq!(decision.unwrap(), Decision::Allow);
}

#[tokio::test]
async fn webhook_sends_the_node_attributes() {
    let fake = Arc::new(FakeAccess {
        allowed: vec!["stats"],
        denied_explicitly: true,
        ..Default::default()
    });
    let authz = webhook(&fake);
    assert_eq!(
        authz.authorize(&attrs("stats")).await.unwrap(),
        Decision::Allow
    );
    assert_eq!(
        authz.authorize(&attrs("proxy")).await.unwrap(),
        Decision::Deny
    );
    let spec = fake.specs.lock().unwrap()[0].clone();
    assert_eq!(spec.user.as_deref(), Some("bob"));
    assert_eq!(spec.uid.as_deref(), Some("u1"));
    assert_eq!(
        spec.groups,
        Some(vec!["devs".to_owned(), AUTHENTICATED.to_owned()])
    );
    let resource = spec.resource_attributes.unwrap();
    assert_eq!(resource.verb.as_deref(), Some("get"));
    assert_eq!(resource.group, None);
    assert_eq!(resource.version.as_deref(), Some("v1"));
    assert_eq!(resource.resource.as_deref(), Some("nodes"));
    assert_eq!(resource.subresource.as_deref(), Some("stats"));
    assert_eq!(resource.name.as_deref(), Some("node-a"));
    assert_eq!(resource.namespace, None);
    assert!(spec.non_resource_attributes.is_none());
}

#[tokio::test(start_paused = true)]
async fn webhook_caches_allowed_for_5m_and_denied_for_30s() {
    let fake = Arc::new(FakeAccess {
        allowed: vec!["stats"],
        ..Default::default()
    });
    let authz = webhook(&fake);
    let ask = |s| {
        let authz = &authz;
        async move { authz.authorize(&attrs(s)).await.unwrap() }
    };
    assert_eq!(ask("stats").await, Decision::Allow);
    assert_eq!(ask("proxy").await, Decision::NoOpinion);
    assert_eq!(
        (ask("stats").await, ask("proxy").await),
        (Decision::Allow, Decision::NoOpinion)
    );
    assert_eq!(fake.calls(), 2, "both answers are cached");

    tokio::time::advance(Duration::from_secs(30)).await;
    ask("stats").await;
    ask("proxy").await;
    assert_eq!(
        fake.calls(),
        3,
        "the denial expired after 30 s, the allowance did not"
    );

    tokio::time::advance(Duration::from_secs(270)).await;
    ask("stats").await;
    assert_eq!(fake.calls(), 4, "the allowance expired after 5 min");
}

#[tokio::test]
async fn failed_access_reviews_are_errors_and_not_cached() {
    let fake = Arc::new(FakeAccess {
        fail: true,
        ..Default::default()
    });
    let authz = webhook(&fake);
    assert!(authz.authorize(&attrs("proxy")).await.is_err());
    assert!(authz.authorize(&attrs("proxy")).await.is_err());
    assert_eq!(fake.calls(), 2);
}

// ---- the filter ----

fn app(auth: KubeletAuth) -> Router {
    Router::new()
        .route("/pods", get(|| async { "pods" }))
        .route("/stats/summary", get(|| async { "summary" }))
        .route(
            "/exec/{ns}/{pod}/{c}",
            axum::routing::any(|| async { "exec" }),
        )
        .layer(axum::middleware::from_fn_with_state(Arc::new(auth), filter))
}

async fn call(app: &Router, method: Method, path: &str, token: Option<&str>) -> (u16, String) {
    let mut request = HttpRequest::builder().method(method).uri(path);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn kubelet_auth(anonymous: bool, tokens: Arc<FakeTokens>, access: &Arc<FakeAccess>) -> KubeletAuth {
    KubeletAuth {
        authenticator: authenticator(None, Some(tokens), anonymous),
        attributes: NodeAttributesGetter::new("node-a"),
        authorizer: webhook(access),
    }
}

#[tokio::test]
async fn filter_answers_401_403_500_as_upstream() {
    let tokens = Arc::new(FakeTokens {
        users: HashMap::from([("t".to_owned(), review_user("bob", &[]))]),
        ..Default::default()
    });
    let access = Arc::new(FakeAccess {
        allowed: vec!["stats"],
        ..Default::default()
    });
    let app = app(kubelet_auth(false, tokens.clone(), &access));

    assert_eq!(
        call(&app, Method::GET, "/pods", None).await,
        (401, "Unauthorized".to_owned())
    );
    assert_eq!(
        call(&app, Method::GET, "/pods", Some("wrong")).await,
        (401, "Unauthorized".to_owned())
    );
    assert_eq!(
        access.calls(),
        0,
        "unauthenticated requests are not authorized"
    );
    assert_eq!(
        call(&app, Method::GET, "/stats/summary", Some("t")).await,
        (200, "summary".to_owned())
    );
    // /pods: nodes/pods first, then nodes/proxy; both refused.
    assert_eq!(
        call(&app, Method::GET, "/pods", Some("t")).await,
        (
            403,
            "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"
                .to_owned()
        )
    );
    assert_eq!(
        call(&app, Method::POST, "/exec/ns/p/c", Some("t")).await,
        (
            403,
            "Forbidden (user=bob, verb=create, resource=nodes, subresource(s)=[proxy])\n"
                .to_owned()
        )
    );

    // Anonymous requests are authorized as system:anonymous.
    let app_anonymous = self::app(kubelet_auth(true, tokens, &access));
    let (code, body) = call(&app_anonymous, Method::GET, "/exec/ns/p/c", None).await;
    assert_eq!(code, 403);
    assert!(
        body.starts_with("Forbidden (user=system:anonymous, verb=get"),
        "{body}"
    );
}

#[tokio::test]
async fn filter_falls_back_to_nodes_proxy() {
    let tokens = Arc::new(FakeTokens {
        users: HashMap::from([("t".to_owned(), review_user("bob", &[]))]),
        ..Default::default()
    });
    let access = Arc::new(FakeAccess {
        allowed: vec!["proxy"],
        ..Default::default()
    });
    let app = app(kubelet_auth(false, tokens, &access));
    assert_eq!(
        call(&app, Method::GET, "/pods", Some("t")).await,
        (200, "pods".to_owned())
    );
    let asked: Vec<_> = access
        .specs
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.resource_attributes.clone().unwrap().subresource.unwrap())
        .collect();
    assert_eq!(asked, vec!["pods", "proxy"]);

    let failing = Arc::new(FakeAccess {
        fail: true,
        ..Default::default()
    });
    let tokens = Arc::new(FakeTokens {
        users: HashMap::from([("t".to_owned(), review_user("bob", &[]))]),
        ..Default::default()
    });
    let app = self::app(kubelet_auth(false, tokens, &failing));
    assert_eq!(
        call(&app, Method::GET, "/pods", Some("t")).await,
        (
            500,
            "Authorization error (user=bob, verb=get, resource=nodes, subresource=pods)".to_owned()
        )
    );
}

#[test]
fn build_follows_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(&dir.path().join("pki"), &ServingNames::default()).unwrap();
    let config = KubeletConfig {
        node_name: "node-a".into(),
        client_ca_file: Some(pki.dir.join("ca.crt")),
        anonymous_auth: false,
        authentication_token_webhook: true,
        authorization_mode: AuthorizationMode::Webhook,
        ..KubeletConfig::default()
    };
    let built = build(&config, None).unwrap();
    assert!(built.client_verifier.is_some());
    assert!(built.auth.authenticator.x509.is_some());
    assert!(
        built.auth.authenticator.token.is_none(),
        "no client, no token webhook"
    );
    assert!(!built.auth.authenticator.anonymous);
    assert!(matches!(built.auth.authorizer, Authorizer::Webhook(_)));

    let defaults = build(&KubeletConfig::default(), None).unwrap();
    assert!(defaults.client_verifier.is_none());
    assert!(defaults.auth.authenticator.anonymous);
    assert!(matches!(defaults.auth.authorizer, Authorizer::AlwaysAllow));

    let missing = KubeletConfig {
        client_ca_file: Some(dir.path().join("nope.crt")),
        ..KubeletConfig::default()
    };
    let err = build(&missing, None)
        .err()
        .expect("a missing CA file is an error");
    assert!(format!("{err:#}").contains("nope.crt"), "{err:#}");
}

// ---- over TLS ----

/// `GET path` over TLS to `port`, presenting `client` (certificate and key PEM) if
/// given; the status code.
async fn tls_get(port: u16, client: Option<&skiff_bootstrap::pki::CertKey>, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let builder = skiff_bootstrap::tls::insecure_client_config().unwrap();
    let config = match client {
        Some(pair) => {
            let (chain, key) = pair.rustls_pair("test client").unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn tls_server_requests_but_does_not_require_client_certificates() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(&dir.path().join("pki"), &ServingNames::default()).unwrap();
    let other = Pki::ensure(&dir.path().join("other"), &ServingNames::default()).unwrap();
    let config = KubeletConfig {
        node_name: "node-a".into(),
        client_ca_file: Some(pki.dir.join("ca.crt")),
        anonymous_auth: false,
        ..KubeletConfig::default()
    };
    let built = build(&config, None).unwrap();
    let tls = crate::server::tls::server_config(
        &crate::server::tls::CertSource::SelfSigned {
            dir: dir.path().join("serving"),
            node_name: "node-a".into(),
            node_ip: std::net::IpAddr::from([127, 0, 0, 1]),
        },
        built.client_verifier,
    )
    .unwrap();
    let app = Router::new()
        .route("/pods", get(|| async { "pods" }))
        .layer(axum::middleware::from_fn_with_state(built.auth, filter));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(crate::server::serve_tls(listener, tls, app));

    assert_eq!(tls_get(port, Some(&pki.kubelet_client), "/pods").await, 200);
    assert_eq!(tls_get(port, Some(&pki.admin), "/pods").await, 200);
    // No certificate: the handshake succeeds and the request is refused.
    assert_eq!(tls_get(port, None, "/pods").await, 401);
    // A certificate of another CA: the same.
    assert_eq!(tls_get(port, Some(&other.admin), "/pods").await, 401);
    server.abort();
}
