//! The watch cache: one backend watch per resource, fanned out to many watchers (the
//! upstream API server's `cacher`, `staging/src/k8s.io/apiserver/pkg/storage/cacher`).
//!
//! For each resource prefix (`/registry/<resource>/`) a [`WatchCache`] keeps one backend
//! watch and a window of the last `capacity` events (shared as `Arc`s). A watch from a
//! revision inside the window gets the window's later events, then live ones, through
//! its own bounded channel; a watcher whose channel fills up (a consumer too slow to keep
//! up) is closed — its stream ends and the client watches again from its last revision —
//! so it never holds the cache back. A watch from before the window is served by the
//! backend directly, which replays its history or answers [`StorageError::Compacted`]
//! (upstream's 410 "too old resource version"). Watchers that received nothing for an
//! interval get a progress note at the cache's latest revision (for BOOKMARK events).
//!
//! LIST does not go through the cache: every read goes to the backend, which serves
//! current and past revisions consistently (upstream's behaviour for lists with a
//! resourceVersion other than "0" or unset before consistent reads from the cache).
//! SQLite reads are local; an etcd read is one range request.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_stream::wrappers::ReceiverStream;

use super::{
    CompactionRound, Event, KeyValue, ListResult, Result, Revision, Storage, StorageError,
    WatchItem,
};

/// Settings of the watch cache.
#[derive(Debug, Clone)]
pub struct WatchCacheOptions {
    /// Events kept per resource (1000).
    pub capacity: usize,
    /// Items buffered per watcher before it is closed as too slow (100).
    pub watcher_buffer: usize,
    /// How long a watcher receives nothing before it gets a progress note (1 s).
    pub progress_interval: Duration,
    /// Wait before re-establishing a failed backend watch (1 s).
    pub retry_interval: Duration,
}

impl Default for WatchCacheOptions {
    fn default() -> Self {
        WatchCacheOptions {
            capacity: 1000,
            watcher_buffer: 100,
            progress_interval: Duration::from_secs(1),
            retry_interval: Duration::from_secs(1),
        }
    }
}

/// A [`Storage`] that serves watches from per-resource caches and everything else from
/// its backend.
pub struct WatchCache {
    backend: Arc<dyn Storage>,
    options: WatchCacheOptions,
    resources: tokio::sync::Mutex<HashMap<String, Arc<Resource>>>,
}

