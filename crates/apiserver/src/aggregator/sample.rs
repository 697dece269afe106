//! A small extension API server for tests (in the spirit of upstream's
//! `sample-apiserver`): HTTPS with a serving certificate of its own CA for
//! `<service>.<namespace>.svc`, client certificates required and verified against the
//! front-proxy CA, and only the allowed front-proxy names with an `X-Remote-User` header
//! let through (as a server configured from `extension-apiserver-authentication` does).
//!
//! It serves one namespaced resource, `flunders` (kind `Flunder`, short name `fl`), in
//! its group version: the `APIResourceList`, `APIGroup`, a list of one flunder whose
//! annotations echo the user the aggregator sent (`sample/user`, `sample/groups`,
//! `sample/authorization` when a credential leaked through), and a watch of one ADDED
//! event.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::authn::CertificateUser;

/// A running sample server; stops when dropped.
pub struct SampleApiServer {
    /// Where it listens.
    pub address: SocketAddr,
    /// The PEM CA of its serving certificate, for the APIService's `caBundle`.
    pub ca_pem: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for SampleApiServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

struct Config {
    group: String,
    version: String,
    allowed_names: Vec<String>,
}

impl SampleApiServer {
    /// Starts serving `group`/`version` on `ip` (a free port; Endpoints may not name a
    /// loopback address) for the name `server_name` (also in the certificate with `ip`),
    /// trusting client certificates of `front_proxy_ca_pem` with a common
    /// name in `allowed_names`. Must run inside a tokio runtime. Errors: certificate
    /// generation or binding failed.
    pub async fn start(
        ip: IpAddr,
        group: &str,
        version: &str,
        server_name: &str,
        front_proxy_ca_pem: &str,
        allowed_names: &[&str],
    ) -> anyhow::Result<Self> {
        let (ca_pem, tls) = tls_config(server_name, ip, front_proxy_ca_pem)?;
        let config = Arc::new(Config {
            group: group.to_owned(),
            version: version.to_owned(),
            allowed_names: allowed_names.iter().map(|n| (*n).to_owned()).collect(),
        });
        let app = Router::new().fallback(handle).with_state(config);
        let listener = TcpListener::bind((ip, 0)).await?;
        let address = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(crate::server::serve(listener, tls, app, async move {
            let _ = stopped.await;
        }));
        Ok(SampleApiServer {
            address,
            ca_pem,
            stop: Some(stop),
        })
    }
}

/// A CA, a serving certificate for `server_name` and `ip`, and the server
/// configuration requiring client certificates of `client_ca_pem`.
fn tls_config(
    server_name: &str,
    ip: IpAddr,
    client_ca_pem: &str,
) -> anyhow::Result<(String, Arc<rustls::ServerConfig>)> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::default();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sample-apiserver-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let ca_pem = ca_cert.pem();
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, server_name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.subject_alt_names = vec![
        SanType::DnsName(server_name.try_into()?),
        SanType::IpAddress(ip),
    ];
    let cert = params.signed_by(&key, &issuer)?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        roots.add(ca.context("reading the front-proxy CA")?)?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .context("the client certificate verifier")?;
    let chain = vec![CertificateDer::from_pem_slice(cert.pem().as_bytes())?];
    let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((ca_pem, Arc::new(config)))
}

fn status(code: StatusCode, message: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}

fn flunder(config: &Config, headers: &HeaderMap) -> Value {
    let groups: Vec<&str> = headers
        .get_all("x-remote-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let mut annotations = json!({
        "sample/user": headers.get("x-remote-user").and_then(|v| v.to_str().ok()).unwrap_or_default(),
        "sample/groups": groups.join(","),
    });
    if headers.contains_key("authorization") {
        annotations["sample/authorization"] = json!("forwarded");
    }
    json!({
        "apiVersion": format!("{}/{}", config.group, config.version),
        "kind": "Flunder",
        "metadata": {"name": "first", "namespace": "default", "annotations": annotations},
    })
}

/// The Flunder's schema, as a definition named `<reversed group>.<version>.Flunder`.
fn flunder_schema(config: &Config) -> (String, Value) {
    let reversed: Vec<&str> = config.group.split('.').rev().collect();
    let name = format!("{}.{}.Flunder", reversed.join("."), config.version);
    let schema = json!({
        "description": "A Flunder is the sample extension API server's only kind.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "spec": {
                "type": "object",
                "description": "What the flunder is.",
                "properties": {
                    "color": {
                        "type": "string",
                        "description": "The flunder's color, one of red or blue.",
                    },
                },
            },
        },
        "x-kubernetes-group-version-kind": [
            {"group": config.group, "version": config.version, "kind": "Flunder"},
        ],
    });
    (name, schema)
}

