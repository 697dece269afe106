//! The store behind the API: a revisioned key-value space, as etcd v3 keeps it.
//!
//! Every write gets the next store-wide [`Revision`]; an object's `resourceVersion` is the
//! revision of its last write (etcd's `mod_revision`). Keys are
//! `/registry/<resource>/<namespace>/<name>` (cluster-scoped: `/registry/<resource>/<name>`),
//! values the object's JSON without `resourceVersion` (set from the revision on read).
//!
//! Two backends implement [`Storage`]: `sqlite` (default, one file, WAL, durable before the
//! reply) and `etcd` (etcd v3 through `etcd-client`; revisions are etcd's). [`watch_cache`]
//! keeps a window of recent events per resource in memory and fans them out to watchers;
//! [`open`] builds the configured backend behind it and starts the periodic compaction.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;

pub mod compactor;
pub mod etcd;
mod open;
pub mod sqlite;
pub mod watch_cache;

pub use open::{StorageConfig, open};

/// The default largest value a write takes: etcd's `--max-request-bytes` default
/// (1.5 MiB), so that both backends refuse the same objects.
pub const DEFAULT_MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// A store-wide revision (etcd's revision): each write gets the next one. 0 is "before any
/// write".
pub type Revision = i64;

/// One stored key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    /// The object's JSON (as written).
    pub value: Vec<u8>,
    /// Revision of the write that created the key.
    pub create_revision: Revision,
    /// Revision of the key's last write (its `resourceVersion`).
    pub mod_revision: Revision,
}

/// A page of keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListResult {
    /// In key order.
    pub items: Vec<KeyValue>,
    /// The store revision the page was read at (the list's `resourceVersion`).
    pub revision: Revision,
    /// Keys under the prefix after the last item, at that revision (0 when none); upstream's
    /// `remainingItemCount`.
    pub remaining: i64,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change, as a watch delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventType,
    /// The new value; for [`EventType::Deleted`] the last value, with `mod_revision` set to
    /// the revision of the delete.
    pub kv: KeyValue,
    /// The value before the change (for Modified and Deleted), so that a watch with a
    /// selector can send DELETED when an object stops matching.
    pub prev: Option<KeyValue>,
    /// The forms the API layer made of the values, shared by every watcher of the event.
    pub encodings: Encodings,
}

impl Event {
    /// An event without encodings yet.
    pub fn new(kind: EventType, kv: KeyValue, prev: Option<KeyValue>) -> Event {
        Event {
            kind,
            kv,
            prev,
            encodings: Encodings::default(),
        }
    }
}

/// Forms of an event's values (decoded objects, serialized bytes) that the API layer
/// computes on first use and shares between every watcher the event fans out to, so that
/// 100 watchers of a kind cost one decode and one serialization per event, not 100
/// (upstream's `cachingObject`, which keeps each serialization of a watch event's object).
///
/// Keys name the form, including everything it depends on (the kind and version, the
/// encoding). A copy of an event starts without forms; forms never make events unequal.
#[derive(Default)]
pub struct Encodings(Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>);

impl Encodings {
    /// The form named `key`, made by `make` if no watcher made it yet (two watchers asking
    /// at once may both make it; the first stored is kept). A stored form of another type
    /// than `T` under `key` is replaced.
    pub fn get_or_try_insert<T, E>(
        &self,
        key: &str,
        make: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<Arc<T>, E>
    where
        T: Any + Send + Sync,
    {
        if let Some(found) = self.get::<T>(key) {
            return Ok(found);
        }
        let made = Arc::new(make()?);
        let mut forms = self.forms();
        if let Some(found) = forms
            .get(key)
            .and_then(|form| Arc::clone(form).downcast::<T>().ok())
        {
            return Ok(found);
        }
        forms.insert(
            key.to_owned(),
            Arc::clone(&made) as Arc<dyn Any + Send + Sync>,
        );
        Ok(made)
    }

    fn get<T: Any + Send + Sync>(&self, key: &str) -> Option<Arc<T>> {
        let form = Arc::clone(self.forms().get(key)?);
        form.downcast::<T>().ok()
    }

    fn forms(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<dyn Any + Send + Sync>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clone for Encodings {
    fn clone(&self) -> Self {
        Encodings::default()
    }
}

impl PartialEq for Encodings {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Encodings {}

impl std::fmt::Debug for Encodings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<String> = self.forms().keys().cloned().collect();
        keys.sort();
        f.debug_tuple("Encodings").field(&keys).finish()
    }
}

/// A watch's items: changes in revision order, and progress notes (no change under the
/// prefix up to this revision) from which the REST layer writes BOOKMARK events. Events
/// are shared: a fan-out to many watchers hands each the same [`Event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchItem {
    Event(Arc<Event>),
    Progress(Revision),
}

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    #[error("key {0} not found")]
    NotFound(String),
    #[error("key {0} already exists")]
    AlreadyExists(String),
    /// The key's mod_revision is not the expected one (optimistic concurrency).
    #[error("key {key} was modified: expected revision {expected}, found {current}")]
    Conflict {
        key: String,
        expected: Revision,
        current: Revision,
    },
    /// The requested revision is older than the oldest kept: 410 Gone upstream.
    #[error("required revision {requested} has been compacted (oldest kept {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },
    /// The value is larger than the store takes (etcd's 1.5 MiB request limit by default).
    #[error("object of {size} bytes is larger than the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    /// The backend cannot be reached or failed; the request may be retried.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
}

