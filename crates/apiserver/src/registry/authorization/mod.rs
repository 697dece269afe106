//! API group `authorization.k8s.io`: `subjectaccessreviews`, `selfsubjectaccessreviews`,
//! `selfsubjectrulesreviews` and `localsubjectaccessreviews`, upstream's
//! `pkg/registry/authorization/*` with the validation of `pkg/apis/authorization/validation`.
//! None is stored: a create answers 201 with the review and its `status`.
//!
//! Skiff has no authorizer yet: every authenticated user may do everything, so a review of
//! an authenticated subject is allowed, stating so as its reason. An anonymous subject
//! (`system:anonymous` or group `system:unauthenticated`) reaches only the public health
//! and version paths, as the authentication filter lets it.

use std::sync::Arc;

use async_trait::async_trait;
use axum::response::Response;
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, NonResourceAttributes, NonResourceRule, ResourceRule,
    SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview,
    SubjectAccessReviewStatus, SubjectRulesReviewStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use skiff_api::field::{ErrorList, FieldError, Path};

use super::authentication::{created, read_review};
use crate::authn::{ANONYMOUS, UNAUTHENTICATED};
use crate::error::ApiError;
use crate::registry::{Context, Registry, Strategy, Unstored};

/// The API group.
const GROUP: &str = "authorization.k8s.io";

/// The reason of every allowed review.
pub const ALLOWED_REASON: &str = "no authorization configured: every authenticated user is allowed";

/// Adds the group's kinds, in upstream's discovery order.
pub fn add(registry: &mut Registry) {
    registry.add(LocalSubjectAccessReviews);
    registry.add(SelfSubjectAccessReviews);
    registry.add(SelfSubjectRulesReviews);
    registry.add(SubjectAccessReviews);
}

/// The only verb of a review: create.
const CREATE: &[&str] = &["create"];

/// Paths an anonymous request may reach (the authentication filter's public paths).
const PUBLIC_PATHS: [&str; 4] = ["/healthz", "/livez", "/readyz", "/version"];

/// Skiff's decision for a subject: allowed for an authenticated one; an anonymous one only
/// for a public non-resource path.
fn decide(
    user: &str,
    groups: &[String],
    non_resource: Option<&NonResourceAttributes>,
) -> SubjectAccessReviewStatus {
    let anonymous = user == ANONYMOUS || groups.iter().any(|g| g == UNAUTHENTICATED);
    if !anonymous {
        return SubjectAccessReviewStatus {
            allowed: true,
            reason: Some(ALLOWED_REASON.to_owned()),
            ..SubjectAccessReviewStatus::default()
        };
    }
    let path = non_resource
        .and_then(|n| n.path.as_deref())
        .unwrap_or_default()
        .trim_end_matches('/');
    let public = PUBLIC_PATHS.iter().any(|p| {
        path == *p
            || path
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('/'))
    });
    SubjectAccessReviewStatus {
        allowed: public,
        reason: Some(if public {
            "anonymous requests may reach the health checks and /version".to_owned()
        } else {
            "no authorization configured: anonymous requests are refused".to_owned()
        }),
        ..SubjectAccessReviewStatus::default()
    }
}

/// Upstream's create handler's namespace rule: a cluster-scoped review loses its
/// `metadata.namespace`; a namespaced one takes the path's, and must not name another.
/// Errors: 400 for a namespace other than the path's.
fn match_namespace(meta: &mut ObjectMeta, namespace: Option<&str>) -> Result<(), ApiError> {
    let path = namespace.unwrap_or_default();
    match meta.namespace.as_deref().unwrap_or_default() {
        ns if ns == path => Ok(()),
        "" => {
            meta.namespace = Some(path.to_owned());
            Ok(())
        }
        _ if path.is_empty() => {
            meta.namespace = None;
            Ok(())
        }
        _ => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
    }
}

/// Whether `meta` is empty but for managed fields (and the namespace when `keep_namespace`).
fn meta_is_empty(meta: &ObjectMeta, keep_namespace: bool) -> bool {
    let mut copy = meta.clone();
    copy.managed_fields = None;
    if keep_namespace {
        copy.namespace = None;
    }
    copy == ObjectMeta::default()
}

