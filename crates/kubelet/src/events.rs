//! The kubelet's event recorder (client-go `tools/record`, with the reasons of upstream
//! `pkg/kubelet/events`).
//!
//! [`EventRecorder::event`] builds a core/v1 Event about an object (source component
//! `kubelet`, host the node name) and hands it to a bounded queue without waiting: when
//! the queue is full the event is dropped with a log, as client-go's broadcaster does. One
//! [`EventBroadcaster`] task drains the queue through the [`EventCorrelator`] (aggregation
//! of similar events, repeat counting, per-object spam filter) into an [`EventSink`]: it
//! creates new Events and PATCHes `count` / `lastTimestamp` / `message` of repeated ones.
//! Without an API server the recorder only logs.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{debug, error, warn};

/// The source component of the kubelet's events (upstream `componentKubelet`).
pub const COMPONENT_KUBELET: &str = "kubelet";

// Reasons of the kubelet's events (upstream `pkg/kubelet/events/event.go`).
/// A container was created.
pub const CREATED_CONTAINER: &str = "Created";
/// A container was started.
pub const STARTED_CONTAINER: &str = "Started";
/// A container could not be created (its config, image or CreateContainer failed).
pub const FAILED_TO_CREATE_CONTAINER: &str = "Failed";
/// StartContainer failed.
pub const FAILED_TO_START_CONTAINER: &str = "Failed";
/// A container is being stopped.
pub const KILLING_CONTAINER: &str = "Killing";
/// A failed container waits for its crash-loop backoff.
pub const BACK_OFF_START_CONTAINER: &str = "BackOff";
/// An image pull starts.
pub const PULLING_IMAGE: &str = "Pulling";
/// An image was pulled, or was already present.
pub const PULLED_IMAGE: &str = "Pulled";
/// An image pull failed.
pub const FAILED_TO_PULL_IMAGE: &str = "Failed";
/// An image could not be inspected, or its name is invalid.
pub const FAILED_TO_INSPECT_IMAGE: &str = "InspectFailed";
/// The image is absent and the pull policy is Never.
pub const ERR_IMAGE_NEVER_PULL_POLICY: &str = "ErrImageNeverPull";
/// An image pull waits for its backoff.
pub const BACK_OFF_PULL_IMAGE: &str = "BackOff";
/// A pod volume could not be set up.
pub const FAILED_MOUNT_VOLUME: &str = "FailedMount";
/// The kubelet started (on the Node).
pub const STARTING_KUBELET: &str = "Starting";
/// A block volume could not be mapped.
pub const FAILED_MAP_VOLUME: &str = "FailedMapVolume";
/// Keys of an `envFrom` source were skipped as invalid variable names.
pub const INVALID_ENVIRONMENT_VARIABLE_NAMES: &str = "InvalidEnvironmentVariableNames";
/// Some of a pod's `imagePullSecrets` could not be read.
pub const FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET: &str = "FailedToRetrieveImagePullSecret";
/// A liveness, readiness or startup probe failed or errored.
pub const CONTAINER_UNHEALTHY: &str = "Unhealthy";
/// A probe passed with a warning.
pub const CONTAINER_PROBE_WARNING: &str = "ProbeWarning";
/// A postStart hook failed.
pub const FAILED_POST_START_HOOK: &str = "FailedPostStartHook";
/// A preStop hook failed.
pub const FAILED_PRE_STOP_HOOK: &str = "FailedPreStopHook";
/// The pod sandbox could not be created.
pub const FAILED_CREATE_POD_SANDBOX: &str = "FailedCreatePodSandBox";
/// The pod sandbox changed and is re-created.
pub const SANDBOX_CHANGED: &str = "SandboxChanged";
/// A ClusterFirst pod fell back to Default DNS (no `--cluster-dns`).
pub const MISSING_CLUSTER_DNS: &str = "MissingClusterDNS";
/// A pod's DNS config was cut to the resolver's limits.
pub const DNS_CONFIG_FORMING: &str = "DNSConfigForming";

/// Events queued for the sender at most (client-go `maxQueuedEvents`).
const MAX_QUEUED_EVENTS: usize = 1000;
/// Attempts to write one event (client-go `maxTriesPerEvent`).
const MAX_TRIES_PER_EVENT: u32 = 12;
/// Wait between attempts (client-go `defaultSleepDuration`); the first is randomized.
const DEFAULT_SLEEP_DURATION: Duration = Duration::from_secs(10);
/// Entries of each correlator cache (client-go `maxLruCacheEntries`).
const MAX_LRU_CACHE_ENTRIES: usize = 4096;
/// Distinct messages of similar events before they are aggregated
/// (client-go `defaultAggregateMaxEvents`).
const AGGREGATE_MAX_EVENTS: usize = 10;
/// Window of similar events (client-go `defaultAggregateIntervalInSeconds`).
const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// Events a source may send about one object at once (client-go `defaultSpamBurst`).
const SPAM_BURST: f64 = 25.0;
/// Refill of that budget per second: one event every 5 minutes (`defaultSpamQPS`).
const SPAM_QPS: f64 = 1.0 / 300.0;

/// The type of an event (`Normal` or `Warning`, the only ones client-go accepts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Information.
    Normal,
    /// Something may be wrong.
    Warning,
}

