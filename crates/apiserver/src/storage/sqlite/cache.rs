//! The read cache: recent current values, so that the reads an API server makes on every
//! request (the namespace of a create, a pod's ServiceAccount, the PriorityClasses, the
//! pod a binding updates) do not go to the file. Upstream serves them from informers and
//! its watch cache; here the one writer keeps the cache exact instead.
//!
//! The writer is the only source of change. After each group's commit, and before any of
//! the group's writes is answered or its revision published, it stores each written value
//! (write-through; a delete stores the key's absence) and drops the cached lists the keys
//! fall under. A read that missed fills the cache with what it read only if no group
//! committed since it started (the `epoch` it saw is still current); a value it read from
//! an older snapshot is replaced by the writer's own write-through anyway. So a cached
//! value is always the key's latest committed one, and a hit answers as the file would.
//!
//! Values are kept up to a byte budget, the oldest insertion evicted first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use crate::storage::{Event, EventType, KeyValue, ListResult};

/// Bytes of values and keys the cache keeps by default (16 MiB).
pub(super) const DEFAULT_BUDGET: usize = 16 << 20;

/// Lists of at most this many items are cached (lists of small, rarely written
/// collections such as PriorityClasses).
const MAX_LIST_ITEMS: usize = 64;

/// Whole-collection lists cached at once.
const MAX_LISTS: usize = 64;

/// An exact cache of current values and of small whole-collection lists.
pub(super) struct ReadCache {
    inner: Mutex<Inner>,
    budget: usize,
}

#[derive(Default)]
struct Inner {
    /// Groups committed so far; a fill from a read begun at an older epoch is dropped.
    epoch: u64,
    /// Each cached key: its current value (`None`: absent) and the stamp of its insertion.
    values: HashMap<String, (Option<KeyValue>, u64)>,
    /// Insertion order for eviction: key and stamp (stale when the key was reinserted).
    order: VecDeque<(String, u64)>,
    stamp: u64,
    bytes: usize,
    /// Current whole lists by prefix.
    lists: HashMap<String, ListResult>,
}

impl ReadCache {
    /// A cache keeping up to `budget` bytes of values.
    pub(super) fn new(budget: usize) -> ReadCache {
        ReadCache {
            inner: Mutex::new(Inner::default()),
            budget,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The epoch to give [`ReadCache::fill`] or [`ReadCache::fill_list`] for a read about
    /// to start.
    pub(super) fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// `Some(value)` when `key` is cached (`Some(None)`: the key is absent).
    pub(super) fn get(&self, key: &str) -> Option<Option<KeyValue>> {
        self.lock().values.get(key).map(|(value, _)| value.clone())
    }

    /// The cached whole list of `prefix`.
    pub(super) fn list(&self, prefix: &str) -> Option<ListResult> {
        self.lock().lists.get(prefix).cloned()
    }

    /// Caches what a read begun at `epoch` found for `key`, unless a group committed since.
    pub(super) fn fill(&self, epoch: u64, key: &str, value: &Option<KeyValue>) {
        let mut inner = self.lock();
        if inner.epoch == epoch && !inner.values.contains_key(key) {
            inner.insert(key.to_string(), value.clone(), self.budget);
        }
    }

    /// Caches a whole list of `prefix` read at `epoch` (small lists only), unless a group
    /// committed since.
    pub(super) fn fill_list(&self, epoch: u64, prefix: &str, list: &ListResult) {
        let mut inner = self.lock();
        if inner.epoch == epoch
            && list.items.len() <= MAX_LIST_ITEMS
            && list.remaining == 0
            && (inner.lists.len() < MAX_LISTS || inner.lists.contains_key(prefix))
        {
            inner.lists.insert(prefix.to_string(), list.clone());
        }
    }

    /// Records a committed group's writes, in revision order. The writer calls it after the
    /// commit and before answering the writes or publishing their revision.
    pub(super) fn committed(&self, events: &[Event]) {
        let mut inner = self.lock();
        inner.epoch += 1;
        for event in events {
            let key = &event.kv.key;
            inner
                .lists
                .retain(|prefix, _| !key.starts_with(prefix.as_str()));
            let value = (event.kind != EventType::Deleted).then(|| event.kv.clone());
            inner.insert(key.clone(), value, self.budget);
        }
    }

    /// Forgets everything (after a commit failed, whose outcome is then unknown).
    pub(super) fn clear(&self) {
        let mut inner = self.lock();
        let epoch = inner.epoch + 1;
        *inner = Inner {
            epoch,
            ..Inner::default()
        };
    }
}

impl Inner {
    fn insert(&mut self, key: String, value: Option<KeyValue>, budget: usize) {
        self.stamp += 1;
        let size = entry_size(&key, &value);
        if let Some((old, _)) = self.values.remove(&key) {
            self.bytes -= entry_size(&key, &old);
        }
        self.bytes += size;
        self.order.push_back((key.clone(), self.stamp));
        self.values.insert(key, (value, self.stamp));
        while self.bytes > budget {
            let Some((oldest, stamp)) = self.order.pop_front() else {
                break;
            };
            if self.values.get(&oldest).is_some_and(|(_, s)| *s == stamp)
                && let Some((value, _)) = self.values.remove(&oldest)
            {
                self.bytes -= entry_size(&oldest, &value);
            }
        }
        // Entries of reinserted keys leave stale positions behind: compact them away
        // before the queue grows far beyond the live entries.
        if self.order.len() > 2 * self.values.len() + 64 {
            let values = &self.values;
            self.order
                .retain(|(key, stamp)| values.get(key).is_some_and(|(_, s)| s == stamp));
        }
    }
}

/// What an entry costs: its key (twice: map and queue), its value, and a fixed overhead.
fn entry_size(key: &str, value: &Option<KeyValue>) -> usize {
    2 * key.len() + value.as_ref().map_or(0, |kv| kv.key.len() + kv.value.len()) + 64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: &str, revision: i64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: value.as_bytes().to_vec(),
            create_revision: revision,
            mod_revision: revision,
        }
    }

