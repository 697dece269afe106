//! Whether the user may (upstream `authorizerfactory.DelegatingAuthorizerConfig`):
//! `AlwaysAllow`, or `Webhook`, a SubjectAccessReview (`authorization.k8s.io/v1`) with the
//! API server whose answer is cached, allowed for 5 min and denied for 30 s (upstream's
//! `cacheAuthorizedTTL` / `cacheUnauthorizedTTL` defaults). Failed reviews are not cached.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};

use super::attributes::Attributes;
use super::cache::TtlCache;

/// Upstream's default `authorization.webhook.cacheAuthorizedTTL`.
pub const DEFAULT_AUTHORIZED_TTL: Duration = Duration::from_secs(300);
/// Upstream's default `authorization.webhook.cacheUnauthorizedTTL`.
pub const DEFAULT_UNAUTHORIZED_TTL: Duration = Duration::from_secs(30);

/// An authorizer's answer (upstream `authorizer.Decision`). Only `Allow` lets a request
/// through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Explicitly denied.
    Deny,
    /// Neither: not allowed.
    NoOpinion,
}

/// Sends SubjectAccessReviews and returns their status.
#[async_trait]
pub trait AccessReviewer: Send + Sync {
    /// The API server's verdict on `spec`. Errors: the review could not be made.
    async fn review(
        &self,
        spec: SubjectAccessReviewSpec,
    ) -> anyhow::Result<SubjectAccessReviewStatus>;
}

#[async_trait]
impl AccessReviewer for kube::Client {
    async fn review(
        &self,
        spec: SubjectAccessReviewSpec,
    ) -> anyhow::Result<SubjectAccessReviewStatus> {
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        let created = Api::<SubjectAccessReview>::all(self.clone())
            .create(&PostParams::default(), &review)
            .await?;
        Ok(created.status.unwrap_or_default())
    }
}

/// The authorizer of the main port (`authorization.mode`).
pub enum Authorizer {
    /// Every authenticated request is allowed.
    AlwaysAllow,
    /// Asked of the API server.
    Webhook(WebhookAuthorizer),
}

impl Authorizer {
    /// The decision on `attrs`. Errors: the review failed (a 500 upstream).
    pub async fn authorize(&self, attrs: &Attributes) -> anyhow::Result<Decision> {
        match self {
            Authorizer::AlwaysAllow => Ok(Decision::Allow),
            Authorizer::Webhook(webhook) => webhook.authorize(attrs).await,
        }
    }
}

/// SubjectAccessReviews with cached answers (upstream `webhook.WebhookAuthorizer`).
pub struct WebhookAuthorizer {
    reviewer: Arc<dyn AccessReviewer>,
    authorized_ttl: Duration,
    unauthorized_ttl: Duration,
    cache: TtlCache<String, SubjectAccessReviewStatus>,
}

impl WebhookAuthorizer {
    /// Reviews through `reviewer`; allowed answers are kept `authorized_ttl`, others
    /// `unauthorized_ttl`.
    pub fn new(
        reviewer: Arc<dyn AccessReviewer>,
        authorized_ttl: Duration,
        unauthorized_ttl: Duration,
    ) -> Self {
        WebhookAuthorizer {
            reviewer,
            authorized_ttl,
            unauthorized_ttl,
            cache: TtlCache::new(),
        }
    }

    async fn authorize(&self, attrs: &Attributes) -> anyhow::Result<Decision> {
        let spec = review_spec(attrs);
        // The spec, serialized, is the cache key (as upstream).
        let key = serde_json::to_string(&spec)?;
        let status = match self.cache.get(&key) {
            Some(status) => status,
            None => {
                let status = self.reviewer.review(spec).await?;
                let ttl = if status.allowed {
                    self.authorized_ttl
                } else {
                    self.unauthorized_ttl
                };
                self.cache.insert(key, status.clone(), ttl);
                status
            }
        };
        Ok(if status.allowed {
            Decision::Allow
        } else if status.denied == Some(true) {
            Decision::Deny
        } else {
            Decision::NoOpinion
        })
    }
}

/// The review of `attrs`: the user with its groups, uid and extra, and the resource
/// attributes (empty strings left out, as upstream's `omitempty`).
fn review_spec(attrs: &Attributes) -> SubjectAccessReviewSpec {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    SubjectAccessReviewSpec {
        user: some(&attrs.user.name),
        uid: some(&attrs.user.uid),
        groups: (!attrs.user.groups.is_empty()).then(|| attrs.user.groups.clone()),
        extra: (!attrs.user.extra.is_empty()).then(|| {
            attrs
                .user
                .extra
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<BTreeMap<_, _>>()
        }),
        resource_attributes: Some(ResourceAttributes {
            verb: some(&attrs.verb),
            group: None,
            version: Some("v1".to_owned()),
            resource: Some(attrs.resource.to_owned()),
            subresource: some(attrs.subresource),
            name: some(&attrs.name),
            namespace: None,
            ..Default::default()
        }),
        non_resource_attributes: None,
    }
}
