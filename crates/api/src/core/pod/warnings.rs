//! Warnings about pods and pod templates (upstream 1.33 `pkg/api/pod/warnings.go`
//! `GetWarningsForPod` and `GetWarningsForPodTemplate`, with the helpers they use from
//! `pkg/api/node` and `pkg/api/persistentvolumeclaim`, and `pkg/api/job/warnings.go`).
//!
//! A warning is text the API server returns in a `Warning: 299 - "<text>"` header when it
//! accepts an object that is valid but probably not what its author meant (a deprecated
//! node label, an environment variable defined twice, ...). The object is stored as sent:
//! duplicate `env` entries and `ports` stay in the list, as upstream keeps them.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, NodeSelectorTerm, PersistentVolumeClaimSpec, Pod, PodAffinityTerm,
    PodSpec, PodTemplate, PodTemplateSpec, ReplicationController, ResourceRequirements, Volume,
    VolumeProjection, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::field::Path;
use crate::names;
use crate::quantity;

/// The pod annotation of the seccomp profile before the `seccompProfile` field.
const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
/// The prefix of a container's seccomp annotation (the container name follows).
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";
/// The prefix of a container's AppArmor annotation (the container name follows).
const APPARMOR_CONTAINER_ANNOTATION_PREFIX: &str =
    "container.apparmor.security.beta.kubernetes.io/";

/// Annotations that once configured a pod and no longer do, with upstream's message.
const DEPRECATED_ANNOTATIONS: [(&str, &str); 3] = [
    (
        "scheduler.alpha.kubernetes.io/critical-pod",
        "non-functional in v1.16+; use the \"priorityClassName\" field instead",
    ),
    (
        "security.alpha.kubernetes.io/sysctls",
        "non-functional in v1.11+; use the \"sysctls\" field instead",
    ),
    (
        "security.alpha.kubernetes.io/unsafe-sysctls",
        "non-functional in v1.11+; use the \"sysctls\" field instead",
    ),
];

/// The message of a deprecated node label (upstream `GetNodeLabelDeprecatedMessage`), or
/// `None` for a current one.
pub fn node_label_deprecation(key: &str) -> Option<&'static str> {
    Some(match key {
        "beta.kubernetes.io/arch" => "deprecated since v1.14; use \"kubernetes.io/arch\" instead",
        "beta.kubernetes.io/os" => "deprecated since v1.14; use \"kubernetes.io/os\" instead",
        "failure-domain.beta.kubernetes.io/region" => {
            "deprecated since v1.17; use \"topology.kubernetes.io/region\" instead"
        }
        "failure-domain.beta.kubernetes.io/zone" => {
            "deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead"
        }
        "beta.kubernetes.io/instance-type" => {
            "deprecated since v1.17; use \"node.kubernetes.io/instance-type\" instead"
        }
        "app.kubernetes.io/created-by" => "deprecated since v1.9",
        "scheduler.alpha.kubernetes.io/preferAvoidPods" => {
            "deprecated since v1.22; use Taints and Tolerations instead"
        }
        "node-role.kubernetes.io/master" => "use \"node-role.kubernetes.io/control-plane\" instead",
        _ => return None,
    })
}

/// The warnings of a pod (upstream `GetWarningsForPod`); paths start at the pod
/// (`spec.containers[0].env[1]`).
pub fn warnings_for_pod(pod: &Pod) -> Vec<String> {
    let spec = pod.spec.clone().unwrap_or_default();
    pod_spec_and_meta(None, &spec, &pod.metadata)
}

/// The warnings of a pod template at `path` (`spec.template`), upstream
/// `GetWarningsForPodTemplate`. A template without spec has none.
pub fn warnings_for_pod_template(path: &Path, template: &PodTemplateSpec) -> Vec<String> {
    let Some(spec) = &template.spec else {
        return Vec::new();
    };
    let metadata = template.metadata.clone().unwrap_or_default();
    pod_spec_and_meta(Some(path), spec, &metadata)
}

/// The warning upstream gives a workload (or pod) whose name is not a DNS label, although
/// valid: `what` is `Pod names and hostnames` for workloads (deployments, replicasets,
/// replicationcontrollers, jobs, cronjobs) and `the Pod's hostname` for pods.
pub fn name_warning(name: &str, what: &str) -> Option<String> {
    let problems = names::is_dns1123_label(name);
    (!problems.is_empty()).then(|| {
        format!(
            "metadata.name: this is used in {what}, which can result in surprising behavior; a DNS label is recommended: [{}]",
            problems.join(" ")
        )
    })
}

