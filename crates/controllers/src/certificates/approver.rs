//! The CSR approving controller (upstream
//! `pkg/controller/certificates/approver/sarapprove.go`): a pending
//! `kubernetes.io/kube-apiserver-client-kubelet` request that is a node client
//! certificate (`system:node:<name>` in exactly `system:nodes`, no SANs, usages digital
//! signature + client auth, key encipherment allowed) is approved when a
//! SubjectAccessReview (authorization.k8s.io/v1) allows its requester to `create`
//!
//! - `certificatesigningrequests/selfnodeclient` when the requester is the node itself
//!   (its username is the request's common name): a kubelet renewing its certificate;
//! - `certificatesigningrequests/nodeclient`: a bootstrap token requesting a node's
//!   first certificate.
//!
//! The first allowed one approves: the condition `Approved` (reason `AutoApproved`,
//! upstream's message) is added through the `/approval` subresource. A request that is
//! recognized but not allowed is retried with backoff. Kubelet serving certificates are
//! never auto-approved, as upstream.

use std::sync::Arc;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use kube::api::{Api, PostParams};
use skiff_client::cache::SharedInformerFactory;
use skiff_client::workqueue::QueueMetrics;

use super::{
    APPROVED, CertificateController, CsrHandler, DENIED, KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
    ParsedRequest, has_true_condition, parse_request, usages, validate_kubelet_client,
};
use crate::Error;

/// The controller's name (`--controllers`; upstream's alias `csrapproving`).
pub const NAME: &str = "certificatesigningrequest-approving-controller";
/// The alias upstream's `--controllers` also accepts.
pub const ALIAS: &str = "csrapproving";

/// The reason of the condition the approver adds.
pub const AUTO_APPROVED_REASON: &str = "AutoApproved";

/// One kind of request the approver recognizes: the SubjectAccessReview subresource that
/// must be allowed, and the approval's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recognizer {
    /// `certificatesigningrequests/<subresource>` `create` is reviewed.
    pub subresource: &'static str,
    /// The `Approved` condition's message.
    pub message: &'static str,
}

/// A kubelet renewing its own client certificate.
pub(crate) const SELF_NODE_CLIENT: Recognizer = Recognizer {
    subresource: "selfnodeclient",
    message: "Auto approving self kubelet client certificate after SubjectAccessReview.",
};
/// Anyone requesting a node client certificate (a bootstrap token).
pub(crate) const NODE_CLIENT: Recognizer = Recognizer {
    subresource: "nodeclient",
    message: "Auto approving kubelet client certificate after SubjectAccessReview.",
};

/// Upstream `isNodeClientCert`: the client-kubelet signer and the kubelet client rules.
fn is_node_client_cert(csr: &CertificateSigningRequest, req: &ParsedRequest) -> bool {
    csr.spec.signer_name == KUBE_APISERVER_CLIENT_KUBELET_SIGNER
        && validate_kubelet_client(req, usages(csr)).is_ok()
}

/// The recognizers that match the request, in the order they are tried (upstream
/// `recognizers()`: self node client first). Empty for any other request.
pub(crate) fn recognize(csr: &CertificateSigningRequest, req: &ParsedRequest) -> Vec<Recognizer> {
    if !is_node_client_cert(csr, req) {
        return Vec::new();
    }
    let mut found = Vec::new();
    if csr.spec.username.as_deref() == Some(req.common_name.as_str()) {
        found.push(SELF_NODE_CLIENT);
    }
    found.push(NODE_CLIENT);
    found
}

/// The SubjectAccessReview of the request's requester for `subresource` (upstream
/// `authorize`): the requester's user, UID, groups and extra.
pub(crate) fn access_review(
    csr: &CertificateSigningRequest,
    subresource: &str,
) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: csr.spec.username.clone(),
            uid: csr.spec.uid.clone(),
            groups: csr.spec.groups.clone(),
            extra: csr.spec.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                group: Some("certificates.k8s.io".to_owned()),
                resource: Some("certificatesigningrequests".to_owned()),
                verb: Some("create".to_owned()),
                subresource: Some(subresource.to_owned()),
                version: Some("*".to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The request with the `Approved` condition appended (upstream
/// `appendApprovalCondition`); the API server stamps its times.
pub(crate) fn with_approval(
    mut csr: CertificateSigningRequest,
    message: &str,
) -> CertificateSigningRequest {
    csr.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: APPROVED.to_owned(),
            status: "True".to_owned(),
            reason: Some(AUTO_APPROVED_REASON.to_owned()),
            message: Some(message.to_owned()),
            ..Default::default()
        });
    csr
}

/// The approver's handler; see the module doc.
pub(crate) struct Approver {
    client: kube::Client,
}

