//! The cluster's certificates and keys, generated on first start under `<data-dir>/pki`
//! with kubeadm's file names and reused afterwards (upstream `kubeadm init phase certs`):
//!
//! | file | what |
//! |---|---|
//! | `ca.crt`, `ca.key` | the cluster CA (CN `kubernetes`, 10 years) |
//! | `apiserver.crt`, `apiserver.key` | the serving certificate (1 year), SANs from [`ServingNames`] |
//! | `admin.crt`, `admin.key` | client certificate CN `kubernetes-admin`, O `system:masters` |
//! | `apiserver-kubelet-client.crt`, `.key` | client certificate for calls to kubelets |
//! | `sa.key`, `sa.pub` | the service-account token signing key (ECDSA P-256, PKCS#8 / SPKI PEM) |
//! | `front-proxy-ca.crt`, `.key` | the front-proxy CA (CN `front-proxy-ca`), which aggregated API servers trust for request headers |
//! | `front-proxy-client.crt`, `.key` | client certificate CN `front-proxy-client`, presented when proxying to them |
//!
//! Keys are written 0600. The serving certificate is issued again when it misses a
//! required name (a new host address, another service range), expires within 30 days, or
//! was not issued by the current CA; the client certificates likewise on expiry or CA change.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::Datelike;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use x509_parser::extensions::GeneralName;

/// The names the serving certificate must cover (its subject alternative names).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServingNames {
    pub dns: BTreeSet<String>,
    pub ips: BTreeSet<IpAddr>,
}

impl ServingNames {
    /// Upstream's set: `localhost`, `127.0.0.1`, every address of the host's interfaces
    /// (IPv6 link-local excepted) and `extra_ips` (the advertise address), the host name,
    /// `kubernetes`, `kubernetes.default`, `kubernetes.default.svc`,
    /// `kubernetes.default.svc.cluster.local` and the `kubernetes` service's IP.
    pub fn for_host(service_ip: IpAddr, extra_ips: &[IpAddr]) -> Self {
        let mut dns: BTreeSet<String> = [
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        if let Some(host) = host_name() {
            dns.insert(host);
        }
        let mut ips: BTreeSet<IpAddr> = host_addresses().into_iter().collect();
        ips.insert(IpAddr::from([127, 0, 0, 1]));
        ips.insert(service_ip);
        ips.extend(extra_ips.iter().copied());
        ServingNames { dns, ips }
    }

    /// Whether every name of `self` is in `other`.
    fn is_subset(&self, other: &ServingNames) -> bool {
        self.dns.is_subset(&other.dns) && self.ips.is_subset(&other.ips)
    }
}

/// The host name in lower case (as a DNS SAN), if it has one.
pub fn host_name() -> Option<String> {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .map(|h| h.to_ascii_lowercase())
        .filter(|h| !h.is_empty())
}

/// The addresses of every interface of the host (IPv6 link-local ones excepted: they
/// need a zone to be reached).
pub fn host_addresses() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter_map(|ifa| ifa.address)
        .filter_map(|addr| {
            if let Some(v4) = addr.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                addr.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .filter(|ip| !matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80))
        .collect()
}

/// A certificate and its private key, PEM.
#[derive(Clone)]
pub struct CertKey {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for CertKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertKey").finish_non_exhaustive()
    }
}

impl CertKey {
    /// The certificate chain and key in rustls' form, for a TLS client or server. `what`
    /// names the pair in errors (`reading the <what> certificate`). Errors: invalid PEM.
    pub fn rustls_pair(
        &self,
        what: &str,
    ) -> anyhow::Result<(
        Vec<rustls::pki_types::CertificateDer<'static>>,
        rustls::pki_types::PrivateKeyDer<'static>,
    )> {
        use rustls::pki_types::pem::PemObject;
        let chain = rustls::pki_types::CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("reading the {what} certificate"))?;
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .with_context(|| format!("reading the {what} key"))?;
        Ok((chain, key))
    }
}