/// Result of a store call.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// A revisioned key-value store (etcd v3 semantics). Every write is durable when its
/// future completes: an acknowledged write survives a SIGKILL of the server.
#[async_trait::async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Creates `key`. Errors: [`StorageError::AlreadyExists`], [`StorageError::TooLarge`].
    async fn create(&self, key: &str, value: Vec<u8>) -> Result<KeyValue>;

    /// The current value of `key`, or `None`.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Keys starting with `prefix` (which ends in `/`), in key order, strictly after
    /// `start_after` when given, at most `limit` (0: all), as of `revision` (`None`: now).
    /// Errors: [`StorageError::Compacted`] when `revision` is older than the oldest kept.
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        revision: Option<Revision>,
    ) -> Result<ListResult>;

    /// Replaces `key` if its mod_revision is `expected`. Errors: [`StorageError::NotFound`],
    /// [`StorageError::Conflict`], [`StorageError::TooLarge`].
    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<KeyValue>;

    /// Deletes `key`, if its mod_revision is `expected` when given. Returns the deleted
    /// value with `mod_revision` = the revision of the delete. Errors:
    /// [`StorageError::NotFound`], [`StorageError::Conflict`].
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue>;

    /// Changes under `prefix` after revision `after`, then live ones, with progress notes
    /// at least every few seconds when idle. Errors: [`StorageError::Compacted`] when
    /// `after` is older than the oldest kept revision.
    async fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> Result<BoxStream<'static, Result<WatchItem>>>;

    /// The store's current revision.
    async fn current_revision(&self) -> Result<Revision>;

    /// Forgets history before `revision` (values of older revisions and deleted keys).
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// One round of the compaction that every API server on the store shares (upstream
    /// `compact` in `staging/src/k8s.io/apiserver/pkg/storage/etcd3/compact.go`): when no
    /// other server took a turn since `round` was seen, this one takes it and compacts to
    /// `round.revision` (nothing at revision 0, the first round); else it only learns the
    /// other's turn. Returns the round to pass next time. Default, for stores only one
    /// server uses (SQLite): always this server's turn.
    async fn compact_round(&self, round: CompactionRound) -> Result<CompactionRound> {
        if round.revision > 0 {
            self.compact(round.revision).await?;
        }
        Ok(CompactionRound {
            turns: round.turns + 1,
            revision: self.current_revision().await?,
        })
    }
}

/// The shared compaction as one API server last saw it (upstream's compactor state).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionRound {
    /// Turns taken by all servers so far (on etcd: the version of the compact key).
    pub turns: i64,
    /// The store's revision then: what the next turn compacts to, so that at least one
    /// interval of history stays.
    pub revision: Revision,
}

/// The smallest key greater than every key starting with `prefix` (etcd's range end for
/// a prefix): the last character incremented, as `/registry/pods/` → `/registry/pods0`.
/// `None` when no such key exists (an empty prefix, or one made only of `char::MAX`).
pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        // The next scalar value, skipping the surrogate gap.
        let next = (last as u32 + 1..=char::MAX as u32).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// Fails with [`StorageError::TooLarge`] when `value` is over `limit` bytes.
pub(crate) fn check_size(value: &[u8], limit: usize) -> Result<()> {
    if value.len() > limit {
        return Err(StorageError::TooLarge {
            size: value.len(),
            limit,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_character() {
        assert_eq!(
            prefix_end("/registry/pods/").as_deref(),
            Some("/registry/pods0")
        );
        assert_eq!(prefix_end("a\u{d7ff}").as_deref(), Some("a\u{e000}"));
        assert_eq!(prefix_end("a\u{10ffff}").as_deref(), Some("b"));
        assert_eq!(prefix_end(""), None);
    }

    #[test]
    fn check_size_refuses_values_over_the_limit() {
        assert!(check_size(&[0; 4], 4).is_ok());
        assert_eq!(
            check_size(&[0; 5], 4),
            Err(StorageError::TooLarge { size: 5, limit: 4 })
        );
    }

    #[test]
    fn encodings_make_each_form_once_and_share_it() {
        let encodings = Encodings::default();
        let mut made = 0;
        for _ in 0..3 {
            let form = encodings.get_or_try_insert("json:v1/Pod", || {
                made += 1;
                Ok::<_, ()>(b"{}".to_vec())
            });
            assert_eq!(form.as_deref(), Ok(&b"{}".to_vec()));
        }
        assert_eq!(made, 1);
        // Another key is another form; a failed make stores nothing.
        let failed = encodings.get_or_try_insert::<Vec<u8>, _>("json:v2/Pod", || Err("bad"));
        assert_eq!(failed, Err("bad"));
        let other = encodings.get_or_try_insert("json:v2/Pod", || Ok::<_, ()>(vec![1]));
        assert_eq!(other.as_deref(), Ok(&vec![1]));
        let first = encodings.get_or_try_insert("json:v1/Pod", || Ok::<Vec<u8>, ()>(vec![]));
        let again = encodings.get_or_try_insert("json:v1/Pod", || Ok::<Vec<u8>, ()>(vec![]));
        assert!(Arc::ptr_eq(&first.unwrap(), &again.unwrap()));
        // Copies start empty and compare equal.
        let copy = encodings.clone();
        assert_eq!(format!("{copy:?}"), "Encodings([])");
        assert_eq!(copy, encodings);
    }
}