impl EventType {
    /// `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The reference to `pod` (upstream `ref.GetReference`): kind Pod, apiVersion v1, its
/// namespace, name, uid and resourceVersion.
pub fn pod_ref(pod: &Pod) -> ObjectReference {
    let meta = &pod.metadata;
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

/// The reference to container `name` of `pod` (upstream `kubecontainer.GenerateContainerRef`):
/// the pod's reference with `fieldPath` `spec.containers{name}`, `spec.initContainers{name}`
/// or `spec.ephemeralContainers{name}`. `None` when the pod has no such container.
pub fn container_ref(pod: &Pod, name: &str) -> Option<ObjectReference> {
    let spec = pod.spec.as_ref()?;
    let field_path = if spec.containers.iter().any(|c| c.name == name) {
        format!("spec.containers{{{name}}}")
    } else if spec
        .init_containers
        .iter()
        .flatten()
        .any(|c| c.name == name)
    {
        format!("spec.initContainers{{{name}}}")
    } else if spec
        .ephemeral_containers
        .iter()
        .flatten()
        .any(|c| c.name == name)
    {
        format!("spec.ephemeralContainers{{{name}}}")
    } else {
        return None;
    };
    Some(ObjectReference {
        field_path: Some(field_path),
        ..pod_ref(pod)
    })
}

/// The reference to this kubelet's Node (upstream `nodeRef`: kind Node, name and uid the
/// node name, no namespace).
pub fn node_ref(node_name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Node".to_owned()),
        name: Some(node_name.to_owned()),
        uid: Some(node_name.to_owned()),
        ..Default::default()
    }
}

/// Records events (client-go `EventRecorder`). Cheap to clone; recording never blocks.
#[derive(Debug, Clone)]
pub struct EventRecorder {
    source: Arc<EventSource>,
    /// The sender task's queue; `None`: events are only logged.
    queue: Option<mpsc::Sender<Event>>,
}

impl Default for EventRecorder {
    /// A recorder that only logs, for an unnamed node.
    fn default() -> Self {
        Self::log_only("")
    }
}

impl EventRecorder {
    /// A recorder that only logs its events (no API server).
    pub fn log_only(node_name: &str) -> Self {
        Self {
            source: Arc::new(kubelet_source(node_name)),
            queue: None,
        }
    }

    /// A recorder whose events go to `sink`, and the sender task to run (spawn
    /// [`EventBroadcaster::run`]).
    pub fn with_sink<S: EventSink>(node_name: &str, sink: S) -> (Self, EventBroadcaster<S>) {
        let (tx, rx) = mpsc::channel(MAX_QUEUED_EVENTS);
        let recorder = Self {
            source: Arc::new(kubelet_source(node_name)),
            queue: Some(tx),
        };
        let broadcaster = EventBroadcaster {
            queue: rx,
            sink,
            correlator: EventCorrelator::default(),
            sleep: DEFAULT_SLEEP_DURATION,
        };
        (recorder, broadcaster)
    }

    /// Records an event of `event_type` with `reason` and `message` about `object`
    /// (client-go `Event`): logged, and queued for the API server when there is one; a
    /// full queue drops it with an error log.
    pub fn event(
        &self,
        object: &ObjectReference,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) {
        let event = make_event(object, event_type, reason, message, &self.source, now());
        debug!(
            object = %format!(
                "{}/{}",
                object.namespace.as_deref().unwrap_or(""),
                object.name.as_deref().unwrap_or("")
            ),
            field_path = object.field_path.as_deref().unwrap_or(""),
            kind = object.kind.as_deref().unwrap_or(""),
            api_version = object.api_version.as_deref().unwrap_or(""),
            r#type = event_type.as_str(),
            reason,
            message,
            "Event occurred"
        );
        #[cfg(test)]
        capture(&event);
        let Some(queue) = &self.queue else {
            return;
        };
        match queue.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(event)) => {
                error!(
                    reason = event.reason.as_deref().unwrap_or(""),
                    message = event.message.as_deref().unwrap_or(""),
                    "Unable to record event: too many queued events, dropped event"
                );
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                debug!(reason, "event sender stopped; event not recorded");
            }
        }
    }

    /// [`Self::event`] about `pod`.
    pub fn pod_event(&self, pod: &Pod, event_type: EventType, reason: &str, message: &str) {
        self.event(&pod_ref(pod), event_type, reason, message);
    }

    /// [`Self::event`] about container `container` of `pod` (upstream
    /// `recordContainerEvent`): a container ID in `message` is replaced by the container's
    /// name. Nothing is recorded (a debug log only) when the pod has no such container.
    pub fn container_event(
        &self,
        pod: &Pod,
        container: &str,
        container_id: &str,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) {
        let Some(object) = container_ref(pod, container) else {
            debug!(
                pod = pod.metadata.name.as_deref().unwrap_or(""),
                container, reason, "cannot reference the container; event not recorded"
            );
            return;
        };
        if container_id.is_empty() {
            self.event(&object, event_type, reason, message);
        } else {
            let message = message.replace(container_id, container);
            self.event(&object, event_type, reason, &message);
        }
    }

    /// [`Self::event`] about this kubelet's Node.
    pub fn node_event(&self, event_type: EventType, reason: &str, message: &str) {
        let node = self.source.host.as_deref().unwrap_or("");
        self.event(&node_ref(node), event_type, reason, message);
    }
}

/// `d` truncated to milliseconds and written as Go prints a `time.Duration` (`0s`,
/// `313ms`, `1.594s`, `1m2.5s`, `1h0m0s`), as in upstream's "Successfully pulled image"
/// message.
pub fn format_go_duration(d: Duration) -> String {
    let millis = i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 1_000_000);
    skiff_api::duration::format_go_duration(millis.saturating_mul(1_000_000))
}

fn kubelet_source(node_name: &str) -> EventSource {
    EventSource {
        component: Some(COMPONENT_KUBELET.to_owned()),
        host: Some(node_name.to_owned()),
    }
}

fn now() -> Timestamp {
    crate::status::now()
}

fn nanos(t: Timestamp) -> i128 {
    t.as_nanosecond()
}

/// A new event (client-go `makeEvent` and `generateEvent`): named `<object>.<hex nanos>`
/// in the object's namespace (`default` without one), count 1, first and last timestamp
/// `now`, reporting controller and instance the source's component and host.
fn make_event(
    object: &ObjectReference,
    event_type: EventType,
    reason: &str,
    message: &str,
    source: &EventSource,
    now: Timestamp,
) -> Event {
    let namespace = object
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    Event {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}.{:x}",
                object.name.as_deref().unwrap_or(""),
                nanos(now)
            )),
            namespace: Some(namespace),
            ..Default::default()
        },
        involved_object: object.clone(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some(event_type.as_str().to_owned()),
        source: Some(source.clone()),
        reporting_component: source.component.clone(),
        reporting_instance: source.host.clone(),
        ..Default::default()
    }
}

/// A small least-recently-used cache keyed by string (the correlator's `lru.Cache`).
#[derive(Debug)]
struct Lru<V> {
    entries: HashMap<String, (V, u64)>,
    tick: u64,
    capacity: usize,
}