/// The cluster's PKI, as loaded (or generated) by [`Pki::ensure`].
#[derive(Debug, Clone)]
pub struct Pki {
    /// `<data-dir>/pki`.
    pub dir: PathBuf,
    pub ca: CertKey,
    pub serving: CertKey,
    pub admin: CertKey,
    pub kubelet_client: CertKey,
    /// The service-account signing key, PKCS#8 PEM (`sa.key`).
    pub service_account_key_pem: String,
    /// The front-proxy CA (`front-proxy-ca.crt`), kubeadm's `--requestheader-client-ca-file`.
    pub front_proxy_ca: CertKey,
    /// The aggregator's client certificate (`front-proxy-client.crt`), kubeadm's
    /// `--proxy-client-cert-file`.
    pub front_proxy_client: CertKey,
}

/// The common name of the front-proxy client certificate, the one
/// `--requestheader-allowed-names` allows.
pub const FRONT_PROXY_CLIENT_NAME: &str = "front-proxy-client";

/// Days a leaf certificate is valid (kubeadm: one year).
const LEAF_DAYS: u64 = 365;
/// Days the CA is valid (kubeadm: ten years).
const CA_DAYS: u64 = 3650;
/// A certificate expiring sooner than this is issued again on start.
const RENEW_BEFORE_DAYS: i64 = 30;

/// One leaf certificate: its file stem and what it is for.
struct Leaf<'a> {
    stem: &'a str,
    common_name: &'a str,
    organization: Option<&'a str>,
    usage: ExtendedKeyUsagePurpose,
    names: Option<&'a ServingNames>,
}

impl Pki {
    /// Loads the PKI from `dir`, creating what is missing and re-issuing what is stale (see
    /// the module docs). Errors: unreadable or invalid files, a failed write.
    pub fn ensure(dir: &Path, serving_names: &ServingNames) -> anyhow::Result<Pki> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let (ca, ca_new) = ensure_ca(dir, "ca", "kubernetes")?;
        let ca_key = KeyPair::from_pem(&ca.key_pem).context("reading ca.key")?;
        let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).context("reading ca.crt")?;
        let ca_der = pem_to_der(&ca.cert_pem)?;
        let leaf = |spec: Leaf| ensure_leaf(dir, &issuer, &ca_der, ca_new, spec);
        let serving = leaf(Leaf {
            stem: "apiserver",
            common_name: "kube-apiserver",
            organization: None,
            usage: ExtendedKeyUsagePurpose::ServerAuth,
            names: Some(serving_names),
        })?;
        let admin = leaf(Leaf {
            stem: "admin",
            common_name: "kubernetes-admin",
            organization: Some("system:masters"),
            usage: ExtendedKeyUsagePurpose::ClientAuth,
            names: None,
        })?;
        let kubelet_client = leaf(Leaf {
            stem: "apiserver-kubelet-client",
            common_name: "kube-apiserver-kubelet-client",
            organization: Some("kubeadm:cluster-admins"),
            usage: ExtendedKeyUsagePurpose::ClientAuth,
            names: None,
        })?;
        let service_account_key_pem = ensure_service_account_key(dir)?;
        let (front_proxy_ca, front_new) = ensure_ca(dir, "front-proxy-ca", "front-proxy-ca")?;
        let front_key =
            KeyPair::from_pem(&front_proxy_ca.key_pem).context("reading front-proxy-ca.key")?;
        let front_issuer = Issuer::from_ca_cert_pem(&front_proxy_ca.cert_pem, front_key)
            .context("reading front-proxy-ca.crt")?;
        let front_der = pem_to_der(&front_proxy_ca.cert_pem)?;
        let front_proxy_client = ensure_leaf(
            dir,
            &front_issuer,
            &front_der,
            front_new,
            Leaf {
                stem: "front-proxy-client",
                common_name: FRONT_PROXY_CLIENT_NAME,
                organization: None,
                usage: ExtendedKeyUsagePurpose::ClientAuth,
                names: None,
            },
        )?;
        Ok(Pki {
            front_proxy_ca,
            front_proxy_client,
            dir: dir.to_owned(),
            ca,
            serving,
            admin,
            kubelet_client,
            service_account_key_pem,
        })
    }
}

