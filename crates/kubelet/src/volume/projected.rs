//! The projected plugin (upstream `pkg/volume/projected`): secrets, configMaps,
//! downwardAPI items and ServiceAccount tokens in one memory-backed volume, written with
//! the [`AtomicWriter`] and refreshed on every pod sync (tokens are requested again by
//! the [`TokenManager`] when they are due). The API server's default token volume
//! `kube-api-access-<hash>` is one of these (token, `kube-root-ca.crt`, namespace).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    EmptyDirVolumeSource, Pod, ServiceAccountTokenProjection, Volume, VolumeProjection,
};

use super::atomic_writer::{AtomicWriter, FileProjection};
use super::configmap::{DEFAULT_MODE, config_map_payload};
use super::downward_api::collect_data;
use super::empty_dir::EmptyDirPlugin;
use super::plugin::VolumePlugin;
use super::secret::{check_fits, secret_payload};
use crate::error::{Error, Result};
use crate::kuberuntime::env::NodeAllocatable;
use crate::objects::ObjectSource;
use crate::objects::token::TokenManager;

/// Plugin name of projected volumes.
pub const PROJECTED_PLUGIN_NAME: &str = "kubernetes.io/projected";
/// A token's lifetime when the projection leaves it unset (the API server's default).
pub const DEFAULT_TOKEN_EXPIRATION_SECONDS: i64 = 3600;
/// Mode of token files when the pod sets an fsGroup (upstream: 0600, which the volume
/// ownership step then opens to the group).
const TOKEN_MODE_WITH_FS_GROUP: u32 = 0o600;

/// projected volumes.
pub struct ProjectedPlugin {
    /// Where ConfigMaps and Secrets are read.
    pub objects: Arc<dyn ObjectSource>,
    /// ServiceAccount tokens, cached and rotated.
    pub tokens: Arc<TokenManager>,
    /// Sizes the tmpfs and fills in unset container limits of downwardAPI items.
    pub allocatable: NodeAllocatable,
}

/// Joins errors as upstream's `utilerrors.NewAggregate`: one message alone, several as
/// `[a, b]`.
fn aggregate(errors: Vec<Error>) -> Error {
    match <[Error; 1]>::try_from(errors) {
        Ok([one]) => one,
        Err(errors) => {
            let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
            Error::Volume(format!("[{}]", messages.join(", ")))
        }
    }
}

