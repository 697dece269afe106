//! Pod validation (upstream `ValidatePodCreate`, `ValidatePodSpec`, `validateContainers`,
//! `ValidatePodUpdate`), with upstream's field paths and messages.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec, Toleration};
use serde_json::Value;

use super::affinity;
use super::probe::validate_probes;
use super::volumes::{validate_volume_mounts, validate_volumes};
use crate::core::resources::validate_resource_requirements;
use crate::core::{invalid_each, non_negative, one_of, validate_dns1123_label};
use crate::field::{ErrorList, FieldError, Path};
use crate::names;

/// The largest `activeDeadlineSeconds` (Go's MaxInt32).
const MAX_INT32: i64 = i32::MAX as i64;

/// The fields a pod update may change, as upstream lists them in its error.
const UPDATABLE_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Checks a (defaulted) pod's spec; metadata is the caller's.
pub fn validate_pod(pod: &Pod) -> ErrorList {
    let spec_path = Path::new("spec");
    match &pod.spec {
        None => vec![FieldError::required(&spec_path, "")],
        Some(spec) => validate_pod_spec(spec, &spec_path),
    }
}

/// Upstream `ValidatePodCreate`'s rule for scheduling gates (KEP-3521): a pod created with
/// gates cannot name its node (`spec.nodeName: Forbidden: cannot be set until all
/// schedulingGates have been cleared`).
pub fn validate_node_name_without_scheduling_gates(pod: &Pod) -> ErrorList {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let named = spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
    let gated = spec
        .scheduling_gates
        .as_ref()
        .is_some_and(|g| !g.is_empty());
    if named && gated {
        vec![FieldError::forbidden(
            &Path::new("spec").child("nodeName"),
            "cannot be set until all schedulingGates have been cleared",
        )]
    } else {
        Vec::new()
    }
}

/// Checks a pod spec at `path` (`spec`, or `spec.template.spec` of a workload).
pub fn validate_pod_spec(spec: &PodSpec, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    let volumes = validate_volumes(
        &mut errors,
        &path.child("volumes"),
        spec.volumes.as_deref().unwrap_or_default(),
    );
    let mut names = HashSet::new();
    let init_path = path.child("initContainers");
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let p = init_path.index(i);
        validate_container(&mut errors, &p, c, &volumes, &mut names);
        validate_init_container(&mut errors, &p, c);
    }
    let containers_path = path.child("containers");
    if spec.containers.is_empty() {
        errors.push(FieldError::required(&containers_path, ""));
    }
    for (i, c) in spec.containers.iter().enumerate() {
        validate_container(
            &mut errors,
            &containers_path.index(i),
            c,
            &volumes,
            &mut names,
        );
    }
    super::ephemeral::validate_ephemeral_containers(
        &mut errors,
        spec,
        path,
        &mut |errors, p, c, seen| {
            let mut borrowed: HashSet<&str> = seen.iter().map(String::as_str).collect();
            validate_container(errors, p, c, &volumes, &mut borrowed);
            seen.insert(c.name.clone());
        },
    );
    one_of(
        &mut errors,
        &path.child("restartPolicy"),
        spec.restart_policy.as_deref(),
        &["Always", "Never", "OnFailure"],
        true,
    );
    one_of(
        &mut errors,
        &path.child("dnsPolicy"),
        spec.dns_policy.as_deref(),
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
        true,
    );
    if spec.dns_policy.as_deref() == Some("None") && spec.dns_config.is_none() {
        errors.push(FieldError::required(
            &path.child("dnsConfig"),
            "must provide `dnsConfig` when `dnsPolicy` is None",
        ));
    }
    non_negative(
        &mut errors,
        &path.child("terminationGracePeriodSeconds"),
        spec.termination_grace_period_seconds,
    );
    if let Some(v) = spec
        .active_deadline_seconds
        .filter(|v| !(1..=MAX_INT32).contains(v))
    {
        errors.push(FieldError::invalid(
            &path.child("activeDeadlineSeconds"),
            v,
            names::inclusive_range_error(1, MAX_INT32),
        ));
    }
    for (field, value) in [
        ("hostname", spec.hostname.as_deref()),
        ("subdomain", spec.subdomain.as_deref()),
    ] {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            invalid_each(
                &mut errors,
                &path.child(field),
                v,
                names::is_dns1123_label(v),
            );
        }
    }
    for (field, value) in [
        ("nodeName", spec.node_name.as_deref()),
        ("serviceAccountName", spec.service_account_name.as_deref()),
        ("priorityClassName", spec.priority_class_name.as_deref()),
    ] {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            invalid_each(
                &mut errors,
                &path.child(field),
                v,
                names::is_dns1123_subdomain(v),
            );
        }
    }
    let tolerations_path = path.child("tolerations");
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        validate_toleration(&mut errors, &tolerations_path.index(i), t);
    }
    if let Some(selector) = &spec.node_selector {
        affinity::validate_node_selector_labels(&mut errors, &path.child("nodeSelector"), selector);
    }
    if let Some(a) = &spec.affinity {
        affinity::validate_affinity(&mut errors, &path.child("affinity"), a);
    }
    affinity::validate_topology_spread_constraints(
        &mut errors,
        &path.child("topologySpreadConstraints"),
        spec.topology_spread_constraints
            .as_deref()
            .unwrap_or_default(),
    );
    errors
}

