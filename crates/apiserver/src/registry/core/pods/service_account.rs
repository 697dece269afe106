//! Upstream's ServiceAccount admission plugin (`plugin/pkg/admission/serviceaccount`) on
//! pod CREATE: the `default` account when the pod names none, the service-account token
//! volume `kube-api-access-<5 characters>` mounted in every container and init container,
//! and the account's imagePullSecrets when the pod has none. Mirror pods are left as they
//! are but may not reference service accounts, secrets or token projections.
//!
//! One deviation, until Skiff has a ServiceAccount controller (it creates the `default`
//! account of every namespace): a pod whose ServiceAccount does not exist is admitted as
//! it is, with no token volume and no imagePullSecrets, where upstream refuses it (403
//! `error looking up service account <ns>/<name>: ...`). Once the controller exists,
//! [`admit`] refuses such pods as upstream does.

use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, LocalObjectReference, Pod, PodSpec, ServiceAccount, Volume,
    VolumeMount,
};
use skiff_api::core::pod::ephemeral::MIRROR_POD_ANNOTATION;
use skiff_api::core::pod::service_account::{
    DEFAULT_API_TOKEN_MOUNT_PATH, TOKEN_VOLUME_PREFIX, token_volume_source,
};

use super::admission::forbidden;
use crate::error::{ApiError, GroupResource};
use crate::registry::Context;

/// The account of a pod that names none (upstream `DefaultServiceAccountName`).
pub const DEFAULT_SERVICE_ACCOUNT_NAME: &str = "default";

/// The ServiceAccount annotation that limits its pods to the secrets it lists, when
/// `true` (upstream `EnforceMountableSecretsAnnotation`).
pub const ENFORCE_MOUNTABLE_SECRETS_ANNOTATION: &str = "kubernetes.io/enforce-mountable-secrets";

/// Applies the plugin to a new pod in `pod.metadata.namespace` (already set by the
/// store). Reads the ServiceAccount through `ctx.objects`.
///
/// Errors: 403 Forbidden for a mirror pod (annotation `kubernetes.io/config.mirror`) that
/// names a service account, references a secret or projects a ServiceAccount token; when
/// the ServiceAccount cannot be read (other than not found) or cannot be decoded; and,
/// for an account annotated `kubernetes.io/enforce-mountable-secrets: "true"`, when the
/// pod references a secret or image pull secret the account does not list.
pub async fn admit(ctx: &Context<'_>, pod: &mut Pod) -> Result<(), ApiError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION));
    let Some(spec) = pod.spec.as_mut() else {
        return Ok(());
    };
    if mirror {
        // The kubelet compares its static pod with the mirror pod: no change here.
        return validate_mirror_pod(spec).map_err(|why| forbidden(&name, why));
    }
    let account = account_name(spec)
        .unwrap_or(DEFAULT_SERVICE_ACCOUNT_NAME)
        .to_owned();
    spec.service_account_name = Some(account.clone());
    spec.service_account = Some(account.clone());

    let Some(service_account) = get_service_account(ctx, &name, &namespace, &account).await? else {
        // Skiff's deviation (see the module): no refusal until the controller exists.
        return Ok(());
    };
    if should_automount(&service_account, spec) {
        mount_service_account_token(spec, || {
            crate::rest::meta::generate_name(TOKEN_VOLUME_PREFIX)
        });
    }
    if spec.image_pull_secrets.as_ref().is_none_or(Vec::is_empty) {
        spec.image_pull_secrets = service_account
            .image_pull_secrets
            .as_ref()
            .filter(|s| !s.is_empty())
            .map(|secrets| {
                secrets
                    .iter()
                    .map(|s| LocalObjectReference {
                        name: s.name.clone(),
                    })
                    .collect()
            });
    }
    if enforces_mountable_secrets(&service_account) {
        limit_secret_references(&service_account, spec).map_err(|why| forbidden(&name, &why))?;
    }
    Ok(())
}

/// The account the pod names: `serviceAccountName`, else the deprecated
/// `serviceAccount` (as upstream's conversion reads them).
fn account_name(spec: &PodSpec) -> Option<&str> {
    [&spec.service_account_name, &spec.service_account]
        .into_iter()
        .filter_map(|a| a.as_deref())
        .find(|a| !a.is_empty())
}

