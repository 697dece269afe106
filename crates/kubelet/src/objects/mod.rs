//! API objects the kubelet reads on behalf of its pods: ConfigMaps, Secrets, Services,
//! PersistentVolumeClaims and PersistentVolumes, and ServiceAccount tokens (upstream
//! `pkg/kubelet/configmap`, `pkg/kubelet/secret`, the kubelet's Service lister, the
//! volume manager's PVC lookups and `pkg/kubelet/token`).
//!
//! Volume plugins and environment resolution see them through the [`ObjectSource`]
//! trait: [`api::ApiObjects`] implements it on a `kube::Client` with watch-based caches
//! (upstream `watchBasedManager`), [`Standalone`] without an API server (every lookup
//! fails as upstream's standalone kubelet does), and tests use a fake.

pub mod api;
pub mod token;

use std::sync::Arc;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret, Service,
};

/// Why an object could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectError {
    /// The object does not exist. Displays as the API server's NotFound message for the
    /// singular resource, as upstream's caches build it: `configmap "x" not found`.
    NotFound {
        /// Singular lower-case resource: `configmap`, `secret`, ...
        resource: &'static str,
        /// The object's name.
        name: String,
    },
    /// The kubelet runs without an API server (upstream: `not supported due to running
    /// kubelet in standalone mode`).
    Standalone,
    /// Any other failure (API error, cache not synced, ...), with its message.
    Other(String),
}

impl ObjectError {
    /// True for [`ObjectError::NotFound`] (upstream `errors.IsNotFound`).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ObjectError::NotFound { .. })
    }
}

/// `lookup`'s object; `Ok(None)` when it is missing and the reference is `optional`
/// (the `optional` of configMap and secret volumes, items and env references).
pub(crate) fn optional_object<T>(
    lookup: Result<T, ObjectError>,
    optional: bool,
) -> Result<Option<T>, ObjectError> {
    match lookup {
        Ok(object) => Ok(Some(object)),
        Err(e) if e.is_not_found() && optional => Ok(None),
        Err(e) => Err(e),
    }
}

impl std::fmt::Display for ObjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObjectError::NotFound { resource, name } => write!(f, "{resource} {name:?} not found"),
            ObjectError::Standalone => {
                f.write_str("not supported due to running kubelet in standalone mode")
            }
            ObjectError::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ObjectError {}

/// Read access to the API objects pods reference. Calls may block briefly (a cache
/// waiting for its first list, a TokenRequest): callers run on the pod workers.
pub trait ObjectSource: Send + Sync {
    /// ConfigMap `namespace/name` (upstream `configMapManager.GetConfigMap`).
    fn get_config_map(&self, namespace: &str, name: &str) -> Result<Arc<ConfigMap>, ObjectError>;

    /// Secret `namespace/name` (upstream `secretManager.GetSecret`).
    fn get_secret(&self, namespace: &str, name: &str) -> Result<Arc<Secret>, ObjectError>;

    /// POSTs `request` to `serviceaccounts/<service_account>/token` in `namespace` and
    /// returns the answer, whose status holds the token and its expiration.
    fn request_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, ObjectError>;

    /// Every Service of the cluster (upstream `serviceLister.List`). Errors until the
    /// Services were read once; `Ok(vec![])` standalone (upstream's kubelet without a
    /// client has an empty lister).
    fn services(&self) -> Result<Vec<Arc<Service>>, ObjectError>;

    /// PersistentVolumeClaim `namespace/name`.
    fn get_persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<PersistentVolumeClaim>, ObjectError>;

    /// PersistentVolume `name`.
    fn get_persistent_volume(&self, name: &str) -> Result<Arc<PersistentVolume>, ObjectError>;

    /// True when the kubelet has an API server (env resolution then reads ConfigMaps and
    /// Secrets; standalone it fails with upstream's `no kubeClient defined`).
    fn has_client(&self) -> bool {
        true
    }
}

/// The object source of a kubelet without an API server.
#[derive(Debug, Default, Clone, Copy)]
pub struct Standalone;

impl ObjectSource for Standalone {
    fn get_config_map(&self, _: &str, _: &str) -> Result<Arc<ConfigMap>, ObjectError> {
        Err(ObjectError::Standalone)
    }

    fn get_secret(&self, _: &str, _: &str) -> Result<Arc<Secret>, ObjectError> {
        Err(ObjectError::Standalone)
    }

    fn request_token(
        &self,
        _: &str,
        _: &str,
        _: &TokenRequest,
    ) -> Result<TokenRequest, ObjectError> {
        Err(ObjectError::Other(
            "cannot use TokenRequest when the kubelet is in standalone mode".to_owned(),
        ))
    }

    fn services(&self) -> Result<Vec<Arc<Service>>, ObjectError> {
        Ok(Vec::new())
    }

