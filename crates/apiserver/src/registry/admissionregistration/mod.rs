//! admissionregistration.k8s.io/v1 validatingwebhookconfigurations,
//! mutatingwebhookconfigurations, validatingadmissionpolicies (with `/status`) and
//! validatingadmissionpolicybindings (upstream `pkg/registry/admissionregistration/*`),
//! served but not yet enforced: no webhook is called and no policy evaluated.
//!
//! All four are cluster-scoped, in category `api-extensions`, and bump
//! `metadata.generation` on spec changes. CEL expressions are checked for structure only
//! (see [`skiff_api::admissionregistration`]).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;
use skiff_api::admissionregistration::{policies, webhooks};
use skiff_api::field::ErrorList;

use super::printers::{self, AGE, NAME, column};
use super::{Registry, ResourceInfo, Strategy, TableColumn};

/// The category of upstream's admission configuration kinds.
const CATEGORIES: &[&str] = &["api-extensions"];

/// Adds the four kinds, in upstream's order.
pub fn add(registry: &mut Registry) {
    registry.add(MutatingWebhookConfigurations);
    registry.add(ValidatingAdmissionPolicies);
    registry.add(ValidatingAdmissionPolicyBindings);
    registry.add(ValidatingWebhookConfigurations);
}

fn info<K: k8s_openapi::Resource<Scope: 'static>>() -> ResourceInfo {
    ResourceInfo {
        categories: CATEGORIES,
        ..ResourceInfo::of::<K>()
    }
}

const WEBHOOKS: TableColumn = column(
    "Webhooks",
    "integer",
    "Webhooks indicates the number of webhooks.",
    0,
);

fn webhook_row(name: &str, count: usize, age: Value) -> Vec<Value> {
    vec![Value::from(name), Value::from(count), age]
}

/// Validating webhook configurations.
pub struct ValidatingWebhookConfigurations;

impl Strategy for ValidatingWebhookConfigurations {
    type Object = ValidatingWebhookConfiguration;

    fn info(&self) -> ResourceInfo {
        info::<ValidatingWebhookConfiguration>()
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut ValidatingWebhookConfiguration) {
        webhooks::default_validating(object);
    }

    fn validate(&self, object: &ValidatingWebhookConfiguration) -> ErrorList {
        webhooks::validate_validating(object)
    }

    fn validate_update(
        &self,
        new: &ValidatingWebhookConfiguration,
        old: &ValidatingWebhookConfiguration,
    ) -> ErrorList {
        webhooks::validate_validating_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![NAME, WEBHOOKS, AGE]
    }

    fn row(&self, object: &ValidatingWebhookConfiguration) -> Vec<Value> {
        webhook_row(
            &printers::name(&object.metadata),
            object.webhooks.as_ref().map_or(0, Vec::len),
            printers::age(&object.metadata),
        )
    }
}

/// Mutating webhook configurations.
pub struct MutatingWebhookConfigurations;

impl Strategy for MutatingWebhookConfigurations {
    type Object = MutatingWebhookConfiguration;

    fn info(&self) -> ResourceInfo {
        info::<MutatingWebhookConfiguration>()
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut MutatingWebhookConfiguration) {
        webhooks::default_mutating(object);
    }

    fn validate(&self, object: &MutatingWebhookConfiguration) -> ErrorList {
        webhooks::validate_mutating(object)
    }

    fn validate_update(
        &self,
        new: &MutatingWebhookConfiguration,
        old: &MutatingWebhookConfiguration,
    ) -> ErrorList {
        webhooks::validate_mutating_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![NAME, WEBHOOKS, AGE]
    }

    fn row(&self, object: &MutatingWebhookConfiguration) -> Vec<Value> {
        webhook_row(
            &printers::name(&object.metadata),
            object.webhooks.as_ref().map_or(0, Vec::len),
            printers::age(&object.metadata),
        )
    }
}

/// Validating admission policies, with `/status` (type checking, conditions).
pub struct ValidatingAdmissionPolicies;

impl Strategy for ValidatingAdmissionPolicies {
    type Object = ValidatingAdmissionPolicy;

    fn info(&self) -> ResourceInfo {
        info::<ValidatingAdmissionPolicy>()
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut ValidatingAdmissionPolicy) {
        policies::default_policy(object);
    }

    fn prepare_for_create(&self, object: &mut ValidatingAdmissionPolicy) {
        object.status = None;
    }

    fn validate(&self, object: &ValidatingAdmissionPolicy) -> ErrorList {
        policies::validate_policy(object)
    }

