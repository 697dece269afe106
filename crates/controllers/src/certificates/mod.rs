//! The CertificateSigningRequest controllers (upstream `pkg/controller/certificates`):
//! [`approver`] auto-approves kubelet client certificates after a SubjectAccessReview,
//! [`signer`] signs approved requests of the `kubernetes.io/*` signers with the cluster
//! CA, and [`cleaner`] deletes old requests.
//!
//! This module holds what they share: the well-known signer names, the parsed view of a
//! request's PEM (`capihelper.ParseCSR`), upstream's kubelet certificate rules
//! (`ValidateKubeletClientCSR`, `ValidateKubeletServingCSR`), the condition helpers and
//! the work-queue loop over the CSR informer (upstream `CertificateController`).

pub mod approver;
pub mod cleaner;
pub mod signer;

use std::collections::BTreeSet;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory};
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::pem::Pem;
use x509_parser::prelude::{FromDer, X509CertificationRequest};

use crate::Error;
use crate::controller_utils::{run_workers, wait_for_cache_sync};

/// Signer of kubelet client certificates (`system:node:<name>` in `system:nodes`).
pub const KUBE_APISERVER_CLIENT_KUBELET_SIGNER: &str =
    "kubernetes.io/kube-apiserver-client-kubelet";
/// Signer of kubelet serving certificates.
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// Signer of any client certificate the API server trusts.
pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// Condition types of a request.
pub(crate) const APPROVED: &str = "Approved";
/// See [`APPROVED`].
pub(crate) const DENIED: &str = "Denied";
/// See [`APPROVED`].
pub(crate) const FAILED: &str = "Failed";

/// The organization every node certificate has.
const NODES_GROUP: &str = "system:nodes";
/// The common name prefix of a node certificate.
const NODE_USER_PREFIX: &str = "system:node:";

/// What the controllers read from `spec.request` (Go's `x509.CertificateRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ParsedRequest {
    /// The subject's attributes in order: OID arcs and the value as a string.
    pub subject: Vec<(Vec<u64>, String)>,
    /// The last common name of the subject (Go's `Subject.CommonName`), "" without one.
    pub common_name: String,
    /// The subject's organizations, in order.
    pub organizations: Vec<String>,
    /// Requested DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// Requested IP subject alternative names.
    pub ip_addresses: Vec<IpAddr>,
    /// Requested e-mail subject alternative names.
    pub email_addresses: Vec<String>,
    /// Requested URI subject alternative names.
    pub uris: Vec<String>,
    /// The DER SubjectPublicKeyInfo of the requested key.
    pub public_key_der: Vec<u8>,
}

/// Parses the first PEM `CERTIFICATE REQUEST` of `pem` and checks its signature
/// (upstream `ParseCSR`). Errors: no such block, malformed DER, a bad signature.
pub(crate) fn parse_request(pem: &[u8]) -> Result<ParsedRequest, String> {
    let block = Pem::iter_from_buffer(pem)
        .next()
        .and_then(Result::ok)
        .filter(|p| p.label == "CERTIFICATE REQUEST")
        .ok_or_else(|| "PEM block type must be CERTIFICATE REQUEST".to_owned())?;
    let (_, csr) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    csr.verify_signature()
        .map_err(|_| "x509: signature verification failure".to_owned())?;
    let info = &csr.certification_request_info;
    let mut parsed = ParsedRequest {
        public_key_der: info.subject_pki.raw.to_vec(),
        ..ParsedRequest::default()
    };
    for rdn in info.subject.iter() {
        for attr in rdn.iter() {
            let Some(arcs) = attr.attr_type().iter() else {
                return Err("x509: subject attribute with an unsupported OID".to_owned());
            };
            let value = attr
                .as_str()
                .map_err(|e| format!("x509: subject attribute not a string: {e}"))?
                .to_owned();
            let arcs: Vec<u64> = arcs.collect();
            match arcs.as_slice() {
                [2, 5, 4, 3] => parsed.common_name.clone_from(&value),
                [2, 5, 4, 10] => parsed.organizations.push(value.clone()),
                _ => {}
            }
            parsed.subject.push((arcs, value));
        }
    }
    for ext in csr.requested_extensions().into_iter().flatten() {
        let ParsedExtension::SubjectAlternativeName(san) = ext else {
            continue;
        };
        for name in &san.general_names {
            match name {
                GeneralName::DNSName(d) => parsed.dns_names.push((*d).to_owned()),
                GeneralName::RFC822Name(e) => parsed.email_addresses.push((*e).to_owned()),
                GeneralName::URI(u) => parsed.uris.push((*u).to_owned()),
                GeneralName::IPAddress(bytes) => {
                    let ip = match bytes.len() {
                        4 => <[u8; 4]>::try_from(*bytes).ok().map(IpAddr::from),
                        16 => <[u8; 16]>::try_from(*bytes).ok().map(IpAddr::from),
                        _ => None,
                    };
                    parsed.ip_addresses.push(
                        ip.ok_or_else(|| format!("x509: invalid IP SAN of {} bytes", bytes.len()))?,
                    );
                }
                _ => {}
            }
        }
    }
    Ok(parsed)
}

