//! A small expiring cache for authentication and authorization answers (upstream's
//! token cache and the webhook authorizer's LRU): each entry lives for the TTL it was
//! stored with. Time is tokio's, so tests can pause it.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Entries kept at most; when full, expired entries are dropped, then everything.
const MAX_ENTRIES: usize = 4096;

/// Values by key, each until its own deadline.
#[derive(Debug)]
pub(crate) struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub(crate) fn new() -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The value stored for `key` unless it expired.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(key) {
            Some((value, deadline)) if Instant::now() < *deadline => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Stores `value` for `ttl`; a zero TTL stores nothing.
    pub(crate) fn insert(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (_, deadline)| now < *deadline);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (value, now + ttl));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn entries_expire_after_their_own_ttl() {
        let cache = TtlCache::new();
        cache.insert("long", 1, Duration::from_secs(60));
        cache.insert("short", 2, Duration::from_secs(5));
        cache.insert("none", 3, Duration::ZERO);
        assert_eq!(
            (cache.get(&"long"), cache.get(&"short")),
            (Some(1), Some(2))
        );
        assert_eq!(cache.get(&"none"), None);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!((cache.get(&"long"), cache.get(&"short")), (Some(1), None));
        tokio::time::advance(Duration::from_secs(55)).await;
        assert_eq!(cache.get(&"long"), None);
    }
}
