//! Authentication: who sent a request. Client certificates against the cluster CA
//! (user = CN, groups = O) and service-account bearer tokens (JWTs). A request without
//! valid credentials gets 401; until RBAC arrives, every authenticated user may do
//! everything.
//!
//! [`middleware`] puts the [`UserInfo`] into the request's extensions. The TLS layer
//! verifies a client certificate against the CA during the handshake and gives each
//! connection's requests a [`CertificateUser`]; bearer tokens are checked here.

pub mod token;
pub mod token_request;
mod x509;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::error::ApiError;
use crate::storage::Storage;
pub use token::TokenIssuer;
pub use x509::user_from_certificate;

/// Every authenticated user's group.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of requests without credentials.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of requests without credentials.
pub const ANONYMOUS: &str = "system:anonymous";

/// The authenticated user, as upstream's `user.Info` (`UserInfo` in TokenReview): handlers
/// find it in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    /// Always includes `system:authenticated`.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The user of a request without credentials.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS.to_owned(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED.to_owned()],
        }
    }

    /// The user of a verified service-account token (upstream's service-account
    /// authenticator): `system:serviceaccount:<ns>:<name>`, the account's uid, and the groups
    /// `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`.
    pub fn of_service_account(claims: &token::Claims) -> Self {
        let ns = &claims.kubernetes.namespace;
        UserInfo {
            name: claims.sub.clone(),
            uid: claims.kubernetes.serviceaccount.uid.clone(),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{ns}"),
                AUTHENTICATED.to_owned(),
            ],
        }
    }
}

/// The user of the connection's verified client certificate (`None` without one), put in
/// every request's extensions by the TLS server.
#[derive(Debug, Clone, Default)]
pub struct CertificateUser(pub Option<UserInfo>);