/// The pod's ServiceAccount, `None` when it does not exist.
async fn get_service_account(
    ctx: &Context<'_>,
    pod: &str,
    namespace: &str,
    account: &str,
) -> Result<Option<ServiceAccount>, ApiError> {
    let resource = GroupResource::new("", "serviceaccounts");
    let lookup_failed = |e: &dyn std::fmt::Display| {
        forbidden(
            pod,
            &format!("error looking up service account {namespace}/{account}: {e}"),
        )
    };
    match ctx.objects.get(&resource, Some(namespace), account).await {
        Ok(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| lookup_failed(&e)),
        Err(e) if e.code == 404 => Ok(None),
        Err(e) => Err(lookup_failed(&e.message)),
    }
}

/// Upstream's checks of a mirror pod: no service account, no secret, no token projection.
/// Errors: the reason of the refusal.
fn validate_mirror_pod(spec: &PodSpec) -> Result<(), &'static str> {
    if account_name(spec).is_some() {
        return Err("a mirror pod may not reference service accounts");
    }
    if !pod_secret_names(spec).is_empty() {
        return Err("a mirror pod may not reference secrets");
    }
    let projects_token = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.iter().flatten())
        .any(|s| s.service_account_token.is_some());
    if projects_token {
        return Err("a mirror pod may not use ServiceAccountToken volume projections");
    }
    Ok(())
}

/// The pod's preference, else the account's, else true (upstream `shouldAutomount`).
fn should_automount(service_account: &ServiceAccount, spec: &PodSpec) -> bool {
    spec.automount_service_account_token
        .or(service_account.automount_service_account_token)
        .unwrap_or(true)
}

/// Mounts the token volume read-only at [`DEFAULT_API_TOKEN_MOUNT_PATH`] in every init
/// container and container that mounts nothing there, and adds the volume (named by
/// `generate_name` unless the pod has a `kube-api-access-` volume already) when one of
/// them needed it (upstream `mountServiceAccountToken`).
fn mount_service_account_token(spec: &mut PodSpec, generate_name: impl FnOnce() -> String) {
    let existing = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name.starts_with(TOKEN_VOLUME_PREFIX))
        .map(|v| v.name.clone());
    let has_volume = existing.is_some();
    let volume_name = existing.unwrap_or_else(generate_name);
    let mount = VolumeMount {
        name: volume_name.clone(),
        read_only: Some(true),
        mount_path: DEFAULT_API_TOKEN_MOUNT_PATH.to_owned(),
        ..Default::default()
    };
    let mut needs_volume = false;
    let containers = spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut());
    for container in containers {
        let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
        if !mounts
            .iter()
            .any(|m| m.mount_path == DEFAULT_API_TOKEN_MOUNT_PATH)
        {
            mounts.push(mount.clone());
            needs_volume = true;
        }
    }
    if needs_volume && !has_volume {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: volume_name,
            projected: Some(token_volume_source()),
            ..Default::default()
        });
    }
}

/// Whether the account's `kubernetes.io/enforce-mountable-secrets` annotation is true
/// (Go's ParseBool spellings).
fn enforces_mountable_secrets(service_account: &ServiceAccount) -> bool {
    service_account
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ENFORCE_MOUNTABLE_SECRETS_ANNOTATION))
        .is_some_and(|v| matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"))
}

