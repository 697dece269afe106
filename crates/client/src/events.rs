//! The events.k8s.io/v1 event recorder (client-go `tools/events`): one broadcaster per
//! process, one recorder per reporting controller (kube-scheduler: one per profile;
//! kube-controller-manager: one per controller).
//!
//! [`EventRecorder::eventf`] builds an events.k8s.io/v1 Event (`reportingController`
//! the recorder's, `reportingInstance` `<controller>-<hostname>`, `eventTime` now,
//! `regarding` and `related` as given, the note cut to 1 KiB) and hands it to a bounded
//! queue without waiting; a full queue drops it with a debug log.
//!
//! [`EventBroadcaster::run`] drains the queue into an [`EventSink`] with upstream's
//! series semantics ([`SeriesCache`]): the first event of a kind is created; the first
//! repeat of an isomorphic event (same type, action, reason, reporting controller and
//! instance, regarding and related objects; the note does not count) turns the cached
//! event into a series of count 2 and PATCHes it; later repeats only count in the cache.
//! Every 30 minutes the open series are PATCHed with their counts; every 6 minutes the
//! series not seen for 6 minutes get a final PATCH and leave the cache, as do single
//! events older than 6 minutes. Writes that fail for want of an answer are retried
//! (12 tries, about 10 s apart); writes the API server refuses are dropped.
//!
//! Skiff's API server stores events.k8s.io/v1 Events as core/v1 Events (as upstream), so
//! `kubectl describe` lists them: it reads core/v1 events by `involvedObject`, which
//! is `regarding`, and shows `reportingComponent` (the reporting controller) as FROM and
//! `series` as `(xN over ...)`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error};

/// Events queued for the sender at most (client-go `maxQueuedEvents`).
pub const MAX_QUEUED_EVENTS: usize = 1000;
/// Attempts to write one event (client-go `maxTriesPerEvent`).
const MAX_TRIES_PER_EVENT: u32 = 12;
/// Wait between attempts, jittered by up to 25% (client-go `defaultSleepDuration`).
const DEFAULT_SLEEP_DURATION: Duration = Duration::from_secs(10);
/// A series not seen for this long is finished; single events leave the cache after it
/// (client-go `finishTime`).
pub const FINISH_TIME: Duration = Duration::from_secs(6 * 60);
/// Open series are written again this often (client-go `refreshTime`).
pub const REFRESH_TIME: Duration = Duration::from_secs(30 * 60);
/// The longest note the API server accepts (upstream `NoteLengthLimit`).
pub const NOTE_LENGTH_LIMIT: usize = 1024;

/// `note` cut to [`NOTE_LENGTH_LIMIT`] bytes with a ` ...` suffix when longer (upstream
/// kube-scheduler's `truncateMessage`), on a character boundary.
pub fn truncate_note(note: &str) -> String {
    if note.len() <= NOTE_LENGTH_LIMIT {
        return note.to_owned();
    }
    const SUFFIX: &str = " ...";
    let mut end = NOTE_LENGTH_LIMIT - SUFFIX.len();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{SUFFIX}", &note[..end])
}

/// The reference to `obj` (upstream `reference.GetReference`): its apiVersion, kind,
/// namespace, name, uid and resourceVersion.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    let mut r = obj.object_ref(&());
    r.resource_version.clone_from(&obj.meta().resource_version);
    r
}

/// What one recorder stamps on its events.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reporter {
    controller: String,
    instance: String,
}

/// What an event says (the arguments of client-go's `Eventf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventDetails<'a> {
    /// `Normal` or `Warning`.
    pub type_: &'a str,
    /// Why (`Scheduled`, `FailedScheduling`, `Preempted`, ...).
    pub reason: &'a str,
    /// What was done (`Scheduling`, `Binding`, `Preempting`).
    pub action: &'a str,
    /// The human-readable note (cut to 1 KiB).
    pub note: &'a str,
}

