//! The one writer: a connection on its own thread. Writes are committed in groups (etcd's
//! batched backend commits, SQLite's own advice for many small writes): the writer takes
//! every write that waits, up to [`MAX_BATCH`], runs each in its own savepoint of one
//! `IMMEDIATE` transaction, and commits once (WAL fsync'd, `synchronous=FULL`). Only then
//! are the writes answered and their events published to the in-process watchers, in
//! revision order. A write that fails is rolled back to its savepoint alone; a commit that
//! fails fails every write of the group, and none of their events is published.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use rusqlite::{Connection, params};
use tokio::sync::broadcast;

use super::cache::ReadCache;
use super::{db_error, read};
use crate::storage::{Event, EventType, KeyValue, Result, Revision, StorageError};

/// A write to run on the writer thread, inside the group's transaction (`None`: the group
/// could not begin, so the write is not run). It returns what to do once the group's
/// commit is known.
pub(super) type Job = Box<dyn FnOnce(Option<&mut Writer>) -> Reply + Send>;

/// Answers one write after its group's commit (given the commit's error, if any).
pub(super) type Reply = Box<dyn FnOnce(Option<&StorageError>) + Send>;

/// The most writes committed together: bounds the latency the first write of a group waits
/// for the last one.
const MAX_BATCH: usize = 256;

/// The tables: `log` holds every kept write (kine's layout: a delete is a row with
/// `deleted = 1` carrying the last value), `current` the revision of each live key's
/// latest write, `meta` the compacted revision. With `AUTOINCREMENT` the revision
/// counter (in `sqlite_sequence`) never goes back, whatever rows compaction removes.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS log (
    revision INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    create_revision INTEGER NOT NULL,
    prev_revision INTEGER NOT NULL,
    deleted INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS log_key_revision ON log (key, revision);