impl ProjectedPlugin {
    /// The token file of a serviceAccountToken projection (upstream `collectData`'s
    /// TokenRequest bound to the pod).
    fn token_file(
        &self,
        pod: &Pod,
        projection: &ServiceAccountTokenProjection,
        mode: u32,
    ) -> Result<FileProjection> {
        let spec = pod.spec.as_ref();
        let service_account = spec
            .and_then(|s| s.service_account_name.as_deref())
            .filter(|s| !s.is_empty())
            .unwrap_or("default");
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: projection
                    .audience
                    .clone()
                    .filter(|a| !a.is_empty())
                    .map(|a| vec![a]),
                expiration_seconds: Some(
                    projection
                        .expiration_seconds
                        .unwrap_or(DEFAULT_TOKEN_EXPIRATION_SECONDS),
                ),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: pod.metadata.name.clone(),
                    uid: pod.metadata.uid.clone(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let token = self
            .tokens
            .get_service_account_token(namespace, service_account, &request)?;
        Ok(FileProjection {
            data: token
                .status
                .and_then(|s| s.token)
                .unwrap_or_default()
                .into_bytes(),
            mode,
        })
    }

    /// The files of all sources (upstream `collectData`); every failing source adds its
    /// error and the others are still collected, but any error fails the setup.
    pub(crate) fn collect(
        &self,
        pod: &Pod,
        sources: &[VolumeProjection],
        default_mode: Option<i32>,
    ) -> Result<BTreeMap<String, FileProjection>> {
        let default_mode = default_mode.unwrap_or(DEFAULT_MODE);
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let fs_group = pod
            .spec
            .as_ref()
            .and_then(|s| s.security_context.as_ref())
            .and_then(|s| s.fs_group)
            .is_some();
        let mut payload = BTreeMap::new();
        let mut errors = Vec::new();
        for source in sources {
            let files = if let Some(secret) = &source.secret {
                secret_payload(
                    self.objects.as_ref(),
                    namespace,
                    &secret.name,
                    secret.items.as_deref().unwrap_or_default(),
                    Some(default_mode),
                    secret.optional == Some(true),
                )
            } else if let Some(config_map) = &source.config_map {
                config_map_payload(
                    self.objects.as_ref(),
                    namespace,
                    &config_map.name,
                    config_map.items.as_deref().unwrap_or_default(),
                    Some(default_mode),
                    config_map.optional == Some(true),
                )
            } else if let Some(downward) = &source.downward_api {
                collect_data(
                    pod,
                    downward.items.as_deref().unwrap_or_default(),
                    Some(default_mode),
                    &self.allocatable,
                )
            } else if let Some(token) = &source.service_account_token {
                let mode = if fs_group {
                    TOKEN_MODE_WITH_FS_GROUP
                } else {
                    default_mode as u32 & 0o7777
                };
                self.token_file(pod, token, mode)
                    .map(|file| BTreeMap::from([(token.path.clone(), file)]))
            } else if source.cluster_trust_bundle.is_some() {
                Err(Error::Volume(
                    "clusterTrustBundle projections are not supported".to_owned(),
                ))
            } else {
                continue;
            };
            match files {
                Ok(files) => payload.extend(files),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(payload)
        } else {
            Err(aggregate(errors))
        }
    }
}

impl VolumePlugin for ProjectedPlugin {
    fn name(&self) -> &'static str {
        PROJECTED_PLUGIN_NAME
    }

    fn can_support(&self, volume: &Volume) -> bool {
        volume.projected.is_some()
    }

    fn setup(&self, pod: &Pod, volume: &Volume, dir: &Path) -> Result<PathBuf> {
        let source = volume.projected.clone().unwrap_or_default();
        let payload = self.collect(
            pod,
            source.sources.as_deref().unwrap_or_default(),
            source.default_mode,
        )?;
        let size = EmptyDirPlugin {
            node_allocatable_memory: self.allocatable.memory,
        }
        .memory_size(
            pod,
            &EmptyDirVolumeSource {
                medium: Some("Memory".into()),
                ..Default::default()
            },
        );
        check_fits(
            &format!("projected volume {:?}", volume.name),
            &payload,
            size,
        )?;
        EmptyDirPlugin::setup_tmpfs(dir, size)?;
        AtomicWriter::new(dir).write(&payload)?;
        Ok(dir.to_path_buf())
    }

    /// Unmounts and removes the volume, and forgets the tokens bound to its pod (upstream
    /// `DeleteServiceAccountToken` when the pod goes); `dir` is
    /// `<root>/pods/<uid>/volumes/kubernetes.io~projected/<name>`.
    fn teardown(&self, dir: &Path) -> Result<()> {
        super::mount::unmount_and_remove(dir)?;
        if let Some(uid) = dir.ancestors().nth(3).and_then(Path::file_name) {
            self.tokens
                .delete_service_account_token(&uid.to_string_lossy());
        }
        Ok(())
    }

    fn requires_remount(&self) -> bool {
        true
    }

    fn read_only(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::fake::FakeObjects;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{
        ConfigMap, ConfigMapProjection, PodSpec, Secret, SecretProjection,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                service_account_name: Some("builder".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn plugin(fake: Arc<FakeObjects>) -> ProjectedPlugin {
        ProjectedPlugin {
            objects: fake.clone(),
            tokens: Arc::new(TokenManager::new(fake)),
            allocatable: NodeAllocatable::default(),
        }
    }

    /// The API server's `kube-api-access-<hash>` volume, as its ServiceAccount admission
    /// builds it.
    fn kube_api_access() -> Vec<VolumeProjection> {
        skiff_api::core::pod::service_account::token_volume_source()
            .sources
            .unwrap_or_default()
    }

    #[test]
    fn the_default_token_volume_is_projected() {
        let fake = FakeObjects::with(|s| {
            s.config_maps.insert(
                ("ns".into(), "kube-root-ca.crt".into()),
                ConfigMap {
                    data: Some([("ca.crt".to_owned(), "PEM".to_owned())].into()),
                    ..Default::default()
                },
            );
        });
        let files = plugin(fake.clone())
            .collect(&pod(), &kube_api_access(), Some(0o644))
            .unwrap();
        assert_eq!(files["token"].data, b"token-1");
        assert_eq!(files["token"].mode, 0o644);
        assert_eq!(files["ca.crt"].data, b"PEM");
        assert_eq!(files["namespace"].data, b"ns");
        let state = fake.state.lock().unwrap();
        let (ns, sa, request) = &state.token_requests[0];
        assert_eq!((ns.as_str(), sa.as_str()), ("ns", "builder"));
        let spec = request.spec.as_ref().unwrap();
        assert_eq!(spec.expiration_seconds, Some(3607));
        assert_eq!(spec.audiences, None);
        let bound = spec.bound_object_ref.as_ref().unwrap();
        assert_eq!(bound.kind.as_deref(), Some("Pod"));
        assert_eq!(bound.name.as_deref(), Some("p"));
        assert_eq!(bound.uid.as_deref(), Some("uid-1"));
    }

    #[test]
    fn tokens_default_to_an_hour_and_are_reused_across_syncs() {
        let fake = FakeObjects::with(|_| {});
        let p = plugin(fake.clone());
        let sources = vec![VolumeProjection {
            service_account_token: Some(ServiceAccountTokenProjection {
                path: "t".into(),
                expiration_seconds: None,
                audience: Some("vault".into()),
                ..Default::default()
            }),
            ..Default::default()
        }];
        let mut with_fs_group = pod();
        with_fs_group.spec.as_mut().unwrap().security_context =
            Some(k8s_openapi::api::core::v1::PodSecurityContext {
                fs_group: Some(2000),
                ..Default::default()
            });
        let first = p.collect(&with_fs_group, &sources, None).unwrap();
        let second = p.collect(&with_fs_group, &sources, None).unwrap();
        assert_eq!(first["t"], second["t"]);
        assert_eq!(first["t"].mode, 0o600);
        let state = fake.state.lock().unwrap();
        assert_eq!(state.token_requests.len(), 1);
        let spec = state.token_requests[0].2.spec.as_ref().unwrap();
        assert_eq!(spec.expiration_seconds, Some(3600));
        assert_eq!(spec.audiences, Some(vec!["vault".to_owned()]));
    }

    #[test]
    fn teardown_forgets_the_pods_tokens() {
        let fake = FakeObjects::with(|_| {});
        let p = plugin(fake.clone());
        let sources = vec![VolumeProjection {
            service_account_token: Some(ServiceAccountTokenProjection {
                path: "t".into(),
                ..Default::default()
            }),
            ..Default::default()
        }];
        p.collect(&pod(), &sources, None).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp
            .path()
            .join("pods/uid-1/volumes/kubernetes.io~projected/v");
        std::fs::create_dir_all(&dir).unwrap();
        p.teardown(&dir).unwrap();
        assert!(!dir.exists());
        p.collect(&pod(), &sources, None).unwrap();
        assert_eq!(fake.state.lock().unwrap().token_requests.len(), 2);
    }

    #[test]
    fn every_failing_source_is_reported() {
        let fake = FakeObjects::with(|s| {
            s.secrets.insert(
                ("ns".into(), "s".into()),
                Secret {
                    data: Some([("k".to_owned(), ByteString(b"v".to_vec()))].into()),
                    ..Default::default()
                },
            );
            s.token_error = Some("serviceaccounts \"builder\" not found".into());
        });
        let sources = vec![
            VolumeProjection {
                secret: Some(SecretProjection {
                    name: "s".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: "missing".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: "also-missing".into(),
                    optional: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ];
        assert_eq!(
            plugin(fake)
                .collect(&pod(), &sources, None)
                .unwrap_err()
                .to_string(),
            "[configmap \"missing\" not found, serviceaccounts \"builder\" not found]"
        );
        let ok = plugin(FakeObjects::with(|s| {
            s.secrets.insert(
                ("ns".into(), "s".into()),
                Secret {
                    data: Some([("k".to_owned(), ByteString(b"v".to_vec()))].into()),
                    ..Default::default()
                },
            );
        }))
        .collect(&pod(), &sources[..1], Some(0o400))
        .unwrap();
        assert_eq!(ok["k"].mode, 0o400);
    }
}
