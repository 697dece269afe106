//! ServiceAccount tokens for projected volumes (upstream `pkg/kubelet/token`
//! `Manager.GetServiceAccountToken`): tokens are cached per service account, audiences,
//! lifetime and bound object, and requested again once 80 % of their lifetime has passed
//! or they are older than 24 hours (each with up to 10 s of jitter). When a refresh fails
//! the cached token is kept while it is still valid.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tracing::warn;

use super::{ObjectError, ObjectSource};

/// Tokens older than this are refreshed whatever their lifetime (upstream `maxTTL`).
const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Upper bound of the random early refresh (upstream `maxJitter`).
const MAX_JITTER: Duration = Duration::from_secs(10);

/// The cache key of a request (upstream `keyFunc`): namespace, service account,
/// audiences, expiration and bound object.
fn key_of(namespace: &str, service_account: &str, request: &TokenRequest) -> String {
    let spec = request.spec.clone().unwrap_or_default();
    let bound = spec
        .bound_object_ref
        .as_ref()
        .map(|r| {
            format!(
                "{}/{}/{}/{}",
                r.api_version.as_deref().unwrap_or(""),
                r.kind.as_deref().unwrap_or(""),
                r.name.as_deref().unwrap_or(""),
                r.uid.as_deref().unwrap_or("")
            )
        })
        .unwrap_or_default();
    format!(
        "{service_account}/{namespace}/{:?}/{}/{bound}",
        spec.audiences,
        spec.expiration_seconds.unwrap_or(0)
    )
}

/// A deterministic jitter in `[0, MAX_JITTER)` per key, so that tokens of different
/// pods do not all refresh in the same second.
fn jitter(key: &str) -> SignedDuration {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    SignedDuration::from_secs((hash % MAX_JITTER.as_secs()) as i64)
}

/// True when `token` must be requested again at `now` (upstream `requiresRefresh`).
fn requires_refresh(token: &TokenRequest, now: Timestamp, jitter: SignedDuration) -> bool {
    let seconds = token.spec.as_ref().and_then(|s| s.expiration_seconds);
    let expires = token
        .status
        .as_ref()
        .and_then(|s| s.expiration_timestamp.as_ref());
    let (Some(seconds), Some(expires)) = (seconds, expires) else {
        return false;
    };
    let expires = expires.0;
    let issued = expires - SignedDuration::from_secs(seconds);
    let max_ttl = SignedDuration::try_from(MAX_TTL).unwrap_or(SignedDuration::MAX);
    if now > issued + max_ttl - jitter {
        return true;
    }
    now > expires - SignedDuration::from_secs(seconds * 20 / 100) - jitter
}

/// The token manager of the node.
pub struct TokenManager {
    objects: Arc<dyn ObjectSource>,
    cache: Mutex<HashMap<String, TokenRequest>>,
}

