//! The order in which a pod's containers are stopped (upstream
//! `kuberuntime_termination_order.go`): regular containers first, all at once; native
//! sidecars only after them, the last one first (KEP-753).

use k8s_openapi::api::core::v1::Pod;

use super::pod_actions::{init_containers, is_restartable_init_container};
use super::pod_status::ContainerStatus;

/// Splits `live` into stop rounds: the first holds every container that is not a native
/// sidecar of `pod` (regular and init containers, and names the spec no longer has), then
/// one round per sidecar, from the last declared to the first. Empty rounds are dropped.
pub fn termination_order<'a>(
    pod: &Pod,
    live: &[&'a ContainerStatus],
) -> Vec<Vec<&'a ContainerStatus>> {
    let sidecars: Vec<&str> = init_containers(pod)
        .iter()
        .filter(|c| is_restartable_init_container(c))
        .map(|c| c.name.as_str())
        .collect();
    let regular = live
        .iter()
        .filter(|c| !sidecars.contains(&c.name.as_str()))
        .copied()
        .collect();
    let rounds = sidecars.iter().rev().map(|name| {
        live.iter()
            .filter(|c| c.name == *name)
            .copied()
            .collect::<Vec<_>>()
    });
    std::iter::once(regular)
        .chain(rounds)
        .filter(|round| !round.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_cri::v1::ContainerState;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn status(name: &str) -> ContainerStatus {
        ContainerStatus {
            id: format!("id-{name}"),
            name: name.into(),
            state: ContainerState::ContainerRunning,
            created_at: 0,
            started_at: 0,
            finished_at: 0,
            exit_code: 0,
            image: String::new(),
            image_ref: String::new(),
            hash: String::new(),
            restart_count: 0,
            reason: String::new(),
            message: String::new(),
        }
    }

    #[test]
    fn sidecars_stop_after_main_containers_in_reverse_order() {
        let container = |name: &str, policy: Option<&str>| Container {
            name: name.into(),
            restart_policy: policy.map(str::to_owned),
            ..Default::default()
        };
        let pod = Pod {
            spec: Some(PodSpec {
                init_containers: Some(vec![
                    container("side1", Some("Always")),
                    container("init", None),
                    container("side2", Some("Always")),
                ]),
                containers: vec![container("a", None), container("b", None)],
                ..Default::default()
            }),
            ..Default::default()
        };
        let all = ["side1", "side2", "a", "b", "gone"].map(status);
        let live: Vec<&ContainerStatus> = all.iter().collect();
        let names: Vec<Vec<&str>> = termination_order(&pod, &live)
            .iter()
            .map(|round| round.iter().map(|c| c.name.as_str()).collect())
            .collect();
        assert_eq!(
            names,
            vec![vec!["a", "b", "gone"], vec!["side2"], vec!["side1"]]
        );
        let only_sidecar = [status("side1")];
        let live: Vec<&ContainerStatus> = only_sidecar.iter().collect();
        assert_eq!(termination_order(&pod, &live).len(), 1);
    }
}