impl Pki {
    /// A client certificate of the cluster CA for a component's own identity (kubeadm's
    /// `kubeconfig` phase: `system:kube-scheduler`, `system:kube-controller-manager`,
    /// `system:node:<name>` in `system:nodes`), kept in `<stem>.crt`/`<stem>.key` and
    /// issued again when missing, stale or for another CA.
    ///
    /// Errors: unreadable files, a failed signature or write.
    pub fn client_certificate(
        &self,
        stem: &str,
        common_name: &str,
        organization: Option<&str>,
    ) -> anyhow::Result<CertKey> {
        let ca_key = KeyPair::from_pem(&self.ca.key_pem).context("reading ca.key")?;
        let issuer =
            Issuer::from_ca_cert_pem(&self.ca.cert_pem, ca_key).context("reading ca.crt")?;
        let ca_der = pem_to_der(&self.ca.cert_pem)?;
        ensure_leaf(
            &self.dir,
            &issuer,
            &ca_der,
            false,
            Leaf {
                stem,
                common_name,
                organization,
                usage: ExtendedKeyUsagePurpose::ClientAuth,
                names: None,
            },
        )
    }
}

/// The CA from `<stem>.crt`/`<stem>.key`, or a new one named `common_name`; `true` when
/// new.
fn ensure_ca(dir: &Path, stem: &str, common_name: &str) -> anyhow::Result<(CertKey, bool)> {
    if let Some(ca) = read_pair(dir, stem)? {
        return Ok((ca, false));
    }
    let mut params = CertificateParams::default();
    params.distinguished_name = name(common_name, None);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    set_validity(&mut params, CA_DAYS);
    let key = KeyPair::generate().context("generating the CA key")?;
    let cert = params.self_signed(&key).context("self-signing the CA")?;
    let ca = CertKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    };
    write_pair(dir, stem, &ca)?;
    Ok((ca, true))
}

/// A leaf from `<stem>.crt`/`.key` if still good, else a new one signed by `issuer`.
fn ensure_leaf(
    dir: &Path,
    issuer: &Issuer<'_, KeyPair>,
    ca_der: &[u8],
    ca_new: bool,
    spec: Leaf,
) -> anyhow::Result<CertKey> {
    if !ca_new
        && let Some(existing) = read_pair(dir, spec.stem)?
        && leaf_is_current(&existing.cert_pem, ca_der, spec.names)?
    {
        return Ok(existing);
    }
    let mut params = CertificateParams::default();
    params.distinguished_name = name(spec.common_name, spec.organization);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![spec.usage];
    params.use_authority_key_identifier_extension = true;
    if let Some(names) = spec.names {
        let mut sans = Vec::new();
        for dns in &names.dns {
            sans.push(SanType::DnsName(dns.as_str().try_into().with_context(
                || format!("{dns:?} is not a valid DNS name for a certificate"),
            )?));
        }
        sans.extend(names.ips.iter().copied().map(SanType::IpAddress));
        params.subject_alt_names = sans;
    }
    set_validity(&mut params, LEAF_DAYS);
    let key = KeyPair::generate().with_context(|| format!("generating {}.key", spec.stem))?;
    let cert = params
        .signed_by(&key, issuer)
        .with_context(|| format!("signing {}.crt", spec.stem))?;
    let pair = CertKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    };
    write_pair(dir, spec.stem, &pair)?;
    Ok(pair)
}

/// Whether `cert_pem` was issued by the CA `ca_der`, is valid for at least
/// [`RENEW_BEFORE_DAYS`] more days and covers `names` (when given).
fn leaf_is_current(
    cert_pem: &str,
    ca_der: &[u8],
    names: Option<&ServingNames>,
) -> anyhow::Result<bool> {
    let der = pem_to_der(cert_pem)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der)
        .map_err(|e| anyhow::anyhow!("parsing a certificate: {e}"))?;
    let (_, ca) = x509_parser::parse_x509_certificate(ca_der)
        .map_err(|e| anyhow::anyhow!("parsing the CA certificate: {e}"))?;
    if cert.verify_signature(Some(ca.public_key())).is_err() {
        return Ok(false);
    }
    let renew_at = chrono::Utc::now().timestamp() + RENEW_BEFORE_DAYS * 86_400;
    if cert.validity().not_after.timestamp() < renew_at {
        return Ok(false);
    }
    Ok(names.is_none_or(|names| names.is_subset(&certificate_names(&cert))))
}

