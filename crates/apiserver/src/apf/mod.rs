//! API Priority and Fairness (upstream `k8s.io/apiserver/pkg/util/flowcontrol` and
//! `pkg/server/filters/priority-and-fairness.go`): every authenticated request is
//! classified by the FlowSchemas into a priority level, and each limited level runs at
//! most its share of the server's seats, queuing the rest fairly between flows.
//!
//! - [`request_info`]: what a request asks for (verb, group, resource, namespace, path);
//! - [`matching`]: FlowSchema rules, flow distinguishers and flow hashes;
//! - [`shuffle`]: the queues a flow may use; [`queueset`]: fair queuing of one level;
//! - [`estimate`]: seats per request (LISTs by object count); [`retry_after`];
//! - [`controller`]: follows the FlowSchemas and PriorityLevelConfigurations in the store
//!   and writes the FlowSchemas' `Dangling` condition.
//!
//! The server's seats ([`ServerConfig`]'s `--max-requests-inflight` plus
//! `--max-mutating-requests-inflight`, 600 by default) are divided among the levels by
//! `nominalConcurrencyShares` (rounded up). Simplified from upstream: levels neither lend
//! nor borrow seats (`lendablePercent` and `borrowingLimitPercent` are ignored), mutating
//! requests take one seat (no extra seats for watchers to notify). A request holds its
//! seats until its response body is sent; a watch only until its handler has started it.
//!
//! [`ServerConfig`]: crate::config::ServerConfig

pub mod controller;
pub mod estimate;
pub mod matching;
pub mod queueset;
pub mod request_info;
pub mod retry_after;
pub mod shuffle;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use skiff_api::flowcontrol::bootstrap::{mandatory_flow_schemas, mandatory_priority_levels};

use crate::authn::UserInfo;
use crate::error::GroupResource;
use crate::rest::store::Store;
use estimate::ObjectCounts;
use queueset::{QueueSet, QueuingConfig, Start};
use request_info::{Query, RequestInfo};
use retry_after::DroppedRequests;

/// The response header naming the matched FlowSchema's UID.
pub const FLOW_SCHEMA_UID_HEADER: &str = "X-Kubernetes-PF-FlowSchema-UID";
/// The response header naming the matched PriorityLevelConfiguration's UID.
pub const PRIORITY_LEVEL_UID_HEADER: &str = "X-Kubernetes-PF-PriorityLevel-UID";
/// The body of a rejection (upstream writes it with `http.Error`: plain text).
pub const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.";
/// Upstream's `--request-timeout` default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// No request waits in a queue longer than this.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// The catch-all schema, the fallback when no schema matches.
const CATCH_ALL: &str = "catch-all";

/// A priority level as the filter uses it.
pub struct Level {
    pub name: String,
    pub uid: String,
    /// `None` for the exempt level.
    pub queues: Option<Arc<QueueSet>>,
    /// The level's queues (`None`: exempt or `Reject`).
    pub queuing: Option<QueuingConfig>,
    /// Seats: `ceil(server seats × shares / all shares)`.
    pub concurrency_limit: usize,
    /// The most seats one request takes here.
    pub max_seats: Option<usize>,
}

/// The configuration in force: the usable FlowSchemas in matching order and the levels.
#[derive(Default)]
pub struct Config {
    pub schemas: Vec<FlowSchema>,
    pub levels: HashMap<String, Arc<Level>>,
}

impl Config {
    /// The first schema (by matchingPrecedence, then name) that matches, else `catch-all`;
    /// with its level. `None` only when the configuration has neither (never after
    /// [`Apf::apply`], which imagines the mandatory objects).
    pub fn classify(
        &self,
        info: &RequestInfo,
        user: &UserInfo,
    ) -> Option<(&FlowSchema, &Arc<Level>)> {
        let schema = self
            .schemas
            .iter()
            .find(|s| matching::matches_flow_schema(info, user, s))
            .or_else(|| {
                self.schemas
                    .iter()
                    .find(|s| s.metadata.name.as_deref() == Some(CATCH_ALL))
            })?;
        let level = self
            .levels
            .get(&schema.spec.priority_level_configuration.name)?;
        Some((schema, level))
    }
}

/// The API Priority and Fairness filter's state, shared by all requests.
pub struct Apf {
    state: Arc<crate::rest::State>,
    server_concurrency_limit: usize,
    request_timeout: Duration,
    config: RwLock<Arc<Config>>,
    queue_sets: Mutex<HashMap<String, Arc<QueueSet>>>,
    dropped: DroppedRequests,
    counts: ObjectCounts,
}

fn level_shares(level: &PriorityLevelConfiguration) -> i32 {
    if let Some(limited) = &level.spec.limited {
        limited.nominal_concurrency_shares.unwrap_or(30).max(0)
    } else {
        level
            .spec
            .exempt
            .as_ref()
            .and_then(|e| e.nominal_concurrency_shares)
            .unwrap_or(0)
            .max(0)
    }
}

