//! networking.k8s.io/v1: defaulting and validation of ingresses, ingressclasses,
//! networkpolicies, servicecidrs and ipaddresses, as upstream's `pkg/apis/networking/v1`
//! (`SetDefaults_NetworkPolicy`, `SetDefaults_NetworkPolicyPort`,
//! `SetDefaults_IngressClass`) and `pkg/apis/networking/validation` as of 1.33, with
//! upstream's messages and field paths. Metadata is the API server's to check.

pub mod ip;

use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, IPAddress, IPBlock, Ingress, IngressBackend, IngressClass,
    IngressClassParametersReference, IngressLoadBalancerStatus, IngressRule, IngressSpec,
    NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, ParentReference, ServiceCIDR,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::core::invalid_each;
use crate::field::{ErrorList, FieldError, Path};
use crate::validation::{immutable, json};
use crate::{meta, names};

/// The deprecated annotation that names an ingress' class.
pub const INGRESS_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
const MAX_CONTROLLER_LEN: usize = 250;
const PATH_TYPES: &[&str] = &["Exact", "ImplementationSpecific", "Prefix"];
const INVALID_PATH_SEQUENCES: &[&str] = &["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: &[&str] = &["/..", "/."];
const PARAMETER_SCOPES: &[&str] = &["Cluster", "Namespace"];
const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
const POLICY_TYPES: &[&str] = &["Ingress", "Egress"];

// ---------------------------------------------------------------------------------------
// NetworkPolicy

/// Ports default to protocol TCP; policyTypes to `[Ingress]`, plus `Egress` when egress
/// rules are given.
pub fn default_network_policy(policy: &mut NetworkPolicy) {
    let Some(spec) = policy.spec.as_mut() else {
        return;
    };
    let ingress_ports = spec
        .ingress
        .iter_mut()
        .flatten()
        .flat_map(|r| r.ports.iter_mut().flatten());
    let egress_ports = spec
        .egress
        .iter_mut()
        .flatten()
        .flat_map(|r| r.ports.iter_mut().flatten());
    for port in ingress_ports.chain(egress_ports) {
        port.protocol.get_or_insert_with(|| "TCP".to_owned());
    }
    if spec.policy_types.as_ref().is_none_or(Vec::is_empty) {
        let mut types = vec!["Ingress".to_owned()];
        if spec.egress.as_ref().is_some_and(|e| !e.is_empty()) {
            types.push("Egress".to_owned());
        }
        spec.policy_types = Some(types);
    }
}

/// Upstream `ValidateNetworkPolicySpec`: the pod selector, each rule's ports and peers,
/// and the policy types (at most two, each Ingress or Egress).
pub fn validate_network_policy(policy: &NetworkPolicy) -> ErrorList {
    let mut errors = Vec::new();
    let path = Path::new("spec");
    let Some(spec) = &policy.spec else {
        return errors;
    };
    if let Some(selector) = &spec.pod_selector {
        errors.extend(meta::validate_label_selector(
            selector,
            &path.child("podSelector"),
        ));
    }
    for (i, rule) in spec.ingress.iter().flatten().enumerate() {
        let rule_path = path.child("ingress").index(i);
        for (j, port) in rule.ports.iter().flatten().enumerate() {
            validate_policy_port(&mut errors, port, &rule_path.child("ports").index(j));
        }
        for (j, peer) in rule.from.iter().flatten().enumerate() {
            validate_policy_peer(&mut errors, peer, &rule_path.child("from").index(j));
        }
    }
    for (i, rule) in spec.egress.iter().flatten().enumerate() {
        let rule_path = path.child("egress").index(i);
        for (j, port) in rule.ports.iter().flatten().enumerate() {
            validate_policy_port(&mut errors, port, &rule_path.child("ports").index(j));
        }
        for (j, peer) in rule.to.iter().flatten().enumerate() {
            validate_policy_peer(&mut errors, peer, &rule_path.child("to").index(j));
        }
    }
    let types = spec.policy_types.as_deref().unwrap_or_default();
    let types_path = path.child("policyTypes");
    if types.len() > POLICY_TYPES.len() {
        errors.push(FieldError::invalid(
            &types_path,
            json(&types),
            "may not specify more than two policyTypes",
        ));
        return errors;
    }
    for (i, policy_type) in types.iter().enumerate() {
        if !POLICY_TYPES.contains(&policy_type.as_str()) {
            errors.push(FieldError::not_supported(
                &types_path.index(i),
                policy_type.as_str(),
                POLICY_TYPES,
            ));
        }
    }
    errors
}

fn port_num_errors(errors: &mut ErrorList, path: &Path, port: i32) {
    invalid_each(errors, path, port, names::is_valid_port_num(port.into()));
}

/// Upstream `ValidateNetworkPolicyPort`.
fn validate_policy_port(errors: &mut ErrorList, port: &NetworkPolicyPort, path: &Path) {
    if let Some(protocol) = port.protocol.as_deref()
        && !PROTOCOLS.contains(&protocol)
    {
        errors.push(FieldError::not_supported(
            &path.child("protocol"),
            protocol,
            PROTOCOLS,
        ));
    }
    let end_path = path.child("endPort");
    match (&port.port, port.end_port) {
        (Some(IntOrString::Int(number)), end) => {
            port_num_errors(errors, &path.child("port"), *number);
            if let Some(end) = end {
                if end < *number {
                    errors.push(FieldError::invalid(
                        &end_path,
                        *number,
                        "must be greater than or equal to `port`",
                    ));
                }
                port_num_errors(errors, &end_path, end);
            }
        }
        (Some(IntOrString::String(name)), end) => {
            if let Some(end) = end {
                errors.push(FieldError::invalid(
                    &end_path,
                    end,
                    "may not be specified when `port` is non-numeric",
                ));
            }
            invalid_each(
                errors,
                &path.child("port"),
                name.as_str(),
                names::is_valid_port_name(name),
            );
        }
        (None, Some(end)) => errors.push(FieldError::invalid(
            &end_path,
            end,
            "may not be specified when `port` is not specified",
        )),
        (None, None) => {}
    }
}

/// Upstream `ValidateNetworkPolicyPeer`: one kind of peer at least; an ipBlock alone.
fn validate_policy_peer(errors: &mut ErrorList, peer: &NetworkPolicyPeer, path: &Path) {
    let mut count = 0;
    if let Some(selector) = &peer.pod_selector {
        count += 1;
        errors.extend(meta::validate_label_selector(
            selector,
            &path.child("podSelector"),
        ));
    }
    if let Some(selector) = &peer.namespace_selector {
        count += 1;
        errors.extend(meta::validate_label_selector(
            selector,
            &path.child("namespaceSelector"),
        ));
    }
    if let Some(block) = &peer.ip_block {
        count += 1;
        validate_ip_block(errors, block, &path.child("ipBlock"));
    }
    if count == 0 {
        errors.push(FieldError::required(path, "must specify a peer"));
    } else if count > 1 && peer.ip_block.is_some() {
        errors.push(FieldError::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
}

/// Upstream `ValidateIPBlock`: a CIDR (legacy parsing), and excepts that are strict
/// subsets of it.
fn validate_ip_block(errors: &mut ErrorList, block: &IPBlock, path: &Path) {
    let cidr_path = path.child("cidr");
    if block.cidr.is_empty() {
        errors.push(FieldError::required(&cidr_path, ""));
        return;
    }
    errors.extend(names::is_valid_cidr(&cidr_path, &block.cidr));
    let Some(network) = names::parse_cidr_sloppy(&block.cidr) else {
        return;
    };
    for (i, except) in block.except.iter().flatten().enumerate() {
        let except_path = path.child("except").index(i);
        errors.extend(names::is_valid_cidr(&except_path, except));
        let Some((address, length)) = names::parse_cidr_sloppy(except) else {
            continue;
        };
        if !ip::cidr_contains(network, address) || network.1 >= length {
            errors.push(FieldError::invalid(
                &except_path,
                except.as_str(),
                "must be a strict subset of `cidr`",
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Ingress

/// Whether an old ingress has TLS secret names that are not valid names (kept valid on
/// update, upstream's `allowInvalidSecretName`).
fn has_invalid_secret_name(old: &Ingress) -> bool {
    let tls = old
        .spec
        .as_ref()
        .and_then(|s| s.tls.as_deref())
        .unwrap_or_default();
    tls.iter().any(|t| {
        let name = t.secret_name.as_deref().unwrap_or_default();
        !name.is_empty() && !names::name_is_dns_subdomain(name, false).is_empty()
    })
}

/// Whether an old ingress has wildcard-host rules whose values do not validate
/// (upstream's `allowInvalidWildcardHostRule`).
fn has_invalid_wildcard_rule(old: &Ingress) -> bool {
    let rules = old
        .spec
        .as_ref()
        .and_then(|s| s.rules.as_deref())
        .unwrap_or_default();
    rules.iter().any(|rule| {
        rule.host.as_deref().unwrap_or_default().contains('*') && {
            let mut errors = Vec::new();
            validate_rule_value(&mut errors, rule, &Path::default());
            !errors.is_empty()
        }
    })
}

/// What an update may keep of an old object's invalid data (upstream
/// `IngressValidationOptions`).
#[derive(Default)]
struct Ratchets {
    invalid_secret_name: bool,
    invalid_wildcard_rule: bool,
}

/// Upstream `ValidateIngressCreate`: the spec, and a class annotation that agrees with
/// `spec.ingressClassName` when both are set.
pub fn validate_ingress(ingress: &Ingress) -> ErrorList {
    let mut errors = validate_ingress_spec(ingress.spec.as_ref(), &Ratchets::default());
    let annotation = ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION));
    let class = ingress
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_ref());
    if let (Some(annotation), Some(class)) = (annotation, class)
        && annotation != class
    {
        errors.push(FieldError::invalid(
            &Path::new("annotations").child(INGRESS_CLASS_ANNOTATION),
            annotation.as_str(),
            "must match `ingressClassName` when both are specified",
        ));
    }
    errors
}

/// Upstream `ValidateIngressUpdate` (the spec, keeping old invalid secret names and
/// wildcard rules), with the status checks of `ValidateIngressStatusUpdate` (the API
/// server runs one validation for both the main resource and `/status`).
pub fn validate_ingress_update(new: &Ingress, old: &Ingress) -> ErrorList {
    let ratchets = Ratchets {
        invalid_secret_name: has_invalid_secret_name(old),
        invalid_wildcard_rule: has_invalid_wildcard_rule(old),
    };
    let mut errors = validate_ingress_spec(new.spec.as_ref(), &ratchets);
    if let Some(balancer) = new.status.as_ref().and_then(|s| s.load_balancer.as_ref()) {
        validate_load_balancer_status(
            &mut errors,
            balancer,
            &Path::new("status").child("loadBalancer"),
        );
    }
    errors
}

fn validate_ingress_spec(spec: Option<&IngressSpec>, ratchets: &Ratchets) -> ErrorList {
    let mut errors = Vec::new();
    let path = Path::new("spec");
    let default_spec = IngressSpec::default();
    let spec = spec.unwrap_or(&default_spec);
    let rules = spec.rules.as_deref().unwrap_or_default();
    if rules.is_empty() && spec.default_backend.is_none() {
        errors.push(FieldError::invalid(
            &path,
            json(&spec.rules),
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(backend) = &spec.default_backend {
        validate_backend(&mut errors, backend, &path.child("defaultBackend"));
    }
    for (i, rule) in rules.iter().enumerate() {
        validate_rule(&mut errors, rule, &path.child("rules").index(i), ratchets);
    }
    for (i, tls) in spec.tls.iter().flatten().enumerate() {
        let tls_path = path.child("tls").index(i);
        for (j, host) in tls.hosts.iter().flatten().enumerate() {
            let problems = if host.contains('*') {
                names::is_wildcard_dns1123_subdomain(host)
            } else {
                names::is_dns1123_subdomain(host)
            };
            invalid_each(
                &mut errors,
                &tls_path.child("hosts").index(j),
                host.as_str(),
                problems,
            );
        }
        let secret = tls.secret_name.as_deref().unwrap_or_default();
        if !ratchets.invalid_secret_name && !secret.is_empty() {
            invalid_each(
                &mut errors,
                &tls_path.child("secretName"),
                secret,
                names::name_is_dns_subdomain(secret, false),
            );
        }
    }
    if let Some(class) = &spec.ingress_class_name {
        invalid_each(
            &mut errors,
            &path.child("ingressClassName"),
            class.as_str(),
            names::name_is_dns_subdomain(class, false),
        );
    }
    errors
}

fn validate_rule(errors: &mut ErrorList, rule: &IngressRule, path: &Path, ratchets: &Ratchets) {
    let host = rule.host.as_deref().unwrap_or_default();
    let mut wildcard = false;
    if !host.is_empty() {
        let host_path = path.child("host");
        if names::parse_ip_sloppy(host).is_some() {
            errors.push(FieldError::invalid(
                &host_path,
                host,
                "must be a DNS name, not an IP address",
            ));
        }
        if host.contains('*') {
            invalid_each(
                errors,
                &host_path,
                host,
                names::is_wildcard_dns1123_subdomain(host),
            );
            wildcard = true;
        } else {
            invalid_each(errors, &host_path, host, names::is_dns1123_subdomain(host));
        }
    }
    if !wildcard || !ratchets.invalid_wildcard_rule {
        validate_rule_value(errors, rule, path);
    }
}

fn validate_rule_value(errors: &mut ErrorList, rule: &IngressRule, path: &Path) {
    let Some(http) = &rule.http else {
        return;
    };
    let paths_path = path.child("http").child("paths");
    if http.paths.is_empty() {
        errors.push(FieldError::required(&paths_path, ""));
    }
    for (i, http_path) in http.paths.iter().enumerate() {
        validate_http_path(errors, http_path, &paths_path.index(i));
    }
}

/// Upstream `validateHTTPIngressPath`: a path type (no default in v1), absolute paths
/// without `//`, `/./`, `/../` or encoded slashes for Exact and Prefix, and the backend.
fn validate_http_path(errors: &mut ErrorList, http_path: &HTTPIngressPath, path: &Path) {
    let type_path = path.child("pathType");
    let value = http_path.path.as_deref().unwrap_or_default();
    let value_path = path.child("path");
    match http_path.path_type.as_str() {
        "" => {
            errors.push(FieldError::required(
                &type_path,
                "pathType must be specified",
            ));
            return;
        }
        "Exact" | "Prefix" => {
            if !value.starts_with('/') {
                errors.push(FieldError::invalid(
                    &value_path,
                    value,
                    "must be an absolute path",
                ));
            }
            if !value.is_empty() {
                for sequence in INVALID_PATH_SEQUENCES
                    .iter()
                    .filter(|s| value.contains(**s))
                {
                    errors.push(FieldError::invalid(
                        &value_path,
                        value,
                        format!("must not contain '{sequence}'"),
                    ));
                }
                for suffix in INVALID_PATH_SUFFIXES
                    .iter()
                    .filter(|s| value.ends_with(**s))
                {
                    errors.push(FieldError::invalid(
                        &value_path,
                        value,
                        format!("cannot end with '{suffix}'"),
                    ));
                }
            }
        }
        "ImplementationSpecific" => {
            if !value.is_empty() && !value.starts_with('/') {
                errors.push(FieldError::invalid(
                    &value_path,
                    value,
                    "must be an absolute path",
                ));
            }
        }
        other => errors.push(FieldError::not_supported(&type_path, other, PATH_TYPES)),
    }
    validate_backend(errors, &http_path.backend, &path.child("backend"));
}

/// Upstream `validateIngressBackend`: a resource or a service (name and one of port name
/// and number), not both.
fn validate_backend(errors: &mut ErrorList, backend: &IngressBackend, path: &Path) {
    match (&backend.resource, &backend.service) {
        (Some(_), Some(_)) => errors.push(FieldError::invalid(
            path,
            "",
            "cannot set both resource and service backends",
        )),
        (Some(resource), None) => {
            validate_typed_reference(errors, resource, &path.child("resource"));
        }
        (None, Some(service)) => {
            let service_path = path.child("service");
            let name_path = service_path.child("name");
            if service.name.is_empty() {
                errors.push(FieldError::required(&name_path, ""));
            } else {
                invalid_each(
                    errors,
                    &name_path,
                    service.name.as_str(),
                    names::name_is_dns1035_label(&service.name, false),
                );
            }
            let port = service.port.clone().unwrap_or_default();
            let name = port.name.unwrap_or_default();
            let number = port.number.unwrap_or(0);
            let port_path = service_path.child("port");
            match (name.is_empty(), number == 0) {
                (false, false) => errors.push(FieldError::invalid(
                    path,
                    "",
                    "cannot set both port name & port number",
                )),
                (false, true) => invalid_each(
                    errors,
                    &port_path.child("name"),
                    name.as_str(),
                    names::is_valid_port_name(&name),
                ),
                (true, false) => port_num_errors(errors, &port_path.child("number"), number),
                (true, true) => errors.push(FieldError::required(
                    path,
                    "port name or number is required",
                )),
            }
        }
        (None, None) => errors.push(FieldError::invalid(
            path,
            "",
            "resource or service backend is required",
        )),
    }
}

/// Upstream `validateIngressTypedLocalObjectReference`: apiGroup a DNS subdomain, kind and
/// name required and safe as path segments.
fn validate_reference_parts(
    errors: &mut ErrorList,
    api_group: Option<&str>,
    kind: &str,
    name: &str,
    path: &Path,
) {
    if let Some(group) = api_group {
        invalid_each(
            errors,
            &path.child("apiGroup"),
            group,
            names::is_dns1123_subdomain(group),
        );
    }
    for (value, field, required) in [
        (kind, "kind", "kind is required"),
        (name, "name", "name is required"),
    ] {
        if value.is_empty() {
            errors.push(FieldError::required(&path.child(field), required));
        } else {
            invalid_each(
                errors,
                &path.child(field),
                value,
                names::validate_path_segment_name(value, false),
            );
        }
    }
}

fn validate_typed_reference(
    errors: &mut ErrorList,
    reference: &TypedLocalObjectReference,
    path: &Path,
) {
    validate_reference_parts(
        errors,
        reference.api_group.as_deref(),
        &reference.kind,
        &reference.name,
        path,
    );
}

/// Upstream `ValidateIngressLoadBalancerStatus`: IPs (legacy parsing) and hostnames that
/// are DNS names, not IPs.
fn validate_load_balancer_status(
    errors: &mut ErrorList,
    status: &IngressLoadBalancerStatus,
    path: &Path,
) {
    for (i, ingress) in status.ingress.iter().flatten().enumerate() {
        let entry_path = path.child("ingress").index(i);
        if let Some(ip) = ingress.ip.as_deref().filter(|ip| !ip.is_empty()) {
            errors.extend(names::is_valid_ip(&entry_path.child("ip"), ip));
        }
        if let Some(host) = ingress.hostname.as_deref().filter(|h| !h.is_empty()) {
            let host_path = entry_path.child("hostname");
            invalid_each(errors, &host_path, host, names::is_dns1123_subdomain(host));
            if names::parse_ip_sloppy(host).is_some() {
                errors.push(FieldError::invalid(
                    &host_path,
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// IngressClass

/// Parameters default to scope `Cluster`.
pub fn default_ingress_class(class: &mut IngressClass) {
    if let Some(parameters) = class.spec.as_mut().and_then(|s| s.parameters.as_mut()) {
        parameters.scope.get_or_insert_with(|| "Cluster".to_owned());
    }
}

/// Upstream `validateIngressClassSpec`: a domain-prefixed controller of at most 250
/// characters and a well-formed parameters reference.
pub fn validate_ingress_class(class: &IngressClass) -> ErrorList {
    let mut errors = Vec::new();
    let path = Path::new("spec");
    let spec = class.spec.clone().unwrap_or_default();
    let controller = spec.controller.as_deref().unwrap_or_default();
    let controller_path = path.child("controller");
    if controller.len() > MAX_CONTROLLER_LEN {
        errors.push(FieldError::too_long(&controller_path, MAX_CONTROLLER_LEN));
    }
    validate_domain_prefixed_path(&mut errors, &controller_path, controller);
    if let Some(parameters) = &spec.parameters {
        validate_class_parameters(&mut errors, parameters, &path.child("parameters"));
    }
    errors
}

/// [`validate_ingress_class`] and an immutable controller.
pub fn validate_ingress_class_update(new: &IngressClass, old: &IngressClass) -> ErrorList {
    let controller = |c: &IngressClass| {
        c.spec
            .as_ref()
            .and_then(|s| s.controller.clone())
            .unwrap_or_default()
    };
    let mut errors = immutable(
        &controller(new),
        &controller(old),
        &Path::new("spec").child("controller"),
    );
    errors.extend(validate_ingress_class(new));
    errors
}

/// Upstream `IsDomainPrefixedPath`: `acme.io/foo`, the domain a DNS subdomain, the path of
/// HTTP path characters.
fn validate_domain_prefixed_path(errors: &mut ErrorList, path: &Path, value: &str) {
    if value.is_empty() {
        errors.push(FieldError::required(path, ""));
        return;
    }
    let Some((host, rest)) = value
        .split_once('/')
        .filter(|(h, r)| !h.is_empty() && !r.is_empty())
    else {
        errors.push(FieldError::invalid(
            path,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return;
    };
    invalid_each(errors, path, host, names::is_dns1123_subdomain(host));
    let http_char = |c: char| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c);
    if !rest.chars().all(http_char) {
        errors.push(FieldError::invalid(
            path,
            rest,
            names::regex_error(
                "must be a valid path",
                r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+",
                &[],
            ),
        ));
    }
}

/// Upstream `validateIngressClassParametersReference`.
fn validate_class_parameters(
    errors: &mut ErrorList,
    parameters: &IngressClassParametersReference,
    path: &Path,
) {
    validate_reference_parts(
        errors,
        parameters.api_group.as_deref(),
        &parameters.kind,
        &parameters.name,
        path,
    );
    let Some(scope) = parameters.scope.as_deref() else {
        errors.push(FieldError::required(&path.child("scope"), ""));
        return;
    };
    let namespace_path = path.child("namespace");
    match scope {
        "Namespace" => match parameters.namespace.as_deref() {
            None => errors.push(FieldError::required(
                &namespace_path,
                "`parameters.scope` is set to 'Namespace'",
            )),
            Some(namespace) => invalid_each(
                errors,
                &namespace_path,
                namespace,
                names::name_is_dns_label(namespace, false),
            ),
        },
        "Cluster" => {
            if parameters.namespace.is_some() {
                errors.push(FieldError::forbidden(
                    &namespace_path,
                    "`parameters.scope` is set to 'Cluster'",
                ));
            }
        }
        other => errors.push(FieldError::not_supported(
            &path.child("scope"),
            other,
            PARAMETER_SCOPES,
        )),
    }
}

// ---------------------------------------------------------------------------------------
// ServiceCIDR

/// Upstream `ValidateServiceCIDR`: one or two CIDRs (strict form), two only of different
/// families.
pub fn validate_service_cidr(cidr: &ServiceCIDR) -> ErrorList {
    let path = Path::new("spec").child("cidrs");
    let spec = cidr.spec.clone().unwrap_or_default();
    let cidrs = spec.cidrs.as_deref().unwrap_or_default();
    if cidrs.is_empty() {
        return vec![FieldError::required(&path, "at least one CIDR required")];
    }
    if cidrs.len() > 2 {
        return vec![FieldError::invalid(
            &path,
            json(&spec),
            "may only hold up to 2 values",
        )];
    }
    if cidrs.len() == 2 {
        let families: Vec<Option<bool>> = cidrs
            .iter()
            .map(|c| names::parse_cidr_sloppy(c).map(|(ip, _)| ip::is_ipv4(ip)))
            .collect();
        let dual = matches!(families.as_slice(), [Some(a), Some(b)] if a != b);
        if !dual {
            return vec![FieldError::invalid(
                &path,
                json(&spec),
                "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
            )];
        }
    }
    cidrs
        .iter()
        .enumerate()
        .flat_map(|(i, c)| ip::is_valid_cidr_strict(&path.index(i), c))
        .collect()
}

/// Upstream `ValidateServiceCIDRUpdate` (1.33): the CIDRs may not change, except that a
/// single-stack ServiceCIDR may gain a second CIDR of the other family (its first CIDR
/// unchanged) to become dual-stack.
pub fn validate_service_cidr_update(new: &ServiceCIDR, old: &ServiceCIDR) -> ErrorList {
    let path = Path::new("spec").child("cidrs");
    let cidrs = |c: &ServiceCIDR| {
        c.spec
            .as_ref()
            .and_then(|s| s.cidrs.clone())
            .unwrap_or_default()
    };
    let (new_cidrs, old_cidrs) = (cidrs(new), cidrs(old));
    let changed =
        |i: usize| FieldError::invalid(&path.index(i), new_cidrs[i].as_str(), "field is immutable");
    if new_cidrs.len() == old_cidrs.len() {
        return (0..old_cidrs.len())
            .filter(|i| old_cidrs[*i] != new_cidrs[*i])
            .map(changed)
            .collect();
    }
    if old_cidrs.len() == 1 && new_cidrs.len() == 2 {
        let mut errors = Vec::new();
        if new_cidrs[0] != old_cidrs[0] {
            errors.push(changed(0));
        }
        // The new pair must be dual-stack and well formed.
        errors.extend(validate_service_cidr(new));
        return errors;
    }
    vec![FieldError::invalid(
        &path,
        json(&new_cidrs),
        "field is immutable",
    )]
}

// ---------------------------------------------------------------------------------------
// IPAddress

/// Upstream `ValidateIPAddressName`: the name is an IP address in canonical form (a
/// generateName is checked the same way; upstream ignores the prefix flag).
pub fn validate_ip_address_name(name: &str, _prefix: bool) -> Vec<String> {
    ip::is_valid_ip_strict(&Path::default(), name)
        .into_iter()
        .map(|e| e.detail)
        .collect()
}

/// Upstream `validateIPAddressParentReference`: a parentRef (an all-empty one counts as
/// absent) with a resource and a name; group a DNS subdomain; resource, name and
/// namespace safe as path segments.
pub fn validate_ip_address(address: &IPAddress) -> ErrorList {
    let mut errors = Vec::new();
    let path = Path::new("spec").child("parentRef");
    let parent = &address.spec.parent_ref;
    if *parent == ParentReference::default() {
        errors.push(FieldError::required(&path, ""));
        return errors;
    }
    if let Some(group) = parent.group.as_deref().filter(|g| !g.is_empty()) {
        invalid_each(
            &mut errors,
            &path.child("group"),
            group,
            names::is_dns1123_subdomain(group),
        );
    }
    for (value, field) in [(&parent.resource, "resource"), (&parent.name, "name")] {
        if value.is_empty() {
            errors.push(FieldError::required(&path.child(field), ""));
        } else {
            invalid_each(
                &mut errors,
                &path.child(field),
                value.as_str(),
                names::validate_path_segment_name(value, false),
            );
        }
    }
    if let Some(namespace) = parent.namespace.as_deref().filter(|n| !n.is_empty()) {
        invalid_each(
            &mut errors,
            &path.child("namespace"),
            namespace,
            names::validate_path_segment_name(namespace, false),
        );
    }
    errors
}

/// [`validate_ip_address`] and an immutable parentRef.
pub fn validate_ip_address_update(new: &IPAddress, old: &IPAddress) -> ErrorList {
    let mut errors = validate_ip_address(new);
    errors.extend(immutable(
        &new.spec.parent_ref,
        &old.spec.parent_ref,
        &Path::new("spec").child("parentRef"),
    ));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json as j;

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn network_policy_defaults_and_rules() {
        let mut policy: NetworkPolicy = serde_json::from_value(j!({
            "metadata": {"name": "np"},
            "spec": {
                "podSelector": {},
                "egress": [{"ports": [{"port": 53}], "to": [{}]}],
            },
        }))
        .unwrap();
        default_network_policy(&mut policy);
        let spec = policy.spec.as_ref().unwrap();
        assert_eq!(
            spec.policy_types,
            Some(vec!["Ingress".into(), "Egress".into()])
        );
        let egress = &spec.egress.as_ref().unwrap()[0];
        assert_eq!(
            egress.ports.as_ref().unwrap()[0].protocol.as_deref(),
            Some("TCP")
        );
        assert_eq!(
            messages(&validate_network_policy(&policy)),
            ["spec.egress[0].to[0]: Required value: must specify a peer"]
        );
    }

    #[test]
    fn ip_block_excepts_must_be_inside() {
        let mut errors = Vec::new();
        let block = IPBlock {
            cidr: "10.0.0.0/16".into(),
            except: Some(vec![
                "10.0.1.0/24".into(),
                "10.1.0.0/24".into(),
                "10.0.0.0/16".into(),
            ]),
        };
        validate_ip_block(&mut errors, &block, &Path::new("ipBlock"));
        assert_eq!(
            messages(&errors),
            [
                r#"ipBlock.except[1]: Invalid value: "10.1.0.0/24": must be a strict subset of `cidr`"#,
                r#"ipBlock.except[2]: Invalid value: "10.0.0.0/16": must be a strict subset of `cidr`"#,
            ]
        );
    }

    #[test]
    fn ingress_paths_and_backends() {
        let ingress: Ingress = serde_json::from_value(j!({
            "metadata": {"name": "web", "annotations": {"kubernetes.io/ingress.class": "a"}},
            "spec": {
                "ingressClassName": "b",
                "rules": [{"host": "10.0.0.1", "http": {"paths": [
                    {"path": "/a//b", "pathType": "Prefix", "backend": {"service": {"name": "web"}}},
                    {"path": "/", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
                ]}}],
            },
        }))
        .unwrap();
        assert_eq!(
            messages(&validate_ingress(&ingress)),
            [
                r#"spec.rules[0].host: Invalid value: "10.0.0.1": must be a DNS name, not an IP address"#,
                r#"spec.rules[0].http.paths[0].path: Invalid value: "/a//b": must not contain '//'"#,
                "spec.rules[0].http.paths[0].backend: Required value: port name or number is required",
                "spec.rules[0].http.paths[1].pathType: Required value: pathType must be specified",
                r#"annotations.kubernetes.io/ingress.class: Invalid value: "a": must match `ingressClassName` when both are specified"#,
            ]
        );
    }

    #[test]
    fn ingress_class_controller_and_parameters() {
        let mut class: IngressClass = serde_json::from_value(j!({
            "metadata": {"name": "nginx"},
            "spec": {"controller": "nginx", "parameters": {"kind": "Config", "name": "c", "namespace": "x"}},
        }))
        .unwrap();
        default_ingress_class(&mut class);
        assert_eq!(
            messages(&validate_ingress_class(&class)),
            [
                r#"spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")"#,
                "spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'",
            ]
        );
    }

    #[test]
    fn service_cidrs_may_only_become_dual_stack() {
        let cidr = |cidrs: serde_json::Value| -> ServiceCIDR {
            serde_json::from_value(j!({"metadata": {"name": "c"}, "spec": {"cidrs": cidrs}}))
                .unwrap()
        };
        let single = cidr(j!(["10.96.0.0/16"]));
        assert!(validate_service_cidr(&single).is_empty());
        assert!(
            validate_service_cidr_update(&cidr(j!(["10.96.0.0/16", "fd00::/108"])), &single)
                .is_empty()
        );
        assert_eq!(
            messages(&validate_service_cidr_update(
                &cidr(j!(["10.97.0.0/16"])),
                &single
            )),
            [r#"spec.cidrs[0]: Invalid value: "10.97.0.0/16": field is immutable"#]
        );
        assert_eq!(
            messages(&validate_service_cidr(&cidr(j!([
                "10.96.0.0/16",
                "10.97.0.0/16"
            ])))),
            [
                r#"spec.cidrs: Invalid value: {"cidrs":["10.96.0.0/16","10.97.0.0/16"]}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"#
            ]
        );
    }
}
