//! apiregistration.k8s.io/v1 APIServices (the kube-aggregator's
//! `pkg/apis/apiregistration/v1/defaults.go`, `validation/validation.go` and the
//! `v1/helper` condition helpers).
//!
//! An APIService named `<version>.<group>` says who serves `/apis/<group>/<version>`: the
//! API server itself (no `spec.service`, "Local") or a Service in the cluster that the
//! aggregator proxies to.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceCondition, APIServiceSpec,
};

use crate::field::{ErrorList, FieldError, Path};
use crate::names::{is_dns1035_label, is_dns1123_subdomain};

/// The condition type the aggregator keeps: whether the API is reachable.
pub const AVAILABLE: &str = "Available";
/// The port a service reference defaults to (upstream `SetDefaults_ServiceReference`).
pub const DEFAULT_SERVICE_PORT: i32 = 443;
/// The largest `spec.groupPriorityMinimum`.
pub const MAX_GROUP_PRIORITY: i32 = 20000;
/// The largest `spec.versionPriority`.
pub const MAX_VERSION_PRIORITY: i32 = 1000;

/// `spec.service.port` defaults to 443.
pub fn default(api_service: &mut APIService) {
    if let Some(service) = api_service
        .spec
        .as_mut()
        .and_then(|spec| spec.service.as_mut())
    {
        service.port.get_or_insert(DEFAULT_SERVICE_PORT);
    }
}

/// The name an APIService must have: `<spec.version>.<spec.group>` (`v1.` for the core
/// group).
pub fn required_name(spec: &APIServiceSpec) -> String {
    format!(
        "{}.{}",
        spec.version.as_deref().unwrap_or_default(),
        spec.group.as_deref().unwrap_or_default()
    )
}

