//! Name rules (`k8s.io/apimachinery/pkg/util/validation`, `pkg/api/validate/content`,
//! `pkg/api/validation/generic.go` and `path/name.go`): DNS-1123 labels and subdomains,
//! DNS-1035 labels, qualified names (label keys), label values, port names, IP addresses.
//!
//! The `is_*` checks return upstream's messages, one per broken rule, empty when the value is
//! valid; callers wrap each one in [`FieldError::invalid`] as upstream does. The
//! [`ValidateNameFn`]s are the per-kind name rules that metadata validation takes.

use std::net::{IpAddr, Ipv4Addr};

use crate::field::{ErrorList, FieldError, Path};

/// Maximum length of a DNS-1123 label (and of a DNS-1035 label, a label value, the name part
/// of a qualified name).
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Maximum length of a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Maximum length of a label value.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const WILDCARD_DNS1123_SUBDOMAIN_FMT: &str =
    "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const WILDCARD_DNS1123_SUBDOMAIN_ERR: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character";
const C_IDENTIFIER_FMT: &str = "[A-Za-z_][A-Za-z0-9_]*";
const C_IDENTIFIER_ERR: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_'";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_ERR: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const ENV_VAR_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const ENV_VAR_NAME_ERR: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit";
const RELAXED_ENV_VAR_NAME_ERR: &str = "a valid environment variable name must consist only of printable ASCII characters other than '='";
const HTTP_HEADER_NAME_FMT: &str = "[-A-Za-z0-9]+";
const HTTP_HEADER_NAME_ERR: &str =
    "a valid HTTP header must consist of alphanumeric characters or '-'";
const PERCENT_FMT: &str = "[0-9]+%";
const PERCENT_ERR: &str =
    "a valid percent string must be a numeric string followed by an ending '%'";

/// `must be no more than <length> characters`.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `must be non-empty`.
pub fn empty_error() -> &'static str {
    "must be non-empty"
}

/// `must be between <lo> and <hi>, inclusive`.
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// `<msg> (e.g. 'a',  or 'b', regex used for validation is '<fmt>')`, or without examples
/// `<msg> (regex used for validation is '<fmt>')`.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = msg.to_owned();
    if examples.is_empty() {
        out.push_str(&format!(" (regex used for validation is '{fmt}')"));
        return out;
    }
    out.push_str(" (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{example}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(value: &str) -> bool {
    let b = value.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    let end = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => end(first) && end(last) && b.iter().all(inner),
        _ => false,
    }
}

/// Dot-separated DNS-1123 labels.
fn matches_dns1123_subdomain(value: &str) -> bool {
    value.split('.').all(matches_dns1123_label)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_label_key_name(value: &str) -> bool {
    let b = value.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() && b.iter().all(inner)
        }
        _ => false,
    }
}

/// A lowercase RFC 1123 label: at most 63 characters of `[-a-z0-9]`, alphanumeric at both
/// ends (`my-name`).
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_owned());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// A lowercase RFC 1123 subdomain: at most 253 characters, dot-separated RFC 1123 labels
/// (`example.com`).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// An RFC 1035 label: an RFC 1123 label that starts with a letter (service names).
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    let starts_with_letter = value.bytes().next().is_some_and(|c| c.is_ascii_lowercase());
    if !(starts_with_letter && matches_dns1123_label(value)) {
        errs.push(regex_error(
            DNS1035_LABEL_ERR,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `*.` followed by a DNS-1123 subdomain (`*.example.com`).
pub fn is_wildcard_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let valid = value
        .strip_prefix("*.")
        .is_some_and(matches_dns1123_subdomain);
    if !valid {
        errs.push(regex_error(
            WILDCARD_DNS1123_SUBDOMAIN_ERR,
            WILDCARD_DNS1123_SUBDOMAIN_FMT,
            &["*.example.com"],
        ));
    }
    errs
}

/// A qualified name (label key, annotation key, finalizer): an optional DNS-1123 subdomain
/// prefix and `/`, then a name of at most 63 alphanumerics, `-`, `_` or `.`
/// (`example.com/MyName`).
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|msg| format!("prefix part {msg}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(format!(
            "name part {}",
            max_len_error(DNS1123_LABEL_MAX_LENGTH)
        ));
    }
    if !matches_label_key_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// A label value: empty, or at most 63 alphanumerics, `-`, `_` or `.`, alphanumeric at both
