//! The admin kubeconfig (`<data-dir>/admin.kubeconfig`), as kubeadm's `admin.conf`: one
//! cluster `skiff` with the CA embedded, one user with the client certificate and key
//! embedded, one context, current. kubectl, client-go, kube-rs and the Python client
//! load it as is.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use crate::pki::{CertKey, write_private};

/// The cluster, user and context name.
pub const CLUSTER: &str = "skiff";
/// The admin user's name in the kubeconfig.
pub const ADMIN_USER: &str = "kubernetes-admin";

/// The kubeconfig YAML for `server` (`https://127.0.0.1:6443`) trusting `ca_pem`, with
/// the client credentials `client`.
pub fn render(server: &str, ca_pem: &str, client: &CertKey) -> String {
    let context = format!("{ADMIN_USER}@{CLUSTER}");
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": CLUSTER,
            "cluster": {
                "server": server,
                "certificate-authority-data": STANDARD.encode(ca_pem),
            },
        }],
        "users": [{
            "name": ADMIN_USER,
            "user": {
                "client-certificate-data": STANDARD.encode(&client.cert_pem),
                "client-key-data": STANDARD.encode(&client.key_pem),
            },
        }],
        "contexts": [{
            "name": context,
            "context": {"cluster": CLUSTER, "user": ADMIN_USER},
        }],
        "current-context": context,
        "preferences": {},
    });
    // A JSON value of strings, lists and maps always serializes.
    serde_yaml_ng::to_string(&config).unwrap_or_default()
}

/// Writes [`render`]'s kubeconfig to `path` (0600: it holds a private key).
pub fn write(path: &Path, server: &str, ca_pem: &str, client: &CertKey) -> anyhow::Result<()> {
    write_private(path, &render(server, ca_pem, client))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_standard_kubeconfig() {
        let client = CertKey {
            cert_pem: "CERT".into(),
            key_pem: "KEY".into(),
        };
        let yaml = render("https://127.0.0.1:6443", "CA", &client);
        let v: serde_json::Value = serde_yaml_ng::from_str(&yaml).unwrap();
        assert_eq!(v["current-context"], "kubernetes-admin@skiff");
        assert_eq!(v["contexts"][0]["context"]["cluster"], "skiff");
        assert_eq!(v["contexts"][0]["context"]["user"], "kubernetes-admin");
        let cluster = &v["clusters"][0]["cluster"];
        assert_eq!(cluster["server"], "https://127.0.0.1:6443");
        assert_eq!(cluster["certificate-authority-data"], STANDARD.encode("CA"));
        let user = &v["users"][0]["user"];
        assert_eq!(user["client-certificate-data"], STANDARD.encode("CERT"));
        assert_eq!(user["client-key-data"], STANDARD.encode("KEY"));
    }

    #[test]
    fn writes_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.kubeconfig");
        let client = CertKey {
            cert_pem: "C".into(),
            key_pem: "K".into(),
        };
        write(&path, "https://127.0.0.1:1", "CA", &client).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