/// A new event (client-go `generateEvent`) by `reporting_controller` /
/// `reporting_instance` at `now`: named `<regarding name>.<hex nanoseconds>` in the
/// regarding object's namespace (`default` without one), no series.
pub fn make_event(
    regarding: ObjectReference,
    related: Option<ObjectReference>,
    details: EventDetails<'_>,
    (reporting_controller, reporting_instance): (&str, &str),
    now: Timestamp,
) -> Event {
    let EventDetails {
        type_,
        reason,
        action,
        note,
    } = details;
    let namespace = regarding
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    Event {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}.{:x}",
                regarding.name.as_deref().unwrap_or(""),
                now.as_nanosecond()
            )),
            namespace: Some(namespace),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        series: None,
        reporting_controller: Some(reporting_controller.to_owned()),
        reporting_instance: Some(reporting_instance.to_owned()),
        action: Some(action.to_owned()),
        reason: Some(reason.to_owned()),
        regarding: Some(regarding),
        related,
        note: Some(truncate_note(note)),
        type_: Some(type_.to_owned()),
        ..Default::default()
    }
}

/// Records events of one reporting controller (a scheduler profile, a controller). Cheap
/// to clone; recording never blocks.
#[derive(Debug, Clone)]
pub struct EventRecorder {
    reporter: Arc<Reporter>,
    /// The sender task's queue; None: events are only logged.
    queue: Option<mpsc::Sender<Event>>,
}

impl EventRecorder {
    /// A recorder that only logs (no API server), for `reporting_controller`.
    pub fn log_only(reporting_controller: &str) -> Self {
        Self {
            reporter: Arc::new(reporter(reporting_controller)),
            queue: None,
        }
    }

    /// The reporting controller.
    pub fn reporting_controller(&self) -> &str {
        &self.reporter.controller
    }

    /// The reporting instance, `<controller>-<hostname>`.
    pub fn reporting_instance(&self) -> &str {
        &self.reporter.instance
    }
}

fn reporter(controller: &str) -> Reporter {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    Reporter {
        controller: controller.to_owned(),
        instance: format!("{controller}-{host}"),
    }
}

impl EventRecorder {
    /// Records an event about `regarding` (and `related`, when given), client-go
    /// `Eventf`. An event type other than `Normal` or `Warning` is logged as an error
    /// and dropped, as upstream.
    pub fn eventf(
        &self,
        regarding: ObjectReference,
        related: Option<ObjectReference>,
        details: EventDetails<'_>,
    ) {
        let EventDetails {
            type_,
            reason,
            action,
            note,
        } = details;
        if !matches!(type_, "Normal" | "Warning") {
            error!("Unsupported event type: '{type_}'");
            return;
        }
        debug!(
            object = %format!(
                "{}/{}",
                regarding.namespace.as_deref().unwrap_or(""),
                regarding.name.as_deref().unwrap_or("")
            ),
            kind = regarding.kind.as_deref().unwrap_or(""),
            api_version = regarding.api_version.as_deref().unwrap_or(""),
            r#type = type_,
            reason,
            action,
            note,
            "Event occurred"
        );
        let Some(queue) = &self.queue else {
            return;
        };
        let event = make_event(
            regarding,
            related,
            details,
            (&self.reporter.controller, &self.reporter.instance),
            Timestamp::now(),
        );
        match queue.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                debug!(reason, "event queue full; event dropped");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                debug!(reason, "event sender stopped; event not recorded");
            }
        }
    }
}

impl EventRecorder {
    /// Records a controller's event about `obj` with the action `Sync` (client-go's
    /// legacy `Event(object, eventtype, reason, message)`, which controllers use; the
    /// events.k8s.io form needs an action, and every controller syncs).
    pub fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: &str,
        reason: &str,
        note: &str,
    ) {
        self.eventf(
            reference(obj),
            None,
            EventDetails {
                type_,
                reason,
                action: "Sync",
                note,
            },
        );
    }
}

/// Makes recorders that share one broadcaster (client-go `EventBroadcaster.NewRecorder`).
#[derive(Debug, Clone)]
pub struct EventRecorders {
    queue: mpsc::Sender<Event>,
}

impl EventRecorders {
    /// A recorder for `reporting_controller` (a profile's scheduler name, a controller's
    /// name), reporting instance `<reporting_controller>-<hostname>`.
    pub fn recorder(&self, reporting_controller: &str) -> EventRecorder {
        EventRecorder {
            reporter: Arc::new(reporter(reporting_controller)),
            queue: Some(self.queue.clone()),
        }
    }
}