fn level_queuing(level: &PriorityLevelConfiguration) -> Option<QueuingConfig> {
    let limited = level.spec.limited.as_ref()?;
    if limited.limit_response.type_ != "Queue" {
        return None;
    }
    let q = limited.limit_response.queuing.clone().unwrap_or_default();
    let positive = |v: Option<i32>, default: usize| {
        v.and_then(|v| usize::try_from(v).ok())
            .filter(|v| *v > 0)
            .unwrap_or(default)
    };
    Some(QueuingConfig {
        queues: positive(q.queues, 64),
        hand_size: positive(q.hand_size, 8),
        queue_length_limit: positive(q.queue_length_limit, 50),
    })
}

fn name_of<
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    object: &T,
) -> &str {
    object.metadata().name.as_deref().unwrap_or_default()
}

impl Apf {
    /// The filter of a server with `server_concurrency_limit` seats, with only the
    /// mandatory objects until [`Apf::apply`] (the [`controller`]) loads the stored ones.
    pub fn new(state: Arc<crate::rest::State>, server_concurrency_limit: usize) -> Arc<Apf> {
        let apf = Arc::new(Apf {
            state,
            server_concurrency_limit,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            config: RwLock::new(Arc::new(Config::default())),
            queue_sets: Mutex::new(HashMap::new()),
            dropped: DroppedRequests::default(),
            counts: ObjectCounts::default(),
        });
        apf.apply(Vec::new(), Vec::new());
        apf
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Puts `schemas` and `levels` (the stored objects) in force, keeping each surviving
    /// level's queues and running requests (upstream `digestConfigObjects`). Mandatory
    /// objects that are missing are imagined. Returns the schemas that name a missing
    /// level (dangling), which classification skips.
    pub fn apply(
        &self,
        schemas: Vec<FlowSchema>,
        levels: Vec<PriorityLevelConfiguration>,
    ) -> Vec<String> {
        let mut all_levels = levels;
        let real: Vec<String> = all_levels.iter().map(|l| name_of(l).to_owned()).collect();
        for mandatory in mandatory_priority_levels() {
            if !real.iter().any(|n| n == name_of(&mandatory)) {
                all_levels.push(mandatory);
            }
        }
        let share_sum: f64 = all_levels.iter().map(|l| f64::from(level_shares(l))).sum();
        let mut sets = self.queue_sets.lock().unwrap_or_else(|p| p.into_inner());
        let mut new_sets = HashMap::new();
        let mut new_levels = HashMap::new();
        for level in &all_levels {
            let name = name_of(level).to_owned();
            let limit = if share_sum > 0.0 {
                (self.server_concurrency_limit as f64 * f64::from(level_shares(level)) / share_sum)
                    .ceil() as usize
            } else {
                0
            };
            let exempt = level.spec.type_ == "Exempt";
            let mut queuing = level_queuing(level);
            let queues = if exempt {
                None
            } else {
                let set = match sets.remove(&name) {
                    Some(set) => match set.reconfigure(queuing, limit) {
                        Ok(()) => Some(set),
                        Err(e) => {
                            tracing::warn!(level = %name, error = %e, "priority level queues unusable; rejecting instead");
                            queuing = None;
                            set.reconfigure(None, limit).ok().map(|()| set)
                        }
                    },
                    None => QueueSet::new(&name, queuing, limit)
                        .or_else(|e| {
                            tracing::warn!(level = %name, error = %e, "priority level queues unusable; rejecting instead");
                            queuing = None;
                            QueueSet::new(&name, None, limit)
                        })
                        .ok(),
                };
                if let Some(set) = &set {
                    new_sets.insert(name.clone(), set.clone());
                }
                set
            };
            let max_seats = estimate::level_max_seats(limit, queuing.map(|q| q.hand_size));
            new_levels.insert(
                name.clone(),
                Arc::new(Level {
                    uid: level.metadata.uid.clone().unwrap_or_default(),
                    name,
                    queues,
                    queuing,
                    concurrency_limit: limit,
                    max_seats,
                }),
            );
        }
        *sets = new_sets;
        drop(sets);

        let mut dangling = Vec::new();
        let mut usable: Vec<FlowSchema> = Vec::new();
        for schema in schemas {
            if real.contains(&schema.spec.priority_level_configuration.name) {
                usable.push(schema);
            } else {
                dangling.push(name_of(&schema).to_owned());
            }
        }
        for mandatory in mandatory_flow_schemas() {
            if !usable.iter().any(|s| name_of(s) == name_of(&mandatory)) {
                usable.push(mandatory);
            }
        }
        usable.sort_by(|a, b| {
            let precedence = |s: &FlowSchema| s.spec.matching_precedence.unwrap_or(1000);
            precedence(a)
                .cmp(&precedence(b))
                .then_with(|| name_of(a).cmp(name_of(b)))
        });
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Config {
            schemas: usable,
            levels: new_levels,
        });
        dangling
    }

