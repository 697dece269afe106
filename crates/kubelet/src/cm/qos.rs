//! Pod QoS classes and OOM score adjustment (upstream `pkg/apis/core/v1/helper/qos`
//! `GetPodQOS` and `pkg/kubelet/qos/policy.go`).

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Container, Pod};

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

/// Computes the QoS class from the containers' cpu and memory requests and limits.
pub fn pod_qos(pod: &Pod) -> QosClass {
    let containers = pod.spec.iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    });
    let mut requests: BTreeMap<&str, f64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, f64> = BTreeMap::new();
    let mut guaranteed = true;
    for container in containers {
        let resources = container.resources.as_ref();
        for (name, q) in resources
            .and_then(|r| r.requests.as_ref())
            .into_iter()
            .flatten()
        {
            if let (Some(res), Some(v)) = (qos_resource(name), quantity::parse(q))
                && v > 0.0
            {
                *requests.entry(res).or_default() += v;
            }
        }
        let mut limits_found = HashSet::new();
        for (name, q) in resources
            .and_then(|r| r.limits.as_ref())
            .into_iter()
            .flatten()
        {
            if let (Some(res), Some(v)) = (qos_resource(name), quantity::parse(q))
                && v > 0.0
            {
                *limits.entry(res).or_default() += v;
                limits_found.insert(res);
            }
        }
        if limits_found.len() != QOS_RESOURCES.len() {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed
        && requests
            .iter()
            .all(|(name, req)| limits.get(name) == Some(req))
        && requests.len() == limits.len()
    {
        return QosClass::Guaranteed;
    }
    QosClass::Burstable
}

fn qos_resource(name: &str) -> Option<&'static str> {
    QOS_RESOURCES.into_iter().find(|r| *r == name)
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
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn res(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                .collect()
        })
    }

    type Pairs<'a> = &'a [(&'a str, &'a str)];

    fn pod(containers: &[(Pairs<'_>, Pairs<'_>)]) -> Pod {
        let containers = containers
            .iter()
            .enumerate()
            .map(|(i, (req, lim))| Container {
                name: format!("c{i}"),
                resources: Some(ResourceRequirements {
                    requests: res(req),
                    limits: res(lim),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        Pod {
            spec: Some(PodSpec {
                containers,
                ..Default::default()
            }),
            ..Default::default()
        }
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
