//! flowcontrol.apiserver.k8s.io/v1 flow schemas and priority levels (API Priority and
//! Fairness): upstream's v1 defaults (`pkg/apis/flowcontrol/v1/defaults.go`), the checks of
//! `pkg/apis/flowcontrol/validation` (metadata names are the REST layer's), and in
//! [`bootstrap`] the mandatory and suggested objects every API server creates.

pub mod bootstrap;

use k8s_openapi::api::flowcontrol::v1::{
    FlowSchema, FlowSchemaCondition, LimitedPriorityLevelConfiguration, NonResourcePolicyRule,
    PolicyRulesWithSubjects, PriorityLevelConfiguration, PriorityLevelConfigurationCondition,
    QueuingConfiguration, ResourcePolicyRule, Subject,
};

use crate::field::{ErrorList, FieldError, Path};
use crate::names::{name_is_dns_label, name_is_dns_subdomain};
use crate::validation::json;

/// A flow schema's default matchingPrecedence.
pub const DEFAULT_MATCHING_PRECEDENCE: i32 = 1000;
/// The highest matchingPrecedence.
pub const MAX_MATCHING_PRECEDENCE: i32 = 10000;
/// Queuing defaults.
pub const DEFAULT_HAND_SIZE: i32 = 8;
pub const DEFAULT_QUEUES: i32 = 64;
pub const DEFAULT_QUEUE_LENGTH_LIMIT: i32 = 50;
/// A limited level's default nominalConcurrencyShares.
pub const DEFAULT_NOMINAL_CONCURRENCY_SHARES: i32 = 30;
/// The most queues a level may have (10^7).
pub const MAX_QUEUES: i32 = 10_000_000;
/// The bits of hash a shuffle-sharding deal may use (`shufflesharding.MaxHashBits`).
pub const MAX_HASH_BITS: i64 = 60;
/// The names of the mandatory exempt objects.
pub const NAME_EXEMPT: &str = "exempt";
/// The `*` wildcard of verbs, groups, resources, namespaces and service account names.
pub const WILDCARD: &str = "*";

const DISTINGUISHER_METHODS: &[&str] = &["ByNamespace", "ByUser"];
const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];
const SUBJECT_KINDS: &[&str] = &["Group", "ServiceAccount", "User"];
const LEVEL_TYPES: &[&str] = &["Exempt", "Limited"];
const LIMIT_RESPONSE_TYPES: &[&str] = &["Queue", "Reject"];

/// `SetDefaults_FlowSchemaSpec`: matchingPrecedence 1000 when unset or zero.
pub fn default_flow_schema(schema: &mut FlowSchema) {
    let precedence = &mut schema.spec.matching_precedence;
    if precedence.unwrap_or(0) == 0 {
        *precedence = Some(DEFAULT_MATCHING_PRECEDENCE);
    }
}

fn default_queuing(queuing: &mut QueuingConfiguration) {
    for (value, default) in [
        (&mut queuing.hand_size, DEFAULT_HAND_SIZE),
        (&mut queuing.queues, DEFAULT_QUEUES),
        (&mut queuing.queue_length_limit, DEFAULT_QUEUE_LENGTH_LIMIT),
    ] {
        if value.unwrap_or(0) == 0 {
            *value = Some(default);
        }
    }
}

fn default_limited(limited: &mut LimitedPriorityLevelConfiguration) {
    limited
        .nominal_concurrency_shares
        .get_or_insert(DEFAULT_NOMINAL_CONCURRENCY_SHARES);
    limited.lendable_percent.get_or_insert(0);
    if let Some(queuing) = limited.limit_response.queuing.as_mut() {
        default_queuing(queuing);
    }
}