/// Upstream's `ValidateAPIService` less the generic metadata rules (the name must be a
/// valid path segment: the REST layer checks that): the name is `<version>.<group>`, the
/// group a DNS-1123 subdomain (empty only for `v1`), the version a DNS-1035 label, the
/// priorities in range, and the service or its absence consistent with `caBundle` and
/// `insecureSkipTLSVerify`.
pub fn validate(api_service: &APIService) -> ErrorList {
    let mut errors = Vec::new();
    let empty = APIServiceSpec::default();
    let spec = api_service.spec.as_ref().unwrap_or(&empty);
    let spec_path = Path::new("spec");
    let required = required_name(spec);
    if let Some(name) = api_service.metadata.name.as_deref()
        && crate::names::validate_path_segment_name(name, false).is_empty()
        && name != required
    {
        errors.push(FieldError::invalid(
            &Path::new("metadata").child("name"),
            name,
            format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
        ));
    }
    let group = spec.group.as_deref().unwrap_or_default();
    let version = spec.version.as_deref().unwrap_or_default();
    if group.is_empty() && version != "v1" {
        errors.push(FieldError::required(
            &spec_path.child("group"),
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !group.is_empty() {
        for why in is_dns1123_subdomain(group) {
            errors.push(FieldError::invalid(&spec_path.child("group"), group, why));
        }
    }
    for why in is_dns1035_label(version) {
        errors.push(FieldError::invalid(
            &spec_path.child("version"),
            version,
            why,
        ));
    }
    if spec.group_priority_minimum <= 0 || spec.group_priority_minimum > MAX_GROUP_PRIORITY {
        errors.push(FieldError::invalid(
            &spec_path.child("groupPriorityMinimum"),
            spec.group_priority_minimum,
            "must be positive and less than 20000",
        ));
    }
    if spec.version_priority <= 0 || spec.version_priority > MAX_VERSION_PRIORITY {
        errors.push(FieldError::invalid(
            &spec_path.child("versionPriority"),
            spec.version_priority,
            "must be positive and less than 1000",
        ));
    }
    let ca_bundle_len = spec.ca_bundle.as_ref().map_or(0, |b| b.0.len());
    let insecure = spec.insecure_skip_tls_verify == Some(true);
    let Some(service) = &spec.service else {
        if ca_bundle_len != 0 {
            errors.push(FieldError::invalid(
                &spec_path.child("caBundle"),
                format!("{ca_bundle_len} bytes"),
                "local APIServices may not have a caBundle",
            ));
        }
        if insecure {
            errors.push(FieldError::invalid(
                &spec_path.child("insecureSkipTLSVerify"),
                true,
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errors;
    };
    let service_path = spec_path.child("service");
    if service.namespace.as_deref().unwrap_or_default().is_empty() {
        errors.push(FieldError::required(&service_path.child("namespace"), ""));
    }
    if service.name.as_deref().unwrap_or_default().is_empty() {
        errors.push(FieldError::required(&service_path.child("name"), ""));
    }
    if let Some(port) = service.port {
        let why = crate::names::is_valid_port_num(i64::from(port));
        if !why.is_empty() {
            errors.push(FieldError::invalid(
                &service_path.child("port"),
                port,
                format!("port is not valid: {}", why.join(", ")),
            ));
        }
    }
    if insecure && ca_bundle_len > 0 {
        errors.push(FieldError::invalid(
            &spec_path.child("insecureSkipTLSVerify"),
            true,
            "may not be true if caBundle is present",
        ));
    }
    errors
}

/// Upstream's `ValidateAPIServiceStatus`: each condition's status is `True`, `False` or
/// `Unknown`.
pub fn validate_status(api_service: &APIService) -> ErrorList {
    let conditions = api_service
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref());
    let path = Path::new("status").child("conditions");
    conditions
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| !matches!(c.status.as_str(), "True" | "False" | "Unknown"))
        .map(|(i, c)| {
            FieldError::not_supported(
                &path.index(i).child("status"),
                c.status.as_str(),
                &["True", "False", "Unknown"],
            )
        })
        .collect()
}

/// The `Available` condition of a Local APIService (upstream
/// `NewLocalAvailableAPIServiceCondition`).
pub fn local_available_condition(now: Time) -> APIServiceCondition {
    APIServiceCondition {
        type_: AVAILABLE.to_owned(),
        status: "True".to_owned(),
        last_transition_time: Some(now),
        reason: Some("Local".to_owned()),
        message: Some("Local APIServices are always available".to_owned()),
    }
}

/// The condition of `type_`, if set.
pub fn condition<'a>(api_service: &'a APIService, type_: &str) -> Option<&'a APIServiceCondition> {
    api_service
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Whether the `Available` condition is `True` (upstream `IsAPIServiceConditionTrue`).
pub fn is_available(api_service: &APIService) -> bool {
    condition(api_service, AVAILABLE).is_some_and(|c| c.status == "True")
}

/// Sets `wanted` as upstream's `SetAPIServiceCondition` does: a new type is appended; an
/// existing one takes the reason and message, and the status with its transition time
/// only when the status changes.
pub fn set_condition(api_service: &mut APIService, wanted: APIServiceCondition) {
    let conditions = api_service
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == wanted.type_) {
        None => conditions.push(wanted),
        Some(existing) => {
            if existing.status != wanted.status {
                existing.status = wanted.status;
                existing.last_transition_time = wanted.last_transition_time;
            }
            existing.reason = wanted.reason;
            existing.message = wanted.message;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
        APIServiceStatus, ServiceReference,
    };

    use super::*;

    fn service(name: &str, group: &str, version: &str) -> APIService {
        APIService {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            spec: Some(APIServiceSpec {
                group: Some(group.to_owned()),
                version: Some(version.to_owned()),
                group_priority_minimum: 1000,
                version_priority: 15,
                service: Some(ServiceReference {
                    namespace: Some("wardle".to_owned()),
                    name: Some("api".to_owned()),
                    port: None,
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn validates_as_upstream() {
        let mut ok = service(
            "v1alpha1.wardle.example.com",
            "wardle.example.com",
            "v1alpha1",
        );
        default(&mut ok);
        let port = ok.spec.as_ref().and_then(|s| s.service.as_ref()?.port);
        assert_eq!(port, Some(443));
        assert!(validate(&ok).is_empty(), "{:?}", validate(&ok));

        let mut bad = service("v1.wardle.example.com", "Wardle", "1");
        if let Some(spec) = bad.spec.as_mut() {
            spec.group_priority_minimum = 20001;
            spec.version_priority = 0;
            spec.insecure_skip_tls_verify = Some(true);
            spec.ca_bundle = Some(ByteString(b"pem".to_vec()));
            spec.service = Some(ServiceReference::default());
        }
        let errors = validate(&bad);
        assert_eq!(errors[0].field.as_str(), "metadata.name");
        assert_eq!(
            messages(&errors),
            [
                "metadata.name: Invalid value: \"v1.wardle.example.com\": must be `spec.version+\".\"+spec.group`: \"1.Wardle\"",
                "spec.group: Invalid value: \"Wardle\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.version: Invalid value: \"1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000",
                "spec.versionPriority: Invalid value: 0: must be positive and less than 1000",
                "spec.service.namespace: Required value",
                "spec.service.name: Required value",
                "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
            ]
        );

        // Local: no caBundle, no insecureSkipTLSVerify; only v1 may have the empty group.
        let mut local = service("v2.", "", "v2");
        if let Some(spec) = local.spec.as_mut() {
            spec.service = None;
            spec.ca_bundle = Some(ByteString(vec![0; 3]));
        }
        assert_eq!(
            messages(&validate(&local)),
            [
                "spec.group: Required value: only v1 may have an empty group and it better be legacy kube",
                "spec.caBundle: Invalid value: \"3 bytes\": local APIServices may not have a caBundle",
            ]
        );
    }

    #[test]
    fn conditions_keep_their_transition_time_while_the_status_holds() {
        let mut api = service("v1.x.io", "x.io", "v1");
        api.status = Some(APIServiceStatus::default());
        let at = |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let cond = |status: &str, reason: &str, t: i64| APIServiceCondition {
            type_: AVAILABLE.to_owned(),
            status: status.to_owned(),
            last_transition_time: Some(at(t)),
            reason: Some(reason.to_owned()),
            message: None,
        };
        set_condition(&mut api, cond("False", "ServiceNotFound", 1));
        set_condition(&mut api, cond("False", "MissingEndpoints", 2));
        let c = condition(&api, AVAILABLE).unwrap();
        assert_eq!(c.last_transition_time, Some(at(1)));
        assert_eq!(c.reason.as_deref(), Some("MissingEndpoints"));
        assert!(!is_available(&api));
        set_condition(&mut api, cond("True", "Passed", 3));
        assert_eq!(
            condition(&api, AVAILABLE).unwrap().last_transition_time,
            Some(at(3))
        );
        assert!(is_available(&api));

        let mut bad = api.clone();
        bad.status = Some(APIServiceStatus {
            conditions: Some(vec![cond("Maybe", "x", 1)]),
        });
        assert_eq!(
            messages(&validate_status(&bad)),
            [
                "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\""
            ]
        );
    }
}