/// Paths anyone may read without credentials: upstream's `system:public-info-viewer`
/// ClusterRole (health checks and the version).
fn is_public(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    ["/healthz", "/livez", "/readyz", "/version"]
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

/// Checks bearer tokens: signature and claims with the [`TokenIssuer`], then that the
/// ServiceAccount (and the bound pod or secret) still exists with the token's uid.
pub struct Authenticator {
    tokens: Arc<TokenIssuer>,
    storage: Arc<dyn Storage>,
}

impl Authenticator {
    pub fn new(tokens: Arc<TokenIssuer>, storage: Arc<dyn Storage>) -> Self {
        Authenticator { tokens, storage }
    }

    /// The user of a service-account token, or `None` if the token is not valid (why is
    /// logged at debug level). Errors: the store cannot be read (503).
    pub async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, ApiError> {
        let now = chrono::Utc::now().timestamp();
        let claims = match self.tokens.verify(token, now) {
            Ok(claims) => claims,
            Err(e) => {
                tracing::debug!(error = %e, "bearer token refused");
                return Ok(None);
            }
        };
        let k = &claims.kubernetes;
        let ns = &k.namespace;
        let mut bound = vec![("serviceaccounts", &k.serviceaccount)];
        bound.extend(k.pod.iter().map(|pod| ("pods", pod)));
        bound.extend(k.secret.iter().map(|secret| ("secrets", secret)));
        for (resource, object) in bound {
            if !self.exists(resource, ns, &object.name, &object.uid).await? {
                tracing::debug!(%resource, %ns, name = %object.name, "token's object is gone");
                return Ok(None);
            }
        }
        Ok(Some(UserInfo::of_service_account(&claims)))
    }

    /// Whether `<resource>/<ns>/<name>` is stored with `uid` and not being deleted.
    async fn exists(
        &self,
        resource: &str,
        ns: &str,
        name: &str,
        uid: &str,
    ) -> Result<bool, ApiError> {
        let key = format!("/registry/{resource}/{ns}/{name}");
        let stored = self
            .storage
            .get(&key)
            .await
            .map_err(|e| ApiError::unavailable(e.to_string()))?;
        let Some(kv) = stored else {
            return Ok(false);
        };
        let object: Value = serde_json::from_slice(&kv.value).unwrap_or_default();
        let meta = &object["metadata"];
        Ok(meta["uid"].as_str() == Some(uid) && meta["deletionTimestamp"].is_null())
    }
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The authentication filter (upstream `WithAuthentication`): the client certificate's
/// user, else the bearer token's; a request with neither is anonymous on the public
/// paths and 401 elsewhere; a request with an invalid token is 401 everywhere.
pub async fn middleware(
    State(authenticator): State<Arc<Authenticator>>,
    mut req: Request,
    next: Next,
) -> Response {
    let from_cert = req
        .extensions()
        .get::<CertificateUser>()
        .and_then(|c| c.0.clone());
    let user = match (from_cert, bearer_token(req.headers())) {
        (Some(user), _) => user,
        (None, Some(token)) => match authenticator.authenticate_token(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return ApiError::unauthorized().into_response(),
            Err(e) => return e.into_response(),
        },
        (None, None) if is_public(req.uri().path()) => UserInfo::anonymous(),
        (None, None) => return ApiError::unauthorized().into_response(),
    };
    req.headers_mut().remove(header::AUTHORIZATION);
    req.extensions_mut().insert(user);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use futures::stream::BoxStream;
    use tower::ServiceExt;

    use super::*;
    use crate::storage::{KeyValue, ListResult, Revision, StorageError, WatchItem};
    use token::{ObjectRef, TokenSpec};

    /// Keys and values only: what the authenticator reads.
    #[derive(Default)]
    struct Keys(Mutex<BTreeMap<String, Vec<u8>>>);

    #[async_trait::async_trait]
    impl Storage for Keys {
        async fn create(&self, key: &str, value: Vec<u8>) -> crate::storage::Result<KeyValue> {
            self.0.lock().unwrap().insert(key.to_owned(), value.clone());
            Ok(KeyValue {
                key: key.to_owned(),
                value,
                create_revision: 1,
                mod_revision: 1,
            })
        }
        async fn get(&self, key: &str) -> crate::storage::Result<Option<KeyValue>> {
            Ok(self.0.lock().unwrap().get(key).map(|value| KeyValue {
                key: key.to_owned(),
                value: value.clone(),
                create_revision: 1,
                mod_revision: 1,
            }))
        }
        async fn list(
            &self,
            _: &str,
            _: Option<&str>,
            _: usize,
            _: Option<Revision>,
        ) -> crate::storage::Result<ListResult> {
            Err(StorageError::Unavailable("not in this fake".into()))
        }
        async fn update(
            &self,
            _: &str,
            _: Vec<u8>,
            _: Revision,
        ) -> crate::storage::Result<KeyValue> {
            Err(StorageError::Unavailable("not in this fake".into()))
        }
        async fn delete(&self, _: &str, _: Option<Revision>) -> crate::storage::Result<KeyValue> {
            Err(StorageError::Unavailable("not in this fake".into()))
        }
        async fn watch(
            &self,
            _: &str,
            _: Revision,
        ) -> crate::storage::Result<BoxStream<'static, crate::storage::Result<WatchItem>>> {
            Err(StorageError::Unavailable("not in this fake".into()))
        }
        async fn current_revision(&self) -> crate::storage::Result<Revision> {
            Ok(1)
        }
        async fn compact(&self, _: Revision) -> crate::storage::Result<()> {
            Ok(())
        }
    }

    fn setup() -> (Router, Arc<TokenIssuer>, Arc<Keys>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let issuer =
            Arc::new(TokenIssuer::new(token::DEFAULT_ISSUER, &key.serialize_pem()).unwrap());
        let keys = Arc::new(Keys::default());
        let auth = Arc::new(Authenticator::new(issuer.clone(), keys.clone()));
        let app = Router::new()
            .route(
                "/api/v1/pods",
                get(|axum::Extension(u): axum::Extension<UserInfo>| async move { u.name }),
            )
            .route(
                "/healthz",
                get(|axum::Extension(u): axum::Extension<UserInfo>| async move { u.name }),
            )
            .layer(axum::middleware::from_fn_with_state(auth, middleware));
        (app, issuer, keys)
    }

    async fn call(
        app: &Router,
        path: &str,
        token: Option<&str>,
        cert: Option<UserInfo>,
    ) -> (u16, String) {
        let mut req = axum::http::Request::get(path);
        if let Some(t) = token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let mut req = req.body(Body::empty()).unwrap();
        req.extensions_mut().insert(CertificateUser(cert));
        let resp = app.clone().oneshot(req).await.unwrap();
        let code = resp.status().as_u16();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (code, String::from_utf8_lossy(&body).into_owned())
    }

    fn sa_token(issuer: &TokenIssuer, uid: &str) -> String {
        let spec = TokenSpec {
            namespace: "ns1".into(),
            service_account: ObjectRef {
                name: "robot".into(),
                uid: uid.into(),
            },
            pod: None,
            secret: None,
            audiences: Vec::new(),
            expiration_seconds: 3600,
        };
        issuer
            .issue(&spec, chrono::Utc::now().timestamp())
            .unwrap()
            .0
    }

    #[tokio::test]
    async fn no_credentials_is_401_except_public_paths() {
        let (app, _, _) = setup();
        let (code, body) = call(&app, "/api/v1/pods", None, None).await;
        assert_eq!(code, 401);
        let status: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["reason"], "Unauthorized");
        assert_eq!(
            call(&app, "/healthz", None, None).await,
            (200, ANONYMOUS.to_owned())
        );
    }

    #[tokio::test]
    async fn client_certificate_user() {
        let (app, _, _) = setup();
        let admin = UserInfo {
            name: "kubernetes-admin".into(),
            uid: String::new(),
            groups: vec![AUTHENTICATED.into()],
        };
        assert_eq!(
            call(&app, "/api/v1/pods", None, Some(admin)).await,
            (200, "kubernetes-admin".to_owned())
        );
    }

    #[tokio::test]
    async fn service_account_token_needs_the_account() {
        let (app, issuer, keys) = setup();
        let token = sa_token(&issuer, "uid-1");
        // No such ServiceAccount yet.
        assert_eq!(call(&app, "/api/v1/pods", Some(&token), None).await.0, 401);
        let sa =
            serde_json::json!({"metadata": {"name": "robot", "namespace": "ns1", "uid": "uid-1"}});
        keys.create(
            "/registry/serviceaccounts/ns1/robot",
            serde_json::to_vec(&sa).unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(
            call(&app, "/api/v1/pods", Some(&token), None).await,
            (200, "system:serviceaccount:ns1:robot".to_owned())
        );
        // A recreated account (another uid) does not accept the old token.
        assert_eq!(
            call(
                &app,
                "/api/v1/pods",
                Some(&sa_token(&issuer, "uid-2")),
                None
            )
            .await
            .0,
            401
        );
        // A bad token is 401 even on public paths.
        assert_eq!(call(&app, "/healthz", Some("x.y.z"), None).await.0, 401);
    }

    #[tokio::test]
    async fn service_account_groups() {
        let (_, issuer, keys) = setup();
        let sa = serde_json::json!({"metadata": {"uid": "uid-1"}});
        keys.create(
            "/registry/serviceaccounts/ns1/robot",
            serde_json::to_vec(&sa).unwrap(),
        )
        .await
        .unwrap();
        let auth = Authenticator::new(issuer.clone(), keys);
        let user = auth
            .authenticate_token(&sa_token(&issuer, "uid-1"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(user.uid, "uid-1");
        assert_eq!(
            user.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:ns1",
                AUTHENTICATED
            ]
        );
    }

    #[test]
    fn public_paths() {
        for p in [
            "/healthz",
            "/healthz/ping",
            "/livez",
            "/readyz?verbose",
            "/version",
            "/version/",
        ] {
            let path = p.split('?').next().unwrap();
            assert!(is_public(path), "{p}");
        }
        for p in ["/api", "/healthzz", "/apis/apps/v1", "/", "/openid/v1/jwks"] {
            assert!(!is_public(p), "{p}");
        }
    }

    #[test]
    fn reads_bearer_tokens() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer abc.def".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc.def"));
        h.insert(header::AUTHORIZATION, "bearer  xyz".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("xyz"));
        h.insert(header::AUTHORIZATION, "Basic dXNlcg==".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
    }
}
