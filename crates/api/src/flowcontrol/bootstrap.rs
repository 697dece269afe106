//! The flow schemas and priority levels an API server creates at start (upstream
//! `k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap`): the mandatory `exempt` and
//! `catch-all` pairs and the suggested configuration, each with the annotation
//! `apf.kubernetes.io/autoupdate-spec: "true"`. Their specs are already in defaulted form.

use std::collections::BTreeMap;

use k8s_openapi::api::flowcontrol::v1::{
    ExemptPriorityLevelConfiguration, FlowDistinguisherMethod, FlowSchema, FlowSchemaSpec,
    GroupSubject, LimitResponse, LimitedPriorityLevelConfiguration, NonResourcePolicyRule,
    PolicyRulesWithSubjects, PriorityLevelConfiguration, PriorityLevelConfigurationReference,
    PriorityLevelConfigurationSpec, QueuingConfiguration, ResourcePolicyRule,
    ServiceAccountSubject, Subject, UserSubject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::WILDCARD;

/// The annotation that lets the server keep a bootstrap object's spec up to date.
pub const AUTO_UPDATE_ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";

const MASTERS: &str = "system:masters";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const AUTHENTICATED: &str = "system:authenticated";
const NODES: &str = "system:nodes";
const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
const SCHEDULER: &str = "system:kube-scheduler";

fn metadata(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        annotations: Some(BTreeMap::from([(
            AUTO_UPDATE_ANNOTATION.to_owned(),
            "true".to_owned(),
        )])),
        ..Default::default()
    }
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

fn groups(names: &[&str]) -> Vec<Subject> {
    names
        .iter()
        .map(|name| Subject {
            kind: "Group".to_owned(),
            group: Some(GroupSubject {
                name: (*name).to_owned(),
            }),
            ..Default::default()
        })
        .collect()
}

fn users(names: &[&str]) -> Vec<Subject> {
    names
        .iter()
        .map(|name| Subject {
            kind: "User".to_owned(),
            user: Some(UserSubject {
                name: (*name).to_owned(),
            }),
            ..Default::default()
        })
        .collect()
}

fn kube_system_service_accounts(names: &[&str]) -> Vec<Subject> {
    names
        .iter()
        .map(|name| Subject {
            kind: "ServiceAccount".to_owned(),
            service_account: Some(ServiceAccountSubject {
                name: (*name).to_owned(),
                namespace: "kube-system".to_owned(),
            }),
            ..Default::default()
        })
        .collect()
}

fn resource_rule(
    verbs: &[&str],
    api_groups: &[&str],
    resources: &[&str],
    cluster_scope: bool,
) -> ResourcePolicyRule {
    ResourcePolicyRule {
        verbs: strings(verbs),
        api_groups: strings(api_groups),
        resources: strings(resources),
        namespaces: Some(strings(&[WILDCARD])),
        cluster_scope: cluster_scope.then_some(true),
    }
}

/// Everything, cluster-scoped or in any namespace, and every non-resource URL.
fn everything(subjects: Vec<Subject>) -> PolicyRulesWithSubjects {
    PolicyRulesWithSubjects {
        subjects,
        resource_rules: Some(vec![resource_rule(&["*"], &["*"], &["*"], true)]),
        non_resource_rules: Some(vec![NonResourcePolicyRule {
            verbs: strings(&["*"]),
            non_resource_urls: strings(&["*"]),
        }]),
    }
}

fn flow_schema(
    name: &str,
    level: &str,
    precedence: i32,
    distinguisher: Option<&str>,
    rule: PolicyRulesWithSubjects,
) -> FlowSchema {
    FlowSchema {
        metadata: metadata(name),
        spec: FlowSchemaSpec {
            priority_level_configuration: PriorityLevelConfigurationReference {
                name: level.to_owned(),
            },
            matching_precedence: Some(precedence),
            distinguisher_method: distinguisher.map(|t| FlowDistinguisherMethod {
                type_: t.to_owned(),
            }),
            rules: Some(vec![rule]),
        },
        status: None,
    }
}

/// A limited level that queues: shares, lendable percent, queues, hand size, queue length.
fn queued_level(
    name: &str,
    shares: i32,
    lendable: i32,
    queues: i32,
    hand: i32,
) -> PriorityLevelConfiguration {
    PriorityLevelConfiguration {
        metadata: metadata(name),
        spec: PriorityLevelConfigurationSpec {
            type_: "Limited".to_owned(),
            limited: Some(LimitedPriorityLevelConfiguration {
                nominal_concurrency_shares: Some(shares),
                lendable_percent: Some(lendable),
                limit_response: LimitResponse {
                    type_: "Queue".to_owned(),
                    queuing: Some(QueuingConfiguration {
                        queues: Some(queues),
                        hand_size: Some(hand),
                        queue_length_limit: Some(50),
                    }),
                },
                borrowing_limit_percent: None,
            }),
            exempt: None,
        },
        status: None,
    }
}

/// The mandatory levels: `catch-all` (5 shares, rejects) and `exempt`.
pub fn mandatory_priority_levels() -> Vec<PriorityLevelConfiguration> {
    vec![
        PriorityLevelConfiguration {
            metadata: metadata("catch-all"),
            spec: PriorityLevelConfigurationSpec {
                type_: "Limited".to_owned(),
                limited: Some(LimitedPriorityLevelConfiguration {
                    nominal_concurrency_shares: Some(5),
                    lendable_percent: Some(0),
                    limit_response: LimitResponse {
                        type_: "Reject".to_owned(),
                        queuing: None,
                    },
                    borrowing_limit_percent: None,
                }),
                exempt: None,
            },
            status: None,
        },
        PriorityLevelConfiguration {
            metadata: metadata("exempt"),
            spec: PriorityLevelConfigurationSpec {
                type_: "Exempt".to_owned(),
                limited: None,
                exempt: Some(ExemptPriorityLevelConfiguration {
                    nominal_concurrency_shares: Some(0),
                    lendable_percent: Some(0),
                }),
            },
            status: None,
        },
    ]
}

/// The mandatory schemas: `exempt` (system:masters, precedence 1) and `catch-all`
/// (everyone, precedence 10000).
pub fn mandatory_flow_schemas() -> Vec<FlowSchema> {
    vec![
        flow_schema("exempt", "exempt", 1, None, everything(groups(&[MASTERS]))),
        flow_schema(
            "catch-all",
            "catch-all",
            10000,
            Some("ByUser"),
            everything(groups(&[UNAUTHENTICATED, AUTHENTICATED])),
        ),
    ]
}

/// The suggested levels: system, node-high, leader-election, workload-high, workload-low,
/// global-default.
pub fn suggested_priority_levels() -> Vec<PriorityLevelConfiguration> {
    vec![
        queued_level("system", 30, 33, 64, 6),
        queued_level("node-high", 40, 25, 64, 6),
        queued_level("leader-election", 10, 0, 16, 4),
        queued_level("workload-high", 40, 50, 128, 6),
        queued_level("workload-low", 100, 90, 128, 6),
        queued_level("global-default", 20, 50, 128, 6),
    ]
}

/// The suggested schemas, in upstream's order.
pub fn suggested_flow_schemas() -> Vec<FlowSchema> {
    let get_create_update = ["get", "create", "update"];
    let leases = |cluster| {
        resource_rule(
            &get_create_update,
            &["coordination.k8s.io"],
            &["leases"],
            cluster,
        )
    };
    let mut leader_subjects = users(&[CONTROLLER_MANAGER, SCHEDULER]);
    leader_subjects.extend(kube_system_service_accounts(&[WILDCARD]));
    let mut endpoint_subjects = users(&[CONTROLLER_MANAGER]);
    endpoint_subjects.extend(kube_system_service_accounts(&[
        "endpoint-controller",
        "endpointslicemirroring-controller",
    ]));
    vec![
        flow_schema(
            "system-nodes",
            "system",
            500,
            Some("ByUser"),
            everything(groups(&[NODES])),
        ),
        flow_schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            PolicyRulesWithSubjects {
                subjects: groups(&[NODES]),
                resource_rules: Some(vec![
                    resource_rule(&["*"], &[""], &["nodes", "nodes/status"], true),
                    resource_rule(&["*"], &["coordination.k8s.io"], &["leases"], false),
                ]),
                non_resource_rules: None,
            },
        ),
        flow_schema(
            "probes",
            "exempt",
            2,
            None,
            PolicyRulesWithSubjects {
                subjects: groups(&[UNAUTHENTICATED, AUTHENTICATED]),
                resource_rules: None,
                non_resource_rules: Some(vec![NonResourcePolicyRule {
                    verbs: strings(&["get"]),
                    non_resource_urls: strings(&["/healthz", "/readyz", "/livez"]),
                }]),
            },
        ),
        flow_schema(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            PolicyRulesWithSubjects {
                subjects: leader_subjects,
                resource_rules: Some(vec![leases(false)]),
                non_resource_rules: None,
            },
        ),
        flow_schema(
            "workload-leader-election",
            "leader-election",
            200,
            Some("ByUser"),
            PolicyRulesWithSubjects {
                subjects: kube_system_service_accounts(&[WILDCARD]),
                resource_rules: Some(vec![
                    resource_rule(
                        &get_create_update,
                        &[""],
                        &["endpoints", "configmaps"],
                        false,
                    ),
                    leases(false),
                ]),
                non_resource_rules: None,
            },
        ),
        flow_schema(
            "endpoint-controller",
            "workload-high",
            150,
            Some("ByUser"),
            PolicyRulesWithSubjects {
                subjects: endpoint_subjects,
                resource_rules: Some(vec![resource_rule(
                    &get_create_update,
                    &[""],
                    &["endpoints"],
                    false,
                )]),
                non_resource_rules: None,
            },
        ),
        flow_schema(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(users(&[CONTROLLER_MANAGER])),
        ),
        flow_schema(
            "kube-scheduler",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(users(&[SCHEDULER])),
        ),
        flow_schema(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            everything(kube_system_service_accounts(&[WILDCARD])),
        ),
        flow_schema(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            everything(groups(&[SERVICE_ACCOUNTS])),
        ),
        flow_schema(
            "global-default",
            "global-default",
            9900,
            Some("ByUser"),
            everything(groups(&[UNAUTHENTICATED, AUTHENTICATED])),
        ),
    ]
}

