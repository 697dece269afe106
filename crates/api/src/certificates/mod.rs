//! certificates.k8s.io/v1 certificatesigningrequests: validation of creates, updates,
//! `/status` updates and `/approval` updates (`pkg/apis/certificates/validation`), with
//! the request's PEM, signature, signer name and usages checked as upstream.

use std::collections::BTreeSet;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use x509_parser::pem::Pem;
use x509_parser::prelude::{FromDer, X509CertificationRequest};

use crate::field::{ErrorList, FieldError, Path};
use crate::names;
use crate::validation::json;

/// The signer name v1 refuses for new requests.
pub const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// Every key usage upstream knows, sorted.
const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// Condition types whose status may only be True.
const TRUE_ONLY: &[&str] = &["Approved", "Denied", "Failed"];

/// What one update path may do, and what existing objects are tolerated for
/// (upstream's `certificateValidationOptions`).
#[derive(Default)]
struct Options {
    allow_setting_approval_conditions: bool,
    allow_setting_certificate: bool,
    allow_both_approved_and_denied: bool,
    allow_legacy_signer_name: bool,
    allow_duplicate_condition_types: bool,
    allow_empty_condition_type: bool,
    allow_arbitrary_certificate: bool,
    allow_unknown_usages: bool,
    allow_duplicate_usages: bool,
}

fn conditions(csr: &CertificateSigningRequest) -> &[CertificateSigningRequestCondition] {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

fn certificate(csr: &CertificateSigningRequest) -> &[u8] {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .map(|c| c.0.as_slice())
        .unwrap_or_default()
}

fn usages(csr: &CertificateSigningRequest) -> &[String] {
    csr.spec.usages.as_deref().unwrap_or_default()
}

fn has_duplicates<'a>(items: impl Iterator<Item = &'a str>) -> bool {
    let mut seen = BTreeSet::new();
    items.into_iter().any(|item| !seen.insert(item))
}

/// Upstream's `getValidationOptions`: what the stored `old` object already breaks is
/// tolerated.
fn options(new: &CertificateSigningRequest, old: Option<&CertificateSigningRequest>) -> Options {
    let Some(old) = old else {
        return Options::default();
    };
    let types = || conditions(old).iter().map(|c| c.type_.as_str());
    Options {
        allow_both_approved_and_denied: types().any(|t| t == "Approved")
            && types().any(|t| t == "Denied"),
        allow_legacy_signer_name: old.spec.signer_name == LEGACY_UNKNOWN_SIGNER,
        allow_duplicate_condition_types: has_duplicates(types()),
        allow_empty_condition_type: types().any(str::is_empty),
        allow_arbitrary_certificate: certificate(new) == certificate(old)
            || check_certificate(certificate(old)).is_err(),
        allow_unknown_usages: usages(old).iter().any(|u| !USAGES.contains(&u.as_str())),
        allow_duplicate_usages: has_duplicates(usages(old).iter().map(String::as_str)),
        ..Options::default()
    }
}

/// Parses the PEM `CERTIFICATE REQUEST` and checks its signature (`validateCSR`).
pub fn check_request(request: &[u8]) -> Result<(), String> {
    let block = Pem::iter_from_buffer(request)
        .next()
        .and_then(Result::ok)
        .filter(|pem| pem.label == "CERTIFICATE REQUEST")
        .ok_or_else(|| "PEM block type must be CERTIFICATE REQUEST".to_owned())?;
    let (_, csr) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    csr.verify_signature()
        .map_err(|_| "x509: signature verification failure".to_owned())
}

/// `validateCertificate`: empty, or only CERTIFICATE blocks each holding a certificate.
fn check_certificate(data: &[u8]) -> Result<(), String> {
    if data.is_empty() {
        return Ok(());
    }
    let mut blocks = 0;
    for block in Pem::iter_from_buffer(data) {
        let block = block.map_err(|e| format!("invalid PEM data: {e}"))?;
        if block.label != "CERTIFICATE" {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found {:?}",
                block.label
            ));
        }
        x509_parser::parse_x509_certificate(&block.contents)
            .map_err(|e| format!("x509: malformed certificate: {e}"))?;
        blocks += 1;
    }
    if blocks == 0 {
        return Err("must contain at least one CERTIFICATE PEM block".to_owned());
    }
    Ok(())
}