/// Why an [`EventSink`] call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkError {
    /// The Event to patch does not exist (it expired): create it instead.
    NotFound,
    /// The Event to create already exists.
    AlreadyExists,
    /// The API server refused the request: retrying will not help.
    Rejected(String),
    /// The API server could not be reached or answered oddly: retry later.
    Unavailable(String),
}

impl std::fmt::Display for SinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SinkError::NotFound => f.write_str("not found"),
            SinkError::AlreadyExists => f.write_str("already exists"),
            SinkError::Rejected(m) => write!(f, "rejected: {m}"),
            SinkError::Unavailable(m) => write!(f, "unavailable: {m}"),
        }
    }
}

/// Where events are written (client-go `tools/events.EventSink`).
#[async_trait]
pub trait EventSink: Send + Sync + 'static {
    /// Creates `event`.
    async fn create(&self, event: &Event) -> Result<Event, SinkError>;
    /// Applies the strategic merge `patch` to the existing `event` (by namespace and name).
    async fn patch(&self, event: &Event, patch: &serde_json::Value) -> Result<Event, SinkError>;
}

/// The API server as an [`EventSink`]: events.k8s.io/v1 Events in the event's namespace.
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
        kube::Error::Api(status) if status.reason == "AlreadyExists" => SinkError::AlreadyExists,
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

/// The isomorphism key of an event (client-go `getKey`): type, action, reason, reporting
/// controller and instance, regarding and related objects. With `by_note`, the note
/// counts too and the regarding object's resourceVersion does not (the legacy
/// recorder's `EventCorrelator`, see [`controller_broadcaster`]).
fn event_key(event: &Event, by_note: bool) -> String {
    if by_note {
        let mut regarding = event.regarding.clone();
        if let Some(r) = regarding.as_mut() {
            r.resource_version = None;
        }
        return json!([
            event.type_,
            event.action,
            event.reason,
            event.reporting_controller,
            event.reporting_instance,
            regarding,
            event.related,
            event.note,
        ])
        .to_string();
    }
    json!([
        event.type_,
        event.action,
        event.reason,
        event.reporting_controller,
        event.reporting_instance,
        event.regarding,
        event.related,
    ])
    .to_string()
}

/// The events recently written, by isomorphism key (client-go `eventCache`).
#[derive(Debug, Default)]
pub struct SeriesCache {
    entries: HashMap<String, Event>,
    /// Whether the note is part of the key (see [`controller_broadcaster`]).
    by_note: bool,
}

impl SeriesCache {
    /// Notes `event` at `now` and returns what to write, if anything (client-go
    /// `recordToSink`): a new event as is (to create); the first repeat of a cached one
    /// as the cached event with a series of count 2 (to patch); None for later repeats,
    /// which only count.
    pub fn observe(&mut self, event: Event, now: Timestamp) -> Option<Event> {
        let key = event_key(&event, self.by_note);
        if let Some(cached) = self.entries.get_mut(&key) {
            if let Some(series) = &mut cached.series {
                series.count = series.count.saturating_add(1);
                series.last_observed_time = MicroTime(now);
                return None;
            }
            cached.series = Some(EventSeries {
                count: 2,
                last_observed_time: MicroTime(now),
            });
            return Some(cached.clone());
        }
        self.entries.insert(key, event.clone());
        Some(event)
    }

    /// The open series, to write again (client-go `refreshExistingEventSeries`).
    pub fn series(&self) -> Vec<(String, Event)> {
        self.entries
            .iter()
            .filter(|(_, e)| e.series.is_some())
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect()
    }

    /// client-go `finishSeries` at `now`: drops single events older than
    /// [`FINISH_TIME`], and returns the series not observed for [`FINISH_TIME`] (to write
    /// their final count, then [`Self::remove`]).
    pub fn finished(&mut self, now: Timestamp) -> Vec<(String, Event)> {
        let limit = SignedDuration::try_from(FINISH_TIME).unwrap_or(SignedDuration::MAX);
        let before = |t: &MicroTime| t.0 < now - limit;
        self.entries
            .retain(|_, e| e.series.is_some() || !e.event_time.as_ref().is_some_and(before));
        self.entries
            .iter()
            .filter(|(_, e)| {
                e.series
                    .as_ref()
                    .is_some_and(|s| before(&s.last_observed_time))
            })
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect()
    }

