//! The string formats a CRD schema may name (upstream
//! `pkg/apiserver/validation/formats.go` with kube-openapi's `strfmt` checks), regular
//! expressions (the `pattern` keyword) and Go's `%v` for floats, which upstream's messages
//! use.

use std::net::IpAddr;

use crate::names::{parse_cidr_sloppy, parse_ip_sloppy};

/// Formats validated for CRDs (upstream `supportedVersionedFormats`), without dashes as
/// kube-openapi normalizes them (`date-time` is `datetime`). Any other format is ignored.
const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// The normalized name of `format` when upstream validates it, `None` when it is ignored
/// (`int32`, `int64`, `float`, `double` and unknown names are stripped before validation).
pub(crate) fn supported(format: &str) -> Option<String> {
    let normalized = format.replace('-', "");
    SUPPORTED
        .contains(&normalized.as_str())
        .then_some(normalized)
}

/// Runs a regular expression through the `cel` crate's `matches` (RE2 syntax, as Go's
/// `regexp`). `Err` carries the compile error.
pub(crate) fn regex_match(pattern: &str, text: &str) -> Result<bool, String> {
    let program = cel::Program::compile("s.matches(p)").map_err(|e| e.to_string())?;
    let mut context = cel::Context::default();
    context.add_variable_from_value("s", text.to_owned());
    context.add_variable_from_value("p", pattern.to_owned());
    match program.execute(&context) {
        Ok(cel::Value::Bool(matched)) => Ok(matched),
        Ok(other) => Err(format!("unexpected result {other:?}")),
        Err(err) => {
            let text = err.to_string();
            let reason = text
                .lines()
                .rev()
                .find_map(|l| l.trim().strip_prefix("error: "))
                .unwrap_or(text.as_str())
                .to_owned();
            Err(format!("error parsing regexp: {reason}: `{pattern}`"))
        }
    }
}

/// Whether `pattern` compiles, with Go's `error parsing regexp: ...` shape of message.
pub(crate) fn compile_check(pattern: &str) -> Result<(), String> {
    regex_match(pattern, "").map(|_| ())
}

fn matches(pattern: &str, text: &str) -> bool {
    regex_match(pattern, text).unwrap_or(false)
}

