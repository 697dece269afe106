//! Talking to a registry over the OCI distribution API (with `oci-client`): resolving a
//! reference to a platform manifest and downloading blobs into the content store.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use k8s_cri::v1::AuthConfig;
use oci_client::client::{ClientConfig, ClientProtocol, current_platform_resolver};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::content::{ContentError, ContentStore};
use super::reference::is_loopback;
use super::{Error, PullSettings, progress};
use crate::config::Credentials;

/// How long connecting to a registry may take (at most the progress timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection to the registry of one image reference (or to one of its mirrors), with
/// its credentials.
pub struct Registry {
    client: Client,
    /// Where to look for the image: the configured mirrors in order, then the registry.
    endpoints: Vec<Endpoint>,
    /// The endpoint that resolved the reference; blobs come from it too.
    chosen: usize,
    /// A pull that receives nothing for this long fails.
    progress_timeout: Duration,
    /// The normalized reference, for error messages.
    image: String,
}

/// One place an image can be fetched from.
struct Endpoint {
    /// The reference, with the mirror host set when this is a mirror.
    reference: Reference,
    auth: RegistryAuth,
}

/// A reference resolved to the manifest for this platform.
pub struct Resolved {
    /// The platform's image manifest.
    pub manifest: OciImageManifest,
    /// Digest of what the reference points at: the image index (manifest list) when there
    /// is one, else the manifest. This is the image's repo digest, as containerd records it.
    pub digest: String,
}

