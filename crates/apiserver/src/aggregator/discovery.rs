//! The remote group versions in discovery (upstream `apis_handler.go` and the aggregated
//! discovery manager): the groups of available remote APIServices are merged into
//! `/apis` (legacy `APIGroupList` and the aggregated `APIGroupDiscoveryList`, from the
//! `APIResourceList` each backend served the availability check), and `/apis/<group>` of
//! such a group is answered from its APIServices. Groups are ordered as upstream's: by
//! `groupPriorityMinimum` (highest first), then by name; versions by `versionPriority`,
//! then by Kubernetes version order.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIResourceList, GroupVersionForDiscovery,
};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::{Value, json};
use skiff_api::apiregistration::is_available;

use super::{Snapshot, service_ref, spec_group, spec_version};
use crate::discovery::{Document, compare_versions, group_priority};

/// The largest discovery document read back for merging.
const MAX_DOCUMENT: usize = 64 << 20;

/// The priority upstream gives a custom resource's group (its APIService's
/// `groupPriorityMinimum`).
const CUSTOM_GROUP_PRIORITY: i32 = 1000;

fn versions_sorted(mut services: Vec<&APIService>) -> Vec<&APIService> {
    services.sort_by(|a, b| {
        let priority = |s: &APIService| s.spec.as_ref().map_or(0, |s| s.version_priority);
        priority(b)
            .cmp(&priority(a))
            .then_with(|| compare_versions(spec_version(a), spec_version(b)))
    });
    services
}

/// The available remote APIServices by group, versions in order.
fn remote_groups(snapshot: &Snapshot) -> BTreeMap<&str, Vec<&APIService>> {
    let mut groups: BTreeMap<&str, Vec<&APIService>> = BTreeMap::new();
    for service in snapshot.services.values() {
        if service_ref(service).is_some() && is_available(service) {
            groups.entry(spec_group(service)).or_default().push(service);
        }
    }
    groups
        .into_iter()
        .map(|(group, services)| (group, versions_sorted(services)))
        .collect()
}

/// A group's priority: the highest `groupPriorityMinimum` of its APIServices, else the
/// built-in order, else a custom resource group's.
fn priority_of(snapshot: &Snapshot, group: &str) -> i32 {
    let from_services = snapshot
        .services
        .values()
        .filter(|s| spec_group(s) == group)
        .filter_map(|s| s.spec.as_ref().map(|spec| spec.group_priority_minimum))
        .max();
    let builtin = group_priority(group);
    match (from_services, builtin) {
        (Some(p), b) => p.max(b),
        (None, 0) => CUSTOM_GROUP_PRIORITY,
        (None, b) => b,
    }
}

fn sort_groups(snapshot: &Snapshot, items: &mut [Value], name: impl Fn(&Value) -> String) {
    items.sort_by_cached_key(|item| {
        let group = name(item);
        (Reverse(priority_of(snapshot, &group)), group)
    });
}

fn group_versions(group: &str, services: &[&APIService]) -> Vec<GroupVersionForDiscovery> {
    services
        .iter()
        .map(|s| GroupVersionForDiscovery {
            group_version: format!("{group}/{}", spec_version(s)),
            version: spec_version(s).to_owned(),
        })
        .collect()
}

/// `APIGroup` of `group` from its APIServices (in version order).
pub fn api_group(group: &str, services: &[&APIService]) -> APIGroup {
    let ordered = versions_sorted(services.to_vec());
    let versions = group_versions(group, &ordered);
    APIGroup {
        name: group.to_owned(),
        preferred_version: versions.first().cloned(),
        server_address_by_client_cidrs: None,
        versions,
    }
}

/// `/apis/<group>` of a group with a remote APIService.
pub fn group_document(group: &str, services: &[&APIService], request: &HeaderMap) -> Response {
    Document::json(&api_group(group, services)).respond(request, "application/json")
}