/// ends.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !(value.is_empty() || matches_label_key_name(value)) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// An IANA service name as a port name: at most 15 of `[-a-z0-9]`, at least one letter, no
/// `--`, no hyphen at either end.
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    let charset = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-';
    if port.is_empty() || !port.bytes().all(charset) {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_owned(),
        );
    }
    if !port.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_owned());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_owned());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_owned());
    }
    errs
}

/// A port number in 1..=65535.
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    is_in_range(port, 1, 65535)
}

/// `min <= value <= max`.
pub fn is_in_range(value: i64, min: i64, max: i64) -> Vec<String> {
    if (min..=max).contains(&value) {
        Vec::new()
    } else {
        vec![inclusive_range_error(min, max)]
    }
}

/// A C identifier (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_c_identifier(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let valid = b
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if valid {
        Vec::new()
    } else {
        vec![regex_error(
            C_IDENTIFIER_ERR,
            C_IDENTIFIER_FMT,
            &["my_name", "MY_NAME", "MyName"],
        )]
    }
}

/// `.`, `..` and a `..` prefix are refused where a key becomes a file name.
fn has_chdir_prefix(value: &str) -> Vec<String> {
    let msg = match value {
        "." => "must not be '.'",
        ".." => "must not be '..'",
        v if v.starts_with("..") => "must not start with '..'",
        _ => return Vec::new(),
    };
    vec![msg.to_owned()]
}

/// A ConfigMap or Secret key: at most 253 of `[-._a-zA-Z0-9]`, not `.`, `..` or `..*`.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let charset = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_');
    if value.is_empty() || !value.bytes().all(charset) {
        errs.push(regex_error(
            CONFIG_MAP_KEY_ERR,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    errs.extend(has_chdir_prefix(value));
    errs
}

/// The strict environment variable name rule (`[-._a-zA-Z][-._a-zA-Z0-9]*`, not `.`, `..`).
pub fn is_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let b = value.as_bytes();
    let rest = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_');
    let valid = b
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b'-' | b'.' | b'_'))
        && b.iter().all(rest);
    if !valid {
        errs.push(regex_error(
            ENV_VAR_NAME_ERR,
            ENV_VAR_NAME_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        ));
    }
    errs.extend(has_chdir_prefix(value));
    errs
}

/// The relaxed environment variable name rule (GA since v1.34): non-empty printable ASCII
/// without `=`.
pub fn is_relaxed_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.is_empty() {
        errs.push(format!("environment variable name {}", empty_error()));
    }
    if value.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(RELAXED_ENV_VAR_NAME_ERR.to_owned());
    }
    errs
}

/// An HTTP header name (`[-A-Za-z0-9]+`).
pub fn is_http_header_name(value: &str) -> Vec<String> {
    let valid = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-');
    if valid {
        Vec::new()
    } else {
        vec![regex_error(
            HTTP_HEADER_NAME_ERR,
            HTTP_HEADER_NAME_FMT,
            &["X-Header-Name"],
        )]
    }
}

/// A percentage (`[0-9]+%`).
pub fn is_valid_percent(value: &str) -> Vec<String> {
    let valid = value
        .strip_suffix('%')
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()));
    if valid {
        Vec::new()
    } else {
        vec![regex_error(PERCENT_ERR, PERCENT_FMT, &["1%", "93%"])]
    }
}

