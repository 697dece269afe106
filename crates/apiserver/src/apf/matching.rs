//! Matching requests to FlowSchemas (upstream `util/flowcontrol/match.go`) and the flow a
//! request belongs to: its distinguisher and the hash that picks its queues
//! (`computeFlowDistinguisher`, `hashFlowID` in `apf_controller.go`).

use k8s_openapi::api::flowcontrol::v1::{
    FlowSchema, NonResourcePolicyRule, PolicyRulesWithSubjects, ResourcePolicyRule, Subject,
};
use sha2::{Digest, Sha256};

use super::request_info::RequestInfo;
use crate::authn::UserInfo;

/// The wildcard of verbs, groups, resources, namespaces, URLs and subject names.
const ALL: &str = "*";
/// The prefix of service-account user names.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// Whether any of the schema's rules matches the request.
pub fn matches_flow_schema(info: &RequestInfo, user: &UserInfo, schema: &FlowSchema) -> bool {
    schema
        .spec
        .rules
        .iter()
        .flatten()
        .any(|rule| matches_rule(info, user, rule))
}

fn matches_rule(info: &RequestInfo, user: &UserInfo, rule: &PolicyRulesWithSubjects) -> bool {
    if !rule.subjects.iter().any(|s| matches_subject(user, s)) {
        return false;
    }
    if info.is_resource_request {
        rule.resource_rules
            .iter()
            .flatten()
            .any(|r| matches_resource_rule(info, r))
    } else {
        rule.non_resource_rules
            .iter()
            .flatten()
            .any(|r| matches_non_resource_rule(info, r))
    }
}

fn matches_subject(user: &UserInfo, subject: &Subject) -> bool {
    match subject.kind.as_str() {
        "User" => subject
            .user
            .as_ref()
            .is_some_and(|u| u.name == ALL || u.name == user.name),
        "Group" => subject
            .group
            .as_ref()
            .is_some_and(|g| g.name == ALL || user.groups.contains(&g.name)),
        "ServiceAccount" => subject.service_account.as_ref().is_some_and(|sa| {
            let Some(rest) = user.name.strip_prefix(SERVICE_ACCOUNT_PREFIX) else {
                return false;
            };
            if sa.name == ALL {
                rest.strip_prefix(sa.namespace.as_str())
                    .is_some_and(|r| r.starts_with(':'))
            } else {
                rest.split_once(':') == Some((sa.namespace.as_str(), sa.name.as_str()))
            }
        }),
        _ => false,
    }
}

/// `x` is listed, or the list is the wildcard alone.
fn contains(list: &[String], x: &str) -> bool {
    (list.len() == 1 && list[0] == ALL) || list.iter().any(|y| y == x)
}

fn matches_resource_rule(info: &RequestInfo, rule: &ResourcePolicyRule) -> bool {
    let resource = if info.subresource.is_empty() {
        info.resource.clone()
    } else {
        format!("{}/{}", info.resource, info.subresource)
    };
    if !contains(&rule.verbs, &info.verb)
        || !contains(&rule.resources, &resource)
        || !contains(&rule.api_groups, &info.api_group)
    {
        return false;
    }
    if info.namespace.is_empty() {
        return rule.cluster_scope.unwrap_or(false);
    }
    contains(
        rule.namespaces.as_deref().unwrap_or_default(),
        &info.namespace,
    )
}

fn matches_non_resource_rule(info: &RequestInfo, rule: &NonResourcePolicyRule) -> bool {
    contains(&rule.verbs, &info.verb)
        && rule.non_resource_urls.iter().any(|pattern| {
            if pattern == ALL || *pattern == info.path {
                return true;
            }
            let mut prefix = pattern.strip_suffix('*').unwrap_or(pattern).to_owned();
            if !prefix.ends_with('/') {
                prefix.push('/');
            }
            info.path.starts_with(&prefix)
        })
}

/// The flow distinguisher of a request under a schema: the user's name (`ByUser`), the
/// namespace (`ByNamespace`), else empty.
pub fn flow_distinguisher(schema: &FlowSchema, info: &RequestInfo, user: &UserInfo) -> String {
    match schema
        .spec
        .distinguisher_method
        .as_ref()
        .map(|m| m.type_.as_str())
    {
        Some("ByUser") => user.name.clone(),
        Some("ByNamespace") => info.namespace.clone(),
        _ => String::new(),
    }
}

/// The flow's hash (upstream `hashFlowID`): the first 8 bytes, little-endian, of the
/// SHA-256 of the schema's name, a zero byte and the distinguisher.
pub fn hash_flow_id(schema_name: &str, distinguisher: &str) -> u64 {
    let mut hasher = Sha256::new();
    hasher.update(schema_name.as_bytes());
    hasher.update([0u8]);
    hasher.update(distinguisher.as_bytes());
    let sum = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&sum[..8]);
    u64::from_le_bytes(first)
}