    fn get_persistent_volume_claim(
        &self,
        _: &str,
        _: &str,
    ) -> Result<Arc<PersistentVolumeClaim>, ObjectError> {
        Err(ObjectError::Standalone)
    }

    fn get_persistent_volume(&self, _: &str) -> Result<Arc<PersistentVolume>, ObjectError> {
        Err(ObjectError::Standalone)
    }

    fn has_client(&self) -> bool {
        false
    }
}

/// An in-memory [`ObjectSource`] for tests: objects are put in and read back; tokens
/// are `token-<n>` with the requested expiration.
#[cfg(test)]
pub(crate) mod fake {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use k8s_openapi::api::authentication::v1::TokenRequestStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    /// The fake's contents; tests mutate them through [`FakeObjects::state`].
    #[derive(Default)]
    pub struct State {
        pub config_maps: HashMap<(String, String), ConfigMap>,
        pub secrets: HashMap<(String, String), Secret>,
        pub services: Option<Vec<Service>>,
        pub claims: HashMap<(String, String), PersistentVolumeClaim>,
        pub volumes: HashMap<String, PersistentVolume>,
        /// Every token request made: (namespace, service account, request).
        pub token_requests: Vec<(String, String, TokenRequest)>,
        /// When set, token requests fail with this message.
        pub token_error: Option<String>,
    }

    #[derive(Default)]
    pub struct FakeObjects {
        pub state: Mutex<State>,
    }

    fn key(namespace: &str, name: &str) -> (String, String) {
        (namespace.to_owned(), name.to_owned())
    }

    impl FakeObjects {
        pub fn with(f: impl FnOnce(&mut State)) -> Arc<Self> {
            let fake = Self::default();
            f(&mut fake.state.lock().unwrap());
            Arc::new(fake)
        }

        pub fn edit(&self, f: impl FnOnce(&mut State)) {
            f(&mut self.state.lock().unwrap());
        }
    }

    fn not_found(resource: &'static str, name: &str) -> ObjectError {
        ObjectError::NotFound {
            resource,
            name: name.to_owned(),
        }
    }

    impl ObjectSource for FakeObjects {
        fn get_config_map(&self, ns: &str, name: &str) -> Result<Arc<ConfigMap>, ObjectError> {
            let state = self.state.lock().unwrap();
            state
                .config_maps
                .get(&key(ns, name))
                .cloned()
                .map(Arc::new)
                .ok_or_else(|| not_found("configmap", name))
        }

        fn get_secret(&self, ns: &str, name: &str) -> Result<Arc<Secret>, ObjectError> {
            let state = self.state.lock().unwrap();
            state
                .secrets
                .get(&key(ns, name))
                .cloned()
                .map(Arc::new)
                .ok_or_else(|| not_found("secret", name))
        }

        fn request_token(
            &self,
            ns: &str,
            sa: &str,
            request: &TokenRequest,
        ) -> Result<TokenRequest, ObjectError> {
            let mut state = self.state.lock().unwrap();
            if let Some(e) = &state.token_error {
                return Err(ObjectError::Other(e.clone()));
            }
            state
                .token_requests
                .push((ns.to_owned(), sa.to_owned(), request.clone()));
            let seconds = request
                .spec
                .as_ref()
                .and_then(|s| s.expiration_seconds)
                .unwrap_or(3600);
            let mut answer = request.clone();
            answer.status = Some(TokenRequestStatus {
                token: Some(format!("token-{}", state.token_requests.len())),
                expiration_timestamp: Some(Time(
                    k8s_openapi::jiff::Timestamp::now()
                        + k8s_openapi::jiff::SignedDuration::from_secs(seconds),
                )),
            });
            Ok(answer)
        }

        fn services(&self) -> Result<Vec<Arc<Service>>, ObjectError> {
            let state = self.state.lock().unwrap();
            match &state.services {
                Some(list) => Ok(list.iter().cloned().map(Arc::new).collect()),
                None => Err(ObjectError::Other("services not synced".to_owned())),
            }
        }

        fn get_persistent_volume_claim(
            &self,
            ns: &str,
            name: &str,
        ) -> Result<Arc<PersistentVolumeClaim>, ObjectError> {
            let state = self.state.lock().unwrap();
            state
                .claims
                .get(&key(ns, name))
                .cloned()
                .map(Arc::new)
                .ok_or_else(|| not_found("persistentvolumeclaims", name))
        }

        fn get_persistent_volume(&self, name: &str) -> Result<Arc<PersistentVolume>, ObjectError> {
            let state = self.state.lock().unwrap();
            state
                .volumes
                .get(name)
                .cloned()
                .map(Arc::new)
                .ok_or_else(|| not_found("persistentvolumes", name))
        }
    }
}
