//! Labels and annotations the kubelet puts on sandboxes and containers and reads back
//! (upstream `pkg/kubelet/kuberuntime/labels.go`, `pkg/kubelet/types/labels.go`).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod};

/// Label: pod name.
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// Label: pod namespace.
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// Label: pod UID.
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// Label: container name.
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// Annotation: hash of the container spec the container was created from.
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
/// Annotation: restart count of the container.
pub const CONTAINER_RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
/// Annotation: termination message path.
pub const CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePath";
/// Annotation: termination message policy.
pub const CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePolicy";
/// Annotation: the pod's termination grace period in seconds.
pub const POD_TERMINATION_GRACE_PERIOD_ANNOTATION: &str =
    "io.kubernetes.pod.terminationGracePeriod";
/// Annotation: the container's ports as JSON.
pub const CONTAINER_PORTS_ANNOTATION: &str = "io.kubernetes.container.ports";
/// Annotation: the container's preStop handler as JSON, so the container can be stopped
/// gracefully without its pod spec.
pub const CONTAINER_PRE_STOP_HANDLER_ANNOTATION: &str = "io.kubernetes.container.preStopHandler";

/// Default termination grace period (seconds) when the pod sets none.
pub const DEFAULT_TERMINATION_GRACE_PERIOD: i64 = 30;

/// Pod name, namespace and UID, as the runtime objects of a pod are labelled.
pub fn pod_labels(pod: &Pod) -> HashMap<String, String> {
    HashMap::from([
        (
            POD_NAME_LABEL.to_owned(),
            pod.metadata.name.clone().unwrap_or_default(),
        ),
        (
            POD_NAMESPACE_LABEL.to_owned(),
            pod.metadata.namespace.clone().unwrap_or_default(),
        ),
        (
            POD_UID_LABEL.to_owned(),
            pod.metadata.uid.clone().unwrap_or_default(),
        ),
    ])
}

/// Sandbox labels: the pod's own labels plus [`pod_labels`].
pub fn sandbox_labels(pod: &Pod) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> = pod
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    labels.extend(pod_labels(pod));
    labels
}

/// Container labels: [`pod_labels`] plus the container name.
pub fn container_labels(pod: &Pod, container: &Container) -> HashMap<String, String> {
    let mut labels = pod_labels(pod);
    labels.insert(CONTAINER_NAME_LABEL.to_owned(), container.name.clone());
    labels
}

/// Container annotations: hash, restart count, termination message settings, grace
/// period, ports, preStop handler.
pub fn container_annotations(
    pod: &Pod,
    container: &Container,
    restart_count: i32,
) -> HashMap<String, String> {
    let mut annotations = HashMap::from([
        (
            CONTAINER_HASH_ANNOTATION.to_owned(),
            container_hash(container),
        ),
        (
            CONTAINER_RESTART_COUNT_ANNOTATION.to_owned(),
            restart_count.to_string(),
        ),
        (
            CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION.to_owned(),
            container
                .termination_message_path
                .clone()
                .unwrap_or_default(),
        ),
        (
            CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION.to_owned(),
            container
                .termination_message_policy
                .clone()
                .unwrap_or_default(),
        ),
        (
            POD_TERMINATION_GRACE_PERIOD_ANNOTATION.to_owned(),
            termination_grace_period(pod).to_string(),
        ),
    ]);
    if let Some(ports) = container.ports.as_ref().filter(|p| !p.is_empty())
        && let Ok(json) = serde_json::to_string(ports)
    {
        annotations.insert(CONTAINER_PORTS_ANNOTATION.to_owned(), json);
    }
    if let Some(pre_stop) = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        && let Ok(json) = serde_json::to_string(pre_stop)
    {
        annotations.insert(CONTAINER_PRE_STOP_HANDLER_ANNOTATION.to_owned(), json);
    }
    annotations
}

/// The pod's grace period in seconds: its deletionGracePeriodSeconds when it is being
/// deleted, else terminationGracePeriodSeconds, default 30 (upstream
/// `setTerminationGracePeriod`).
pub fn termination_grace_period(pod: &Pod) -> i64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(DEFAULT_TERMINATION_GRACE_PERIOD)
}

/// Hash of a container spec (FNV-1a 64 over its JSON, hex), stored on the container so a
/// changed spec is detected (upstream `HashContainer`).
pub fn container_hash(container: &Container) -> String {
    let json = serde_json::to_vec(container).unwrap_or_default();
    let hash = json.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_changes_with_spec() {
        let a = Container {
            name: "a".into(),
            image: Some("busybox".into()),
            ..Default::default()
        };
        let mut b = a.clone();
        assert_eq!(container_hash(&a), container_hash(&b));
        b.args = Some(vec!["sleep".into()]);
        assert_ne!(container_hash(&a), container_hash(&b));
    }
}
