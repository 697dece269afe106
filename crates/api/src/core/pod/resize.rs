//! The `pods/resize` subresource (in-place pod vertical scaling, beta and on by default in
//! 1.33): upstream `podResizeStrategy` (`dropNonResizeUpdates`) and `ValidatePodResize`.
//! Only the cpu and memory requests and limits of containers and sidecar init containers
//! change; the kubelet applies them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerResizePolicy, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::ephemeral::MIRROR_POD_ANNOTATION;
use super::qos::pod_qos;
use crate::field::{ErrorList, FieldError, Path};
use crate::quantity;

type ResourceList = BTreeMap<String, Quantity>;

/// The subresource's PrepareForUpdate (upstream `dropNonResizeUpdates`): `new` becomes
/// `old` with the `resources` and `resizePolicy` of `new`'s containers and init
/// containers. When containers were added, removed, reordered or renamed, `new`'s spec is
/// kept for validation to refuse. The status is `old`'s; metadata is the caller's.
pub fn drop_non_resize_updates(new: &mut Pod, old: &Pod) {
    new.status.clone_from(&old.status);
    let (Some(new_spec), Some(old_spec)) = (new.spec.as_mut(), old.spec.as_ref()) else {
        return;
    };
    let new_init = new_spec.init_containers.clone().unwrap_or_default();
    let old_init = old_spec.init_containers.clone().unwrap_or_default();
    if new_spec.containers.len() != old_spec.containers.len() || new_init.len() != old_init.len() {
        return;
    }
    let containers = merge_resources(&new_spec.containers, &old_spec.containers);
    let init_containers = merge_resources(&new_init, &old_init);
    *new_spec = old_spec.clone();
    new_spec.containers = containers;
    if new_spec.init_containers.is_some() || !init_containers.is_empty() {
        new_spec.init_containers = Some(init_containers);
    }
}

/// `old` with each container's resources and resize policy from `new`; `new` itself when
/// a name differs (upstream `dropNonResizeUpdatesForContainers`).
fn merge_resources(new: &[Container], old: &[Container]) -> Vec<Container> {
    if new.is_empty() {
        return new.to_vec();
    }
    let mut merged = old.to_vec();
    for (m, n) in merged.iter_mut().zip(new) {
        if m.name != n.name {
            return new.to_vec();
        }
        m.resources.clone_from(&n.resources);
        m.resize_policy.clone_from(&n.resize_policy);
    }
    merged
}