/// Parses an IP address as Go's `netutils.ParseIPSloppy`: IPv4 parts may carry leading zeros
/// (read as decimal).
pub fn parse_ip_sloppy(value: &str) -> Option<IpAddr> {
    if let Ok(ip) = value.parse::<IpAddr>() {
        return Some(ip);
    }
    let parts: Vec<&str> = value.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (octet, part) in octets.iter_mut().zip(&parts) {
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        *octet = part.parse().ok()?;
    }
    Some(IpAddr::V4(Ipv4Addr::from(octets)))
}

/// An IP address (IPv4 leading zeros tolerated, as upstream).
pub fn is_valid_ip(path: &Path, value: &str) -> ErrorList {
    match parse_ip_sloppy(value) {
        Some(_) => Vec::new(),
        None => vec![FieldError::invalid(
            path,
            value,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        )],
    }
}

/// An IPv4 address (an IPv4-mapped IPv6 address counts, as upstream).
pub fn is_valid_ipv4_address(path: &Path, value: &str) -> ErrorList {
    match parse_ip_sloppy(value) {
        Some(IpAddr::V4(_)) => Vec::new(),
        Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_some() => Vec::new(),
        _ => vec![FieldError::invalid(
            path,
            value,
            "must be a valid IPv4 address",
        )],
    }
}

/// An IPv6 address (not an IPv4 or IPv4-mapped one).
pub fn is_valid_ipv6_address(path: &Path, value: &str) -> ErrorList {
    match parse_ip_sloppy(value) {
        Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => Vec::new(),
        _ => vec![FieldError::invalid(
            path,
            value,
            "must be a valid IPv6 address",
        )],
    }
}

/// Parses `address/prefix-length` as `netutils.ParseCIDRSloppy`.
pub fn parse_cidr_sloppy(value: &str) -> Option<(IpAddr, u8)> {
    let (address, bits) = value.split_once('/')?;
    let ip = parse_ip_sloppy(address)?;
    if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((ip, bits))
}

/// A CIDR value (`10.9.8.0/24`, `2001:db8::/64`).
pub fn is_valid_cidr(path: &Path, value: &str) -> ErrorList {
    match parse_cidr_sloppy(value) {
        Some(_) => Vec::new(),
        None => vec![FieldError::invalid(
            path,
            value,
            "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        )],
    }
}

/// A per-kind name rule (upstream `ValidateNameFunc`): `prefix` is true for a
/// `generateName`, which gets a random suffix appended. Returns the broken rules' messages.
pub type ValidateNameFn = fn(name: &str, prefix: bool) -> Vec<String>;

/// Upstream's `maskTrailingDash`: a generateName's trailing dash is masked as upstream does
/// (its last two characters become `a`), so `web-` is checked as `wea`.
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(head) if !head.is_empty() => {
            let mut chars: Vec<char> = head.chars().collect();
            chars.pop();
            let mut out: String = chars.into_iter().collect();
            out.push('a');
            out
        }
        _ => name.to_owned(),
    }
}

/// Names that must be DNS-1123 subdomains (most kinds).
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_dns1123_subdomain(&mask_trailing_dash(name))
    } else {
        is_dns1123_subdomain(name)
    }
}

/// Names that must be DNS-1123 labels (namespaces, ...).
pub fn name_is_dns_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_dns1123_label(&mask_trailing_dash(name))
    } else {
        is_dns1123_label(name)
    }
}

/// Names that must be DNS-1035 labels (services).
pub fn name_is_dns1035_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_dns1035_label(&mask_trailing_dash(name))
    } else {
        is_dns1035_label(name)
    }
}