impl Registry {
    /// Prepares a client for `reference`'s registry and its configured mirrors (see
    /// [`RegistryHost`](crate::config::RegistryHost)): plain HTTP for loopback registries, `plain_http` hosts and
    /// `http://` mirrors, HTTPS otherwise; linux/amd64 (the host platform) is picked from
    /// image indexes. `auth` (the CRI AuthConfig) wins over the configured credentials
    /// unless it is empty; a mirror with credentials of its own uses those.
    pub fn connect(
        reference: &Reference,
        auth: Option<&AuthConfig>,
        image: &str,
        settings: &PullSettings,
    ) -> Result<Self, Error> {
        // The rustls provider is process-wide; a second install fails harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let request_auth = registry_auth(auth.filter(|auth| !is_empty(auth)), image)?;
        let Plan {
            endpoints,
            plain_hosts,
        } = plan(reference, request_auth, settings);
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(plain_hosts),
            platform_resolver: Some(Box::new(current_platform_resolver)),
            connect_timeout: Some(CONNECT_TIMEOUT.min(settings.progress_timeout)),
            // Silence is bounded by the progress timeout instead (see `progress`).
            read_timeout: None,
            ..ClientConfig::default()
        };
        let client = Client::try_from(config).map_err(|err| Error::Unavailable {
            image: image.to_string(),
            detail: format!("cannot build a registry client: {}", error_chain(&err)),
        })?;
        Ok(Self {
            client,
            chosen: endpoints.len() - 1,
            endpoints,
            progress_timeout: settings.progress_timeout,
            image: image.to_string(),
        })
    }

    /// Fetches the manifest the reference points at, choosing this platform's entry when it
    /// is an image index or Docker manifest list. Mirrors are tried first, in order; the
    /// first endpoint that answers is used for the blobs too. When every endpoint fails,
    /// the registry's own error is returned.
    pub async fn resolve(&mut self) -> Result<Resolved, Error> {
        let mut last_error = None;
        for (index, endpoint) in self.endpoints.iter().enumerate() {
            match self.resolve_at(endpoint).await {
                Ok(resolved) => {
                    self.chosen = index;
                    return Ok(resolved);
                }
                Err(err) => {
                    if index + 1 < self.endpoints.len() {
                        tracing::warn!(
                            image = %self.image,
                            mirror = %endpoint.reference.resolve_registry(),
                            error = %err,
                            "mirror failed, trying the next endpoint"
                        );
                    }
                    last_error = Some(err);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| Error::NotFound {
            image: self.image.clone(),
            detail: "no registry endpoint".to_string(),
        }))
    }

    async fn resolve_at(&self, endpoint: &Endpoint) -> Result<Resolved, Error> {
        // Pulling by digest ignores the tag (the tag may have moved; the digest cannot).
        let reference = match endpoint.reference.digest() {
            Some(digest) => endpoint.reference.clone_with_digest(digest.to_string()),
            None => endpoint.reference.clone(),
        };
        let what = reference.digest().unwrap_or("manifest").to_string();
        let fetched = tokio::time::timeout(
            self.progress_timeout,
            self.client
                .pull_image_manifest_and_list_digest(&reference, &endpoint.auth),
        )
        .await
        .map_err(|_| self.no_progress(&what))?;
        let (manifest, manifest_digest, list_digest) =
            fetched.map_err(|err| self.classify(err, &what))?;
        Ok(Resolved {
            manifest,
            digest: list_digest.unwrap_or(manifest_digest),
        })
    }

    /// Makes sure the blob `descriptor` is in `store`, downloading it unless present.
    pub async fn fetch_blob(
        &self,
        store: &ContentStore,
        descriptor: &OciDescriptor,
    ) -> Result<PathBuf, Error> {
        let digest = descriptor.digest.as_str();
        let content_error = |err| self.content_error(digest, err);
        if u64::try_from(descriptor.size).is_ok_and(|size| store.contains(digest, size)) {
            return store.path(digest).map_err(content_error);
        }
        // Validate the name before asking the registry for it.
        store.path(digest).map_err(content_error)?;
        let endpoint = &self.endpoints[self.chosen];
        let stream = tokio::time::timeout(
            self.progress_timeout,
            self.client
                .pull_blob_stream(&endpoint.reference, descriptor),
        )
        .await
        .map_err(|_| self.no_progress(digest))?
        .map_err(|err| self.classify(err, digest))?;
        let stream = progress::with_timeout(stream, self.progress_timeout);
        store.write(digest, stream).await.map_err(content_error)
    }

    /// Maps a content store failure for blob `digest` to an image error.
    pub fn content_error(&self, digest: &str, err: ContentError) -> Error {
        let image = self.image.clone();
        match err {
            ContentError::InvalidDigest(_) => Error::InvalidContent {
                image,
                detail: err.to_string(),
            },
            ContentError::Mismatch { .. } => Error::DigestMismatch {
                image,
                digest: digest.to_string(),
                detail: err.to_string(),
            },
            ContentError::Fetch(source) if progress::is_stalled(&source) => {
                self.no_progress(digest)
            }
            ContentError::Fetch(source) => {
                let verification = source
                    .get_ref()
                    .is_some_and(|inner| inner.is::<DigestError>());
                if verification {
                    Error::DigestMismatch {
                        image,
                        digest: digest.to_string(),
                        detail: source.to_string(),
                    }
                } else {
                    Error::Unavailable {
                        image,
                        detail: format!("downloading {digest}: {}", error_chain(&source)),
                    }
                }
            }
            ContentError::Io { context, source } => Error::Io {
                image,
                context,
                source,
            },
        }
    }

    /// The error of a pull that received nothing for the progress timeout while fetching
    /// `what`.
    fn no_progress(&self, what: &str) -> Error {
        Error::NoProgress {
            image: self.image.clone(),
            what: what.to_string(),
            timeout: self.progress_timeout,
        }
    }

    /// Maps an `oci-client` failure (while fetching `what`) to an image error.
    fn classify(&self, err: OciDistributionError, what: &str) -> Error {
        let image = self.image.clone();
        let detail = format!("{what}: {}", error_chain(&err));
        match &err {
            OciDistributionError::AuthenticationFailure(_)
            | OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::RegistryTokenDecodeError(_) => {
                Error::Unauthenticated { image, detail }
            }
            OciDistributionError::RegistryError { envelope, .. } => {
                let code = envelope.errors.first().map(|error| &error.code);
                match code {
                    Some(
                        OciErrorCode::BlobUnknown
                        | OciErrorCode::ManifestUnknown
                        | OciErrorCode::ManifestBlobUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound,
                    ) => Error::NotFound { image, detail },
                    Some(OciErrorCode::Unauthorized) => Error::Unauthenticated { image, detail },
                    Some(OciErrorCode::Denied) => Error::PermissionDenied { image, detail },
                    Some(OciErrorCode::NameInvalid) => Error::InvalidReference {
                        image,
                        reason: detail,
                    },
                    _ => Error::Unavailable { image, detail },
                }
            }
            OciDistributionError::ServerError { code, .. } => match code {
                401 => Error::Unauthenticated { image, detail },
                403 => Error::PermissionDenied { image, detail },
                404 => Error::NotFound { image, detail },
                _ => Error::Unavailable { image, detail },
            },
            OciDistributionError::ImageManifestNotFoundError(_) => {
                Error::NotFound { image, detail }
            }
            OciDistributionError::DigestError(_) => Error::DigestMismatch {
                image,
                digest: what.to_string(),
                detail,
            },
            OciDistributionError::UnsupportedMediaTypeError(_)
            | OciDistributionError::UnsupportedSchemaVersionError(_)
            | OciDistributionError::ManifestParsingError(_)
            | OciDistributionError::VersionedParsingError(_)
            | OciDistributionError::ManifestEncodingError(_)
            | OciDistributionError::JsonError(_)
            | OciDistributionError::IncompatibleLayerMediaTypeError(_)
            | OciDistributionError::SpecViolationError(_) => {
                Error::InvalidContent { image, detail }
            }
            _ => Error::Unavailable { image, detail },
        }
    }
}

