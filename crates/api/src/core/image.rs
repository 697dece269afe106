//! Image references as far as defaulting needs them (upstream `pkg/util/parsers`).

/// Splits `image` into its tag (after the last `:` of the last path component) and
/// digest (after `@`), without validating: `r:5000/a/b:1` → `(Some("1"), None)`.
pub fn split_tag_and_digest(image: &str) -> (Option<&str>, Option<&str>) {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last_component = name.rsplit('/').next().unwrap_or(name);
    let tag = last_component.rsplit_once(':').map(|(_, tag)| tag);
    (tag, digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_digests() {
        assert_eq!(split_tag_and_digest("r:5000/a/b:1"), (Some("1"), None));
        assert_eq!(split_tag_and_digest("r:5000/a/b"), (None, None));
        assert_eq!(
            split_tag_and_digest("b@sha256:ab"),
            (None, Some("sha256:ab"))
        );
    }
}
