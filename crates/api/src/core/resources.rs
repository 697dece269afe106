//! Resource lists (`cpu: 500m`, `memory: 128Mi`): quantity checks shared by containers,
//! LimitRanges, ResourceQuotas and persistent volumes (upstream
//! `ValidateResourceQuantityValue`, `ValidateResourceRequirements`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LimitRange, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::core::scheduling_predicates::fit::{PODS, is_extended_resource_name};
use crate::field::{ErrorList, FieldError, Path};
use crate::quantity;

/// Upstream's message for a malformed quantity.
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Every quantity of `list` (at `path`, e.g. `spec.hard`) parses and is not negative;
/// returns the parsed values of the good ones.
pub fn validate_resource_list(
    errors: &mut ErrorList,
    path: &Path,
    list: Option<&BTreeMap<String, Quantity>>,
) -> BTreeMap<String, f64> {
    let mut values = BTreeMap::new();
    for (name, q) in list.into_iter().flatten() {
        let p = path.key(name);
        match quantity::parse(q) {
            None => errors.push(FieldError::invalid(&p, q.0.as_str(), QUANTITY_FORMAT)),
            Some(v) if v < 0.0 => errors.push(FieldError::invalid(
                &p,
                q.0.as_str(),
                "must be greater than or equal to 0",
            )),
            Some(_) if is_integer_resource_name(name) && quantity::milli_value(q) % 1000 != 0 => {
                errors.push(FieldError::invalid(
                    &p,
                    canonical_fraction(q),
                    "must be an integer",
                ));
            }
            Some(v) => {
                values.insert(name.clone(), v);
            }
        }
    }
    values
}

/// Resources counted in whole units (upstream `IsIntegerResourceName`): pods, the object
/// counts of quotas, and extended resources (`example.com/gpu`).
pub fn is_integer_resource_name(name: &str) -> bool {
    const INTEGER: [&str; 9] = [
        PODS,
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    ];
    INTEGER.contains(&name) || is_extended_resource_name(name)
}

/// A fractional quantity as upstream prints it in an error: in thousandths (`1.5` →
/// `1500m`) when that is exact, else as written.
fn canonical_fraction(q: &Quantity) -> String {
    match quantity::parse(q) {
        Some(v) if (v * 1000.0).fract() == 0.0 => format!("{}m", quantity::milli_value(q)),
        _ => q.0.clone(),
    }
}

/// A container's (or a pod's) requests and limits: well-formed and requests ≤ limits.
pub fn validate_resource_requirements(
    errors: &mut ErrorList,
    path: &Path,
    resources: &ResourceRequirements,
) {
    let limits_path = path.child("limits");
    let requests_path = path.child("requests");
    let limits = validate_resource_list(errors, &limits_path, resources.limits.as_ref());
    let requests = validate_resource_list(errors, &requests_path, resources.requests.as_ref());
    for (name, request) in &requests {
        let Some(limit) = limits.get(name) else {
            continue;
        };
        if request > limit {
            let shown = |list: Option<&BTreeMap<String, Quantity>>| {
                list.and_then(|l| l.get(name))
                    .map_or_else(String::new, |q| q.0.clone())
            };
            errors.push(FieldError::invalid(
                &requests_path,
                shown(resources.requests.as_ref()),
                format!(
                    "must be less than or equal to {name} limit of {}",
                    shown(resources.limits.as_ref())
                ),
            ));
        }
    }
}

/// Defaults a LimitRange (upstream `SetDefaults_LimitRangeItem`): for `Container` items the
/// default limit comes from `max`, the default request from the default limit, then
/// from `min`.
pub fn default_limit_range(limit_range: &mut LimitRange) {
    let items = limit_range
        .spec
        .iter_mut()
        .flat_map(|s| s.limits.iter_mut());
    for item in items.filter(|i| i.type_ == "Container") {
        let default = item.default.get_or_insert_with(BTreeMap::new);
        for (name, q) in item.max.iter().flatten() {
            default.entry(name.clone()).or_insert_with(|| q.clone());
        }
        let request = item.default_request.get_or_insert_with(BTreeMap::new);
        for (name, q) in default.iter().chain(item.min.iter().flatten()) {
            request.entry(name.clone()).or_insert_with(|| q.clone());
        }
    }
}

/// Checks a LimitRange: supported item types and well-formed quantities.
pub fn validate_limit_range(limit_range: &LimitRange) -> ErrorList {
    let mut errors = Vec::new();
    let limits_path = Path::new("spec").child("limits");
    let items = limit_range.spec.iter().flat_map(|s| s.limits.iter());
    for (i, item) in items.enumerate() {
        let p = limits_path.index(i);
        crate::core::one_of(
            &mut errors,
            &p.child("type"),
            Some(item.type_.as_str()),
            &["Container", "PersistentVolumeClaim", "Pod"],
            true,
        );
        let lists = [
            ("max", item.max.as_ref()),
            ("min", item.min.as_ref()),
            ("default", item.default.as_ref()),
            ("defaultRequest", item.default_request.as_ref()),
            (
                "maxLimitRequestRatio",
                item.max_limit_request_ratio.as_ref(),
            ),
        ];
        let mut values = BTreeMap::new();
        for (name, list) in lists {
            values.insert(
                name,
                validate_resource_list(&mut errors, &p.child(name), list),
            );
        }
        let (Some(min), Some(max)) = (values.get("min"), values.get("max")) else {
            continue;
        };
        for (resource, lo) in min {
            if max.get(resource).is_some_and(|hi| lo > hi) {
                let shown = quantity_text(item.min.as_ref(), resource);
                errors.push(FieldError::invalid(
                    &p.child("min").key(resource),
                    shown,
                    format!(
                        "min value {} is greater than max value {}",
                        quantity_text(item.min.as_ref(), resource),
                        quantity_text(item.max.as_ref(), resource)
                    ),
                ));
            }
        }
    }
    errors
}

fn quantity_text(list: Option<&BTreeMap<String, Quantity>>, name: &str) -> String {
    list.and_then(|l| l.get(name))
        .map_or_else(String::new, |q| q.0.clone())
}
