//! The Local APIServices of the built-in group versions (upstream kube-apiserver's
//! `apiServicesToRegister` and its priority table, registered by the autoregister
//! controller at start): `v1.` for the core group, `v1.apps`, `v2.autoscaling`, ...

use serde_json::json;

use crate::error::{ApiError, GroupResource};
use crate::registry::{Objects, Registry};

/// The label upstream puts on the APIServices it registers at start.
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";

/// Upstream's `groupPriorityMinimum` and `versionPriority` of a built-in group version,
/// `None` for one upstream does not register (custom resources' groups).
pub fn priority(group: &str, version: &str) -> Option<(i32, i32)> {
    Some(match (group, version) {
        ("", "v1") => (18000, 1),
        ("apiregistration.k8s.io", "v1") => (18000, 15),
        ("apps", "v1") => (17800, 15),
        ("events.k8s.io", "v1") => (17750, 15),
        ("events.k8s.io", "v1beta1") => (17750, 5),
        ("authentication.k8s.io", "v1") => (17700, 15),
        ("authentication.k8s.io", "v1beta1") => (17700, 9),
        ("authentication.k8s.io", "v1alpha1") => (17700, 1),
        ("authorization.k8s.io", "v1") => (17600, 15),
        ("autoscaling", "v2") => (17500, 30),
        ("autoscaling", "v1") => (17500, 15),
        ("autoscaling", "v2beta1") => (17500, 9),
        ("autoscaling", "v2beta2") => (17500, 1),
        ("batch", "v1") => (17400, 15),
        ("batch", "v1beta1" | "v2alpha1") => (17400, 9),
        ("certificates.k8s.io", "v1") => (17300, 15),
        ("certificates.k8s.io", "v1beta1") => (17300, 9),
        ("certificates.k8s.io", "v1alpha1") => (17300, 1),
        ("networking.k8s.io", "v1") => (17200, 15),
        ("networking.k8s.io", "v1beta1") => (17200, 9),
        ("networking.k8s.io", "v1alpha1") => (17200, 1),
        ("policy", "v1") => (17100, 15),
        ("policy", "v1beta1") => (17100, 9),
        ("rbac.authorization.k8s.io", "v1") => (17000, 15),
        ("storage.k8s.io", "v1") => (16800, 15),
        ("storage.k8s.io", "v1beta1") => (16800, 9),
        ("storage.k8s.io", "v1alpha1") => (16800, 1),
        ("apiextensions.k8s.io", "v1") => (16700, 15),
        ("admissionregistration.k8s.io", "v1") => (16700, 15),
        ("admissionregistration.k8s.io", "v1beta1") => (16700, 12),
        ("admissionregistration.k8s.io", "v1alpha1") => (16700, 9),
        ("scheduling.k8s.io", "v1") => (16600, 15),
        ("coordination.k8s.io", "v1") => (16500, 15),
        ("coordination.k8s.io", "v1beta1") => (16500, 13),
        ("coordination.k8s.io", "v1alpha2") => (16500, 12),
        ("node.k8s.io", "v1") => (16300, 15),
        ("node.k8s.io", "v1beta1") => (16300, 9),
        ("node.k8s.io", "v1alpha1") => (16300, 1),
        ("discovery.k8s.io", "v1") => (16200, 15),
        ("discovery.k8s.io", "v1beta1") => (16200, 12),
        ("resource.k8s.io", "v1beta2") => (16200, 15),
        ("resource.k8s.io", "v1beta1") => (16200, 9),
        ("resource.k8s.io", "v1alpha3") => (16200, 1),
        ("flowcontrol.apiserver.k8s.io", "v1") => (16100, 21),
        ("flowcontrol.apiserver.k8s.io", "v1beta3") => (16100, 18),
        ("flowcontrol.apiserver.k8s.io", "v1beta2") => (16100, 15),
        ("flowcontrol.apiserver.k8s.io", "v1beta1") => (16100, 12),
        ("internal.apiserver.k8s.io", "v1alpha1") => (16000, 9),
        ("storagemigration.k8s.io", "v1alpha1") => (15000, 9),
        _ => return None,
    })
}