/// CRI credentials to `oci-client` ones: a registry token (or, lacking one, an identity
/// token) is sent as a bearer token; username/password (or the base64 `auth` field) as
/// basic credentials, which `oci-client` also exchanges for a bearer token when the
/// registry asks for one. `oci-client` cannot exchange an OAuth2 identity (refresh) token,
/// so registries that require that exchange reject it.
fn registry_auth(auth: Option<&AuthConfig>, image: &str) -> Result<RegistryAuth, Error> {
    let Some(auth) = auth else {
        return Ok(RegistryAuth::Anonymous);
    };
    if !auth.registry_token.is_empty() {
        return Ok(RegistryAuth::Bearer(auth.registry_token.clone()));
    }
    if !auth.identity_token.is_empty() {
        return Ok(RegistryAuth::Bearer(auth.identity_token.clone()));
    }
    if !auth.username.is_empty() {
        return Ok(RegistryAuth::Basic(
            auth.username.clone(),
            auth.password.clone(),
        ));
    }
    if !auth.auth.is_empty() {
        let malformed = |detail: String| Error::Unauthenticated {
            image: image.to_string(),
            detail: format!("malformed auth field: {detail}"),
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.auth.trim())
            .map_err(|err| malformed(err.to_string()))?;
        let decoded = String::from_utf8(decoded).map_err(|err| malformed(err.to_string()))?;
        let (username, password) = decoded
            .split_once(':')
            .ok_or_else(|| malformed("expected base64 of `username:password`".to_string()))?;
        return Ok(RegistryAuth::Basic(
            username.to_string(),
            password.to_string(),
        ));
    }
    Ok(RegistryAuth::Anonymous)
}

/// Where an image is looked for, with which credentials, and which hosts speak plain HTTP.
struct Plan {
    /// The mirrors in configured order, then the registry.
    endpoints: Vec<Endpoint>,
    /// Hosts reached over plain HTTP.
    plain_hosts: Vec<String>,
}

/// The endpoints for `reference` under `settings`; `request_auth` (from the CRI request)
/// wins over the registry's configured credentials unless anonymous.
fn plan(reference: &Reference, request_auth: RegistryAuth, settings: &PullSettings) -> Plan {
    let host = settings.registries.get(reference.registry());
    let registry_auth = match (&request_auth, host.and_then(|host| host.auth.as_ref())) {
        (RegistryAuth::Anonymous, Some(configured)) => configured_auth(configured),
        _ => request_auth,
    };
    let mut plain_hosts = Vec::new();
    let mut endpoints = Vec::new();
    for mirror in host.map(|host| host.mirrors.as_slice()).unwrap_or_default() {
        let (plain, mirror_host) = match mirror.strip_prefix("http://") {
            Some(rest) => (true, rest),
            None => (false, mirror.strip_prefix("https://").unwrap_or(mirror)),
        };
        let mirror_host = mirror_host.trim_end_matches('/').to_string();
        if plain || is_loopback(&mirror_host) {
            plain_hosts.push(mirror_host.clone());
        }
        let auth = settings
            .registries
            .get(&mirror_host)
            .and_then(|mirror| mirror.auth.as_ref())
            .map_or_else(|| registry_auth.clone(), configured_auth);
        let mut mirrored = reference.clone();
        mirrored.set_mirror_registry(mirror_host);
        endpoints.push(Endpoint {
            reference: mirrored,
            auth,
        });
    }
    if is_loopback(reference.registry()) || host.is_some_and(|host| host.plain_http) {
        plain_hosts.push(reference.registry().to_string());
        plain_hosts.push(reference.resolve_registry().to_string());
    }
    endpoints.push(Endpoint {
        reference: reference.clone(),
        auth: registry_auth,
    });
    Plan {
        endpoints,
        plain_hosts,
    }
}