impl TokenManager {
    /// A manager requesting tokens through `objects`.
    pub fn new(objects: Arc<dyn ObjectSource>) -> Self {
        Self {
            objects,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The token of `service_account` in `namespace` for `request` (audiences,
    /// expirationSeconds, boundObjectRef), from the cache unless it is due for refresh.
    /// Errors when the API refuses and no still-valid token is cached.
    pub fn get_service_account_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, ObjectError> {
        self.get_at(namespace, service_account, request, Timestamp::now())
    }

    fn get_at(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
        now: Timestamp,
    ) -> Result<TokenRequest, ObjectError> {
        let key = key_of(namespace, service_account, request);
        let cached = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        if let Some(token) = &cached
            && !requires_refresh(token, now, jitter(&key))
        {
            return Ok(token.clone());
        }
        match self
            .objects
            .request_token(namespace, service_account, request)
        {
            Ok(token) => {
                if token.status.is_none() {
                    return Err(ObjectError::Other(
                        "TokenRequest answered without a token".to_owned(),
                    ));
                }
                self.cache
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(key, token.clone());
                Ok(token)
            }
            Err(e) => match cached {
                Some(token)
                    if token
                        .status
                        .as_ref()
                        .and_then(|s| s.expiration_timestamp.as_ref())
                        .is_some_and(|t| t.0 > now) =>
                {
                    warn!(namespace, service_account, error = %e, "couldn't update token; keeping the cached one");
                    Ok(token)
                }
                _ => Err(e),
            },
        }
    }

    /// Forgets the tokens bound to pod `uid` (upstream `DeleteServiceAccountToken`).
    pub fn delete_service_account_token(&self, uid: &str) {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, t| {
                t.spec
                    .as_ref()
                    .and_then(|s| s.bound_object_ref.as_ref())
                    .and_then(|r| r.uid.as_deref())
                    != Some(uid)
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::fake::FakeObjects;
    use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequestSpec};

    fn request(seconds: i64) -> TokenRequest {
        TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(vec!["api".into()]),
                expiration_seconds: Some(seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some("p".into()),
                    uid: Some("u1".into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn tokens_are_cached_until_eighty_percent_of_their_lifetime() {
        let fake = FakeObjects::with(|_| {});
        let manager = TokenManager::new(fake.clone());
        let start = Timestamp::now();
        let first = manager.get_at("ns", "sa", &request(3600), start).unwrap();
        assert_eq!(
            first.status.as_ref().unwrap().token.as_deref(),
            Some("token-1")
        );
        // 70 % of an hour: still cached.
        let later = start + SignedDuration::from_secs(2520);
        let again = manager.get_at("ns", "sa", &request(3600), later).unwrap();
        assert_eq!(
            again.status.as_ref().unwrap().token.as_deref(),
            Some("token-1")
        );
        // Past 80 % (plus the largest jitter): requested again.
        let due = start + SignedDuration::from_secs(2881);
        let fresh = manager.get_at("ns", "sa", &request(3600), due).unwrap();
        assert_eq!(
            fresh.status.as_ref().unwrap().token.as_deref(),
            Some("token-2")
        );
        // Another audience is another token.
        let mut other = request(3600);
        other.spec.as_mut().unwrap().audiences = Some(vec!["vault".into()]);
        let third = manager.get_at("ns", "sa", &other, due).unwrap();
        assert_eq!(
            third.status.as_ref().unwrap().token.as_deref(),
            Some("token-3")
        );
        let requests = &fake.state.lock().unwrap().token_requests;
        assert_eq!(requests.len(), 3);
        assert_eq!(requests[0].0, "ns");
        assert_eq!(requests[0].1, "sa");
    }

    #[test]
    fn tokens_older_than_a_day_are_refreshed() {
        let fake = FakeObjects::with(|_| {});
        let manager = TokenManager::new(fake);
        let start = Timestamp::now();
        let week = 7 * 24 * 3600;
        manager.get_at("ns", "sa", &request(week), start).unwrap();
        let day = start + SignedDuration::from_secs(24 * 3600 - 20);
        let cached = manager.get_at("ns", "sa", &request(week), day).unwrap();
        assert_eq!(cached.status.unwrap().token.as_deref(), Some("token-1"));
        let past = start + SignedDuration::from_secs(24 * 3600 + 1);
        let fresh = manager.get_at("ns", "sa", &request(week), past).unwrap();
        assert_eq!(fresh.status.unwrap().token.as_deref(), Some("token-2"));
    }

    #[test]
    fn a_failed_refresh_keeps_a_valid_token_and_fails_without_one() {
        let fake = FakeObjects::with(|_| {});
        let manager = TokenManager::new(fake.clone());
        let start = Timestamp::now();
        manager.get_at("ns", "sa", &request(3600), start).unwrap();
        fake.edit(|s| s.token_error = Some("boom".into()));
        let due = start + SignedDuration::from_secs(3000);
        let kept = manager.get_at("ns", "sa", &request(3600), due).unwrap();
        assert_eq!(kept.status.unwrap().token.as_deref(), Some("token-1"));
        let expired = start + SignedDuration::from_secs(3601);
        assert_eq!(
            manager
                .get_at("ns", "sa", &request(3600), expired)
                .unwrap_err()
                .to_string(),
            "boom"
        );
        manager.delete_service_account_token("u1");
        assert!(manager.cache.lock().unwrap().is_empty());
    }
}