impl<V> Lru<V> {
    fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            tick: 0,
            capacity,
        }
    }

    /// The entry of `key`, marked as recently used.
    fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(key).map(|(v, t)| {
            *t = tick;
            &mut *v
        })
    }

    /// Sets `key`, evicting the least recently used entry when full.
    fn insert(&mut self, key: String, value: V) {
        self.tick += 1;
        self.entries.insert(key, (value, self.tick));
        if self.entries.len() > self.capacity
            && let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone())
        {
            self.entries.remove(&oldest);
        }
    }
}

/// The identity of an event including its message (client-go `getEventKey`).
fn event_key(event: &Event) -> String {
    let o = &event.involved_object;
    let source = event.source.clone().unwrap_or_default();
    [
        source.component.as_deref(),
        source.host.as_deref(),
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.field_path.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
        event.type_.as_deref(),
        event.reason.as_deref(),
        event.message.as_deref(),
    ]
    .map(|s| s.unwrap_or(""))
    .concat()
}

/// The source and object of an event, the spam filter's key (client-go `getSpamKey`).
fn spam_key(event: &Event) -> String {
    let o = &event.involved_object;
    let source = event.source.clone().unwrap_or_default();
    [
        source.component.as_deref(),
        source.host.as_deref(),
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
    ]
    .map(|s| s.unwrap_or(""))
    .concat()
}

/// Similar events: same source, object (without fieldPath), type, reason and reporter;
/// and the message that tells them apart (client-go `EventAggregatorByReasonFunc`).
fn aggregate_key(event: &Event) -> (String, String) {
    let o = &event.involved_object;
    let source = event.source.clone().unwrap_or_default();
    let key = [
        source.component.as_deref(),
        source.host.as_deref(),
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
        event.type_.as_deref(),
        event.reason.as_deref(),
        event.reporting_component.as_deref(),
        event.reporting_instance.as_deref(),
    ]
    .map(|s| s.unwrap_or(""))
    .concat();
    (key, event.message.clone().unwrap_or_default())
}

/// A token bucket that refuses rather than waits (client-go
/// `NewTokenBucketPassiveRateLimiter`): starts full with `burst` tokens, refills `qps`
/// per second.
#[derive(Debug, Clone)]
struct TokenBucket {
    tokens: f64,
    last: i128,
}

impl TokenBucket {
    fn new(now: Timestamp) -> Self {
        Self {
            tokens: SPAM_BURST,
            last: nanos(now),
        }
    }

    /// Takes a token at `now` if there is one.
    fn try_accept(&mut self, now: Timestamp) -> bool {
        let now = nanos(now);
        let elapsed = (now - self.last).max(0) as f64 / 1e9;
        self.tokens = (self.tokens + elapsed * SPAM_QPS).min(SPAM_BURST);
        self.last = self.last.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Similar events seen lately (client-go `aggregateRecord`).
#[derive(Debug, Default)]
struct AggregateRecord {
    /// Distinct messages of the similar events.
    local_keys: HashSet<String>,
    /// When the last similar event came (nanoseconds since the epoch).
    last_timestamp: Option<i128>,
}

/// What the correlator last sent for an event key (client-go `eventLog`).
#[derive(Debug, Clone)]
struct EventLog {
    count: i32,
    first_timestamp: Option<Time>,
    name: Option<String>,
    resource_version: Option<String>,
}

/// The outcome of correlating one event (client-go `EventCorrelateResult`).
#[derive(Debug, Clone, PartialEq)]
pub struct CorrelateResult {
    /// The event to write: new, aggregated, or a repeat with its count raised.
    pub event: Event,
    /// For a repeat, the strategic merge patch of its `count`, `lastTimestamp` and
    /// `message`.
    pub patch: Option<serde_json::Value>,
}

/// Aggregates, counts and rate-limits events (client-go `EventCorrelator` with its
/// defaults):
/// - more than 10 similar events (same source, object, type and reason) with different
///   messages within 10 minutes become one event "(combined from similar events): ...";
/// - an event identical to one sent before (same key, message included) is a repeat:
///   the earlier Event's count and lastTimestamp are patched;
/// - each source and object may send 25 events at once, then 1 every 5 minutes; the
///   others are dropped.
#[derive(Debug)]
pub struct EventCorrelator {
    aggregates: Lru<AggregateRecord>,
    observed: Lru<EventLog>,
    spam: Lru<TokenBucket>,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        Self {
            aggregates: Lru::new(MAX_LRU_CACHE_ENTRIES),
            observed: Lru::new(MAX_LRU_CACHE_ENTRIES),
            spam: Lru::new(MAX_LRU_CACHE_ENTRIES),
        }
    }
}

impl EventCorrelator {
    /// Correlates `event` at `now` (client-go `EventCorrelate`); `None` when the spam
    /// filter drops it.
    pub fn correlate(&mut self, event: Event, now: Timestamp) -> Option<CorrelateResult> {
        let (event, key) = self.aggregate(event, now);
        let (event, patch) = self.observe(event, key);
        let mut bucket = self
            .spam
            .get_mut(&spam_key(&event))
            .cloned()
            .unwrap_or_else(|| TokenBucket::new(now));
        let accepted = bucket.try_accept(now);
        self.spam.insert(spam_key(&event), bucket);
        accepted.then_some(CorrelateResult { event, patch })
    }

    /// Records what the API server returned for a written event (client-go
    /// `UpdateState`): its name, resourceVersion and count, under its event key.
    pub fn update_state(&mut self, event: &Event) {
        self.observed.insert(
            event_key(event),
            EventLog {
                count: event.count.unwrap_or(1),
                first_timestamp: event.first_timestamp.clone(),
                name: event.metadata.name.clone(),
                resource_version: event.metadata.resource_version.clone(),
            },
        );
    }

