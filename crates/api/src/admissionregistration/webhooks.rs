//! Validating and mutating webhook configurations: `SetDefaults_ValidatingWebhook`,
//! `SetDefaults_MutatingWebhook`, `SetDefaults_Rule`, `SetDefaults_ServiceReference`,
//! `ValidateValidatingWebhookConfiguration[Update]` and
//! `ValidateMutatingWebhookConfiguration[Update]`, with `ValidateWebhookURL` and
//! `ValidateWebhookService` (`k8s.io/apiserver/pkg/util/webhook`).

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{
    FAILURE_POLICIES, MATCH_POLICIES, RuleView, validate_enum, validate_match_conditions,
    validate_rule, validate_selector,
};
use crate::field::{ErrorList, FieldError, Path};
use crate::names::{is_dns1035_label, is_dns1123_subdomain, is_valid_port_num};
use crate::validation::json;

/// The AdmissionReview versions this server understands.
pub const ACCEPTED_ADMISSION_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
/// `sideEffects` values allowed on new webhooks (v1 forbids `Some` and `Unknown`).
pub const NO_SIDE_EFFECT_CLASSES: &[&str] = &["None", "NoneOnDryRun"];
/// Every `sideEffects` value, allowed on updates of webhooks that already had one.
pub const SIDE_EFFECT_CLASSES: &[&str] = &["None", "NoneOnDryRun", "Some", "Unknown"];
/// `reinvocationPolicy` values of mutating webhooks.
pub const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];

/// The fields both webhook types share, borrowed for one validation.
struct Hook<'a> {
    name: &'a str,
    rules: &'a [RuleWithOperations],
    failure_policy: Option<&'a str>,
    match_policy: Option<&'a str>,
    side_effects: &'a str,
    timeout_seconds: Option<i32>,
    namespace_selector: Option<&'a LabelSelector>,
    object_selector: Option<&'a LabelSelector>,
    client_config: &'a WebhookClientConfig,
    match_conditions: &'a [MatchCondition],
    admission_review_versions: &'a [String],
}

impl<'a> From<&'a ValidatingWebhook> for Hook<'a> {
    fn from(w: &'a ValidatingWebhook) -> Self {
        Hook {
            name: &w.name,
            rules: w.rules.as_deref().unwrap_or_default(),
            failure_policy: w.failure_policy.as_deref(),
            match_policy: w.match_policy.as_deref(),
            side_effects: &w.side_effects,
            timeout_seconds: w.timeout_seconds,
            namespace_selector: w.namespace_selector.as_ref(),
            object_selector: w.object_selector.as_ref(),
            client_config: &w.client_config,
            match_conditions: w.match_conditions.as_deref().unwrap_or_default(),
            admission_review_versions: &w.admission_review_versions,
        }
    }
}

impl<'a> From<&'a MutatingWebhook> for Hook<'a> {
    fn from(w: &'a MutatingWebhook) -> Self {
        Hook {
            name: &w.name,
            rules: w.rules.as_deref().unwrap_or_default(),
            failure_policy: w.failure_policy.as_deref(),
            match_policy: w.match_policy.as_deref(),
            side_effects: &w.side_effects,
            timeout_seconds: w.timeout_seconds,
            namespace_selector: w.namespace_selector.as_ref(),
            object_selector: w.object_selector.as_ref(),
            client_config: &w.client_config,
            match_conditions: w.match_conditions.as_deref().unwrap_or_default(),
            admission_review_versions: &w.admission_review_versions,
        }
    }
}

/// What an update may keep from the old object (upstream's `validationOptions`): a
/// create requires all of them.
#[derive(Debug, Clone, Copy)]
struct Options {
    require_no_side_effects: bool,
    require_recognized_versions: bool,
    require_unique_names: bool,
    check_match_conditions: bool,
}

const CREATE: Options = Options {
    require_no_side_effects: true,
    require_recognized_versions: true,
    require_unique_names: true,
    check_match_conditions: true,
};