/// Every built-in group version `registry` serves that upstream registers, in the
/// registry's order, with its priorities.
pub fn local_group_versions(registry: &Registry) -> Vec<(String, String, i32, i32)> {
    let mut out: Vec<(String, String, i32, i32)> = Vec::new();
    for kind in registry.kinds().iter().filter(|k| k.definition().is_none()) {
        let info = kind.info();
        if out
            .iter()
            .any(|(g, v, _, _)| *g == info.group && *v == info.version)
        {
            continue;
        }
        if let Some((group_priority, version_priority)) = priority(&info.group, &info.version) {
            out.push((
                info.group.clone(),
                info.version.clone(),
                group_priority,
                version_priority,
            ));
        }
    }
    out
}

/// Creates the Local APIService of every built-in group version `registry` serves, or
/// brings an existing one's spec back to upstream's (as the autoregister controller
/// does for the APIServices it manages). Nothing when the registry has no apiservices.
pub async fn ensure_local_api_services(
    registry: &Registry,
    objects: &dyn Objects,
) -> Result<(), ApiError> {
    let resource = GroupResource::new("apiregistration.k8s.io", "apiservices");
    if registry.by_resource(&resource).is_none() {
        return Ok(());
    }
    for (group, version, group_priority, version_priority) in local_group_versions(registry) {
        let spec = json!({
            "group": group,
            "version": version,
            "groupPriorityMinimum": group_priority,
            "versionPriority": version_priority,
        });
        ensure_api_service(
            objects,
            &format!("{version}.{group}"),
            spec,
            "onstart",
            true,
        )
        .await?;
    }
    Ok(())
}

/// Creates the Local APIService `name` with `spec`, labelled
/// `kube-aggregator.kubernetes.io/automanaged: <mode>` (`onstart` or `true`), or brings an
/// existing one's spec back to `spec` (upstream autoregister). An existing APIService
/// without that label is a user's: left alone unless `take_over`. Errors: the store's.
pub(crate) async fn ensure_api_service(
    objects: &dyn Objects,
    name: &str,
    spec: serde_json::Value,
    mode: &str,
    take_over: bool,
) -> Result<(), ApiError> {
    let resource = GroupResource::new("apiregistration.k8s.io", "apiservices");
    match objects.get(&resource, None, name).await {
        Ok(stored) if stored["spec"] == spec => Ok(()),
        Ok(stored)
            if !take_over
                && stored["metadata"]["labels"][AUTOMANAGED_LABEL].as_str() != Some(mode) =>
        {
            Ok(())
        }
        Ok(_) => {
            let mut mutate = |current: &mut serde_json::Value| {
                current["spec"] = spec.clone();
                Ok(())
            };
            objects.update(&resource, None, name, &mut mutate).await?;
            Ok(())
        }
        Err(e) if e.code == 404 => {
            let object = json!({
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": name, "labels": {AUTOMANAGED_LABEL: mode}},
                "spec": spec,
            });
            match objects.create(&resource, None, object).await {
                Ok(_) => Ok(()),
                Err(e) if e.code == 409 => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_group_versions_have_upstreams_priorities() {
        let all = local_group_versions(&Registry::builtin());
        let find = |g: &str, v: &str| {
            all.iter()
                .find(|(group, version, _, _)| group == g && version == v)
                .map(|(_, _, gp, vp)| (*gp, *vp))
        };
        assert_eq!(find("", "v1"), Some((18000, 1)));
        assert_eq!(find("apps", "v1"), Some((17800, 15)));
        assert_eq!(find("autoscaling", "v2"), Some((17500, 30)));
        assert_eq!(find("apiregistration.k8s.io", "v1"), Some((18000, 15)));
        assert_eq!(
            find("flowcontrol.apiserver.k8s.io", "v1"),
            Some((16100, 21))
        );
        assert_eq!(priority("example.com", "v1"), None);
    }
}
