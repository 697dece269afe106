//! Image errors, and their gRPC status codes for the CRI ImageService.

use crate::snapshot::ApplyError;

/// Why an image operation failed. Every variant names the image it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The image reference does not parse (Docker reference grammar).
    #[error("invalid image reference {image:?}: {reason}")]
    InvalidReference {
        /// The reference as given.
        image: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The registry does not know the repository, tag, manifest or blob, or the image has
    /// no manifest for this platform.
    #[error("image {image}: not found: {detail}")]
    NotFound {
        /// Normalized reference.
        image: String,
        /// Registry or resolution detail.
        detail: String,
    },
    /// The registry wants (other) credentials.
    #[error("image {image}: unauthorized: registry authentication failed: {detail}")]
    Unauthenticated {
        /// Normalized reference.
        image: String,
        /// Registry detail.
        detail: String,
    },
    /// The registry refused access with the given credentials.
    #[error("image {image}: registry denied access: {detail}")]
    PermissionDenied {
        /// Normalized reference.
        image: String,
        /// Registry detail.
        detail: String,
    },
    /// The registry could not be reached or failed (network, 5xx, rate limit).
    #[error("image {image}: registry unavailable: {detail}")]
    Unavailable {
        /// Normalized reference.
        image: String,
        /// Transport or server detail.
        detail: String,
    },
    /// The registry sent nothing for the pull progress timeout (containerd's
    /// `image_pull_progress_timeout`); the pull was cancelled.
    #[error("image {image}: pull cancelled: no progress for {timeout:?} while fetching {what}")]
    NoProgress {
        /// Normalized reference.
        image: String,
        /// What was being fetched (a manifest or a blob digest).
        what: String,
        /// The configured progress timeout.
        timeout: std::time::Duration,
    },
    /// Downloaded content does not match the digest that names it.
    #[error("image {image}: content of {digest} does not match its digest: {detail}")]
    DigestMismatch {
        /// Normalized reference.
        image: String,
        /// The expected digest.
        digest: String,
        /// What was received instead.
        detail: String,
    },
    /// The manifest or config is malformed or of a kind this runtime does not handle.
    #[error("image {image}: unsupported or malformed content: {detail}")]
    InvalidContent {
        /// Normalized reference.
        image: String,
        /// What is wrong.
        detail: String,
    },
    /// A layer could not be unpacked (path escape, diff ID mismatch, I/O).
    #[error("image {image}: layer {digest}: {source}")]
    Layer {
        /// Normalized reference.
        image: String,
        /// The layer blob digest.
        digest: String,
        /// Why unpacking failed.
        #[source]
        source: ApplyError,
    },
    /// Local storage failed.
    #[error("image {image}: {context}: {source}")]
    Io {
        /// Normalized reference (or ID).
        image: String,
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let code = match &err {
            Error::InvalidReference { .. } => tonic::Code::InvalidArgument,
            Error::NotFound { .. } => tonic::Code::NotFound,
            Error::Unauthenticated { .. } => tonic::Code::Unauthenticated,
            Error::PermissionDenied { .. } => tonic::Code::PermissionDenied,
            Error::Unavailable { .. } | Error::NoProgress { .. } => tonic::Code::Unavailable,
            Error::DigestMismatch { .. } => tonic::Code::DataLoss,
            Error::InvalidContent { .. } => tonic::Code::FailedPrecondition,
            Error::Layer { source, .. } => match source {
                ApplyError::PathEscape { .. } => tonic::Code::InvalidArgument,
                ApplyError::DiffIdMismatch { .. } => tonic::Code::DataLoss,
                ApplyError::Io { .. } => tonic::Code::Internal,
            },
            Error::Io { .. } => tonic::Code::Internal,
        };
        tonic::Status::new(code, err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_follow_the_failure_kind_and_name_the_image() {
        let not_found = tonic::Status::from(Error::NotFound {
            image: "127.0.0.1:5000/busybox:latest".into(),
            detail: "manifest unknown".into(),
        });
        assert_eq!(not_found.code(), tonic::Code::NotFound);
        assert!(
            not_found
                .message()
                .contains("127.0.0.1:5000/busybox:latest")
        );
        assert!(not_found.message().contains("manifest unknown"));

        let escape = tonic::Status::from(Error::Layer {
            image: "busybox".into(),
            digest: "sha256:00".into(),
            source: ApplyError::PathEscape {
                path: "../etc/passwd".into(),
                reason: "`..` component".into(),
            },
        });
        assert_eq!(escape.code(), tonic::Code::InvalidArgument);
        assert!(escape.message().contains("../etc/passwd"));

        let bad = tonic::Status::from(Error::InvalidReference {
            image: "Busybox".into(),
            reason: "uppercase".into(),
        });
        assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    }
}
