//! A pod's effective resource requests and limits (upstream
//! `k8s.io/component-helpers/resource` `PodRequests`, `PodLimits`,
//! `AggregateContainerRequests`), shared by the kubelet (cgroups, admission, eviction)
//! and the scheduler (fit, scoring).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity;

/// Resource amounts by resource name, in base units: `cpu` in millicores, every other
/// resource (memory, hugepages-*, ephemeral-storage, pods, extended resources) in units
/// (bytes, counts), as upstream's `MilliValue` / `Value`.
pub type ResourceAmounts = BTreeMap<String, i64>;

/// The cpu request the scheduler assumes for a container without one, in millicores
/// (upstream `DefaultMilliCPURequest`, 0.1 core); only for scoring, never for fit.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// The memory request the scheduler assumes for a container without one, in bytes
/// (upstream `DefaultMemoryRequest`, 200 MiB); only for scoring, never for fit.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// The resources a pod may set at the pod level (upstream `IsSupportedPodLevelResource`).
const POD_LEVEL_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Which list a container belongs to, as seen by [`PodResourcesOptions`] visitors
/// (upstream `podutil.ContainerType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerType {
    /// `spec.containers`.
    Containers,
    /// `spec.initContainers`, sidecars (restartable init containers) included.
    InitContainers,
}

/// How a pod's requests or limits are computed (upstream `PodResourcesOptions`).
#[derive(Debug, Clone, Default)]
pub struct PodResourcesOptions {
    /// Leave `spec.overhead` out.
    pub exclude_overhead: bool,
    /// Ignore `spec.resources` (the PodLevelResources feature off).
    pub skip_pod_level_resources: bool,
    /// Amounts assumed for a container that does not set a resource at all (the
    /// scheduler's non-zero requests: [`DEFAULT_MILLI_CPU_REQUEST`],
    /// [`DEFAULT_MEMORY_REQUEST`]); a resource set to 0 is kept.
    pub non_missing_container_requests: ResourceAmounts,
}

/// The amount of `q` in the unit of resource `name`: millicores for `cpu`, else units,
/// rounded up (0 when malformed).
pub fn resource_amount(name: &str, q: &Quantity) -> i64 {
    if name == "cpu" {
        quantity::milli_value(q)
    } else {
        quantity::value(q)
    }
}

/// A resource list (`requests`, `limits`, `overhead`, `allocatable`) as amounts, see
/// [`resource_amount`].
pub fn resource_amounts(list: Option<&BTreeMap<String, Quantity>>) -> ResourceAmounts {
    list.into_iter()
        .flatten()
        .map(|(name, q)| (name.clone(), resource_amount(name, q)))
        .collect()
}

/// Adds every amount of `list` to `into`.
pub fn add_amounts(into: &mut ResourceAmounts, list: &ResourceAmounts) {
    for (name, v) in list {
        let e = into.entry(name.clone()).or_default();
        *e = e.saturating_add(*v);
    }
}

fn max_amounts(into: &mut ResourceAmounts, list: &ResourceAmounts) {
    for (name, v) in list {
        let e = into.entry(name.clone()).or_default();
        *e = (*e).max(*v);
    }
}

/// True for a sidecar: an init container with `restartPolicy: Always`.
pub fn is_restartable_init_container(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Aggregates per-container lists (upstream `AggregateContainerRequests` / `Limits`):
/// the sum of the regular containers and the sidecars, or, when more, the largest
/// init container plus the sidecars started before it. `visit` sees each container's
/// effective list (for an init container: including the sidecars before it).
fn aggregate(
    pod: &Pod,
    list: impl Fn(&Container) -> ResourceAmounts,
    visit: &mut dyn FnMut(&ResourceAmounts, ContainerType),
) -> ResourceAmounts {
    let Some(spec) = pod.spec.as_ref() else {
        return ResourceAmounts::new();
    };
    let mut total = ResourceAmounts::new();
    for c in &spec.containers {
        let l = list(c);
        visit(&l, ContainerType::Containers);
        add_amounts(&mut total, &l);
    }
    let mut sidecars = ResourceAmounts::new();
    let mut init_max = ResourceAmounts::new();
    for c in spec.init_containers.iter().flatten() {
        let l = list(c);
        let effective = if is_restartable_init_container(c) {
            add_amounts(&mut total, &l);
            add_amounts(&mut sidecars, &l);
            sidecars.clone()
        } else {
            let mut tmp = l;
            add_amounts(&mut tmp, &sidecars);
            tmp
        };
        visit(&effective, ContainerType::InitContainers);
        max_amounts(&mut init_max, &effective);
    }
    max_amounts(&mut total, &init_max);
    total
}

fn pod_level<'a>(pod: &'a Pod, opts: &PodResourcesOptions) -> Option<&'a ResourceRequirements> {
    if opts.skip_pod_level_resources {
        return None;
    }
    pod.spec.as_ref().and_then(|s| s.resources.as_ref())
}

