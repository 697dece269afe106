//! Client-certificate users (upstream `x509.CommonNameUserConversion`): the subject's
//! common name is the user, its organizations are the groups. The TLS handshake has
//! already verified the certificate against the cluster CA.

use super::{AUTHENTICATED, UserInfo};

/// The user of a verified client certificate (DER), or `None` if it cannot be parsed or
/// has no common name (upstream refuses such certificates).
pub fn user_from_certificate(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())?
        .to_owned();
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_owned)
        .collect();
    groups.push(AUTHENTICATED.to_owned());
    Some(UserInfo {
        name,
        uid: String::new(),
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_bootstrap::pki::{Pki, ServingNames, pem_to_der};

    #[test]
    fn admin_certificate_is_a_system_master() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::ensure(dir.path(), &ServingNames::default()).unwrap();
        let user = user_from_certificate(&pem_to_der(&pki.admin.cert_pem).unwrap()).unwrap();
        assert_eq!(user.name, "kubernetes-admin");
        assert_eq!(user.groups, vec!["system:masters", AUTHENTICATED]);
        assert_eq!(user_from_certificate(b"not a certificate"), None);
    }
}
