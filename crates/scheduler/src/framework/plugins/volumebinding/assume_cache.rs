//! The assume cache of PersistentVolumes and PersistentVolumeClaims (upstream
//! `pkg/scheduler/util/assumecache` and volumebinding's `PVAssumeCache` /
//! `PVCAssumeCache`): an overlay of objects the scheduler has decided to change (a PV's
//! `claimRef`, a PVC's selected-node annotation) over the informer's [`Store`], so that the
//! next pods' cycles see those decisions before the API server confirms them.
//!
//! An assumed object hides the informer's one until the informer holds a strictly newer
//! `resourceVersion` (the API update went through, or someone else changed the object), or
//! until it is restored ([`AssumeCache::restore`], on Unreserve or a failed bind).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::framework::status::Status;
use skiff_client::cache::Store;

/// The `metadata.resourceVersion` of `obj` as a number; 0 when unset or not a number
/// (upstream errors on a non-numeric version; Skiff's API server always sets numbers).
pub fn object_version<K: Metadata<Ty = ObjectMeta>>(obj: &K) -> u64 {
    obj.metadata()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Assumed objects of one kind, over the informer store they shadow. `kind` names the
/// kind in errors (`PersistentVolume`).
#[derive(Debug)]
pub struct AssumeCache<K> {
    kind: &'static str,
    assumed: Mutex<HashMap<String, Arc<K>>>,
}

impl<K: Metadata<Ty = ObjectMeta>> AssumeCache<K> {
    /// An empty cache for objects of `kind`.
    pub fn new(kind: &'static str) -> Self {
        Self {
            kind,
            assumed: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<K>>> {
        self.assumed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The latest object under `key`: the assumed one unless the informer's is newer
    /// (upstream `Get`). None when the informer does not have it (deleted objects drop
    /// their assumption).
    pub fn get(&self, store: &Store<K>, key: &str) -> Option<Arc<K>> {
        let api = store.get(key);
        let mut assumed = self.lock();
        let Some(api) = api else {
            assumed.remove(key);
            return None;
        };
        match assumed.get(key) {
            Some(a) if object_version(api.as_ref()) <= object_version(a.as_ref()) => {
                Some(Arc::clone(a))
            }
            Some(_) => {
                assumed.remove(key);
                Some(api)
            }
            None => Some(api),
        }
    }

    /// The informer's object under `key`, ignoring assumptions (upstream `GetAPIObj`).
    pub fn get_api(&self, store: &Store<K>, key: &str) -> Option<Arc<K>> {
        store.get(key)
    }

    /// Every latest object, keyed as in the store (upstream `List`).
    pub fn list(&self, store: &Store<K>, key_of: impl Fn(&K) -> String) -> Vec<Arc<K>> {
        store
            .list()
            .into_iter()
            .filter_map(|o| self.get(store, &key_of(&o)))
            .collect()
    }

    /// Records `obj` as the latest object under `key` (upstream `Assume`). Errors (an
    /// Error status): the informer has no such object, or `obj` is older than the latest
    /// one.
    pub fn assume(&self, store: &Store<K>, key: &str, obj: K) -> Result<(), Status> {
        let Some(latest) = self.get(store, key) else {
            return Err(Status::error(format!("{} {key:?} not found", self.kind)));
        };
        let (new_version, stored) = (object_version(&obj), object_version(latest.as_ref()));
        if new_version < stored {
            return Err(Status::error(format!(
                "{} {key:?} is out of sync (stored: {stored}, assume: {new_version})",
                self.kind
            )));
        }
        self.lock().insert(key.to_owned(), Arc::new(obj));
        Ok(())
    }

    /// Drops the assumption under `key`: the informer's object is the latest again
    /// (upstream `Restore`). Idempotent.
    pub fn restore(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Whether an assumption is recorded under `key` (for tests and logs).
    pub fn is_assumed(&self, key: &str) -> bool {
        self.lock().contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PersistentVolume;

    use super::*;

    fn pv(name: &str, rv: &str, class: &str) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::PersistentVolumeSpec {
                storage_class_name: Some(class.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn class(p: &PersistentVolume) -> String {
        p.spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone())
            .unwrap_or_default()
    }

    #[test]
    fn assume_shadows_until_newer_informer_version() {
        let store = Store::default();
        store.insert("pv1".into(), Arc::new(pv("pv1", "5", "a")));
        let cache = AssumeCache::new("PersistentVolume");
        cache.assume(&store, "pv1", pv("pv1", "5", "b")).unwrap();
        assert_eq!(class(&cache.get(&store, "pv1").unwrap()), "b");
        assert_eq!(class(&cache.get_api(&store, "pv1").unwrap()), "a");
        let listed = cache.list(&store, |p| p.metadata.name.clone().unwrap_or_default());
        assert_eq!(listed.len(), 1);
        assert_eq!(class(&listed[0]), "b");
        // A resync with the same version keeps the assumption.
        store.insert("pv1".into(), Arc::new(pv("pv1", "5", "c")));
        assert_eq!(class(&cache.get(&store, "pv1").unwrap()), "b");
        // A newer version from the informer wins and drops it.
        store.insert("pv1".into(), Arc::new(pv("pv1", "6", "d")));
        assert_eq!(class(&cache.get(&store, "pv1").unwrap()), "d");
        assert!(!cache.is_assumed("pv1"));
    }

    #[test]
    fn assume_errors_and_restore() {
        let store = Store::default();
        let cache = AssumeCache::new("PersistentVolume");
        let err = cache
            .assume(&store, "pv1", pv("pv1", "1", "a"))
            .unwrap_err();
        assert_eq!(err.message(), "PersistentVolume \"pv1\" not found");
        store.insert("pv1".into(), Arc::new(pv("pv1", "7", "a")));
        let err = cache
            .assume(&store, "pv1", pv("pv1", "6", "b"))
            .unwrap_err();
        assert_eq!(
            err.message(),
            "PersistentVolume \"pv1\" is out of sync (stored: 7, assume: 6)"
        );
        cache.assume(&store, "pv1", pv("pv1", "7", "b")).unwrap();
        cache.restore("pv1");
        cache.restore("pv1");
        assert_eq!(class(&cache.get(&store, "pv1").unwrap()), "a");
    }
}
