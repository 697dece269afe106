//! Pushing an [`Image`] with the OCI distribution API (blob upload, manifest PUT).

use anyhow::{Context, bail};
use base64::Engine as _;
use ureq::http::Response;
use ureq::{Agent, RequestBuilder};

use crate::image::{Content, Image};
use crate::sys;

/// Pushes `image` to the plain-HTTP registry at `host` ("127.0.0.1:PORT") as `repo:tag`
/// and returns the reference `host/repo:tag`.
///
/// Uploads every blob not already present (POST + PUT upload), then the per-platform
/// manifests by digest (index images), then the tagged manifest or index.
/// Errors: any unexpected status (with the registry's error body), or a registry
/// digest that differs from [`Image::digest`].
pub fn push(host: &str, repo: &str, tag: &str, image: &Image) -> anyhow::Result<String> {
    push_as(host, None, repo, tag, image)
}

/// [`push`] with HTTP basic `credentials` (user, password) on every request.
pub(crate) fn push_as(
    host: &str,
    credentials: Option<(&str, &str)>,
    repo: &str,
    tag: &str,
    image: &Image,
) -> anyhow::Result<String> {
    let client = Client {
        agent: sys::http_agent(),
        authorization: credentials.map(|(user, password)| {
            let pair = format!("{user}:{password}");
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        }),
    };
    for blob in &image.blobs {
        push_blob(&client, host, repo, blob)
            .with_context(|| format!("pushing blob {}", blob.digest))?;
    }
    for manifest in &image.children {
        push_manifest(&client, host, repo, &manifest.digest, manifest)?;
    }
    push_manifest(&client, host, repo, tag, &image.top)?;
    Ok(format!("{host}/{repo}:{tag}"))
}

/// An HTTP agent and the `Authorization` header value it sends, if any.
struct Client {
    agent: Agent,
    authorization: Option<String>,
}

impl Client {
    fn request<B>(&self, builder: RequestBuilder<B>) -> RequestBuilder<B> {
        match &self.authorization {
            Some(value) => builder.header("Authorization", value),
            None => builder,
        }
    }
}

fn push_blob(client: &Client, host: &str, repo: &str, blob: &Content) -> anyhow::Result<()> {
    let agent = &client.agent;
    let exists = client
        .request(agent.head(format!("http://{host}/v2/{repo}/blobs/{}", blob.digest)))
        .call()?;
    if exists.status() == 200 {
        return Ok(());
    }
    let mut start = client
        .request(agent.post(format!("http://{host}/v2/{repo}/blobs/uploads/")))
        .send_empty()?;
    if start.status() != 202 {
        bail!("starting the upload: {}", describe(&mut start));
    }
    let location = start
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .context("upload without a Location")?;
    let url = upload_url(location, host);
    let sep = if url.contains('?') { '&' } else { '?' };
    let mut put = client
        .request(agent.put(format!("{url}{sep}digest={}", blob.digest)))
        .content_type("application/octet-stream")
        .send(&blob.data)?;
    if put.status() != 201 {
        bail!("completing the upload: {}", describe(&mut put));
    }
    Ok(())
}

fn push_manifest(
    client: &Client,
    host: &str,
    repo: &str,
    reference: &str,
    manifest: &Content,
) -> anyhow::Result<()> {
    let mut response = client
        .request(
            client
                .agent
                .put(format!("http://{host}/v2/{repo}/manifests/{reference}")),
        )
        .content_type(&manifest.media_type)
        .send(&manifest.data)?;
    if response.status() != 201 {
        bail!(
            "pushing manifest {repo}:{reference} ({}): {}",
            manifest.media_type,
            describe(&mut response)
        );
    }
    if let Some(digest) = response.headers().get("docker-content-digest")
        && digest != manifest.digest.as_str()
    {
        bail!(
            "registry stored {repo}:{reference} as {digest:?}, expected {}",
            manifest.digest
        );
    }
    Ok(())
}

/// "HTTP <status>: <body>" of an unexpected response, for errors.
fn describe(response: &mut Response<ureq::Body>) -> String {
    let status = response.status();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    format!("HTTP {status}: {body}")
}

/// The absolute URL of an upload `Location`, which may be absolute (`http://host/v2/..`)
/// or relative to the registry (`/v2/..`).
fn upload_url(location: &str, host: &str) -> String {
    if location.starts_with("http://") || location.starts_with("https://") {
        location.to_string()
    } else {
        format!("http://{host}{location}")
    }
}
