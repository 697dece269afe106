//! The CSR cleaner (upstream `pkg/controller/certificates/cleaner/cleaner.go`): every
//! hour, each CertificateSigningRequest is deleted when
//!
//! - it was approved and issued more than 1 h ago (the `Approved` condition's
//!   `lastUpdateTime`),
//! - it was denied, or failed, more than 1 h ago,
//! - it has no condition (pending) and was created more than 24 h ago,
//! - or its issued certificate has expired.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams};
use skiff_client::cache::{SharedInformer, SharedInformerFactory};
use tokio_util::sync::CancellationToken;

use super::{APPROVED, DENIED, FAILED, is_issued};
use crate::Error;
use crate::controller_utils::wait_for_cache_sync;

/// The controller's name (`--controllers`; upstream's alias `csrcleaner`).
pub const NAME: &str = "certificatesigningrequest-cleaner-controller";
/// The alias upstream's `--controllers` also accepts.
pub const ALIAS: &str = "csrcleaner";

/// How often every request is checked.
const POLLING_INTERVAL: Duration = Duration::from_secs(3600);
/// How long an approved and issued request is kept.
const APPROVED_EXPIRATION: Duration = Duration::from_secs(3600);
/// How long a denied request is kept.
const DENIED_EXPIRATION: Duration = Duration::from_secs(3600);
/// How long a failed request is kept.
const FAILED_EXPIRATION: Duration = Duration::from_secs(3600);
/// How long a request nobody handled is kept.
const PENDING_EXPIRATION: Duration = Duration::from_secs(24 * 3600);

/// Why a request is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// Approved and issued more than [`APPROVED_EXPIRATION`] ago.
    Issued,
    /// Denied more than [`DENIED_EXPIRATION`] ago.
    Denied,
    /// Failed more than [`FAILED_EXPIRATION`] ago.
    Failed,
    /// Without conditions, created more than [`PENDING_EXPIRATION`] ago.
    Pending,
    /// Its certificate's `notAfter` has passed.
    CertificateExpired,
}

/// Whether `t` is set and more than `d` before `now` (upstream `isOlderThan`).
fn older_than(t: Option<&Time>, d: Duration, now: Timestamp) -> bool {
    let Some(t) = t else { return false };
    let age = now.as_second() - t.0.as_second();
    u64::try_from(age).is_ok_and(|age| age > d.as_secs())
}

/// The `notAfter` (seconds since the epoch) of the first certificate of the request's
/// `status.certificate`. Errors: not PEM, not a certificate.
fn certificate_not_after(csr: &CertificateSigningRequest) -> Result<Option<i64>, String> {
    let Some(pem) = csr.status.as_ref().and_then(|s| s.certificate.as_ref()) else {
        return Ok(None);
    };
    if pem.0.is_empty() {
        return Ok(None);
    }
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem.0).map_err(|_| {
        "expected the certificate associated with the CSR to be PEM encoded".to_owned()
    })?;
    let cert = block
        .parse_x509()
        .map_err(|e| format!("unable to parse certificate data: {e}"))?;
    Ok(Some(cert.validity().not_after.timestamp()))
}

/// Whether (and why) the request is deleted at `now` (upstream `handle`). Errors: an
/// issued certificate that does not parse.
pub(crate) fn expiry(
    csr: &CertificateSigningRequest,
    now: Timestamp,
) -> Result<Option<Expiry>, String> {
    let conditions = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let issued = is_issued(csr);
    let approved = conditions.iter().any(|c| c.type_ == APPROVED);
    if issued
        && approved
        && certificate_not_after(csr)?.is_some_and(|not_after| now.as_second() > not_after)
    {
        return Ok(Some(Expiry::CertificateExpired));
    }
    for c in conditions {
        let when = c.last_update_time.as_ref();
        match c.type_.as_str() {
            APPROVED if issued && older_than(when, APPROVED_EXPIRATION, now) => {
                return Ok(Some(Expiry::Issued));
            }
            DENIED if older_than(when, DENIED_EXPIRATION, now) => return Ok(Some(Expiry::Denied)),
            FAILED if older_than(when, FAILED_EXPIRATION, now) => return Ok(Some(Expiry::Failed)),
            _ => {}
        }
    }
    if conditions.is_empty()
        && older_than(
            csr.metadata.creation_timestamp.as_ref(),
            PENDING_EXPIRATION,
            now,
        )
    {
        return Ok(Some(Expiry::Pending));
    }
    Ok(None)
}

/// The CSR cleaner; see the module doc.
pub struct CsrCleaner {
    client: kube::Client,
    requests: Arc<SharedInformer<CertificateSigningRequest>>,
}

