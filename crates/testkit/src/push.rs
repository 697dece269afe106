//! Pushing an [`Image`] with the OCI distribution API (blob upload, manifest PUT).

use anyhow::{Context, bail};

use crate::http;
use crate::image::{Content, Image};

/// Pushes `image` to the plain-HTTP registry at `host` ("127.0.0.1:PORT") as `repo:tag`
/// and returns the reference `host/repo:tag`.
///
/// Uploads every blob not already present (POST + PUT upload), then the per-platform
/// manifests by digest (index images), then the tagged manifest or index.
/// Errors: any unexpected status (with the registry's error body), or a registry
/// digest that differs from [`Image::digest`].
pub fn push(host: &str, repo: &str, tag: &str, image: &Image) -> anyhow::Result<String> {
    for blob in &image.blobs {
        push_blob(host, repo, blob).with_context(|| format!("pushing blob {}", blob.digest))?;
    }
    for manifest in &image.children {
        push_manifest(host, repo, &manifest.digest, manifest)?;
    }
    push_manifest(host, repo, tag, &image.top)?;
    Ok(format!("{host}/{repo}:{tag}"))
}

fn push_blob(host: &str, repo: &str, blob: &Content) -> anyhow::Result<()> {
    let exists = http::request(
        "HEAD",
        host,
        &format!("/v2/{repo}/blobs/{}", blob.digest),
        &[],
        b"",
    )?;
    if exists.status == 200 {
        return Ok(());
    }
    let start = http::request(
        "POST",
        host,
        &format!("/v2/{repo}/blobs/uploads/"),
        &[],
        b"",
    )?;
    if start.status != 202 {
        bail!(
            "starting the upload: HTTP {}: {}",
            start.status,
            start.text()
        );
    }
    let location = start
        .header("location")
        .context("upload without a Location")?;
    let path = location_path(location, host);
    let sep = if path.contains('?') { '&' } else { '?' };
    let put = http::request(
        "PUT",
        host,
        &format!("{path}{sep}digest={}", blob.digest),
        &[("Content-Type", "application/octet-stream")],
        &blob.data,
    )?;
    if put.status != 201 {
        bail!("completing the upload: HTTP {}: {}", put.status, put.text());
    }
    Ok(())
}

fn push_manifest(
    host: &str,
    repo: &str,
    reference: &str,
    manifest: &Content,
) -> anyhow::Result<()> {
    let response = http::request(
        "PUT",
        host,
        &format!("/v2/{repo}/manifests/{reference}"),
        &[("Content-Type", &manifest.media_type)],
        &manifest.data,
    )?;
    if response.status != 201 {
        bail!(
            "pushing manifest {repo}:{reference} ({}): HTTP {}: {}",
            manifest.media_type,
            response.status,
            response.text()
        );
    }
    if let Some(digest) = response.header("docker-content-digest")
        && digest != manifest.digest
    {
        bail!(
            "registry stored {repo}:{reference} as {digest}, expected {}",
            manifest.digest
        );
    }
    Ok(())
}

/// The path-and-query of an upload `Location`, which may be absolute (`http://host/v2/..`)
/// or relative (`/v2/..`).
fn location_path<'a>(location: &'a str, host: &str) -> &'a str {
    let rest = location
        .strip_prefix("http://")
        .or_else(|| location.strip_prefix("https://"));
    match rest {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => location.strip_prefix(host).unwrap_or(location),
    }
}
