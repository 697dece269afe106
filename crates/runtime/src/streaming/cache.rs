//! The request cache behind the streaming URLs: CRI Exec / Attach / PortForward store the
//! validated request under a random single-use token that expires after a minute
//! (upstream `kubelet/pkg/kubelet/cri/streaming/request_cache.go`).

use std::collections::HashMap;
use std::io::Read as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_cri::v1::{AttachRequest, ExecRequest, PortForwardRequest};

use crate::error::{Error, Result};

/// How long a token stays valid.
pub const TOKEN_TTL: Duration = Duration::from_secs(60);
/// Most requests waiting to be used at once (upstream `MaxInFlight`).
pub const MAX_IN_FLIGHT: usize = 1000;
/// Random bytes per token (11 characters of URL-safe base64).
const TOKEN_BYTES: usize = 8;

/// A request waiting for its client to connect.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// CRI Exec.
    Exec(ExecRequest),
    /// CRI Attach.
    Attach(AttachRequest),
    /// CRI PortForward.
    PortForward(PortForwardRequest),
}

/// Tokens to requests, with expiry.
pub struct RequestCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Request)>>,
}

impl RequestCache {
    /// An empty cache whose tokens live `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Stores `request` and returns its new token; [`Error::ResourceExhausted`] when
    /// [`MAX_IN_FLIGHT`] unexpired requests are waiting (as upstream).
    pub fn insert(&self, request: Request) -> Result<String> {
        self.insert_at(request, Instant::now())
    }

    /// [`RequestCache::insert`] at the time `now`.
    fn insert_at(&self, request: Request, now: Instant) -> Result<String> {
        let mut entries = self.lock();
        entries.retain(|_, (expires, _)| *expires > now);
        if entries.len() >= MAX_IN_FLIGHT {
            return Err(Error::ResourceExhausted(format!(
                "maximum number of in-flight streaming requests ({MAX_IN_FLIGHT}) exceeded"
            )));
        }
        let token = loop {
            let token = random_token()?;
            if !entries.contains_key(&token) {
                break token;
            }
        };
        entries.insert(token.clone(), (now + self.ttl, request));
        Ok(token)
    }

    /// Takes the request of `token`; `None` when unknown, used or expired.
    pub fn consume(&self, token: &str) -> Option<Request> {
        let (expires, request) = self.lock().remove(token)?;
        (expires > Instant::now()).then_some(request)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Request)>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// [`TOKEN_BYTES`] from the kernel's CSPRNG, URL-safe base64 without padding.
fn random_token() -> Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(id: &str) -> Request {
        Request::Exec(ExecRequest {
            container_id: id.into(),
            ..Default::default()
        })
    }

    #[test]
    fn tokens_are_single_use() {
        let cache = RequestCache::new(TOKEN_TTL);
        let (a, b) = (
            cache.insert(exec("a")).unwrap(),
            cache.insert(exec("b")).unwrap(),
        );
        assert_ne!(a, b);
        assert_eq!(a.len(), 11);
        assert_eq!(cache.consume(&b), Some(exec("b")));
        assert_eq!(cache.consume(&b), None);
        assert_eq!(cache.consume(&a), Some(exec("a")));
        assert_eq!(cache.consume("unknown"), None);
    }

    #[test]
    fn tokens_expire() {
        let cache = RequestCache::new(Duration::from_millis(50));
        let token = cache.insert(exec("a")).unwrap();
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(cache.consume(&token), None);
    }

    #[test]
    fn in_flight_requests_are_bounded_and_expired_ones_make_room() {
        // At fixed instants: a busy machine once let the first ones expire while the
        // cache filled.
        let ttl = Duration::from_millis(200);
        let cache = RequestCache::new(ttl);
        let start = Instant::now();
        for _ in 0..MAX_IN_FLIGHT {
            cache.insert_at(exec("a"), start).unwrap();
        }
        assert!(cache.insert_at(exec("a"), start + ttl / 2).is_err());
        assert!(cache.insert_at(exec("a"), start + ttl).is_ok());
    }
}
