//! `GET /logs/{path}`: files and directory listings under the node's log directory
//! (upstream serves `/var/log/` with Go's `http.FileServer`; the listing is its
//! `<pre>` of links, directories first marked with a trailing `/`).

use std::path::{Component, PathBuf};

use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use tokio_util::io::ReaderStream;

use super::ServerState;

/// The handler for `/logs/` and everything below it.
pub async fn logs(State(state): State<ServerState>, uri: Uri) -> Response {
    let rel = uri.path().strip_prefix("/logs").unwrap_or_default();
    let decoded: String = match percent_decode(rel) {
        Some(d) => d,
        None => return (StatusCode::BAD_REQUEST, "invalid URL path").into_response(),
    };
    let rel = PathBuf::from(decoded.trim_start_matches('/'));
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return (StatusCode::BAD_REQUEST, "invalid URL path").into_response();
    }
    let path = state.log_root.join(&rel);
    let Ok(meta) = tokio::fs::metadata(&path).await else {
        return (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
    };
    if meta.is_dir() {
        if !uri.path().ends_with('/') {
            return Redirect::permanent(&format!("{}/", uri.path())).into_response();
        }
        return match list(&path).await {
            Ok(html) => {
                ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
            }
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        };
    }
    match tokio::fs::File::open(&path).await {
        Ok(file) => (
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
                (header::CONTENT_LENGTH, meta.len().to_string()),
            ],
            Body::from_stream(ReaderStream::new(file)),
        )
            .into_response(),
        Err(e) => (StatusCode::FORBIDDEN, e.to_string()).into_response(),
    }
}

/// The HTML listing of `dir`, entries sorted by name.
async fn list(dir: &std::path::Path) -> std::io::Result<String> {
    let mut entries = tokio::fs::read_dir(dir).await?;
    let mut names = Vec::new();
    while let Some(entry) = entries.next_entry().await? {
        let mut name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().await.is_ok_and(|t| t.is_dir()) {
            name.push('/');
        }
        names.push(name);
    }
    names.sort();
    let mut html = String::from(
        "<!doctype html>\n<meta name=\"viewport\" content=\"width=device-width\">\n<pre>\n",
    );
    for name in names {
        html.push_str(&format!(
            "<a href=\"{}\">{}</a>\n",
            href(&name),
            escape_html(&name)
        ));
    }
    html.push_str("</pre>\n");
    Ok(html)
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// A name as a relative link (percent-encoded).
fn href(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes; `None` on a bad escape or non-UTF-8 result.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_decodes() {
        assert_eq!(percent_decode("/a%20b"), Some("/a b".into()));
        assert_eq!(percent_decode("/a%2"), None);
        assert_eq!(href("a b:c/"), "a%20b%3Ac/");
        assert_eq!(escape_html("<x>"), "&lt;x&gt;");
    }
}
