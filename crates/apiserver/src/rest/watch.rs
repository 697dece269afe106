//! WATCH (upstream `handlers.serveWatch` over the store's Watch): newline-delimited JSON
//! events `{"type":"ADDED","object":{...}}`, one chunk per event.
//!
//! Without a resourceVersion (or with `"0"`) the current objects come first as ADDED
//! events, then the changes after the revision they were read at; with `sendInitialEvents`
//! and bookmarks allowed a BOOKMARK annotated `k8s.io/initial-events-end` marks the end
//! of them. With a resourceVersion N the changes after N come. Selectors apply to the old
//! and new state (an object leaving the selection is DELETED, one entering it ADDED).
//! A compacted N ends the stream with an ERROR event carrying a 410 Expired Status.
//!
//! An event fans out to every watcher of its kind as one shared value: the decoded
//! objects and the JSON of the object are made once per event and kept with it
//! ([`crate::storage::Encodings`], upstream's `cachingObject`); each watcher only checks
//! its selectors and frames the line.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};
use skiff_api::protobuf;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::list::{self, parse_revision};
use super::negotiation::{Format, Shape};
use super::object::meta_str;
use super::params::Params;
use super::predicate::Predicate;
use super::request::Call;
use super::store::Store;
use super::table;
use crate::error::ApiError;
use crate::storage::{Encodings, Event, EventType, KeyValue, Revision, WatchItem};

/// Upstream's `--min-request-timeout`: watches without timeoutSeconds last between this
/// and twice this.
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

/// The annotation of the bookmark that ends the initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Serves `GET .../<plural>?watch=1` (and the watch of one object when the call names
/// one). Errors before the stream starts (bad selectors, a bad resourceVersion) are
/// answered as HTTP errors; later ones as an ERROR event.
pub async fn serve(call: Call) -> Result<Response, ApiError> {
    let predicate = Predicate::new(
        call.kind.as_ref(),
        call.params.label_selector.as_deref(),
        call.params.field_selector.as_deref(),
    )?;
    let from = match call.params.resource_version.as_deref() {
        None | Some("0") => None,
        Some(rv) => Some(parse_revision(rv)?),
    };
    let timeout = match call.params.timeout_seconds {
        Some(seconds) => Duration::from_secs(seconds),
        None => MIN_REQUEST_TIMEOUT + MIN_REQUEST_TIMEOUT.mul_f64(rand::random::<f64>()),
    };
    let call_format = call.output.format;
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let shutting_down = call.state.shutting_down.clone();
    tokio::spawn(async move {
        let watch = Watch {
            call: &call,
            predicate,
            tx: &tx,
        };
        tokio::select! {
            result = watch.run(from, Instant::now() + timeout) => {
                if let Err(e) = result {
                    let frame = event_frame(call.output.format, "ERROR", &e.status_json());
                    let _ = tx.send(frame).await;
                }
            }
            // The server stops: the stream ends, and clients watch again elsewhere or
            // after the restart.
            () = shutting_down.cancelled() => {}
        }
    });
    let body =
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, Infallible>));
    let mut response = (StatusCode::OK, body).into_response();
    let content_type = match call_format {
        Format::Protobuf => "application/vnd.kubernetes.protobuf;stream=watch",
        Format::Json | Format::Yaml => "application/json",
    };
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(response)
}

/// One event of the stream: a JSON line, or in protobuf the bare `WatchEvent` message
/// after its 4-byte big-endian length (upstream's length-delimited framer).
fn event_frame(format: Format, kind: &str, object: &Value) -> Bytes {
    if format == Format::Protobuf
        && let Ok(event) = protobuf::encode_watch_event(kind, object)
    {
        let mut frame = (event.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&event);
        return Bytes::from(frame);
    }
    event_line(kind, object)
}

/// One JSON line of the stream.
fn event_line(kind: &str, object: &Value) -> Bytes {
    framed_line(kind, &serde_json::to_vec(object).unwrap_or_default())
}

/// One line of the stream around an object's JSON: `{"type":"<kind>","object":<json>}`.
fn framed_line(kind: &str, object_json: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object_json.len() + kind.len() + 24);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object_json);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// A running watch.
struct Watch<'a> {
    call: &'a Call,
    predicate: Predicate,
    tx: &'a mpsc::Sender<Bytes>,
}

