//! The CSR signing controller (upstream `pkg/controller/certificates/signer`): approved
//! requests of the signers `kubernetes.io/kube-apiserver-client-kubelet`,
//! `kubernetes.io/kubelet-serving` and `kubernetes.io/kube-apiserver-client` are signed
//! with the cluster CA (`--cluster-signing-cert-file`, `--cluster-signing-key-file`).
//!
//! - Only requests that are Approved, not Denied, not Failed and have no certificate are
//!   signed; other signers are left to their own controllers. `kubernetes.io/legacy-unknown`
//!   (which v1 no longer accepts for new requests) is not signed.
//! - Each signer's rules are checked first, as upstream: the kubelet signers need a node
//!   certificate (`system:node:<name>` in exactly `system:nodes`; client: no SANs and
//!   usages digital signature + client auth; serving: DNS/IP SANs only and usages digital
//!   signature + server auth; key encipherment optional for both), kube-apiserver-client
//!   any client certificate (client auth, with optional digital signature and key
//!   encipherment). A request that breaks them gets the condition `Failed`
//!   (`SignerValidationFailure`) through `/status` instead of a certificate.
//! - The certificate (upstream's `PermissiveSigningPolicy`) keeps the request's subject,
//!   SANs and key, has the usages of `spec.usages`, is not a CA, and is valid from 5
//!   minutes ago for `--cluster-signing-duration` (8760 h), or `spec.expirationSeconds`
//!   when shorter (at least 600 s); a lifetime of 8 h or more also ends 5 minutes early,
//!   and none outlives the CA. It is written PEM to `status.certificate` through
//!   `/status`.
//!
//! Not here: a subject with two values of one attribute (two `O`s, say) cannot be
//! written by rcgen yet; such a request is retried with backoff and logged.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber, SubjectPublicKeyInfo,
};
use skiff_client::cache::SharedInformerFactory;
use skiff_client::workqueue::QueueMetrics;

use super::{
    APPROVED, CertificateController, CsrHandler, DENIED, FAILED,
    KUBE_APISERVER_CLIENT_KUBELET_SIGNER, KUBE_APISERVER_CLIENT_SIGNER, KUBELET_SERVING_SIGNER,
    ParsedRequest, has_true_condition, is_issued, parse_request, usages, validate_kubelet_client,
    validate_kubelet_serving,
};
use crate::Error;

/// The controller's name (`--controllers`; upstream's alias `csrsigning`).
pub const NAME: &str = "certificatesigningrequest-signing-controller";
/// The alias upstream's `--controllers` also accepts.
pub const ALIAS: &str = "csrsigning";
/// `--cluster-signing-duration`'s default: one year.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(8760 * 3600);
/// The reason of the `Failed` condition of a request that breaks its signer's rules.
pub const VALIDATION_FAILURE_REASON: &str = "SignerValidationFailure";

/// How far back certificates start (clock skew between machines).
const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// Lifetimes shorter than this are not shortened by [`BACKDATE`] at their end.
const SHORT: Duration = Duration::from_secs(8 * 3600);
/// The shortest lifetime `spec.expirationSeconds` can ask for.
const MIN_DURATION: Duration = Duration::from_secs(600);

/// The signing CA: its certificate and key, PEM, as read from the flags' files.
#[derive(Clone)]
pub struct SigningCa {
    /// The CA certificate, PEM.
    pub cert_pem: String,
    /// The CA private key, PEM (PKCS#8, or what rcgen reads).
    pub key_pem: String,
}

impl std::fmt::Debug for SigningCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningCa").finish_non_exhaustive()
    }
}

impl SigningCa {
    /// Reads `--cluster-signing-cert-file` and `--cluster-signing-key-file`. Errors:
    /// either file cannot be read.
    pub fn read(cert: &std::path::Path, key: &std::path::Path) -> Result<Self, Error> {
        let read = |p: &std::path::Path| {
            std::fs::read_to_string(p)
                .map_err(|e| Error::Config(format!("reading {}: {e}", p.display())))
        };
        Ok(Self {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
        })
    }
}