    /// Forgets the event of `key`.
    pub fn remove(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// The number of cached events.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The patch that turns the event without its series into the event (the two-way
/// strategic merge patch of client-go `createPatchBytesForSeries`): `{"series": ...}`.
pub fn series_patch(event: &Event) -> serde_json::Value {
    json!({ "series": event.series })
}

/// The sender task: drains the recorders' queue into the sink (client-go
/// `StartRecordingToSink`).
pub struct EventBroadcaster<S> {
    queue: mpsc::Receiver<Event>,
    sink: Arc<S>,
    cache: SeriesCache,
    sleep: Duration,
    /// The wall clock of the series' times (replaced in tests).
    clock: Arc<dyn Fn() -> Timestamp + Send + Sync>,
}

impl<S> std::fmt::Debug for EventBroadcaster<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBroadcaster")
            .field("cached", &self.cache.len())
            .finish_non_exhaustive()
    }
}

/// A broadcaster writing to `sink`, and the factory of its recorders (spawn
/// [`EventBroadcaster::run`]).
pub fn broadcaster<S: EventSink>(sink: S) -> (EventRecorders, EventBroadcaster<S>) {
    broadcaster_keyed(sink, false)
}

/// A broadcaster for kube-controller-manager's controllers, which record with the legacy
/// core/v1 recorder (`record.NewBroadcaster`): events that differ in their note stay
/// apart ("Created pod: a", "Created pod: b"), and only identical ones count as a
/// series, whatever the resourceVersion of the object they are about.
pub fn controller_broadcaster<S: EventSink>(sink: S) -> (EventRecorders, EventBroadcaster<S>) {
    broadcaster_keyed(sink, true)
}

fn broadcaster_keyed<S: EventSink>(
    sink: S,
    by_note: bool,
) -> (EventRecorders, EventBroadcaster<S>) {
    let (tx, rx) = mpsc::channel(MAX_QUEUED_EVENTS);
    (
        EventRecorders { queue: tx },
        EventBroadcaster {
            queue: rx,
            sink: Arc::new(sink),
            cache: SeriesCache {
                entries: HashMap::new(),
                by_note,
            },
            sleep: DEFAULT_SLEEP_DURATION,
            clock: Arc::new(Timestamp::now),
        },
    )
}

/// The outcome of one write (client-go `recordEvent`'s `retry`).
#[derive(Debug, PartialEq, Eq)]
enum Written {
    Done,
    Retry,
}

impl<S: EventSink> EventBroadcaster<S> {
    /// Writes queued events until `cancel` fires or every recorder is dropped; finishes
    /// series every 6 minutes and refreshes them every 30.
    pub async fn run(mut self, cancel: CancellationToken) {
        let start = tokio::time::Instant::now();
        let mut finish = tokio::time::interval_at(start + FINISH_TIME, FINISH_TIME);
        let mut refresh = tokio::time::interval_at(start + REFRESH_TIME, REFRESH_TIME);
        loop {
            tokio::select! {
                event = self.queue.recv() => match event {
                    Some(event) => self.record_to_sink(event, &cancel),
                    None => return,
                },
                _ = finish.tick() => self.finish_series().await,
                _ = refresh.tick() => self.refresh_series().await,
                () = cancel.cancelled() => return,
            }
        }
    }

    /// Notes `event` in the cache and, when something is to be written, writes it in a
    /// task of its own (as client-go's goroutine per event), so that retries during an
    /// API server outage do not hold up other events.
    fn record_to_sink(&mut self, event: Event, cancel: &CancellationToken) {
        let Some(to_write) = self.cache.observe(event, (self.clock)()) else {
            return;
        };
        let sink = Arc::clone(&self.sink);
        let (sleep, cancel) = (self.sleep, cancel.clone());
        tokio::spawn(async move { attempt_recording(&*sink, &to_write, sleep, &cancel).await });
    }

    async fn finish_series(&mut self) {
        for (key, event) in self.cache.finished((self.clock)()) {
            if record_event(&*self.sink, &event).await == Written::Done {
                self.cache.remove(&key);
            }
        }
    }