/// Upstream `limitSecretReferences`: secret volumes, secretKeyRef variables of init
/// containers and containers, and image pull secrets must be listed by the account.
/// Errors: upstream's message for the first one that is not.
fn limit_secret_references(service_account: &ServiceAccount, spec: &PodSpec) -> Result<(), String> {
    let account = service_account.metadata.name.as_deref().unwrap_or_default();
    let mountable: Vec<&str> = service_account
        .secrets
        .iter()
        .flatten()
        .filter_map(|s| s.name.as_deref())
        .collect();
    for volume in spec.volumes.iter().flatten() {
        let Some(secret) = volume.secret.as_ref() else {
            continue;
        };
        let secret_name = secret.secret_name.as_deref().unwrap_or_default();
        if !mountable.contains(&secret_name) {
            return Err(format!(
                "volume with secret.secretName=\"{secret_name}\" is not allowed because service account {account} does not reference that secret"
            ));
        }
    }
    let kinds = [
        (
            "init container",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        ("container", spec.containers.as_slice()),
    ];
    for (kind, containers) in kinds {
        for container in containers {
            for env in container.env.iter().flatten() {
                let Some(secret) = env
                    .value_from
                    .as_ref()
                    .and_then(|v| v.secret_key_ref.as_ref())
                else {
                    continue;
                };
                if !mountable.contains(&secret.name.as_str()) {
                    return Err(format!(
                        "{kind} {} with envVar {} referencing secret.secretName=\"{}\" is not allowed because service account {account} does not reference that secret",
                        container.name, env.name, secret.name
                    ));
                }
            }
        }
    }
    let pull_secrets: Vec<&str> = service_account
        .image_pull_secrets
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    for (i, reference) in spec.image_pull_secrets.iter().flatten().enumerate() {
        if !pull_secrets.contains(&reference.name.as_str()) {
            return Err(format!(
                "imagePullSecrets[{i}].name=\"{}\" is not allowed because service account {account} does not reference that imagePullSecret",
                reference.name
            ));
        }
    }
    Ok(())
}

/// The names of the secrets the pod references (upstream `VisitPodSecretNames` over all
/// containers): image pull secrets, variables and envFrom of every container, and the
/// secrets of its volumes.
fn pod_secret_names(spec: &PodSpec) -> Vec<String> {
    let mut names: Vec<String> = spec
        .image_pull_secrets
        .iter()
        .flatten()
        .map(|s| s.name.clone())
        .collect();
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(|c: &Container| (c.env.as_deref(), c.env_from.as_deref()));
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|c| (c.env.as_deref(), c.env_from.as_deref()));
    for (env, env_from) in containers.chain(ephemeral) {
        names.extend(container_secret_names(
            env.unwrap_or_default(),
            env_from.unwrap_or_default(),
        ));
    }
    for volume in spec.volumes.iter().flatten() {
        names.extend(volume_secret_names(volume));
    }
    names
}

fn container_secret_names(env: &[EnvVar], env_from: &[EnvFromSource]) -> Vec<String> {
    let from = env_from
        .iter()
        .filter_map(|e| e.secret_ref.as_ref())
        .map(|s| s.name.clone());
    let vars = env
        .iter()
        .filter_map(|e| e.value_from.as_ref()?.secret_key_ref.as_ref())
        .map(|s| s.name.clone());
    from.chain(vars).collect()
}

/// The secrets a volume names, as upstream's visitor reads each volume source.
fn volume_secret_names(volume: &Volume) -> Vec<String> {
    let local = |r: Option<&LocalObjectReference>| r.map(|r| r.name.clone());
    let one = if let Some(azure) = &volume.azure_file {
        Some(azure.secret_name.clone()).filter(|n| !n.is_empty())
    } else if let Some(cephfs) = &volume.cephfs {
        local(cephfs.secret_ref.as_ref())
    } else if let Some(cinder) = &volume.cinder {
        local(cinder.secret_ref.as_ref())
    } else if let Some(flex) = &volume.flex_volume {
        local(flex.secret_ref.as_ref())
    } else if let Some(projected) = &volume.projected {
        return projected
            .sources
            .iter()
            .flatten()
            .filter_map(|s| s.secret.as_ref())
            .map(|s| s.name.clone())
            .collect();
    } else if let Some(rbd) = &volume.rbd {
        local(rbd.secret_ref.as_ref())
    } else if let Some(secret) = &volume.secret {
        Some(secret.secret_name.clone().unwrap_or_default())
    } else if let Some(scale_io) = &volume.scale_io {
        Some(scale_io.secret_ref.name.clone())
    } else if let Some(iscsi) = &volume.iscsi {
        local(iscsi.secret_ref.as_ref())
    } else if let Some(storageos) = &volume.storageos {
        local(storageos.secret_ref.as_ref())
    } else if let Some(csi) = &volume.csi {
        local(csi.node_publish_secret_ref.as_ref())
    } else {
        None
    };
    one.into_iter().collect()
}

#[cfg(test)]
#[path = "service_account_tests.rs"]
mod tests;