impl WatchCache {
    pub fn new(backend: Arc<dyn Storage>, options: WatchCacheOptions) -> WatchCache {
        WatchCache {
            backend,
            options,
            resources: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The backend behind the cache.
    pub fn backend(&self) -> &Arc<dyn Storage> {
        &self.backend
    }

    /// The latest revision the cache of `prefix`'s resource has seen (events and progress
    /// notes), or `None` when nothing watches that resource yet.
    pub async fn latest_revision(&self, prefix: &str) -> Option<Revision> {
        let resource = resource_prefix(prefix)?;
        let resources = self.resources.lock().await;
        Some(resources.get(resource)?.state().latest)
    }

    /// The cache of `resource`, started (its backend watch from the current revision) on
    /// first use.
    async fn resource(&self, resource: &str) -> Result<Arc<Resource>> {
        let mut resources = self.resources.lock().await;
        if let Some(cache) = resources.get(resource) {
            return Ok(Arc::clone(cache));
        }
        let revision = self.backend.current_revision().await?;
        let stream = self.backend.watch(resource, revision).await?;
        let cache = Arc::new(Resource {
            state: Mutex::new(State {
                events: VecDeque::with_capacity(self.options.capacity),
                window_start: revision,
                latest: revision,
                watchers: Vec::new(),
            }),
        });
        let feed = Feed {
            cache: Arc::downgrade(&cache),
            prefix: resource.to_string(),
            backend: Arc::clone(&self.backend),
            options: self.options.clone(),
        };
        tokio::spawn(feed.run(stream));
        resources.insert(resource.to_string(), Arc::clone(&cache));
        Ok(cache)
    }
}

#[async_trait::async_trait]
impl Storage for WatchCache {
    async fn create(&self, key: &str, value: Vec<u8>) -> Result<KeyValue> {
        self.backend.create(key, value).await
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.backend.get(key).await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        revision: Option<Revision>,
    ) -> Result<ListResult> {
        self.backend
            .list(prefix, start_after, limit, revision)
            .await
    }

    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<KeyValue> {
        self.backend.update(key, value, expected).await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue> {
        self.backend.delete(key, expected).await
    }

    /// From the resource's cache when `after` is inside its window, else from the backend.
    async fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> Result<BoxStream<'static, Result<WatchItem>>> {
        let Some(resource) = resource_prefix(prefix) else {
            return self.backend.watch(prefix, after).await;
        };
        let cache = self.resource(resource).await?;
        match cache.add_watcher(prefix, after, self.options.watcher_buffer) {
            Some(stream) => Ok(stream),
            None => self.backend.watch(prefix, after).await,
        }
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.backend.current_revision().await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.backend.compact(revision).await
    }

    async fn compact_round(&self, round: CompactionRound) -> Result<CompactionRound> {
        self.backend.compact_round(round).await
    }
}

/// `/registry/<resource>/` for a prefix or key below it (`/registry/pods/default/`), the
/// unit the cache keeps; `None` for prefixes above a resource.
fn resource_prefix(prefix: &str) -> Option<&str> {
    let rest = prefix.strip_prefix("/registry/")?;
    let end = rest.find('/')?;
    (end > 0).then(|| &prefix[.."/registry/".len() + end + 1])
}

/// What a watcher's channel carries.
enum Item {
    Event(Arc<Event>),
    Progress(Revision),
}

/// One resource's cache.
struct Resource {
    state: Mutex<State>,
}

struct State {
    /// The last events, in revision order.
    events: VecDeque<Arc<Event>>,
    /// Every event after this revision is in `events`.
    window_start: Revision,
    /// Every event up to this revision has been received from the backend.
    latest: Revision,
    watchers: Vec<Watcher>,
}

struct Watcher {
    /// The watched prefix, at or below the resource's.
    prefix: String,
    tx: mpsc::Sender<Item>,
    /// Nothing was sent to it since the last progress tick.
    idle: bool,
}

impl Resource {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A watch of `prefix` after `after` from the cache, or `None` when `after` is before
    /// the window.
    fn add_watcher(
        &self,
        prefix: &str,
        after: Revision,
        buffer: usize,
    ) -> Option<BoxStream<'static, Result<WatchItem>>> {
        let mut state = self.state();
        if after < state.window_start {
            return None;
        }
        let backlog: Vec<Item> = state
            .events
            .iter()
            .filter(|event| event.kv.mod_revision > after && event.kv.key.starts_with(prefix))
            .map(|event| Item::Event(Arc::clone(event)))
            .collect();
        let (tx, rx) = mpsc::channel(buffer.max(1));
        state.watchers.push(Watcher {
            prefix: prefix.to_string(),
            tx,
            idle: true,
        });
        drop(state);
        let items = stream::iter(backlog)
            .chain(ReceiverStream::new(rx))
            .filter_map(move |item| {
                // Live items can precede a future `after`: the watch starts after it.
                let item = match item {
                    Item::Event(event) if event.kv.mod_revision > after => {
                        Some(Ok(WatchItem::Event(event)))
                    }
                    Item::Progress(revision) if revision >= after => {
                        Some(Ok(WatchItem::Progress(revision)))
                    }
                    _ => None,
                };
                std::future::ready(item)
            });
        Some(Box::pin(items))
    }
}

impl State {
    /// Adds an event to the window and sends it (shared, not copied) to the watchers of its
    /// key, closing the ones that cannot take it.
    fn push(&mut self, event: Arc<Event>, capacity: usize) {
        let revision = event.kv.mod_revision;
        self.events.push_back(Arc::clone(&event));
        while self.events.len() > capacity {
            if let Some(dropped) = self.events.pop_front() {
                self.window_start = dropped.kv.mod_revision;
            }
        }
        self.latest = self.latest.max(revision);
        self.watchers.retain_mut(|watcher| {
            if !event.kv.key.starts_with(&watcher.prefix) {
                return !watcher.tx.is_closed();
            }
            watcher.idle = false;
            // Full: the watcher fell too far behind; dropping its sender ends its stream.
            watcher.tx.try_send(Item::Event(Arc::clone(&event))).is_ok()
        });
    }

    /// Sends a progress note to the watchers that got nothing since the last call.
    fn tick(&mut self) {
        let latest = self.latest;
        self.watchers.retain_mut(|watcher| {
            let idle = std::mem::replace(&mut watcher.idle, true);
            if !idle {
                return true;
            }
            // A full channel already has items to deliver: skip the note, keep the watcher.
            !matches!(
                watcher.tx.try_send(Item::Progress(latest)),
                Err(TrySendError::Closed(_))
            )
        });
    }