    /// The number of stored objects of the request's resource, read from the store at most
    /// once a minute; `None` when the resource is not stored here.
    async fn object_count(&self, info: &RequestInfo) -> Option<i64> {
        let kind = {
            let registry = self.state.registry.current();
            registry
                .by_resource(&GroupResource::new(&info.api_group, &info.resource))?
                .clone()
        };
        if kind.unstored().is_some() {
            return None;
        }
        let prefix = Store::new(&self.state, kind).prefix(None);
        if let Some(count) = self.counts.get(&prefix) {
            return Some(count);
        }
        let page = self.state.storage.list(&prefix, None, 1, None).await.ok()?;
        let count = page.items.len() as i64 + page.remaining;
        self.counts.set(&prefix, count);
        Some(count)
    }

    /// How long a request may wait in a queue (upstream `getRequestWaitContext`): a quarter
    /// of its deadline (`--request-timeout`, 60 s, or a shorter `timeout` parameter), or of
    /// the request timeout for long-running requests; at most a minute.
    fn wait_limit(&self, info: &RequestInfo, query: &Query) -> Duration {
        let timeout = if info.is_long_running() {
            self.request_timeout
        } else {
            query
                .timeout
                .filter(|t| !t.is_zero() && *t < self.request_timeout)
                .unwrap_or(self.request_timeout)
        };
        (timeout / 4).min(MAX_WAIT)
    }

    /// The 429 of a rejected request: `Retry-After` from the level's recent rejections.
    fn reject(&self, level: &str) -> Response {
        let now = chrono::Utc::now().timestamp();
        self.dropped.record(level, now);
        let retry_after = self.dropped.retry_after(level);
        (
            StatusCode::TOO_MANY_REQUESTS,
            [
                (header::RETRY_AFTER, retry_after.to_string()),
                (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
            ],
            format!("{TOO_MANY_REQUESTS}\n"),
        )
            .into_response()
    }
}

/// A response body that holds its request's seats until it has been sent (or dropped).
struct HeldBody {
    inner: Body,
    permit: Option<queueset::Permit>,
}

impl hyper::body::Body for HeldBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            this.permit = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn set_classification_headers(response: &mut Response, schema_uid: &str, level_uid: &str) {
    let headers = response.headers_mut();
    for (name, value) in [
        (PRIORITY_LEVEL_UID_HEADER, level_uid),
        (FLOW_SCHEMA_UID_HEADER, schema_uid),
    ] {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    }
}

/// The filter (upstream `WithPriorityAndFairness`), after authentication: long-running
/// requests other than watches pass untouched; others are classified, then run at once
/// (exempt), queued, or rejected with 429. Classified responses carry the schema's and
/// level's UIDs. Requests without an authenticated user (in-process callers) pass.
pub async fn middleware(State(apf): State<Arc<Apf>>, request: Request, next: Next) -> Response {
    let Some(user) = request.extensions().get::<UserInfo>().cloned() else {
        return next.run(request).await;
    };
    let info = RequestInfo::parse(request.method(), request.uri());
    if info.is_long_running() && info.verb != "watch" {
        return next.run(request).await;
    }
    let config = apf.config();
    let Some((schema, level)) = config.classify(&info, &user) else {
        return next.run(request).await;
    };
    let schema_uid = schema.metadata.uid.clone().unwrap_or_default();
    let level_uid = level.uid.clone();
    let Some(queues) = level.queues.clone() else {
        let mut response = next.run(request).await;
        set_classification_headers(&mut response, &schema_uid, &level_uid);
        return response;
    };
    let arrived = tokio::time::Instant::now();
    let query = Query::parse(request.uri().query());
    let hash = if level.queuing.is_some_and(|q| q.queues > 1) {
        let distinguisher = matching::flow_distinguisher(schema, &info, &user);
        matching::hash_flow_id(name_of(schema), &distinguisher)
    } else {
        0
    };
    let listing = info.verb == "list" || (info.verb == "watch" && query.send_initial_events);
    let count = if listing {
        apf.object_count(&info).await
    } else {
        None
    };
    let seats = estimate::seats(&info, &query, count, level.max_seats);
    let permit = match queues.start(seats, hash) {
        Start::Execute(permit) => Some(permit),
        Start::Queued(pending) => {
            pending
                .wait_until(arrived + apf.wait_limit(&info, &query))
                .await
        }
        Start::Reject => None,
    };
    let level_name = level.name.clone();
    drop(config);
    let mut response = match permit {
        Some(permit) => {
            let watch = info.verb == "watch";
            let response = next.run(request).await;
            if watch {
                // A watch holds its seats only while it starts (upstream: until the watch
                // is initialized).
                drop(permit);
                response
            } else {
                // Other requests hold them until the response is written, as upstream's
                // handler runs inside the seat.
                response.map(|body| {
                    Body::new(HeldBody {
                        inner: body,
                        permit: Some(permit),
                    })
                })
            }
        }
        None => {
            tracing::debug!(level = %level_name, verb = %info.verb, path = %info.path, user = %user.name, "request rejected by priority and fairness");
            apf.reject(&level_name)
        }
    };
    set_classification_headers(&mut response, &schema_uid, &level_uid);
    response
}