/// The warnings of a PersistentVolumeClaim spec at `path` (upstream
/// `GetWarningsForPersistentVolumeClaimSpec`): a fractional byte count of storage.
pub fn warnings_for_pvc_spec(path: &Path, spec: &PersistentVolumeClaimSpec) -> Vec<String> {
    let mut warnings = Vec::new();
    let resources = spec.resources.clone().unwrap_or_default();
    for (part, list) in [
        ("requests", &resources.requests),
        ("limits", &resources.limits),
    ] {
        if let Some(value) = list.as_ref().and_then(|l| l.get("storage")) {
            fractional_bytes(
                &mut warnings,
                &path.child("resources").child(part).key("storage"),
                value,
            );
        }
    }
    warnings
}

/// The warnings of a Job spec at `path` (`spec`, or `spec.jobTemplate.spec` of a
/// CronJob), upstream `WarningsForJobSpec`: very large Indexed Jobs, and the pod
/// template's warnings.
pub fn warnings_for_job_spec(path: &Path, spec: &JobSpec) -> Vec<String> {
    const COMPLETIONS_SOFT_LIMIT: i32 = 100_000;
    const PARALLELISM_SOFT_LIMIT: i32 = 10_000;
    let mut warnings = Vec::new();
    if spec.completion_mode.as_deref() == Some("Indexed")
        && spec.completions.unwrap_or(0) > COMPLETIONS_SOFT_LIMIT
        && spec.parallelism.unwrap_or(0) > PARALLELISM_SOFT_LIMIT
    {
        warnings.push(format!(
            "{path}: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail"
        ));
    }
    warnings.extend(warnings_for_pod_template(
        &path.child("template"),
        &spec.template,
    ));
    warnings
}

/// What the names of workloads are used in, for [`name_warning`].
const WORKLOAD_NAME_USE: &str = "Pod names and hostnames";

/// `spec.template`, where most workloads keep their pod template.
fn spec_template() -> Path {
    Path::new("spec").child("template")
}

/// The pod strategy's WarningsOnCreate: the name ([`name_warning`]) and
/// [`warnings_for_pod`]. Pods warn on create only (upstream skips updates, a hot path).
pub fn pod_create_warnings(pod: &Pod) -> Vec<String> {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let mut warnings: Vec<String> = name_warning(name, "the Pod's hostname")
        .into_iter()
        .collect();
    warnings.extend(warnings_for_pod(pod));
    warnings
}

/// WarningsOnCreate of Deployments and ReplicaSets: the name and the template at
/// `spec.template`.
pub fn workload_create_warnings(name: Option<&str>, template: &PodTemplateSpec) -> Vec<String> {
    let mut warnings: Vec<String> = name_warning(name.unwrap_or(""), WORKLOAD_NAME_USE)
        .into_iter()
        .collect();
    warnings.extend(warnings_for_pod_template(&spec_template(), template));
    warnings
}

/// WarningsOnUpdate of Deployments, ReplicaSets and DaemonSets: the template's warnings
/// when the update changed the spec (`changed`: a new generation, for DaemonSets a new
/// template).
pub fn template_update_warnings(changed: bool, template: &PodTemplateSpec) -> Vec<String> {
    if changed {
        warnings_for_pod_template(&spec_template(), template)
    } else {
        Vec::new()
    }
}

/// WarningsOnCreate of DaemonSets: the template's (no name warning).
pub fn daemon_set_create_warnings(daemon_set: &DaemonSet) -> Vec<String> {
    warnings_for_pod_template(&spec_template(), &daemon_set.spec.template)
}

/// WarningsOnCreate (`old` none) and WarningsOnUpdate of ReplicationControllers. On update
/// upstream warns about the stored (old) template when the generation changed, as it
/// passes the templates in that order.
pub fn replication_controller_warnings(
    new: &ReplicationController,
    old: Option<&ReplicationController>,
) -> Vec<String> {
    let template = |rc: &ReplicationController| rc.spec.as_ref().and_then(|s| s.template.clone());
    match old {
        None => {
            let name = new.metadata.name.as_deref().unwrap_or("");
            let mut warnings: Vec<String> =
                name_warning(name, WORKLOAD_NAME_USE).into_iter().collect();
            if let Some(t) = template(new) {
                warnings.extend(warnings_for_pod_template(&spec_template(), &t));
            }
            warnings
        }
        Some(old) if old.metadata.generation != new.metadata.generation => template(old)
            .map(|t| warnings_for_pod_template(&spec_template(), &t))
            .unwrap_or_default(),
        Some(_) => Vec::new(),
    }
}

/// WarningsOnCreate (`old` none) and WarningsOnUpdate of PodTemplates: the template at
/// `template`, on update when it changed.
pub fn pod_template_warnings(new: &PodTemplate, old: Option<&PodTemplate>) -> Vec<String> {
    if old.is_some_and(|o| o.template == new.template) {
        return Vec::new();
    }
    let template = new.template.clone().unwrap_or_default();
    warnings_for_pod_template(&Path::new("template"), &template)
}

