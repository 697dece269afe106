//! The service-account token volume that upstream's ServiceAccount admission plugin adds to
//! pods (`plugin/pkg/admission/serviceaccount`, `TokenVolumeSource`), and its names: the API
//! server injects it, the kubelet mounts it.

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, DownwardAPIProjection, DownwardAPIVolumeFile, KeyToPath,
    ObjectFieldSelector, ProjectedVolumeSource, ServiceAccountTokenProjection, VolumeProjection,
};

/// The prefix of the token volume's name (upstream `ServiceAccountVolumeName` and `-`); a
/// pod volume of that prefix is taken for the token volume.
pub const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// Where the token volume is mounted (upstream `DefaultAPITokenMountPath`). A container
/// that already mounts something there is left alone.
pub const DEFAULT_API_TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Lifetime in seconds of the projected token (upstream
/// `WarnOnlyBoundTokenExpirationSeconds`: one hour and 7 s, so that the API server can
/// tell these tokens apart).
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

/// Mode of the token volume's files (upstream `ProjectedVolumeSourceDefaultMode`, set
/// explicitly).
pub const TOKEN_VOLUME_MODE: i32 = 0o644;

/// The ConfigMap of the cluster CA that every namespace gets from the root-CA publisher.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// The token volume (upstream `TokenVolumeSource`): a bound token at `token`, the cluster
/// CA at `ca.crt` and the pod's namespace at `namespace`, mode 0644.
pub fn token_volume_source() -> ProjectedVolumeSource {
    ProjectedVolumeSource {
        default_mode: Some(TOKEN_VOLUME_MODE),
        sources: Some(vec![
            VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".to_owned(),
                    expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: ROOT_CA_CONFIG_MAP.to_owned(),
                    items: Some(vec![KeyToPath {
                        key: "ca.crt".to_owned(),
                        path: "ca.crt".to_owned(),
                        ..Default::default()
                    }]),
                    optional: None,
                }),
                ..Default::default()
            },
            VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(vec![DownwardAPIVolumeFile {
                        path: "namespace".to_owned(),
                        field_ref: Some(ObjectFieldSelector {
                            api_version: Some("v1".to_owned()),
                            field_path: "metadata.namespace".to_owned(),
                        }),
                        ..Default::default()
                    }]),
                }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    }
}