    fn validate_update(
        &self,
        new: &ValidatingAdmissionPolicy,
        old: &ValidatingAdmissionPolicy,
    ) -> ErrorList {
        let mut errors = policies::validate_policy_update(new, old);
        errors.extend(policies::validate_policy_status(new.status.as_ref()));
        errors
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Validations",
                "integer",
                "Validations indicates the number of validation rules defined in this configuration",
                0,
            ),
            column(
                "ParamKind",
                "string",
                "ParamKind specifies the kind of resources used to parameterize this policy",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &ValidatingAdmissionPolicy) -> Vec<Value> {
        let spec = object.spec.as_ref();
        let validations = spec
            .and_then(|s| s.validations.as_ref())
            .map_or(0, Vec::len);
        let param_kind = spec.and_then(|s| s.param_kind.as_ref()).map_or_else(
            || "<unset>".to_owned(),
            |k| {
                format!(
                    "{}/{}",
                    k.api_version.as_deref().unwrap_or_default(),
                    k.kind.as_deref().unwrap_or_default()
                )
            },
        );
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(validations),
            Value::from(param_kind),
            printers::age(&object.metadata),
        ]
    }
}

/// A label selector as its Go (gogo protobuf) `String()`, which upstream's binding
/// printer shows: `&LabelSelector{MatchLabels:map[string]string{k: v,},MatchExpressions:[]LabelSelectorRequirement{},}`.
fn go_selector_string(selector: &LabelSelector) -> String {
    let labels: String = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}: {v},"))
        .collect();
    let expressions: String = selector
        .match_expressions
        .iter()
        .flatten()
        .map(|r| {
            let values = r.values.as_deref().unwrap_or_default().join(" ");
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{values}],}},",
                r.key, r.operator
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}

/// Validating admission policy bindings.
pub struct ValidatingAdmissionPolicyBindings;

impl Strategy for ValidatingAdmissionPolicyBindings {
    type Object = ValidatingAdmissionPolicyBinding;

    fn info(&self) -> ResourceInfo {
        info::<ValidatingAdmissionPolicyBinding>()
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut ValidatingAdmissionPolicyBinding) {
        policies::default_binding(object);
    }

    fn validate(&self, object: &ValidatingAdmissionPolicyBinding) -> ErrorList {
        policies::validate_binding(object)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "PolicyName",
                "string",
                "PolicyName indicates the policy definition which the policy binding binded to",
                0,
            ),
            column(
                "ParamRef",
                "string",
                "ParamRef indicates the param resource which sets the configration param",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &ValidatingAdmissionPolicyBinding) -> Vec<Value> {
        let param = match &object.spec.param_ref {
            None => "<unset>".to_owned(),
            Some(r) => match (r.name.as_deref().unwrap_or_default(), &r.selector) {
                ("", Some(selector)) => go_selector_string(selector),
                ("", None) => "<unset>".to_owned(),
                (name, _) => match r.namespace.as_deref().unwrap_or_default() {
                    "" => format!("*/{name}"),
                    namespace => format!("{namespace}/{name}"),
                },
            },
        };
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(object.spec.policy_name.as_str()),
            Value::from(param),
            printers::age(&object.metadata),
        ]
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::{Value, json};

    use super::*;
    use crate::registry::testing::{Reply, Server};

    const GROUP: &str = "/apis/admissionregistration.k8s.io/v1";