/// The v1 defaults of a priority level: a limited level's nominalConcurrencyShares 30 and
/// lendablePercent 0, its queuing 64 queues, hand size 8, queue length limit 50; an exempt
/// level's nominalConcurrencyShares and lendablePercent 0.
pub fn default_priority_level(level: &mut PriorityLevelConfiguration) {
    if let Some(limited) = level.spec.limited.as_mut() {
        default_limited(limited);
    }
    if let Some(exempt) = level.spec.exempt.as_mut() {
        exempt.nominal_concurrency_shares.get_or_insert(0);
        exempt.lendable_percent.get_or_insert(0);
    }
}

fn has_wildcard(values: &[String]) -> bool {
    values.iter().any(|v| v == WILDCARD)
}

/// `ValidateFlowSchema` without metadata: the spec and the status.
pub fn validate_flow_schema(schema: &FlowSchema) -> ErrorList {
    let path = Path::new("spec");
    let spec = &schema.spec;
    let name = schema.metadata.name.as_deref().unwrap_or_default();
    let mut errs = Vec::new();
    let precedence = spec.matching_precedence.unwrap_or(0);
    let at = path.child("matchingPrecedence");
    if precedence <= 0 {
        errs.push(FieldError::invalid(
            &at,
            precedence,
            "must be a positive value",
        ));
    }
    if precedence > MAX_MATCHING_PRECEDENCE {
        errs.push(FieldError::invalid(
            &at,
            precedence,
            format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
        ));
    }
    if precedence == 1 && name != NAME_EXEMPT {
        errs.push(FieldError::invalid(
            &at,
            precedence,
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(method) = &spec.distinguisher_method
        && !DISTINGUISHER_METHODS.contains(&method.type_.as_str())
    {
        errs.push(FieldError::not_supported(
            &path.child("distinguisherMethod").child("type"),
            json(method),
            DISTINGUISHER_METHODS,
        ));
    }
    let level = &spec.priority_level_configuration.name;
    let at = path.child("priorityLevelConfiguration").child("name");
    if level.is_empty() {
        errs.push(FieldError::required(&at, "must reference a priority level"));
    } else {
        for msg in name_is_dns_subdomain(level, false) {
            errs.push(FieldError::invalid(&at, level.as_str(), msg));
        }
    }
    for (i, rule) in spec.rules.iter().flatten().enumerate() {
        errs.extend(validate_rules_with_subjects(
            rule,
            &path.child("rules").index(i),
        ));
    }
    let conditions = schema.status.as_ref().and_then(|s| s.conditions.as_deref());
    errs.extend(validate_condition_types(
        conditions
            .unwrap_or_default()
            .iter()
            .map(|c: &FlowSchemaCondition| c.type_.as_str()),
    ));
    errs
}

/// Status conditions: each with a type, no type twice.
fn validate_condition_types<'a>(types: impl Iterator<Item = &'a str>) -> ErrorList {
    let path = Path::new("status").child("conditions");
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, type_) in types.enumerate() {
        if seen.contains(&type_) {
            errs.push(FieldError::duplicate(&path.index(i).child("type"), type_));
        }
        seen.push(type_);
        if type_.is_empty() {
            errs.push(FieldError::required(
                &path.index(i).child("type"),
                "must not be empty",
            ));
        }
    }
    errs
}

fn validate_rules_with_subjects(rule: &PolicyRulesWithSubjects, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    if rule.subjects.is_empty() {
        errs.push(FieldError::required(
            &path.child("subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, subject) in rule.subjects.iter().enumerate() {
        errs.extend(validate_subject(subject, &path.child("subjects").index(i)));
    }
    let resource_rules = rule.resource_rules.as_deref().unwrap_or_default();
    let non_resource_rules = rule.non_resource_rules.as_deref().unwrap_or_default();
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        errs.push(FieldError::required(
            path,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, r) in resource_rules.iter().enumerate() {
        errs.extend(validate_resource_rule(
            r,
            &path.child("resourceRules").index(i),
        ));
    }
    for (i, r) in non_resource_rules.iter().enumerate() {
        errs.extend(validate_non_resource_rule(
            r,
            &path.child("nonResourceRules").index(i),
        ));
    }
    errs
}

/// `ValidateFlowSchemaSubject`: the member of the subject's kind, and no other.
fn validate_subject(subject: &Subject, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let kind = subject.kind.as_str();
    let forbid = |errs: &mut ErrorList, present: bool, field: &str, kind: &str| {
        if present {
            errs.push(FieldError::forbidden(
                &path.child(field),
                format!("{field} is forbidden when subject kind is not '{kind}'"),
            ));
        }
    };
    // A User or Group subject: its member is required, with a name.
    let named = |errs: &mut ErrorList, name: Option<&str>, field: &str, kind: &str| match name {
        None => errs.push(FieldError::required(
            &path.child(field),
            format!("{field} is required when subject kind is '{kind}'"),
        )),
        Some("") => errs.push(FieldError::required(&path.child(field).child("name"), "")),
        Some(_) => {}
    };
    match kind {
        "ServiceAccount" => {
            let at = path.child("serviceAccount");
            match &subject.service_account {
                None => errs.push(FieldError::required(
                    &at,
                    "serviceAccount is required when subject kind is 'ServiceAccount'",
                )),
                Some(sa) => {
                    if sa.name.is_empty() {
                        errs.push(FieldError::required(&at.child("name"), ""));
                    } else if sa.name != WILDCARD {
                        for msg in name_is_dns_subdomain(&sa.name, false) {
                            errs.push(FieldError::invalid(
                                &at.child("name"),
                                sa.name.as_str(),
                                msg,
                            ));
                        }
                    }
                    if sa.namespace.is_empty() {
                        errs.push(FieldError::required(
                            &at.child("namespace"),
                            "must specify namespace for service account",
                        ));
                    } else {
                        for msg in name_is_dns_label(&sa.namespace, false) {
                            errs.push(FieldError::invalid(
                                &at.child("namespace"),
                                sa.namespace.as_str(),
                                msg,
                            ));
                        }
                    }
                }
            }
            forbid(&mut errs, subject.user.is_some(), "user", "User");
            forbid(&mut errs, subject.group.is_some(), "group", "Group");
        }
        "User" => {
            let name = subject.user.as_ref().map(|u| u.name.as_str());
            named(&mut errs, name, "user", "User");
            forbid(
                &mut errs,
                subject.service_account.is_some(),
                "serviceAccount",
                "ServiceAccount",
            );
            forbid(&mut errs, subject.group.is_some(), "group", "Group");
        }
        "Group" => {
            let name = subject.group.as_ref().map(|g| g.name.as_str());
            named(&mut errs, name, "group", "Group");
            forbid(
                &mut errs,
                subject.service_account.is_some(),
                "serviceAccount",
                "ServiceAccount",
            );
            forbid(&mut errs, subject.user.is_some(), "user", "User");
        }
        other => errs.push(FieldError::not_supported(
            &path.child("kind"),
            other,
            SUBJECT_KINDS,
        )),
    }
    errs
}

/// Verbs: at least one, `*` alone, or supported verbs.
fn validate_verbs(verbs: &[String], path: &Path) -> ErrorList {
    if verbs.is_empty() {
        vec![FieldError::required(
            path,
            "verbs must contain at least one value",
        )]
    } else if has_wildcard(verbs) {
        if verbs.len() > 1 {
            vec![FieldError::invalid(
                path,
                json(&verbs),
                "if '*' is present, must not specify other verbs",
            )]
        } else {
            Vec::new()
        }
    } else if verbs.iter().any(|v| !VERBS.contains(&v.as_str())) {
        vec![FieldError::not_supported(path, json(&verbs), VERBS)]
    } else {
        Vec::new()
    }
}

fn validate_resource_rule(rule: &ResourcePolicyRule, path: &Path) -> ErrorList {
    let mut errs = validate_verbs(&rule.verbs, &path.child("verbs"));
    let at = path.child("apiGroups");
    if rule.api_groups.is_empty() {
        errs.push(FieldError::required(
            &at,
            "resource rules must supply at least one api group",
        ));
    } else if rule.api_groups.len() > 1 && has_wildcard(&rule.api_groups) {
        errs.push(FieldError::invalid(
            &at,
            json(&rule.api_groups),
            "if '*' is present, must not specify other api groups",
        ));
    }
    let at = path.child("resources");
    if rule.resources.is_empty() {
        errs.push(FieldError::required(
            &at,
            "resource rules must supply at least one resource",
        ));
    } else if rule.resources.len() > 1 && has_wildcard(&rule.resources) {
        errs.push(FieldError::invalid(
            &at,
            json(&rule.resources),
            "if '*' is present, must not specify other resources",
        ));
    }
    let namespaces = rule.namespaces.as_deref().unwrap_or_default();
    let at = path.child("namespaces");
    if namespaces.is_empty() && rule.cluster_scope != Some(true) {
        errs.push(FieldError::required(
            &at,
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if has_wildcard(namespaces) {
        if namespaces.len() > 1 {
            errs.push(FieldError::invalid(
                &at,
                json(&namespaces),
                "if '*' is present, must not specify other namespaces",
            ));
        }
    } else {
        for (i, namespace) in namespaces.iter().enumerate() {
            for msg in name_is_dns_label(namespace, false) {
                errs.push(FieldError::invalid(
                    &at.index(i),
                    namespace.as_str(),
                    format!("each member of this list must be '*' or a DNS-1123 label; {msg}"),
                ));
            }
        }
    }
    errs
}

fn validate_non_resource_rule(rule: &NonResourcePolicyRule, path: &Path) -> ErrorList {
    let mut errs = validate_verbs(&rule.verbs, &path.child("verbs"));
    let at = path.child("nonResourceURLs");
    let urls = &rule.non_resource_urls;
    if urls.is_empty() {
        errs.push(FieldError::required(
            &at,
            "nonResourceURLs must contain at least one value",
        ));
    } else if has_wildcard(urls) {
        if urls.len() > 1 {
            errs.push(FieldError::invalid(
                &at,
                json(urls),
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
    } else {
        for (i, url) in urls.iter().enumerate() {
            if let Some(why) = non_resource_url_problem(url) {
                errs.push(FieldError::invalid(&at.index(i), url.as_str(), why));
            }
        }
    }
    errs
}

/// `ValidateNonResourceURLPath`: `/`-led, no spaces or `//`, `*` only as a `/*` suffix.
fn non_resource_url_problem(url: &str) -> Option<&'static str> {
    if url.is_empty() {
        return Some("must not be empty");
    }
    if url == "/" {
        return None;
    }
    if !url.starts_with('/') {
        return Some("must start with slash");
    }
    if url.contains(' ') {
        return Some("must not contain white-space");
    }
    if url.contains("//") {
        return Some("must not contain double slash");
    }
    let wildcards = url.matches('*').count();
    if wildcards > 1 || (wildcards == 1 && !url.ends_with("/*")) {
        return Some("wildcard can only do suffix matching");
    }
    None
}

/// `ValidatePriorityLevelConfiguration` without metadata: the type matches the name
/// (`Exempt` if and only if `exempt`), the matching member is set and valid, the status.
pub fn validate_priority_level(level: &PriorityLevelConfiguration) -> ErrorList {
    let path = Path::new("spec");
    let spec = &level.spec;
    let name = level.metadata.name.as_deref().unwrap_or_default();
    let mut errs = Vec::new();
    if (name == NAME_EXEMPT) != (spec.type_ == "Exempt") {
        errs.push(FieldError::invalid(
            &path.child("type"),
            spec.type_.as_str(),
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    match spec.type_.as_str() {
        "Exempt" => {
            if spec.limited.is_some() {
                errs.push(FieldError::forbidden(
                    &path.child("limited"),
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(exempt) = &spec.exempt {
                let at = path.child("exempt");
                if let Some(shares) = exempt.nominal_concurrency_shares
                    && shares < 0
                {
                    errs.push(FieldError::invalid(
                        &at.child("nominalConcurrencyShares"),
                        shares,
                        "must be a non-negative integer",
                    ));
                }
                errs.extend(validate_lendable(exempt.lendable_percent, &at));
            }
        }
        "Limited" => {
            if spec.exempt.is_some() {
                errs.push(FieldError::forbidden(
                    &path.child("exempt"),
                    "must be nil if the type is Limited",
                ));
            }
            match &spec.limited {
                None => errs.push(FieldError::required(
                    &path.child("limited"),
                    "must not be empty when type is Limited",
                )),
                Some(limited) => errs.extend(validate_limited(limited, &path.child("limited"))),
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("type"),
            other,
            LEVEL_TYPES,
        )),
    }
    let conditions = level.status.as_ref().and_then(|s| s.conditions.as_deref());
    errs.extend(validate_condition_types(
        conditions
            .unwrap_or_default()
            .iter()
            .map(|c: &PriorityLevelConfigurationCondition| c.type_.as_str()),
    ));
    errs
}

fn validate_lendable(percent: Option<i32>, path: &Path) -> ErrorList {
    match percent {
        Some(p) if !(0..=100).contains(&p) => vec![FieldError::invalid(
            &path.child("lendablePercent"),
            p,
            "must be between 0 and 100, inclusive",
        )],
        _ => Vec::new(),
    }
}

fn validate_limited(limited: &LimitedPriorityLevelConfiguration, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let shares = limited.nominal_concurrency_shares.unwrap_or(0);
    if shares < 0 {
        errs.push(FieldError::invalid(
            &path.child("nominalConcurrencyShares"),
            shares,
            "must be a non-negative integer",
        ));
    }
    let response = &limited.limit_response;
    let at = path.child("limitResponse");
    match response.type_.as_str() {
        "Reject" => {
            if response.queuing.is_some() {
                errs.push(FieldError::forbidden(
                    &at.child("queuing"),
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        "Queue" => match &response.queuing {
            None => errs.push(FieldError::required(
                &at.child("queuing"),
                "must not be empty if limited.limitResponse.type is Limited",
            )),
            Some(queuing) => errs.extend(validate_queuing(queuing, &at.child("queuing"))),
        },
        other => errs.push(FieldError::not_supported(
            &at.child("type"),
            other,
            LIMIT_RESPONSE_TYPES,
        )),
    }
    errs.extend(validate_lendable(limited.lendable_percent, path));
    if let Some(limit) = limited.borrowing_limit_percent
        && limit < 0
    {
        errs.push(FieldError::invalid(
            &path.child("borrowingLimitPercent"),
            limit,
            "if specified, must be a non-negative integer",
        ));
    }
    errs
}

/// The bits of hash shuffle sharding needs to deal `hand_size` of `deck_size` queues
/// (`shufflesharding.RequiredEntropyBits`).
fn required_entropy_bits(deck_size: i32, hand_size: i32) -> i64 {
    // At most 31 bits times an i32: far inside both f64 and i64.
    (f64::from(deck_size).log2() * f64::from(hand_size)).ceil() as i64
}

fn validate_queuing(queuing: &QueuingConfiguration, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let limit = queuing.queue_length_limit.unwrap_or(0);
    if limit <= 0 {
        errs.push(FieldError::invalid(
            &path.child("queueLengthLimit"),
            limit,
            "must be positive",
        ));
    }
    let queues = queuing.queues.unwrap_or(0);
    if queues <= 0 {
        errs.push(FieldError::invalid(
            &path.child("queues"),
            queues,
            "must be positive",
        ));
    } else if queues > MAX_QUEUES {
        errs.push(FieldError::invalid(
            &path.child("queues"),
            queues,
            format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    let hand = queuing.hand_size.unwrap_or(0);
    let at = path.child("handSize");
    if hand <= 0 {
        errs.push(FieldError::invalid(&at, hand, "must be positive"));
    } else if hand > queues {
        errs.push(FieldError::invalid(
            &at,
            hand,
            format!("should not be greater than queues ({queues})"),
        ));
    } else if required_entropy_bits(queues, hand) > MAX_HASH_BITS {
        errs.push(FieldError::invalid(
            &at,
            hand,
            format!(
                "required entropy bits of deckSize {queues} and handSize {hand} should not be \
                 greater than {MAX_HASH_BITS}"
            ),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn limited_levels_default_and_validate() {
        let mut level: PriorityLevelConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "l"},
            "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}},
        }))
        .unwrap();
        default_priority_level(&mut level);
        let limited = level.spec.limited.as_ref().unwrap();
        assert_eq!(limited.nominal_concurrency_shares, Some(30));
        assert_eq!(limited.lendable_percent, Some(0));
        let queuing = limited.limit_response.queuing.as_ref().unwrap();
        assert_eq!(
            (
                queuing.queues,
                queuing.hand_size,
                queuing.queue_length_limit
            ),
            (Some(64), Some(8), Some(50))
        );
        assert!(validate_priority_level(&level).is_empty());

        let bad: PriorityLevelConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "exempt"},
            "spec": {"type": "Limited", "limited": {"lendablePercent": 101, "limitResponse": {
                "type": "Queue", "queuing": {"queues": 4, "handSize": 5, "queueLengthLimit": 1}}}},
        }))
        .unwrap();
        assert_eq!(
            messages(&validate_priority_level(&bad)),
            [
                "spec.type: Invalid value: \"Limited\": type must be 'Exempt' if and only if name is 'exempt'",
                "spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)",
                "spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
            ]
        );
    }

    #[test]
    fn flow_schemas_validate_like_upstream() {
        let mut schema: FlowSchema = serde_json::from_value(json!({
            "metadata": {"name": "fs"},
            "spec": {
                "priorityLevelConfiguration": {"name": ""},
                "distinguisherMethod": {"type": "ByColour"},
                "rules": [{"subjects": [{"kind": "User"}], "nonResourceRules": [
                    {"verbs": ["get", "*"], "nonResourceURLs": ["/a*"]}]}],
            },
        }))
        .unwrap();
        default_flow_schema(&mut schema);
        assert_eq!(schema.spec.matching_precedence, Some(1000));
        assert_eq!(
            messages(&validate_flow_schema(&schema)),
            [
                "spec.distinguisherMethod.type: Unsupported value: {\"type\":\"ByColour\"}: supported values: \"ByNamespace\", \"ByUser\"",
                "spec.priorityLevelConfiguration.name: Required value: must reference a priority level",
                "spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User'",
                "spec.rules[0].nonResourceRules[0].verbs: Invalid value: [\"get\",\"*\"]: if '*' is present, must not specify other verbs",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"/a*\": wildcard can only do suffix matching",
            ]
        );
        schema.spec.matching_precedence = Some(1);
        assert!(
            messages(&validate_flow_schema(&schema))[0]
                .ends_with("only the schema named 'exempt' may have matchingPrecedence 1")
        );
    }

    #[test]
    fn group_subjects_need_a_named_group_and_nothing_else() {
        let subject =
            |value: serde_json::Value| -> Subject { serde_json::from_value(value).unwrap() };
        let path = Path::new("s");
        assert_eq!(
            messages(&validate_subject(&subject(json!({"kind": "Group"})), &path)),
            ["s.group: Required value: group is required when subject kind is 'Group'"]
        );
        assert_eq!(
            messages(&validate_subject(
                &subject(json!({"kind": "Group", "group": {"name": ""}, "user": {"name": "u"}})),
                &path
            )),
            [
                "s.group.name: Required value",
                "s.user: Forbidden: user is forbidden when subject kind is not 'User'",
            ]
        );
        assert!(
            validate_subject(
                &subject(json!({"kind": "Group", "group": {"name": "g"}})),
                &path
            )
            .is_empty()
        );
    }
}
