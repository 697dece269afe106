//! Authentication and authorization of the main port (upstream `pkg/kubelet/server/auth.go`,
//! `server.go` `InstallAuthFilter`, and `cmd/kubelet/app/auth.go` `BuildAuth`).
//!
//! Every request is authenticated ([`authn`]: client certificate, bearer token, or
//! anonymous), turned into one or more `nodes/<subresource>` attribute sets
//! ([`attributes`]) and allowed as soon as the authorizer ([`authz`]) allows one of them.
//! Refusals answer as upstream, in plain text: 401 `Unauthorized`; 403
//! `Forbidden (user=U, verb=V, resource=nodes, subresource(s)=[S...])`; 500
//! `Authorization error (user=U, verb=V, resource=nodes, subresource=S)` when a review
//! fails.

pub mod attributes;
pub mod authn;
pub mod authz;
mod cache;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use tracing::{debug, error, warn};

use crate::{AuthorizationMode, KubeletConfig};
use attributes::NodeAttributesGetter;
use authn::{Authenticator, AuthnError, PeerCertificates, TokenAuthenticator};
use authz::{Authorizer, Decision, WebhookAuthorizer};

/// An authenticated user (upstream `user.Info`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name (a certificate's CN, a token's username, or `system:anonymous`).
    pub name: String,
    /// UID, when the token review gave one.
    pub uid: String,
    /// Groups (a certificate's organizations, a token's groups), `system:authenticated`
    /// added.
    pub groups: Vec<String>,
    /// Extra attributes of a token's user.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with only a name.
    pub fn named(name: impl Into<String>) -> Self {
        UserInfo {
            name: name.into(),
            ..UserInfo::default()
        }
    }
}

/// The authenticator, attribute getter and authorizer of the main port (upstream
/// `KubeletAuth`).
pub struct KubeletAuth {
    /// Who is asking.
    pub authenticator: Authenticator,
    /// What they ask for.
    pub attributes: NodeAttributesGetter,
    /// Whether they may.
    pub authorizer: Authorizer,
}

/// What [`build`] returns: the request filter's state, and the TLS client-certificate
/// verifier when `--client-ca-file` is set (the server must then request certificates).
pub struct BuiltAuth {
    /// The filter's state (see [`filter`]).
    pub auth: Arc<KubeletAuth>,
    /// Verifies client certificates against the client CA.
    pub client_verifier: Option<Arc<dyn ClientCertVerifier>>,
}

/// Builds the main port's authentication and authorization from `config` (upstream
/// `BuildAuth`), using `api` for TokenReviews and SubjectAccessReviews.
///
/// Upstream refuses to start when a webhook is configured without an API client, or when
/// no authentication method is configured at all; Skiff starts, logs a warning and
/// refuses such requests (401, or 500 for the reviews) so that a standalone kubelet with
/// a kubeadm-style configuration file still runs its static pods.
///
/// Errors: the client CA file cannot be read or holds no usable certificate.
pub fn build(config: &KubeletConfig, api: Option<&kube::Client>) -> anyhow::Result<BuiltAuth> {
    let client_verifier = match &config.client_ca_file {
        Some(path) => Some(client_ca_verifier(path)?),
        None => None,
    };
    let token = match (config.authentication_token_webhook, api) {
        (true, Some(client)) => Some(TokenAuthenticator::new(
            Arc::new(client.clone()),
            authn::DEFAULT_TOKEN_CACHE_TTL,
        )),
        (true, None) => {
            warn!("no client provided, cannot use webhook authentication");
            None
        }
        (false, _) => None,
    };
    if client_verifier.is_none() && token.is_none() && !config.anonymous_auth {
        warn!("no authentication method configured: every request to the kubelet port gets 401");
    }
    let authorizer = match (config.authorization_mode, api) {
        (AuthorizationMode::AlwaysAllow, _) => Authorizer::AlwaysAllow,
        (AuthorizationMode::Webhook, client) => {
            let reviewer: Arc<dyn authz::AccessReviewer> = match client {
                Some(client) => Arc::new(client.clone()),
                None => {
                    warn!("no client provided, cannot use webhook authorization");
                    Arc::new(NoClient)
                }
            };
            Authorizer::Webhook(WebhookAuthorizer::new(
                reviewer,
                authz::DEFAULT_AUTHORIZED_TTL,
                authz::DEFAULT_UNAUTHORIZED_TTL,
            ))
        }
    };
    let auth = KubeletAuth {
        authenticator: Authenticator {
            x509: client_verifier.clone(),
            token,
            anonymous: config.anonymous_auth,
        },
        attributes: NodeAttributesGetter::new(config.node_name.clone()),
        authorizer,
    };
    Ok(BuiltAuth {
        auth: Arc::new(auth),
        client_verifier,
    })
}