    /// client-go `EventAggregate`: the event to observe and its cache key.
    fn aggregate(&mut self, event: Event, now: Timestamp) -> (Event, String) {
        let key = event_key(&event);
        let (aggregate_key, local_key) = aggregate_key(&event);
        let now_nanos = nanos(now);
        let mut record = self
            .aggregates
            .get_mut(&aggregate_key)
            .map(std::mem::take)
            .unwrap_or_default();
        let fresh = record
            .last_timestamp
            .is_none_or(|last| now_nanos - last > AGGREGATE_INTERVAL.as_nanos() as i128);
        if fresh {
            record = AggregateRecord::default();
        }
        record.local_keys.insert(local_key);
        record.last_timestamp = Some(now_nanos);
        if record.local_keys.len() < AGGREGATE_MAX_EVENTS {
            self.aggregates.insert(aggregate_key, record);
            return (event, key);
        }
        // Keep the set from growing past the threshold.
        if let Some(any) = record.local_keys.iter().next().cloned() {
            record.local_keys.remove(&any);
        }
        self.aggregates.insert(aggregate_key.clone(), record);
        let aggregated = Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    event.involved_object.name.as_deref().unwrap_or(""),
                    now_nanos
                )),
                namespace: event.metadata.namespace.clone(),
                ..Default::default()
            },
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            message: Some(format!(
                "(combined from similar events): {}",
                event.message.as_deref().unwrap_or("")
            )),
            type_: event.type_.clone(),
            reason: event.reason.clone(),
            source: event.source.clone(),
            involved_object: event.involved_object,
            ..Default::default()
        };
        (aggregated, aggregate_key)
    }

    /// client-go `eventObserve`: a repeat of what `key` last sent takes its name,
    /// resourceVersion and first timestamp, counts one more and gets a patch.
    fn observe(&mut self, mut event: Event, key: String) -> (Event, Option<serde_json::Value>) {
        let mut patch = None;
        if let Some(last) = self.observed.get_mut(&key).cloned()
            && last.count > 0
        {
            event.metadata.name = last.name;
            event.metadata.resource_version = last.resource_version;
            event.first_timestamp = last.first_timestamp;
            event.count = Some(last.count + 1);
            // The two-way strategic merge patch between the event with count 0, an epoch
            // lastTimestamp and no message, and the event: just those three fields.
            let mut fields = serde_json::Map::new();
            fields.insert("count".into(), json!(last.count + 1));
            fields.insert("lastTimestamp".into(), json!(event.last_timestamp));
            if let Some(message) = event.message.as_deref().filter(|m| !m.is_empty()) {
                fields.insert("message".into(), json!(message));
            }
            patch = Some(serde_json::Value::Object(fields));
        }
        self.observed.insert(
            key,
            EventLog {
                count: event.count.unwrap_or(1),
                first_timestamp: event.first_timestamp.clone(),
                name: event.metadata.name.clone(),
                resource_version: event.metadata.resource_version.clone(),
            },
        );
        (event, patch)
    }
}

/// Why an [`EventSink`] call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkError {
    /// The Event to patch does not exist (it expired): create it instead.
    NotFound,
    /// The API server refused the request: retrying will not help.
    Rejected(String),
    /// The API server could not be reached or answered oddly: retry later.
    Unavailable(String),
}

impl std::fmt::Display for SinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SinkError::NotFound => f.write_str("not found"),
            SinkError::Rejected(m) => write!(f, "rejected: {m}"),
            SinkError::Unavailable(m) => write!(f, "unavailable: {m}"),
        }
    }
}

/// Where events are written (client-go `EventSink`).
#[async_trait]
pub trait EventSink: Send + Sync + 'static {
    /// Creates `event`; returns what the server stored.
    async fn create(&self, event: &Event) -> Result<Event, SinkError>;
    /// Applies the strategic merge `patch` to the existing `event` (by namespace and name).
    async fn patch(&self, event: &Event, patch: &serde_json::Value) -> Result<Event, SinkError>;
}

/// The API server as an [`EventSink`]: core/v1 Events in the event's namespace.
#[derive(Clone)]
pub struct ApiEventSink {
    client: kube::Client,
}

impl ApiEventSink {
    /// A sink writing through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, event: &Event) -> Api<Event> {
        let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
        Api::namespaced(self.client.clone(), namespace)
    }
}

fn classify(error: kube::Error) -> SinkError {
    match error {
        kube::Error::Api(status) if status.code == 404 => SinkError::NotFound,
        kube::Error::Api(status) => {
            SinkError::Rejected(format!("{} ({})", status.message, status.reason))
        }
        other => SinkError::Unavailable(other.to_string()),
    }
}

#[async_trait]
impl EventSink for ApiEventSink {
    async fn create(&self, event: &Event) -> Result<Event, SinkError> {
        self.api(event)
            .create(&PostParams::default(), event)
            .await
            .map_err(classify)
    }

    async fn patch(&self, event: &Event, patch: &serde_json::Value) -> Result<Event, SinkError> {
        let name = event.metadata.name.as_deref().unwrap_or("");
        self.api(event)
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map_err(classify)
    }
}

/// The sender task: drains the recorder's queue through the correlator into the sink
/// (client-go `StartRecordingToSink`).
pub struct EventBroadcaster<S> {
    queue: mpsc::Receiver<Event>,
    sink: S,
    correlator: EventCorrelator,
    sleep: Duration,
}

impl<S: EventSink> EventBroadcaster<S> {
    /// Writes queued events until every recorder is dropped.
    pub async fn run(mut self) {
        while let Some(event) = self.queue.recv().await {
            self.record_to_sink(event).await;
        }
    }

    /// Correlates one event and writes it, retrying while the API server is unreachable
    /// (12 attempts, 10 s apart, the first wait randomized; client-go `recordToSink`).
    async fn record_to_sink(&mut self, event: Event) {
        let Some(result) = self.correlator.correlate(event, now()) else {
            return;
        };
        for attempt in 1..=MAX_TRIES_PER_EVENT {
            if self.record_event(&result).await {
                return;
            }
            if attempt == MAX_TRIES_PER_EVENT {
                break;
            }
            let wait = if attempt == 1 {
                // Spread clients out after an API server outage.
                let fraction = f64::from(now().subsec_nanosecond().unsigned_abs() % 1000) / 1000.0;
                self.sleep.mul_f64(fraction)
            } else {
                self.sleep
            };
            tokio::time::sleep(wait).await;
        }
        error!(
            reason = result.event.reason.as_deref().unwrap_or(""),
            message = result.event.message.as_deref().unwrap_or(""),
            "Unable to write event (retry limit exceeded!)"
        );
    }