/// WarningsOnCreate (`old` none) and WarningsOnUpdate of StatefulSets: the template (on
/// update when the generation changed), the volume claim templates'
/// ([`warnings_for_pvc_spec`]; upstream names them `spec.volumeClaimTemplates[0]` on
/// create, `spec.volumeClaimTemplates[0].Spec` on update), and a negative
/// revisionHistoryLimit.
pub fn stateful_set_warnings(new: &StatefulSet, old: Option<&StatefulSet>) -> Vec<String> {
    let spec = &new.spec;
    let changed = old.is_none_or(|o| o.metadata.generation != new.metadata.generation);
    let mut warnings = template_update_warnings(changed, &spec.template);
    let claims_path = Path::new("spec").child("volumeClaimTemplates");
    for (i, claim) in spec.volume_claim_templates.iter().flatten().enumerate() {
        let path = match old {
            None => claims_path.index(i),
            Some(_) => claims_path.index(i).child("Spec"),
        };
        let claim_spec = claim.spec.clone().unwrap_or_default();
        warnings.extend(warnings_for_pvc_spec(&path, &claim_spec));
    }
    if spec.revision_history_limit.is_some_and(|l| l < 0) {
        warnings.push(
            "spec.revisionHistoryLimit: a negative value retains all historical revisions; a value >= 0 is recommended"
                .to_owned(),
        );
    }
    warnings
}

/// WarningsOnCreate (`old` none) and WarningsOnUpdate of Jobs: the name on create, and
/// [`warnings_for_job_spec`] at `spec` (on update when the generation changed).
pub fn job_warnings(new: &Job, old: Option<&Job>) -> Vec<String> {
    let spec = new.spec.clone().unwrap_or_default();
    match old {
        None => {
            let name = new.metadata.name.as_deref().unwrap_or("");
            let mut warnings: Vec<String> =
                name_warning(name, WORKLOAD_NAME_USE).into_iter().collect();
            warnings.extend(warnings_for_job_spec(&Path::new("spec"), &spec));
            warnings
        }
        Some(old) if old.metadata.generation != new.metadata.generation => {
            warnings_for_job_spec(&Path::new("spec"), &spec)
        }
        Some(_) => Vec::new(),
    }
}

/// WarningsOnCreate (`old` none) and WarningsOnUpdate of CronJobs: the name on create,
/// [`warnings_for_job_spec`] at `spec.jobTemplate.spec` (on update when the generation
/// changed), and on update a schedule with a time zone (upstream's message names it
/// `spec.spec.schedule`).
pub fn cron_job_warnings(new: &CronJob, old: Option<&CronJob>) -> Vec<String> {
    let spec = &new.spec;
    let job_spec = spec.job_template.spec.clone().unwrap_or_default();
    let path = Path::new("spec").child("jobTemplate").child("spec");
    match old {
        None => {
            let name = new.metadata.name.as_deref().unwrap_or("");
            let mut warnings: Vec<String> =
                name_warning(name, WORKLOAD_NAME_USE).into_iter().collect();
            warnings.extend(warnings_for_job_spec(&path, &job_spec));
            warnings
        }
        Some(old) => {
            let mut warnings = if old.metadata.generation != new.metadata.generation {
                warnings_for_job_spec(&path, &job_spec)
            } else {
                Vec::new()
            };
            if spec.schedule.contains("TZ") {
                warnings.push(
                    "cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
                        .to_owned(),
                );
            }
            warnings
        }
    }
}

/// `root.name`, or `name` at the top of a pod (upstream's nil path).
fn at(root: Option<&Path>, name: &str) -> Path {
    match root {
        Some(root) => root.child(name),
        None => Path::new(name),
    }
}