/// Names that only need to be safe as a URL path segment (upstream
/// `path.ValidatePathSegmentName`): not `.` or `..`, no `/` or `%`. A prefix may be `.`.
pub fn validate_path_segment_name(name: &str, prefix: bool) -> Vec<String> {
    if !prefix && let Some(bad) = [".", ".."].into_iter().find(|bad| name == *bad) {
        return vec![format!("may not be '{bad}'")];
    }
    ["/", "%"]
        .into_iter()
        .filter(|bad| name.contains(bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

    #[test]
    fn dns1123_label() {
        for ok in ["a", "web-1", "0", "a".repeat(63).as_str()] {
            assert!(is_dns1123_label(ok).is_empty(), "{ok}");
        }
        assert_eq!(is_dns1123_label("Web"), vec![LABEL_MSG]);
        assert_eq!(is_dns1123_label("-a").len(), 1);
        assert_eq!(is_dns1123_label("a-").len(), 1);
        assert_eq!(is_dns1123_label(""), vec![LABEL_MSG]);
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert_eq!(is_dns1123_label("é").len(), 1);
    }

    #[test]
    fn dns1123_subdomain() {
        for ok in ["example.com", "a", "web.node-1", "1.2.3"] {
            assert!(is_dns1123_subdomain(ok).is_empty(), "{ok}");
        }
        let msg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        for bad in ["", "web..x", "under_score", ".a", "a.", "A.b", "a.-b"] {
            assert_eq!(is_dns1123_subdomain(bad), vec![msg], "{bad}");
        }
        let long = format!("{}.{}", "a".repeat(200), "b".repeat(60));
        assert_eq!(
            is_dns1123_subdomain(&long),
            vec!["must be no more than 253 characters"]
        );
    }

    #[test]
    fn dns1035_label() {
        assert!(is_dns1035_label("my-svc").is_empty());
        let msg = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
        assert_eq!(is_dns1035_label("1abc"), vec![msg]);
        assert_eq!(is_dns1035_label("a.b"), vec![msg]);
    }

    #[test]
    fn qualified_names() {
        for ok in [
            "app",
            "MyName",
            "my.name",
            "123-abc",
            "example.com/MyName",
            "app.kubernetes.io/name",
        ] {
            assert!(is_qualified_name(ok).is_empty(), "{ok}");
        }
        let name_msg = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        assert_eq!(is_qualified_name("-a"), vec![name_msg]);
        assert_eq!(
            is_qualified_name("a/"),
            vec![
                "name part must be non-empty".to_owned(),
                name_msg.to_owned()
            ]
        );
        assert_eq!(
            is_qualified_name("/a"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(
            is_qualified_name("Example.com/a"),
            vec![format!(
                "prefix part {}",
                is_dns1123_subdomain("Example.com")[0]
            )]
        );
        assert_eq!(
            is_qualified_name("a/b/c"),
            vec![
                "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ]
        );
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
    }

    #[test]
    fn regex_error_joins_examples() {
        assert_eq!(
            regex_error("m", "f", &["a", "b"]),
            "m (e.g. 'a',  or 'b', regex used for validation is 'f')"
        );
        assert_eq!(
            regex_error("m", "f", &[]),
            "m (regex used for validation is 'f')"
        );
    }

    #[test]
    fn label_values() {
        for ok in ["", "v1", "my_value", "A.b-C"] {
            assert!(is_valid_label_value(ok).is_empty(), "{ok:?}");
        }
        assert_eq!(
            is_valid_label_value("-x"),
            vec![
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
        assert_eq!(is_valid_label_value(&"a".repeat(64)).len(), 1);
        assert_eq!(is_valid_label_value(&"-".repeat(64)).len(), 2);
    }

    #[test]
    fn port_names_and_numbers() {
        assert!(is_valid_port_name("http").is_empty());
        assert!(is_valid_port_name("h2c-1").is_empty());
        assert_eq!(
            is_valid_port_name("123"),
            vec!["must contain at least one letter (a-z)"]
        );
        assert_eq!(
            is_valid_port_name("-a--B"),
            vec![
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "must not contain consecutive hyphens",
                "must not begin or end with a hyphen",
            ]
        );
        assert_eq!(
            is_valid_port_name("abcdefghijklmnop"),
            vec!["must be no more than 15 characters"]
        );
        assert!(is_valid_port_num(80).is_empty());
        assert_eq!(
            is_valid_port_num(0),
            vec!["must be between 1 and 65535, inclusive"]
        );
        assert_eq!(is_valid_port_num(65536).len(), 1);
    }

    #[test]
    fn keys_and_identifiers() {
        assert!(is_config_map_key("key.name").is_empty());
        assert_eq!(is_config_map_key(".."), vec!["must not be '..'"]);
        assert_eq!(is_config_map_key("..a"), vec!["must not start with '..'"]);
        assert_eq!(is_config_map_key("a/b").len(), 1);
        assert!(is_c_identifier("_a1").is_empty());
        assert_eq!(is_c_identifier("1a").len(), 1);
        assert!(is_env_var_name("MY_ENV.NAME").is_empty());
        assert_eq!(is_env_var_name("1A").len(), 1);
        assert!(is_relaxed_env_var_name("1 A:b").is_empty());
        assert_eq!(
            is_relaxed_env_var_name("A=B"),
            vec![
                "a valid environment variable name must consist only of printable ASCII characters other than '='"
            ]
        );
        assert_eq!(is_relaxed_env_var_name("").len(), 1);
        assert!(is_http_header_name("X-Header").is_empty());
        assert_eq!(is_http_header_name("X_H").len(), 1);
        assert!(is_valid_percent("25%").is_empty());
        assert_eq!(is_valid_percent("%").len(), 1);
        assert!(is_wildcard_dns1123_subdomain("*.example.com").is_empty());
        assert_eq!(is_wildcard_dns1123_subdomain("*.*.example.com").len(), 1);
    }

    #[test]
    fn ips_and_cidrs() {
        let p = Path::new("spec").child("clusterIP");
        assert!(is_valid_ip(&p, "10.0.0.1").is_empty());
        assert!(is_valid_ip(&p, "010.000.0.1").is_empty());
        assert!(is_valid_ip(&p, "2001:db8::ffff").is_empty());
        assert_eq!(
            is_valid_ip(&p, "10.0.0.256")[0].to_string(),
            r#"spec.clusterIP: Invalid value: "10.0.0.256": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"#
        );
        assert!(is_valid_ip(&p, "").len() == 1);
        assert!(is_valid_ipv4_address(&p, "1.2.3.4").is_empty());
        assert_eq!(is_valid_ipv4_address(&p, "::1").len(), 1);
        assert!(is_valid_ipv6_address(&p, "::1").is_empty());
        assert_eq!(is_valid_ipv6_address(&p, "1.2.3.4").len(), 1);
        assert!(is_valid_cidr(&p, "10.96.0.0/12").is_empty());
        assert!(is_valid_cidr(&p, "2001:db8::/64").is_empty());
        for bad in ["10.96.0.0", "10.96.0.0/33", "10.96.0.0/", "x/8", "::/129"] {
            assert_eq!(is_valid_cidr(&p, bad).len(), 1, "{bad}");
        }
    }

    #[test]
    fn name_functions() {
        assert!(name_is_dns_subdomain("web.x", false).is_empty());
        assert!(name_is_dns_subdomain("web-", true).is_empty());
        assert_eq!(name_is_dns_subdomain("web-", false).len(), 1);
        assert!(name_is_dns_label("ns-", true).is_empty());
        assert_eq!(
            name_is_dns_label("a.b", false),
            vec!["must not contain dots"]
        );
        assert!(name_is_dns1035_label("svc-", true).is_empty());
        assert_eq!(name_is_dns1035_label("1svc", false).len(), 1);
        assert_eq!(mask_trailing_dash("-"), "-");
        assert_eq!(mask_trailing_dash("ab-"), "aa");
        assert_eq!(
            validate_path_segment_name("..", false),
            vec!["may not be '..'"]
        );
        assert_eq!(
            validate_path_segment_name(".", false),
            vec!["may not be '.'"]
        );
        assert!(validate_path_segment_name(".", true).is_empty());
        assert_eq!(
            validate_path_segment_name("a/b%c", false),
            vec!["may not contain '/'", "may not contain '%'"]
        );
        assert!(validate_path_segment_name("system:admin", false).is_empty());
    }
}