/// The CA ready to sign.
struct Authority {
    issuer: Issuer<'static, KeyPair>,
    /// The CA's own expiry, seconds since the epoch.
    not_after: i64,
}

impl Authority {
    /// Errors: the certificate or key does not parse.
    fn new(ca: &SigningCa) -> Result<Self, Error> {
        let key = KeyPair::from_pem(&ca.key_pem)
            .map_err(|e| Error::Config(format!("the cluster signing key: {e}")))?;
        let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, key)
            .map_err(|e| Error::Config(format!("the cluster signing certificate: {e}")))?;
        let (_, pem) = x509_parser::pem::parse_x509_pem(ca.cert_pem.as_bytes())
            .map_err(|e| Error::Config(format!("the cluster signing certificate: {e}")))?;
        let cert = pem
            .parse_x509()
            .map_err(|e| Error::Config(format!("the cluster signing certificate: {e}")))?;
        Ok(Self {
            issuer,
            not_after: cert.validity().not_after.timestamp(),
        })
    }
}

/// What the signer does with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Not this controller's, or not ready (unapproved, denied, failed, issued).
    Skip,
    /// The request breaks its signer's rules: the `Failed` condition's message.
    Fail(String),
    /// Sign it.
    Sign,
}

/// Upstream `handle` up to signing: which requests are signed, and the signer's rules.
pub(crate) fn decide(csr: &CertificateSigningRequest, req: &ParsedRequest) -> Decision {
    let approved = has_true_condition(csr, APPROVED) && !has_true_condition(csr, DENIED);
    if !approved || has_true_condition(csr, FAILED) || is_issued(csr) {
        return Decision::Skip;
    }
    let usages = usages(csr);
    let verdict = match csr.spec.signer_name.as_str() {
        KUBE_APISERVER_CLIENT_KUBELET_SIGNER => validate_kubelet_client(req, usages),
        KUBELET_SERVING_SIGNER => validate_kubelet_serving(req, usages),
        KUBE_APISERVER_CLIENT_SIGNER => valid_api_server_client_usages(usages),
        _ => return Decision::Skip,
    };
    match verdict {
        Ok(()) => Decision::Sign,
        Err(message) => Decision::Fail(message),
    }
}

/// Upstream `validAPIServerClientUsages`: client auth, with digital signature and key
/// encipherment allowed.
fn valid_api_server_client_usages(usages: &[String]) -> Result<(), String> {
    let mut client_auth = false;
    for u in usages {
        match u.as_str() {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => return Err(format!("invalid usage for client certificate: {other}")),
        }
    }
    if !client_auth {
        return Err("missing required usage for client certificate: client auth".to_owned());
    }
    Ok(())
}

/// The certificate's lifetime (upstream `duration`): `default` without
/// `spec.expirationSeconds`, else the request's, at most `default` and at least 600 s.
pub(crate) fn duration(default: Duration, expiration_seconds: Option<i32>) -> Duration {
    let Some(seconds) = expiration_seconds else {
        return default;
    };
    let requested = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    requested.clamp(MIN_DURATION.min(default), default)
}

/// Validity of a certificate of lifetime `ttl` signed at `now` by a CA that expires at
/// `ca_not_after` (seconds since the epoch; upstream `PermissiveSigningPolicy.apply`).
/// Errors: the CA has expired.
pub(crate) fn validity(now: i64, ttl: Duration, ca_not_after: i64) -> Result<(i64, i64), String> {
    let ttl_secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX / 2);
    let backdate = i64::try_from(BACKDATE.as_secs()).unwrap_or(0);
    let not_before = now - backdate;
    let mut not_after = if ttl < SHORT {
        now.saturating_add(ttl_secs)
    } else {
        now.saturating_add(ttl_secs - backdate)
    };
    if not_after >= ca_not_after {
        not_after = ca_not_after;
    }
    if not_before >= ca_not_after || now >= ca_not_after {
        return Err(format!("the signer has expired: NotAfter={ca_not_after}"));
    }
    Ok((not_before, not_after))
}