/// The usages as a set (upstream `usagesToSet`: duplicates collapse).
fn usage_set(usages: &[String]) -> BTreeSet<&str> {
    usages.iter().map(String::as_str).collect()
}

/// Whether `usages` is exactly `required`, or `required` without key encipherment
/// (upstream allows omitting it for non-RSA keys).
fn usages_match(usages: &[String], required: &[&str]) -> bool {
    let got = usage_set(usages);
    let with: BTreeSet<&str> = required.iter().copied().collect();
    let mut without = with.clone();
    without.remove("key encipherment");
    got == with || got == without
}

/// Upstream `ValidateKubeletClientCSR`: organization exactly `system:nodes`, no SANs, a
/// `system:node:` common name, usages digital signature + client auth (+ key
/// encipherment). Errors: upstream's message for the first rule broken.
pub(crate) fn validate_kubelet_client(
    req: &ParsedRequest,
    usages: &[String],
) -> Result<(), String> {
    if req.organizations != [NODES_GROUP] {
        return Err("subject organization is not system:nodes".to_owned());
    }
    if !req.dns_names.is_empty() {
        return Err("DNS subjectAltNames are not allowed".to_owned());
    }
    if !req.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".to_owned());
    }
    if !req.ip_addresses.is_empty() {
        return Err("IP subjectAltNames are not allowed".to_owned());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".to_owned());
    }
    if !req.common_name.starts_with(NODE_USER_PREFIX) {
        return Err("subject common name does not begin with system:node:".to_owned());
    }
    let required = ["client auth", "digital signature", "key encipherment"];
    if !usages_match(usages, &required) {
        return Err(format!("usages did not match [{}]", required.join(" ")));
    }
    Ok(())
}

/// Upstream `ValidateKubeletServingCSR`: organization exactly `system:nodes`, at least
/// one DNS or IP SAN and no e-mail or URI SAN, a `system:node:` common name, usages
/// digital signature + server auth (+ key encipherment). Errors: upstream's message for
/// the first rule broken.
pub(crate) fn validate_kubelet_serving(
    req: &ParsedRequest,
    usages: &[String],
) -> Result<(), String> {
    if req.organizations != [NODES_GROUP] {
        return Err("subject organization is not system:nodes".to_owned());
    }
    if req.dns_names.is_empty() && req.ip_addresses.is_empty() {
        return Err("DNS or IP subjectAltName is required".to_owned());
    }
    if !req.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".to_owned());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".to_owned());
    }
    if !req.common_name.starts_with(NODE_USER_PREFIX) {
        return Err("subject common name does not begin with system:node:".to_owned());
    }
    let required = ["digital signature", "key encipherment", "server auth"];
    if !usages_match(usages, &required) {
        return Err(format!("usages did not match [{}]", required.join(" ")));
    }
    Ok(())
}