impl Options {
    /// The options of an update from `old` hooks to `new` ones.
    fn update(new: &[Hook<'_>], old: &[Hook<'_>]) -> Self {
        let mut names: Vec<&str> = Vec::new();
        let unique = old.iter().all(|h| {
            let fresh = !names.contains(&h.name);
            names.push(h.name);
            fresh
        });
        let conditions_unchanged = new.len() == old.len()
            && new
                .iter()
                .zip(old)
                .all(|(n, o)| n.match_conditions == o.match_conditions);
        Options {
            require_no_side_effects: old
                .iter()
                .all(|h| NO_SIDE_EFFECT_CLASSES.contains(&h.side_effects)),
            require_recognized_versions: old.iter().all(|h| {
                h.admission_review_versions.is_empty()
                    || h.admission_review_versions
                        .iter()
                        .any(|v| ACCEPTED_ADMISSION_REVIEW_VERSIONS.contains(&v.as_str()))
            }),
            require_unique_names: unique,
            check_match_conditions: !conditions_unchanged,
        }
    }
}

fn default_rules(rules: Option<&mut Vec<RuleWithOperations>>) {
    for rule in rules.into_iter().flatten() {
        rule.scope.get_or_insert_with(|| "*".to_owned());
    }
}

fn default_client_config(config: &mut WebhookClientConfig) {
    if let Some(service) = config.service.as_mut() {
        service.port.get_or_insert(443);
    }
}

/// The defaults both webhook types share: failurePolicy Fail, matchPolicy Equivalent,
/// empty selectors, timeoutSeconds 10, rule scope `*`, service port 443.
macro_rules! default_common {
    ($hook:expr) => {{
        let hook = $hook;
        hook.failure_policy.get_or_insert_with(|| "Fail".to_owned());
        hook.match_policy
            .get_or_insert_with(|| "Equivalent".to_owned());
        hook.namespace_selector
            .get_or_insert_with(LabelSelector::default);
        hook.object_selector
            .get_or_insert_with(LabelSelector::default);
        hook.timeout_seconds.get_or_insert(10);
        default_rules(hook.rules.as_mut());
        default_client_config(&mut hook.client_config);
    }};
}

/// Defaults of every webhook of a validating configuration.
pub fn default_validating(config: &mut ValidatingWebhookConfiguration) {
    for hook in config.webhooks.iter_mut().flatten() {
        default_common!(hook);
    }
}

/// Defaults of every webhook of a mutating configuration, with reinvocationPolicy Never.
pub fn default_mutating(config: &mut MutatingWebhookConfiguration) {
    for hook in config.webhooks.iter_mut().flatten() {
        default_common!(&mut *hook);
        hook.reinvocation_policy
            .get_or_insert_with(|| "Never".to_owned());
    }
}

/// Go's `url.Parse` reduced to what `ValidateWebhookURL` looks at: the scheme (lower
/// case), the user information, the host, the query and the fragment. Errors as Go's
/// (`missing protocol scheme`, `invalid control character in URL`).
struct Url<'a> {
    scheme: String,
    user: Option<&'a str>,
    host: &'a str,
    query: &'a str,
    fragment: &'a str,
}

fn parse_url(raw: &str) -> Result<Url<'_>, String> {
    if raw.chars().any(|c| c.is_ascii_control()) {
        return Err("net/url: invalid control character in URL".to_owned());
    }
    let (rest, fragment) = raw.split_once('#').unwrap_or((raw, ""));
    let mut scheme = String::new();
    let mut rest = rest;
    for (i, c) in rest.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".to_owned()),
            ':' => {
                scheme = rest[..i].to_ascii_lowercase();
                rest = &rest[i + 1..];
                break;
            }
            _ => break,
        }
    }
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (user, host) = match rest.strip_prefix("//") {
        Some(authority) => {
            let authority = authority.split('/').next().unwrap_or_default();
            match authority.rsplit_once('@') {
                Some((user, host)) => (Some(user), host),
                None => (None, authority),
            }
        }
        None => (None, ""),
    };
    Ok(Url {
        scheme,
        user,
        host,
        query,
        fragment,
    })
}