/// Every bootstrap priority level (mandatory, then suggested).
pub fn priority_levels() -> Vec<PriorityLevelConfiguration> {
    let mut all = mandatory_priority_levels();
    all.extend(suggested_priority_levels());
    all
}

/// Every bootstrap flow schema (mandatory, then suggested).
pub fn flow_schemas() -> Vec<FlowSchema> {
    let mut all = mandatory_flow_schemas();
    all.extend(suggested_flow_schemas());
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowcontrol::{
        default_flow_schema, default_priority_level, validate_flow_schema, validate_priority_level,
    };

    #[test]
    fn bootstrap_objects_are_valid_defaulted_and_consistent() {
        let levels = priority_levels();
        assert_eq!(levels.len(), 8);
        for level in &levels {
            let mut defaulted = level.clone();
            default_priority_level(&mut defaulted);
            assert_eq!(&defaulted, level, "not in defaulted form");
            assert!(validate_priority_level(level).is_empty(), "{level:?}");
        }
        let schemas = flow_schemas();
        assert_eq!(schemas.len(), 13);
        for schema in &schemas {
            let mut defaulted = schema.clone();
            default_flow_schema(&mut defaulted);
            assert_eq!(&defaulted, schema, "not in defaulted form");
            assert!(validate_flow_schema(schema).is_empty(), "{schema:?}");
            let level = &schema.spec.priority_level_configuration.name;
            assert!(
                levels
                    .iter()
                    .any(|l| l.metadata.name.as_ref() == Some(level)),
                "{level}"
            );
            assert_eq!(
                schema.metadata.annotations.as_ref().unwrap()[AUTO_UPDATE_ANNOTATION],
                "true"
            );
        }
    }
}