/// Whether a CRI AuthConfig carries no credentials at all (then the configured ones apply).
fn is_empty(auth: &AuthConfig) -> bool {
    auth.username.is_empty()
        && auth.password.is_empty()
        && auth.auth.is_empty()
        && auth.identity_token.is_empty()
        && auth.registry_token.is_empty()
}

/// Configured credentials as `oci-client` ones (an identity token as in [`registry_auth`]).
fn configured_auth(credentials: &Credentials) -> RegistryAuth {
    match credentials {
        Credentials::Basic { username, password } => {
            RegistryAuth::Basic(username.clone(), password.clone())
        }
        Credentials::IdentityToken(token) => RegistryAuth::Bearer(token.clone()),
    }
}

/// An error with its causes, `outer: inner: innermost`.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RegistryHost;
    use std::collections::BTreeMap;

    #[test]
    fn mirrors_come_first_with_their_own_scheme_and_credentials() {
        let basic = |user: &str| Credentials::Basic {
            username: user.into(),
            password: "pw".into(),
        };
        let mut registries = BTreeMap::new();
        registries.insert(
            "registry.example:5000".to_string(),
            RegistryHost {
                mirrors: vec![
                    "http://mirror-a.example:5000/".into(),
                    "https://mirror-b.example".into(),
                ],
                plain_http: true,
                auth: Some(basic("default")),
            },
        );
        registries.insert(
            "mirror-b.example".to_string(),
            RegistryHost {
                auth: Some(basic("mirror")),
                ..Default::default()
            },
        );
        let settings = PullSettings {
            registries,
            progress_timeout: Duration::from_secs(1),
        };
        let reference: Reference = "registry.example:5000/app:v1".parse().expect("reference");
        let summary = |plan: &Plan| -> Vec<(String, RegistryAuth)> {
            plan.endpoints
                .iter()
                .map(|e| (e.reference.resolve_registry().to_string(), e.auth.clone()))
                .collect()
        };
        let default = RegistryAuth::Basic("default".into(), "pw".into());
        let configured = plan(&reference, RegistryAuth::Anonymous, &settings);
        assert_eq!(
            summary(&configured),
            vec![
                ("mirror-a.example:5000".into(), default.clone()),
                (
                    "mirror-b.example".into(),
                    RegistryAuth::Basic("mirror".into(), "pw".into())
                ),
                ("registry.example:5000".into(), default),
            ]
        );
        assert_eq!(
            configured.plain_hosts,
            vec![
                "mirror-a.example:5000",
                "registry.example:5000",
                "registry.example:5000"
            ]
        );
        // Credentials of the request win over the configured default.
        let request = RegistryAuth::Basic("request".into(), "x".into());
        let from_request = plan(&reference, request.clone(), &settings);
        assert_eq!(from_request.endpoints[0].auth, request);
        assert_eq!(from_request.endpoints[2].auth, request);
        // An unconfigured remote registry: itself only, over HTTPS.
        let remote: Reference = "quay.io/app:v1".parse().expect("reference");
        let bare = plan(&remote, RegistryAuth::Anonymous, &settings);
        assert_eq!(
            summary(&bare),
            vec![("quay.io".into(), RegistryAuth::Anonymous)]
        );
        assert!(bare.plain_hosts.is_empty());
        assert!(is_empty(&AuthConfig::default()));
    }

    #[test]
    fn cri_auth_maps_to_registry_auth() {
        let image = "example.com/app:latest";
        assert_eq!(
            registry_auth(None, image).ok(),
            Some(RegistryAuth::Anonymous)
        );
        let basic = AuthConfig {
            username: "user".into(),
            password: "secret".into(),
            ..Default::default()
        };
        assert_eq!(
            registry_auth(Some(&basic), image).ok(),
            Some(RegistryAuth::Basic("user".into(), "secret".into()))
        );
        let encoded = AuthConfig {
            auth: base64::engine::general_purpose::STANDARD.encode("user:pa:ss"),
            ..Default::default()
        };
        assert_eq!(
            registry_auth(Some(&encoded), image).ok(),
            Some(RegistryAuth::Basic("user".into(), "pa:ss".into()))
        );
        let token = AuthConfig {
            registry_token: "tok".into(),
            username: "ignored".into(),
            ..Default::default()
        };
        assert_eq!(
            registry_auth(Some(&token), image).ok(),
            Some(RegistryAuth::Bearer("tok".into()))
        );
        let broken = AuthConfig {
            auth: "%%%".into(),
            ..Default::default()
        };
        assert!(matches!(
            registry_auth(Some(&broken), image),
            Err(Error::Unauthenticated { .. })
        ));
    }
}
