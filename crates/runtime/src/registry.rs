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

    /// The full ID named by `id_or_prefix`: the ID itself, else the one ID it is a prefix
    /// of (containerd accepts unique truncated IDs everywhere); `None` when unknown or
    /// ambiguous.
    pub fn resolve(&self, id_or_prefix: &str) -> Option<String> {
        let items = self.lock();
        if items.contains_key(id_or_prefix) {
            return Some(id_or_prefix.to_string());
        }
        if id_or_prefix.is_empty() {
            return None;
        }
        let mut matches = items.keys().filter(|id| id.starts_with(id_or_prefix));
        match (matches.next(), matches.next()) {
            (Some(id), None) => Some(id.clone()),
            _ => None,
        }
    }

    /// The IDs of all objects, in no particular order.
    pub fn ids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// All objects, in no particular order.
    pub fn all(&self) -> Vec<Arc<tokio::sync::Mutex<T>>> {
        self.lock().values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Registry;

    #[test]
    fn resolves_exact_ids_and_unique_prefixes() {
        let registry = Registry::new("container");
        for id in ["abc123", "abd456", "abc"] {
            registry.insert(id.to_string(), ());
        }
        assert_eq!(
            registry.resolve("abc").as_deref(),
            Some("abc"),
            "exact wins"
        );
        assert_eq!(registry.resolve("abc1").as_deref(), Some("abc123"));
        assert_eq!(registry.resolve("ab"), None, "ambiguous");
        assert_eq!(registry.resolve("x"), None);
        assert_eq!(registry.resolve(""), None);
    }
}

/// Names reserved by objects, each by one ID (containerd's `registrar`): a reservation is
/// atomic, so two creates of one name cannot both succeed, and checking a name locks no
/// object.
#[derive(Default)]
pub struct NameIndex {
    names: Mutex<HashMap<String, String>>,
}

impl NameIndex {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.names
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reserves `name` for `id`; `false` when another ID holds it (reserving it again for
    /// the same ID is fine).
    pub fn reserve(&self, name: &str, id: &str) -> bool {
        let mut names = self.lock();
        match names.get(name) {
            Some(holder) => holder == id,
            None => {
                names.insert(name.to_owned(), id.to_owned());
                true
            }
        }
    }

    /// Releases `name` if `id` holds it.
    pub fn release(&self, name: &str, id: &str) {
        let mut names = self.lock();
        if names.get(name).is_some_and(|holder| holder == id) {
            names.remove(name);
        }
    }
}