/// The request's usages.
pub(crate) fn usages(csr: &CertificateSigningRequest) -> &[String] {
    csr.spec.usages.as_deref().unwrap_or_default()
}

/// Whether the request has the condition `type_` with status True (upstream
/// `HasTrueCondition`).
pub(crate) fn has_true_condition(csr: &CertificateSigningRequest, type_: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// Whether the request carries a certificate.
pub(crate) fn is_issued(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
}

/// What one CSR controller does with a request that has no certificate yet.
pub(crate) trait CsrHandler: Send + Sync + 'static {
    /// Handles one request (a copy of the informer's). Errors are retried with backoff.
    fn handle(
        &self,
        csr: CertificateSigningRequest,
    ) -> impl Future<Output = Result<(), Error>> + Send;
}

/// Upstream's `CertificateController`: every added or updated request is queued; a
/// worker hands those without a certificate to the handler.
pub(crate) struct CertificateController<H> {
    name: &'static str,
    handler: H,
    requests: Arc<SharedInformer<CertificateSigningRequest>>,
    queue: Arc<WorkQueue<String>>,
}

impl<H: CsrHandler> CertificateController<H> {
    /// The controller `name` (its queue is named `queue_name`) over the factory's CSR
    /// informer.
    pub(crate) fn new(
        name: &'static str,
        queue_name: &str,
        handler: H,
        factory: &SharedInformerFactory,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let queue = Arc::new(WorkQueue::new(queue_name).with_metrics(queue_metrics));
        let requests = factory.informer::<CertificateSigningRequest>();
        let q = Arc::clone(&queue);
        requests.add_event_handler(Box::new(move |d| match d {
            Delta::Added(csr) | Delta::Updated(_, csr) => {
                q.add(csr.metadata.name.clone().unwrap_or_default());
            }
            Delta::Deleted(_) => {}
        }));
        Arc::new(Self {
            name,
            handler,
            requests,
            queue,
        })
    }

