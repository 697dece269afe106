//! Reads: a pool of read-only connections used from blocking tasks (WAL lets them read
//! while the writer writes), and the queries, each in one read transaction so that it
//! sees one snapshot.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, params};

use super::db_error;
use crate::storage::{
    Event, EventType, KeyValue, ListResult, Result, Revision, StorageError, prefix_end,
};

/// How long a connection waits for a lock (only WAL recovery and checkpoints take one
/// that readers wait for).
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Idle read connections kept for reuse; more are opened under load and closed after.
const MAX_IDLE: usize = 8;

/// Read-only connections to the database file.
pub(super) struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    pub(super) fn new(path: PathBuf) -> Readers {
        Readers {
            path,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `read` on a pooled connection on a blocking thread.
    pub(super) async fn run<T: Send + 'static>(
        self: &Arc<Self>,
        read: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let readers = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let mut conn = readers.take()?;
            let result = read(&mut conn);
            readers.give_back(conn);
            result
        })
        .await
        .map_err(|e| StorageError::Unavailable(format!("SQLite read task failed: {e}")))?
    }

    fn take(&self) -> Result<Connection> {
        if let Some(conn) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(conn);
        }
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(db_error)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db_error)?;
        Ok(conn)
    }

    fn give_back(&self, conn: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }
}

/// The last revision written (0 for an empty store).
pub(super) fn current_revision(conn: &Connection) -> Result<Revision> {
    conn.prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = 'log'")
        .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)).optional())
        .map(Option::unwrap_or_default)
        .map_err(db_error)
}

/// The revision history was last compacted to (0: never).
pub(super) fn compacted_revision(conn: &Connection) -> Result<Revision> {
    conn.prepare_cached("SELECT value FROM meta WHERE name = 'compacted'")
        .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)).optional())
        .map(Option::unwrap_or_default)
        .map_err(db_error)
}

/// The live value of `key`.
pub(super) fn get(conn: &Connection, key: &str) -> Result<Option<KeyValue>> {
    conn.prepare_cached(
        "SELECT l.key, l.value, l.create_revision, l.revision
         FROM current AS c JOIN log AS l ON l.revision = c.revision WHERE c.key = ?1",
    )
    .and_then(|mut stmt| stmt.query_row([key], key_value).optional())
    .map_err(db_error)
}

/// Live keys now: `current` points at their rows. Parameters: ?1 prefix, ?2 exclusive
/// lower bound (start_after or ''), ?3 prefix end (NULL: none), ?4 limit (-1: all).
const LIST_NOW: &str = "SELECT l.key, l.value, l.create_revision, l.revision
    FROM current AS c JOIN log AS l ON l.revision = c.revision
    WHERE c.key >= ?1 AND c.key > ?2 AND (?3 IS NULL OR c.key < ?3)
    ORDER BY c.key LIMIT ?4";
const COUNT_NOW: &str = "SELECT COUNT(*) FROM current AS c
    WHERE c.key >= ?1 AND c.key > ?2 AND (?3 IS NULL OR c.key < ?3)";

/// Keys live at revision ?5: their latest row at or before it is not a delete.
const LIST_AT: &str = "SELECT l.key, l.value, l.create_revision, l.revision FROM log AS l
    WHERE l.key >= ?1 AND l.key > ?2 AND (?3 IS NULL OR l.key < ?3) AND l.deleted = 0
      AND l.revision = (SELECT MAX(m.revision) FROM log AS m
                        WHERE m.key = l.key AND m.revision <= ?5)
    ORDER BY l.key LIMIT ?4";
const COUNT_AT: &str = "SELECT COUNT(*) FROM log AS l
    WHERE l.key >= ?1 AND l.key > ?2 AND (?3 IS NULL OR l.key < ?3) AND l.deleted = 0
      AND l.revision = (SELECT MAX(m.revision) FROM log AS m
                        WHERE m.key = l.key AND m.revision <= ?4)";