    /// One attempt (client-go `recordEvent`): patch a repeat (create it when it is gone),
    /// create a new event. True when done: written, or refused for good.
    async fn record_event(&mut self, result: &CorrelateResult) -> bool {
        let repeat = result.event.count.unwrap_or(1) > 1;
        let mut outcome = None;
        if repeat && let Some(patch) = &result.patch {
            outcome = Some(self.sink.patch(&result.event, patch).await);
        }
        if !repeat || matches!(outcome, Some(Err(SinkError::NotFound)) | None) {
            let mut event = result.event.clone();
            event.metadata.resource_version = None;
            outcome = Some(self.sink.create(&event).await);
        }
        match outcome {
            Some(Ok(written)) => {
                self.correlator.update_state(&written);
                true
            }
            Some(Err(SinkError::Rejected(message))) => {
                if message.contains("AlreadyExists") || message.contains("NamespaceTerminating") {
                    debug!(error = %message, "Server rejected event (will not retry!)");
                } else {
                    error!(reason = result.event.reason.as_deref().unwrap_or(""), error = %message, "Server rejected event (will not retry!)");
                }
                true
            }
            Some(Err(e)) => {
                warn!(error = %e, "Unable to write event (may retry after sleeping)");
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
static CAPTURED: std::sync::Mutex<Vec<Event>> = std::sync::Mutex::new(Vec::new());

#[cfg(test)]
fn capture(event: &Event) {
    CAPTURED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(event.clone());
}

/// The events recorded so far (in tests) by recorders of node `host`, oldest first.
#[cfg(test)]
pub(crate) fn captured_events(host: &str) -> Vec<Event> {
    CAPTURED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter(|e| e.source.as_ref().and_then(|s| s.host.as_deref()) == Some(host))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::sync::Mutex;

    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns1".into()),
                uid: Some("uid-1".into()),
                resource_version: Some("42".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ..Default::default()
                }],
                init_containers: Some(vec![Container {
                    name: "init".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn event(reason: &str, message: &str, at: Timestamp) -> Event {
        make_event(
            &pod_ref(&pod()),
            EventType::Warning,
            reason,
            message,
            &kubelet_source("node1"),
            at,
        )
    }

    #[test]
    fn durations_print_as_go() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_micros(900), "0s"),
            (Duration::from_micros(313_900), "313ms"),
            (Duration::from_millis(1200), "1.2s"),
            (Duration::from_millis(1594), "1.594s"),
            (Duration::from_millis(7000), "7s"),
            (Duration::from_millis(62_500), "1m2.5s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(3_661_050), "1h1m1.05s"),
        ];
        for (d, want) in cases {
            assert_eq!(format_go_duration(d), want, "{d:?}");
        }
    }

    #[test]
    fn references_follow_upstream() {
        let p = pod();
        let r = pod_ref(&p);
        assert_eq!(
            (
                r.kind.as_deref(),
                r.api_version.as_deref(),
                r.namespace.as_deref(),
                r.name.as_deref(),
                r.uid.as_deref(),
                r.resource_version.as_deref(),
                r.field_path.as_deref()
            ),
            (
                Some("Pod"),
                Some("v1"),
                Some("ns1"),
                Some("web"),
                Some("uid-1"),
                Some("42"),
                None
            )
        );
        let c = container_ref(&p, "c").unwrap();
        assert_eq!(c.field_path.as_deref(), Some("spec.containers{c}"));
        let i = container_ref(&p, "init").unwrap();
        assert_eq!(i.field_path.as_deref(), Some("spec.initContainers{init}"));
        assert!(container_ref(&p, "gone").is_none());
        let n = node_ref("node1");
        assert_eq!(
            (
                n.kind.as_deref(),
                n.name.as_deref(),
                n.uid.as_deref(),
                n.namespace
            ),
            (Some("Node"), Some("node1"), Some("node1"), None)
        );
    }

    #[test]
    fn new_events_are_named_and_sourced_as_client_go() {
        let e = event("Failed", "boom", t(0));
        let nanos = nanos(t(0));
        assert_eq!(e.metadata.name, Some(format!("web.{nanos:x}")));
        assert_eq!(e.metadata.name.as_deref(), Some("web.17979cfe362a0000"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("ns1"));
        assert_eq!(e.count, Some(1));
        assert_eq!(e.first_timestamp, e.last_timestamp);
        let source = e.source.clone().unwrap();
        assert_eq!(source.component.as_deref(), Some("kubelet"));
        assert_eq!(source.host.as_deref(), Some("node1"));
        assert_eq!(e.reporting_component.as_deref(), Some("kubelet"));
        assert_eq!(e.reporting_instance.as_deref(), Some("node1"));
        // A node (no namespace) has its events in `default`.
        let n = make_event(
            &node_ref("node1"),
            EventType::Normal,
            "Starting",
            "x",
            &kubelet_source("node1"),
            t(0),
        );
        assert_eq!(n.metadata.namespace.as_deref(), Some("default"));
    }

    #[test]
    fn container_events_name_the_container_instead_of_its_id() {
        let recorder = EventRecorder::log_only("events-node-container");
        recorder.container_event(
            &pod(),
            "c",
            "abc123",
            EventType::Warning,
            FAILED_TO_START_CONTAINER,
            "Error: container abc123 failed",
        );
        recorder.container_event(
            &pod(),
            "gone",
            "",
            EventType::Normal,
            KILLING_CONTAINER,
            "x",
        );
        let events = captured_events("events-node-container");
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0].message.as_deref(),
            Some("Error: container c failed")
        );
        assert_eq!(
            events[0].involved_object.field_path.as_deref(),
            Some("spec.containers{c}")
        );
    }

    #[test]
    fn repeats_are_patched_with_their_count() {
        let mut c = EventCorrelator::default();
        let first = c.correlate(event("BackOff", "same", t(0)), t(0)).unwrap();
        assert_eq!(first.patch, None);
        assert_eq!(first.event.count, Some(1));
        // The server stored it with a resourceVersion.
        let mut stored = first.event.clone();
        stored.metadata.resource_version = Some("7".into());
        c.update_state(&stored);
        let second = c.correlate(event("BackOff", "same", t(30)), t(30)).unwrap();
        assert_eq!(second.event.metadata.name, first.event.metadata.name);
        assert_eq!(second.event.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(second.event.count, Some(2));
        assert_eq!(second.event.first_timestamp, first.event.first_timestamp);
        assert_eq!(second.event.last_timestamp, Some(Time(t(30))));
        let patch = second.patch.unwrap();
        assert_eq!(patch["count"], json!(2));
        assert_eq!(patch["message"], json!("same"));
        assert_eq!(patch["lastTimestamp"], json!(Time(t(30))));
        assert_eq!(patch.as_object().map(|o| o.len()), Some(3));
        // Without a stored state, the correlator's own observation counts too.
        let third = c.correlate(event("BackOff", "same", t(60)), t(60)).unwrap();
        assert_eq!(third.event.count, Some(3));
        // Another message is a new event.
        let other = c
            .correlate(event("BackOff", "other", t(60)), t(60))
            .unwrap();
        assert_eq!(other.event.count, Some(1));
        assert_eq!(other.patch, None);
    }

    #[test]
    fn similar_events_are_aggregated_after_ten_messages() {
        let mut c = EventCorrelator::default();
        for i in 0..9 {
            let r = c
                .correlate(event("Unhealthy", &format!("m{i}"), t(i)), t(i))
                .unwrap();
            assert_eq!(r.event.message, Some(format!("m{i}")));
            assert_eq!(r.event.count, Some(1));
        }
        // The 10th distinct message within 10 minutes: one combined event.
        let tenth = c.correlate(event("Unhealthy", "m9", t(9)), t(9)).unwrap();
        assert_eq!(
            tenth.event.message.as_deref(),
            Some("(combined from similar events): m9")
        );
        assert_eq!(tenth.event.count, Some(1));
        assert_eq!(tenth.patch, None);
        assert_eq!(tenth.event.reason.as_deref(), Some("Unhealthy"));
        // The next new message updates the combined event.
        let eleventh = c
            .correlate(event("Unhealthy", "m10", t(10)), t(10))
            .unwrap();
        assert_eq!(eleventh.event.metadata.name, tenth.event.metadata.name);
        assert_eq!(eleventh.event.count, Some(2));
        let patch = eleventh.patch.unwrap();
        assert_eq!(
            patch["message"],
            json!("(combined from similar events): m10")
        );
        // Another reason is not similar.
        let other = c.correlate(event("Failed", "x", t(11)), t(11)).unwrap();
        assert_eq!(other.event.message.as_deref(), Some("x"));
        // After 10 minutes without similar events, the window starts over.
        let later = t(11 + 601);
        let fresh = c
            .correlate(event("Unhealthy", "m11", later), later)
            .unwrap();
        assert_eq!(fresh.event.message.as_deref(), Some("m11"));
    }

    #[test]
    fn spam_filter_allows_a_burst_of_25_then_one_per_5_minutes() {
        let mut c = EventCorrelator::default();
        let passed = (0..30)
            .filter(|i| {
                // Distinct reasons: no aggregation, no repeats.
                c.correlate(event(&format!("R{i}"), "m", t(0)), t(0))
                    .is_some()
            })
            .count();
        assert_eq!(passed, 25);
        assert!(c.correlate(event("R-a", "m", t(299)), t(299)).is_none());
        assert!(c.correlate(event("R-b", "m", t(300)), t(300)).is_some());
        assert!(c.correlate(event("R-c", "m", t(301)), t(301)).is_none());
        // Another object has its own budget.
        let mut other = event("R0", "m", t(301));
        other.involved_object.name = Some("db".into());
        assert!(c.correlate(other, t(301)).is_some());
    }

    /// A sink that records calls and answers from a script.
    #[derive(Default)]
    struct FakeSink {
        calls: Mutex<Vec<(String, Event)>>,
        /// Failures to answer, in order, before succeeding: each one to the next call
        /// of its kind (`create` or `patch`).
        failures: Mutex<Vec<(&'static str, SinkError)>>,
    }

    impl FakeSink {
        fn answer(&self, kind: &str, event: &Event) -> Result<Event, SinkError> {
            self.calls
                .lock()
                .unwrap()
                .push((kind.to_owned(), event.clone()));
            let mut failures = self.failures.lock().unwrap();
            if let Some(i) = failures.iter().position(|(k, _)| *k == kind) {
                return Err(failures.remove(i).1);
            }
            let mut stored = event.clone();
            stored.metadata.resource_version = Some("1".into());
            Ok(stored)
        }
    }

    #[async_trait]
    impl EventSink for Arc<FakeSink> {
        async fn create(&self, event: &Event) -> Result<Event, SinkError> {
            self.answer("create", event)
        }

        async fn patch(
            &self,
            event: &Event,
            patch: &serde_json::Value,
        ) -> Result<Event, SinkError> {
            let mut patched = event.clone();
            patched.count = patch["count"].as_i64().map(|c| c as i32);
            self.answer("patch", &patched)
        }
    }

    fn calls(sink: &FakeSink) -> Vec<(String, Option<i32>)> {
        sink.calls
            .lock()
            .unwrap()
            .iter()
            .map(|(k, e)| (k.clone(), e.count))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn broadcaster_creates_then_patches_and_retries() {
        let sink = Arc::new(FakeSink::default());
        let (recorder, broadcaster) = EventRecorder::with_sink("events-node-sink", sink.clone());
        let p = pod();
        recorder.pod_event(&p, EventType::Normal, "SandboxChanged", "changed");
        recorder.pod_event(&p, EventType::Normal, "SandboxChanged", "changed");
        // The first patch finds the event gone (expired): it is created again.
        sink.failures
            .lock()
            .unwrap()
            .push(("patch", SinkError::NotFound));
        recorder.pod_event(&p, EventType::Normal, "SandboxChanged", "changed");
        drop(recorder);
        broadcaster.run().await;
        assert_eq!(
            calls(&sink),
            vec![
                ("create".to_owned(), Some(1)),
                ("patch".to_owned(), Some(2)),
                ("create".to_owned(), Some(2)),
                ("patch".to_owned(), Some(3)),
            ]
        );
        let calls = sink.calls.lock().unwrap();
        assert!(calls[2].1.metadata.resource_version.is_none());
        assert_eq!(calls[0].1.metadata.name, calls[1].1.metadata.name);
        assert_eq!(calls[3].1.metadata.name, calls[0].1.metadata.name);
    }

    #[tokio::test(start_paused = true)]
    async fn unreachable_api_is_retried_and_rejections_are_not() {
        let sink = Arc::new(FakeSink::default());
        *sink.failures.lock().unwrap() = vec![
            (
                "create",
                SinkError::Unavailable("connection refused".into()),
            ),
            (
                "create",
                SinkError::Unavailable("connection refused".into()),
            ),
        ];
        let (recorder, broadcaster) = EventRecorder::with_sink("events-node-retry", sink.clone());
        recorder.pod_event(&pod(), EventType::Warning, "Failed", "a");
        drop(recorder);
        let started = tokio::time::Instant::now();
        broadcaster.run().await;
        assert_eq!(calls(&sink).len(), 3);
        // The second wait is the full 10 s.
        assert!(started.elapsed() >= Duration::from_secs(10));

        let sink = Arc::new(FakeSink::default());
        *sink.failures.lock().unwrap() = vec![("create", SinkError::Rejected("forbidden".into()))];
        let (recorder, broadcaster) = EventRecorder::with_sink("events-node-reject", sink.clone());
        recorder.pod_event(&pod(), EventType::Warning, "Failed", "a");
        drop(recorder);
        broadcaster.run().await;
        assert_eq!(calls(&sink).len(), 1);

        let sink = Arc::new(FakeSink::default());
        *sink.failures.lock().unwrap() = vec![
            ("create", SinkError::Unavailable("down".into()));
            MAX_TRIES_PER_EVENT as usize + 1
        ];
        let (recorder, broadcaster) = EventRecorder::with_sink("events-node-give-up", sink.clone());
        recorder.pod_event(&pod(), EventType::Warning, "Failed", "a");
        drop(recorder);
        broadcaster.run().await;
        assert_eq!(calls(&sink).len(), MAX_TRIES_PER_EVENT as usize);
    }

    #[tokio::test]
    async fn a_full_queue_drops_events_without_blocking() {
        let sink = Arc::new(FakeSink::default());
        let (recorder, mut broadcaster) = EventRecorder::with_sink("events-node-full", sink);
        for i in 0..MAX_QUEUED_EVENTS + 5 {
            recorder.pod_event(&pod(), EventType::Normal, "Pulled", &format!("m{i}"));
        }
        drop(recorder);
        let mut queued = 0;
        while broadcaster.queue.recv().await.is_some() {
            queued += 1;
        }
        assert_eq!(queued, MAX_QUEUED_EVENTS);
    }

    /// A runtime manager over a fake CRI recording to a log-only recorder of `node`.
    fn runtime(
        node: &str,
        dir: &std::path::Path,
    ) -> (
        Arc<crate::cri::fake::FakeCri>,
        crate::kuberuntime::KubeGenericRuntimeManager,
    ) {
        let cri = Arc::new(crate::cri::fake::FakeCri::default());
        let manager = crate::kuberuntime::KubeGenericRuntimeManager::new(
            cri.clone(),
            crate::kuberuntime::RuntimeManagerConfig {
                pod_logs_dir: dir.to_owned(),
                cgroup_root: "/skiff-unit-test-nonexistent".into(),
                node_ip: "192.168.0.2".into(),
                resolv_conf: "".into(),
                // With cluster DNS: no MissingClusterDNS events in the way.
                cluster_dns: vec![IpAddr::from([10, 96, 0, 10])],
                cluster_domain: "cluster.local".into(),
                memory_capacity: 1 << 30,
                pod_dirs: crate::pod_dirs::PodDirs::new(dir.join("root")),
                allocatable: Default::default(),
            },
        )
        .with_recorder(EventRecorder::log_only(node));
        (cri, manager)
    }

    fn runtime_pod(image: &str) -> Pod {
        let mut p = Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("uid1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        };
        skiff_api::core::pod::default_pod(&mut p);
        p
    }

    async fn sync(m: &crate::kuberuntime::KubeGenericRuntimeManager, p: &Pod) {
        let status = m.get_pod_status("uid1").await.unwrap();
        m.sync_pod(p, &status, &Default::default()).await;
    }

    fn reasons_and_messages(node: &str) -> Vec<(String, String)> {
        captured_events(node)
            .into_iter()
            .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(r, m)| ((*r).to_owned(), (*m).to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn image_pull_failures_record_upstream_events() {
        let node = "events-node-pull-failure";
        let dir = tempfile::tempdir().unwrap();
        let (cri, m) = runtime(node, dir.path());
        cri.fail_pulls_of("127.0.0.1:1/none:latest");
        let p = runtime_pod("127.0.0.1:1/none");
        sync(&m, &p).await;
        sync(&m, &p).await;
        let events = reasons_and_messages(node);
        assert_eq!(events.len(), 5, "{events:?}");
        assert_eq!(
            events[0],
            (
                "Pulling".to_owned(),
                "Pulling image \"127.0.0.1:1/none\"".to_owned()
            )
        );
        assert_eq!(events[1].0, "Failed");
        assert!(
            events[1]
                .1
                .starts_with("Failed to pull image \"127.0.0.1:1/none\": "),
            "{events:?}"
        );
        assert_eq!(
            events[2..].to_vec(),
            pairs(&[
                ("Failed", "Error: ErrImagePull"),
                ("BackOff", "Back-off pulling image \"127.0.0.1:1/none\""),
                ("Failed", "Error: ImagePullBackOff"),
            ])
        );
        let object = &captured_events(node)[0].involved_object;
        assert_eq!(object.field_path.as_deref(), Some("spec.containers{c}"));
        assert_eq!(object.uid.as_deref(), Some("uid1"));
    }

    #[tokio::test]
    async fn kills_backoff_and_sandbox_changes_record_upstream_events() {
        let node = "events-node-lifecycle";
        let dir = tempfile::tempdir().unwrap();
        let (cri, m) = runtime(node, dir.path());
        let p = runtime_pod("busybox:1.36");
        sync(&m, &p).await;
        let events = reasons_and_messages(node);
        assert_eq!(events[0].0, "Pulling");
        assert!(
            events[1]
                .1
                .starts_with("Successfully pulled image \"busybox:1.36\" in "),
            "{events:?}"
        );
        assert!(events[1].1.ends_with(" bytes."), "{events:?}");
        assert_eq!(
            events[2..].to_vec(),
            pairs(&[
                ("Created", "Created container: c"),
                ("Started", "Started container c"),
            ])
        );

        // The container crashes twice: restarted at once, then held back.
        let id = cri.container_ids()[0].clone();
        cri.set_container_state(&id, k8s_cri::v1::ContainerState::ContainerExited, 1);
        sync(&m, &p).await;
        let id = cri.container_ids().into_iter().find(|c| *c != id).unwrap();
        cri.set_container_state(&id, k8s_cri::v1::ContainerState::ContainerExited, 1);
        sync(&m, &p).await;
        let events = reasons_and_messages(node);
        assert_eq!(
            events[4..].to_vec(),
            pairs(&[
                (
                    "Pulled",
                    "Container image \"busybox:1.36\" already present on machine"
                ),
                ("Created", "Created container: c"),
                ("Started", "Started container c"),
                (
                    "BackOff",
                    "Back-off restarting failed container c in pod web_default(uid1)"
                ),
            ])
        );

        // The sandbox dies: it is re-created.
        let status = m.get_pod_status("uid1").await.unwrap();
        m.kill_pod(&p, &status, 0).await;
        sync(&m, &p).await;
        let events = reasons_and_messages(node);
        assert!(
            events.contains(&(
                "SandboxChanged".to_owned(),
                "Pod sandbox changed, it will be killed and re-created.".to_owned()
            )),
            "{events:?}"
        );

        // Killing a running pod stops its container.
        let mut other = runtime_pod("busybox:1.36");
        other.metadata.uid = Some("uid2".into());
        let status = m.get_pod_status("uid2").await.unwrap();
        m.sync_pod(&other, &status, &Default::default()).await;
        let status = m.get_pod_status("uid2").await.unwrap();
        m.kill_pod(&other, &status, 0).await;
        let last = captured_events(node).pop().unwrap();
        assert_eq!(
            (last.reason.as_deref(), last.message.as_deref()),
            (Some("Killing"), Some("Stopping container c"))
        );
        assert_eq!(last.involved_object.uid.as_deref(), Some("uid2"));
    }

    #[tokio::test]
    async fn failed_probes_record_unhealthy() {
        use crate::prober::{ProbeRunner, ProbeType, Prober};
        use k8s_openapi::api::core::v1::{ExecAction, Probe};

        let node = "events-node-probe";
        let cri = Arc::new(crate::cri::fake::FakeCri::default());
        let prober = Prober::new(cri.clone()).with_recorder(EventRecorder::log_only(node));
        let mut p = pod();
        let container = Container {
            name: "c".into(),
            liveness_probe: Some(Probe {
                exec: Some(ExecAction {
                    command: Some(vec!["false".into()]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        if let Some(spec) = p.spec.as_mut() {
            spec.containers = vec![container.clone()];
        }
        cri.script_exec(1, "out ", "err", Duration::ZERO);
        let result = prober
            .probe(ProbeType::Liveness, &p, "10.0.0.5", &container, "cid")
            .await;
        assert_eq!(result, Ok(crate::prober::results::ProbeResult::Failure));
        let events = captured_events(node);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason.as_deref(), Some("Unhealthy"));
        assert_eq!(events[0].type_.as_deref(), Some("Warning"));
        assert_eq!(
            events[0].message.as_deref(),
            Some("Liveness probe failed: out err")
        );
        assert_eq!(
            events[0].involved_object.field_path.as_deref(),
            Some("spec.containers{c}")
        );
        cri.script_exec(0, "ok", "", Duration::ZERO);
        prober
            .probe(ProbeType::Liveness, &p, "10.0.0.5", &container, "cid")
            .await
            .unwrap();
        assert_eq!(captured_events(node).len(), 1);
    }

    #[tokio::test]
    async fn static_pod_run_records_pulled_created_started() {
        use std::net::Ipv4Addr;

        use crate::KubeletConfig;
        use crate::cri::fake::FakeCri;

        let dir = tempfile::tempdir().unwrap();
        let manifests = dir.path().join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        std::fs::write(
            manifests.join("web.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n",
        )
        .unwrap();
        let node = "events-node-run";
        let config = KubeletConfig {
            node_name: node.into(),
            node_ip: Some(IpAddr::V4(Ipv4Addr::new(192, 168, 0, 2))),
            pod_manifest_path: Some(manifests),
            root_dir: dir.path().join("root"),
            pod_logs_dir: dir.path().join("logs"),
            port: 0,
            read_only_port: 0,
            file_check_frequency: Duration::from_secs(1),
            cgroups_per_qos: false,
            eviction_hard: Default::default(),
            ..KubeletConfig::default()
        };
        let cri = Arc::new(FakeCri::default());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let kubelet = tokio::spawn(crate::run(config, cri, async move {
            let _ = stop_rx.await;
        }));
        let reasons = || -> Vec<(String, String, String)> {
            captured_events(node)
                .into_iter()
                .map(|e| {
                    (
                        e.reason.unwrap_or_default(),
                        e.message.unwrap_or_default(),
                        e.involved_object.field_path.unwrap_or_default(),
                    )
                })
                .collect()
        };
        let mut seen = Vec::new();
        for _ in 0..100 {
            seen = reasons();
            if seen.iter().any(|(r, _, _)| r == "Started") || kubelet.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = stop_tx.send(());
        kubelet.await.unwrap().unwrap();
        let _ = crate::volume::mount::unmount(&dir.path().join("root"));
        let kinds: Vec<&str> = seen.iter().map(|(r, _, _)| r.as_str()).collect();
        let pulled = kinds.iter().position(|r| *r == "Pulled");
        let created = kinds.iter().position(|r| *r == "Created");
        let started = kinds.iter().position(|r| *r == "Started");
        assert!(
            matches!((pulled, created, started), (Some(p), Some(c), Some(s)) if p < c && c < s),
            "{seen:?}"
        );
        let message = |reason: &str| {
            seen.iter()
                .find(|(r, _, _)| r == reason)
                .map(|(_, m, f)| (m.clone(), f.clone()))
                .unwrap()
        };
        assert_eq!(
            message("Created"),
            (
                "Created container: c".to_owned(),
                "spec.containers{c}".to_owned()
            )
        );
        assert_eq!(
            message("Started"),
            (
                "Started container c".to_owned(),
                "spec.containers{c}".to_owned()
            )
        );
        let (pulled, _) = message("Pulled");
        assert!(
            pulled.starts_with("Successfully pulled image \"busybox\" in ")
                || pulled == "Container image \"busybox\" already present on machine",
            "{pulled}"
        );
    }
}