/// The container's requests, with `nonMissing` amounts for the resources it does not set.
fn container_requests(c: &Container, opts: &PodResourcesOptions) -> ResourceAmounts {
    let mut reqs = resource_amounts(c.resources.as_ref().and_then(|r| r.requests.as_ref()));
    for (name, v) in &opts.non_missing_container_requests {
        reqs.entry(name.clone()).or_insert(*v);
    }
    reqs
}

/// The pod's effective requests (upstream `PodRequests`): the aggregated container
/// requests (see the module doc: sum of containers and sidecars, at least the largest
/// init container with the sidecars before it), pod-level `cpu` / `memory` requests
/// where set, plus `spec.overhead`.
pub fn pod_requests(pod: &Pod, opts: &PodResourcesOptions) -> ResourceAmounts {
    let mut reqs = aggregate(pod, |c| container_requests(c, opts), &mut |_, _| {});
    if let Some(pod_level) = pod_level(pod, opts) {
        for (name, v) in resource_amounts(pod_level.requests.as_ref()) {
            if POD_LEVEL_RESOURCES.contains(&name.as_str()) {
                reqs.insert(name, v);
            }
        }
    }
    if !opts.exclude_overhead {
        let overhead = resource_amounts(pod.spec.as_ref().and_then(|s| s.overhead.as_ref()));
        add_amounts(&mut reqs, &overhead);
    }
    reqs
}