/// Whether `value` is valid for the normalized format name (see [`supported`]).
pub(crate) fn valid(format: &str, value: &str) -> bool {
    match format {
        "bsonobjectid" => value.len() == 24 && value.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(value),
        "email" => is_email(value),
        "hostname" => is_hostname(value),
        "ipv4" => parse_ip_sloppy(value).is_some() && value.contains('.'),
        "ipv6" => value.parse::<IpAddr>().is_ok() && value.contains(':'),
        "cidr" => parse_cidr_sloppy(value).is_some(),
        "mac" => is_mac(value),
        "uuid" => matches(
            "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
            value,
        ),
        "uuid3" => matches(
            "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
            value,
        ),
        "uuid4" => matches(
            "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
            value,
        ),
        "uuid5" => matches(
            "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
            value,
        ),
        "isbn" => is_isbn(value, 10) || is_isbn(value, 13),
        "isbn10" => is_isbn(value, 10),
        "isbn13" => is_isbn(value, 13),
        "creditcard" => is_credit_card(value),
        "ssn" => value.len() == 11 && matches(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$", value),
        "hexcolor" => matches("^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", value),
        "rgbcolor" => matches(
            r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
            value,
        ),
        "byte" => matches(
            r"^(?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|[A-Za-z0-9+\/]{4})$",
            value,
        ),
        "date" => is_date(value),
        "datetime" => is_date_time(value),
        "duration" => is_duration(value),
        _ => true,
    }
}

/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path, no control bytes.
fn is_request_uri(value: &str) -> bool {
    if value.is_empty() || value.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if value.starts_with('/') {
        return true;
    }
    let Some((scheme, rest)) = value.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    let scheme_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    scheme_ok && rest.starts_with('/')
}

/// Go's `net/mail.ParseAddress` for the common forms: `local@domain` or
/// `Name <local@domain>`.
fn is_email(value: &str) -> bool {
    let value = value.trim();
    let addr = match (value.find('<'), value.ends_with('>')) {
        (Some(open), true) => &value[open + 1..value.len() - 1],
        _ => value,
    };
    let Some((local, domain)) = addr.rsplit_once('@') else {
        return false;
    };
    let atext =
        |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii();
    let dot_atom =
        |s: &str| !s.is_empty() && s.split('.').all(|p| !p.is_empty() && p.chars().all(atext));
    let quoted = local.len() >= 2 && local.starts_with('"') && local.ends_with('"');
    (quoted || dot_atom(local))
        && (dot_atom(domain) || (domain.starts_with('[') && domain.ends_with(']')))
}

fn is_hostname(value: &str) -> bool {
    const PATTERN: &str = r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$";
    matches(PATTERN, value) && value.len() <= 255 && value.split('.').all(|p| p.len() <= 63)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx` / `xx-xx` pairs or `xxxx.xxxx`
/// groups.
fn is_mac(value: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let octets_ok = |n: usize| matches!(n, 6 | 8 | 20);
    if value.contains(':') || value.contains('-') {
        let sep = if value.contains(':') { ':' } else { '-' };
        let parts: Vec<&str> = value.split(sep).collect();
        octets_ok(parts.len()) && parts.iter().all(|p| hex(p, 2))
    } else if value.contains('.') {
        let parts: Vec<&str> = value.split('.').collect();
        octets_ok(parts.len() * 2) && parts.iter().all(|p| hex(p, 4))
    } else {
        false
    }
}

fn is_isbn(value: &str, version: usize) -> bool {
    let digits: String = value
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .collect();
    let d: Vec<u32> = digits.chars().filter_map(|c| c.to_digit(10)).collect();
    match version {
        10 => {
            let last_x = digits.len() == 10 && digits.ends_with('X') && d.len() == 9;
            if !(last_x || (digits.len() == 10 && d.len() == 10)) {
                return false;
            }
            let mut sum: u32 = d
                .iter()
                .take(9)
                .enumerate()
                .map(|(i, v)| (i as u32 + 1) * v)
                .sum();
            sum += if last_x { 100 } else { 10 * d[9] };
            sum.is_multiple_of(11)
        }
        13 => {
            if digits.len() != 13 || d.len() != 13 {
                return false;
            }
            let sum: u32 = d
                .iter()
                .take(12)
                .enumerate()
                .map(|(i, v)| if i % 2 == 0 { *v } else { 3 * v })
                .sum();
            (10 - sum % 10) % 10 == d[12]
        }
        _ => false,
    }
}

fn is_credit_card(value: &str) -> bool {
    let digits: String = value.chars().filter(char::is_ascii_digit).collect();
    const PATTERN: &str = r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$";
    if !matches(PATTERN, &digits) {
        return false;
    }
    let mut sum = 0;
    for (i, c) in digits.chars().rev().enumerate() {
        let mut v = c.to_digit(10).unwrap_or(0);
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum % 10 == 0
}

/// `2006-01-02`, a real calendar date.
fn is_date(value: &str) -> bool {
    let b = value.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && value
            .bytes()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d").is_ok()
}

/// kube-openapi's `IsDateTime`: a date, `t`, then `hh:mm:ss[.frac](z|±hh:mm)`
/// (case-insensitive).
fn is_date_time(value: &str) -> bool {
    if value.len() < 4 {
        return false;
    }
    let lower = value.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let time = parts[1];
    let two = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
    let (Some(h), Some(m), Some(s)) = (time.get(0..2), time.get(3..5), time.get(6..8)) else {
        return false;
    };
    if !(two(h) && two(m) && two(s)) || time.get(2..3) != Some(":") || time.get(5..6) != Some(":") {
        return false;
    }
    let mut rest = &time[8..];
    // `(.[0-9]+)?`: any one character, then digits.
    let mut chars = rest.char_indices();
    if let Some((_, first)) = chars.next()
        && first != 'z'
        && first != '+'
        && first != '-'
    {
        let after = &rest[first.len_utf8()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        rest = &after[digits..];
    }
    let zone_ok = rest == "z"
        || (rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && two(&rest[1..3])
            && &rest[3..4] == ":"
            && two(&rest[4..6]));
    zone_ok && h <= "23" && m <= "59" && s <= "59"
}

/// Go's `time.ParseDuration` (`1h30m`, `-1.5s`) or kube-openapi's long form (`3 days`,
/// `1 hour 5 min`).
fn is_duration(value: &str) -> bool {
    go_duration(value) || long_duration(value)
}

fn go_duration(value: &str) -> bool {
    let s = value.strip_prefix(['+', '-']).unwrap_or(value);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    while !rest.is_empty() {
        let int = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut consumed = int;
        let mut frac = 0;
        if rest[consumed..].starts_with('.') {
            consumed += 1;
            frac = rest[consumed..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            consumed += frac;
        }
        if int == 0 && frac == 0 {
            return false;
        }
        rest = &rest[consumed..];
        let unit = ["ns", "us", "µs", "μs", "ms", "s", "m", "h"]
            .iter()
            .filter(|u| rest.starts_with(**u))
            .max_by_key(|u| u.len());
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}

fn long_duration(value: &str) -> bool {
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let mut found = false;
    let mut rest = value;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        let after = &rest[start..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let tail = after[digits..].trim_start();
        let unit_len: usize = tail
            .char_indices()
            .take_while(|(_, c)| c.is_ascii_alphabetic() || *c == 'µ')
            .map(|(_, c)| c.len_utf8())
            .sum();
        if unit_len > 0 {
            let unit = tail[..unit_len].to_lowercase();
            for variants in UNITS {
                let last = variants.len() - 1;
                if variants
                    .iter()
                    .enumerate()
                    .any(|(i, v)| (i == last && unit.starts_with(v)) || unit == *v)
                {
                    found = true;
                }
            }
        }
        rest = &tail[unit_len..];
    }
    found
}

/// Go's `%v` for a float64 (`%g` with the shortest precision): exponent form below 1e-4 or
/// from 1e6 on (`1e+06`), as `fmt` prints numbers in upstream's messages.
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if f == 0.0 {
        return "0".to_owned();
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..6).contains(&exp) {
        let s = format!("{f}");
        s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
    } else {
        let s = format!("{f:e}");
        let (mantissa, e) = s.split_once('e').unwrap_or((s.as_str(), "0"));
        let (sign, digits) = match e.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', e),
        };
        format!("{mantissa}e{sign}{digits:0>2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_match_upstream() {
        assert!(valid("uuid", "5f6c8b5a-1f2b-4c3d-9e4f-0a1b2c3d4e5f"));
        assert!(!valid("uuid", "not-a-uuid"));
        assert!(valid("datetime", "2024-01-02T03:04:05Z"));
        assert!(valid("datetime", "2024-01-02T03:04:05.123+02:00"));
        assert!(!valid("datetime", "2024-01-02"));
        assert!(valid("date", "2024-02-29"));
        assert!(!valid("date", "2023-02-29"));
        assert!(valid("ipv4", "10.0.0.1"));
        assert!(!valid("ipv4", "::1"));
        assert!(valid("ipv6", "::1"));
        assert!(valid("cidr", "10.0.0.0/8"));
        assert!(valid("mac", "00:1a:2b:3c:4d:5e"));
        assert!(valid("hostname", "example.com"));
        assert!(!valid("hostname", "-bad-.com"));
        assert!(valid("byte", "aGVsbG8="));
        assert!(!valid("byte", "hello!"));
        assert!(valid("email", "a@example.com"));
        assert!(!valid("email", "nope"));
        assert!(valid("uri", "https://example.com/x"));
        assert!(!valid("uri", "example"));
        assert!(valid("duration", "1h30m"));
        assert!(valid("duration", "3 days"));
        assert!(!valid("duration", "soon"));
        assert_eq!(supported("date-time").as_deref(), Some("datetime"));
        assert_eq!(supported("int32"), None);
    }

    #[test]
    fn regexes_and_floats() {
        assert_eq!(regex_match("^[a-z]+$", "abc"), Ok(true));
        assert_eq!(regex_match("^[a-z]+$", "ab1"), Ok(false));
        assert!(
            compile_check("(abc")
                .unwrap_err()
                .starts_with("error parsing regexp: ")
        );
        assert_eq!(go_float(0.0), "0");
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(100.0), "100");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(123456.0), "123456");
    }
}