/// `meta` as a field error's value.
fn meta_value(meta: &ObjectMeta) -> Value {
    serde_json::to_value(meta).unwrap_or_default()
}

/// Upstream `ValidateSelfSubjectAccessReviewSpec` (also the first rules of the
/// SubjectAccessReview spec): exactly one of resource and non-resource attributes.
fn validate_attributes(
    resource: bool,
    non_resource: Option<&NonResourceAttributes>,
    spec: &Path,
) -> ErrorList {
    let mut errors = Vec::new();
    match (resource, non_resource) {
        (true, Some(attributes)) => errors.push(FieldError::invalid(
            &spec.child("nonResourceAttributes"),
            serde_json::to_value(attributes).unwrap_or_default(),
            "cannot be specified in combination with resourceAttributes",
        )),
        (false, None) => errors.push(FieldError::invalid(
            &spec.child("resourceAttributes"),
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    errors
}

/// Upstream `ValidateSubjectAccessReviewSpec`: the attributes rule, then a user or group.
fn validate_subject_spec(
    spec: &k8s_openapi::api::authorization::v1::SubjectAccessReviewSpec,
) -> ErrorList {
    let path = Path::new("spec");
    let mut errors = validate_attributes(
        spec.resource_attributes.is_some(),
        spec.non_resource_attributes.as_ref(),
        &path,
    );
    let user = spec.user.clone().unwrap_or_default();
    if user.is_empty() && spec.groups.as_ref().is_none_or(|g| g.is_empty()) {
        errors.push(FieldError::invalid(
            &path.child("user"),
            user,
            "at least one of user or group must be specified",
        ));
    }
    errors
}

/// 422 for `kind` when `errors` is not empty (upstream names no object: `""`).
fn check(kind: &str, errors: &[FieldError]) -> Result<(), ApiError> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(GROUP, kind, "", errors))
    }
}

/// `subjectaccessreviews`: cluster-scoped, create only.
pub struct SubjectAccessReviews;

impl Strategy for SubjectAccessReviews {
    type Object = SubjectAccessReview;

    fn verbs(&self) -> &'static [&'static str] {
        CREATE
    }

    fn unstored(&self) -> Option<Arc<dyn Unstored>> {
        Some(Arc::new(ReviewSubject))
    }
}

/// The create of `subjectaccessreviews` (upstream `subjectaccessreview.REST.Create`).
struct ReviewSubject;

#[async_trait]
impl Unstored for ReviewSubject {
    /// Answers 201 with the review and Skiff's decision for its subject. Errors: 422 as
    /// upstream's `ValidateSubjectAccessReview` (attributes, subject, empty metadata).
    async fn create(
        &self,
        _ctx: &Context<'_>,
        namespace: Option<&str>,
        request: axum::extract::Request,
    ) -> Result<Response, ApiError> {
        let mut review: SubjectAccessReview = read_review(request).await?;
        match_namespace(&mut review.metadata, namespace)?;
        let mut errors = validate_subject_spec(&review.spec);
        if !meta_is_empty(&review.metadata, false) {
            errors.push(FieldError::invalid(
                &Path::new("metadata"),
                meta_value(&review.metadata),
                "must be empty",
            ));
        }
        check("SubjectAccessReview", &errors)?;
        let spec = &review.spec;
        review.status = Some(decide(
            spec.user.as_deref().unwrap_or_default(),
            spec.groups.as_deref().unwrap_or_default(),
            spec.non_resource_attributes.as_ref(),
        ));
        created(&review)
    }
}

/// `localsubjectaccessreviews`: namespaced, create only.
pub struct LocalSubjectAccessReviews;

impl Strategy for LocalSubjectAccessReviews {
    type Object = LocalSubjectAccessReview;

    fn verbs(&self) -> &'static [&'static str] {
        CREATE
    }

    fn unstored(&self) -> Option<Arc<dyn Unstored>> {
        Some(Arc::new(ReviewLocalSubject))
    }
}

