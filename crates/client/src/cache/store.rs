//! The thread-safe store an informer fills (client-go `tools/cache` `ThreadSafeStore`).

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

/// Objects of one kind by key (`namespace/name`, or `name` for cluster-scoped kinds).
#[derive(Debug)]
pub struct Store<K> {
    objects: RwLock<HashMap<String, Arc<K>>>,
    changed: tokio::sync::Notify,
}

impl<K> Default for Store<K> {
    fn default() -> Self {
        Self {
            objects: RwLock::new(HashMap::new()),
            changed: tokio::sync::Notify::new(),
        }
    }
}

impl<K> Store<K> {
    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Stores `obj` under `key`; the previous object, if any. Wakes the waiters of
    /// [`changed`](Self::changed).
    pub fn insert(&self, key: String, obj: Arc<K>) -> Option<Arc<K>> {
        let old = self
            .objects
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, obj);
        self.changed.notify_waiters();
        old
    }

    /// Removes `key`; the object, if it was there. Wakes the waiters of
    /// [`changed`](Self::changed).
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        let old = self
            .objects
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
        self.changed.notify_waiters();
        old
    }

    /// Notified (`notify_waiters`) after every insert and remove: a waiter creates and
    /// `enable`s a `notified()` future, checks the store, then awaits it (as VolumeBinding's
    /// PreBind does while it waits for claims to be bound).
    pub fn changed(&self) -> &tokio::sync::Notify {
        &self.changed
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
