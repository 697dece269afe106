//! In-process API calls, for components that share a process with their API server
//! (`skiff server`): each request goes straight to the API server's handler, with no TLS,
//! TCP or HTTP framing, yet through the same pipeline (authentication, authorization,
//! admission, validation, storage) as a request from the network. The caller is who its
//! kubeconfig's client certificate says, as the TLS layer would have verified it, so
//! every component keeps its own identity.

use std::convert::Infallible;
use std::sync::Arc;

use base64::Engine as _;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use crate::Error;

/// The API server's handler of one caller's requests: HTTP requests in, responses out,
/// never failing (errors are HTTP statuses).
pub type ApiService = tower::util::BoxCloneSyncService<
    http::Request<kube::client::Body>,
    http::Response<axum::body::Body>,
    Infallible,
>;

/// An API server in this process.
pub trait LocalApi: Send + Sync + 'static {
    /// The handler of the requests of the holder of `certificate` (DER), as if it had
    /// presented the certificate in a TLS handshake. Errors: the certificate does not
    /// name a user (the message says why).
    fn service(&self, certificate: &[u8]) -> Result<ApiService, String>;
}

/// How a component reaches its API server: over the network as its kubeconfig says (the
/// default), or in process.
#[derive(Clone, Default)]
pub struct Connector {
    local: Option<Arc<dyn LocalApi>>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.local.is_some() {
            "in process"
        } else {
            "network"
        };
        f.debug_tuple("Connector").field(&kind).finish()
    }
}

impl Connector {
    /// Requests go to `local`, authenticated by the kubeconfig's client certificate.
    pub fn in_process(local: Arc<dyn LocalApi>) -> Self {
        Self { local: Some(local) }
    }

    /// The in-process API server, if any.
    pub(crate) fn local(&self) -> Option<&Arc<dyn LocalApi>> {
        self.local.as_ref()
    }
}

/// The DER of the kubeconfig's client certificate (`client-certificate-data`, else the
/// `client-certificate` file). Errors: there is none, or it is not a PEM certificate.
pub(crate) fn client_certificate(
    config: &kube::Config,
    path: &std::path::Path,
) -> Result<Vec<u8>, Error> {
    let invalid = |why: String| Error::InProcess {
        path: path.to_path_buf(),
        why,
    };
    let auth = &config.auth_info;
    let pem = match (&auth.client_certificate_data, &auth.client_certificate) {
        (Some(data), _) => base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| invalid(format!("client-certificate-data: {e}")))?,
        (None, Some(file)) => {
            std::fs::read(file).map_err(|e| invalid(format!("reading {file}: {e}")))?
        }
        (None, None) => {
            return Err(invalid(
                "no client certificate: an in-process client needs one for its identity".into(),
            ));
        }
    };
    let der = CertificateDer::from_pem_slice(&pem)
        .map_err(|e| invalid(format!("the client certificate is not PEM: {e}")))?;
    Ok(der.as_ref().to_vec())
}
