//! `kube-system/extension-apiserver-authentication` (upstream's cluster authentication
//! trust controller, `pkg/controlplane/controller/clusterauthenticationtrust`): how an
//! extension API server should authenticate the requests it gets, the client CA of
//! ordinary clients and the front-proxy (requestheader) settings. Written at start,
//! merged with what the ConfigMap already holds (other API servers' CAs and names stay),
//! string lists as JSON arrays in strings.

use std::collections::BTreeMap;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use skiff_bootstrap::pki::{FRONT_PROXY_CLIENT_NAME, Pki};

use super::proxy::{EXTRA_HEADER_PREFIX, GROUP_HEADER, USER_HEADER};
use crate::error::{ApiError, GroupResource};
use crate::registry::Objects;

/// The ConfigMap's namespace.
pub const NAMESPACE: &str = "kube-system";
/// The ConfigMap's name.
pub const NAME: &str = "extension-apiserver-authentication";

/// What this server asks extension API servers to trust (upstream's
/// `ClusterAuthenticationInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthenticationInfo {
    /// PEM bundle of `--client-ca-file`.
    pub client_ca: String,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_header_prefixes: Vec<String>,
    /// PEM bundle of `--requestheader-client-ca-file`.
    pub request_header_ca: String,
    pub allowed_names: Vec<String>,
}

impl AuthenticationInfo {
    /// This server's: the cluster CA for clients, the front-proxy CA and kubeadm's
    /// requestheader flags (no uid headers).
    pub fn of(pki: &Pki) -> Self {
        AuthenticationInfo {
            client_ca: pki.ca.cert_pem.clone(),
            username_headers: vec![USER_HEADER.to_owned()],
            uid_headers: Vec::new(),
            group_headers: vec![GROUP_HEADER.to_owned()],
            extra_header_prefixes: vec![EXTRA_HEADER_PREFIX.to_owned()],
            request_header_ca: pki.front_proxy_ca.cert_pem.clone(),
            allowed_names: vec![FRONT_PROXY_CLIENT_NAME.to_owned()],
        }
    }

    /// Read back from a ConfigMap's data (upstream `getClusterAuthenticationInfoFor`).
    /// Errors: a list that is not a JSON array of strings.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Self, String> {
        let list = |key: &str| -> Result<Vec<String>, String> {
            match data.get(key).filter(|v| !v.is_empty()) {
                None => Ok(Vec::new()),
                Some(text) => serde_json::from_str(text).map_err(|e| format!("{key}: {e}")),
            }
        };
        Ok(AuthenticationInfo {
            client_ca: data.get("client-ca-file").cloned().unwrap_or_default(),
            username_headers: list("requestheader-username-headers")?,
            uid_headers: list("requestheader-uid-headers")?,
            group_headers: list("requestheader-group-headers")?,
            extra_header_prefixes: list("requestheader-extra-headers-prefix")?,
            request_header_ca: data
                .get("requestheader-client-ca-file")
                .cloned()
                .unwrap_or_default(),
            allowed_names: list("requestheader-allowed-names")?,
        })
    }

    /// `existing` and `self` together (upstream `combinedClusterAuthenticationInfo`):
    /// lists without duplicates, existing entries first; CA bundles without duplicate
    /// certificates.
    pub fn combined_with(&self, existing: &AuthenticationInfo) -> AuthenticationInfo {
        let union = |a: &[String], b: &[String]| {
            let mut out: Vec<String> = Vec::new();
            for item in a.iter().chain(b) {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            out
        };
        AuthenticationInfo {
            client_ca: combine_bundles(&existing.client_ca, &self.client_ca),
            username_headers: union(&existing.username_headers, &self.username_headers),
            uid_headers: union(&existing.uid_headers, &self.uid_headers),
            group_headers: union(&existing.group_headers, &self.group_headers),
            extra_header_prefixes: union(
                &existing.extra_header_prefixes,
                &self.extra_header_prefixes,
            ),
            request_header_ca: combine_bundles(
                &existing.request_header_ca,
                &self.request_header_ca,
            ),
            allowed_names: union(&existing.allowed_names, &self.allowed_names),
        }
    }

    /// The ConfigMap's data (upstream `getConfigMapDataFor`): `client-ca-file`, and with a
    /// front-proxy CA the `requestheader-*` keys.
    pub fn data(&self) -> BTreeMap<String, String> {
        let array = |list: &[String]| Value::from(list.to_vec()).to_string();
        let mut data = BTreeMap::new();
        if !self.client_ca.is_empty() {
            data.insert("client-ca-file".to_owned(), self.client_ca.clone());
        }
        if self.request_header_ca.is_empty() {
            return data;
        }
        let lists = [
            ("requestheader-username-headers", &self.username_headers),
            ("requestheader-uid-headers", &self.uid_headers),
            ("requestheader-group-headers", &self.group_headers),
            (
                "requestheader-extra-headers-prefix",
                &self.extra_header_prefixes,
            ),
            ("requestheader-allowed-names", &self.allowed_names),
        ];
        for (key, list) in lists {
            data.insert(key.to_owned(), array(list));
        }
        data.insert(
            "requestheader-client-ca-file".to_owned(),
            self.request_header_ca.clone(),
        );
        data
    }
}