/// The aggregated form of a backend's `APIResourceList` (upstream's
/// `convertAPIResourceListToDiscovery`): each resource with its subresources.
pub fn resources_of(group: &str, version: &str, list: &APIResourceList) -> Vec<Value> {
    let kind_of = |r: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource| {
        json!({
            "group": r.group.clone().unwrap_or_else(|| group.to_owned()),
            "version": r.version.clone().unwrap_or_else(|| version.to_owned()),
            "kind": r.kind,
        })
    };
    list.resources
        .iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| {
            let prefix = format!("{}/", r.name);
            let subresources: Vec<Value> = list
                .resources
                .iter()
                .filter_map(|s| Some((s.name.strip_prefix(&prefix)?, s)))
                .map(|(name, s)| {
                    json!({"subresource": name, "responseKind": kind_of(s), "verbs": s.verbs})
                })
                .collect();
            let mut resource = json!({
                "resource": r.name,
                "responseKind": kind_of(r),
                "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": r.singular_name,
                "verbs": r.verbs,
            });
            if let Some(short) = r.short_names.as_ref().filter(|s| !s.is_empty()) {
                resource["shortNames"] = json!(short);
            }
            if let Some(categories) = r.categories.as_ref().filter(|c| !c.is_empty()) {
                resource["categories"] = json!(categories);
            }
            if !subresources.is_empty() {
                resource["subresources"] = Value::Array(subresources);
            }
            resource
        })
        .collect()
}

/// `response` (the server's own `/apis`) with the remote groups added, re-encoded with
/// its ETag; as is when there are none or it is not a discovery document.
pub async fn merge_into_apis(snapshot: &Snapshot, response: Response) -> Response {
    let remote = remote_groups(snapshot);
    if remote.is_empty() || !response.status().is_success() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_DOCUMENT).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(mut document) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    match document["kind"].as_str() {
        Some("APIGroupList") => merge_group_list(snapshot, &remote, &mut document),
        Some("APIGroupDiscoveryList") => merge_aggregated(snapshot, &remote, &mut document),
        _ => return Response::from_parts(parts, Body::from(bytes)),
    }
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_owned();
    Document::json(&document).respond(&HeaderMap::new(), &content_type)
}

fn merge_group_list(
    snapshot: &Snapshot,
    remote: &BTreeMap<&str, Vec<&APIService>>,
    document: &mut Value,
) {
    let Some(groups) = document["groups"].as_array_mut() else {
        return;
    };
    for (group, services) in remote {
        let versions = group_versions(group, services);
        match groups.iter_mut().find(|g| g["name"] == *group) {
            Some(existing) => {
                if let Some(list) = existing["versions"].as_array_mut() {
                    for version in versions {
                        let value = json!(version);
                        if !list.contains(&value) {
                            list.push(value);
                        }
                    }
                }
            }
            None => groups.push(json!({
                "name": group,
                "versions": versions,
                "preferredVersion": versions.first(),
            })),
        }
    }
    sort_groups(snapshot, groups, |g| {
        g["name"].as_str().unwrap_or_default().to_owned()
    });
}