/// Upstream `warningsForPodSpecAndMeta`, in its order.
fn pod_spec_and_meta(root: Option<&Path>, spec: &PodSpec, meta: &ObjectMeta) -> Vec<String> {
    let mut warnings = Vec::new();
    let spec_path = at(root, "spec");
    let annotations_path = at(root, "metadata").child("annotations");
    let empty = BTreeMap::new();
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);

    // Deprecated node labels in selectors, affinity and topology.
    for key in spec.node_selector.iter().flat_map(BTreeMap::keys) {
        if let Some(msg) = node_label_deprecation(key) {
            warnings.push(format!(
                "{}: {msg}",
                spec_path.child("nodeSelector").key(key)
            ));
        }
    }
    if let Some(node_affinity) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
    {
        let node_affinity_path = spec_path.child("affinity").child("nodeAffinity");
        if let Some(required) = &node_affinity.required_during_scheduling_ignored_during_execution {
            let terms_path = node_affinity_path
                .child("requiredDuringSchedulingIgnoredDuringExecution")
                .child("nodeSelectorTerms");
            for (i, term) in required.node_selector_terms.iter().enumerate() {
                node_selector_term(&mut warnings, term, &terms_path.index(i));
            }
        }
        let preferred_path =
            node_affinity_path.child("preferredDuringSchedulingIgnoredDuringExecution");
        let preferred = node_affinity
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten();
        for (i, term) in preferred.enumerate() {
            let path = preferred_path.index(i).child("preference");
            node_selector_term(&mut warnings, &term.preference, &path);
        }
    }
    let constraints_path = spec_path.child("topologySpreadConstraints");
    let constraints = spec.topology_spread_constraints.iter().flatten();
    for (i, constraint) in constraints.enumerate() {
        let path = constraints_path.index(i);
        if let Some(msg) = node_label_deprecation(&constraint.topology_key) {
            warnings.push(format!(
                "{}: {} is {msg}",
                path.child("topologyKey"),
                constraint.topology_key
            ));
        }
        if constraint.label_selector.is_none() {
            warnings.push(format!(
                "{}: a null labelSelector results in matching no pod",
                path.child("labelSelector")
            ));
        }
    }

    // Deprecated annotations (none of upstream's entries is a prefix).
    for (key, msg) in DEPRECATED_ANNOTATIONS {
        if annotations.contains_key(key) {
            warnings.push(format!("{}: {msg}", annotations_path.key(key)));
        }
    }

    // Deprecated and removed volume plugins.
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    let volumes_path = spec_path.child("volumes");
    for (i, volume) in volumes.iter().enumerate() {
        volume_warnings(&mut warnings, volume, &volumes_path.index(i));
    }
    overlapping_paths(&mut warnings, volumes);

    // Duplicate hostAliases and imagePullSecrets, and pull secrets without a name.
    let mut ips = HashSet::new();
    for (i, alias) in spec.host_aliases.iter().flatten().enumerate() {
        let ip = alias.ip.as_str();
        if !ips.insert(ip) {
            let path = spec_path.child("hostAliases").index(i).child("ip");
            warnings.push(format!("{path}: duplicate ip {ip:?}"));
        }
    }
    let pull_secrets = spec.image_pull_secrets.as_deref().unwrap_or_default();
    let pull_secrets_path = spec_path.child("imagePullSecrets");
    let mut secret_names = HashSet::new();
    for (i, secret) in pull_secrets.iter().enumerate() {
        if !secret_names.insert(secret.name.as_str()) {
            let path = pull_secrets_path.index(i).child("name");
            warnings.push(format!("{path}: duplicate name {:?}", secret.name));
        }
    }
    for (i, secret) in pull_secrets.iter().enumerate() {
        if secret.name.is_empty() {
            let path = pull_secrets_path.index(i).child("name");
            warnings.push(format!("{path}: invalid empty name {:?}", secret.name));
        }
    }

    // Fractional bytes of the pod overhead.
    for resource in ["memory", "ephemeral-storage"] {
        if let Some(value) = spec.overhead.as_ref().and_then(|o| o.get(resource)) {
            fractional_bytes(
                &mut warnings,
                &spec_path.child("overhead").key(resource),
                value,
            );
        }
    }

    // The pod seccomp annotation without the field.
    let pod_security = spec.security_context.as_ref();
    if pod_security
        .and_then(|s| s.seccomp_profile.as_ref())
        .is_none()
        && annotations.contains_key(SECCOMP_POD_ANNOTATION)
    {
        warnings.push(format!(
            "{}: non-functional in v1.27+; use the \"seccompProfile\" field instead",
            annotations_path.key(SECCOMP_POD_ANNOTATION)
        ));
    }
    let pod_apparmor = pod_security
        .and_then(|s| s.app_armor_profile.as_ref())
        .is_some();

    let containers = visit_containers(spec, &spec_path);
    for (c, path) in &containers {
        let security = c.security_context.as_ref();
        let seccomp_key = format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", c.name);
        if security.and_then(|s| s.seccomp_profile.as_ref()).is_none()
            && annotations.contains_key(&seccomp_key)
        {
            warnings.push(format!(
                "{}: non-functional in v1.27+; use the \"seccompProfile\" field instead",
                annotations_path.key(&seccomp_key)
            ));
        }
        // Pods get this warning from their AppArmor version skew handling instead.
        let has_apparmor_field = pod_apparmor
            || security
                .and_then(|s| s.app_armor_profile.as_ref())
                .is_some();
        let apparmor_key = format!("{APPARMOR_CONTAINER_ANNOTATION_PREFIX}{}", c.name);
        if root.is_some() && !has_apparmor_field && annotations.contains_key(&apparmor_key) {
            warnings.push(format!(
                "{}: deprecated since v1.30; use the \"appArmorProfile\" field instead",
                annotations_path.key(&apparmor_key)
            ));
        }
        container_resources(
            &mut warnings,
            c.resources.as_ref(),
            &path.child("resources"),
        );
        duplicate_env(&mut warnings, c, path);
    }
    ports(&mut warnings, &containers);

    if spec.termination_grace_period_seconds.is_some_and(|g| g < 0) {
        warnings.push(format!(
            "{}: must be >= 0; negative values are invalid and will be treated as 1",
            spec_path.child("terminationGracePeriodSeconds")
        ));
    }

    if let Some(affinity) = &spec.affinity {
        let affinity_path = spec_path.child("affinity");
        for (name, required, preferred) in super::affinity::pod_affinity_terms(affinity) {
            let path = affinity_path.child(name);
            affinity_terms(
                &mut warnings,
                required,
                &path.child("requiredDuringSchedulingIgnoredDuringExecution"),
            );
            weighted_affinity_terms(
                &mut warnings,
                preferred,
                &path.child("preferredDuringSchedulingIgnoredDuringExecution"),
            );
        }
    }
    warnings
}