    /// Waits for the informer, then syncs with `workers` workers until `cancel`.
    pub(crate) async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        if !wait_for_cache_sync(&cancel, &[&*self.requests]).await {
            return;
        }
        tracing::info!(controller = self.name, "starting certificate controller");
        let this = Arc::clone(&self);
        run_workers(
            self.name,
            Arc::clone(&self.queue),
            workers,
            cancel,
            move |name| {
                let this = Arc::clone(&this);
                async move { this.sync(&name).await }
            },
        )
        .await;
    }

    /// Upstream `syncFunc`: a request gone or already issued needs nothing.
    async fn sync(&self, name: &str) -> Result<(), Error> {
        let Some(csr) = self.requests.store().get(name) else {
            return Ok(());
        };
        if is_issued(&csr) {
            return Ok(());
        }
        self.handler.handle((*csr).clone()).await
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Requests for the tests, made with rcgen.

    use k8s_openapi::ByteString;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequest, CertificateSigningRequestSpec,
    };
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    /// A PEM request for `cn` in `orgs` with the DNS and IP SANs given.
    pub(crate) fn request_pem(cn: &str, orgs: &[&str], dns: &[&str], ips: &[&str]) -> String {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        for o in orgs {
            dn.push(DnType::OrganizationName, *o);
        }
        dn.push(DnType::CommonName, cn);
        params.distinguished_name = dn;
        for d in dns {
            params
                .subject_alt_names
                .push(SanType::DnsName((*d).try_into().unwrap()));
        }
        for ip in ips {
            params
                .subject_alt_names
                .push(SanType::IpAddress(ip.parse().unwrap()));
        }
        let key = KeyPair::generate().unwrap();
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    /// A CSR object for `signer` with `usages`.
    pub(crate) fn csr(
        name: &str,
        pem: &str,
        signer: &str,
        usages: &[&str],
        username: &str,
    ) -> CertificateSigningRequest {
        CertificateSigningRequest {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(pem.as_bytes().to_vec()),
                signer_name: signer.to_owned(),
                usages: Some(usages.iter().map(|u| (*u).to_owned()).collect()),
                username: Some(username.to_owned()),
                ..Default::default()
            },
            status: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::request_pem;
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn parses_subject_and_sans() {
        let pem = request_pem(
            "system:node:n1",
            &["system:nodes"],
            &["n1.example"],
            &["10.0.0.1"],
        );
        let req = parse_request(pem.as_bytes()).unwrap();
        assert_eq!(req.common_name, "system:node:n1");
        assert_eq!(req.organizations, ["system:nodes"]);
        assert_eq!(req.dns_names, ["n1.example"]);
        assert_eq!(req.ip_addresses, [IpAddr::from([10, 0, 0, 1])]);
        assert!(!req.public_key_der.is_empty());
        assert!(parse_request(b"not pem").is_err());
    }

    #[test]
    fn kubelet_client_rules_as_upstream() {
        let ok =
            parse_request(request_pem("system:node:n1", &["system:nodes"], &[], &[]).as_bytes())
                .unwrap();
        let usages = v(&["digital signature", "client auth"]);
        assert_eq!(validate_kubelet_client(&ok, &usages), Ok(()));
        let rsa = v(&["digital signature", "key encipherment", "client auth"]);
        assert_eq!(validate_kubelet_client(&ok, &rsa), Ok(()));
        assert_eq!(
            validate_kubelet_client(&ok, &v(&["client auth"])),
            Err("usages did not match [client auth digital signature key encipherment]".to_owned())
        );
        assert!(
            validate_kubelet_client(
                &ok,
                &v(&["digital signature", "client auth", "server auth"])
            )
            .is_err()
        );
        let org = parse_request(
            request_pem("system:node:n1", &["system:nodes", "x"], &[], &[]).as_bytes(),
        )
        .unwrap();
        assert_eq!(
            validate_kubelet_client(&org, &usages),
            Err("subject organization is not system:nodes".to_owned())
        );
        let san = parse_request(
            request_pem("system:node:n1", &["system:nodes"], &["n1"], &[]).as_bytes(),
        )
        .unwrap();
        assert_eq!(
            validate_kubelet_client(&san, &usages),
            Err("DNS subjectAltNames are not allowed".to_owned())
        );
        let cn = parse_request(request_pem("bob", &["system:nodes"], &[], &[]).as_bytes()).unwrap();
        assert_eq!(
            validate_kubelet_client(&cn, &usages),
            Err("subject common name does not begin with system:node:".to_owned())
        );
    }

    #[test]
    fn kubelet_serving_rules_as_upstream() {
        let usages = v(&["digital signature", "key encipherment", "server auth"]);
        let ok = parse_request(
            request_pem("system:node:n1", &["system:nodes"], &["n1"], &["10.0.0.1"]).as_bytes(),
        )
        .unwrap();
        assert_eq!(validate_kubelet_serving(&ok, &usages), Ok(()));
        assert_eq!(
            validate_kubelet_serving(&ok, &v(&["digital signature", "server auth"])),
            Ok(())
        );
        let no_san =
            parse_request(request_pem("system:node:n1", &["system:nodes"], &[], &[]).as_bytes())
                .unwrap();
        assert_eq!(
            validate_kubelet_serving(&no_san, &usages),
            Err("DNS or IP subjectAltName is required".to_owned())
        );
        let bad_cn =
            parse_request(request_pem("n1", &["system:nodes"], &["n1"], &[]).as_bytes()).unwrap();
        assert_eq!(
            validate_kubelet_serving(&bad_cn, &usages),
            Err("subject common name does not begin with system:node:".to_owned())
        );
        assert!(validate_kubelet_serving(&ok, &v(&["digital signature", "client auth"])).is_err());
    }
}
