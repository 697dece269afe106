//! Image reference parsing: the docker reference grammar as far as the kubelet needs it
//! (upstream `pkg/util/parsers.ParseImageName` and `applyDefaultImageTag`).

use crate::error::{Error, Result};
use skiff_api::core::image::split_tag_and_digest;

/// Validates `image` and appends `:latest` when it has neither tag nor digest.
///
/// Errors (the message of upstream's `InvalidImageName`) on an empty or malformed reference.
pub fn apply_default_image_tag(image: &str) -> Result<String> {
    validate(image)?;
    match split_tag_and_digest(image) {
        (None, None) => Ok(format!("{image}:latest")),
        _ => Ok(image.to_owned()),
    }
}

/// Checks `image` against the reference grammar `[domain/]path[:tag][@digest]`.
fn validate(image: &str) -> Result<()> {
    if image.is_empty() {
        return Err(Error::Image("image reference is empty".to_owned()));
    }
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    if let Some(digest) = digest {
        validate_digest(digest)?;
    }
    let (repository, tag) = match name.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag)),
        _ => (name, None),
    };
    if let Some(tag) = tag {
        validate_tag(tag)?;
    }
    if repository.len() > 255 {
        return Err(Error::Image(
            "repository name must not be more than 255 characters".to_owned(),
        ));
    }
    let mut components: Vec<&str> = repository.split('/').collect();
    if components.len() > 1 && is_domain(components[0]) {
        validate_domain(components.remove(0))?;
    }
    components.into_iter().try_for_each(validate_path_component)
}

/// The first component is a registry host when it has a `.` or `:` or is `localhost`.
fn is_domain(component: &str) -> bool {
    component.contains('.') || component.contains(':') || component == "localhost"
}

fn validate_domain(domain: &str) -> Result<()> {
    let (host, port) = match domain.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    let host_ok = !host.is_empty()
        && host
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(Error::Image(format!("invalid registry host {domain:?}")))
    }
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn validate_path_component(component: &str) -> Result<()> {
    let invalid = || {
        Error::Image(format!(
            "invalid reference format: repository name component {component:?} must be lowercase alphanumerics separated by '.', '_', '__' or '-'"
        ))
    };
    let is_alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !component.starts_with(is_alnum) || !component.ends_with(is_alnum) {
        return Err(invalid());
    }
    let mut separator = String::new();
    for c in component.chars() {
        if is_alnum(c) {
            let ok = separator.is_empty()
                || separator == "."
                || separator == "_"
                || separator == "__"
                || separator.chars().all(|s| s == '-');
            if !ok {
                return Err(invalid());
            }
            separator.clear();
        } else if matches!(c, '.' | '_' | '-') {
            separator.push(c);
        } else {
            return Err(invalid());
        }
    }
    Ok(())
}

/// `[\w][\w.-]{0,127}`
fn validate_tag(tag: &str) -> Result<()> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let ok = tag.len() <= 128
        && tag.starts_with(word)
        && tag.chars().all(|c| word(c) || c == '.' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Error::Image(format!(
            "invalid reference format: invalid tag {tag:?}"
        )))
    }
}

/// `algorithm:hex` with at least 32 hex digits.
fn validate_digest(digest: &str) -> Result<()> {
    let ok = digest.split_once(':').is_some_and(|(algo, hex)| {
        algo.starts_with(|c: char| c.is_ascii_alphabetic())
            && algo
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_+.".contains(c))
            && hex.len() >= 32
            && hex.chars().all(|c| c.is_ascii_hexdigit())
    });
    if ok {
        Ok(())
    } else {
        Err(Error::Image(format!(
            "invalid reference format: invalid digest {digest:?}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_tag_is_latest() {
        assert_eq!(
            apply_default_image_tag("busybox").as_deref(),
            Ok("busybox:latest")
        );
        assert_eq!(
            apply_default_image_tag("127.0.0.1:5000/x/busybox").as_deref(),
            Ok("127.0.0.1:5000/x/busybox:latest")
        );
        assert_eq!(
            apply_default_image_tag("localhost/busybox:1.36").as_deref(),
            Ok("localhost/busybox:1.36")
        );
        let digest = format!("busybox@sha256:{}", "a".repeat(64));
        assert_eq!(
            apply_default_image_tag(&digest).as_deref(),
            Ok(digest.as_str())
        );
    }

    #[test]
    fn invalid_references_are_rejected() {
        for bad in [
            "",
            "BusyBox",
            "busybox:",
            "bus..box",
            "a/-b",
            "x:tag with space",
            "b@sha256:12",
        ] {
            assert!(
                apply_default_image_tag(bad).is_err(),
                "{bad:?} should be invalid"
            );
        }
    }
}
