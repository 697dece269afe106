//! Ephemeral containers (the debugging containers `kubectl debug` adds to a running pod):
//! their defaults and validation (upstream `validateEphemeralContainers`), the create rule
//! (`ValidatePodCreate`: none on create), and the `pods/ephemeralcontainers` subresource's
//! update rules (upstream `podEphemeralContainersStrategy` and
//! `ValidatePodEphemeralContainersUpdate`): only `spec.ephemeralContainers` changes, and
//! containers may be added but not removed or changed.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, PodSpec};

use super::defaults::default_container;
use crate::field::{ErrorList, FieldError, Path};

/// The annotation of a static pod's mirror pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What upstream says of a field an ephemeral container may not set.
const NOT_FOR_EPHEMERAL: &str = "cannot be set for an Ephemeral Container";

/// An ephemeral container read as a container (the same fields, without
/// `targetContainerName`).
pub fn as_container(ec: &EphemeralContainer) -> Container {
    serde_json::to_value(ec)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// Defaults the ephemeral containers of `spec` as containers are defaulted (image pull
/// policy, termination message path and policy, port protocols, ...), as upstream's
/// generated defaulters do.
pub fn default_ephemeral_containers(spec: &mut PodSpec) {
    for ec in spec.ephemeral_containers.iter_mut().flatten() {
        let mut container = as_container(ec);
        default_container(&mut container);
        let target = ec.target_container_name.take();
        let defaulted = serde_json::to_value(&container)
            .ok()
            .and_then(|v| serde_json::from_value::<EphemeralContainer>(v).ok());
        if let Some(defaulted) = defaulted {
            *ec = defaulted;
        }
        ec.target_container_name = target;
    }
}

/// Upstream `ValidatePodCreate`: ephemeral containers can only be added through the
/// `ephemeralcontainers` subresource (`spec.ephemeralContainers: Forbidden: cannot be set
/// on create`).
pub fn validate_no_ephemeral_containers_on_create(pod: &Pod) -> ErrorList {
    let set = pod
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .is_some_and(|e| !e.is_empty());
    if set {
        vec![FieldError::forbidden(
            &Path::new("spec").child("ephemeralContainers"),
            "cannot be set on create",
        )]
    } else {
        Vec::new()
    }
}

/// The pod validation of one container at a path, given the container names seen so far
/// (it adds the container's).
pub(super) type ValidateContainer<'a> =
    dyn FnMut(&mut ErrorList, &Path, &Container, &mut HashSet<String>) + 'a;

/// Upstream `validateEphemeralContainers` for the spec at `path`: each as a container
/// (`validate_container` checks names, images, policies, env and mounts, with a name
/// unique across all containers of the pod), a `targetContainerName` naming an init or
/// regular container, none of the fields only regular containers have, and no subPath
/// mounts.
pub(super) fn validate_ephemeral_containers(
    errors: &mut ErrorList,
    spec: &PodSpec,
    path: &Path,
    validate_container: &mut ValidateContainer<'_>,
) {
    let Some(list) = spec.ephemeral_containers.as_ref().filter(|l| !l.is_empty()) else {
        return;
    };
    let others: HashSet<String> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| c.name.clone())
        .collect();
    let mut names = others.clone();
    let list_path = path.child("ephemeralContainers");
    for (i, ec) in list.iter().enumerate() {
        let p = list_path.index(i);
        let container = as_container(ec);
        validate_container(errors, &p, &container, &mut names);
        if let Some(target) = ec
            .target_container_name
            .as_deref()
            .filter(|t| !t.is_empty() && !others.contains(*t))
        {
            errors.push(FieldError::not_found(
                &p.child("targetContainerName"),
                target,
            ));
        }
        // Upstream's allow list, in the order of the Go struct's fields.
        let forbidden = [
            ("ports", ec.ports.as_ref().is_some_and(|p| !p.is_empty())),
            (
                "resources",
                ec.resources.as_ref().is_some_and(|r| {
                    r.limits.as_ref().is_some_and(|l| !l.is_empty())
                        || r.requests.as_ref().is_some_and(|l| !l.is_empty())
                        || r.claims.as_ref().is_some_and(|l| !l.is_empty())
                }),
            ),
            (
                "resizePolicy",
                ec.resize_policy.as_ref().is_some_and(|p| !p.is_empty()),
            ),
            ("restartPolicy", ec.restart_policy.is_some()),
            ("livenessProbe", ec.liveness_probe.is_some()),
            ("readinessProbe", ec.readiness_probe.is_some()),
            ("startupProbe", ec.startup_probe.is_some()),
            ("lifecycle", ec.lifecycle.is_some()),
        ];
        for (name, set) in forbidden {
            if set {
                errors.push(FieldError::forbidden(&p.child(name), NOT_FOR_EPHEMERAL));
            }
        }
        for (j, mount) in ec.volume_mounts.iter().flatten().enumerate() {
            let mount_path = p.child("volumeMounts").index(j);
            for (name, value) in [
                ("subPath", mount.sub_path.as_deref()),
                ("subPathExpr", mount.sub_path_expr.as_deref()),
            ] {
                if value.is_some_and(|v| !v.is_empty()) {
                    errors.push(FieldError::forbidden(
                        &mount_path.child(name),
                        NOT_FOR_EPHEMERAL,
                    ));
                }
            }
        }
    }
}