/// Upstream `ValidatePodResize` (metadata is the caller's): the new pod as on create; no
/// resize of pods with pod-level resources, static pods or Windows pods; the same QoS
/// class; a node that reports container resources; no removed requests or limits, no
/// lower (or added) memory limit without the `RestartContainer` policy; and nothing but
/// cpu and memory changed (`spec: Forbidden: only cpu and memory resources are mutable`).
pub fn validate_pod_resize(new: &Pod, old: &Pod) -> ErrorList {
    let mut errors = super::validate_pod(new);
    let pod_level = |pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .is_some_and(|r| !is_empty(r.requests.as_ref()) || !is_empty(r.limits.as_ref()))
    };
    let root = Path::new("");
    if pod_level(old) || pod_level(new) {
        return vec![FieldError::forbidden(
            &root,
            "pods with pod-level resources cannot be resized",
        )];
    }
    let mirror = old
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION));
    if mirror {
        return vec![FieldError::forbidden(
            &root,
            "static pods cannot be resized",
        )];
    }
    let (Some(new_spec), Some(old_spec)) = (new.spec.as_ref(), old.spec.as_ref()) else {
        return errors;
    };
    if old_spec.os.as_ref().is_some_and(|os| os.name == "windows") {
        return vec![FieldError::forbidden(
            &root,
            "windows pods cannot be resized",
        )];
    }

    let spec_path = Path::new("spec");
    let old_qos = old
        .status
        .as_ref()
        .and_then(|s| s.qos_class.clone())
        .filter(|q| !q.is_empty())
        .unwrap_or_else(|| pod_qos(old).as_str().to_owned());
    if old_qos != pod_qos(new).as_str() {
        let shown = new
            .status
            .as_ref()
            .and_then(|s| s.qos_class.clone())
            .unwrap_or_default();
        errors.push(FieldError::invalid(
            &spec_path,
            shown,
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    if !resize_supported(old) {
        errors.push(FieldError::forbidden(
            &spec_path,
            "Pod running on node without support for resize",
        ));
    }

    let new_init = new_spec.init_containers.as_deref().unwrap_or_default();
    let old_init = old_spec.init_containers.as_deref().unwrap_or_default();
    for (ix, old_c) in old_init.iter().enumerate() {
        if !is_sidecar(old_c) {
            continue;
        }
        if let Some(new_c) = new_init.get(ix) {
            let path = spec_path
                .child("initContainers")
                .index(ix)
                .child("resources");
            validate_container_resize(&mut errors, new_c, old_c, &path);
        }
    }
    for (ix, old_c) in old_spec.containers.iter().enumerate() {
        if let Some(new_c) = new_spec.containers.get(ix) {
            let path = spec_path.child("containers").index(ix).child("resources");
            validate_container_resize(&mut errors, new_c, old_c, &path);
        }
    }

    // Everything but cpu and memory must stay.
    let mut munged = new_spec.clone();
    for (ix, c) in munged.containers.iter_mut().enumerate() {
        let old_c = old_spec.containers.get(ix);
        if let Some(old_c) = old_c {
            keep_old_cpu_memory(c, old_c);
        }
        if old_c.is_none_or(|o| !same_container(c, o)) {
            errors.push(FieldError::forbidden(
                &spec_path,
                "only cpu and memory resources are mutable",
            ));
        }
    }
    for (ix, c) in munged.init_containers.iter_mut().flatten().enumerate() {
        let old_c = old_init.get(ix);
        if is_sidecar(c) {
            if let Some(old_c) = old_c {
                keep_old_cpu_memory(c, old_c);
            }
            if old_c.is_none_or(|o| !same_container(c, o)) {
                errors.push(FieldError::forbidden(
                    &spec_path,
                    "only cpu and memory resources for sidecar containers are mutable",
                ));
            }
        } else if old_c.is_none_or(|o| !same_container(c, o)) {
            errors.push(FieldError::forbidden(
                &spec_path,
                "resources for non-sidecar init containers are immutable",
            ));
        }
    }
    if !errors.is_empty() {
        return errors;
    }
    let normalized = |spec: &k8s_openapi::api::core::v1::PodSpec| {
        let mut spec = spec.clone();
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            normalize(c);
        }
        if spec.init_containers.as_ref().is_some_and(Vec::is_empty) {
            spec.init_containers = None;
        }
        spec
    };
    if normalized(&munged) != normalized(old_spec) {
        errors.push(FieldError::forbidden(
            &spec_path,
            "only cpu and memory resources are mutable",
        ));
    }
    errors
}

/// An init container with restartPolicy `Always`.
fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

fn is_empty(list: Option<&ResourceList>) -> bool {
    list.is_none_or(BTreeMap::is_empty)
}

/// Upstream `isPodResizeRequestSupported`: the first running container's status reports
/// its resources (the node runs a kubelet that resizes); true without running containers.
fn resize_supported(pod: &Pod) -> bool {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    for status in statuses.into_iter().flatten() {
        if status
            .state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .is_some()
        {
            return status.resources.is_some();
        }
    }
    true
}

/// Upstream `validateContainerResize` for one container at `path` (`...resources`).
fn validate_container_resize(
    errors: &mut ErrorList,
    new: &Container,
    old: &Container,
    path: &Path,
) {
    let empty = ResourceRequirements::default();
    let new_r = new.resources.as_ref().unwrap_or(&empty);
    let old_r = old.resources.as_ref().unwrap_or(&empty);
    if removed(new_r.requests.as_ref(), old_r.requests.as_ref()) {
        errors.push(FieldError::forbidden(
            &path.child("requests"),
            "resource requests cannot be removed",
        ));
    }
    if removed(new_r.limits.as_ref(), old_r.limits.as_ref()) {
        errors.push(FieldError::forbidden(
            &path.child("limits"),
            "resource limits cannot be removed",
        ));
    }
    let memory_policy = new
        .resize_policy
        .iter()
        .flatten()
        .find(|p: &&ContainerResizePolicy| p.resource_name == "memory")
        .map(|p| p.restart_policy.as_str())
        .unwrap_or("");
    if memory_policy != "NotRequired" && !memory_policy.is_empty() {
        return;
    }
    let limit = |r: &ResourceRequirements| r.limits.as_ref().and_then(|l| l.get("memory")).cloned();
    let limit_path = path.child("limits").key("memory");
    match (limit(new_r), limit(old_r)) {
        (Some(n), Some(o)) if quantity::parse(&n) < quantity::parse(&o) => {
            errors.push(FieldError::forbidden(
                &limit_path,
                "memory limits cannot be decreased unless resizePolicy is RestartContainer",
            ));
        }
        (Some(_), None) => errors.push(FieldError::forbidden(
            &limit_path,
            "memory limits cannot be added unless resizePolicy is RestartContainer",
        )),
        _ => {}
    }
}

/// Whether a resource of `old` is missing from `new`.
fn removed(new: Option<&ResourceList>, old: Option<&ResourceList>) -> bool {
    let new_len = new.map_or(0, BTreeMap::len);
    let old = old.cloned().unwrap_or_default();
    old.len() > new_len || old.keys().any(|k| !new.is_some_and(|n| n.contains_key(k)))
}

/// Upstream `dropCPUMemoryResourcesFromContainer`: the container's cpu and memory requests
/// and limits become `old`'s (a list `old` lacks entirely is dropped).
fn keep_old_cpu_memory(c: &mut Container, old: &Container) {
    let old_r = old.resources.clone().unwrap_or_default();
    let new_r = c.resources.clone().unwrap_or_default();
    let munge = |list: Option<ResourceList>, old_list: Option<ResourceList>| {
        let old_list = old_list?;
        let mut out = list.unwrap_or_default();
        for name in ["cpu", "memory"] {
            out.remove(name);
            if let Some(q) = old_list.get(name) {
                out.insert(name.to_owned(), q.clone());
            }
        }
        Some(out)
    };
    c.resources = Some(ResourceRequirements {
        limits: munge(new_r.limits, old_r.limits),
        requests: munge(new_r.requests, old_r.requests),
        claims: None,
    });
}

/// Containers equal as upstream's semantic equality sees them (empty and absent lists
/// alike).
fn same_container(a: &Container, b: &Container) -> bool {
    let (mut a, mut b) = (a.clone(), b.clone());
    normalize(&mut a);
    normalize(&mut b);
    a == b
}

/// Empty resource lists (and empty requirements) as absent.
fn normalize(c: &mut Container) {
    if let Some(r) = c.resources.as_mut() {
        for list in [&mut r.limits, &mut r.requests] {
            if list.as_ref().is_some_and(BTreeMap::is_empty) {
                *list = None;
            }
        }
        if r.claims.as_ref().is_some_and(Vec::is_empty) {
            r.claims = None;
        }
    }
    if c.resources == Some(ResourceRequirements::default()) {
        c.resources = None;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::core::pod::default_pod;

    fn pod(cpu: &str, memory_limit: &str, image: &str) -> Pod {
        let value: Value = json!({"metadata": {"name": "p"}, "spec": {"containers": [{
            "name": "app", "image": image,
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"},
                          "limits": {"memory": memory_limit}},
        }]}, "status": {"qosClass": "Burstable"}});
        let mut pod: Pod = serde_json::from_value(value).unwrap();
        default_pod(&mut pod);
        pod
    }

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn resize_changes_only_cpu_and_memory() {
        let old = pod("100m", "128Mi", "nginx");
        let mut new = pod("200m", "256Mi", "other");
        drop_non_resize_updates(&mut new, &old);
        let c = &new.spec.as_ref().unwrap().containers[0];
        assert_eq!(c.image.as_deref(), Some("nginx"));
        assert!(validate_pod_resize(&new, &old).is_empty());

        let lower = pod("100m", "64Mi", "nginx");
        assert_eq!(
            messages(&validate_pod_resize(&lower, &old)),
            [
                "spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer"
            ]
        );

        let mut other = old.clone();
        let resources = other.spec.as_mut().unwrap().containers[0]
            .resources
            .as_mut()
            .unwrap();
        resources
            .requests
            .as_mut()
            .unwrap()
            .insert("ephemeral-storage".into(), Quantity("1Gi".into()));
        assert_eq!(
            messages(&validate_pod_resize(&other, &old)),
            ["spec: Forbidden: only cpu and memory resources are mutable"]
        );

        let mut guaranteed = old.clone();
        let resources = guaranteed.spec.as_mut().unwrap().containers[0]
            .resources
            .as_mut()
            .unwrap();
        resources.limits = resources.requests.clone();
        resources
            .limits
            .as_mut()
            .unwrap()
            .insert("memory".into(), Quantity("128Mi".into()));
        resources
            .requests
            .as_mut()
            .unwrap()
            .insert("memory".into(), Quantity("128Mi".into()));
        resources
            .requests
            .as_mut()
            .unwrap()
            .insert("cpu".into(), Quantity("100m".into()));
        resources
            .limits
            .as_mut()
            .unwrap()
            .insert("cpu".into(), Quantity("100m".into()));
        assert_eq!(
            messages(&validate_pod_resize(&guaranteed, &old)),
            [
                "spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing"
            ]
        );
    }
}
