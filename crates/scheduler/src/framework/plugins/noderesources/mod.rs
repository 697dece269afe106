//! The resource plugins (upstream `framework/plugins/noderesources`): NodeResourcesFit
//! ([`fit`]: the pod's requests fit the node; scoring strategies LeastAllocated,
//! MostAllocated, RequestedToCapacityRatio) and NodeResourcesBalancedAllocation
//! ([`balanced_allocation`]), over the shared [`resource_allocation`] scorer.

pub mod balanced_allocation;
pub mod fit;
pub mod resource_allocation;

use serde::Deserialize;

use crate::error::Error;

/// A resource scored and its weight (upstream `config.ResourceSpec`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpec {
    /// The resource name (`cpu`, `memory`, `example.com/gpu`).
    pub name: String,
    /// Its weight, 1..=100 (0 or unset defaults to 1).
    #[serde(default)]
    pub weight: i64,
}

/// `cpu` and `memory`, weight 1 each (upstream `defaultResourceSpec`).
pub fn default_resources() -> Vec<ResourceSpec> {
    ["cpu", "memory"]
        .into_iter()
        .map(|name| ResourceSpec {
            name: name.to_owned(),
            weight: 1,
        })
        .collect()
}

/// Applies upstream's v1 defaults to `resources` (the defaults when empty, weight 1 when
/// 0) and validates them (upstream `validateResources`). Errors: a weight outside
/// 1..=100 or a resource named twice, prefixed with `path`.
pub(crate) fn default_and_validate_resources(
    resources: &mut Vec<ResourceSpec>,
    path: &str,
) -> Result<(), Error> {
    if resources.is_empty() {
        *resources = default_resources();
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, r) in resources.iter_mut().enumerate() {
        if r.weight == 0 {
            r.weight = 1;
        }
        if !(1..=100).contains(&r.weight) {
            return Err(Error::Config(format!(
                "{path}[{i}].weight: Invalid value: {}: resource weight of {} should be in range [1, 100]",
                r.weight, r.name
            )));
        }
        if !seen.insert(r.name.clone()) {
            return Err(Error::Config(format!(
                "{path}[{i}].name: Duplicate value: {:?}",
                r.name
            )));
        }
    }
    Ok(())
}
