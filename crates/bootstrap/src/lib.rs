//! Cluster bootstrap pieces shared by Skiff's components (the role of kubeadm's `certs` and
//! `kubeconfig` phases and of client-go's TLS transport settings):
//!
//! - [`pki`]: the cluster CA and the certificates and keys generated under
//!   `<data-dir>/pki` on first start;
//! - [`kubeconfig`]: kubeconfig files for those certificates;
//! - [`tls`]: TLS client settings (the insecure client for self-signed kubelets and hooks).
//!
//! Bootstrap tokens and `join` come with their own issue.

pub mod kubeconfig;
pub mod pki;
pub mod tls;
