//! API group `authentication.k8s.io`: `tokenreviews` and `selfsubjectreviews`, upstream's
//! `pkg/registry/authentication/{tokenreview,selfsubjectreview}`. Neither is stored: a
//! create answers 201 with the review as sent and its `status` filled in by the server's
//! authenticator (service-account tokens; Skiff has no bootstrap-token authenticator).

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{
    SelfSubjectReview, SelfSubjectReviewStatus, TokenReview, TokenReviewStatus, UserInfo,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::authn::{self, token::Claims};
use crate::error::{ApiError, GroupResource};
use crate::registry::{Context, Registry, Strategy, Unstored};
use crate::rest::negotiation::{content_type, decode_object};

/// Adds the group's kinds, in upstream's discovery order.
pub fn add(registry: &mut Registry) {
    registry.add(SelfSubjectReviews);
    registry.add(TokenReviews);
}

/// The only verb of a review: create.
const CREATE: &[&str] = &["create"];

/// Reads a review's body (JSON, YAML or protobuf, by `Content-Type`) as `T`. Errors: 400
/// for a body that is not a `T` (another kind included), 415 for another media type.
pub(super) async fn read_review<T: DeserializeOwned>(
    request: axum::extract::Request,
) -> Result<T, ApiError> {
    let media_type = content_type(request.headers());
    let bytes = crate::rest::negotiation::read_body(request.into_body()).await?;
    let value = decode_object(&media_type, &bytes)?;
    serde_json::from_value(value).map_err(|e| {
        ApiError::bad_request(format!("the body of the request could not be decoded: {e}"))
    })
}

/// Upstream's answer to a review: 201 with the review and its status.
pub(super) fn created<T: Serialize>(review: &T) -> Result<Response, ApiError> {
    let body = serde_json::to_value(review)
        .map_err(|e| ApiError::internal(format!("encoding the review: {e}")))?;
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

/// A Skiff user as authentication/v1 UserInfo (Skiff's users have no extra fields).
fn user_info(user: &authn::UserInfo) -> UserInfo {
    UserInfo {
        username: Some(user.name.clone()),
        uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
        groups: Some(user.groups.clone()).filter(|g| !g.is_empty()),
        extra: None,
    }
}

/// `tokenreviews`: cluster-scoped, create only.
pub struct TokenReviews;

impl Strategy for TokenReviews {
    type Object = TokenReview;

    fn verbs(&self) -> &'static [&'static str] {
        CREATE
    }

    fn unstored(&self) -> Option<Arc<dyn Unstored>> {
        Some(Arc::new(ReviewToken))
    }
}

/// The create of `tokenreviews` (upstream `tokenreview.REST.Create`).
struct ReviewToken;

/// What the token authenticator concluded: the user and the audiences the token is valid
/// for, or why not (upstream's authenticator error, empty when there is none).
enum Outcome {
    Authenticated(authn::UserInfo, Vec<String>),
    Refused(String),
}

impl ReviewToken {
    /// Authenticates `token` for `audiences` (the API server's, the issuer, when empty) as
    /// the server's bearer-token authenticator does: the signature and claims, then that
    /// the service account (and bound pod or secret) still exists with the token's uid.
    /// Errors: the store cannot be read.
    async fn authenticate(
        ctx: &Context<'_>,
        token: &str,
        audiences: &[String],
    ) -> Result<Outcome, ApiError> {
        let Some(issuer) = ctx.config.service_account_tokens.as_deref() else {
            return Ok(Outcome::Refused("invalid bearer token".to_owned()));
        };
        let claims = match issuer.verify(token, chrono::Utc::now().timestamp()) {
            Ok(claims) => claims,
            Err(e) => {
                tracing::debug!(error = %e, "reviewed token refused");
                return Ok(Outcome::Refused("invalid bearer token".to_owned()));
            }
        };
        let wanted: Vec<String> = if audiences.is_empty() {
            vec![issuer.issuer().to_owned()]
        } else {
            audiences.to_vec()
        };
        let valid: Vec<String> = claims
            .aud
            .iter()
            .filter(|a| wanted.contains(a))
            .cloned()
            .collect();
        if valid.is_empty() {
            return Ok(Outcome::Refused(format!(
                "token audiences {} is invalid for the target audiences {}",
                go_quoted(&claims.aud),
                go_quoted(&wanted)
            )));
        }
        if !Self::bound_objects_exist(ctx, &claims).await? {
            return Ok(Outcome::Refused("invalid bearer token".to_owned()));
        }
        Ok(Outcome::Authenticated(
            authn::UserInfo::of_service_account(&claims),
            valid,
        ))
    }

    /// Whether the token's service account, pod and secret are stored with its uids and
    /// not being deleted.
    async fn bound_objects_exist(ctx: &Context<'_>, claims: &Claims) -> Result<bool, ApiError> {
        let k = &claims.kubernetes;
        let mut bound = vec![("serviceaccounts", &k.serviceaccount)];
        bound.extend(k.pod.iter().map(|pod| ("pods", pod)));
        bound.extend(k.secret.iter().map(|secret| ("secrets", secret)));
        for (resource, object) in bound {
            let found = ctx
                .objects
                .get(
                    &GroupResource::new("", resource),
                    Some(&k.namespace),
                    &object.name,
                )
                .await;
            let stored = match found {
                Ok(stored) => stored,
                Err(e) if e.code == 404 => return Ok(false),
                Err(e) => return Err(e),
            };
            let meta = &stored["metadata"];
            if meta["uid"].as_str() != Some(object.uid.as_str())
                || !meta["deletionTimestamp"].is_null()
            {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// A list of strings as Go's `%q` prints it: `["a" "b"]`.
fn go_quoted(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

#[async_trait]
impl Unstored for ReviewToken {
    /// Answers 201 with `status.authenticated`, and the user and audiences of a valid
    /// token or the authenticator's error. Errors: 400 for an empty `spec.token` or a
    /// namespace; 503 when the store cannot be read.
    async fn create(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        request: axum::extract::Request,
    ) -> Result<Response, ApiError> {
        let mut review: TokenReview = read_review(request).await?;
        if let Some(ns) = namespace.filter(|ns| !ns.is_empty()) {
            return Err(ApiError::bad_request(format!(
                "namespace is not allowed on this type: {ns}"
            )));
        }
        let token = review.spec.token.clone();
        if token.is_empty() {
            return Err(ApiError::bad_request(
                "token is required for TokenReview in authentication.k8s.io",
            ));
        }
        let audiences = review.spec.audiences.clone().unwrap_or_default();
        review.status = Some(match Self::authenticate(ctx, &token, &audiences).await? {
            Outcome::Authenticated(user, valid) => TokenReviewStatus {
                authenticated: Some(true),
                user: Some(user_info(&user)),
                audiences: Some(valid),
                error: None,
            },
            Outcome::Refused(error) => TokenReviewStatus {
                authenticated: Some(false),
                error: Some(error).filter(|e| !e.is_empty()),
                ..TokenReviewStatus::default()
            },
        });
        created(&review)
    }
}

/// `selfsubjectreviews` (`kubectl auth whoami`): cluster-scoped, create only.
pub struct SelfSubjectReviews;

impl Strategy for SelfSubjectReviews {
    type Object = SelfSubjectReview;

    fn verbs(&self) -> &'static [&'static str] {
        CREATE
    }

    fn unstored(&self) -> Option<Arc<dyn Unstored>> {
        Some(Arc::new(ReviewSelf))
    }
}

/// The create of `selfsubjectreviews` (upstream `selfsubjectreview.REST.Create`).
struct ReviewSelf;

#[async_trait]
impl Unstored for ReviewSelf {
    /// Answers 201 with a new review (metadata: only `creationTimestamp`, as upstream)
    /// whose `status.userInfo` is the requesting user. Errors: 400 for a body that is not
    /// a SelfSubjectReview.
    async fn create(
        &self,
        ctx: &Context<'_>,
        _namespace: Option<&str>,
        request: axum::extract::Request,
    ) -> Result<Response, ApiError> {
        let _: SelfSubjectReview = read_review(request).await?;
        let mut review = SelfSubjectReview::default();
        review.metadata.creation_timestamp = Some(Time(crate::registry::printers::now()));
        review.status = Some(SelfSubjectReviewStatus {
            user_info: Some(user_info(ctx.user)),
        });
        created(&review)
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::json;

    use crate::registry::testing::Server;

    const GROUP: &str = "/apis/authentication.k8s.io/v1";

    #[tokio::test]
    async fn self_subject_review_echoes_the_user() {
        let server = Server::start().await;
        let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
        let reply = server
            .send("POST", &format!("{GROUP}/selfsubjectreviews"), &review)
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.body["kind"], "SelfSubjectReview");
        let user = &reply.body["status"]["userInfo"];
        assert_eq!(user["username"], "system:admin");
        assert_eq!(
            user["groups"],
            json!(["system:masters", "system:authenticated"])
        );
        assert!(reply.body["metadata"]["creationTimestamp"].is_string());
        assert!(reply.body["metadata"]["uid"].is_null());
        // Create is the only verb.
        let reply = server
            .send("GET", &format!("{GROUP}/selfsubjectreviews"), &json!(null))
            .await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    }

    #[tokio::test]
    async fn token_review_of_an_invalid_token_is_unauthenticated() {
        let server = Server::start().await;
        let uri = format!("{GROUP}/tokenreviews");
        let review = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "metadata": {"name": "check"},
            "spec": {"token": "not.a.token"},
        });
        let reply = server.send("POST", &uri, &review).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.body["metadata"], json!({"name": "check"}));
        assert_eq!(reply.body["spec"]["token"], "not.a.token");
        let status = &reply.body["status"];
        assert_eq!(status["authenticated"], false);
        assert!(status["user"].is_null(), "{status}");
        assert_eq!(status["error"], "invalid bearer token");

        let empty =
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}});
        let reply = server.send("POST", &uri, &empty).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        assert_eq!(
            reply.body["message"],
            "token is required for TokenReview in authentication.k8s.io"
        );
    }

    /// A server whose config can issue service-account tokens, as `Server` but for the
    /// config; the issuer; and the directory of its store.
    async fn issuing() -> (
        axum::Router,
        std::sync::Arc<crate::authn::TokenIssuer>,
        tempfile::TempDir,
    ) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let storage = crate::storage::open(&crate::storage::StorageConfig::new(dir.path()))
            .await
            .expect("store");
        let key = rcgen::KeyPair::generate().expect("key");
        let issuer = std::sync::Arc::new(
            crate::authn::TokenIssuer::new(
                crate::authn::token::DEFAULT_ISSUER,
                &key.serialize_pem(),
            )
            .expect("issuer"),
        );
        let config = crate::config::ClusterConfig {
            service_account_tokens: Some(issuer.clone()),
            ..Default::default()
        };
        let state = std::sync::Arc::new(crate::rest::State::new(
            crate::registry::Registry::builtin(),
            storage,
            config,
        ));
        (crate::rest::router(state), issuer, dir)
    }

    async fn post(
        app: &axum::Router,
        uri: &str,
        body: &serde_json::Value,
    ) -> (StatusCode, serde_json::Value) {
        use tower::ServiceExt;
        let request = axum::http::Request::builder()
            .method("POST")
            .uri(uri)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.to_string()))
            .expect("request");
        let response = app.clone().oneshot(request).await.expect("infallible");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        (status, serde_json::from_slice(&bytes).expect("json"))
    }

    #[tokio::test]
    async fn token_review_of_a_service_account_token_names_its_user() {
        use crate::authn::token::{ObjectRef, TokenSpec};
        let (app, issuer, _dir) = issuing().await;
        let (status, _) = post(
            &app,
            "/api/v1/namespaces",
            &json!({"metadata": {"name": "ns1"}}),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
        let (status, account) = post(
            &app,
            "/api/v1/namespaces/ns1/serviceaccounts",
            &json!({"metadata": {"name": "robot"}}),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{account}");
        let uid = account["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let spec = TokenSpec {
            namespace: "ns1".into(),
            service_account: ObjectRef {
                name: "robot".into(),
                uid: uid.clone(),
            },
            pod: None,
            secret: None,
            audiences: Vec::new(),
            expiration_seconds: 600,
        };
        let (token, _) = issuer
            .issue(&spec, chrono::Utc::now().timestamp())
            .expect("token");
        let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
        let (status, reply) = post(&app, &format!("{GROUP}/tokenreviews"), &review).await;
        assert_eq!(status, StatusCode::CREATED, "{reply}");
        let status = &reply["status"];
        assert_eq!(status["authenticated"], true, "{status}");
        assert_eq!(
            status["user"]["username"],
            "system:serviceaccount:ns1:robot"
        );
        assert_eq!(status["user"]["uid"], uid.as_str());
        assert_eq!(
            status["user"]["groups"],
            json!([
                "system:serviceaccounts",
                "system:serviceaccounts:ns1",
                "system:authenticated"
            ])
        );
        assert_eq!(
            status["audiences"],
            json!([crate::authn::token::DEFAULT_ISSUER])
        );

        // Another audience than the token's: refused with upstream's words.
        let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token, "audiences": ["vault"]}});
        let (_, reply) = post(&app, &format!("{GROUP}/tokenreviews"), &review).await;
        assert_eq!(reply["status"]["authenticated"], false);
        assert!(reply["status"]["user"].is_null());
        assert!(
            reply["status"]["error"]
                .as_str()
                .unwrap_or_default()
                .starts_with("token audiences [\""),
            "{reply}"
        );
    }
}