/// The PEM certificate blocks of `bundle`, each ending in a newline.
fn pem_blocks(bundle: &str) -> Vec<String> {
    const END: &str = "-----END CERTIFICATE-----";
    let mut blocks = Vec::new();
    let mut rest = bundle;
    while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
        let Some(end) = rest[start..].find(END) else {
            break;
        };
        let block = &rest[start..start + end + END.len()];
        if CertificateDer::from_pem_slice(block.as_bytes()).is_ok() {
            blocks.push(format!("{block}\n"));
        }
        rest = &rest[start + end + END.len()..];
    }
    blocks
}

/// The certificates of `a` then those of `b` not already in `a`.
fn combine_bundles(a: &str, b: &str) -> String {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut out = String::new();
    for block in pem_blocks(a).into_iter().chain(pem_blocks(b)) {
        let Ok(der) = CertificateDer::from_pem_slice(block.as_bytes()) else {
            continue;
        };
        if !seen.iter().any(|d| d.as_slice() == der.as_ref()) {
            seen.push(der.to_vec());
            out.push_str(&block);
        }
    }
    out
}

/// Creates or updates the ConfigMap with `info` merged into what it holds.
pub async fn ensure_config_map(
    objects: &dyn Objects,
    info: &AuthenticationInfo,
) -> Result<(), ApiError> {
    let resource = GroupResource::new("", "configmaps");
    match objects.get(&resource, Some(NAMESPACE), NAME).await {
        Ok(stored) => {
            let existing: BTreeMap<String, String> =
                serde_json::from_value(stored["data"].clone()).unwrap_or_default();
            let existing = AuthenticationInfo::from_data(&existing).unwrap_or_default();
            let data = info.combined_with(&existing).data();
            if serde_json::to_value(&data).ok().as_ref() == Some(&stored["data"]) {
                return Ok(());
            }
            let mut mutate = |current: &mut Value| {
                current["data"] = json!(data);
                Ok(())
            };
            objects
                .update(&resource, Some(NAMESPACE), NAME, &mut mutate)
                .await
                .map(|_| ())
        }
        Err(e) if e.code == 404 => {
            let object = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": NAMESPACE},
                "data": info.data(),
            });
            match objects.create(&resource, Some(NAMESPACE), object).await {
                Ok(_) => Ok(()),
                Err(e) if e.code == 409 => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_pki() -> (tempfile::TempDir, Pki) {
        let dir = tempfile::tempdir().unwrap();
        let names = skiff_bootstrap::pki::ServingNames::for_host("10.96.0.1".parse().unwrap(), &[]);
        let pki = Pki::ensure(dir.path(), &names).unwrap();
        (dir, pki)
    }

    #[test]
    fn config_map_data_as_upstream_writes_it() {
        let (_dir, pki) = new_pki();
        let data = AuthenticationInfo::of(&pki).data();
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "client-ca-file",
                "requestheader-allowed-names",
                "requestheader-client-ca-file",
                "requestheader-extra-headers-prefix",
                "requestheader-group-headers",
                "requestheader-uid-headers",
                "requestheader-username-headers",
            ]
        );
        assert_eq!(
            data["requestheader-username-headers"],
            "[\"X-Remote-User\"]"
        );
        assert_eq!(data["requestheader-group-headers"], "[\"X-Remote-Group\"]");
        assert_eq!(
            data["requestheader-extra-headers-prefix"],
            "[\"X-Remote-Extra-\"]"
        );
        assert_eq!(
            data["requestheader-allowed-names"],
            "[\"front-proxy-client\"]"
        );
        assert_eq!(data["requestheader-uid-headers"], "[]");
        assert_eq!(data["client-ca-file"], pki.ca.cert_pem);
        assert_eq!(
            data["requestheader-client-ca-file"],
            pki.front_proxy_ca.cert_pem
        );

        // Another server's names and CA stay; ours are not repeated.
        let (_other_dir, other) = new_pki();
        let mut theirs = AuthenticationInfo::of(&other);
        theirs.allowed_names = vec!["aggregator".to_owned()];
        let existing = AuthenticationInfo::from_data(&theirs.data()).unwrap();
        let ours = AuthenticationInfo::of(&pki);
        let combined = ours.combined_with(&existing).data();
        assert_eq!(
            combined["requestheader-allowed-names"],
            "[\"aggregator\",\"front-proxy-client\"]"
        );
        assert_eq!(
            pem_blocks(&combined["requestheader-client-ca-file"]).len(),
            2
        );
        assert_eq!(
            ours.combined_with(&AuthenticationInfo::from_data(&ours.data()).unwrap()),
            ours
        );
    }
}