/// The create of `localsubjectaccessreviews` (upstream
/// `localsubjectaccessreview.REST.Create`).
struct ReviewLocalSubject;

#[async_trait]
impl Unstored for ReviewLocalSubject {
    /// Answers 201 with the review and Skiff's decision for its subject. Errors: 400 for a
    /// `metadata.namespace` other than the path's; 422 as upstream's
    /// `ValidateLocalSubjectAccessReview` (`spec.resourceAttributes.namespace` must match
    /// `metadata.namespace`, no non-resource attributes, metadata empty but the namespace).
    async fn create(
        &self,
        _ctx: &Context<'_>,
        namespace: Option<&str>,
        request: axum::extract::Request,
    ) -> Result<Response, ApiError> {
        let mut review: LocalSubjectAccessReview = read_review(request).await?;
        match_namespace(&mut review.metadata, namespace)?;
        let mut errors = validate_subject_spec(&review.spec);
        if !meta_is_empty(&review.metadata, true) {
            errors.push(FieldError::invalid(
                &Path::new("metadata"),
                meta_value(&review.metadata),
                "must be empty except for namespace",
            ));
        }
        let own = review.metadata.namespace.clone().unwrap_or_default();
        if let Some(attributes) = &review.spec.resource_attributes {
            let wanted = attributes.namespace.clone().unwrap_or_default();
            if wanted != own {
                errors.push(FieldError::invalid(
                    &Path::new("spec.resourceAttributes.namespace"),
                    wanted,
                    "must match metadata.namespace",
                ));
            }
        }
        if let Some(attributes) = &review.spec.non_resource_attributes {
            errors.push(FieldError::invalid(
                &Path::new("spec.nonResourceAttributes"),
                serde_json::to_value(attributes).unwrap_or_default(),
                "disallowed on this kind of request",
            ));
        }
        check("LocalSubjectAccessReview", &errors)?;
        let path = namespace.unwrap_or_default();
        if path.is_empty() {
            return Err(ApiError::bad_request(
                "namespace is required on this type: ",
            ));
        }
        if path != own {
            return Err(ApiError::bad_request(format!(
                "spec.resourceAttributes.namespace must match namespace: {path}"
            )));
        }
        let spec = &review.spec;
        review.status = Some(decide(
            spec.user.as_deref().unwrap_or_default(),
            spec.groups.as_deref().unwrap_or_default(),
            None,
        ));
        created(&review)
    }
}

/// `selfsubjectaccessreviews` (`kubectl auth can-i`): cluster-scoped, create only.
pub struct SelfSubjectAccessReviews;

impl Strategy for SelfSubjectAccessReviews {
    type Object = SelfSubjectAccessReview;

    fn verbs(&self) -> &'static [&'static str] {
        CREATE
    }

    fn unstored(&self) -> Option<Arc<dyn Unstored>> {
        Some(Arc::new(ReviewSelf))
    }
}

/// The create of `selfsubjectaccessreviews` (upstream `selfsubjectaccessreview.REST.Create`).
struct ReviewSelf;

#[async_trait]
impl Unstored for ReviewSelf {
    /// Answers 201 with the review and Skiff's decision for the requesting user. Errors:
    /// 422 as upstream's `ValidateSelfSubjectAccessReview`.
    async fn create(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        request: axum::extract::Request,
    ) -> Result<Response, ApiError> {
        let mut review: SelfSubjectAccessReview = read_review(request).await?;
        match_namespace(&mut review.metadata, namespace)?;
        let spec = &review.spec;
        let mut errors = validate_attributes(
            spec.resource_attributes.is_some(),
            spec.non_resource_attributes.as_ref(),
            &Path::new("spec"),
        );
        if !meta_is_empty(&review.metadata, false) {
            errors.push(FieldError::invalid(
                &Path::new("metadata"),
                meta_value(&review.metadata),
                "must be empty",
            ));
        }
        check("SelfSubjectAccessReview", &errors)?;
        review.status = Some(decide(
            &ctx.user.name,
            &ctx.user.groups,
            spec.non_resource_attributes.as_ref(),
        ));
        created(&review)
    }
}