/// Whether the client is gone (the stream should stop).
struct Closed;

impl Watch<'_> {
    fn store(&self) -> Store<'_> {
        self.call.store()
    }

    /// Sends one event; `Err(Closed)` when the client went away.
    async fn send(&self, kind: &str, object: Value) -> Result<(), Closed> {
        let object = match (kind, self.call.output.shape) {
            ("ADDED" | "MODIFIED" | "DELETED", Shape::Table) => {
                self.table(&object).unwrap_or(object)
            }
            _ => object,
        };
        self.send_line(event_frame(self.call.output.format, kind, &object))
            .await
    }

    /// Sends a change of the store. In JSON the object's JSON is the event's shared one
    /// (made by the first watcher that sends it); tables and protobuf are made per watcher.
    async fn send_change(&self, kind: &str, event: &Event, object: &Value) -> Result<(), Stop> {
        let output = self.call.output;
        if output.shape == Shape::Table || output.format == Format::Protobuf {
            return Ok(self.send(kind, object.clone()).await?);
        }
        let key = format!("json:{}", self.form());
        let json = event.encodings.get_or_try_insert(&key, || {
            serde_json::to_vec(object).map_err(ApiError::internal)
        })?;
        Ok(self.send_line(framed_line(kind, &json)).await?)
    }

    async fn send_line(&self, line: Bytes) -> Result<(), Closed> {
        self.tx.send(line).await.map_err(|_| Closed)
    }

    /// The watch's object as a one-row Table.
    fn table(&self, object: &Value) -> Result<Value, ApiError> {
        table::table(
            self.call.kind.as_ref(),
            std::slice::from_ref(object),
            json!({}),
            self.call.params.include_object,
        )
    }

    /// What the forms of an event's objects depend on: the kind and version served.
    fn form(&self) -> String {
        let info = self.call.kind.info();
        format!("{}/{}", info.api_version(), info.kind)
    }

    /// An event's value (`side` names it: `new` or `old`) decoded as the watch's kind,
    /// shared between the event's watchers: made at once when the kind converts without
    /// waiting, else by the first watcher that needs it (one conversion webhook call per
    /// event and version, its outcome shared, an error included); the others wait for it.
    async fn decoded(
        &self,
        store: &Store<'_>,
        encodings: &Encodings,
        side: &str,
        kv: &KeyValue,
    ) -> Result<Arc<Decoded>, ApiError> {
        let key = format!("{side}:{}", self.form());
        let Ok(decoded) = encodings.get_or_try_insert(&key, || {
            Ok::<_, Infallible>(match store.decode_now(kv) {
                Some(done) => Decoded::new_with(Some(done)),
                None => Decoded::new(),
            })
        });
        decoded
            .get_or_init(|| store.decode(kv))
            .await
            .as_ref()
            .map_err(Clone::clone)?;
        Ok(decoded)
    }

    /// A BOOKMARK object: the kind with only `metadata.resourceVersion` (and annotations).
    fn bookmark(&self, revision: Revision, annotations: Option<Value>) -> Value {
        let info = self.call.kind.info();
        let mut metadata = json!({ "resourceVersion": revision.to_string() });
        if let Some(annotations) = annotations {
            metadata["annotations"] = annotations;
        }
        json!({ "kind": info.kind, "apiVersion": info.api_version(), "metadata": metadata })
    }

    fn selects(&self, object: &Value) -> Result<bool, ApiError> {
        if let Some(name) = &self.call.name
            && meta_str(object, "name") != Some(name.as_str())
        {
            return Ok(false);
        }
        self.predicate.matches(self.call.kind.as_ref(), object)
    }

    async fn run(&self, from: Option<Revision>, deadline: Instant) -> Result<(), ApiError> {
        match self.stream(from, deadline).await {
            Ok(()) | Err(Stop::Closed) => Ok(()),
            Err(Stop::Error(e)) => Err(e),
        }
    }

    async fn stream(&self, from: Option<Revision>, deadline: Instant) -> Result<(), Stop> {
        let params = &self.call.params;
        let store = self.store();
        let namespace = self.call.namespace();
        let initial = match from {
            None => params.send_initial_events != Some(false),
            Some(_) => params.send_initial_events == Some(true),
        };
        let mut revision = match from {
            Some(rv) => rv,
            None => store
                .state
                .storage
                .current_revision()
                .await
                .map_err(|e| store.error(e, ""))?,
        };
        if initial {
            let page = list::page(&store, namespace, &Params::default(), &self.predicate).await?;
            for object in page.items {
                if self.selects(&object)? {
                    self.send("ADDED", object).await?;
                }
            }
            revision = page.revision;
            if params.send_initial_events == Some(true) && params.allow_watch_bookmarks {
                let end = self.bookmark(revision, Some(json!({ INITIAL_EVENTS_END: "true" })));
                self.send("BOOKMARK", end).await?;
            }
        }
        let prefix = store.prefix(namespace);
        let mut items = store
            .state
            .storage
            .watch(&prefix, revision)
            .await
            .map_err(|e| store.error(e, ""))?;
        let interval = store.state.bookmark_interval;
        let mut last_bookmark = Instant::now();
        loop {
            let item = tokio::select! {
                item = items.next() => item,
                () = tokio::time::sleep_until(deadline) => return Ok(()),
                () = self.tx.closed() => return Ok(()),
            };
            match item {
                None => return Ok(()),
                Some(Err(e)) => return Err(store.error(e, "").into()),
                Some(Ok(WatchItem::Progress(revision))) => {
                    if params.allow_watch_bookmarks && last_bookmark.elapsed() >= interval {
                        self.send("BOOKMARK", self.bookmark(revision, None)).await?;
                        last_bookmark = Instant::now();
                    }
                }
                Some(Ok(WatchItem::Event(event))) => {
                    if let Some((kind, decoded)) = self.translate(&store, &event).await? {
                        let object = object(&decoded, &store, &event.kv).await?;
                        self.send_change(kind, &event, object).await?;
                    }
                }
            }
        }
    }

    /// The event a watcher with selectors sees for a change, if any, and its object.
    async fn translate(
        &self,
        store: &Store<'_>,
        event: &Event,
    ) -> Result<Option<(&'static str, Arc<Decoded>)>, ApiError> {
        let new = self
            .decoded(store, &event.encodings, "new", &event.kv)
            .await?;
        let new_selected = self.selects(object(&new, store, &event.kv).await?)?;
        let kind = match event.kind {
            EventType::Added => new_selected.then_some("ADDED"),
            EventType::Deleted => new_selected.then_some("DELETED"),
            EventType::Modified => {
                let old_selected = match &event.prev {
                    // Without selectors the old state is selected when the new one is (the
                    // same key, the same name): no need to decode (convert) it.
                    Some(_) if self.predicate.is_everything() => new_selected,
                    Some(prev) => {
                        let old = self.decoded(store, &event.encodings, "old", prev).await?;
                        self.selects(object(&old, store, prev).await?)?
                    }
                    None => false,
                };
                match (old_selected, new_selected) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
        };
        Ok(kind.map(|kind| (kind, new)))
    }
}

/// An event's object as one kind and version, shared by the event's watchers: the
/// decoded object or the conversion's error, set once ([`Watch::decoded`]).
type Decoded = tokio::sync::OnceCell<Result<Value, ApiError>>;

/// The object of a [`Decoded`] that [`Watch::decoded`] returned (set by then: `store`
/// and `kv` only decode again should it not be).
async fn object<'d>(
    decoded: &'d Decoded,
    store: &Store<'_>,
    kv: &KeyValue,
) -> Result<&'d Value, ApiError> {
    decoded
        .get_or_init(|| store.decode(kv))
        .await
        .as_ref()
        .map_err(Clone::clone)
}

/// Why a watch stream stopped early.
enum Stop {
    Closed,
    Error(ApiError),
}

impl From<Closed> for Stop {
    fn from(_: Closed) -> Self {
        Stop::Closed
    }
}

impl From<ApiError> for Stop {
    fn from(e: ApiError) -> Self {
        Stop::Error(e)
    }
}
