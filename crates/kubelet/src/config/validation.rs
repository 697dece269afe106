//! Validation of static pods: the subset of the API server's pod validation
//! (upstream `pkg/apis/core/validation.ValidatePod`) a manifest must pass before the
//! kubelet runs it.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, Pod, VolumeMount};

/// Checks a defaulted pod; the error lists every problem as `field: message`, joined by `; `.
pub fn validate_pod(pod: &Pod) -> Result<(), String> {
    let mut errors = Vec::new();
    let name = pod.metadata.name.as_deref().unwrap_or("");
    if let Err(e) = dns1123_subdomain(name) {
        errors.push(format!("metadata.name: Invalid value {name:?}: {e}"));
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    if let Err(e) = dns1123_label(namespace) {
        errors.push(format!(
            "metadata.namespace: Invalid value {namespace:?}: {e}"
        ));
    }
    match pod.spec.as_ref() {
        None => errors.push("spec: Required value".to_owned()),
        Some(spec) => {
            if spec.containers.is_empty() {
                errors.push("spec.containers: Required value".to_owned());
            }
            one_of(
                &mut errors,
                "spec.restartPolicy",
                spec.restart_policy.as_deref(),
                &["Always", "OnFailure", "Never"],
            );
            one_of(
                &mut errors,
                "spec.dnsPolicy",
                spec.dns_policy.as_deref(),
                &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
            );
            if spec.termination_grace_period_seconds.is_some_and(|g| g < 0) {
                errors.push("spec.terminationGracePeriodSeconds: must be >= 0".to_owned());
            }
            let volumes: HashSet<&str> = spec
                .volumes
                .iter()
                .flatten()
                .map(|v| v.name.as_str())
                .collect();
            let mut names = HashSet::new();
            let init = spec.init_containers.iter().flatten();
            let all = init
                .enumerate()
                .map(|(i, c)| (format!("spec.initContainers[{i}]"), c))
                .chain(
                    spec.containers
                        .iter()
                        .enumerate()
                        .map(|(i, c)| (format!("spec.containers[{i}]"), c)),
                );
            for (field, c) in all {
                validate_container(&mut errors, &field, c, &volumes);
                if !names.insert(c.name.as_str()) {
                    errors.push(format!("{field}.name: Duplicate value {:?}", c.name));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn validate_container(
    errors: &mut Vec<String>,
    field: &str,
    c: &Container,
    volumes: &HashSet<&str>,
) {
    if let Err(e) = dns1123_label(&c.name) {
        errors.push(format!("{field}.name: Invalid value {:?}: {e}", c.name));
    }
    if c.image.as_deref().unwrap_or("").trim().is_empty() {
        errors.push(format!("{field}.image: Required value"));
    }
    one_of(
        errors,
        &format!("{field}.imagePullPolicy"),
        c.image_pull_policy.as_deref(),
        &["Always", "IfNotPresent", "Never"],
    );
    crate::prober::validation::validate_probes(errors, field, c);
    for (j, mount) in c.volume_mounts.iter().flatten().enumerate() {
        validate_volume_mount(
            errors,
            &format!("{field}.volumeMounts[{j}]"),
            mount,
            volumes,
        );
    }
    for (j, port) in c.ports.iter().flatten().enumerate() {
        let pf = format!("{field}.ports[{j}]");
        if !(1..=65535).contains(&port.container_port) {
            errors.push(format!("{pf}.containerPort: must be between 1 and 65535"));
        }
        if port.host_port.is_some_and(|p| !(0..=65535).contains(&p)) {
            errors.push(format!("{pf}.hostPort: must be between 0 and 65535"));
        }
        one_of(
            errors,
            &format!("{pf}.protocol"),
            port.protocol.as_deref(),
            &["TCP", "UDP", "SCTP"],
        );
    }
}

/// Upstream `ValidateVolumeMounts`: the volume exists, the mount path is given, and a
/// subPath is a relative path that does not climb out of the volume.
fn validate_volume_mount(
    errors: &mut Vec<String>,
    field: &str,
    mount: &VolumeMount,
    volumes: &HashSet<&str>,
) {
    if !volumes.contains(mount.name.as_str()) {
        errors.push(format!("{field}.name: Not found: {:?}", mount.name));
    }
    if mount.mount_path.is_empty() {
        errors.push(format!("{field}.mountPath: Required value"));
    }
    let sub_path = mount.sub_path.as_deref().unwrap_or("");
    if !sub_path.is_empty()
        && mount
            .sub_path_expr
            .as_deref()
            .is_some_and(|e| !e.is_empty())
    {
        errors.push(format!(
            "{field}.subPathExpr: Invalid value {:?}: subPathExpr and subPath are mutually exclusive",
            mount.sub_path_expr.as_deref().unwrap_or("")
        ));
    }
    for (name, path) in [
        ("subPath", sub_path),
        ("subPathExpr", mount.sub_path_expr.as_deref().unwrap_or("")),
    ] {
        if path.starts_with('/') {
            errors.push(format!(
                "{field}.{name}: Invalid value {path:?}: must be a relative path"
            ));
        }
        if path.split('/').any(|part| part == "..") {
            errors.push(format!(
                "{field}.{name}: Invalid value {path:?}: must not contain '..'"
            ));
        }
    }
}

fn one_of(errors: &mut Vec<String>, field: &str, value: Option<&str>, allowed: &[&str]) {
    if let Some(v) = value
        && !allowed.contains(&v)
    {
        errors.push(format!(
            "{field}: Unsupported value {v:?}: supported values: {}",
            allowed.join(", ")
        ));
    }
}

/// RFC 1123 label: at most 63 lowercase alphanumerics or `-`, alphanumeric at both ends.
pub fn dns1123_label(value: &str) -> Result<(), String> {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if value.is_empty() || value.len() > 63 {
        return Err("must be 1 to 63 characters".to_owned());
    }
    if !value.starts_with(alnum)
        || !value.ends_with(alnum)
        || !value.chars().all(|c| alnum(c) || c == '-')
    {
        return Err("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character".to_owned());
    }
    Ok(())
}

/// RFC 1123 subdomain: at most 253 characters, dot-separated RFC 1123 labels.
pub fn dns1123_subdomain(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > 253 {
        return Err("must be 1 to 253 characters".to_owned());
    }
    value.split('.').try_for_each(|label| {
        dns1123_label(label).map_err(|_| {
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".to_owned()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        assert!(dns1123_label("web-1").is_ok());
        assert!(dns1123_label("Web").is_err());
        assert!(dns1123_label("-a").is_err());
        assert!(dns1123_label(&"a".repeat(64)).is_err());
        assert!(dns1123_subdomain("web.node-1").is_ok());
        assert!(dns1123_subdomain("web..x").is_err());
        assert!(dns1123_subdomain("under_score").is_err());
    }

    #[test]
    fn volume_mounts_must_name_a_volume_and_stay_inside_it() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "volumes": [{"name": "data", "emptyDir": {}}],
                "initContainers": [{"name": "init", "image": "busybox",
                    "volumeMounts": [{"name": "nope", "mountPath": "/x"}]}],
                "containers": [{"name": "c", "image": "busybox", "volumeMounts": [
                    {"name": "data", "mountPath": "/a", "subPath": "ok/dir"},
                    {"name": "data", "mountPath": "/b", "subPath": "../../etc"},
                    {"name": "data", "mountPath": "/c", "subPathExpr": "/abs"},
                    {"name": "data", "mountPath": ""}
                ]}]
            }
        }))
        .unwrap();
        let errors = validate_pod(&pod).unwrap_err();
        for expected in [
            r#"spec.initContainers[0].volumeMounts[0].name: Not found: "nope""#,
            r#"spec.containers[0].volumeMounts[1].subPath: Invalid value "../../etc": must not contain '..'"#,
            r#"spec.containers[0].volumeMounts[2].subPathExpr: Invalid value "/abs": must be a relative path"#,
            "spec.containers[0].volumeMounts[3].mountPath: Required value",
        ] {
            assert!(
                errors.contains(expected),
                "{expected} missing from {errors}"
            );
        }
        assert!(!errors.contains("volumeMounts[0].subPath"), "{errors}");
    }
}