/// Upstream `GetWarningsForNodeSelectorTerm`: deprecated labels in match expressions.
fn node_selector_term(warnings: &mut Vec<String>, term: &NodeSelectorTerm, path: &Path) {
    let expressions = term.match_expressions.iter().flatten();
    for (i, expression) in expressions.enumerate() {
        if let Some(msg) = node_label_deprecation(&expression.key) {
            let key_path = path.child("matchExpressions").index(i).child("key");
            warnings.push(format!("{key_path}: {} is {msg}", expression.key));
        }
    }
}

/// The deprecated volume plugins of one volume, and the warnings of a generic ephemeral
/// volume's claim template.
fn volume_warnings(warnings: &mut Vec<String>, volume: &Volume, path: &Path) {
    let plugins = [
        (
            volume.photon_persistent_disk.is_some(),
            "photonPersistentDisk",
            "deprecated in v1.11, non-functional in v1.16+",
        ),
        (volume.git_repo.is_some(), "gitRepo", "deprecated in v1.11"),
        (
            volume.scale_io.is_some(),
            "scaleIO",
            "deprecated in v1.16, non-functional in v1.22+",
        ),
        (
            volume.flocker.is_some(),
            "flocker",
            "deprecated in v1.22, non-functional in v1.25+",
        ),
        (
            volume.storageos.is_some(),
            "storageOS",
            "deprecated in v1.22, non-functional in v1.25+",
        ),
        (
            volume.quobyte.is_some(),
            "quobyte",
            "deprecated in v1.22, non-functional in v1.25+",
        ),
        (
            volume.glusterfs.is_some(),
            "glusterfs",
            "deprecated in v1.25, non-functional in v1.26+",
        ),
    ];
    for (set, name, msg) in plugins {
        if set {
            warnings.push(format!("{}: {msg}", path.child(name)));
        }
    }
    if let Some(template) = volume
        .ephemeral
        .as_ref()
        .and_then(|e| e.volume_claim_template.as_ref())
    {
        let spec_path = path
            .child("ephemeral")
            .child("volumeClaimTemplate")
            .child("spec");
        warnings.extend(warnings_for_pvc_spec(&spec_path, &template.spec));
    }
    for (set, name) in [
        (volume.cephfs.is_some(), "cephfs"),
        (volume.rbd.is_some(), "rbd"),
    ] {
        if set {
            warnings.push(format!(
                "{}: deprecated in v1.28, non-functional in v1.31+",
                path.child(name)
            ));
        }
    }
}

/// Upstream `warningsForOverlappingVirtualPaths`: keys of one configMap, secret,
/// downwardAPI or projected volume written to the same path, or one inside another.
fn overlapping_paths(warnings: &mut Vec<String>, volumes: &[Volume]) {
    for v in volumes {
        let name = &v.name;
        if let Some(items) = v.config_map.as_ref().and_then(|c| c.items.as_ref()) {
            let source = v.config_map.as_ref().map(|c| c.name.as_str()).unwrap_or("");
            let message = format!("volume {name:?} (ConfigMap {source:?}): overlapping paths");
            check_overlap(warnings, items.iter().map(|i| i.path.clone()), &message);
        }
        if let Some(items) = v.secret.as_ref().and_then(|s| s.items.as_ref()) {
            let source = v
                .secret
                .as_ref()
                .and_then(|s| s.secret_name.as_deref())
                .unwrap_or("");
            let message = format!("volume {name:?} (Secret {source:?}): overlapping paths");
            check_overlap(warnings, items.iter().map(|i| i.path.clone()), &message);
        }
        if let Some(items) = v.downward_api.as_ref().and_then(|d| d.items.as_ref()) {
            let message = format!("volume {name:?} (DownwardAPI): overlapping paths");
            check_overlap(warnings, items.iter().map(|i| i.path.clone()), &message);
        }
        if let Some(projected) = &v.projected {
            projected_overlaps(
                warnings,
                name,
                projected.sources.as_deref().unwrap_or_default(),
            );
        }
    }
}

