//! The order of groups and versions in discovery, as upstream lists them (kubectl shows
//! `api-resources` and `api-versions` in this order and picks a resource's preferred
//! version from it).

use std::cmp::Ordering;

/// Upstream's group priority (the kube-aggregator's `groupPriorityMinimum` of the built-in
/// APIServices): higher comes first. The core group is first; a group upstream does not
/// know comes after every known one.
pub fn group_priority(group: &str) -> i32 {
    match group {
        // The aggregator lists its own group first (upstream's 20001, above every
        // APIService's).
        "apiregistration.k8s.io" => 20001,
        "" => 18000,
        "apps" => 17800,
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "admissionregistration.k8s.io" | "apiextensions.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" | "resource.k8s.io" => 16200,
        "flowcontrol.apiserver.k8s.io" => 16100,
        "internal.apiserver.k8s.io" => 16000,
        _ => 0,
    }
}

/// A version's stability and numbers: `v2` → (GA, 2, 0), `v1beta3` → (beta, 1, 3).
/// Versions that are not Kubernetes-like (`foo`) sort last, by name.
fn parse(version: &str) -> Option<(u8, u64, u64)> {
    let rest = version.strip_prefix('v')?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let major: u64 = rest[..digits].parse().ok()?;
    let tail = &rest[digits..];
    let (stability, minor) = if tail.is_empty() {
        return Some((2, major, 0));
    } else if let Some(n) = tail.strip_prefix("beta") {
        (1, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (0, n)
    } else {
        return None;
    };
    Some((stability, major, minor.parse().ok()?))
}

/// Upstream's version order (`version.CompareKubeAwareVersionStrings`), most preferred
/// first: GA before beta before alpha, higher numbers first, others last by name.
pub(crate) fn compare_versions(a: &str, b: &str) -> Ordering {
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_upstream() {
        let mut versions = vec![
            "v1alpha1", "foo", "v1beta1", "v1", "v2beta2", "v2", "v1beta2", "v10",
        ];
        versions.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            versions,
            [
                "v10", "v2", "v1", "v2beta2", "v1beta2", "v1beta1", "v1alpha1", "foo"
            ]
        );
    }

    #[test]
    fn groups_follow_upstream_priorities() {
        assert!(group_priority("") > group_priority("apps"));
        assert!(group_priority("apps") > group_priority("events.k8s.io"));
        assert!(group_priority("batch") > group_priority("policy"));
        assert!(group_priority("coordination.k8s.io") > group_priority("discovery.k8s.io"));
        assert_eq!(group_priority("example.com"), 0);
    }
}
