//! Client-side rate limiting of API requests (client-go `util/flowcontrol`
//! `NewTokenBucketRateLimiter`, applied by `rest.RESTClientFor`): a token bucket refilled
//! at `qps` tokens per second holding at most `burst`, full at start. Each request takes
//! a token, waiting for it when the bucket is empty.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// client-go's `rest.DefaultQPS`, used when the configured QPS is 0.
pub const DEFAULT_QPS: f32 = 5.0;
/// client-go's `rest.DefaultBurst`, used when the configured burst is 0.
pub const DEFAULT_BURST: i32 = 10;

/// A token bucket (golang.org/x/time/rate semantics: a request reserves a token, the
/// balance may go below zero, and the reserving request waits until it is repaid).
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// The limiter client-go builds for `qps` / `burst` (`kubeAPIQPS` / `kubeAPIBurst`):
    /// 0 means the defaults (5 / 10), and a negative QPS means no limit (`None`).
    pub fn from_config(qps: f32, burst: i32) -> Option<Arc<TokenBucket>> {
        let qps = if qps == 0.0 { DEFAULT_QPS } else { qps };
        let burst = if burst == 0 { DEFAULT_BURST } else { burst };
        (qps > 0.0).then(|| Arc::new(TokenBucket::new(f64::from(qps), f64::from(burst.max(1)))))
    }

    /// A full bucket of `burst` tokens refilled at `qps` per second.
    pub fn new(qps: f64, burst: f64) -> TokenBucket {
        TokenBucket {
            qps,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes a token and returns how long its taker must wait before using it (zero
    /// when one was available).
    pub fn reserve(&self) -> Duration {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, last) = *state;
        let refilled = (tokens + now.saturating_duration_since(last).as_secs_f64() * self.qps)
            .min(self.burst)
            - 1.0;
        *state = (refilled, now);
        if refilled >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-refilled / self.qps)
        }
    }
}

/// Rate-limits the wrapped service with a shared [`TokenBucket`].
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
}

impl RateLimitLayer {
    /// A layer taking a token of `bucket` per request.
    pub fn new(bucket: Arc<TokenBucket>) -> Self {
        RateLimitLayer { bucket }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            state: Permit::None,
        }
    }
}

/// Where the next request's token stands.
enum Permit {
    /// Not reserved yet.
    None,
    /// Reserved, usable once the sleep ends.
    Waiting(Pin<Box<Sleep>>),
    /// Reserved and usable.
    Ready,
}

/// The service of [`RateLimitLayer`]: not ready until the next request holds a token.
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    state: Permit,
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        loop {
            match &mut self.state {
                Permit::None => {
                    let wait = self.bucket.reserve();
                    self.state = if wait.is_zero() {
                        Permit::Ready
                    } else {
                        Permit::Waiting(Box::pin(tokio::time::sleep(wait)))
                    };
                }
                Permit::Waiting(sleep) => {
                    ready!(sleep.as_mut().poll(cx));
                    self.state = Permit::Ready;
                }
                Permit::Ready => return self.inner.poll_ready(cx),
            }
        }
    }

    fn call(&mut self, request: R) -> S::Future {
        self.state = Permit::None;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_a_burst_then_refills_at_qps() {
        let bucket = TokenBucket::new(2.0, 3.0);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(), Duration::ZERO);
        }
        // Empty: the 4th waits half a second (one token at 2 QPS), the 5th a second.
        assert_eq!(bucket.reserve(), Duration::from_millis(500));
        assert_eq!(bucket.reserve(), Duration::from_secs(1));
        // Ten seconds later the bucket is full again, never above its burst.
        tokio::time::advance(Duration::from_secs(10)).await;
        for _ in 0..3 {
            assert_eq!(bucket.reserve(), Duration::ZERO);
        }
        assert!(bucket.reserve() > Duration::ZERO);
    }

    #[test]
    fn config_follows_client_go() {
        let default = TokenBucket::from_config(0.0, 0).expect("QPS 0 is client-go's default");
        assert_eq!((default.qps, default.burst), (5.0, 10.0));
        let kubelet = TokenBucket::from_config(50.0, 100).unwrap();
        assert_eq!((kubelet.qps, kubelet.burst), (50.0, 100.0));
        assert!(
            TokenBucket::from_config(-1.0, 10).is_none(),
            "negative QPS: no limit"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn layer_delays_requests_beyond_the_burst() {
        let bucket = Arc::new(TokenBucket::new(10.0, 2.0));
        let service =
            tower::service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n) });
        let mut limited = RateLimitLayer::new(bucket).layer(service);
        let start = Instant::now();
        let mut done_at = Vec::new();
        for n in 0..4 {
            let answer = limited.ready().await.unwrap().call(n).await.unwrap();
            assert_eq!(answer, n);
            done_at.push(start.elapsed());
        }
        assert_eq!(done_at[0], Duration::ZERO);
        assert_eq!(done_at[1], Duration::ZERO);
        // 10 QPS: one token every 100 ms once the burst of 2 is spent.
        assert_eq!(done_at[2], Duration::from_millis(100));
        assert_eq!(done_at[3], Duration::from_millis(200));
    }
}
