//! [`Document`]: a response body built once, answered with an `ETag` and `304 Not Modified`
//! when the client already has it (`If-None-Match`), as upstream answers discovery and
//! OpenAPI documents.

use axum::body::Body;
use axum::http::header::{CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use sha2::Digest;

/// An encoded document and its hash.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    body: Bytes,
    /// SHA-512 of the body, upper-case hex (the form of upstream's OpenAPI v3 `hash`).
    hash: String,
}

impl Document {
    /// A document of `body`.
    pub fn new(body: impl Into<Bytes>) -> Self {
        let body = body.into();
        let hash = hex::encode_upper(sha2::Sha512::digest(&body));
        Document { body, hash }
    }

    /// `value` as JSON. The values served (API types and `serde_json::Value`s with string
    /// keys) always serialize.
    pub fn json<T: serde::Serialize>(value: &T) -> Self {
        Document::new(serde_json::to_vec(value).unwrap_or_default())
    }

    /// The encoded bytes.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Upper-case hex SHA-512 of the body.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The document as a `200` with `content_type`, or `304` when the request's
    /// `If-None-Match` names its ETag. `Vary: Accept`: the same URL answers other formats.
    pub fn respond(&self, request: &HeaderMap, content_type: &str) -> Response {
        let etag = format!("\"{}\"", self.hash);
        let cached = request
            .get_all(IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|tag| {
                let tag = tag.trim();
                tag == "*" || tag.trim_start_matches("W/") == etag
            });
        let mut response = if cached {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            response
        } else {
            Response::new(Body::from(self.body.clone()))
        };
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(content_type) {
            headers.insert(CONTENT_TYPE, value);
        }
        if let Ok(value) = HeaderValue::from_str(&etag) {
            headers.insert(ETAG, value);
        }
        headers.insert(VARY, HeaderValue::from_static("Accept"));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_not_modified_for_its_etag_only() {
        let doc = Document::new(&b"{}"[..]);
        let fresh = doc.respond(&HeaderMap::new(), "application/json");
        assert_eq!(fresh.status(), StatusCode::OK);
        let etag = fresh.headers()[ETAG].clone();
        assert_eq!(etag.to_str().unwrap().len(), 128 + 2);

        let mut request = HeaderMap::new();
        request.insert(IF_NONE_MATCH, etag);
        let cached = doc.respond(&request, "application/json");
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(cached.headers()[CONTENT_TYPE], "application/json");

        request.insert(IF_NONE_MATCH, HeaderValue::from_static("\"other\""));
        assert_eq!(
            doc.respond(&request, "application/json").status(),
            StatusCode::OK
        );
    }
}
