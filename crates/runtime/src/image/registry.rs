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

use super::Error;
use super::content::{ContentError, ContentStore};
use super::reference::is_loopback;

/// How long connecting to a registry may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a registry may stay silent in the middle of a response.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// A connection to the registry of one image reference, with its credentials.
pub struct Registry {
    client: Client,
    auth: RegistryAuth,
    reference: Reference,
    /// The normalized reference, for error messages.
    image: String,
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
    /// Prepares a client for `reference`'s registry: plain HTTP for loopback registries,
    /// HTTPS otherwise; linux/amd64 (the host platform) is picked from image indexes.
    pub fn connect(
        reference: &Reference,
        auth: Option<&AuthConfig>,
        image: &str,
    ) -> Result<Self, Error> {
        // The rustls provider is process-wide; a second install fails harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let protocol = if is_loopback(reference.resolve_registry()) {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        };
        let config = ClientConfig {
            protocol,
            platform_resolver: Some(Box::new(current_platform_resolver)),
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            ..ClientConfig::default()
        };
        let client = Client::try_from(config).map_err(|err| Error::Unavailable {
            image: image.to_string(),
            detail: format!("cannot build a registry client: {}", error_chain(&err)),
        })?;
        Ok(Self {
            client,
            auth: registry_auth(auth, image)?,
            reference: reference.clone(),
            image: image.to_string(),
        })
    }

    /// Fetches the manifest the reference points at, choosing this platform's entry when it
    /// is an image index or Docker manifest list.
    pub async fn resolve(&self) -> Result<Resolved, Error> {
        // Pulling by digest ignores the tag (the tag may have moved; the digest cannot).
        let reference = match self.reference.digest() {
            Some(digest) => self.reference.clone_with_digest(digest.to_string()),
            None => self.reference.clone(),
        };
        let (manifest, manifest_digest, list_digest) = self
            .client
            .pull_image_manifest_and_list_digest(&reference, &self.auth)
            .await
            .map_err(|err| self.classify(err, reference.digest().unwrap_or("manifest")))?;
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
        let stream = self
            .client
            .pull_blob_stream(&self.reference, descriptor)
            .await
            .map_err(|err| self.classify(err, digest))?;
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
