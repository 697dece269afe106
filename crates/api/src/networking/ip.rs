//! IP and CIDR checks of networking.k8s.io/v1 (upstream
//! `k8s.io/apimachinery/pkg/util/validation/ip.go` as of 1.33): the strict forms that
//! servicecidrs and ipaddresses use, and the CIDR arithmetic of network policies' ipBlocks.
//! The legacy (sloppy) forms are [`crate::names::is_valid_ip`] and
//! [`crate::names::is_valid_cidr`], which is what 1.33 applies with its
//! StrictIPCIDRValidation gate off.

use std::net::IpAddr;

use crate::field::{ErrorList, FieldError, Path};
use crate::names::{parse_cidr_sloppy, parse_ip_sloppy};

const INVALID_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
const INVALID_CIDR: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// Whether `ip` is an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`).
fn is_4in6(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// The address as a 128-bit number and its family's width (32 or 128).
fn bits(ip: IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v4) => (u32::from(v4).into(), 32),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            // Go treats IPv4-mapped addresses as IPv4 (`To4() != nil`).
            Some(v4) => (u32::from(v4).into(), 32),
            None => (u128::from(v6), 128),
        },
    }
}

/// `ip` with every bit past `prefix` cleared.
fn masked(ip: IpAddr, prefix: u8) -> u128 {
    let (value, width) = bits(ip);
    let host = width.saturating_sub(prefix);
    if host >= 128 {
        0
    } else {
        (value >> host) << host
    }
}

/// Whether `ip` falls inside network `net` (`address/prefix`), as Go's `IPNet.Contains`:
/// never across families.
pub fn cidr_contains(net: (IpAddr, u8), ip: IpAddr) -> bool {
    let (_, net_width) = bits(net.0);
    let (_, ip_width) = bits(ip);
    net_width == ip_width && masked(net.0, net.1) == masked(ip, net.1)
}

/// Whether `ip` belongs to the IPv4 family as upstream's `netutils.IsIPv4` sees it
/// (IPv4-mapped IPv6 addresses count).
pub fn is_ipv4(ip: IpAddr) -> bool {
    bits(ip).1 == 32
}

/// Upstream `IsValidIP` (strict): parseable, no leading zeros, not IPv4-mapped IPv6, and
/// in canonical form (`must be in canonical form ("2001:db8::1")`).
pub fn is_valid_ip_strict(path: &Path, value: &str) -> ErrorList {
    let Some(ip) = parse_ip_sloppy(value) else {
        return vec![FieldError::invalid(path, value, INVALID_IP)];
    };
    let mut errors = Vec::new();
    if value.parse::<IpAddr>().is_err() {
        errors.push(FieldError::invalid(path, value, "must not have leading 0s"));
    }
    if is_4in6(ip) {
        errors.push(FieldError::invalid(
            path,
            value,
            "must not be an IPv4-mapped IPv6 address",
        ));
    }
    if errors.is_empty() && ip.to_string() != value {
        errors.push(FieldError::invalid(
            path,
            value,
            format!("must be in canonical form ({:?})", ip.to_string()),
        ));
    }
    errors
}

/// Upstream `IsValidCIDR` (strict): parseable, no leading zeros, not IPv4-mapped, no bits
/// past the prefix length, and canonical (`must be in canonical form ("10.0.0.0/8")`).
pub fn is_valid_cidr_strict(path: &Path, value: &str) -> ErrorList {
    let Some((ip, prefix)) = parse_cidr_sloppy(value) else {
        return vec![FieldError::invalid(path, value, INVALID_CIDR)];
    };
    let strict_parse = value.split_once('/').is_some_and(|(address, length)| {
        address.parse::<IpAddr>().is_ok() && (length == "0" || !length.starts_with('0'))
    });
    let detail = if !strict_parse {
        Some("must not have leading 0s in IP or prefix length")
    } else if is_4in6(ip) {
        Some("must not have an IPv4-mapped IPv6 address")
    } else if masked(ip, prefix) != bits(ip).0 {
        Some("must not have bits set beyond the prefix length")
    } else {
        None
    };
    if let Some(detail) = detail {
        return vec![FieldError::invalid(path, value, detail)];
    }
    let canonical = format!("{ip}/{prefix}");
    if canonical != value {
        return vec![FieldError::invalid(
            path,
            value,
            format!("must be in canonical form ({canonical:?})"),
        )];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_ips_must_be_canonical() {
        let path = Path::new("metadata").child("name");
        assert!(is_valid_ip_strict(&path, "10.0.0.1").is_empty());
        assert!(is_valid_ip_strict(&path, "2001:db8::1").is_empty());
        let detail = |value: &str| is_valid_ip_strict(&path, value)[0].detail.clone();
        assert_eq!(detail("010.0.0.1"), "must not have leading 0s");
        assert_eq!(
            detail("::ffff:1.2.3.4"),
            "must not be an IPv4-mapped IPv6 address"
        );
        assert_eq!(
            detail("2001:DB8:0:0::1"),
            "must be in canonical form (\"2001:db8::1\")"
        );
        assert_eq!(detail("bogus"), INVALID_IP);
    }

    #[test]
    fn strict_cidrs_have_no_host_bits() {
        let path = Path::new("spec").child("cidrs").index(0);
        assert!(is_valid_cidr_strict(&path, "10.96.0.0/12").is_empty());
        assert!(is_valid_cidr_strict(&path, "fd00:10:96::/112").is_empty());
        let detail = |value: &str| is_valid_cidr_strict(&path, value)[0].detail.clone();
        assert_eq!(
            detail("10.96.0.1/12"),
            "must not have bits set beyond the prefix length"
        );
        assert_eq!(
            detail("10.96.0.0/012"),
            "must not have leading 0s in IP or prefix length"
        );
        assert_eq!(
            detail("FD00::/64"),
            "must be in canonical form (\"fd00::/64\")"
        );
        assert!(cidr_contains(
            ("10.0.0.0".parse().unwrap(), 8),
            "10.1.0.0".parse().unwrap()
        ));
        assert!(!cidr_contains(
            ("10.0.0.0".parse().unwrap(), 8),
            "fd00::".parse().unwrap()
        ));
    }
}
