//! The SQLite backend: one file (`<data-dir>/state.db`), WAL, durable before the reply.
//!
//! The layout follows kine (k3s's etcd shim on SQL): a `log` table holds every write as a
//! row whose `revision` (the primary key) is the store revision, with the key, the value,
//! the key's create revision, the revision of the key's previous write and a `deleted`
//! flag; a `current` table points each live key at its latest row for fast current
//! reads. Reads at a past revision (pagination) and watch catch-up read the log;
//! compaction removes the rows no read at or after the compacted revision needs.
//!
//! All writes go through one connection on a dedicated thread, committed in groups (the
//! writes waiting when a group starts share one `IMMEDIATE` transaction, each in its own
//! savepoint) with `synchronous=FULL`: a write's future completes after its group's commit
//! is on disk, so an acknowledged write survives SIGKILL or power loss. Reads use a pool
//! of read-only connections on blocking tasks. Watches get the writer's events in
//! process, so one process must own the file (as one etcd member owns its data dir).

mod cache;
mod read;
mod watch;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures::stream::BoxStream;
use tokio::sync::{broadcast, oneshot};

use super::{
    DEFAULT_MAX_OBJECT_BYTES, Event, KeyValue, ListResult, Result, Revision, Storage, StorageError,
    WatchItem, check_size,
};
use cache::ReadCache;
use read::Readers;
use writer::{Job, Writer};

/// Committed events kept for slow watchers before they re-read the log.
const EVENT_BUFFER: usize = 1024;

/// Settings of the SQLite backend.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// The largest value a write takes, in bytes ([`DEFAULT_MAX_OBJECT_BYTES`]).
    pub max_object_bytes: usize,
    /// How long a watch stays silent before it sends a progress note (1 s).
    pub progress_interval: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            progress_interval: Duration::from_secs(1),
        }
    }
}

/// A [`Storage`] in one SQLite file.
pub struct Sqlite {
    jobs: std::sync::mpsc::Sender<Job>,
    readers: Arc<Readers>,
    /// Recent current values, kept exact by the writer.
    cache: Arc<ReadCache>,
    /// The last committed revision, as the writer publishes it.
    revision: Arc<AtomicI64>,
    events: broadcast::Sender<Arc<Event>>,
    options: SqliteOptions,
}

impl Sqlite {
    /// Opens the store in the file at `path`, creating it (not its directory) if needed,
    /// and starts its writer thread. Blocking (file I/O): call it at startup.
    ///
    /// Errors: [`StorageError::Unavailable`] when the file cannot be opened or is not a
    /// store.
    pub fn open(path: &Path, options: SqliteOptions) -> Result<Sqlite> {
        let revision = Arc::new(AtomicI64::new(0));
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let cache = Arc::new(ReadCache::new(cache::DEFAULT_BUDGET));
        let writer = Writer::open(
            path,
            Arc::clone(&revision),
            events.clone(),
            Arc::clone(&cache),
        )?;
        let (jobs, queue) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || writer.run(queue))
            .map_err(|e| StorageError::Unavailable(format!("starting the SQLite writer: {e}")))?;
        Ok(Sqlite {
            jobs,
            readers: Arc::new(Readers::new(PathBuf::from(path))),
            cache,
            revision,
            events,
            options,
        })
    }

    /// Runs `write` on the writer thread and waits for its (committed) result.
    async fn write<T: Send + 'static>(
        &self,
        write: impl FnOnce(&mut Writer) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply, result) = oneshot::channel();
        let stopped = || StorageError::Unavailable("the SQLite writer has stopped".into());
        self.jobs
            .send(Box::new(move |writer: Option<&mut Writer>| {
                let result = writer.map(write);
                Box::new(move |commit: Option<&StorageError>| {
                    let _ = reply.send(match (commit, result) {
                        (Some(e), _) => Err(e.clone()),
                        (None, Some(result)) => result,
                        (None, None) => Err(stopped()),
                    });
                })
            }))
            .map_err(|_| stopped())?;
        result.await.map_err(|_| stopped())?
    }
}