CREATE TABLE IF NOT EXISTS current (
    key TEXT PRIMARY KEY,
    revision INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
";

/// The writer's connection and what it publishes.
pub(super) struct Writer {
    conn: Connection,
    /// The revision of the last write, committed or in the open group.
    revision: Revision,
    /// The last committed revision, as published to readers.
    published: Arc<AtomicI64>,
    events: broadcast::Sender<Arc<Event>>,
    /// The events of the open group, published after its commit.
    pending: Vec<Event>,
    /// The read cache, told of each committed group before its writes are answered.
    cache: Arc<ReadCache>,
}

impl Writer {
    /// Opens (creating if needed) the database at `path` in WAL mode with
    /// `synchronous=FULL`, and creates the tables.
    pub(super) fn open(
        path: &Path,
        published: Arc<AtomicI64>,
        events: broadcast::Sender<Arc<Event>>,
        cache: Arc<ReadCache>,
    ) -> Result<Writer> {
        let conn = Connection::open(path).map_err(db_error)?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(db_error)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StorageError::Unavailable(format!(
                "SQLite: {} cannot use the WAL journal (mode {mode})",
                path.display()
            )));
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(db_error)?;
        conn.busy_timeout(read::BUSY_TIMEOUT).map_err(db_error)?;
        conn.execute_batch(SCHEMA).map_err(db_error)?;
        let revision = read::current_revision(&conn)?;
        published.store(revision, Ordering::Release);
        Ok(Writer {
            conn,
            revision,
            published,
            events,
            pending: Vec::new(),
            cache,
        })
    }

    /// Runs jobs, a group at a time, until every sender is gone.
    pub(super) fn run(mut self, jobs: std::sync::mpsc::Receiver<Job>) {
        let mut replies: Vec<Reply> = Vec::with_capacity(MAX_BATCH);
        while let Ok(first) = jobs.recv() {
            let committed = self.revision;
            if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
                let e = db_error(e);
                first(None)(Some(&e));
                continue;
            }
            replies.push(first(Some(&mut self)));
            while replies.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(job) => replies.push(job(Some(&mut self))),
                    Err(_) => break,
                }
            }
            match self.conn.execute_batch("COMMIT").map_err(db_error) {
                Ok(()) => {
                    self.cache.committed(&self.pending);
                    self.published.store(self.revision, Ordering::Release);
                    for reply in replies.drain(..) {
                        reply(None);
                    }
                    self.publish();
                }
                Err(e) => {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    self.cache.clear();
                    self.abandon(committed);
                    for reply in replies.drain(..) {
                        reply(Some(&e));
                    }
                }
            }
        }
    }

    /// Forgets a group that did not commit: its revisions and events.
    fn abandon(&mut self, committed: Revision) {
        self.revision = committed;
        self.pending.clear();
    }

    /// Sends the committed group's events to the watchers, in revision order.
    fn publish(&mut self) {
        if self.events.receiver_count() == 0 {
            // Nobody watches.
            self.pending.clear();
            return;
        }
        for event in self.pending.drain(..) {
            let _ = self.events.send(Arc::new(event));
        }
    }

    pub(super) fn create(&mut self, key: String, value: Vec<u8>) -> Result<KeyValue> {
        self.apply(key, |key, current, revision| {
            if current.is_some() {
                return Err(StorageError::AlreadyExists(key));
            }
            let kv = KeyValue {
                key,
                value,
                create_revision: revision,
                mod_revision: revision,
            };
            Ok(Event::new(EventType::Added, kv, None))
        })
    }

    pub(super) fn update(
        &mut self,
        key: String,
        value: Vec<u8>,
        expected: Revision,
    ) -> Result<KeyValue> {
        self.apply(key, |key, current, revision| {
            let prev = expect(key, current, Some(expected))?;
            let kv = KeyValue {
                key: prev.key.clone(),
                value,
                create_revision: prev.create_revision,
                mod_revision: revision,
            };
            Ok(Event::new(EventType::Modified, kv, Some(prev)))
        })
    }

    pub(super) fn delete(&mut self, key: String, expected: Option<Revision>) -> Result<KeyValue> {
        self.apply(key, |key, current, revision| {
            let prev = expect(key, current, expected)?;
            let kv = KeyValue {
                mod_revision: revision,
                ..prev.clone()
            };
            Ok(Event::new(EventType::Deleted, kv, Some(prev)))
        })
    }

    /// Removes history before `revision`: every row older than it but the latest version
    /// (at `revision`) of each key that was live then, so that reads at `revision` and
    /// watches after it still work. Compacting to an already compacted revision does
    /// nothing; a revision after the current one is refused, as etcd does.
    pub(super) fn compact(&mut self, revision: Revision) -> Result<()> {
        if revision > self.revision {
            return Err(StorageError::Unavailable(format!(
                "cannot compact to revision {revision}: it is after the current revision {}",
                self.revision
            )));
        }
        self.in_savepoint(|conn| Self::compact_in(conn, revision))
    }

    fn compact_in(tx: &Connection, revision: Revision) -> Result<()> {
        if revision <= read::compacted_revision(tx)? {
            return Ok(());
        }
        tx.execute(
            "DELETE FROM log WHERE revision < ?1 AND (deleted = 1 OR EXISTS (
                 SELECT 1 FROM log AS newer WHERE newer.key = log.key
                     AND newer.revision > log.revision AND newer.revision <= ?1))",
            [revision],
        )
        .map_err(db_error)?;
        tx.execute(
            "INSERT OR REPLACE INTO meta (name, value) VALUES ('compacted', ?1)",
            [revision],
        )
        .map_err(db_error)?;
        Ok(())
    }

    /// One write of `key` in the open group: `decide` turns the key's current value and
    /// the next revision into the write's event (or refuses), which is recorded in the
    /// group's transaction and published after its commit.
    fn apply(
        &mut self,
        key: String,
        decide: impl FnOnce(String, Option<KeyValue>, Revision) -> Result<Event>,
    ) -> Result<KeyValue> {
        let revision = self.revision + 1;
        let event = self.in_savepoint(|conn| {
            let current = read::get(conn, &key)?;
            let event = decide(key, current, revision)?;
            record(conn, &event)?;
            Ok(event)
        })?;
        self.revision = revision;
        let kv = event.kv.clone();
        self.pending.push(event);
        Ok(kv)
    }

    /// Runs `write` in a savepoint of the open group: on error, what it wrote is undone
    /// and the rest of the group stands.
    fn in_savepoint<T>(&mut self, write: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.conn
            .execute_batch("SAVEPOINT write")
            .map_err(db_error)?;
        let result = write(&self.conn);
        let end = match result {
            Ok(_) => "RELEASE write",
            Err(_) => "ROLLBACK TO write; RELEASE write",
        };
        self.conn.execute_batch(end).map_err(db_error)?;
        result
    }
}

/// The current value of `key` if it exists and (when given) was last written at
/// `expected`.
fn expect(key: String, current: Option<KeyValue>, expected: Option<Revision>) -> Result<KeyValue> {
    let current = current.ok_or_else(|| StorageError::NotFound(key.clone()))?;
    match expected {
        Some(expected) if expected != current.mod_revision => Err(StorageError::Conflict {
            key,
            expected,
            current: current.mod_revision,
        }),
        _ => Ok(current),
    }
}

/// Appends `event` to the log and points `current` at it (or drops the key).
fn record(tx: &Connection, event: &Event) -> Result<()> {
    let kv = &event.kv;
    let deleted = event.kind == EventType::Deleted;
    tx.execute(
        "INSERT INTO log (revision, key, value, create_revision, prev_revision, deleted)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            kv.mod_revision,
            kv.key,
            kv.value,
            kv.create_revision,
            event.prev.as_ref().map_or(0, |prev| prev.mod_revision),
            deleted
        ],
    )
    .map_err(db_error)?;
    let pointed = if deleted {
        tx.execute("DELETE FROM current WHERE key = ?1", [&kv.key])
    } else {
        tx.execute(
            "INSERT OR REPLACE INTO current (key, revision) VALUES (?1, ?2)",
            params![kv.key, kv.mod_revision],
        )
    };
    pointed.map_err(db_error)?;
    Ok(())
}