    fn webhook(name: &str) -> Value {
        json!({
            "name": name,
            "clientConfig": {"url": "https://hooks.example.com/validate"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    }

    #[tokio::test]
    async fn webhook_configurations_through_the_rest_layer() {
        let server = Server::start().await;
        let uri = format!("{GROUP}/mutatingwebhookconfigurations");
        let config = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"},
            "webhooks": [webhook("a.example.com"), webhook("b.example.com")]});
        let Reply { status, body, .. } = server.send("POST", &uri, &config).await;
        assert_eq!(status, 201, "{body}");
        let hook = &body["webhooks"][0];
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["matchPolicy"], "Equivalent");
        assert_eq!(hook["timeoutSeconds"], 10);
        assert_eq!(hook["reinvocationPolicy"], "Never");
        assert_eq!(hook["namespaceSelector"], json!({}));
        assert_eq!(hook["objectSelector"], json!({}));
        assert_eq!(hook["rules"][0]["scope"], "*");
        assert_eq!(body["metadata"]["generation"], 1);
        let got = server.send("GET", &format!("{uri}/m"), &Value::Null).await;
        assert_eq!(
            (got.status, &got.body["webhooks"][1]["name"]),
            (StatusCode::OK, &json!("b.example.com"))
        );
        let table = server.table(&uri).await;
        assert_eq!(table["columnDefinitions"][1]["name"], "Webhooks");
        assert_eq!(table["rows"][0]["cells"][0], "m");
        assert_eq!(table["rows"][0]["cells"][1], 2);

        let mut bad = config.clone();
        bad["kind"] = json!("ValidatingWebhookConfiguration");
        bad["metadata"]["name"] = json!("v");
        bad["webhooks"][1]["name"] = json!("a.example.com");
        bad["webhooks"][0]["sideEffects"] = json!("");
        bad["webhooks"][0]["clientConfig"]["service"] = json!({"namespace": "ns", "name": "svc"});
        let Reply { status, body, .. } = server
            .send(
                "POST",
                &format!("{GROUP}/validatingwebhookconfigurations"),
                &bad,
            )
            .await;
        assert_eq!(status, 422, "{body}");
        let causes: Vec<(String, String)> = body["details"]["causes"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|c| {
                        (
                            c["field"].as_str().unwrap_or_default().to_owned(),
                            c["message"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            causes,
            [
                (
                    "webhooks[0].sideEffects".to_owned(),
                    "Required value: must specify one of None, NoneOnDryRun".to_owned()
                ),
                (
                    "webhooks[0].clientConfig".to_owned(),
                    "Required value: exactly one of url or service is required".to_owned()
                ),
                (
                    "webhooks[1].name".to_owned(),
                    "Duplicate value: \"a.example.com\"".to_owned()
                ),
            ]
        );
    }

    #[tokio::test]
    async fn policies_and_bindings_through_the_rest_layer() {
        let server = Server::start().await;
        let uri = format!("{GROUP}/validatingadmissionpolicies");
        let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "replicas"},
            "spec": {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"],
                    "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
                "validations": [{"expression": "object.spec.replicas <= 5"}],
            },
            "status": {"observedGeneration": 7}});
        let Reply { status, body, .. } = server.send("POST", &uri, &policy).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["spec"]["failurePolicy"], "Fail");
        assert_eq!(
            body["spec"]["matchConstraints"]["matchPolicy"],
            "Equivalent"
        );
        assert!(
            body.get("status").is_none(),
            "status is dropped on create: {body}"
        );
        let table = server.table(&uri).await;
        assert_eq!(table["rows"][0]["cells"][1], 1);
        assert_eq!(table["rows"][0]["cells"][2], "v1/ConfigMap");

        // /status writes only the status.
        let mut with_status = body.clone();
        with_status["status"] = json!({"observedGeneration": 1, "conditions": [{"type": "Ready",
            "status": "True", "reason": "Checked", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]});
        with_status["spec"]["failurePolicy"] = json!("Ignore");
        let updated = server
            .send("PUT", &format!("{uri}/replicas/status"), &with_status)
            .await;
        assert_eq!(updated.status, 200, "{}", updated.body);
        assert_eq!(updated.body["status"]["conditions"][0]["type"], "Ready");
        assert_eq!(updated.body["spec"]["failurePolicy"], "Fail");

        let mut bad = policy.clone();
        bad["metadata"]["name"] = json!("bad");
        bad["spec"]["validations"] = json!([{"expression": " "}]);
        let Reply { status, body, .. } = server.send("POST", &uri, &bad).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(
            body["details"]["causes"][0]["field"],
            "spec.validations[0].expression"
        );
        assert_eq!(
            body["details"]["causes"][0]["message"],
            "Required value: expression is not specified"
        );

        let bindings = format!("{GROUP}/validatingadmissionpolicybindings");
        let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "replicas-binding"},
            "spec": {"policyName": "replicas", "validationActions": ["Deny"],
                     "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"},
                     "matchResources": {}}});
        let Reply { status, body, .. } = server.send("POST", &bindings, &binding).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(
            body["spec"]["matchResources"]["namespaceSelector"],
            json!({})
        );
        let table = server.table(&bindings).await;
        let cells = &table["rows"][0]["cells"];
        assert_eq!(
            (&cells[1], &cells[2]),
            (&json!("replicas"), &json!("default/limits"))
        );
        let mut bad = binding.clone();
        bad["metadata"]["name"] = json!("bad");
        bad["spec"]["validationActions"] = json!([]);
        let Reply { status, body, .. } = server.send("POST", &bindings, &bad).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(
            body["details"]["causes"][0]["field"],
            "spec.validationActions"
        );
    }

    #[test]
    fn kinds_carry_upstream_names() {
        let registry = Registry::builtin();
        for plural in [
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
        ] {
            let kind = registry.lookup("admissionregistration.k8s.io", "v1", plural);
            let info = kind.map(|k| k.info().clone());
            assert_eq!(
                info.map(|i| (i.namespaced, i.categories)),
                Some((false, CATEGORIES.iter().map(|c| c.to_string()).collect())),
                "{plural}"
            );
        }
        let selector = LabelSelector {
            match_labels: Some([("a".to_owned(), "b".to_owned())].into()),
            match_expressions: None,
        };
        assert_eq!(
            go_selector_string(&selector),
            "&LabelSelector{MatchLabels:map[string]string{a: b,},MatchExpressions:[]LabelSelectorRequirement{},}"
        );
    }
}
