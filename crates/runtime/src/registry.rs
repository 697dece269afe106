//! In-memory index of live objects, each behind its own async lock so that one slow
//! operation (a StopContainer grace period) does not block the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// Objects of one kind by ID.
pub struct Registry<T> {
    /// What the objects are, for errors: `"container"`, `"pod sandbox"`.
    kind: &'static str,
    items: Mutex<HashMap<String, Arc<tokio::sync::Mutex<T>>>>,
}

impl<T> Registry<T> {
    /// An empty registry of `kind` objects.
    pub fn new(kind: &'static str) -> Self {
        Self {
            kind,
            items: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<T>>>> {
        self.items
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The object with `id`.
    pub fn get(&self, id: &str) -> Option<Arc<tokio::sync::Mutex<T>>> {
        self.lock().get(id).cloned()
    }

    /// The object with `id`; [`Error::NotFound`] when there is none.
    pub fn require(&self, id: &str) -> Result<Arc<tokio::sync::Mutex<T>>> {
        self.get(id).ok_or_else(|| Error::not_found(self.kind, id))
    }

    /// Adds (or replaces) an object.
    pub fn insert(&self, id: String, value: T) {
        self.lock()
            .insert(id, Arc::new(tokio::sync::Mutex::new(value)));
    }

    /// Forgets an object.
    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// All objects, in no particular order.
    pub fn all(&self) -> Vec<Arc<tokio::sync::Mutex<T>>> {
        self.lock().values().cloned().collect()
    }
}