/// See [`crate::storage::Storage::list`].
pub(super) fn list(
    conn: &mut Connection,
    prefix: &str,
    start_after: Option<&str>,
    limit: usize,
    revision: Option<Revision>,
) -> Result<ListResult> {
    let tx = conn.transaction().map_err(db_error)?;
    let current = current_revision(&tx)?;
    let at = match revision {
        Some(revision) => readable(&tx, revision, current)?,
        None => current,
    };
    let end = prefix_end(prefix);
    let lower = start_after.unwrap_or("");
    let sql_limit = i64::try_from(limit).ok().filter(|&l| l > 0).unwrap_or(-1);
    let now = at == current;
    let items: Vec<KeyValue> = {
        let mut stmt = tx
            .prepare_cached(if now { LIST_NOW } else { LIST_AT })
            .map_err(db_error)?;
        let rows = if now {
            stmt.query_map(params![prefix, lower, end, sql_limit], key_value)
        } else {
            stmt.query_map(params![prefix, lower, end, sql_limit, at], key_value)
        };
        rows.and_then(Iterator::collect).map_err(db_error)?
    };
    let remaining = match items.last() {
        Some(last) if items.len() == limit => {
            let mut stmt = tx
                .prepare_cached(if now { COUNT_NOW } else { COUNT_AT })
                .map_err(db_error)?;
            let count = if now {
                stmt.query_row(params![prefix, last.key, end], |r| r.get(0))
            } else {
                stmt.query_row(params![prefix, last.key, end, at], |r| r.get(0))
            };
            count.map_err(db_error)?
        }
        _ => 0,
    };
    Ok(ListResult {
        items,
        revision: at,
        remaining,
    })
}

/// Changes under `prefix` after revision `after`, at most `limit`, in revision order, and
/// the revision up to which they are complete (the last one's when `limit` was reached,
/// else the store's current revision).
pub(super) fn changes(
    conn: &mut Connection,
    prefix: &str,
    after: Revision,
    limit: usize,
) -> Result<(Vec<Event>, Revision)> {
    let tx = conn.transaction().map_err(db_error)?;
    let current = current_revision(&tx)?;
    let compacted = compacted_revision(&tx)?;
    if after < compacted {
        return Err(StorageError::Compacted {
            requested: after,
            compacted,
        });
    }
    let mut stmt = tx
        .prepare_cached(
            "SELECT l.key, l.value, l.create_revision, l.revision, l.deleted,
                    p.key, p.value, p.create_revision, p.revision
             FROM log AS l LEFT JOIN log AS p ON p.revision = l.prev_revision
             WHERE l.revision > ?1 AND l.revision <= ?2
               AND l.key >= ?3 AND (?4 IS NULL OR l.key < ?4)
             ORDER BY l.revision LIMIT ?5",
        )
        .map_err(db_error)?;
    let sql_limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let events = stmt
        .query_map(
            params![after, current, prefix, prefix_end(prefix), sql_limit],
            event,
        )
        .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
        .map_err(db_error)?;
    let complete_to = match events.last() {
        Some(last) if events.len() == limit => last.kv.mod_revision,
        _ => current,
    };
    Ok((events, complete_to))
}

/// `revision` if reads at it are possible: not compacted, not in the future.
fn readable(conn: &Connection, revision: Revision, current: Revision) -> Result<Revision> {
    let compacted = compacted_revision(conn)?;
    if revision < compacted {
        return Err(StorageError::Compacted {
            requested: revision,
            compacted,
        });
    }
    if revision > current {
        return Err(StorageError::Unavailable(format!(
            "revision {revision} is in the future (current {current})"
        )));
    }
    Ok(revision)
}

/// A key-value from the first columns `key, value, create_revision, revision`.
fn key_value(row: &Row<'_>) -> rusqlite::Result<KeyValue> {
    key_value_at(row, 0)
}

/// A key-value from columns `key, value, create_revision, revision` starting at `at`.
fn key_value_at(row: &Row<'_>, at: usize) -> rusqlite::Result<KeyValue> {
    Ok(KeyValue {
        key: row.get(at)?,
        value: row.get(at + 1)?,
        create_revision: row.get(at + 2)?,
        mod_revision: row.get(at + 3)?,
    })
}

/// A log row (with its previous row, when kept) as a watch event.
fn event(row: &Row<'_>) -> rusqlite::Result<Event> {
    let kv = key_value(row)?;
    let deleted: bool = row.get(4)?;
    let prev = match row.get::<_, Option<String>>(5)? {
        Some(_) => Some(key_value_at(row, 5)?),
        None => None,
    };
    let kind = if deleted {
        EventType::Deleted
    } else if kv.create_revision == kv.mod_revision {
        EventType::Added
    } else {
        EventType::Modified
    };
    Ok(Event::new(kind, kv, prev))
}