/// `ValidateWebhookURL` with https required.
pub fn validate_webhook_url(url: &str, path: &Path) -> ErrorList {
    const FORM: &str = "; desired format: https://host[/path]";
    let parsed = match parse_url(url) {
        Ok(parsed) => parsed,
        Err(why) => {
            return vec![FieldError::required(
                path,
                format!("url must be a valid URL: parse {url:?}: {why}{FORM}"),
            )];
        }
    };
    let mut errs = Vec::new();
    if parsed.scheme != "https" {
        errs.push(FieldError::invalid(
            path,
            parsed.scheme.as_str(),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if parsed.host.is_empty() {
        errs.push(FieldError::invalid(
            path,
            parsed.host,
            format!("host must be provided{FORM}"),
        ));
    }
    if let Some(user) = parsed.user {
        errs.push(FieldError::invalid(
            path,
            user,
            "user information is not permitted in the URL",
        ));
    }
    if !parsed.fragment.is_empty() {
        errs.push(FieldError::invalid(
            path,
            parsed.fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !parsed.query.is_empty() {
        errs.push(FieldError::invalid(
            path,
            parsed.query,
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

/// `ValidateWebhookService`: name and namespace required, a valid port, a path of DNS-1123
/// subdomain segments.
pub fn validate_webhook_service(
    namespace: &str,
    name: &str,
    url_path: Option<&str>,
    port: i32,
    path: &Path,
) -> ErrorList {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(
            &path.child("name"),
            "service name is required",
        ));
    }
    if namespace.is_empty() {
        errs.push(FieldError::required(
            &path.child("namespace"),
            "service namespace is required",
        ));
    }
    let port_errs = is_valid_port_num(i64::from(port));
    if !port_errs.is_empty() {
        errs.push(FieldError::invalid(
            &path.child("port"),
            port,
            format!("port is not valid: {}", port_errs.join(", ")),
        ));
    }
    let Some(url_path) = url_path else {
        return errs;
    };
    let at = path.child("path");
    if url_path.is_empty() || url_path == "/" {
        return errs;
    }
    if url_path == "//" {
        errs.push(FieldError::invalid(
            &at,
            url_path,
            "segment[0] may not be empty",
        ));
        return errs;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(&at, url_path, "must start with a '/'"));
    }
    // Upstream drops the first byte whether or not it is a slash.
    let mut check = url_path.get(1..).unwrap_or_default();
    check = check.strip_suffix('/').unwrap_or(check);
    for (i, step) in check.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &at,
                url_path,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for failure in is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &at,
                url_path,
                format!("segment[{i}]: {failure}"),
            ));
        }
    }
    errs
}

/// `IsFullyQualifiedName`: a DNS-1123 subdomain of at least three segments.
fn validate_fully_qualified_name(name: &str, path: &Path) -> ErrorList {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let errs = is_dns1123_subdomain(name);
    if !errs.is_empty() {
        return vec![FieldError::invalid(path, name, errs.join(","))];
    }
    if name.split('.').count() < 3 {
        return vec![FieldError::invalid(
            path,
            name,
            "should be a domain with at least three segments separated by dots",
        )];
    }
    Vec::new()
}

fn validate_admission_review_versions(
    versions: &[String],
    require_recognized: bool,
    path: &Path,
) -> ErrorList {
    let accepted = ACCEPTED_ADMISSION_REVIEW_VERSIONS.join(", ");
    if versions.is_empty() {
        return vec![FieldError::required(
            path,
            format!("must specify one of {accepted}"),
        )];
    }
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut has_accepted = false;
    for (i, version) in versions.iter().enumerate() {
        if seen.contains(&version.as_str()) {
            errs.push(FieldError::invalid(
                &path.index(i),
                version.as_str(),
                "duplicate version",
            ));
            continue;
        }
        seen.push(version);
        for msg in is_dns1035_label(version) {
            errs.push(FieldError::invalid(&path.index(i), version.as_str(), msg));
        }
        has_accepted |= ACCEPTED_ADMISSION_REVIEW_VERSIONS.contains(&version.as_str());
    }
    if require_recognized && !has_accepted {
        errs.push(FieldError::invalid(
            path,
            json(&versions),
            format!("must include at least one of {accepted}"),
        ));
    }
    errs
}

/// `validateValidatingWebhook` / `validateMutatingWebhook` (reinvocationPolicy excepted).
fn validate_hook(hook: &Hook<'_>, options: Options, path: &Path) -> ErrorList {
    let mut errs = validate_fully_qualified_name(hook.name, &path.child("name"));
    for (i, rule) in hook.rules.iter().enumerate() {
        let view = RuleView {
            operations: rule.operations.as_deref().unwrap_or_default(),
            api_groups: rule.api_groups.as_deref().unwrap_or_default(),
            api_versions: rule.api_versions.as_deref().unwrap_or_default(),
            resources: rule.resources.as_deref().unwrap_or_default(),
            scope: rule.scope.as_deref(),
        };
        errs.extend(validate_rule(&view, &path.child("rules").index(i)));
    }
    errs.extend(validate_enum(
        hook.failure_policy,
        FAILURE_POLICIES,
        &path.child("failurePolicy"),
    ));
    errs.extend(validate_enum(
        hook.match_policy,
        MATCH_POLICIES,
        &path.child("matchPolicy"),
    ));
    let allowed = if options.require_no_side_effects {
        NO_SIDE_EFFECT_CLASSES
    } else {
        SIDE_EFFECT_CLASSES
    };
    let side_effects = path.child("sideEffects");
    if hook.side_effects.is_empty() {
        errs.push(FieldError::required(
            &side_effects,
            format!("must specify one of {}", allowed.join(", ")),
        ));
    } else if !allowed.contains(&hook.side_effects) {
        errs.push(FieldError::not_supported(
            &side_effects,
            hook.side_effects,
            allowed,
        ));
    }
    if let Some(timeout) = hook.timeout_seconds
        && !(1..=30).contains(&timeout)
    {
        errs.push(FieldError::invalid(
            &path.child("timeoutSeconds"),
            timeout,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    errs.extend(validate_selector(
        hook.namespace_selector,
        &path.child("namespaceSelector"),
    ));
    errs.extend(validate_selector(
        hook.object_selector,
        &path.child("objectSelector"),
    ));
    errs
}

/// The client config: exactly one of url and service.
fn validate_client_config(config: &WebhookClientConfig, path: &Path) -> ErrorList {
    let at = path.child("clientConfig");
    match (&config.url, &config.service) {
        (Some(url), None) => validate_webhook_url(url, &at.child("url")),
        (None, Some(service)) => validate_webhook_service(
            &service.namespace,
            &service.name,
            service.path.as_deref(),
            service.port.unwrap_or(443),
            &at.child("service"),
        ),
        _ => vec![FieldError::required(
            &at,
            "exactly one of url or service is required",
        )],
    }
}

/// Every webhook, with unique names when `options` require it.
fn validate_hooks(
    hooks: &[Hook<'_>],
    reinvocation: &[Option<&str>],
    options: Options,
) -> ErrorList {
    let mut errs = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, hook) in hooks.iter().enumerate() {
        let path = Path::new("webhooks").index(i);
        errs.extend(validate_hook(hook, options, &path));
        if let Some(policy) = reinvocation.get(i).copied().flatten() {
            errs.extend(validate_enum(
                Some(policy),
                REINVOCATION_POLICIES,
                &path.child("reinvocationPolicy"),
            ));
        }
        errs.extend(validate_client_config(hook.client_config, &path));
        if options.check_match_conditions {
            errs.extend(validate_match_conditions(
                hook.match_conditions,
                &path.child("matchConditions"),
            ));
        }
        errs.extend(validate_admission_review_versions(
            hook.admission_review_versions,
            options.require_recognized_versions,
            &path.child("admissionReviewVersions"),
        ));
        if options.require_unique_names && !hook.name.is_empty() {
            if names.contains(&hook.name) {
                errs.push(FieldError::duplicate(&path.child("name"), hook.name));
            } else {
                names.push(hook.name);
            }
        }
    }
    errs
}

fn validating_hooks(config: &ValidatingWebhookConfiguration) -> Vec<Hook<'_>> {
    config.webhooks.iter().flatten().map(Hook::from).collect()
}

fn mutating_hooks(config: &MutatingWebhookConfiguration) -> Vec<Hook<'_>> {
    config.webhooks.iter().flatten().map(Hook::from).collect()
}

fn reinvocation_policies(config: &MutatingWebhookConfiguration) -> Vec<Option<&str>> {
    config
        .webhooks
        .iter()
        .flatten()
        .map(|h| h.reinvocation_policy.as_deref())
        .collect()
}

/// `ValidateValidatingWebhookConfiguration` without metadata.
pub fn validate_validating(config: &ValidatingWebhookConfiguration) -> ErrorList {
    validate_hooks(&validating_hooks(config), &[], CREATE)
}

/// `ValidateValidatingWebhookConfigurationUpdate`: what the old webhooks already broke
/// (side effects, unknown review versions, duplicate names, unchanged match conditions)
/// is tolerated.
pub fn validate_validating_update(
    new: &ValidatingWebhookConfiguration,
    old: &ValidatingWebhookConfiguration,
) -> ErrorList {
    let hooks = validating_hooks(new);
    let options = Options::update(&hooks, &validating_hooks(old));
    validate_hooks(&hooks, &[], options)
}

/// `ValidateMutatingWebhookConfiguration` without metadata.
pub fn validate_mutating(config: &MutatingWebhookConfiguration) -> ErrorList {
    validate_hooks(
        &mutating_hooks(config),
        &reinvocation_policies(config),
        CREATE,
    )
}

/// `ValidateMutatingWebhookConfigurationUpdate`, as [`validate_validating_update`].
pub fn validate_mutating_update(
    new: &MutatingWebhookConfiguration,
    old: &MutatingWebhookConfiguration,
) -> ErrorList {
    let hooks = mutating_hooks(new);
    let options = Options::update(&hooks, &mutating_hooks(old));
    validate_hooks(&hooks, &reinvocation_policies(new), options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(hooks: serde_json::Value) -> ValidatingWebhookConfiguration {
        let mut config: ValidatingWebhookConfiguration =
            serde_json::from_value(json!({"metadata": {"name": "c"}, "webhooks": hooks})).unwrap();
        default_validating(&mut config);
        config
    }

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_and_messages_match_upstream() {
        let ok = config(json!([{
            "name": "a.example.com",
            "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }]));
        assert!(
            validate_validating(&ok).is_empty(),
            "{:?}",
            validate_validating(&ok)
        );
        let hook = &ok.webhooks.as_ref().unwrap()[0];
        assert_eq!(hook.timeout_seconds, Some(10));
        assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(hook.client_config.service.as_ref().unwrap().port, Some(443));
        assert_eq!(hook.rules.as_ref().unwrap()[0].scope.as_deref(), Some("*"));

        let bad = config(json!([
            {"name": "short", "clientConfig": {"url": "http://u@h/p?q=1"}, "sideEffects": "Some",
             "admissionReviewVersions": ["v2"]},
            {"name": "short", "clientConfig": {}, "admissionReviewVersions": ["v1"], "sideEffects": "None",
             "timeoutSeconds": 31},
        ]));
        assert_eq!(
            messages(&validate_validating(&bad)),
            [
                "webhooks[0].name: Invalid value: \"short\": should be a domain with at least three segments separated by dots",
                "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
                "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "webhooks[0].clientConfig.url: Invalid value: \"u\": user information is not permitted in the URL",
                "webhooks[0].clientConfig.url: Invalid value: \"q=1\": query parameters are not permitted in the URL",
                "webhooks[0].admissionReviewVersions: Invalid value: [\"v2\"]: must include at least one of v1, v1beta1",
                "webhooks[1].name: Invalid value: \"short\": should be a domain with at least three segments separated by dots",
                "webhooks[1].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
                "webhooks[1].clientConfig: Required value: exactly one of url or service is required",
                "webhooks[1].name: Duplicate value: \"short\"",
            ]
        );
        // An update may keep the side effects the old object already had.
        assert!(
            !messages(&validate_validating_update(&bad, &bad))
                .iter()
                .any(|m| m.contains("sideEffects") || m.contains("Duplicate"))
        );
    }
}