/// The backend's OpenAPI v2 document: the flunders path and the Flunder definition, with
/// an `ObjectMeta` unlike the server's (so the merge renames it).
fn openapi_v2(config: &Config) -> Value {
    let (name, schema) = flunder_schema(config);
    let path = format!(
        "/apis/{}/{}/namespaces/{{namespace}}/flunders",
        config.group, config.version
    );
    json!({
        "swagger": "2.0",
        "info": {"title": "sample", "version": "v0"},
        "paths": {path: {"get": {
            "operationId": "listFlunders",
            "responses": {"200": {"description": "OK", "schema": {"$ref": format!("#/definitions/{name}")}}},
        }}},
        "definitions": {
            name: schema,
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
                "type": "object", "description": "the sample's own ObjectMeta",
            },
        },
    })
}

/// The backend's OpenAPI v3 document of its group version.
fn openapi_v3(config: &Config) -> Value {
    let (name, schema) = flunder_schema(config);
    // kubectl explain finds the kind through the operations' group-version-kind.
    let path = format!(
        "/apis/{}/{}/namespaces/{{namespace}}/flunders/{{name}}",
        config.group, config.version
    );
    let gvk = json!({"group": config.group, "version": config.version, "kind": "Flunder"});
    let schema_ref = json!({"$ref": format!("#/components/schemas/{name}")});
    json!({
        "openapi": "3.0.0",
        "info": {"title": "sample", "version": "v0"},
        "paths": {path: {"get": {
            "operationId": "readFlunder",
            "responses": {"200": {
                "description": "OK",
                "content": {"application/json": {"schema": schema_ref}},
            }},
            "x-kubernetes-action": "get",
            "x-kubernetes-group-version-kind": gvk,
        }}},
        "components": {"schemas": {name: schema}},
    })
}

async fn handle(State(config): State<Arc<Config>>, request: Request) -> Response {
    let peer = request
        .extensions()
        .get::<CertificateUser>()
        .and_then(|c| c.0.clone());
    match peer {
        Some(user) if config.allowed_names.contains(&user.name) => {}
        Some(user) => {
            return status(
                StatusCode::UNAUTHORIZED,
                &format!(
                    "client certificate {:?} is not an allowed front proxy",
                    user.name
                ),
            );
        }
        None => return status(StatusCode::UNAUTHORIZED, "no client certificate"),
    }
    let headers = request.headers();
    if headers.get("x-remote-user").is_none() {
        return status(StatusCode::UNAUTHORIZED, "no X-Remote-User header");
    }
    let group_version = format!("{}/{}", config.group, config.version);
    let base = format!("/apis/{group_version}");
    let path = request.uri().path().trim_end_matches('/');
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=1" || p == "watch=true"));
    let list_path = path == format!("{base}/flunders")
        || path
            .strip_prefix(&format!("{base}/namespaces/"))
            .is_some_and(|rest| rest.ends_with("/flunders") && rest.matches('/').count() == 1);
    if path == base {
        axum::Json(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": [{
                "name": "flunders", "singularName": "flunder", "namespaced": true,
                "kind": "Flunder", "verbs": ["get", "list", "watch"], "shortNames": ["fl"],
            }],
        }))
        .into_response()
    } else if path == "/openapi/v2" {
        axum::Json(openapi_v2(&config)).into_response()
    } else if path == "/openapi/v3" {
        axum::Json(json!({"paths": {
            format!("apis/{group_version}"): {
                "serverRelativeURL": format!("/openapi/v3/apis/{group_version}?hash=SAMPLE"),
            },
        }}))
        .into_response()
    } else if path == format!("/openapi/v3/apis/{group_version}") {
        axum::Json(openapi_v3(&config)).into_response()
    } else if path == format!("/apis/{}", config.group) {
        let version = json!({"groupVersion": group_version, "version": config.version});
        axum::Json(json!({
            "kind": "APIGroup", "apiVersion": "v1", "name": config.group,
            "versions": [version], "preferredVersion": version,
        }))
        .into_response()
    } else if list_path && watch {
        let event = json!({"type": "ADDED", "object": flunder(&config, headers)});
        let mut response = Response::new(Body::from(format!("{event}\n")));
        if let Ok(value) = "application/json".parse() {
            response.headers_mut().insert("content-type", value);
        }
        response
    } else if list_path {
        axum::Json(json!({
            "apiVersion": group_version,
            "kind": "FlunderList",
            "metadata": {"resourceVersion": "1"},
            "items": [flunder(&config, headers)],
        }))
        .into_response()
    } else {
        status(
            StatusCode::NOT_FOUND,
            "the server could not find the requested resource",
        )
    }
}