    /// Starts over at `revision` after the backend lost the history since `latest`:
    /// the window is emptied and every watcher closed (they watch again).
    fn reset(&mut self, revision: Revision) {
        self.events.clear();
        self.watchers.clear();
        self.window_start = revision;
        self.latest = revision;
    }
}

/// The task that feeds one resource's cache from its backend watch, re-establishing the
/// watch when it fails; it ends when the cache is dropped.
struct Feed {
    cache: Weak<Resource>,
    prefix: String,
    backend: Arc<dyn Storage>,
    options: WatchCacheOptions,
}

impl Feed {
    async fn run(self, mut stream: BoxStream<'static, Result<WatchItem>>) {
        let mut ticks = tokio::time::interval(self.options.progress_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.reset();
        loop {
            let item = tokio::select! {
                item = stream.next() => item,
                _ = ticks.tick() => {
                    let Some(cache) = self.cache.upgrade() else { return };
                    cache.state().tick();
                    continue;
                }
            };
            let Some(cache) = self.cache.upgrade() else {
                return;
            };
            match item {
                Some(Ok(WatchItem::Event(event))) => {
                    cache.state().push(event, self.options.capacity);
                }
                Some(Ok(WatchItem::Progress(revision))) => {
                    let mut state = cache.state();
                    state.latest = state.latest.max(revision);
                }
                failed => {
                    match failed {
                        Some(Err(e)) => {
                            tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: backend watch failed")
                        }
                        _ => {
                            tracing::warn!(prefix = %self.prefix, "watch cache: backend watch ended")
                        }
                    }
                    drop(cache);
                    match self.rewatch().await {
                        Some(next) => stream = next,
                        None => return,
                    }
                }
            }
        }
    }

    /// A new backend watch from the cache's latest revision; after a compaction that
    /// removed the revisions since then, from the current revision with an emptied cache.
    /// Retries while the backend is unavailable; `None` when the cache is gone.
    async fn rewatch(&self) -> Option<BoxStream<'static, Result<WatchItem>>> {
        loop {
            tokio::time::sleep(self.options.retry_interval).await;
            let latest = self.cache.upgrade()?.state().latest;
            match self.backend.watch(&self.prefix, latest).await {
                Ok(stream) => return Some(stream),
                Err(StorageError::Compacted { .. }) => {
                    let Ok(revision) = self.backend.current_revision().await else {
                        continue;
                    };
                    let Ok(stream) = self.backend.watch(&self.prefix, revision).await else {
                        continue;
                    };
                    self.cache.upgrade()?.state().reset(revision);
                    return Some(stream);
                }
                Err(e) => {
                    tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: cannot watch the backend");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::EventType;
    use crate::storage::sqlite::{Sqlite, SqliteOptions};

    const WAIT: Duration = Duration::from_secs(10);

    /// A cache on a fresh SQLite store (kept alive by the returned directory).
    fn cache(options: WatchCacheOptions) -> (WatchCache, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = Sqlite::open(&dir.path().join("state.db"), SqliteOptions::default());
        (WatchCache::new(Arc::new(sqlite.unwrap()), options), dir)
    }

    async fn next(stream: &mut BoxStream<'static, Result<WatchItem>>) -> Option<WatchItem> {
        match tokio::time::timeout(WAIT, stream.next()).await {
            Ok(item) => item.map(|item| item.unwrap()),
            Err(_) => panic!("no watch item within {WAIT:?}"),
        }
    }

    async fn next_event(stream: &mut BoxStream<'static, Result<WatchItem>>) -> Arc<Event> {
        loop {
            match next(stream).await {
                Some(WatchItem::Event(event)) => return event,
                Some(WatchItem::Progress(_)) => {}
                None => panic!("watch ended"),
            }
        }
    }

    #[test]
    fn resource_prefix_is_the_first_segment_after_registry() {
        assert_eq!(resource_prefix("/registry/pods/"), Some("/registry/pods/"));
        assert_eq!(
            resource_prefix("/registry/pods/ns/"),
            Some("/registry/pods/")
        );
        assert_eq!(
            resource_prefix("/registry/pods/ns/a"),
            Some("/registry/pods/")
        );
        assert_eq!(resource_prefix("/registry/"), None);
        assert_eq!(resource_prefix("/registry//x/"), None);
        assert_eq!(resource_prefix("/other/pods/"), None);
    }

    #[tokio::test]
    async fn fans_out_every_event_to_many_watchers() {
        let (cache, _dir) = cache(WatchCacheOptions::default());
        let start = cache.current_revision().await.unwrap();
        let mut watchers = Vec::new();
        for i in 0..100 {
            // Half watch the resource, half one namespace.
            let prefix = if i % 2 == 0 {
                "/registry/pods/"
            } else {
                "/registry/pods/a/"
            };
            watchers.push(cache.watch(prefix, start).await.unwrap());
        }
        assert_eq!(cache.resources.lock().await.len(), 1);
        let a = cache
            .create("/registry/pods/a/x", b"1".to_vec())
            .await
            .unwrap();
        let b = cache
            .create("/registry/pods/b/y", b"2".to_vec())
            .await
            .unwrap();
        let mut first: Option<Arc<Event>> = None;
        for (i, watcher) in watchers.iter_mut().enumerate() {
            let event = next_event(watcher).await;
            assert_eq!(
                (event.kind, event.kv.clone()),
                (EventType::Added, a.clone())
            );
            // Every watcher holds the same event, not a copy of it.
            let first = first.get_or_insert_with(|| Arc::clone(&event));
            assert!(Arc::ptr_eq(first, &event), "watcher {i} got a copy");
            if i % 2 == 0 {
                assert_eq!(next_event(watcher).await.kv, b);
            }
        }
        let latest = cache.latest_revision("/registry/pods/a/").await;
        assert_eq!(latest, Some(b.mod_revision));
        assert_eq!(cache.latest_revision("/registry/nodes/").await, None);
    }

    #[tokio::test]
    async fn closes_a_watcher_that_falls_behind_and_keeps_the_others() {
        let options = WatchCacheOptions {
            watcher_buffer: 4,
            // No progress notes to take buffer space.
            progress_interval: Duration::from_secs(3600),
            ..WatchCacheOptions::default()
        };
        let (cache, _dir) = cache(options);
        let start = cache.current_revision().await.unwrap();
        let mut slow = cache.watch("/registry/pods/", start).await.unwrap();
        let mut fast = cache.watch("/registry/pods/", start).await.unwrap();
        let mut written = Vec::new();
        for i in 0..10 {
            let key = format!("/registry/pods/ns/p{i}");
            written.push(cache.create(&key, vec![i]).await.unwrap());
            assert_eq!(next_event(&mut fast).await.kv, written[i as usize]);
        }
        // The slow watcher gets what it had buffered, then its stream ends.
        for kv in &written[..4] {
            assert_eq!(&next_event(&mut slow).await.kv, kv);
        }
        assert_eq!(next(&mut slow).await, None);
        let state = cache.resource("/registry/pods/").await.unwrap();
        assert_eq!(state.state().watchers.len(), 1);
    }

    #[tokio::test]
    async fn serves_its_window_and_sends_older_watches_to_the_backend() {
        let options = WatchCacheOptions {
            capacity: 5,
            ..WatchCacheOptions::default()
        };
        let (cache, _dir) = cache(options);
        let start = cache.current_revision().await.unwrap();
        let mut first = cache.watch("/registry/pods/", start).await.unwrap();
        let mut written = Vec::new();
        for i in 0..10 {
            let key = format!("/registry/pods/ns/p{i}");
            written.push(cache.create(&key, vec![i]).await.unwrap());
        }
        for kv in &written {
            assert_eq!(&next_event(&mut first).await.kv, kv);
        }
        let resource = cache.resource("/registry/pods/").await.unwrap();
        assert_eq!(resource.state().window_start, written[4].mod_revision);

        // Inside the window: from the cache (no new watcher on the backend needed).
        let mut inside = cache
            .watch("/registry/pods/ns/", written[6].mod_revision)
            .await;
        let inside = inside.as_mut().unwrap();
        for kv in &written[7..] {
            assert_eq!(&next_event(inside).await.kv, kv);
        }
        assert_eq!(resource.state().watchers.len(), 2);

        // Before the window: the backend replays its log, until it is compacted.
        let mut before = cache
            .watch("/registry/pods/", written[1].mod_revision)
            .await;
        assert_eq!(next_event(before.as_mut().unwrap()).await.kv, written[2]);
        assert_eq!(resource.state().watchers.len(), 2);
        cache.compact(written[8].mod_revision).await.unwrap();
        let compacted = cache
            .watch("/registry/pods/", written[1].mod_revision)
            .await;
        assert!(matches!(compacted, Err(StorageError::Compacted { .. })));
    }

    #[tokio::test]
    async fn sends_progress_to_idle_watchers() {
        let options = WatchCacheOptions {
            progress_interval: Duration::from_millis(100),
            ..WatchCacheOptions::default()
        };
        let (cache, _dir) = cache(options);
        let start = cache.current_revision().await.unwrap();
        let mut stream = cache.watch("/registry/pods/", start).await.unwrap();
        // Another resource's write: the watcher sees its revision in a progress note.
        let other = cache.create("/registry/nodes/n", vec![]).await.unwrap();
        loop {
            match next(&mut stream).await {
                Some(WatchItem::Progress(revision)) if revision == other.mod_revision => break,
                Some(WatchItem::Progress(revision)) => assert!(revision >= start),
                item => panic!("unexpected {item:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_watch_from_a_future_revision_starts_after_it() {
        let (cache, _dir) = cache(WatchCacheOptions::default());
        let start = cache.current_revision().await.unwrap();
        let mut stream = cache.watch("/registry/pods/", start + 2).await.unwrap();
        for i in 0..3 {
            cache
                .create(&format!("/registry/pods/ns/p{i}"), vec![])
                .await
                .unwrap();
        }
        let event = next_event(&mut stream).await;
        assert_eq!(event.kv.mod_revision, start + 3);
    }
}