fn merge_aggregated(
    snapshot: &Snapshot,
    remote: &BTreeMap<&str, Vec<&APIService>>,
    document: &mut Value,
) {
    let Some(items) = document["items"].as_array_mut() else {
        return;
    };
    for (group, services) in remote {
        let versions: Vec<Value> = services
            .iter()
            .filter_map(|s| {
                let name = s.metadata.name.as_deref()?;
                let list = snapshot.discovery.get(name)?;
                let version = spec_version(s);
                Some(json!({
                    "version": version,
                    "resources": resources_of(group, version, list),
                    "freshness": "Current",
                }))
            })
            .collect();
        if versions.is_empty() {
            continue;
        }
        match items.iter_mut().find(|i| i["metadata"]["name"] == *group) {
            Some(existing) => {
                if let Some(list) = existing["versions"].as_array_mut() {
                    list.extend(versions);
                }
            }
            None => items.push(json!({"metadata": {"name": group}, "versions": versions})),
        }
    }
    sort_groups(snapshot, items, |i| {
        i["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    fn api_service(
        group: &str,
        version: &str,
        priorities: (i32, i32),
        available: bool,
    ) -> APIService {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{version}.{group}")},
            "spec": {
                "group": group, "version": version,
                "groupPriorityMinimum": priorities.0, "versionPriority": priorities.1,
                "service": {"namespace": "ns", "name": "svc", "port": 443},
            },
            "status": {"conditions": [{"type": "Available", "status": if available { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    fn snapshot() -> Snapshot {
        let mut snapshot = Snapshot::default();
        for s in [
            api_service("wardle.example.com", "v1alpha1", (17900, 9), true),
            api_service("wardle.example.com", "v1beta1", (1000, 15), true),
            api_service("down.example.com", "v1", (2000, 15), false),
        ] {
            snapshot
                .services
                .insert(s.metadata.name.clone().unwrap(), s);
        }
        let list: APIResourceList = serde_json::from_value(json!({
            "groupVersion": "wardle.example.com/v1beta1",
            "resources": [
                {"name": "flunders", "singularName": "flunder", "namespaced": true, "kind": "Flunder", "verbs": ["get", "list"], "shortNames": ["fl"]},
                {"name": "flunders/status", "singularName": "", "namespaced": true, "kind": "Flunder", "verbs": ["get", "patch"]},
            ],
        }))
        .unwrap();
        snapshot
            .discovery
            .insert("v1beta1.wardle.example.com".to_owned(), list);
        snapshot
    }

    async fn merged(document: Value, content_type: &str) -> Value {
        let mut response = Response::new(Body::from(document.to_string()));
        response
            .headers_mut()
            .insert(CONTENT_TYPE, content_type.parse().unwrap());
        let response = merge_into_apis(&snapshot(), response).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[CONTENT_TYPE], content_type);
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    #[tokio::test]
    async fn available_remote_groups_join_apis_in_priority_order() {
        let local = json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": "apiregistration.k8s.io", "versions": [], "preferredVersion": null},
            {"name": "apps", "versions": [], "preferredVersion": null},
            {"name": "batch", "versions": [], "preferredVersion": null},
        ]});
        let list = merged(local, "application/json").await;
        let names: Vec<&str> = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        // 17900 puts wardle before apps (17800); the unavailable group is left out.
        assert_eq!(
            names,
            [
                "apiregistration.k8s.io",
                "wardle.example.com",
                "apps",
                "batch"
            ]
        );
        // versionPriority orders the versions: v1beta1 (15) before v1alpha1 (9).
        assert_eq!(
            list["groups"][1]["preferredVersion"]["groupVersion"],
            "wardle.example.com/v1beta1"
        );

        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let local = json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": [
            {"metadata": {"name": "apps"}, "versions": []},
        ]});
        let list = merged(local, v2).await;
        let wardle = &list["items"][0];
        assert_eq!(wardle["metadata"]["name"], "wardle.example.com");
        // Only the version whose discovery document was fetched.
        assert_eq!(wardle["versions"].as_array().unwrap().len(), 1);
        let flunders = &wardle["versions"][0]["resources"][0];
        assert_eq!(flunders["resource"], "flunders");
        assert_eq!(flunders["scope"], "Namespaced");
        assert_eq!(flunders["shortNames"], json!(["fl"]));
        assert_eq!(
            flunders["responseKind"],
            json!({"group": "wardle.example.com", "version": "v1beta1", "kind": "Flunder"})
        );
        assert_eq!(
            flunders["subresources"],
            json!([{"subresource": "status", "verbs": ["get", "patch"],
                    "responseKind": {"group": "wardle.example.com", "version": "v1beta1", "kind": "Flunder"}}])
        );
    }
}