/// The pod's effective limits (upstream `PodLimits`): aggregated like the requests,
/// pod-level `cpu` / `memory` limits where set, and the overhead added to the limits
/// that are set. `visit` sees each container's effective limits (upstream `ContainerFn`).
pub fn pod_limits(
    pod: &Pod,
    opts: &PodResourcesOptions,
    visit: &mut dyn FnMut(&ResourceAmounts, ContainerType),
) -> ResourceAmounts {
    let limits_of =
        |c: &Container| resource_amounts(c.resources.as_ref().and_then(|r| r.limits.as_ref()));
    let mut limits = aggregate(pod, limits_of, visit);
    if let Some(pod_level) = pod_level(pod, opts) {
        for (name, v) in resource_amounts(pod_level.limits.as_ref()) {
            if POD_LEVEL_RESOURCES.contains(&name.as_str()) {
                limits.insert(name, v);
            }
        }
    }
    if !opts.exclude_overhead {
        for (name, v) in resource_amounts(pod.spec.as_ref().and_then(|s| s.overhead.as_ref())) {
            if let Some(limit) = limits.get_mut(&name) {
                *limit = limit.saturating_add(v);
            }
        }
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn list(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                .collect()
        })
    }

    fn container(name: &str, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        Container {
            name: name.into(),
            resources: Some(ResourceRequirements {
                requests: list(requests),
                limits: list(limits),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn sidecar(name: &str, requests: &[(&str, &str)]) -> Container {
        Container {
            restart_policy: Some("Always".into()),
            ..container(name, requests, &[])
        }
    }

    fn pod(containers: Vec<Container>, init: Vec<Container>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                init_containers: Some(init),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn amounts(pairs: &[(&str, i64)]) -> ResourceAmounts {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn requests_table() {
        let small = [("cpu", "100m"), ("memory", "10Mi")];
        let cases: Vec<(&str, Pod, ResourceAmounts)> = vec![
            ("no spec", Pod::default(), amounts(&[])),
            (
                "sum of containers",
                pod(
                    vec![container("a", &small, &[]), container("b", &small, &[])],
                    vec![],
                ),
                amounts(&[("cpu", 200), ("memory", 20 << 20)]),
            ),
            (
                "init container larger than the sum wins per resource",
                pod(
                    vec![container("a", &small, &[]), container("b", &small, &[])],
                    vec![container("init", &[("cpu", "1"), ("memory", "5Mi")], &[])],
                ),
                amounts(&[("cpu", 1000), ("memory", 20 << 20)]),
            ),
            (
                "sidecar adds to the containers and to later init containers",
                pod(
                    vec![container("a", &small, &[])],
                    vec![
                        sidecar("side", &[("cpu", "200m")]),
                        container("init", &[("cpu", "250m")], &[]),
                    ],
                ),
                // max(100 + 200, 200 + 250)
                amounts(&[("cpu", 450), ("memory", 10 << 20)]),
            ),
            (
                "init container before the sidecar does not count it",
                pod(
                    vec![container("a", &small, &[])],
                    vec![
                        container("init", &[("cpu", "250m")], &[]),
                        sidecar("side", &[("cpu", "200m")]),
                    ],
                ),
                amounts(&[("cpu", 300), ("memory", 10 << 20)]),
            ),
            (
                "extended resources and hugepages are summed too",
                pod(
                    vec![
                        container("a", &[("example.com/gpu", "1")], &[]),
                        container(
                            "b",
                            &[("example.com/gpu", "2"), ("hugepages-2Mi", "4Mi")],
                            &[],
                        ),
                    ],
                    vec![],
                ),
                amounts(&[("example.com/gpu", 3), ("hugepages-2Mi", 4 << 20)]),
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(
                pod_requests(&pod, &PodResourcesOptions::default()),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn overhead_pod_level_and_non_missing() {
        let mut p = pod(vec![container("a", &[("cpu", "100m")], &[])], vec![]);
        if let Some(spec) = p.spec.as_mut() {
            spec.overhead = list(&[("cpu", "50m"), ("memory", "1Mi")]);
        }
        let opts = PodResourcesOptions::default();
        assert_eq!(
            pod_requests(&p, &opts),
            amounts(&[("cpu", 150), ("memory", 1 << 20)])
        );
        let no_overhead = PodResourcesOptions {
            exclude_overhead: true,
            ..Default::default()
        };
        assert_eq!(pod_requests(&p, &no_overhead), amounts(&[("cpu", 100)]));

        // The scheduler's non-zero requests fill only resources a container omits.
        let non_zero = PodResourcesOptions {
            exclude_overhead: true,
            non_missing_container_requests: amounts(&[
                ("cpu", DEFAULT_MILLI_CPU_REQUEST),
                ("memory", DEFAULT_MEMORY_REQUEST),
            ]),
            ..Default::default()
        };
        assert_eq!(
            pod_requests(&p, &non_zero),
            amounts(&[("cpu", 100), ("memory", DEFAULT_MEMORY_REQUEST)])
        );
        let zero = pod(vec![container("a", &[("cpu", "0")], &[])], vec![]);
        assert_eq!(pod_requests(&zero, &non_zero)["cpu"], 0);

        // Pod-level requests replace the aggregated cpu and memory only.
        if let Some(spec) = p.spec.as_mut() {
            spec.resources = Some(ResourceRequirements {
                requests: list(&[("cpu", "1"), ("example.com/gpu", "1")]),
                ..Default::default()
            });
        }
        assert_eq!(
            pod_requests(&p, &opts),
            amounts(&[("cpu", 1050), ("memory", 1 << 20)])
        );
        let skip = PodResourcesOptions {
            skip_pod_level_resources: true,
            ..Default::default()
        };
        assert_eq!(pod_requests(&p, &skip)["cpu"], 150);
    }

    #[test]
    fn limits_add_overhead_only_where_set_and_visit_each_container() {
        let mut p = pod(
            vec![
                container("a", &[], &[("cpu", "1")]),
                container("b", &[], &[("cpu", "500m"), ("memory", "64Mi")]),
            ],
            vec![container("init", &[], &[("cpu", "2")])],
        );
        if let Some(spec) = p.spec.as_mut() {
            spec.overhead = list(&[("cpu", "100m"), ("ephemeral-storage", "1Gi")]);
        }
        let mut seen = Vec::new();
        let limits = pod_limits(&p, &PodResourcesOptions::default(), &mut |l, t| {
            seen.push((l.get("memory").copied(), t));
        });
        assert_eq!(limits, amounts(&[("cpu", 2100), ("memory", 64 << 20)]));
        assert_eq!(
            seen,
            vec![
                (None, ContainerType::Containers),
                (Some(64 << 20), ContainerType::Containers),
                (None, ContainerType::InitContainers),
            ]
        );
    }
}
