//! Who is asking (upstream `authenticatorfactory.DelegatingAuthenticatorConfig`): a client
//! certificate verified against `--client-ca-file` (user = CN, groups = O), else a bearer
//! token checked by a TokenReview with the API server (answers cached for `cacheTTL`,
//! 2 min), and `system:authenticated` added to whoever they name. Only when neither finds
//! any credential is the request anonymous (`system:anonymous`, group
//! `system:unauthenticated`), and only with `--anonymous-auth`; a credential that fails
//! is a 401 even then.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::{HeaderMap, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use kube::api::{Api, PostParams};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;

use super::UserInfo;
use super::cache::TtlCache;

/// The anonymous user (upstream `user.Anonymous`).
pub const ANONYMOUS: &str = "system:anonymous";
/// The group of anonymous requests (upstream `user.AllUnauthenticated`).
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The group added to every authenticated user (upstream `user.AllAuthenticated`).
pub const AUTHENTICATED: &str = "system:authenticated";
/// Upstream's default `authentication.webhook.cacheTTL`.
pub const DEFAULT_TOKEN_CACHE_TTL: Duration = Duration::from_secs(120);

/// The certificates the client presented in the TLS handshake (end entity first), put
/// in each request's extensions by the server.
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// Sends TokenReviews (`authentication.k8s.io/v1`) and returns their status.
#[async_trait]
pub trait TokenReviewer: Send + Sync {
    /// The API server's verdict on `token`. Errors: the review could not be made.
    async fn review(&self, token: &str) -> anyhow::Result<TokenReviewStatus>;
}

#[async_trait]
impl TokenReviewer for kube::Client {
    async fn review(&self, token: &str) -> anyhow::Result<TokenReviewStatus> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            ..Default::default()
        };
        let created = Api::<TokenReview>::all(self.clone())
            .create(&PostParams::default(), &review)
            .await?;
        Ok(created.status.unwrap_or_default())
    }
}

/// The request authenticator of the main port.
pub struct Authenticator {
    /// Verifies client certificates against the client CA (`None`: no `--client-ca-file`).
    pub(crate) x509: Option<Arc<dyn ClientCertVerifier>>,
    /// Bearer tokens (`None`: no `--authentication-token-webhook`).
    pub(crate) token: Option<TokenAuthenticator>,
    /// Whether requests without credentials are anonymous rather than refused.
    pub(crate) anonymous: bool,
}

/// Why authentication failed (the request gets 401 either way).
#[derive(Debug)]
pub enum AuthnError {
    /// No authenticator recognised the request and anonymous requests are off.
    NoCredentials,
    /// A credential was presented and refused; the messages of every failure.
    Failed(Vec<String>),
}

impl std::error::Error for AuthnError {}

impl std::fmt::Display for AuthnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthnError::NoCredentials => f.write_str("no credentials"),
            AuthnError::Failed(errors) => f.write_str(&errors.join(", ")),
        }
    }
}

impl Authenticator {
    /// The user of a request with `headers`, presenting `peer` in the TLS handshake.
    /// Errors: [`AuthnError`] (a 401).
    pub async fn authenticate(
        &self,
        peer: Option<&PeerCertificates>,
        headers: &HeaderMap,
    ) -> Result<UserInfo, AuthnError> {
        let mut errors = Vec::new();
        let mut user = None;
        if let (Some(verifier), Some(chain)) = (&self.x509, peer) {
            match verify_certificate(verifier.as_ref(), &chain.0) {
                Ok(found) => user = found,
                Err(e) => errors.push(e.to_string()),
            }
        }
        if user.is_none()
            && let (Some(tokens), Some(token)) = (&self.token, bearer_token(headers))
        {
            match tokens.authenticate(token).await {
                Ok(found) => user = Some(found),
                Err(e) => errors.push(e.to_string()),
            }
        }
        match user {
            Some(mut user) => {
                // Upstream's AuthenticatedGroupAdder.
                let anonymous_or_tagged = user.name == ANONYMOUS
                    || user
                        .groups
                        .iter()
                        .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED);
                if !anonymous_or_tagged {
                    user.groups.push(AUTHENTICATED.to_owned());
                }
                Ok(user)
            }
            None if !errors.is_empty() => Err(AuthnError::Failed(errors)),
            None if self.anonymous => Ok(UserInfo {
                name: ANONYMOUS.to_owned(),
                groups: vec![UNAUTHENTICATED.to_owned()],
                ..UserInfo::default()
            }),
            None => Err(AuthnError::NoCredentials),
        }
    }
}

/// The user of a client certificate chain: `Ok(None)` when it has no common name,
/// an error when it does not verify against the client CA.
fn verify_certificate(
    verifier: &dyn ClientCertVerifier,
    chain: &[CertificateDer<'static>],
) -> anyhow::Result<Option<UserInfo>> {
    let Some((end_entity, intermediates)) = chain.split_first() else {
        return Ok(None);
    };
    verifier
        .verify_client_cert(end_entity, intermediates, UnixTime::now())
        .map_err(|e| anyhow::anyhow!("verifying certificate: {e}"))?;
    Ok(
        skiff_bootstrap::pki::certificate_subject(end_entity).map(|(name, groups)| UserInfo {
            name,
            groups,
            ..UserInfo::default()
        }),
    )
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), as
/// upstream's `bearertoken` authenticator reads it.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Bearer tokens checked by TokenReview, answers cached (upstream `cache.New` around
/// the webhook token authenticator: success and failure both for `cacheTTL`; errors
/// are not cached).
pub struct TokenAuthenticator {
    reviewer: Arc<dyn TokenReviewer>,
    ttl: Duration,
    cache: TtlCache<String, Option<UserInfo>>,
}

impl TokenAuthenticator {
    /// Reviews through `reviewer`, caching answers for `ttl`.
    pub fn new(reviewer: Arc<dyn TokenReviewer>, ttl: Duration) -> Self {
        TokenAuthenticator {
            reviewer,
            ttl,
            cache: TtlCache::new(),
        }
    }

    /// The user `token` belongs to. Errors: the token is not authenticated
    /// (`invalid bearer token`), or the review failed.
    async fn authenticate(&self, token: &str) -> anyhow::Result<UserInfo> {
        let answer = match self.cache.get(&token.to_owned()) {
            Some(answer) => answer,
            None => {
                let status = self.reviewer.review(token).await?;
                if !status.authenticated.unwrap_or(false)
                    && let Some(error) = status.error.filter(|e| !e.is_empty())
                {
                    // A review that reports an error is an error, not cached.
                    anyhow::bail!("{error}");
                }
                let answer = status
                    .authenticated
                    .unwrap_or(false)
                    .then(|| status.user.unwrap_or_default())
                    .map(|u| UserInfo {
                        name: u.username.unwrap_or_default(),
                        uid: u.uid.unwrap_or_default(),
                        groups: u.groups.unwrap_or_default(),
                        extra: u.extra.unwrap_or_default(),
                    });
                self.cache
                    .insert(token.to_owned(), answer.clone(), self.ttl);
                answer
            }
        };
        answer.ok_or_else(|| anyhow::anyhow!("invalid bearer token"))
    }
}
