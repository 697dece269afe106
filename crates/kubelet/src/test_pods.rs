//! Unit-test fixtures: pods and containers with resource requests and limits.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// `(resource, quantity)` pairs, e.g. `&[("cpu", "500m"), ("memory", "64Mi")]`.
pub(crate) type Pairs<'a> = &'a [(&'a str, &'a str)];

/// The resource list of `pairs`; `None` when there are none.
pub(crate) fn resource_list(pairs: Pairs<'_>) -> Option<BTreeMap<String, Quantity>> {
    (!pairs.is_empty()).then(|| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    })
}

/// A container `name` with `requests` and `limits`.
pub(crate) fn container(name: &str, requests: Pairs<'_>, limits: Pairs<'_>) -> Container {
    Container {
        name: name.into(),
        resources: Some(ResourceRequirements {
            requests: resource_list(requests),
            limits: resource_list(limits),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A pod with `containers` and nothing else set.
pub(crate) fn pod(containers: Vec<Container>) -> Pod {
    Pod {
        spec: Some(PodSpec {
            containers,
            ..Default::default()
        }),
        ..Default::default()
    }
}