/// Upstream `keyUsagesFromStrings`: the key usages and the extended key usages (sorted
/// and without duplicates, as Go's enum orders them). Errors: an unknown usage.
pub(crate) fn key_usages(
    usages: &[String],
) -> Result<(Vec<KeyUsagePurpose>, Vec<ExtendedKeyUsagePurpose>), String> {
    let mut key = Vec::new();
    let mut ext: Vec<(u8, ExtendedKeyUsagePurpose)> = Vec::new();
    let mut unknown = Vec::new();
    for u in usages {
        let k = match u.as_str() {
            "signing" | "digital signature" => Some(KeyUsagePurpose::DigitalSignature),
            "content commitment" => Some(KeyUsagePurpose::ContentCommitment),
            "key encipherment" => Some(KeyUsagePurpose::KeyEncipherment),
            "key agreement" => Some(KeyUsagePurpose::KeyAgreement),
            "data encipherment" => Some(KeyUsagePurpose::DataEncipherment),
            "cert sign" => Some(KeyUsagePurpose::KeyCertSign),
            "crl sign" => Some(KeyUsagePurpose::CrlSign),
            "encipher only" => Some(KeyUsagePurpose::EncipherOnly),
            "decipher only" => Some(KeyUsagePurpose::DecipherOnly),
            _ => None,
        };
        if let Some(k) = k {
            if !key.contains(&k) {
                key.push(k);
            }
            continue;
        }
        let e = match u.as_str() {
            "any" => (0, ExtendedKeyUsagePurpose::Any),
            "server auth" => (1, ExtendedKeyUsagePurpose::ServerAuth),
            "client auth" => (2, ExtendedKeyUsagePurpose::ClientAuth),
            "code signing" => (3, ExtendedKeyUsagePurpose::CodeSigning),
            "email protection" | "s/mime" => (4, ExtendedKeyUsagePurpose::EmailProtection),
            "ipsec end system" => (
                5,
                ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 5]),
            ),
            "ipsec tunnel" => (
                6,
                ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 6]),
            ),
            "ipsec user" => (
                7,
                ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 7]),
            ),
            "timestamping" => (8, ExtendedKeyUsagePurpose::TimeStamping),
            "ocsp signing" => (9, ExtendedKeyUsagePurpose::OcspSigning),
            "microsoft sgc" => (
                10,
                ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 4, 1, 311, 10, 3, 3]),
            ),
            "netscape sgc" => (
                11,
                ExtendedKeyUsagePurpose::Other(vec![2, 16, 840, 1, 113_730, 4, 1]),
            ),
            other => {
                unknown.push(other.to_owned());
                continue;
            }
        };
        if !ext.iter().any(|(i, _)| *i == e.0) {
            ext.push(e);
        }
    }
    if !unknown.is_empty() {
        return Err(format!("unrecognized usage values: {unknown:?}"));
    }
    ext.sort_by_key(|(i, _)| *i);
    Ok((key, ext.into_iter().map(|(_, e)| e).collect()))
}

/// The time `secs` seconds after the epoch. Errors: out of the representable range.
fn date_time(secs: i64) -> Result<time::OffsetDateTime, String> {
    time::OffsetDateTime::from_unix_timestamp(secs).map_err(|e| format!("validity: {e}"))
}

/// A positive random 128-bit serial number. Errors: no randomness.
fn serial_number() -> Result<SerialNumber, String> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "no randomness for a serial number".to_owned())?;
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01;
    Ok(SerialNumber::from_slice(&bytes))
}