    fn event(kind: EventType, kv: KeyValue) -> Event {
        Event::new(kind, kv, None)
    }

    #[test]
    fn writes_go_through_and_deletes_cache_absence() {
        let cache = ReadCache::new(DEFAULT_BUDGET);
        cache.committed(&[event(EventType::Added, kv("/a", "1", 1))]);
        assert_eq!(cache.get("/a"), Some(Some(kv("/a", "1", 1))));
        cache.committed(&[event(EventType::Deleted, kv("/a", "1", 2))]);
        assert_eq!(cache.get("/a"), Some(None));
        assert_eq!(cache.get("/b"), None);
    }

    #[test]
    fn a_fill_from_before_a_commit_is_dropped() {
        let cache = ReadCache::new(DEFAULT_BUDGET);
        let epoch = cache.epoch();
        cache.committed(&[event(EventType::Added, kv("/other", "x", 1))]);
        cache.fill(epoch, "/a", &Some(kv("/a", "old", 0)));
        assert_eq!(cache.get("/a"), None);
        let epoch = cache.epoch();
        cache.fill(epoch, "/a", &None);
        assert_eq!(cache.get("/a"), Some(None));
    }

    #[test]
    fn a_write_under_a_prefix_drops_its_list() {
        let cache = ReadCache::new(DEFAULT_BUDGET);
        let list = ListResult {
            items: vec![kv("/p/a", "1", 1)],
            remaining: 0,
            revision: 1,
        };
        cache.fill_list(cache.epoch(), "/p/", &list);
        cache.fill_list(cache.epoch(), "/q/", &list);
        assert!(cache.list("/p/").is_some());
        cache.committed(&[event(EventType::Added, kv("/p/b", "2", 2))]);
        assert!(cache.list("/p/").is_none());
        assert!(cache.list("/q/").is_some());
    }

    #[test]
    fn the_budget_evicts_the_oldest_first() {
        let cache = ReadCache::new(3 * entry_size("/k0", &Some(kv("/k0", "v", 1))));
        for i in 0..5 {
            let key = format!("/k{i}");
            cache.committed(&[event(EventType::Added, kv(&key, "v", i + 1))]);
        }
        assert_eq!(cache.get("/k0"), None);
        assert_eq!(cache.get("/k1"), None);
        assert!(cache.get("/k4").is_some());
        // Rewriting a key many times keeps one entry and a bounded queue.
        for i in 0..1000 {
            cache.committed(&[event(EventType::Modified, kv("/k4", "v", 10 + i))]);
        }
        let inner = cache.lock();
        assert!(inner.order.len() <= 2 * inner.values.len() + 64);
        assert!(inner.bytes <= cache.budget);
    }
}