/// The projected-volume part of [`overlapping_paths`]. As upstream, the paths and message
/// of a source that matches none of the cases are those of the source before it.
fn projected_overlaps(warnings: &mut Vec<String>, name: &str, sources: &[VolumeProjection]) {
    let mut source_paths: Vec<String> = Vec::new();
    let mut message = String::new();
    let mut all_paths: Vec<String> = Vec::new();
    for source in sources {
        if *source == VolumeProjection::default() {
            warnings.push(format!(
                "volume {name:?} (Projected) has no sources provided"
            ));
            continue;
        }
        if let Some((cm, items)) = source
            .config_map
            .as_ref()
            .and_then(|c| c.items.as_ref().map(|i| (c, i)))
        {
            source_paths = items.iter().map(|i| i.path.clone()).collect();
            message = format!(
                "volume {name:?} (Projected ConfigMap {:?}): overlapping paths",
                cm.name
            );
        } else if let Some((secret, items)) = source
            .secret
            .as_ref()
            .and_then(|s| s.items.as_ref().map(|i| (s, i)))
        {
            source_paths = items.iter().map(|i| i.path.clone()).collect();
            message = format!(
                "volume {name:?} (Projected Secret {:?}): overlapping paths",
                secret.name
            );
        } else if let Some(items) = source.downward_api.as_ref().and_then(|d| d.items.as_ref()) {
            source_paths = items.iter().map(|i| i.path.clone()).collect();
            message = format!("volume {name:?} (Projected DownwardAPI): overlapping paths");
        } else if let Some(token) = &source.service_account_token {
            source_paths = vec![token.path.clone()];
            message = format!("volume {name:?} (Projected ServiceAccountToken): overlapping paths");
        } else if let Some(bundle) = &source.cluster_trust_bundle {
            source_paths = vec![bundle.path.clone()];
            let which = bundle
                .name
                .as_deref()
                .or(bundle.signer_name.as_deref())
                .unwrap_or("");
            message = format!(
                "volume {name:?} (Projected ClusterTrustBundle {which:?}): overlapping paths"
            );
        }
        if source_paths.is_empty() {
            continue;
        }
        check_overlap(warnings, source_paths.iter().cloned(), &message);
        let mut unique: Vec<String> = Vec::new();
        for path in &source_paths {
            if !unique.contains(path) {
                unique.push(path.clone());
            }
        }
        let mut ordered: Vec<String> = unique.iter().chain(&all_paths).cloned().collect();
        ordered.sort();
        check_overlap(warnings, ordered.into_iter(), &message);
        for path in unique {
            if !all_paths.contains(&path) {
                all_paths.push(path);
            }
        }
    }
}

/// Upstream `checkVolumeMappingForOverlap`: each path (without trailing slashes) against
/// the ones before it.
fn check_overlap(warnings: &mut Vec<String>, paths: impl Iterator<Item = String>, message: &str) {
    let mut seen: Vec<String> = Vec::new();
    for path in paths {
        let normalized = path.trim_end_matches('/').to_owned();
        if let Some(collision) = overlap(&seen, &normalized) {
            warnings.push(format!("{message}: {normalized:?} with {collision:?}"));
        }
        if !seen.contains(&normalized) {
            seen.push(normalized);
        }
    }
}

/// Upstream `checkForOverlap`: the first earlier path equal to `path`, or one of the two
/// a directory of the other; none once an empty path is met.
fn overlap<'a>(seen: &'a [String], path: &str) -> Option<&'a str> {
    for item in seen {
        if item.is_empty() || path.is_empty() {
            return None;
        }
        if item == path
            || format!("{item}/").starts_with(path)
            || format!("{path}/").starts_with(item.as_str())
        {
            return Some(item);
        }
    }
    None
}

/// Every container of a spec with its path, in upstream's `VisitContainersWithPath`
/// order: init containers, containers, ephemeral containers (read as containers).
fn visit_containers(spec: &PodSpec, spec_path: &Path) -> Vec<(Container, Path)> {
    let mut out = Vec::new();
    let init_path = spec_path.child("initContainers");
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        out.push((c.clone(), init_path.index(i)));
    }
    let containers_path = spec_path.child("containers");
    for (i, c) in spec.containers.iter().enumerate() {
        out.push((c.clone(), containers_path.index(i)));
    }
    let ephemeral_path = spec_path.child("ephemeralContainers");
    for (i, ec) in spec.ephemeral_containers.iter().flatten().enumerate() {
        let container = serde_json::to_value(ec)
            .ok()
            .and_then(|v| serde_json::from_value::<Container>(v).ok())
            .unwrap_or_default();
        out.push((container, ephemeral_path.index(i)));
    }
    out
}

