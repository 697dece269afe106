//! Pod QoS classes and OOM score adjustment (upstream `pkg/apis/core/v1/helper/qos`
//! `GetPodQOS` and `pkg/kubelet/qos/policy.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity;

/// The QoS class of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    /// Every container has equal cpu and memory requests and limits.
    Guaranteed,
    /// Some requests or limits, not Guaranteed.
    Burstable,
    /// No cpu or memory requests or limits at all.
    BestEffort,
}

impl QosClass {
    /// The API name (`Guaranteed`, `Burstable`, `BestEffort`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Guaranteed => "Guaranteed",
            Self::Burstable => "Burstable",
            Self::BestEffort => "BestEffort",
        }
    }
}

/// OOM score adjustment of Guaranteed containers.
const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
/// OOM score adjustment of BestEffort containers.
const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;
/// The resources that decide the QoS class.
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Computes the QoS class (upstream `ComputePodQOS`): from the pod-level resources when
/// the pod sets them (PodLevelResources), else per container, init containers included:
/// a container is BestEffort without cpu and memory requests and limits, Guaranteed when
/// its cpu and memory requests equal its limits and are set; the pod is Guaranteed or
/// BestEffort when all its containers are, else Burstable.
pub fn pod_qos(pod: &Pod) -> QosClass {
    let Some(spec) = pod.spec.as_ref() else {
        return QosClass::BestEffort;
    };
    if let Some(resources) = spec.resources.as_ref() {
        return resource_qos(resources);
    }
    let mut pod_qos = None;
    for container in spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
    {
        let qos = container
            .resources
            .as_ref()
            .map_or(QosClass::BestEffort, resource_qos);
        match pod_qos {
            _ if qos == QosClass::Burstable => return qos,
            None => pod_qos = Some(qos),
            Some(seen) if seen != qos => return QosClass::Burstable,
            Some(_) => {}
        }
    }
    pod_qos.unwrap_or(QosClass::BestEffort)
}

/// The QoS class of one set of requests and limits (upstream `resourceQOS`).
fn resource_qos(resources: &ResourceRequirements) -> QosClass {
    let amount = |list: Option<&BTreeMap<String, Quantity>>, name: &str| {
        list.and_then(|l| l.get(name))
            .and_then(quantity::parse)
            .unwrap_or(0.0)
    };
    let mut qos = None;
    for name in QOS_RESOURCES {
        let request = amount(resources.requests.as_ref(), name);
        let limit = amount(resources.limits.as_ref(), name);
        if request != limit {
            return QosClass::Burstable;
        }
        let class = if request == 0.0 {
            QosClass::BestEffort
        } else {
            QosClass::Guaranteed
        };
        match qos {
            None => qos = Some(class),
            Some(seen) if seen != class => return QosClass::Burstable,
            Some(_) => {}
        }
    }
    qos.unwrap_or(QosClass::BestEffort)
}

/// The `oom_score_adj` of a container: -997 Guaranteed, 1000 BestEffort, and for
/// Burstable `1000 - 1000 * memoryRequest / memoryCapacity` clamped to [3, 999].
pub fn container_oom_score_adj(pod: &Pod, container: &Container, memory_capacity: i64) -> i64 {
    match pod_qos(pod) {
        QosClass::Guaranteed => GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => BEST_EFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {
            let request = container
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("memory"))
                .map_or(0, quantity::value);
            let adj = if memory_capacity > 0 {
                1000 - (1000 * i128::from(request) / i128::from(memory_capacity)) as i64
            } else {
                1000
            };
            adj.clamp(
                1000 + GUARANTEED_OOM_SCORE_ADJ,
                BEST_EFFORT_OOM_SCORE_ADJ - 1,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pods::{self, Pairs, resource_list as res};

    fn pod(containers: &[(Pairs<'_>, Pairs<'_>)]) -> Pod {
        test_pods::pod(
            containers
                .iter()
                .enumerate()
                .map(|(i, (req, lim))| test_pods::container(&format!("c{i}"), req, lim))
                .collect(),
        )
    }

    #[test]
    fn qos_classes() {
        assert_eq!(pod_qos(&pod(&[(&[], &[])])), QosClass::BestEffort);
        let full = [("cpu", "1"), ("memory", "1Gi")];
        assert_eq!(pod_qos(&pod(&[(&full, &full)])), QosClass::Guaranteed);
        assert_eq!(
            pod_qos(&pod(&[(&full, &full), (&[], &[])])),
            QosClass::Burstable
        );
        assert_eq!(
            pod_qos(&pod(&[(&[("cpu", "100m")], &[])])),
            QosClass::Burstable
        );
        assert_eq!(
            pod_qos(&pod(&[(&[("cpu", "500m"), ("memory", "1Gi")], &full)])),
            QosClass::Burstable
        );
        assert_eq!(
            pod_qos(&pod(&[(&[("ephemeral-storage", "1Gi")], &[])])),
            QosClass::BestEffort
        );
    }

    #[test]
    fn init_containers_and_pod_level_resources_count() {
        let full = [("cpu", "1"), ("memory", "1Gi")];
        let mut p = pod(&[(&full, &full)]);
        let init = pod(&[(&[], &[])])
            .spec
            .map(|s| s.containers)
            .unwrap_or_default();
        if let Some(spec) = p.spec.as_mut() {
            spec.init_containers = Some(init);
        }
        assert_eq!(pod_qos(&p), QosClass::Burstable);
        let mut p = pod(&[(&[], &[])]);
        if let Some(spec) = p.spec.as_mut() {
            spec.resources = Some(ResourceRequirements {
                requests: res(&full),
                limits: res(&full),
                ..Default::default()
            });
        }
        assert_eq!(pod_qos(&p), QosClass::Guaranteed);
        // Equal quantities written differently are equal.
        let p = pod(&[(
            &[("cpu", "1000m"), ("memory", "1024Mi")],
            &[("cpu", "1"), ("memory", "1Gi")],
        )]);
        assert_eq!(pod_qos(&p), QosClass::Guaranteed);
    }

    #[test]
    fn oom_score_adj_per_qos() {
        let full = [("cpu", "1"), ("memory", "1Gi")];
        let p = pod(&[(&full, &full)]);
        let c = &p
            .spec
            .as_ref()
            .map(|s| s.containers[0].clone())
            .unwrap_or_default();
        assert_eq!(container_oom_score_adj(&p, c, 8 << 30), -997);
        let p = pod(&[(&[], &[])]);
        assert_eq!(
            container_oom_score_adj(&p, &Container::default(), 8 << 30),
            1000
        );
        let p = pod(&[(&[("memory", "2Gi")], &[])]);
        let c = p
            .spec
            .as_ref()
            .map(|s| s.containers[0].clone())
            .unwrap_or_default();
        assert_eq!(container_oom_score_adj(&p, &c, 8 << 30), 750);
        let p = pod(&[(&[("memory", "8Gi")], &[])]);
        let c = p
            .spec
            .as_ref()
            .map(|s| s.containers[0].clone())
            .unwrap_or_default();
        assert_eq!(container_oom_score_adj(&p, &c, 8 << 30), 3);
        let p = pod(&[(&[("cpu", "1m")], &[])]);
        assert_eq!(
            container_oom_score_adj(&p, &Container::default(), 8 << 30),
            999
        );
    }
}