/// The DNS and IP subject alternative names of a certificate.
fn certificate_names(cert: &x509_parser::certificate::X509Certificate<'_>) -> ServingNames {
    let mut names = ServingNames::default();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => {
                    names.dns.insert(dns.to_ascii_lowercase());
                }
                GeneralName::IPAddress(bytes) => {
                    let ip = match bytes.len() {
                        4 => <[u8; 4]>::try_from(*bytes).ok().map(IpAddr::from),
                        16 => <[u8; 16]>::try_from(*bytes).ok().map(IpAddr::from),
                        _ => None,
                    };
                    names.ips.extend(ip);
                }
                _ => {}
            }
        }
    }
    names
}

/// `sa.key` (PKCS#8 PEM), generated with `sa.pub` when absent.
fn ensure_service_account_key(dir: &Path) -> anyhow::Result<String> {
    let key_path = dir.join("sa.key");
    if key_path.exists() {
        return std::fs::read_to_string(&key_path)
            .with_context(|| format!("reading {}", key_path.display()));
    }
    let key = KeyPair::generate().context("generating the service-account key")?;
    let pem = key.serialize_pem();
    write_private(&key_path, &pem)?;
    write_public(&dir.join("sa.pub"), &key.public_key_pem())?;
    Ok(pem)
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    if let Some(o) = organization {
        dn.push(DnType::OrganizationName, o);
    }
    dn.push(DnType::CommonName, common_name);
    dn
}

/// Valid from yesterday (clock skew between machines) for `days` days.
fn set_validity(params: &mut CertificateParams, days: u64) {
    let ymd = |d: chrono::NaiveDate| rcgen::date_time_ymd(d.year(), d.month() as u8, d.day() as u8);
    let today = chrono::Utc::now().date_naive();
    params.not_before = ymd(today - chrono::Days::new(1));
    params.not_after = ymd(today + chrono::Days::new(days));
}

/// The DER of the first certificate in `pem`.
pub fn pem_to_der(pem: &str) -> anyhow::Result<Vec<u8>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .map(|der| der.to_vec())
        .map_err(|e| anyhow::anyhow!("reading a PEM certificate: {e}"))
}

/// The subject of a DER certificate as upstream's `x509.CommonNameUserConversion` reads
/// it: its common name (`None` when absent or empty) and its organizations, in order.
/// `None` as well when `der` is not a certificate.
pub fn certificate_subject(der: &[u8]) -> Option<(String, Vec<String>)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())?
        .to_owned();
    let organizations = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_owned)
        .collect();
    Some((name, organizations))
}

/// `<stem>.crt` and `<stem>.key` if both exist.
fn read_pair(dir: &Path, stem: &str) -> anyhow::Result<Option<CertKey>> {
    let (cert, key) = pair_paths(dir, stem);
    if !(cert.exists() && key.exists()) {
        return Ok(None);
    }
    let read =
        |p: &Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    Ok(Some(CertKey {
        cert_pem: read(&cert)?,
        key_pem: read(&key)?,
    }))
}

fn write_pair(dir: &Path, stem: &str, pair: &CertKey) -> anyhow::Result<()> {
    let (cert, key) = pair_paths(dir, stem);
    write_private(&key, &pair.key_pem)?;
    write_public(&cert, &pair.cert_pem)
}

/// `<dir>/<stem>.crt` and `<dir>/<stem>.key`.
pub fn pair_paths(dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
    )
}

/// Writes `contents` to `path` with `mode`, replacing it atomically (a crash leaves the old
/// file or the new one).
fn write_mode(path: &Path, contents: &str, mode: u32) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(contents.as_bytes())?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes a file readable by its owner only (0600).
pub fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    write_mode(path, contents, 0o600)
}