/// Fractional bytes in a container's memory and ephemeral-storage limits and requests.
fn container_resources(
    warnings: &mut Vec<String>,
    resources: Option<&ResourceRequirements>,
    path: &Path,
) {
    let Some(resources) = resources else {
        return;
    };
    for resource in ["memory", "ephemeral-storage"] {
        for (part, list) in [
            ("limits", &resources.limits),
            ("requests", &resources.requests),
        ] {
            if let Some(value) = list.as_ref().and_then(|l| l.get(resource)) {
                fractional_bytes(warnings, &path.child(part).key(resource), value);
            }
        }
    }
}

/// `<path>: fractional byte value "500m" is invalid, must be an integer` when `value` is
/// not a whole number of bytes.
fn fractional_bytes(warnings: &mut Vec<String>, path: &Path, value: &Quantity) {
    if quantity::milli_value(value) % 1000 != 0 {
        warnings.push(format!(
            "{path}: fractional byte value {:?} is invalid, must be an integer",
            canonical(value)
        ));
    }
}

/// A fractional quantity as upstream's `Quantity.String()` prints it: the largest of the
/// `m`, `u` and `n` suffixes with a whole mantissa (`0.5` is `500m`).
fn canonical(value: &Quantity) -> String {
    let Some(v) = quantity::parse(value) else {
        return value.0.clone();
    };
    for (suffix, scale) in [("m", 1e3), ("u", 1e6), ("n", 1e9)] {
        let scaled = v * scale;
        if (scaled - scaled.round()).abs() < 1e-6 {
            return format!("{}{suffix}", scaled.round() as i64);
        }
    }
    value.0.clone()
}

/// An env var defined again after an earlier one of the same name: warned unless the new
/// value refers to the old one (`X=$(X):more`).
fn duplicate_env(warnings: &mut Vec<String>, c: &Container, path: &Path) {
    let env = c.env.as_deref().unwrap_or_default();
    if env.len() < 2 {
        return;
    }
    let mut names = HashSet::new();
    for (i, item) in env.iter().enumerate() {
        if names.insert(item.name.as_str()) {
            continue;
        }
        let reference = format!("$({})", item.name);
        let value = item.value.as_deref().unwrap_or("");
        let hides = item.value_from.is_some() || value == reference || !value.contains(&reference);
        if hides {
            warnings.push(format!(
                "{}: hides previous definition of {:?}, which may be dropped when using apply",
                path.child("env").index(i),
                item.name
            ));
        }
    }
}

/// Go's `%+v` of an internal ContainerPort, as upstream prints it.
fn port_text(port: &ContainerPort) -> String {
    format!(
        "{{Name:{} HostPort:{} ContainerPort:{} Protocol:{} HostIP:{}}}",
        port.name.as_deref().unwrap_or(""),
        port.host_port.unwrap_or(0),
        port.container_port,
        port.protocol.as_deref().unwrap_or(""),
        port.host_ip.as_deref().unwrap_or("")
    )
}

/// Ports across all containers: a hostIP without hostPort, and duplicate, overlapping or
/// ambiguous definitions of one container port and protocol.
fn ports(warnings: &mut Vec<String>, containers: &[(Container, Path)]) {
    let mut seen: HashMap<String, Vec<(Path, &ContainerPort)>> = HashMap::new();
    for (c, path) in containers {
        for (i, port) in c.ports.iter().flatten().enumerate() {
            let port_path = path.child("ports").index(i);
            let host_ip = port.host_ip.as_deref().unwrap_or("");
            let host_port = port.host_port.unwrap_or(0);
            if !host_ip.is_empty() && host_port == 0 {
                warnings.push(format!(
                    "{port_path}: hostIP set without hostPort: {}",
                    port_text(port)
                ));
            }
            let key = format!(
                "{}/{}",
                port.container_port,
                port.protocol.as_deref().unwrap_or("")
            );
            let others = seen.entry(key).or_default();
            for (other_path, other) in others.iter() {
                let other_ip = other.host_ip.as_deref().unwrap_or("");
                let other_port = other.host_port.unwrap_or(0);
                if host_ip == other_ip && host_port == other_port {
                    warnings.push(format!(
                        "{port_path}: duplicate port definition with {other_path}"
                    ));
                } else if host_port == 0 || other_port == 0 {
                    warnings.push(format!(
                        "{port_path}: overlapping port definition with {other_path}"
                    ));
                } else if host_port == other_port && (host_ip.is_empty() != other_ip.is_empty()) {
                    warnings.push(format!(
                        "{port_path}: dangerously ambiguous port definition with {other_path}"
                    ));
                }
            }
            others.push((port_path, port));
        }
    }
}