/// The reviewer of a Webhook authorizer without an API client: every review fails.
struct NoClient;

#[async_trait::async_trait]
impl authz::AccessReviewer for NoClient {
    async fn review(
        &self,
        _spec: k8s_openapi::api::authorization::v1::SubjectAccessReviewSpec,
    ) -> anyhow::Result<k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus> {
        anyhow::bail!("no client provided, cannot use webhook authorization")
    }
}

/// A verifier of client certificates issued by the CAs of the PEM bundle at `path`
/// (certificates are optional: requests without one go on to the other authenticators).
/// Errors: unreadable file, no certificate, or an unusable CA.
pub fn client_ca_verifier(path: &Path) -> anyhow::Result<Arc<dyn ClientCertVerifier>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading the client CA file {}", path.display()))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    anyhow::ensure!(
        added > 0,
        "no usable certificate in the client CA file {}",
        path.display()
    );
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .with_context(|| format!("using the client CA file {}", path.display()))
}

/// The request filter of the main port (an axum middleware with [`KubeletAuth`] as
/// state): authenticates, authorizes, and only then runs the handler.
pub async fn filter(
    State(auth): State<Arc<KubeletAuth>>,
    request: Request,
    next: Next,
) -> Response {
    let peer = request.extensions().get::<PeerCertificates>().cloned();
    let headers = request.headers().clone();
    let user = match auth
        .authenticator
        .authenticate(peer.as_ref(), &headers)
        .await
    {
        Ok(user) => user,
        Err(e) => {
            if let AuthnError::Failed(_) = e {
                error!(error = %e, "Unable to authenticate the request due to an error");
            }
            return plain(StatusCode::UNAUTHORIZED, "Unauthorized".to_owned());
        }
    };
    let attrs = auth
        .attributes
        .attributes(&user, request.method(), request.uri().path());
    let mut allowed = false;
    for attr in &attrs {
        match auth.authorizer.authorize(attr).await {
            Ok(Decision::Allow) => {
                allowed = true;
                break;
            }
            Ok(Decision::Deny | Decision::NoOpinion) => {}
            Err(e) => {
                error!(error = %e, user = %attr.user.name, verb = %attr.verb, resource = attr.resource, subresource = attr.subresource, "Authorization error");
                return plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!(
                        "Authorization error (user={}, verb={}, resource={}, subresource={})",
                        attr.user.name, attr.verb, attr.resource, attr.subresource
                    ),
                );
            }
        }
    }
    if !allowed {
        let subresources: Vec<&str> = attrs.iter().map(|a| a.subresource).collect();
        debug!(user = %user.name, verb = ?attrs.first().map(|a| &a.verb), ?subresources, "Forbidden");
        let verb = attrs.first().map(|a| a.verb.as_str()).unwrap_or_default();
        return plain(
            StatusCode::FORBIDDEN,
            format!(
                "Forbidden (user={}, verb={verb}, resource=nodes, subresource(s)=[{}])\n",
                user.name,
                subresources.join(" ")
            ),
        );
    }
    next.run(request).await
}

/// A plain-text answer, as go-restful's `WriteErrorString` (Go sniffs it as text).
fn plain(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests;