impl std::fmt::Debug for CsrCleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsrCleaner").finish_non_exhaustive()
    }
}

impl CsrCleaner {
    /// The cleaner over the factory's CSR informer.
    pub fn new(client: kube::Client, factory: &SharedInformerFactory) -> Self {
        Self {
            client,
            requests: factory.informer::<CertificateSigningRequest>(),
        }
    }

    /// Waits for the informer, then checks every request each hour until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        if !wait_for_cache_sync(&cancel, &[&*self.requests]).await {
            return;
        }
        loop {
            self.clean_once().await;
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(POLLING_INTERVAL) => {}
            }
        }
    }

    /// One pass over every request; failures are logged (upstream `worker`).
    async fn clean_once(&self) {
        let now = Timestamp::now();
        for csr in self.requests.store().list() {
            let name = csr.metadata.name.clone().unwrap_or_default();
            match expiry(&csr, now) {
                Ok(Some(why)) => {
                    tracing::info!(csr = %name, reason = ?why, "cleaning up the certificate signing request");
                    if let Err(e) = self.delete(&name).await {
                        tracing::error!(csr = %name, error = %e, "unable to delete the CSR");
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(csr = %name, error = %e, "error while attempting to clean the CSR")
                }
            }
        }
    }

    async fn delete(&self, name: &str) -> Result<(), Error> {
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };

    use super::*;

    const NOW: &str = "2026-03-01T12:00:00Z";

    fn at(minutes_ago: i64) -> Time {
        let now: Timestamp = NOW.parse().unwrap();
        Time(now - k8s_openapi::jiff::SignedDuration::from_mins(minutes_ago))
    }

    fn request(
        created_minutes_ago: i64,
        conditions: &[(&str, i64)],
        cert: Option<String>,
    ) -> CertificateSigningRequest {
        CertificateSigningRequest {
            metadata: kube::api::ObjectMeta {
                name: Some("r".to_owned()),
                creation_timestamp: Some(at(created_minutes_ago)),
                ..Default::default()
            },
            spec: Default::default(),
            status: Some(CertificateSigningRequestStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, ago)| CertificateSigningRequestCondition {
                            type_: (*t).to_owned(),
                            status: "True".to_owned(),
                            last_update_time: Some(at(*ago)),
                            ..Default::default()
                        })
                        .collect(),
                ),
                certificate: cert.map(|c| ByteString(c.into_bytes())),
            }),
        }
    }

    /// A self-signed certificate valid until `not_after` (`YYYY, M, D`).
    fn cert_until(year: i32, month: u8, day: u8) -> String {
        let mut p = rcgen::CertificateParams::default();
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(year, month, day);
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn ages_as_upstream() {
        let now: Timestamp = NOW.parse().unwrap();
        let valid = || Some(cert_until(2030, 1, 1));
        // Pending: 24 h from creation.
        assert_eq!(expiry(&request(23 * 60, &[], None), now), Ok(None));
        assert_eq!(
            expiry(&request(24 * 60 + 1, &[], None), now),
            Ok(Some(Expiry::Pending))
        );
        // Approved and issued: 1 h from approval.
        assert_eq!(
            expiry(&request(300, &[("Approved", 59)], valid()), now),
            Ok(None)
        );
        assert_eq!(
            expiry(&request(300, &[("Approved", 61)], valid()), now),
            Ok(Some(Expiry::Issued))
        );
        // Approved but not issued stays, as upstream (not pending either).
        assert_eq!(
            expiry(&request(48 * 60, &[("Approved", 47 * 60)], None), now),
            Ok(None)
        );
        // Denied and failed: 1 h.
        assert_eq!(
            expiry(&request(300, &[("Denied", 30)], None), now),
            Ok(None)
        );
        assert_eq!(
            expiry(&request(300, &[("Denied", 61)], None), now),
            Ok(Some(Expiry::Denied))
        );
        assert_eq!(
            expiry(
                &request(300, &[("Approved", 30), ("Failed", 61)], None),
                now
            ),
            Ok(Some(Expiry::Failed))
        );
        // An expired certificate goes at once.
        assert_eq!(
            expiry(
                &request(10, &[("Approved", 5)], Some(cert_until(2026, 2, 1))),
                now
            ),
            Ok(Some(Expiry::CertificateExpired))
        );
        // A certificate that does not parse is an error.
        assert!(
            expiry(
                &request(10, &[("Approved", 5)], Some("junk".to_owned())),
                now
            )
            .is_err()
        );
    }

    #[test]
    fn polls_hourly() {
        assert_eq!(POLLING_INTERVAL, Duration::from_secs(3600));
    }
}