/// Required pod (anti-)affinity terms without a label selector.
fn affinity_terms(warnings: &mut Vec<String>, terms: &[PodAffinityTerm], path: &Path) {
    for (i, term) in terms.iter().enumerate() {
        if term.label_selector.is_none() {
            warnings.push(format!(
                "{}: a null labelSelector results in matching no pod",
                path.index(i).child("labelSelector")
            ));
        }
    }
}

/// Preferred pod (anti-)affinity terms without a label selector.
fn weighted_affinity_terms(
    warnings: &mut Vec<String>,
    terms: &[WeightedPodAffinityTerm],
    path: &Path,
) {
    for (i, term) in terms.iter().enumerate() {
        if term.pod_affinity_term.label_selector.is_none() {
            warnings.push(format!(
                "{}: a null labelSelector results in matching no pod",
                path.index(i)
                    .child("podAffinityTerm")
                    .child("labelSelector")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::pod::default_pod;

    fn pod(value: serde_json::Value) -> Pod {
        let mut pod: Pod = serde_json::from_value(value).unwrap();
        default_pod(&mut pod);
        pod
    }

    #[test]
    fn pod_warnings_follow_upstream() {
        let pod = pod(json!({
            "metadata": {"name": "p", "annotations": {
                "seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
                "scheduler.alpha.kubernetes.io/critical-pod": "",
            }},
            "spec": {
                "nodeSelector": {"beta.kubernetes.io/os": "linux"},
                "terminationGracePeriodSeconds": -5,
                "imagePullSecrets": [{"name": "a"}, {"name": "a"}, {"name": ""}],
                "volumes": [{"name": "g", "gitRepo": {"repository": "r"}},
                            {"name": "c", "configMap": {"name": "cm", "items": [
                                {"key": "a", "path": "x"}, {"key": "b", "path": "x/y"}]}}],
                "containers": [{
                    "name": "c", "image": "i",
                    "env": [{"name": "FOO", "value": "1"}, {"name": "FOO", "value": "2"},
                            {"name": "FOO", "value": "$(FOO):3"}],
                    "ports": [{"containerPort": 80}, {"containerPort": 80},
                              {"containerPort": 81, "hostIP": "10.0.0.1"}],
                    "resources": {"requests": {"memory": "1.5"}},
                }],
            },
        }));
        assert_eq!(
            warnings_for_pod(&pod),
            [
                "spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use \"kubernetes.io/os\" instead",
                "metadata.annotations[scheduler.alpha.kubernetes.io/critical-pod]: non-functional in v1.16+; use the \"priorityClassName\" field instead",
                "spec.volumes[0].gitRepo: deprecated in v1.11",
                "volume \"c\" (ConfigMap \"cm\"): overlapping paths: \"x/y\" with \"x\"",
                "spec.imagePullSecrets[1].name: duplicate name \"a\"",
                "spec.imagePullSecrets[2].name: invalid empty name \"\"",
                "metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: non-functional in v1.27+; use the \"seccompProfile\" field instead",
                "spec.containers[0].resources.requests[memory]: fractional byte value \"1500m\" is invalid, must be an integer",
                "spec.containers[0].env[1]: hides previous definition of \"FOO\", which may be dropped when using apply",
                "spec.containers[0].ports[1]: duplicate port definition with spec.containers[0].ports[0]",
                "spec.containers[0].ports[2]: hostIP set without hostPort: {Name: HostPort:0 ContainerPort:81 Protocol:TCP HostIP:10.0.0.1}",
                "spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will be treated as 1",
            ]
        );
        assert_eq!(
            name_warning("a.b", "the Pod's hostname").as_deref(),
            Some(
                "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]"
            )
        );
    }

    #[test]
    fn template_warnings_carry_the_template_path() {
        let template: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}},
            "spec": {
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "Exists"}]}]}},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "kubernetes.io/hostname"}]},
                },
                "containers": [{"name": "c", "image": "i"}],
            },
        }))
        .unwrap();
        let path = Path::new("spec").child("template");
        assert_eq!(
            warnings_for_pod_template(&path, &template),
            [
                "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key: failure-domain.beta.kubernetes.io/zone is deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead",
                "spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: deprecated since v1.30; use the \"appArmorProfile\" field instead",
                "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector: a null labelSelector results in matching no pod",
            ]
        );
    }
}