/// Signs `req` as upstream's local signer does (see the module doc) at `now` (seconds
/// since the epoch); the certificate PEM. Errors: an unknown usage, an expired CA, a
/// key type rcgen cannot carry, a subject it cannot write.
fn sign(
    ca: &Authority,
    req: &ParsedRequest,
    usages: &[String],
    ttl: Duration,
    now: i64,
) -> Result<String, String> {
    let (key_usages, extended) = key_usages(usages)?;
    let (not_before, not_after) = validity(now, ttl, ca.not_after)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    let mut seen: Vec<&[u64]> = Vec::new();
    for (oid, value) in &req.subject {
        if seen.contains(&oid.as_slice()) {
            return Err(format!(
                "the subject has more than one attribute {oid:?}, which cannot be signed yet"
            ));
        }
        seen.push(oid);
        dn.push(DnType::from_oid(oid), value.as_str());
    }
    params.distinguished_name = dn;
    for dns in &req.dns_names {
        let name = dns
            .as_str()
            .try_into()
            .map_err(|e| format!("DNS name {dns:?}: {e}"))?;
        params.subject_alt_names.push(SanType::DnsName(name));
    }
    for ip in &req.ip_addresses {
        params.subject_alt_names.push(SanType::IpAddress(*ip));
    }
    for email in &req.email_addresses {
        let name = email
            .as_str()
            .try_into()
            .map_err(|e| format!("e-mail address {email:?}: {e}"))?;
        params.subject_alt_names.push(SanType::Rfc822Name(name));
    }
    for uri in &req.uris {
        let name = uri
            .as_str()
            .try_into()
            .map_err(|e| format!("URI {uri:?}: {e}"))?;
        params.subject_alt_names.push(SanType::URI(name));
    }
    params.key_usages = key_usages;
    params.extended_key_usages = extended;
    params.is_ca = IsCa::ExplicitNoCa;
    params.use_authority_key_identifier_extension = true;
    params.serial_number = Some(serial_number()?);
    params.not_before = date_time(not_before)?;
    params.not_after = date_time(not_after)?;
    let key = SubjectPublicKeyInfo::from_der(&req.public_key_der)
        .map_err(|e| format!("the request's public key: {e}"))?;
    let cert = params
        .signed_by(&key, &ca.issuer)
        .map_err(|e| format!("failed to sign certificate: {e}"))?;
    Ok(cert.pem())
}

/// The signer's handler; see the module doc.
pub(crate) struct Signer {
    client: kube::Client,
    ca: Authority,
    duration: Duration,
}

impl Signer {
    /// Writes the request's status through `/status` (upstream `UpdateStatus`).
    async fn update_status(&self, csr: &CertificateSigningRequest) -> Result<(), Error> {
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        let name = csr.metadata.name.clone().unwrap_or_default();
        api.replace_status(&name, &PostParams::default(), csr)
            .await?;
        Ok(())
    }
}

impl CsrHandler for Signer {
    async fn handle(&self, mut csr: CertificateSigningRequest) -> Result<(), Error> {
        let ours = matches!(
            csr.spec.signer_name.as_str(),
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER
                | KUBELET_SERVING_SIGNER
                | KUBE_APISERVER_CLIENT_SIGNER
        );
        let approved = has_true_condition(&csr, APPROVED) && !has_true_condition(&csr, DENIED);
        if !ours || !approved || has_true_condition(&csr, FAILED) {
            return Ok(());
        }
        let name = csr.metadata.name.clone().unwrap_or_default();
        let req = parse_request(&csr.spec.request.0)
            .map_err(|e| Error::Invalid(format!("unable to parse csr {name:?}: {e}")))?;
        match decide(&csr, &req) {
            Decision::Skip => Ok(()),
            Decision::Fail(message) => {
                tracing::info!(csr = %name, %message, "the request breaks its signer's rules");
                csr.status
                    .get_or_insert_with(Default::default)
                    .conditions
                    .get_or_insert_with(Vec::new)
                    .push(CertificateSigningRequestCondition {
                        type_: FAILED.to_owned(),
                        status: "True".to_owned(),
                        reason: Some(VALIDATION_FAILURE_REASON.to_owned()),
                        message: Some(message),
                        last_update_time: Some(Time(Timestamp::now())),
                        ..Default::default()
                    });
                self.update_status(&csr).await
            }
            Decision::Sign => {
                let ttl = duration(self.duration, csr.spec.expiration_seconds);
                let now = Timestamp::now().as_second();
                let pem = sign(&self.ca, &req, usages(&csr), ttl, now)
                    .map_err(|e| Error::Invalid(format!("error auto signing csr {name:?}: {e}")))?;
                csr.status.get_or_insert_with(Default::default).certificate =
                    Some(ByteString(pem.into_bytes()));
                self.update_status(&csr).await?;
                tracing::info!(csr = %name, signer = %csr.spec.signer_name, "signed the certificate signing request");
                Ok(())
            }
        }
    }
}