/// `ValidateSignerName`: `<domain>/<path>`, a domain of two or more DNS labels, a path of
/// DNS subdomains.
pub fn validate_signer_name(path: &Path, signer_name: &str) -> ErrorList {
    if signer_name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let Some((domain, signer_path)) = signer_name
        .split_once('/')
        .filter(|(_, rest)| !rest.contains('/'))
    else {
        return vec![FieldError::invalid(
            path,
            signer_name,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    let mut errors = Vec::new();
    if domain.len() > 253 {
        errors.push(FieldError::too_long(path, 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if let Some((label, messages)) = labels
        .iter()
        .map(|l| (l, names::is_dns1123_label(l)))
        .find(|(_, m)| !m.is_empty())
    {
        errors.extend(messages.into_iter().map(|m| {
            FieldError::invalid(path, domain, format!("validating label {label:?}: {m}"))
        }));
    }
    if labels.len() < 2 {
        errors.push(FieldError::invalid(
            path,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    if let Some((label, messages)) = signer_path
        .split('.')
        .map(|l| (l, names::is_dns1123_subdomain(l)))
        .find(|(_, m)| !m.is_empty())
    {
        errors.extend(messages.into_iter().map(|m| {
            FieldError::invalid(
                path,
                signer_path,
                format!("validating label {label:?}: {m}"),
            )
        }));
    }
    let max = 253 + (253 + 63 + 1) + 1;
    if signer_name.len() > max {
        errors.push(FieldError::too_long(path, max));
    }
    errors
}

fn validate_with(csr: &CertificateSigningRequest, options: &Options) -> ErrorList {
    let spec_path = Path::new("spec");
    let mut errors = Vec::new();
    if let Err(message) = check_request(&csr.spec.request.0) {
        errors.push(FieldError::invalid(
            &spec_path.child("request"),
            json(&csr.spec.request),
            message,
        ));
    }
    let usages_path = spec_path.child("usages");
    if usages(csr).is_empty() {
        errors.push(FieldError::required(&usages_path, ""));
    }
    if !options.allow_unknown_usages {
        for (i, usage) in usages(csr).iter().enumerate() {
            if !USAGES.contains(&usage.as_str()) {
                errors.push(FieldError::not_supported(
                    &usages_path.index(i),
                    usage.as_str(),
                    USAGES,
                ));
            }
        }
    }
    if !options.allow_duplicate_usages {
        let mut seen = BTreeSet::new();
        for (i, usage) in usages(csr).iter().enumerate() {
            if !seen.insert(usage) {
                errors.push(FieldError::duplicate(&usages_path.index(i), usage.as_str()));
            }
        }
    }
    let signer_path = spec_path.child("signerName");
    if !options.allow_legacy_signer_name && csr.spec.signer_name == LEGACY_UNKNOWN_SIGNER {
        errors.push(FieldError::invalid(
            &signer_path,
            csr.spec.signer_name.as_str(),
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        errors.extend(validate_signer_name(&signer_path, &csr.spec.signer_name));
    }
    if let Some(seconds) = csr.spec.expiration_seconds.filter(|s| *s < 600) {
        errors.push(FieldError::invalid(
            &spec_path.child("expirationSeconds"),
            seconds,
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    errors.extend(validate_conditions(csr, options));
    if !options.allow_arbitrary_certificate
        && let Err(message) = check_certificate(certificate(csr))
    {
        errors.push(FieldError::invalid(
            &Path::new("status").child("certificate"),
            "<certificate data>",
            message,
        ));
    }
    errors
}

fn validate_conditions(csr: &CertificateSigningRequest, options: &Options) -> ErrorList {
    let path = Path::new("status").child("conditions");
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    let (mut approved, mut denied) = (false, false);
    for (i, condition) in conditions(csr).iter().enumerate() {
        let at = path.index(i);
        let kind = condition.type_.as_str();
        if !options.allow_empty_condition_type && kind.is_empty() {
            errors.push(FieldError::required(&at.child("type"), ""));
        }
        let allowed: &[&str] = if TRUE_ONLY.contains(&kind) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if condition.status.is_empty() {
            errors.push(FieldError::required(&at.child("status"), ""));
        } else if !allowed.contains(&condition.status.as_str()) {
            errors.push(FieldError::not_supported(
                &at.child("status"),
                condition.status.as_str(),
                allowed,
            ));
        }
        if !options.allow_both_approved_and_denied {
            let conflict = match kind {
                "Approved" => {
                    approved = true;
                    denied
                }
                "Denied" => {
                    denied = true;
                    approved
                }
                _ => false,
            };
            if conflict {
                errors.push(FieldError::invalid(
                    &at.child("type"),
                    kind,
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !options.allow_duplicate_condition_types && !seen.insert(kind) {
            errors.push(FieldError::duplicate(&at.child("type"), kind));
        }
    }
    errors
}

fn of_type<'a>(
    csr: &'a CertificateSigningRequest,
    kind: &str,
) -> Vec<&'a CertificateSigningRequestCondition> {
    conditions(csr).iter().filter(|c| c.type_ == kind).collect()
}

fn validate_update_with(
    new: &CertificateSigningRequest,
    old: &CertificateSigningRequest,
    options: &Options,
) -> ErrorList {
    let mut errors = validate_with(new, options);
    let path = Path::new("status").child("conditions");
    for kind in TRUE_ONLY {
        if of_type(new, kind).len() < of_type(old, kind).len() {
            errors.push(FieldError::forbidden(
                &path,
                format!("updates may not remove a condition of type {kind:?}"),
            ));
        }
    }
    if !options.allow_setting_approval_conditions {
        for kind in ["Approved", "Denied"] {
            let (new_conditions, old_conditions) = (of_type(new, kind), of_type(old, kind));
            if new_conditions.len() > old_conditions.len() {
                errors.push(FieldError::forbidden(
                    &path,
                    format!("updates may not add a condition of type {kind:?}"),
                ));
            } else if new_conditions.len() == old_conditions.len()
                && new_conditions != old_conditions
            {
                errors.push(FieldError::forbidden(
                    &path,
                    format!("updates may not modify a condition of type {kind:?}"),
                ));
            }
        }
    }
    if certificate(new) != certificate(old) {
        let at = Path::new("status").child("certificate");
        if !options.allow_setting_certificate {
            errors.push(FieldError::forbidden(
                &at,
                "updates may not set certificate content",
            ));
        } else if !certificate(old).is_empty() {
            errors.push(FieldError::forbidden(
                &at,
                "updates may not modify existing certificate content",
            ));
        }
    }
    errors
}

/// `ValidateCertificateSigningRequestCreate` (metadata excepted: any name is fine).
pub fn validate_create(csr: &CertificateSigningRequest) -> ErrorList {
    validate_with(csr, &options(csr, None))
}

/// `ValidateCertificateSigningRequestStatusUpdate`: status.certificate may be set once;
/// Approved/Denied conditions may not change. The main resource keeps its stored status,
/// so this also serves its updates.
pub fn validate_status_update(
    new: &CertificateSigningRequest,
    old: &CertificateSigningRequest,
) -> ErrorList {
    let options = Options {
        allow_setting_certificate: true,
        ..options(new, Some(old))
    };
    validate_update_with(new, old, &options)
}

/// `ValidateCertificateSigningRequestApprovalUpdate`: Approved/Denied conditions may be
/// added; status.certificate may not change.
pub fn validate_approval_update(
    new: &CertificateSigningRequest,
    old: &CertificateSigningRequest,
) -> ErrorList {
    let options = Options {
        allow_setting_approval_conditions: true,
        ..options(new, Some(old))
    };
    validate_update_with(new, old, &options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    /// A CSR for CN=test with a P-256 key, made with openssl.
    const REQUEST: &str = "-----BEGIN CERTIFICATE REQUEST-----
MIHJMHECAQAwDzENMAsGA1UEAwwEdGVzdDBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABKRqBiRF2hpPvEfvJkF+si3myoQJf2jIR9X4Y+heJ5hU8eEQGnB5MOs/o4+I
PgIypjHaEh4lkDk5y2fBUEc5PDCgADAKBggqhkjOPQQDAgNIADBFAiEAtVSRYx8S
hb3mgigANRm99Uvmc/BY+L4JjJHAuAKlrgoCIGLX5rBb8UhyiDYG2MDCAi7RmnFK
AylKk+plC/zspIwT
-----END CERTIFICATE REQUEST-----
";

    fn csr(request: &str) -> CertificateSigningRequest {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "test"},
            "spec": {
                "request": ByteString(request.as_bytes().to_vec()),
                "signerName": "example.com/my-signer",
                "usages": ["client auth"],
            },
        }))
        .unwrap()
    }

    fn messages(errors: ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_signed_request_is_valid() {
        assert_eq!(
            messages(validate_create(&csr(REQUEST))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn bad_requests_signers_and_usages() {
        let mut bad = csr("hello");
        bad.spec.signer_name = "example".into();
        bad.spec.usages = Some(vec!["flying".into()]);
        let errors = messages(validate_create(&bad));
        assert!(errors[0].starts_with("spec.request: Invalid value: "));
        assert!(errors[0].ends_with(": PEM block type must be CERTIFICATE REQUEST"));
        assert!(errors[1].starts_with(
            r#"spec.usages[0]: Unsupported value: "flying": supported values: "any""#
        ));
        assert_eq!(
            errors[2],
            r#"spec.signerName: Invalid value: "example": must be a fully qualified domain and path of the form 'example.com/signer-name'"#
        );
        let mut tampered = csr(&REQUEST.replace("dGVzdD", "dGVzdE"));
        tampered.spec.signer_name = "example.com/my-signer".into();
        assert!(!validate_create(&tampered).is_empty());
    }

    #[test]
    fn approval_only_through_the_approval_path() {
        let old = csr(REQUEST);
        let mut approved = old.clone();
        approved.status = Some(Default::default());
        approved.status.as_mut().unwrap().conditions =
            Some(vec![CertificateSigningRequestCondition {
                type_: "Approved".into(),
                status: "True".into(),
                ..Default::default()
            }]);
        assert_eq!(
            messages(validate_status_update(&approved, &old)),
            [r#"status.conditions: Forbidden: updates may not add a condition of type "Approved""#]
        );
        assert!(validate_approval_update(&approved, &old).is_empty());
        let mut both = approved.clone();
        both.status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .push(CertificateSigningRequestCondition {
                type_: "Denied".into(),
                status: "True".into(),
                ..Default::default()
            });
        assert_eq!(
            messages(validate_approval_update(&both, &approved)),
            [
                r#"status.conditions[1].type: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive"#
            ]
        );
    }
}
