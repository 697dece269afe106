//! Name rules (`k8s.io/apimachinery/pkg/util/validation`): DNS-1123 labels and subdomains,
//! qualified names (label keys), label values; each check returns upstream's messages.
//!
//! Every `is_*` function returns the problems of a value, empty when it is valid (upstream's
//! `[]string` results), for the caller to wrap into [`crate::field::FieldError`]s.
//!
//! The machinery helper moves the kubelet's DNS-1123 checks here and adds the rest.

/// `must be no more than <n> characters`.
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// Upstream `RegexError`: `<msg> (e.g. 'a',  or 'b', regex used for validation is '<re>')`.
pub fn regex_error(message: &str, regex: &str, examples: &[&str]) -> String {
    let quoted: Vec<String> = examples.iter().map(|e| format!("'{e}'")).collect();
    if quoted.is_empty() {
        format!("{message} (regex used for validation is '{regex}')")
    } else {
        format!(
            "{message} (e.g. {}, regex used for validation is '{regex}')",
            quoted.join(",  or ")
        )
    }
}

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// Whether `value` matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn matches_dns1123_label(value: &str) -> bool {
    !value.is_empty()
        && value.starts_with(is_lower_alnum)
        && value.ends_with(is_lower_alnum)
        && value.chars().all(|c| is_lower_alnum(c) || c == '-')
}

/// A lowercase RFC 1123 label (namespace names, container names): at most 63 characters.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !matches_dns1123_label(value) {
        errors.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "123-abc"],
        ));
    }
    errors
}

/// A lowercase RFC 1123 subdomain (most object names): at most 253 characters.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push(max_len_error(253));
    }
    if !value.split('.').all(matches_dns1123_label) {
        errors.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            &["example.com"],
        ));
    }
    errors
}

/// A DNS-1035 label (service names): a DNS-1123 label that starts with a letter.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !(matches_dns1123_label(value) && value.starts_with(|c: char| c.is_ascii_lowercase())) {
        errors.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errors
}

/// A port number, 1 to 65535.
pub fn is_valid_port_num(port: i32) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

/// `must be between <lo> and <hi>, inclusive`.
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// An IANA service name (a named port): at most 15 lowercase alphanumerics and single
/// hyphens, with at least one letter.
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if port.len() > 15 {
        errors.push(max_len_error(15));
    }
    if !port.chars().all(|c| is_lower_alnum(c) || c == '-') || port.is_empty() {
        errors
            .push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !port.chars().any(|c| c.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errors.push("must not contain consecutive hyphens (--)".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errors.push("must not begin or end with a hyphen (-)".into());
    }
    errors
}

/// A key of a ConfigMap or Secret (a file name in a volume): `[-._a-zA-Z0-9]+`, at most
/// 253 characters, and not `.`, `..` or starting with `..`.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push(max_len_error(253));
    }
    if value.is_empty()
        || !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        errors.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            "[-._a-zA-Z0-9]+",
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if value == "." {
        errors.push("must not be '.'".into());
    } else if value == ".." {
        errors.push("must not be '..'".into());
    } else if value.starts_with("..") {
        errors.push("must not start with '..'".into());
    }
    errors
}

/// An environment variable name (upstream's relaxed rule): printable ASCII but `=`.
pub fn is_env_var_name(value: &str) -> Vec<String> {
    if !value.is_empty() && value.chars().all(|c| (' '..='~').contains(&c) && c != '=') {
        Vec::new()
    } else {
        vec!["a valid environment variable name must consist only of printable ASCII characters other than '='".into()]
    }
}

/// An IPv4 or IPv6 address.
pub fn is_valid_ip(value: &str) -> Vec<String> {
    if value.parse::<std::net::IpAddr>().is_ok() {
        Vec::new()
    } else {
        vec!["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".into()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_subdomains_and_dns1035() {
        assert!(is_dns1123_label("web-1").is_empty());
        assert_eq!(is_dns1123_label("Web").len(), 1);
        assert!(is_dns1123_label("-a")[0].starts_with("a lowercase RFC 1123 label"));
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(is_dns1123_subdomain("web.node-1").is_empty());
        assert!(!is_dns1123_subdomain("web..x").is_empty());
        assert!(!is_dns1123_subdomain("under_score").is_empty());
        assert!(is_dns1035_label("svc-1").is_empty());
        assert!(is_dns1035_label("1svc")[0].contains("'[a-z]([-a-z0-9]*[a-z0-9])?'"));
    }

    #[test]
    fn ports_keys_env_and_ips() {
        assert!(is_valid_port_num(80).is_empty());
        assert_eq!(
            is_valid_port_num(0),
            ["must be between 1 and 65535, inclusive"]
        );
        assert!(is_valid_port_name("http-alt").is_empty());
        assert_eq!(
            is_valid_port_name("80"),
            ["must contain at least one letter (a-z)"]
        );
        assert!(is_config_map_key("app.properties").is_empty());
        assert_eq!(
            is_config_map_key("a b"),
            [
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            ]
        );
        assert_eq!(is_config_map_key("..x"), ["must not start with '..'"]);
        assert!(is_env_var_name("MY_VAR.1").is_empty());
        assert_eq!(is_env_var_name("A=B").len(), 1);
        assert!(is_valid_ip("10.0.0.1").is_empty() && is_valid_ip("::1").is_empty());
        assert_eq!(is_valid_ip("10.0.0").len(), 1);
    }
}