    async fn refresh_series(&mut self) {
        for (_, event) in self.cache.series() {
            let _ = record_event(&*self.sink, &event).await;
        }
    }
}

/// Writes `event`, retrying while the API server cannot be reached: 12 tries, `sleep`
/// (jittered by up to 25%) apart (client-go `attemptRecording`).
async fn attempt_recording<S: EventSink>(
    sink: &S,
    event: &Event,
    sleep: Duration,
    cancel: &CancellationToken,
) {
    for attempt in 1..=MAX_TRIES_PER_EVENT {
        if record_event(sink, event).await == Written::Done {
            return;
        }
        if attempt == MAX_TRIES_PER_EVENT {
            break;
        }
        let wait = sleep.mul_f64(1.0 + 0.25 * rand::random::<f64>());
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = cancel.cancelled() => return,
        }
    }
    error!(
        reason = event.reason.as_deref().unwrap_or(""),
        "Unable to write event (retry limit exceeded!)"
    );
}

/// One write (client-go `recordEvent`): a series is PATCHed (created when it is gone),
/// anything else created. Retry only when the API server could not be reached, or when
/// creating a series raced with its first creation.
async fn record_event<S: EventSink>(sink: &S, event: &Event) -> Written {
    let is_series = event.series.is_some();
    let mut result = None;
    if is_series {
        result = Some(sink.patch(event, &series_patch(event)).await);
    }
    if !is_series || matches!(result, Some(Err(SinkError::NotFound))) {
        let mut create = event.clone();
        create.metadata.resource_version = None;
        result = Some(sink.create(&create).await);
    }
    match result {
        Some(Ok(_)) | None => Written::Done,
        Some(Err(SinkError::AlreadyExists)) if is_series => Written::Retry,
        Some(Err(SinkError::AlreadyExists)) => {
            debug!("Server rejected event (will not retry!): already exists");
            Written::Done
        }
        Some(Err(e @ (SinkError::Rejected(_) | SinkError::NotFound))) => {
            error!("Server rejected event (will not retry!): {e}");
            Written::Done
        }
        Some(Err(e @ SinkError::Unavailable(_))) => {
            error!("Unable to write event (may retry after sleeping): {e}");
            Written::Retry
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use std::sync::Mutex;

    fn pod_reference(pod: &Pod) -> ObjectReference {
        reference(pod)
    }

    fn node_reference(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(name.to_owned()),
            ..Default::default()
        }
    }

    fn pod(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("team-a".to_owned()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some("42".to_owned()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn details<'a>(reason: &'a str, note: &'a str) -> EventDetails<'a> {
        EventDetails {
            type_: "Warning",
            reason,
            action: "Scheduling",
            note,
        }
    }

    /// What the scheduler records: about a pod, related to its node.
    fn record(
        recorder: &EventRecorder,
        pod: &Pod,
        node: Option<&str>,
        type_: &str,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        let details = EventDetails {
            type_,
            reason,
            action,
            note,
        };
        recorder.eventf(pod_reference(pod), node.map(node_reference), details);
    }

    fn scheduled() -> EventDetails<'static> {
        EventDetails {
            type_: "Normal",
            reason: "Scheduled",
            action: "Binding",
            note: "ok",
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn notes_are_cut_to_one_kibibyte_on_a_character_boundary() {
        assert_eq!(
            truncate_note("0/3 nodes are available."),
            "0/3 nodes are available."
        );
        let exact = "x".repeat(1024);
        assert_eq!(truncate_note(&exact), exact);
        let long = "y".repeat(2000);
        let cut = truncate_note(&long);
        assert_eq!(cut.len(), 1024);
        assert_eq!(cut, format!("{} ...", "y".repeat(1020)));
        // 'é' is two bytes: byte 1020 falls inside one, so the cut moves back to 1019.
        let accented = format!("a{}", "é".repeat(600));
        let cut = truncate_note(&accented);
        assert_eq!(cut.len(), 1023);
        assert!(cut.ends_with("é ..."));
    }

    #[test]
    fn events_are_built_as_client_go_does_and_pass_validation() {
        let now = at("2026-01-02T03:04:05.123456789Z");
        let event = make_event(
            pod_reference(&pod("web")),
            Some(node_reference("node-1")),
            EventDetails {
                type_: "Normal",
                reason: "Scheduled",
                action: "Binding",
                note: "Successfully assigned team-a/web to node-1",
            },
            ("default-scheduler", "default-scheduler-host"),
            now,
        );
        let nanos = now.as_nanosecond();
        assert_eq!(event.metadata.name, Some(format!("web.{nanos:x}")));
        assert_eq!(event.metadata.name.as_deref(), Some("web.1886caf223f1ff15"));
        let value = serde_json::to_value(&event).unwrap();
        assert_eq!(value["metadata"]["namespace"], "team-a");
        assert_eq!(value["eventTime"], "2026-01-02T03:04:05.123456Z");
        assert_eq!(value["reportingController"], "default-scheduler");
        assert_eq!(value["reportingInstance"], "default-scheduler-host");
        assert_eq!(value["action"], "Binding");
        assert_eq!(value["type"], "Normal");
        assert_eq!(
            value["regarding"],
            json!({"apiVersion": "v1", "kind": "Pod", "name": "web", "namespace": "team-a",
                   "uid": "uid-web", "resourceVersion": "42"})
        );
        assert_eq!(
            value["related"],
            json!({"apiVersion": "v1", "kind": "Node", "name": "node-1"})
        );
        assert!(value.get("series").is_none());
        // What Skiff's API server checks on an events.k8s.io/v1 create.
        let errors = skiff_api::events::validate_create(
            &skiff_api::events::to_core(event.clone()),
            skiff_api::events::RequestVersion::EventsV1,
        );
        assert!(errors.is_empty(), "{errors:?}");
        // A pod without a namespace: the event goes to `default`.
        let mut bare = pod("bare");
        bare.metadata.namespace = None;
        let event = make_event(
            pod_reference(&bare),
            None,
            details("FailedScheduling", "x"),
            ("s", "s-h"),
            now,
        );
        assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
        assert!(event.related.is_none());
    }

    #[test]
    fn isomorphic_events_become_a_series() {
        let mut cache = SeriesCache::default();
        let t0 = at("2026-01-02T03:00:00Z");
        let event = |reason: &str, note: &str, t: Timestamp| {
            make_event(
                pod_reference(&pod("web")),
                None,
                details(reason, note),
                ("s", "s-h"),
                t,
            )
        };
        // The first is created as is.
        let first = cache
            .observe(event("FailedScheduling", "0/3 nodes", t0), t0)
            .unwrap();
        assert!(first.series.is_none());
        // The first repeat (another note: the note is not part of the key) is the cached
        // event with a series of 2.
        let t1 = at("2026-01-02T03:00:10Z");
        let second = cache
            .observe(event("FailedScheduling", "0/4 nodes", t1), t1)
            .unwrap();
        assert_eq!(second.metadata.name, first.metadata.name);
        assert_eq!(second.note.as_deref(), Some("0/3 nodes"));
        let series = second.series.clone().unwrap();
        assert_eq!((series.count, series.last_observed_time.0), (2, t1));
        assert_eq!(
            series_patch(&second),
            json!({"series": {"count": 2, "lastObservedTime": "2026-01-02T03:00:10.000000Z"}})
        );
        // Later repeats only count.
        let t2 = at("2026-01-02T03:01:00Z");
        assert!(
            cache
                .observe(event("FailedScheduling", "x", t2), t2)
                .is_none()
        );
        assert!(
            cache
                .observe(event("FailedScheduling", "x", t2), t2)
                .is_none()
        );
        let open = cache.series();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].1.series.as_ref().unwrap().count, 4);
        // Another reason is another event.
        assert!(cache.observe(event("Scheduled", "ok", t2), t2).is_some());
        assert_eq!(cache.len(), 2);

        // 6 minutes after t2 nothing is finished yet; after that both are: the series is
        // returned for its final write, the single event just dropped.
        assert!(cache.finished(at("2026-01-02T03:07:00Z")).is_empty());
        assert_eq!(cache.len(), 2);
        let done = cache.finished(at("2026-01-02T03:07:01Z"));
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].1.series.as_ref().unwrap().count, 4);
        assert_eq!(cache.len(), 1);
        cache.remove(&done[0].0);
        assert!(cache.is_empty());
    }

    /// Records the sink's calls; answers from a script by `"<create|patch> <reason>"`
    /// (default: success).
    #[derive(Default)]
    struct FakeSink {
        calls: Mutex<Vec<(String, serde_json::Value)>>,
        answers: Mutex<HashMap<String, Vec<Result<(), SinkError>>>>,
    }

    impl FakeSink {
        fn answer(&self, op: &str, event: &Event) -> Result<(), SinkError> {
            let key = format!("{op} {}", event.reason.as_deref().unwrap_or(""));
            let mut answers = self.answers.lock().unwrap();
            match answers.get_mut(&key) {
                Some(script) if !script.is_empty() => script.remove(0),
                _ => Ok(()),
            }
        }

        fn script(&self, key: &str, answer: Result<(), SinkError>) {
            self.answers
                .lock()
                .unwrap()
                .entry(key.to_owned())
                .or_default()
                .push(answer);
        }
    }

    #[async_trait]
    impl EventSink for Arc<FakeSink> {
        async fn create(&self, event: &Event) -> Result<Event, SinkError> {
            self.calls
                .lock()
                .unwrap()
                .push(("create".into(), serde_json::to_value(event).unwrap()));
            self.answer("create", event).map(|()| event.clone())
        }

        async fn patch(
            &self,
            event: &Event,
            patch: &serde_json::Value,
        ) -> Result<Event, SinkError> {
            self.calls.lock().unwrap().push((
                format!("patch {}", event.metadata.name.as_deref().unwrap_or("")),
                patch.clone(),
            ));
            self.answer("patch", event).map(|()| event.clone())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn broadcaster_creates_patches_and_retries() {
        let sink = Arc::new(FakeSink::default());
        let (recorders, mut broadcaster) = super::broadcaster(Arc::clone(&sink));
        // The series' wall clock follows tokio's paused clock.
        let (wall0, start) = (Timestamp::now(), tokio::time::Instant::now());
        broadcaster.clock =
            Arc::new(move || wall0 + SignedDuration::try_from(start.elapsed()).unwrap());
        let recorder = recorders.recorder("default-scheduler");
        let host = nix::unistd::gethostname().unwrap();
        assert_eq!(
            recorder.reporting_instance(),
            format!("default-scheduler-{}", host.to_string_lossy())
        );
        let cancel = CancellationToken::new();
        let task = tokio::spawn(broadcaster.run(cancel.clone()));
        let web = pod("web");
        // The API server is unreachable for the first create: retried ~10 s later.
        sink.script(
            "create FailedScheduling",
            Err(SinkError::Unavailable("connection refused".into())),
        );
        record(
            &recorder,
            &web,
            None,
            "Warning",
            "FailedScheduling",
            "Scheduling",
            "0/1 nodes",
        );
        tokio::time::sleep(Duration::from_secs(15)).await;
        // The repeat's patch finds no event (expired): created with its series.
        sink.script("patch FailedScheduling", Err(SinkError::NotFound));
        record(
            &recorder,
            &web,
            None,
            "Warning",
            "FailedScheduling",
            "Scheduling",
            "0/1 nodes",
        );
        record(
            &recorder,
            &web,
            None,
            "Warning",
            "FailedScheduling",
            "Scheduling",
            "0/1 nodes",
        );
        // An unsupported type is dropped by the recorder.
        record(&recorder, &web, None, "Error", "X", "Scheduling", "dropped");
        // Refused by the API server: not retried.
        sink.script(
            "create Scheduled",
            Err(SinkError::Rejected("invalid".into())),
        );
        record(
            &recorder,
            &web,
            Some("node-1"),
            "Normal",
            "Scheduled",
            "Binding",
            "assigned",
        );
        tokio::time::sleep(Duration::from_secs(60)).await;
        let calls = sink.calls.lock().unwrap().clone();
        let kinds: Vec<&str> = calls
            .iter()
            .map(|(k, _)| k.split(' ').next().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["create", "create", "patch", "create", "create"],
            "{calls:?}"
        );
        let name = calls[0].1["metadata"]["name"].as_str().unwrap().to_owned();
        assert_eq!(calls[2].0, format!("patch {name}"));
        assert_eq!(calls[2].1["series"]["count"], 2);
        assert_eq!(calls[3].1["metadata"]["name"], name.as_str());
        assert_eq!(calls[3].1["series"]["count"], 2);
        assert_eq!(calls[4].1["reason"], "Scheduled");
        assert_eq!(calls[4].1["related"]["name"], "node-1");

        // Six minutes later the series (count 3 by now) gets its final patch.
        tokio::time::sleep(FINISH_TIME * 2).await;
        let calls = sink.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 6, "{calls:?}");
        assert_eq!(calls[5].0, format!("patch {name}"));
        assert_eq!(calls[5].1["series"]["count"], 3);
        cancel.cancel();
        task.await.unwrap();
    }

    #[test]
    fn controller_events_differ_by_note_and_ignore_the_resource_version() {
        let now = at("2026-01-02T03:04:05Z");
        let event = |note: &str, rv: &str| {
            let mut p = pod("web");
            p.metadata.resource_version = Some(rv.to_owned());
            make_event(
                pod_reference(&p),
                None,
                EventDetails {
                    type_: "Normal",
                    reason: "SuccessfulCreate",
                    action: "Sync",
                    note,
                },
                ("replicaset-controller", "replicaset-controller-host"),
                now,
            )
        };
        let mut legacy = SeriesCache {
            entries: HashMap::new(),
            by_note: true,
        };
        assert!(legacy.observe(event("Created pod: a", "1"), now).is_some());
        assert!(
            legacy.observe(event("Created pod: b", "2"), now).is_some(),
            "another note, another event"
        );
        let repeat = legacy
            .observe(event("Created pod: a", "3"), now)
            .expect("first repeat");
        assert_eq!(repeat.series.map(|s| s.count), Some(2));
        // The scheduler's events.k8s.io key: the note does not count.
        let mut series = SeriesCache::default();
        assert!(series.observe(event("a", "1"), now).is_some());
        let repeat = series.observe(event("b", "1"), now).expect("first repeat");
        assert_eq!(repeat.series.map(|s| s.count), Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_retrying_event_does_not_hold_up_others() {
        let sink = Arc::new(FakeSink::default());
        let (recorders, broadcaster) = super::broadcaster(Arc::clone(&sink));
        let recorder = recorders.recorder("default-scheduler");
        for _ in 0..3 {
            sink.script(
                "create FailedScheduling",
                Err(SinkError::Unavailable("timeout".into())),
            );
        }
        let cancel = CancellationToken::new();
        let task = tokio::spawn(broadcaster.run(cancel.clone()));
        record(
            &recorder,
            &pod("a"),
            None,
            "Warning",
            "FailedScheduling",
            "Scheduling",
            "no",
        );
        record(
            &recorder,
            &pod("b"),
            Some("n1"),
            "Normal",
            "Scheduled",
            "Binding",
            "yes",
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let reasons = |sink: &FakeSink| -> Vec<String> {
            let calls = sink.calls.lock().unwrap();
            calls
                .iter()
                .map(|(_, e)| e["reason"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(reasons(&sink), ["FailedScheduling", "Scheduled"]);
        // Three failures, then the fourth try (10-12.5 s apart) succeeds.
        tokio::time::sleep(Duration::from_secs(40)).await;
        assert_eq!(
            reasons(&sink),
            [
                "FailedScheduling",
                "Scheduled",
                "FailedScheduling",
                "FailedScheduling",
                "FailedScheduling"
            ]
        );
        cancel.cancel();
        task.await.unwrap();
    }

    #[test]
    fn a_full_queue_drops_events() {
        let sink = Arc::new(FakeSink::default());
        let (recorders, mut broadcaster) = super::broadcaster(sink);
        let recorder = recorders.recorder("default-scheduler");
        for i in 0..MAX_QUEUED_EVENTS + 5 {
            recorder.eventf(pod_reference(&pod(&format!("p{i}"))), None, scheduled());
        }
        let mut queued = 0;
        while broadcaster.queue.try_recv().is_ok() {
            queued += 1;
        }
        assert_eq!(queued, MAX_QUEUED_EVENTS);
        // Without an API server, recording only logs.
        let log_only = EventRecorder::log_only("default-scheduler");
        log_only.eventf(pod_reference(&pod("p")), None, scheduled());
        assert_eq!(log_only.reporting_controller(), "default-scheduler");
    }
}
