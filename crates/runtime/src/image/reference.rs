//! Image references, normalized as Docker does (`docker/distribution/reference`,
//! `ParseNormalizedNamed`): `busybox` is `docker.io/library/busybox:latest`, a registry host
//! (`host:port/repo`) is kept, the default tag is `latest`, `@sha256:...` pins a digest.

use std::net::IpAddr;

use oci_client::Reference;

use super::Error;

/// Parses and normalizes `image`.
pub fn normalize(image: &str) -> Result<Reference, Error> {
    let invalid = |reason: String| Error::InvalidReference {
        image: image.to_string(),
        reason,
    };
    if image.trim() != image || image.is_empty() {
        return Err(invalid("empty or surrounded by whitespace".to_string()));
    }
    let reference = Reference::try_from(image).map_err(|err| invalid(err.to_string()))?;
    // Docker's grammar allows uppercase in the registry host only, never in the path.
    if reference
        .repository()
        .bytes()
        .any(|b| b.is_ascii_uppercase())
    {
        return Err(invalid("repository name must be lowercase".to_string()));
    }
    // Docker refuses repository names that look like image IDs, which would be ambiguous.
    let last = reference
        .repository()
        .rsplit('/')
        .next()
        .unwrap_or_default();
    if last.len() == 64 && last.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid(
            "a 64-character hex repository name looks like an image ID".to_string(),
        ));
    }
    Ok(reference)
}

/// `registry/repository`, e.g. `docker.io/library/busybox`.
pub fn repository(reference: &Reference) -> String {
    format!("{}/{}", reference.registry(), reference.repository())
}

/// The normalized tag reference `registry/repository:tag`, or `None` when `reference` pins
/// a digest (pulling by digest ignores the tag, as Docker does).
pub fn tag(reference: &Reference) -> Option<String> {
    match (reference.digest(), reference.tag()) {
        (None, Some(tag)) => Some(format!("{}:{tag}", repository(reference))),
        _ => None,
    }
}

/// The normalized digest reference `registry/repository@sha256:...`, if `reference` pins one.
pub fn digest(reference: &Reference) -> Option<String> {
    reference
        .digest()
        .map(|digest| format!("{}@{digest}", repository(reference)))
}

/// Whether `registry` (`host[:port]`) is on the loopback interface: `localhost`,
/// `127.0.0.0/8` or `::1`. Such registries are reached over plain HTTP, as Docker and
/// containerd treat localhost registries as insecure by default.
pub fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        registry.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(image: &str) -> String {
        let reference = normalize(image).expect("valid reference");
        tag(&reference)
            .or_else(|| digest(&reference))
            .expect("tag or digest")
    }

    #[test]
    fn normalizes_like_docker() {
        assert_eq!(normalized("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(normalized("busybox:1.36"), "docker.io/library/busybox:1.36");
        assert_eq!(
            normalized("library/busybox"),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(
            normalized("docker.io/busybox"),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(
            normalized("index.docker.io/busybox"),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(normalized("user/app:v1"), "docker.io/user/app:v1");
        assert_eq!(
            normalized("localhost:5000/app"),
            "localhost:5000/app:latest"
        );
        assert_eq!(normalized("127.0.0.1:5000/a/b:t"), "127.0.0.1:5000/a/b:t");
        assert_eq!(
            normalized("Registry.Example:5000/app"),
            "Registry.Example:5000/app:latest"
        );
        assert_eq!(
            normalized("registry.k8s.io/pause:3.9"),
            "registry.k8s.io/pause:3.9"
        );
        let hex = "a".repeat(64);
        assert_eq!(
            normalized(&format!("busybox@sha256:{hex}")),
            format!("docker.io/library/busybox@sha256:{hex}")
        );
        assert_eq!(
            normalized(&format!("quay.io/x/y:1@sha256:{hex}")),
            format!("quay.io/x/y@sha256:{hex}")
        );
    }

    #[test]
    fn rejects_malformed_references() {
        for bad in [
            "",
            " busybox",
            "Busybox",
            "UPPER/case:tag",
            "example.com/Team/app",
            "busybox:",
            "a/../b",
            "busybox@sha256:abc",
            &"f".repeat(64),
        ] {
            assert!(
                matches!(normalize(bad), Err(Error::InvalidReference { .. })),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn loopback_registries_are_recognised() {
        for host in [
            "localhost",
            "localhost:5000",
            "127.0.0.1:5000",
            "127.1.2.3",
            "[::1]:5000",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "docker.io",
            "10.0.0.1:5000",
            "registry.local:5000",
            "[fe80::1]:5000",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