/// Checks one container; `names` collects the container names of the pod so far.
fn validate_container<'a>(
    errors: &mut ErrorList,
    path: &Path,
    c: &'a Container,
    volumes: &HashSet<&str>,
    names: &mut HashSet<&'a str>,
) {
    let name_path = path.child("name");
    validate_dns1123_label(errors, &name_path, &c.name);
    if !c.name.is_empty() && !names.insert(c.name.as_str()) {
        errors.push(FieldError::duplicate(&name_path, c.name.as_str()));
    }
    let image = c.image.as_deref().unwrap_or("");
    if image.is_empty() {
        errors.push(FieldError::required(&path.child("image"), ""));
    } else if image.trim() != image {
        errors.push(FieldError::invalid(
            &path.child("image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    one_of(
        errors,
        &path.child("imagePullPolicy"),
        c.image_pull_policy.as_deref(),
        &["Always", "IfNotPresent", "Never"],
        true,
    );
    one_of(
        errors,
        &path.child("terminationMessagePolicy"),
        c.termination_message_policy.as_deref(),
        &["FallbackToLogsOnError", "File"],
        true,
    );
    validate_ports(errors, &path.child("ports"), c);
    let env_path = path.child("env");
    for (i, env) in c.env.iter().flatten().enumerate() {
        validate_env(errors, &env_path.index(i), env);
    }
    validate_probes(errors, path, c);
    let privileged = c
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    validate_volume_mounts(
        errors,
        &path.child("volumeMounts"),
        c.volume_mounts.as_deref().unwrap_or_default(),
        volumes,
        privileged,
    );
    if let Some(resources) = &c.resources {
        validate_resource_requirements(errors, &path.child("resources"), resources);
    }
}

/// Init containers: only sidecars (restartPolicy `Always`) may have probes.
fn validate_init_container(errors: &mut ErrorList, path: &Path, c: &Container) {
    let restart_policy = c.restart_policy.as_deref();
    one_of(
        errors,
        &path.child("restartPolicy"),
        restart_policy,
        &["Always"],
        false,
    );
    if restart_policy == Some("Always") {
        return;
    }
    for (name, set) in [
        ("lifecycle", c.lifecycle.is_some()),
        ("livenessProbe", c.liveness_probe.is_some()),
        ("readinessProbe", c.readiness_probe.is_some()),
        ("startupProbe", c.startup_probe.is_some()),
    ] {
        if set {
            errors.push(FieldError::forbidden(
                &path.child(name),
                "may not be set for init containers without restartPolicy=Always",
            ));
        }
    }
}

/// Upstream `validateContainerPorts`.
fn validate_ports(errors: &mut ErrorList, path: &Path, c: &Container) {
    let mut port_names = HashSet::new();
    for (i, port) in c.ports.iter().flatten().enumerate() {
        let p = path.index(i);
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            invalid_each(
                errors,
                &p.child("name"),
                name,
                names::is_valid_port_name(name),
            );
            if !port_names.insert(name) {
                errors.push(FieldError::duplicate(&p.child("name"), name));
            }
        }
        if port.container_port == 0 {
            errors.push(FieldError::required(&p.child("containerPort"), ""));
        } else {
            let problems = names::is_valid_port_num(i64::from(port.container_port));
            invalid_each(
                errors,
                &p.child("containerPort"),
                port.container_port,
                problems,
            );
        }
        if let Some(host_port) = port.host_port.filter(|p| *p != 0) {
            let problems = names::is_valid_port_num(i64::from(host_port));
            invalid_each(errors, &p.child("hostPort"), host_port, problems);
        }
        one_of(
            errors,
            &p.child("protocol"),
            port.protocol.as_deref(),
            &["SCTP", "TCP", "UDP"],
            true,
        );
    }
}

/// Upstream `ValidateEnv`: a valid name, and `valueFrom` with exactly one source and no
/// `value`.
fn validate_env(errors: &mut ErrorList, path: &Path, env: &EnvVar) {
    let name_path = path.child("name");
    if env.name.is_empty() {
        errors.push(FieldError::required(&name_path, ""));
    } else {
        invalid_each(
            errors,
            &name_path,
            env.name.as_str(),
            names::is_relaxed_env_var_name(&env.name),
        );
    }
    let Some(from) = &env.value_from else {
        return;
    };
    let sources = [
        from.field_ref.is_some(),
        from.resource_field_ref.is_some(),
        from.config_map_key_ref.is_some(),
        from.secret_key_ref.is_some(),
        from.file_key_ref.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count();
    let from_path = path.child("valueFrom");
    if sources == 0 {
        errors.push(FieldError::invalid(
            &from_path,
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        ));
    } else if sources > 1 {
        errors.push(FieldError::invalid(
            &from_path,
            "",
            "may not have more than one field specified at a time",
        ));
    }
    if env.value.as_deref().is_some_and(|v| !v.is_empty()) {
        errors.push(FieldError::invalid(
            &from_path,
            "",
            "may not be specified when `value` is not empty",
        ));
    }
    if let Some(field_ref) = &from.field_ref
        && field_ref.field_path.is_empty()
    {
        errors.push(FieldError::required(
            &from_path.child("fieldRef").child("fieldPath"),
            "",
        ));
    }
}

/// Upstream `ValidateTolerations` for one toleration.
fn validate_toleration(errors: &mut ErrorList, path: &Path, t: &Toleration) {
    let key = t.key.as_deref().unwrap_or("");
    let operator = t.operator.as_deref().unwrap_or("Equal");
    let operator_path = path.child("operator");
    if key.is_empty() && operator != "Exists" {
        errors.push(FieldError::invalid(
            &operator_path,
            operator,
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ));
    }
    match operator {
        "Equal" => {}
        "Exists" => {
            if t.value.as_deref().is_some_and(|v| !v.is_empty()) {
                errors.push(FieldError::invalid(
                    &operator_path,
                    t.value.as_deref().unwrap_or(""),
                    "value must be empty when `operator` is 'Exists'",
                ));
            }
        }
        other => errors.push(FieldError::not_supported(
            &operator_path,
            other,
            &["Equal", "Exists"],
        )),
    }
    let effect = t.effect.as_deref().filter(|e| !e.is_empty());
    one_of(
        errors,
        &path.child("effect"),
        effect,
        &["NoExecute", "NoSchedule", "PreferNoSchedule"],
        false,
    );
    if t.toleration_seconds.is_some() && effect != Some("NoExecute") {
        errors.push(FieldError::invalid(
            &path.child("effect"),
            effect.unwrap_or(""),
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ));
    }
}

/// Checks an update of a pod: the new pod as on create, and a spec that changes only what
/// upstream lets a pod update change (container images, a lower activeDeadlineSeconds,
/// added tolerations, terminationGracePeriodSeconds from negative to 1).
pub fn validate_pod_update(new: &Pod, old: &Pod) -> ErrorList {
    let mut errors = validate_pod(new);
    let (Some(new_spec), Some(old_spec)) = (&new.spec, &old.spec) else {
        return errors;
    };
    let spec_path = Path::new("spec");
    let deadline_path = spec_path.child("activeDeadlineSeconds");
    match (
        new_spec.active_deadline_seconds,
        old_spec.active_deadline_seconds,
    ) {
        (Some(n), Some(o)) if n > o => errors.push(FieldError::invalid(
            &deadline_path,
            n,
            "must be less than or equal to previous value",
        )),
        (None, Some(_)) => errors.push(FieldError::invalid(
            &deadline_path,
            Value::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    if !only_added_tolerations(new_spec, old_spec) {
        errors.push(FieldError::forbidden(
            &spec_path.child("tolerations"),
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }
    let mut munged = new_spec.clone();
    for (new_c, old_c) in munged.containers.iter_mut().zip(&old_spec.containers) {
        new_c.image.clone_from(&old_c.image);
    }
    let old_init = old_spec.init_containers.iter().flatten();
    for (new_c, old_c) in munged.init_containers.iter_mut().flatten().zip(old_init) {
        new_c.image.clone_from(&old_c.image);
    }
    munged.active_deadline_seconds = old_spec.active_deadline_seconds;
    munged.tolerations.clone_from(&old_spec.tolerations);
    // Scheduling gates may only be removed (upstream `validateSchedulingGates` on update,
    // KEP-3521).
    let old_gates: Vec<&str> = old_spec
        .scheduling_gates
        .iter()
        .flatten()
        .map(|g| g.name.as_str())
        .collect();
    for (i, gate) in new_spec.scheduling_gates.iter().flatten().enumerate() {
        if !old_gates.contains(&gate.name.as_str()) {
            errors.push(FieldError::forbidden(
                &spec_path.child("schedulingGates").index(i),
                format!(
                    "only deletion is allowed, but found new scheduling gate '{}'",
                    gate.name
                ),
            ));
        }
    }
    munged
        .scheduling_gates
        .clone_from(&old_spec.scheduling_gates);
    if old_spec
        .termination_grace_period_seconds
        .is_some_and(|g| g < 0)
        && new_spec.termination_grace_period_seconds == Some(1)
    {
        munged.termination_grace_period_seconds = old_spec.termination_grace_period_seconds;
    }
    if munged != *old_spec {
        errors.push(FieldError::forbidden(
            &spec_path,
            format!(
                "pod updates may not change fields other than {UPDATABLE_FIELDS}\n{}",
                spec_diff(old_spec, &munged)
            ),
        ));
    }
    errors
}

/// Every old toleration is still there (its tolerationSeconds may change).
fn only_added_tolerations(new: &PodSpec, old: &PodSpec) -> bool {
    let same = |a: &Toleration, b: &Toleration| {
        a.key == b.key && a.operator == b.operator && a.value == b.value && a.effect == b.effect
    };
    let new_tolerations = new.tolerations.as_deref().unwrap_or_default();
    old.tolerations
        .iter()
        .flatten()
        .all(|o| new_tolerations.iter().any(|n| same(n, o)))
}

/// The changed top-level fields of a pod spec, one `- old` / `+ new` pair per field.
fn spec_diff(old: &PodSpec, new: &PodSpec) -> String {
    field_diff("core.PodSpec", old, new)
}

/// The changed top-level fields of two values of type `type_name` (`core.PodSpec`), one
/// `- old` / `+ new` pair per field, in the shape of upstream's go-cmp diff.
pub(crate) fn field_diff<T: serde::Serialize>(type_name: &str, old: &T, new: &T) -> String {
    let as_map = |value: &T| match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (old, new) = (as_map(old), as_map(new));
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = format!("  {type_name}{{\n");
    for key in keys {
        let (o, n) = (old.get(key), new.get(key));
        if o != n {
            let show = |v: Option<&Value>| v.map_or_else(|| "nil".to_owned(), Value::to_string);
            out.push_str(&format!(
                "- \t{key}: {},\n+ \t{key}: {},\n",
                show(o),
                show(n)
            ));
        }
    }
    out.push_str("  }\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::pod::default_pod;

    fn pod(value: serde_json::Value) -> Pod {
        let mut pod: Pod = serde_json::from_value(value).unwrap_or_default();
        default_pod(&mut pod);
        pod
    }

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_gated_pod_cannot_name_its_node() {
        let gated = pod(serde_json::json!({"spec": {"nodeName": "n1",
            "schedulingGates": [{"name": "example.com/wait"}],
            "containers": [{"name": "c", "image": "busybox"}]}}));
        assert_eq!(
            messages(&validate_node_name_without_scheduling_gates(&gated)),
            ["spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"]
        );
        let mut named = gated.clone();
        if let Some(spec) = named.spec.as_mut() {
            spec.scheduling_gates = Some(Vec::new());
        }
        assert!(validate_node_name_without_scheduling_gates(&named).is_empty());
        let mut waiting = gated;
        if let Some(spec) = waiting.spec.as_mut() {
            spec.node_name = None;
        }
        assert!(validate_node_name_without_scheduling_gates(&waiting).is_empty());
    }

    fn valid() -> Pod {
        pod(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}],
                     "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}
        }))
    }

    #[test]
    fn a_defaulted_pod_is_valid() {
        assert_eq!(messages(&validate_pod(&valid())), Vec::<String>::new());
    }

    #[test]
    fn spec_errors_use_upstream_paths_and_messages() {
        let p = pod(serde_json::json!({
            "spec": {
                "restartPolicy": "Sometimes",
                "activeDeadlineSeconds": 0,
                "nodeSelector": {"zone": "a b"},
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ""}]}},
                "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
                "initContainers": [{"name": "c", "image": "x", "livenessProbe": {"exec": {"command": ["x"]}}}],
                "containers": [
                    {"name": "c", "image": "", "ports": [{"containerPort": 70000, "protocol": "TCP"}]},
                    {"name": "Bad_Name", "image": "x", "imagePullPolicy": "Sometimes",
                     "env": [{"name": "A=B"}],
                     "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}
                ]
            }
        }));
        let got = messages(&validate_pod(&p));
        for expected in [
            "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
            r#"spec.containers[0].name: Duplicate value: "c""#,
            "spec.containers[0].image: Required value",
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            r#"spec.containers[1].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
            r#"spec.containers[1].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never""#,
            r#"spec.containers[1].env[0].name: Invalid value: "A=B": a valid environment variable name must consist only of printable ASCII characters other than '='"#,
            r#"spec.containers[1].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1"#,
            r#"spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure""#,
            "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
            r#"spec.nodeSelector: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"#,
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty",
            "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
        ] {
            assert!(
                got.contains(&expected.to_owned()),
                "{expected}\nmissing from {got:#?}"
            );
        }
        let empty = pod(serde_json::json!({"spec": {"containers": []}}));
        assert_eq!(
            messages(&validate_pod(&empty)),
            ["spec.containers: Required value"]
        );
    }

    #[test]
    fn volume_mounts_must_name_a_volume_and_stay_inside_it() {
        let p = pod(serde_json::json!({
            "spec": {
                "volumes": [{"name": "data", "emptyDir": {}}, {"name": "data", "hostPath": {"path": ""}},
                            {"name": "two", "emptyDir": {}, "secret": {"secretName": "s"}}],
                "containers": [{"name": "c", "image": "busybox", "volumeMounts": [
                    {"name": "nope", "mountPath": "/x"},
                    {"name": "data", "mountPath": "/a", "subPath": "ok/dir"},
                    {"name": "data", "mountPath": "/b", "subPath": "../../etc"},
                    {"name": "data", "mountPath": "/c", "subPathExpr": "/abs"},
                    {"name": "data", "mountPath": "/a"},
                    {"name": "data", "mountPath": ""}
                ]}]
            }
        }));
        let got = messages(&validate_pod(&p));
        assert_eq!(
            got,
            [
                r#"spec.volumes[1].name: Duplicate value: "data""#,
                "spec.volumes[1].hostPath.path: Required value",
                "spec.volumes[2]: Forbidden: may not specify more than 1 volume type",
                r#"spec.containers[0].volumeMounts[0].name: Not found: "nope""#,
                r#"spec.containers[0].volumeMounts[2].subPath: Invalid value: "../../etc": must not contain '..'"#,
                r#"spec.containers[0].volumeMounts[3].subPathExpr: Invalid value: "/abs": must be a relative path"#,
                r#"spec.containers[0].volumeMounts[4].mountPath: Invalid value: "/a": must be unique"#,
                "spec.containers[0].volumeMounts[5].mountPath: Required value",
            ]
        );
    }

    #[test]
    fn updates_may_change_only_images_deadlines_and_added_tolerations() {
        let old = valid();
        let mut new = old.clone();
        if let Some(spec) = new.spec.as_mut() {
            spec.containers[0].image = Some("busybox:1.37".into());
            spec.tolerations
                .get_or_insert_with(Vec::new)
                .push(Toleration {
                    operator: Some("Exists".into()),
                    ..Default::default()
                });
        }
        assert_eq!(
            messages(&validate_pod_update(&new, &old)),
            Vec::<String>::new()
        );
        if let Some(spec) = new.spec.as_mut() {
            spec.restart_policy = Some("Never".into());
            spec.tolerations = None;
        }
        let got = messages(&validate_pod_update(&new, &old));
        assert_eq!(got.len(), 2, "{got:#?}");
        assert_eq!(
            got[0],
            "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
        );
        assert!(got[1].starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"), "{}", got[1]);
        assert!(got[1].contains(r#"restartPolicy: "Never""#), "{}", got[1]);
    }

    #[test]
    fn scheduling_gates_may_only_be_removed() {
        let mut old = valid();
        if let Some(spec) = old.spec.as_mut() {
            spec.scheduling_gates = Some(vec![
                k8s_openapi::api::core::v1::PodSchedulingGate { name: "a".into() },
                k8s_openapi::api::core::v1::PodSchedulingGate { name: "b".into() },
            ]);
        }
        let mut removed = old.clone();
        if let Some(spec) = removed.spec.as_mut() {
            spec.scheduling_gates = Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                name: "b".into(),
            }]);
        }
        assert!(validate_pod_update(&removed, &old).is_empty());
        let mut added = old.clone();
        if let Some(spec) = added.spec.as_mut() {
            spec.scheduling_gates
                .get_or_insert_with(Vec::new)
                .push(k8s_openapi::api::core::v1::PodSchedulingGate { name: "c".into() });
        }
        assert_eq!(
            messages(&validate_pod_update(&added, &old)),
            [
                "spec.schedulingGates[2]: Forbidden: only deletion is allowed, but found new scheduling gate 'c'"
            ]
        );
    }
}
