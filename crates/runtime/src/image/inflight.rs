//! Downloads in flight, by key (a blob digest): the second pull that needs a blob another
//! pull is downloading waits for that download instead of starting its own (as containerd's
//! content store lets one writer per ref and makes the others wait).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// One async lock per key, held while the key's content is being fetched.
#[derive(Debug, Default)]
pub struct InFlight {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// Holds a key; dropping it lets the next waiter in (and forgets the key when none waits).
pub struct Claim<'a> {
    inflight: &'a InFlight,
    key: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl InFlight {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<()>>>> {
        self.locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits until no one else holds `key`, then holds it. Callers check whether the
    /// content appeared while they waited before fetching it.
    pub async fn claim(&self, key: &str) -> Claim<'_> {
        let lock = self.table().entry(key.to_string()).or_default().clone();
        let guard = lock.lock_owned().await;
        Claim {
            inflight: self,
            key: key.to_string(),
            guard: Some(guard),
        }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut table = self.inflight.table();
        drop(self.guard.take());
        // The table's reference is the only one left: nobody holds or awaits the key.
        if table
            .get(&self.key)
            .is_some_and(|lock| Arc::strong_count(lock) == 1)
        {
            table.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_second_claim_waits_for_the_first() {
        let inflight = Arc::new(InFlight::default());
        let first = inflight.claim("sha256:a").await;
        let other = inflight.claim("sha256:b").await;
        let waiter = {
            let inflight = inflight.clone();
            tokio::spawn(async move {
                let _claim = inflight.claim("sha256:a").await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second claim waits");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("released")
            .expect("joined");
        drop(other);
        assert!(inflight.table().is_empty(), "keys are forgotten when free");
    }
}