/// The signing controller.
pub(crate) type SigningController = CertificateController<Signer>;

/// Makes the signing controller with the CA and `--cluster-signing-duration`. Errors:
/// the CA's certificate or key does not parse.
pub(crate) fn new(
    client: kube::Client,
    factory: &SharedInformerFactory,
    ca: &SigningCa,
    duration: Duration,
    queue_metrics: Arc<dyn QueueMetrics>,
) -> Result<Arc<SigningController>, Error> {
    let ca = Authority::new(ca)?;
    Ok(CertificateController::new(
        NAME,
        "csrsigning",
        Signer {
            client,
            ca,
            duration,
        },
        factory,
        queue_metrics,
    ))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{csr, request_pem};
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams};

    fn condition(type_: &str) -> CertificateSigningRequestCondition {
        CertificateSigningRequestCondition {
            type_: type_.to_owned(),
            status: "True".to_owned(),
            ..Default::default()
        }
    }

    fn with(mut c: CertificateSigningRequest, types: &[&str]) -> CertificateSigningRequest {
        c.status.get_or_insert_with(Default::default).conditions =
            Some(types.iter().map(|t| condition(t)).collect());
        c
    }

    fn ca() -> Authority {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "test-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Authority::new(&SigningCa {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
        .unwrap()
    }

    #[test]
    fn only_approved_pending_requests_are_signed() {
        let pem = request_pem("system:node:n1", &["system:nodes"], &[], &[]);
        let c = csr(
            "a",
            &pem,
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            &["digital signature", "client auth"],
            "u",
        );
        let req = parse_request(pem.as_bytes()).unwrap();
        assert_eq!(decide(&c, &req), Decision::Skip, "pending");
        assert_eq!(
            decide(&with(c.clone(), &["Approved"]), &req),
            Decision::Sign
        );
        assert_eq!(
            decide(&with(c.clone(), &["Approved", "Denied"]), &req),
            Decision::Skip
        );
        assert_eq!(
            decide(&with(c.clone(), &["Approved", "Failed"]), &req),
            Decision::Skip
        );
        let mut issued = with(c.clone(), &["Approved"]);
        issued.status.as_mut().unwrap().certificate = Some(ByteString(b"x".to_vec()));
        assert_eq!(decide(&issued, &req), Decision::Skip);
        let mut legacy = with(c, &["Approved"]);
        legacy.spec.signer_name = "kubernetes.io/legacy-unknown".to_owned();
        assert_eq!(decide(&legacy, &req), Decision::Skip);
    }

    #[test]
    fn signer_rules_fail_requests() {
        let bad_cn = request_pem("n1", &["system:nodes"], &["n1"], &[]);
        let c = with(
            csr(
                "a",
                &bad_cn,
                KUBELET_SERVING_SIGNER,
                &["digital signature", "server auth"],
                "u",
            ),
            &["Approved"],
        );
        assert_eq!(
            decide(&c, &parse_request(bad_cn.as_bytes()).unwrap()),
            Decision::Fail("subject common name does not begin with system:node:".to_owned())
        );
        let user = request_pem("alice", &["dev"], &[], &[]);
        let req = parse_request(user.as_bytes()).unwrap();
        let client = |u: &[&str]| {
            with(
                csr("b", &user, KUBE_APISERVER_CLIENT_SIGNER, u, "alice"),
                &["Approved"],
            )
        };
        assert_eq!(decide(&client(&["client auth"]), &req), Decision::Sign);
        assert_eq!(
            decide(
                &client(&["digital signature", "key encipherment", "client auth"]),
                &req
            ),
            Decision::Sign
        );
        assert_eq!(
            decide(&client(&["client auth", "server auth"]), &req),
            Decision::Fail("invalid usage for client certificate: server auth".to_owned())
        );
        assert_eq!(
            decide(&client(&["digital signature"]), &req),
            Decision::Fail("missing required usage for client certificate: client auth".to_owned())
        );
    }

    #[test]
    fn durations_as_upstream() {
        let year = DEFAULT_DURATION;
        assert_eq!(duration(year, None), year);
        assert_eq!(duration(year, Some(3600)), Duration::from_secs(3600));
        assert_eq!(duration(year, Some(60)), Duration::from_secs(600));
        assert_eq!(duration(year, Some(-5)), Duration::from_secs(600));
        assert_eq!(duration(year, Some(i32::MAX)), year);
        // Long lifetimes end five minutes early, short ones do not; none outlives the CA.
        assert_eq!(
            validity(10_000, year, i64::MAX),
            Ok((9_700, 10_000 + 31_536_000 - 300))
        );
        assert_eq!(
            validity(10_000, Duration::from_secs(3600), i64::MAX),
            Ok((9_700, 13_600))
        );
        assert_eq!(validity(10_000, year, 20_000), Ok((9_700, 20_000)));
        assert!(validity(10_000, year, 9_000).is_err());
    }

    #[test]
    fn usages_map_to_x509() {
        let v = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        let (key, ext) = key_usages(&v(&[
            "client auth",
            "digital signature",
            "server auth",
            "signing",
        ]))
        .unwrap();
        assert_eq!(key, [KeyUsagePurpose::DigitalSignature]);
        assert_eq!(
            ext,
            [
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth
            ]
        );
        assert!(key_usages(&v(&["bogus"])).is_err());
    }

    #[test]
    fn signs_a_kubelet_client_certificate() {
        let ca = ca();
        let pem = request_pem("system:node:n1", &["system:nodes"], &[], &[]);
        let req = parse_request(pem.as_bytes()).unwrap();
        let now = Timestamp::now().as_second();
        let usages = vec!["digital signature".to_owned(), "client auth".to_owned()];
        let cert = sign(&ca, &req, &usages, Duration::from_secs(3600), now).unwrap();
        let (_, block) = x509_parser::pem::parse_x509_pem(cert.as_bytes()).unwrap();
        let x509 = block.parse_x509().unwrap();
        let cn: Vec<&str> = x509
            .subject()
            .iter_common_name()
            .map(|a| a.as_str().unwrap())
            .collect();
        let o: Vec<&str> = x509
            .subject()
            .iter_organization()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(cn, ["system:node:n1"]);
        assert_eq!(o, ["system:nodes"]);
        assert_eq!(x509.validity().not_before.timestamp(), now - 300);
        assert_eq!(x509.validity().not_after.timestamp(), now + 3600);
        let eku = x509.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        assert!(!x509.is_ca());
        assert_eq!(x509.public_key().raw, req.public_key_der.as_slice());
        // Two organizations cannot be written by rcgen yet: an error, not a lost group.
        // (rcgen cannot make such a request either: the attribute is added by hand.)
        let mut req = req;
        req.subject.push((vec![2, 5, 4, 10], "more".to_owned()));
        assert!(sign(&ca, &req, &usages, Duration::from_secs(3600), now).is_err());
    }
}