fn write_public(path: &Path, contents: &str) -> anyhow::Result<()> {
    write_mode(path, contents, 0o644)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn names(ip: [u8; 4]) -> ServingNames {
        ServingNames::for_host(IpAddr::from(ip), &[])
    }

    fn parsed_names(pem: &str) -> ServingNames {
        let der = pem_to_der(pem).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        certificate_names(&cert)
    }

    fn subject(pem: &str) -> (Vec<String>, Vec<String>) {
        let der = pem_to_der(pem).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let cn = cert
            .subject()
            .iter_common_name()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        let o = cert
            .subject()
            .iter_organization()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        (cn, o)
    }

    #[test]
    fn serving_names_cover_upstream_set() {
        let n = names([10, 96, 0, 1]);
        for dns in [
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ] {
            assert!(n.dns.contains(dns), "{dns}");
        }
        assert!(n.dns.contains(&host_name().unwrap()));
        assert!(n.ips.contains(&IpAddr::from([127, 0, 0, 1])));
        assert!(n.ips.contains(&IpAddr::from([10, 96, 0, 1])));
        for ip in host_addresses() {
            assert!(n.ips.contains(&ip), "{ip}");
        }
    }

    #[test]
    fn generates_then_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let want = names([10, 96, 0, 1]);
        let first = Pki::ensure(dir.path(), &want).unwrap();
        assert!(want.is_subset(&parsed_names(&first.serving.cert_pem)));
        assert_eq!(
            subject(&first.admin.cert_pem),
            (
                vec!["kubernetes-admin".into()],
                vec!["system:masters".into()]
            )
        );
        for key in ["ca.key", "apiserver.key", "admin.key", "sa.key"] {
            let mode = std::fs::metadata(dir.path().join(key))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{key}");
        }
        assert!(dir.path().join("sa.pub").exists());

        let again = Pki::ensure(dir.path(), &want).unwrap();
        assert_eq!(again.ca.cert_pem, first.ca.cert_pem);
        assert_eq!(again.serving.cert_pem, first.serving.cert_pem);
        assert_eq!(again.admin.key_pem, first.admin.key_pem);
        assert_eq!(again.service_account_key_pem, first.service_account_key_pem);
        // The front-proxy pair is kept beside the others and reused.
        assert_eq!(again.front_proxy_ca.cert_pem, first.front_proxy_ca.cert_pem);
        assert_eq!(
            again.front_proxy_client.key_pem,
            first.front_proxy_client.key_pem
        );
        assert_eq!(
            subject(&first.front_proxy_client.cert_pem),
            (vec![FRONT_PROXY_CLIENT_NAME.into()], vec![])
        );
        let front_ca = pem_to_der(&first.front_proxy_ca.cert_pem).unwrap();
        assert!(leaf_is_current(&first.front_proxy_client.cert_pem, &front_ca, None).unwrap());
        assert_ne!(first.front_proxy_ca.cert_pem, first.ca.cert_pem);
    }

    #[test]
    fn reissues_serving_cert_for_new_names() {
        let dir = tempfile::tempdir().unwrap();
        let first = Pki::ensure(dir.path(), &names([10, 96, 0, 1])).unwrap();
        let wider = names([10, 100, 0, 1]);
        let second = Pki::ensure(dir.path(), &wider).unwrap();
        assert_ne!(second.serving.cert_pem, first.serving.cert_pem);
        assert!(
            parsed_names(&second.serving.cert_pem)
                .ips
                .contains(&IpAddr::from([10, 100, 0, 1]))
        );
        // Same CA, same client certificates.
        assert_eq!(second.ca.cert_pem, first.ca.cert_pem);
        assert_eq!(second.admin.cert_pem, first.admin.cert_pem);
    }

    #[test]
    fn new_ca_reissues_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let want = names([10, 96, 0, 1]);
        let first = Pki::ensure(dir.path(), &want).unwrap();
        std::fs::remove_file(dir.path().join("ca.key")).unwrap();
        let second = Pki::ensure(dir.path(), &want).unwrap();
        assert_ne!(second.ca.cert_pem, first.ca.cert_pem);
        assert_ne!(second.admin.cert_pem, first.admin.cert_pem);
        let ca_der = pem_to_der(&second.ca.cert_pem).unwrap();
        assert!(leaf_is_current(&second.serving.cert_pem, &ca_der, Some(&want)).unwrap());
        let old_ca = pem_to_der(&first.ca.cert_pem).unwrap();
        assert!(!leaf_is_current(&second.serving.cert_pem, &old_ca, None).unwrap());
    }
}
