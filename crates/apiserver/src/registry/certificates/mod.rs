//! certificates.k8s.io/v1 certificatesigningrequests (upstream
//! `pkg/registry/certificates/certificates`): the requester is recorded from the request's
//! user, `/status` sets the certificate, `/approval` the Approved/Denied conditions.

mod approval;

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use skiff_api::certificates;
use skiff_api::field::ErrorList;

use super::printers::{self, AGE, NAME, column};
use super::{Context, Registry, ResourceInfo, Strategy, Subresource, TableColumn};
use crate::error::ApiError;

/// Adds certificatesigningrequests.
pub fn add(registry: &mut Registry) {
    registry.add(CertificateSigningRequests);
}

/// `csr`; cluster-scoped; status and approval subresources; field selector
/// `spec.signerName`.
pub struct CertificateSigningRequests;

/// Fills the empty timestamps of `new`'s conditions (upstream
/// `populateConditionTimestamps`): `lastUpdateTime` is `now`; `lastTransitionTime` is the
/// stored condition's of the same type and status if there is one, else `now`.
fn populate_condition_timestamps(
    new: &mut CertificateSigningRequest,
    old: &CertificateSigningRequest,
    now: Time,
) {
    let old_conditions = old
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let Some(conditions) = new.status.as_mut().and_then(|s| s.conditions.as_mut()) else {
        return;
    };
    for condition in conditions {
        condition
            .last_update_time
            .get_or_insert_with(|| now.clone());
        if condition.last_transition_time.is_none() {
            let kept = old_conditions
                .iter()
                .find(|c| c.type_ == condition.type_ && c.status == condition.status)
                .and_then(|c| c.last_transition_time.clone());
            condition.last_transition_time = Some(kept.unwrap_or_else(|| now.clone()));
        }
    }
}

/// The Condition cell: Denied, Approved or Pending, then `,Failed` and `,Issued`.
fn condition_cell(csr: &CertificateSigningRequest) -> String {
    let status = csr.status.clone().unwrap_or_default();
    let has = |kind: &str| status.conditions.iter().flatten().any(|c| c.type_ == kind);
    let mut cell = if has("Denied") {
        "Denied".to_owned()
    } else if has("Approved") {
        "Approved".to_owned()
    } else {
        "Pending".to_owned()
    };
    if has("Failed") {
        cell.push_str(",Failed");
    }
    if status.certificate.is_some_and(|c| !c.0.is_empty()) {
        cell.push_str(",Issued");
    }
    cell
}

#[async_trait]
impl Strategy for CertificateSigningRequests {
    type Object = CertificateSigningRequest;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["csr"],
            ..ResourceInfo::of::<CertificateSigningRequest>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn subresources(&self) -> Vec<Arc<dyn Subresource>> {
        vec![Arc::new(approval::Approval)]
    }

    /// Clears the requester (set from the request's user by [`Strategy::admit_create`])
    /// and the status: no one creates a pre-approved request.
    fn prepare_for_create(&self, object: &mut CertificateSigningRequest) {
        let spec = &mut object.spec;
        spec.username = None;
        spec.uid = None;
        spec.groups = None;
        spec.extra = None;
        object.status = Some(Default::default());
    }

    /// The main resource changes metadata only.
    fn prepare_for_update(
        &self,
        new: &mut CertificateSigningRequest,
        old: &CertificateSigningRequest,
    ) {
        new.spec = old.spec.clone();
    }

    fn prepares_status_update(&self) -> bool {
        true
    }

    /// Condition timestamps the writer left empty are filled in (the signer's `Failed`
    /// condition carries only `lastUpdateTime`).
    fn prepare_for_status_update(
        &self,
        new: &mut CertificateSigningRequest,
        old: &CertificateSigningRequest,
    ) {
        populate_condition_timestamps(new, old, Time(printers::now()));
    }

    fn validate(&self, object: &CertificateSigningRequest) -> ErrorList {
        certificates::validate_create(object)
    }

    fn validate_update(
        &self,
        new: &CertificateSigningRequest,
        old: &CertificateSigningRequest,
    ) -> ErrorList {
        certificates::validate_status_update(new, old)
    }

    async fn admit_create(
        &self,
        ctx: &Context<'_>,
        object: &mut CertificateSigningRequest,
    ) -> Result<(), ApiError> {
        let user = ctx.user;
        let spec = &mut object.spec;
        spec.username = Some(user.name.clone());
        spec.uid = (!user.uid.is_empty()).then(|| user.uid.clone());
        spec.groups = Some(user.groups.clone());
        Ok(())
    }

    fn selectable_fields(&self, object: &CertificateSigningRequest) -> Vec<(&'static str, String)> {
        vec![("spec.signerName", object.spec.signer_name.clone())]
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            AGE,
            column(
                "SignerName",
                "string",
                "Only track signers of certificates",
                0,
            ),
            column(
                "Requestor",
                "string",
                "Name of the user requesting the certificate",
                0,
            ),
            column(
                "RequestedDuration",
                "string",
                "Requested duration of the certificate",
                0,
            ),
            column(
                "Condition",
                "string",
                "The current condition of the certificate",
                0,
            ),
        ]
    }

    fn row(&self, object: &CertificateSigningRequest) -> Vec<Value> {
        let spec = &object.spec;
        let signer = if spec.signer_name.is_empty() {
            "<none>".to_owned()
        } else {
            spec.signer_name.clone()
        };
        let duration = spec.expiration_seconds.map_or_else(
            || "<none>".to_owned(),
            |s| printers::human_duration(s.into()),
        );
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            printers::age(&object.metadata),
            Value::from(signer),
            Value::from(spec.username.clone().unwrap_or_default()),
            Value::from(duration),
            Value::from(condition_cell(object)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn row_matches_upstream_printer() {
        let csr: CertificateSigningRequest = serde_json::from_value(json!({
            "metadata": {"name": "node-csr"},
            "spec": {
                "request": "",
                "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                "username": "system:node:n1",
                "expirationSeconds": 86400,
            },
            "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "YWJj"},
        }))
        .unwrap();
        assert_eq!(
            CertificateSigningRequests.row(&csr),
            [
                json!("node-csr"),
                json!("<unknown>"),
                json!("kubernetes.io/kube-apiserver-client-kubelet"),
                json!("system:node:n1"),
                json!("24h"),
                json!("Approved,Issued"),
            ]
        );
    }

    #[test]
    fn condition_timestamps_are_filled_and_transitions_kept() {
        let csr = |conditions: Value| -> CertificateSigningRequest {
            serde_json::from_value(json!({
                "metadata": {"name": "c"},
                "spec": {"request": "", "signerName": "example.com/s"},
                "status": {"conditions": conditions},
            }))
            .unwrap()
        };
        let old = csr(json!([{"type": "Approved", "status": "True",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]));
        let mut new = csr(json!([
            {"type": "Approved", "status": "True"},
            {"type": "Failed", "status": "True", "lastUpdateTime": "2026-02-01T00:00:00Z"},
        ]));
        let now: Time = serde_json::from_value(json!("2026-03-01T00:00:00Z")).unwrap();
        populate_condition_timestamps(&mut new, &old, now);
        let got = serde_json::to_value(&new.status.unwrap().conditions).unwrap();
        assert_eq!(
            got,
            json!([
                {"type": "Approved", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "lastUpdateTime": "2026-03-01T00:00:00Z"},
                {"type": "Failed", "status": "True",
                    "lastTransitionTime": "2026-03-01T00:00:00Z",
                    "lastUpdateTime": "2026-02-01T00:00:00Z"},
            ])
        );
    }
}
