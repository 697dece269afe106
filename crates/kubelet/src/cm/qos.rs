//! OOM score adjustment by QoS class (upstream `pkg/kubelet/qos/policy.go`); the class
//! itself is skiff-api's (`skiff_api::core::pod::qos`).

use k8s_openapi::api::core::v1::{Container, Pod};

pub use skiff_api::core::pod::qos::{QosClass, pod_qos};
use skiff_api::quantity;

/// OOM score adjustment of Guaranteed containers.
const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
/// OOM score adjustment of BestEffort containers.
const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;
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
            spec.resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
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