#[async_trait::async_trait]
impl Storage for Sqlite {
    async fn create(&self, key: &str, value: Vec<u8>) -> Result<KeyValue> {
        check_size(&value, self.options.max_object_bytes)?;
        let key = key.to_string();
        self.write(move |w| w.create(key, value)).await
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        if let Some(value) = self.cache.get(key) {
            return Ok(value);
        }
        let epoch = self.cache.epoch();
        let owned = key.to_string();
        let value = self
            .readers
            .run(move |conn| read::get(conn, &owned))
            .await?;
        self.cache.fill(epoch, key, &value);
        Ok(value)
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        revision: Option<Revision>,
    ) -> Result<ListResult> {
        // A whole current list may come from the cache. The revision is read first: every
        // write up to it has dropped the cached lists it touched, so a cached list is the
        // collection as of that revision.
        let whole = start_after.is_none() && revision.is_none();
        if whole {
            let now = self.revision.load(Ordering::Acquire);
            if let Some(mut list) = self.cache.list(prefix)
                && (limit == 0 || list.items.len() <= limit)
            {
                list.revision = list.revision.max(now);
                return Ok(list);
            }
        }
        let epoch = whole.then(|| self.cache.epoch());
        let owned = prefix.to_string();
        let after = start_after.map(str::to_string);
        let list = self
            .readers
            .run(move |conn| read::list(conn, &owned, after.as_deref(), limit, revision))
            .await?;
        if let Some(epoch) = epoch
            && list.remaining == 0
        {
            self.cache.fill_list(epoch, prefix, &list);
        }
        Ok(list)
    }

    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<KeyValue> {
        check_size(&value, self.options.max_object_bytes)?;
        let key = key.to_string();
        self.write(move |w| w.update(key, value, expected)).await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue> {
        let key = key.to_string();
        self.write(move |w| w.delete(key, expected)).await
    }

    async fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> Result<BoxStream<'static, Result<WatchItem>>> {
        let source = watch::Source {
            readers: Arc::clone(&self.readers),
            events: self.events.clone(),
            progress_interval: self.options.progress_interval,
        };
        watch::start(source, prefix.to_string(), after).await
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.revision.load(Ordering::Acquire))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.write(move |w| w.compact(revision)).await
    }
}

/// A SQLite failure as a store error (the request may be retried).
fn db_error(e: rusqlite::Error) -> StorageError {
    StorageError::Unavailable(format!("SQLite: {e}"))
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    /// A watcher that does not read while more writes than the event buffer happen
    /// re-reads what it missed from the log and loses nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lagging_watch_catches_up_from_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let store = Sqlite::open(&dir.path().join("state.db"), SqliteOptions::default()).unwrap();
        let mut stream = store.watch("/registry/pods/", 0).await.unwrap();
        let writes = EVENT_BUFFER + watch::BUFFER + 100;
        for i in 0..writes {
            store
                .create(&format!("/registry/pods/ns/p{i}"), vec![])
                .await
                .unwrap();
        }
        let mut revisions = Vec::new();
        while revisions.len() < writes {
            let item = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
            match item.unwrap().unwrap().unwrap() {
                WatchItem::Event(event) => revisions.push(event.kv.mod_revision),
                WatchItem::Progress(_) => {}
            }
        }
        let expected: Vec<Revision> = (1..=writes as Revision).collect();
        assert_eq!(revisions, expected);
    }

    /// Concurrent writes share commits: a refused write in a group (a duplicate create)
    /// fails alone, every accepted write gets its own revision, readable once answered,
    /// and watchers see them all in revision order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_commit_in_groups() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(Sqlite::open(&dir.path().join("state.db"), SqliteOptions::default()).unwrap());
        let mut stream = store.watch("/registry/pods/", 0).await.unwrap();
        let writes = 400;
        let tasks: Vec<_> = (0..writes)
            .map(|i| {
                let store = Arc::clone(&store);
                // Every fourth write repeats the key of the one before it.
                let key = format!("/registry/pods/ns/p{}", i - usize::from(i % 4 == 3));
                tokio::spawn(async move {
                    let written = store.create(&key, i.to_string().into_bytes()).await;
                    if let Ok(kv) = &written {
                        let read = store
                            .get(&key)
                            .await
                            .unwrap()
                            .expect("read after the reply");
                        assert_eq!(read.mod_revision, kv.mod_revision);
                    }
                    written
                })
            })
            .collect();
        let mut accepted = Vec::new();
        let mut refused = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(kv) => accepted.push(kv.mod_revision),
                Err(StorageError::AlreadyExists(_)) => refused += 1,
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert_eq!(refused, writes / 4);
        accepted.sort_unstable();
        let expected: Vec<Revision> = (1..=(writes - writes / 4) as Revision).collect();
        assert_eq!(accepted, expected);
        let mut seen = Vec::new();
        while seen.len() < expected.len() {
            let item = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
            if let WatchItem::Event(event) = item.unwrap().unwrap().unwrap() {
                seen.push(event.kv.mod_revision);
            }
        }
        assert_eq!(seen, expected);
        assert_eq!(
            store.current_revision().await.unwrap(),
            expected.len() as Revision
        );
    }
}
