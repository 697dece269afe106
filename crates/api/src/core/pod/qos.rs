//! Pod QoS classes (upstream `pkg/apis/core/helper/qos` `ComputePodQOS`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity;

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
    /// The API name (`Guaranteed`, `Burstable`, `BestEffort`), as `status.qosClass`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Guaranteed => "Guaranteed",
            Self::Burstable => "Burstable",
            Self::BestEffort => "BestEffort",
        }
    }
}

/// The resources that decide the QoS class.
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Computes the QoS class: from the pod-level resources when the pod sets them
/// (PodLevelResources), else per container, init containers included: a container is
/// BestEffort without cpu and memory requests and limits, Guaranteed when its cpu and
/// memory requests equal its limits and are set; the pod is Guaranteed or BestEffort when
/// all its containers are, else Burstable.
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