/// The `ephemeralcontainers` subresource's PrepareForUpdate (upstream
/// `dropNonEphemeralContainerUpdates`): `new` becomes `old` with `new`'s ephemeral
/// containers. Metadata is the caller's (upstream `ResetObjectMetaForStatus`).
pub fn drop_non_ephemeral_container_updates(new: &mut Pod, old: &Pod) {
    let ephemeral = new
        .spec
        .as_mut()
        .and_then(|s| s.ephemeral_containers.take());
    new.spec.clone_from(&old.spec);
    new.status.clone_from(&old.status);
    new.spec
        .get_or_insert_with(Default::default)
        .ephemeral_containers = ephemeral;
}

/// Upstream `ValidatePodEphemeralContainersUpdate` (metadata is the caller's): the new pod
/// as on create (`validate_pod`), no ephemeral containers for static pods, and the old
/// ephemeral containers all kept and unchanged (`spec.ephemeralContainers: Forbidden:
/// existing ephemeral containers "debugger" may not be removed`).
pub fn validate_pod_ephemeral_containers_update(new: &Pod, old: &Pod) -> ErrorList {
    let mut errors = super::validate_pod(new);
    let mirror = old
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION));
    if mirror {
        return vec![FieldError::forbidden(
            &Path::new(""),
            "static pods do not support ephemeral containers",
        )];
    }
    let list_of = |pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|s| s.ephemeral_containers.clone())
            .unwrap_or_default()
    };
    let new_list = list_of(new);
    let path = Path::new("spec").child("ephemeralContainers");
    for old_ec in list_of(old) {
        match new_list.iter().rev().find(|n| n.name == old_ec.name) {
            None => errors.push(FieldError::forbidden(
                &path,
                format!(
                    "existing ephemeral containers {:?} may not be removed\n",
                    old_ec.name
                ),
            )),
            Some(new_ec) if *new_ec != old_ec => errors.push(FieldError::forbidden(
                &path,
                format!(
                    "existing ephemeral containers {:?} may not be changed\n{}",
                    old_ec.name,
                    diff(&old_ec, new_ec)
                ),
            )),
            Some(_) => {}
        }
    }
    errors
}

/// The changed fields of an ephemeral container, one `- old` / `+ new` pair each.
fn diff(old: &EphemeralContainer, new: &EphemeralContainer) -> String {
    super::validation::field_diff("core.EphemeralContainer", old, new)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::core::pod::default_pod;

    fn pod(value: Value) -> Pod {
        let mut pod: Pod = serde_json::from_value(value).unwrap();
        default_pod(&mut pod);
        pod
    }

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn ephemeral_containers_may_be_added_but_not_changed() {
        let old = pod(json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "app", "image": "nginx"}],
            "ephemeralContainers": [{"name": "debugger", "image": "busybox"}],
        }}));
        let defaults = &old
            .spec
            .as_ref()
            .unwrap()
            .ephemeral_containers
            .as_ref()
            .unwrap()[0];
        assert_eq!(defaults.termination_message_policy.as_deref(), Some("File"));
        assert_eq!(defaults.image_pull_policy.as_deref(), Some("Always"));

        let mut added = pod(json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "app", "image": "other"}],
            "ephemeralContainers": [{"name": "debugger", "image": "busybox"},
                                    {"name": "two", "image": "busybox", "targetContainerName": "app"}],
        }}));
        drop_non_ephemeral_container_updates(&mut added, &old);
        assert_eq!(
            added.spec.as_ref().unwrap().containers[0].image.as_deref(),
            Some("nginx")
        );
        assert!(validate_pod_ephemeral_containers_update(&added, &old).is_empty());

        let changed = pod(json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "app", "image": "nginx"}],
            "ephemeralContainers": [{"name": "debugger", "image": "alpine",
                                     "targetContainerName": "nope", "ports": [{"containerPort": 80}]}],
        }}));
        let errors = messages(&validate_pod_ephemeral_containers_update(&changed, &old));
        assert_eq!(errors.len(), 3, "{errors:#?}");
        assert_eq!(
            errors[0],
            "spec.ephemeralContainers[0].targetContainerName: Not found: \"nope\""
        );
        assert_eq!(
            errors[1],
            "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container"
        );
        assert!(
            errors[2].starts_with(
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be changed\n"
            ),
            "{}",
            errors[2]
        );

        let removed = pod(json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "app", "image": "nginx"}]}}));
        assert_eq!(
            messages(&validate_pod_ephemeral_containers_update(&removed, &old)),
            [
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"
            ]
        );
        assert_eq!(
            messages(&validate_no_ephemeral_containers_on_create(&old)),
            ["spec.ephemeralContainers: Forbidden: cannot be set on create"]
        );
    }
}
