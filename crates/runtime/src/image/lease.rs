//! Leases: what an in-progress pull uses (blobs, layers) and image removal must not delete
//! (the role of containerd's leases for garbage collection).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// Counts, per blob digest or chain ID, the pulls currently relying on it.
#[derive(Debug, Default)]
pub struct Leases {
    held: Mutex<HashMap<String, usize>>,
}

/// Keeps its resources leased until dropped.
#[derive(Debug)]
pub struct Lease<'a> {
    leases: &'a Leases,
    keys: Vec<String>,
}

impl Leases {
    /// Leases `keys` until the returned guard is dropped.
    pub fn acquire(&self, keys: Vec<String>) -> Lease<'_> {
        let mut held = self.lock();
        for key in &keys {
            *held.entry(key.clone()).or_default() += 1;
        }
        Lease { leases: self, keys }
    }

    /// Locks the lease table: while the guard lives no lease starts or ends, so a garbage
    /// collector can check and delete without racing a pull.
    pub fn lock(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let mut held = self.leases.lock();
        for key in &self.keys {
            if let Some(count) = held.get_mut(key) {
                *count -= 1;
                if *count == 0 {
                    held.remove(key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_counted_and_released_on_drop() {
        let leases = Leases::default();
        let first = leases.acquire(vec!["a".into(), "b".into()]);
        let second = leases.acquire(vec!["a".into()]);
        drop(first);
        assert!(leases.lock().contains_key("a"));
        assert!(!leases.lock().contains_key("b"));
        drop(second);
        assert!(leases.lock().is_empty());
    }
}
