//! TLS client settings shared by Skiff's components.

use std::sync::Arc;

use rustls::client::WantsClientCert;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ConfigBuilder, DigitallySignedStruct, SignatureScheme};

/// A client configuration builder (ring provider, rustls' safe protocol versions) that
/// accepts any server certificate, as client-go's `InsecureSkipVerify`: the handshake
/// signatures are still checked against the presented certificate's key, its chain and
/// name are not. Upstream uses this where servers present self-signed certificates: the
/// API server calling kubelets without `--kubelet-certificate-authority`, the kubelet's
/// HTTPS lifecycle hooks and probes. The caller picks the client authentication.
///
/// Errors: the provider supports none of the safe protocol versions.
pub fn insecure_client_config()
-> Result<ConfigBuilder<ClientConfig, WantsClientCert>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(AnyServerCertificate(
        provider.signature_verification_algorithms,
    ));
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier))
}

/// Accepts any server certificate, checking only that the handshake is signed by its key.
#[derive(Debug)]
struct AnyServerCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use rustls::pki_types::PrivateKeyDer;
    use rustls::{ClientConnection, ServerConfig, ServerConnection, StreamOwned};

    use super::*;

    /// Serves one TLS connection on loopback with a fresh self-signed certificate for
    /// `localhost`, answering each byte read with the same byte; returns the port.
    fn self_signed_echo_server() -> u16 {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let key = PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let config = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            let conn = ServerConnection::new(Arc::new(config)).unwrap();
            let mut tls = StreamOwned::new(conn, tcp);
            let mut byte = [0u8; 1];
            if tls.read_exact(&mut byte).is_ok() {
                let _ = tls.write_all(&byte);
                let _ = tls.flush();
            }
        });
        port
    }

    fn exchange(config: ClientConfig, port: u16) -> std::io::Result<u8> {
        let name = ServerName::try_from("localhost").unwrap();
        let conn = ClientConnection::new(Arc::new(config), name).unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", port))?;
        let mut tls = StreamOwned::new(conn, tcp);
        tls.write_all(&[42])?;
        let mut byte = [0u8; 1];
        tls.read_exact(&mut byte)?;
        Ok(byte[0])
    }

    #[test]
    fn talks_to_a_self_signed_server_that_a_verifying_client_refuses() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let insecure = insecure_client_config().unwrap().with_no_client_auth();
        assert_eq!(exchange(insecure, self_signed_echo_server()).unwrap(), 42);

        let verifying = ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let err = exchange(verifying, self_signed_echo_server()).unwrap_err();
        assert!(err.to_string().contains("UnknownIssuer"), "{err}");
    }
}