impl Approver {
    /// Asks the API server whether the review is allowed.
    async fn allowed(&self, review: &SubjectAccessReview) -> Result<bool, Error> {
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api.create(&PostParams::default(), review).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}

impl CsrHandler for Approver {
    async fn handle(&self, csr: CertificateSigningRequest) -> Result<(), Error> {
        if has_true_condition(&csr, APPROVED) || has_true_condition(&csr, DENIED) {
            return Ok(());
        }
        let name = csr.metadata.name.clone().unwrap_or_default();
        let req = parse_request(&csr.spec.request.0)
            .map_err(|e| Error::Invalid(format!("unable to parse csr {name:?}: {e}")))?;
        let recognized = recognize(&csr, &req);
        for r in &recognized {
            if !self.allowed(&access_review(&csr, r.subresource)).await? {
                continue;
            }
            let approved = with_approval(csr, r.message);
            let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
            api.replace_subresource::<CertificateSigningRequest>(
                "approval",
                &name,
                &PostParams::default(),
                &approved,
            )
            .await?;
            tracing::info!(csr = %name, how = r.subresource, "approved the certificate signing request");
            return Ok(());
        }
        if recognized.is_empty() {
            return Ok(());
        }
        let tried: Vec<&str> = recognized.iter().map(|r| r.subresource).collect();
        Err(Error::Invalid(format!(
            "recognized csr {name:?} as {tried:?} but subject access review was not approved"
        )))
    }
}

/// The approving controller over the factory's CSR informer. Run it with
/// [`CertificateController::run`] through [`run`].
pub(crate) type ApprovingController = CertificateController<Approver>;

/// Makes the approving controller.
pub(crate) fn new(
    client: kube::Client,
    factory: &SharedInformerFactory,
    queue_metrics: Arc<dyn QueueMetrics>,
) -> Arc<ApprovingController> {
    CertificateController::new(
        NAME,
        "csrapproving",
        Approver { client },
        factory,
        queue_metrics,
    )
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{csr, request_pem};
    use super::*;

    const CLIENT_USAGES: &[&str] = &["digital signature", "client auth"];

    fn parsed(c: &CertificateSigningRequest) -> ParsedRequest {
        parse_request(&c.spec.request.0).unwrap()
    }

    #[test]
    fn node_client_requests_are_recognized() {
        let pem = request_pem("system:node:n1", &["system:nodes"], &[], &[]);
        let by_bootstrap = csr(
            "a",
            &pem,
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            CLIENT_USAGES,
            "system:bootstrap:abcdef",
        );
        assert_eq!(
            recognize(&by_bootstrap, &parsed(&by_bootstrap)),
            [NODE_CLIENT]
        );
        let by_self = csr(
            "b",
            &pem,
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            CLIENT_USAGES,
            "system:node:n1",
        );
        assert_eq!(
            recognize(&by_self, &parsed(&by_self)),
            [SELF_NODE_CLIENT, NODE_CLIENT]
        );
    }

    #[test]
    fn other_requests_are_not_recognized() {
        let pem = request_pem("system:node:n1", &["system:nodes"], &[], &[]);
        // Another signer, even with a node client subject.
        let client = csr(
            "a",
            &pem,
            super::super::KUBE_APISERVER_CLIENT_SIGNER,
            CLIENT_USAGES,
            "u",
        );
        assert!(recognize(&client, &parsed(&client)).is_empty());
        // Kubelet serving certificates are never auto-approved.
        let serving_pem = request_pem("system:node:n1", &["system:nodes"], &["n1"], &[]);
        let serving = csr(
            "b",
            &serving_pem,
            super::super::KUBELET_SERVING_SIGNER,
            &["digital signature", "server auth"],
            "system:node:n1",
        );
        assert!(recognize(&serving, &parsed(&serving)).is_empty());
        // Wrong usages, wrong organization.
        let usages = csr(
            "c",
            &pem,
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            &["digital signature", "client auth", "server auth"],
            "u",
        );
        assert!(recognize(&usages, &parsed(&usages)).is_empty());
        let org_pem = request_pem("system:node:n1", &["system:masters"], &[], &[]);
        let org = csr(
            "d",
            &org_pem,
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            CLIENT_USAGES,
            "u",
        );
        assert!(recognize(&org, &parsed(&org)).is_empty());
    }

    #[test]
    fn review_and_approval_as_upstream() {
        let pem = request_pem("system:node:n1", &["system:nodes"], &[], &[]);
        let mut c = csr(
            "a",
            &pem,
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            CLIENT_USAGES,
            "alice",
        );
        c.spec.groups = Some(vec!["system:authenticated".to_owned()]);
        let review = access_review(&c, "nodeclient");
        assert_eq!(review.spec.user.as_deref(), Some("alice"));
        assert_eq!(review.spec.groups, c.spec.groups);
        let attrs = review.spec.resource_attributes.unwrap();
        assert_eq!(attrs.group.as_deref(), Some("certificates.k8s.io"));
        assert_eq!(
            attrs.resource.as_deref(),
            Some("certificatesigningrequests")
        );
        assert_eq!(attrs.verb.as_deref(), Some("create"));
        assert_eq!(attrs.subresource.as_deref(), Some("nodeclient"));

        let approved = with_approval(c, NODE_CLIENT.message);
        assert!(has_true_condition(&approved, APPROVED));
        let cond = &approved.status.unwrap().conditions.unwrap()[0];
        assert_eq!(cond.reason.as_deref(), Some("AutoApproved"));
        assert_eq!(
            cond.message.as_deref(),
            Some("Auto approving kubelet client certificate after SubjectAccessReview.")
        );
    }
}