/// `selfsubjectrulesreviews` (`kubectl auth can-i --list`): cluster-scoped, create only.
pub struct SelfSubjectRulesReviews;

impl Strategy for SelfSubjectRulesReviews {
    type Object = SelfSubjectRulesReview;

    fn verbs(&self) -> &'static [&'static str] {
        CREATE
    }

    fn unstored(&self) -> Option<Arc<dyn Unstored>> {
        Some(Arc::new(ReviewRules))
    }
}

/// The create of `selfsubjectrulesreviews` (upstream `selfsubjectrulesreview.REST.Create`).
struct ReviewRules;

#[async_trait]
impl Unstored for ReviewRules {
    /// Answers 201 with a new review (no spec or metadata, as upstream) whose status
    /// grants every verb on every resource and non-resource URL. Errors: 400 without
    /// `spec.namespace`, upstream's `no namespace on request`.
    async fn create(
        &self,
        _ctx: &Context<'_>,
        _namespace: Option<&str>,
        request: axum::extract::Request,
    ) -> Result<Response, ApiError> {
        let asked: SelfSubjectRulesReview = read_review(request).await?;
        if asked
            .spec
            .namespace
            .as_deref()
            .unwrap_or_default()
            .is_empty()
        {
            return Err(ApiError::bad_request("no namespace on request"));
        }
        let every = || Some(vec!["*".to_owned()]);
        let review = SelfSubjectRulesReview {
            status: Some(SubjectRulesReviewStatus {
                resource_rules: vec![ResourceRule {
                    verbs: vec!["*".to_owned()],
                    api_groups: every(),
                    resources: every(),
                    resource_names: None,
                }],
                non_resource_rules: vec![NonResourceRule {
                    verbs: vec!["*".to_owned()],
                    non_resource_urls: every(),
                }],
                incomplete: false,
                evaluation_error: None,
            }),
            ..SelfSubjectRulesReview::default()
        };
        created(&review)
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::{Value, json};

    use super::ALLOWED_REASON;
    use crate::registry::testing::{Server, causes};

    const GROUP: &str = "/apis/authorization.k8s.io/v1";

    fn review(kind: &str, spec: Value) -> Value {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec})
    }

    #[tokio::test]
    async fn self_subject_reviews_allow_the_requesting_user() {
        let server = Server::start().await;
        let spec = json!({"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "default"}});
        let reply = server
            .send(
                "POST",
                &format!("{GROUP}/selfsubjectaccessreviews"),
                &review("SelfSubjectAccessReview", spec.clone()),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.body["spec"], spec);
        assert_eq!(reply.body["status"]["allowed"], true);
        assert_eq!(reply.body["status"]["reason"], ALLOWED_REASON);
        assert!(reply.body["metadata"]["uid"].is_null());

        let reply = server
            .send(
                "POST",
                &format!("{GROUP}/selfsubjectaccessreviews"),
                &review("SelfSubjectAccessReview", json!({})),
            )
            .await;
        assert_eq!(
            causes(&reply),
            [
                "spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
            ]
        );

        let rules = review("SelfSubjectRulesReview", json!({"namespace": "default"}));
        let reply = server
            .send("POST", &format!("{GROUP}/selfsubjectrulesreviews"), &rules)
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        let status = &reply.body["status"];
        assert_eq!(
            status["resourceRules"],
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}])
        );
        assert_eq!(
            status["nonResourceRules"],
            json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}])
        );
        assert_eq!(status["incomplete"], false);
        let reply = server
            .send(
                "POST",
                &format!("{GROUP}/selfsubjectrulesreviews"),
                &review("SelfSubjectRulesReview", json!({})),
            )
            .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        assert_eq!(reply.body["message"], "no namespace on request");
    }

    #[tokio::test]
    async fn subject_access_reviews_validate_as_upstream() {
        let server = Server::start().await;
        let uri = format!("{GROUP}/subjectaccessreviews");
        let allowed = review(
            "SubjectAccessReview",
            json!({"user": "jane", "nonResourceAttributes": {"path": "/api", "verb": "get"}}),
        );
        let reply = server.send("POST", &uri, &allowed).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.body["status"]["allowed"], true);
        assert_eq!(reply.body["status"]["reason"], ALLOWED_REASON);

        let anonymous = review(
            "SubjectAccessReview",
            json!({"user": "system:anonymous", "resourceAttributes": {"verb": "get", "resource": "pods"}}),
        );
        let reply = server.send("POST", &uri, &anonymous).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.body["status"]["allowed"], false);

        let both = review(
            "SubjectAccessReview",
            json!({
                "resourceAttributes": {"verb": "get", "resource": "pods"},
                "nonResourceAttributes": {"path": "/api", "verb": "get"},
            }),
        );
        let reply = server.send("POST", &uri, &both).await;
        let found = causes(&reply);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with("spec.nonResourceAttributes: Invalid value: ")
                && found[0]
                    .ends_with(": cannot be specified in combination with resourceAttributes"),
            "{found:?}"
        );
        assert_eq!(
            found[1],
            "spec.user: Invalid value: \"\": at least one of user or group must be specified"
        );
        assert!(
            reply.body["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with("SubjectAccessReview.authorization.k8s.io \"\" is invalid: ["),
            "{}",
            reply.body
        );
    }

    #[tokio::test]
    async fn local_subject_access_reviews_check_the_namespace() {
        let server = Server::start().await;
        let uri = format!("{GROUP}/namespaces/default/localsubjectaccessreviews");
        let spec = |ns: &str| {
            review(
                "LocalSubjectAccessReview",
                json!({"user": "jane", "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": ns}}),
            )
        };
        let reply = server.send("POST", &uri, &spec("default")).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.body["metadata"]["namespace"], "default");
        assert_eq!(reply.body["status"]["allowed"], true);

        let reply = server.send("POST", &uri, &spec("other")).await;
        assert_eq!(
            causes(&reply),
            [
                "spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace"
            ]
        );

        let mut elsewhere = spec("default");
        elsewhere["metadata"] = json!({"namespace": "other"});
        let reply = server.send("POST", &uri, &elsewhere).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    }

    #[tokio::test]
    async fn reviews_serve_create_only() {
        use tower::ServiceExt;
        let registry = crate::registry::Registry::builtin();
        let app: axum::Router = crate::discovery::router(
            crate::registry::LiveRegistry::shared(registry.clone()),
            crate::discovery::testing::addresses(),
        );
        let expected = [
            (
                "authentication.k8s.io",
                json!(["selfsubjectreviews", "tokenreviews"]),
            ),
            (
                "authorization.k8s.io",
                json!([
                    "localsubjectaccessreviews",
                    "selfsubjectaccessreviews",
                    "selfsubjectrulesreviews",
                    "subjectaccessreviews"
                ]),
            ),
        ];
        for (group, names) in expected {
            let request = axum::http::Request::builder()
                .uri(format!("/apis/{group}/v1"))
                .header("accept", "application/json")
                .body(axum::body::Body::empty())
                .expect("request");
            let response = app.clone().oneshot(request).await.expect("infallible");
            assert_eq!(response.status(), StatusCode::OK);
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("body");
            let list: Value = serde_json::from_slice(&bytes).expect("json");
            let resources = list["resources"].as_array().cloned().unwrap_or_default();
            let found: Vec<Value> = resources.iter().map(|r| r["name"].clone()).collect();
            assert_eq!(Value::from(found), names, "{list}");
            for resource in &resources {
                assert_eq!(resource["verbs"], json!(["create"]), "{resource}");
                let namespaced = resource["name"] == "localsubjectaccessreviews";
                assert_eq!(resource["namespaced"], namespaced, "{resource}");
                // Not stored: no storage version, as upstream.
                assert!(resource.get("storageVersionHash").is_none(), "{resource}");
            }
        }
    }
}
