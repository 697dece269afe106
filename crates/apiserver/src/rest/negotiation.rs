//! Content negotiation (upstream `k8s.io/apiserver/pkg/endpoints/handlers/negotiation`):
//! request bodies in JSON, YAML or Kubernetes protobuf, responses in JSON, YAML or
//! protobuf, and the `as=Table` / `as=PartialObjectMetadata` response transformations
//! (JSON and YAML only, as upstream: a Table has no protobuf form).

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;
use skiff_api::protobuf;

use crate::error::ApiError;

/// Upstream's request body limit (`maxRequestBodyBytes`, 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How much of a body over the limit is still read, and dropped, before the 413 goes out.
/// A server that answers while the client is still sending and stops reading makes HTTP/1.1
/// clients see the connection close, and HTTP/2 clients a stream reset, instead of the
/// answer; reading the rest (as Go's server does for small remainders, and by lingering
/// on close) lets them read it. Beyond this, or [`DRAIN_TIMEOUT`], the connection is
/// given up.
const MAX_DRAIN_BYTES: usize = 8 * MAX_BODY_BYTES;

/// How long the rest of a body over the limit is read at most.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads a request body of at most [`MAX_BODY_BYTES`]. Errors: 413
/// `Request entity too large: limit is 3145728` (after reading and dropping the rest of
/// the body, up to [`MAX_DRAIN_BYTES`], so that the client reads the answer), 400 when the
/// body cannot be read.
pub async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    read_limited(body, MAX_BODY_BYTES).await
}

/// [`read_body`] with the limit `limit`.
async fn read_limited(mut body: Body, limit: usize) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;
    let mut read = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| ApiError::bad_request(format!("error reading the body: {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if read.len() + data.len() > limit {
            let mut drained = read.len() + data.len();
            drop(read);
            let drain = async {
                while drained <= MAX_DRAIN_BYTES {
                    match body.frame().await {
                        Some(Ok(frame)) => {
                            drained += frame.data_ref().map_or(0, |d| d.len());
                        }
                        Some(Err(_)) | None => break,
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, drain).await;
            return Err(ApiError::too_large(format!(
                "Request entity too large: limit is {limit}"
            )));
        }
        read.extend_from_slice(&data);
    }
    Ok(read.freeze())
}

/// The media type (`application/json`) of a `Content-Type` header, lower-cased, without
/// parameters; `application/json` when absent.
pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "application/json".to_owned())
}

/// The protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Decodes an object body (`application/json`, `application/yaml` or
/// `application/vnd.kubernetes.protobuf`, see [`skiff_api::protobuf`]). Errors: 415 for
/// other media types, 400 for malformed input or a body that is not an object.
pub fn decode_object(media_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    let value = match media_type {
        "application/json" | "*/*" => parse_json(body)?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => parse_yaml(body)?,
        PROTOBUF => protobuf::decode(body).map_err(|e| ApiError::bad_request(e.to_string()))?,
        other => {
            return Err(ApiError::unsupported_media_type(
                other,
                ApiError::OBJECT_MEDIA_TYPES,
            ));
        }
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(format!(
            "Object 'Kind' is missing in '{}'",
            String::from_utf8_lossy(body)
        )));
    }
    Ok(value)
}

/// Parses JSON with upstream's error prefix.
pub fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

/// Parses YAML (one document) into JSON values, bounded against hostile nesting
/// (`skiff_api::yaml`).
pub fn parse_yaml(body: &[u8]) -> Result<Value, ApiError> {
    skiff_api::yaml::to_json(body)
        .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: yaml: {e}")))
}

/// How a response is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
    /// `application/vnd.kubernetes.protobuf` ([`skiff_api::protobuf`]).
    Protobuf,
}

/// What the client asked the object or list to be turned into (the `as=` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The object or list as is.
    Object,
    /// `as=Table;g=meta.k8s.io;v=v1`: a meta.k8s.io/v1 Table.
    Table,
    /// `as=PartialObjectMetadata` / `PartialObjectMetadataList`: metadata only.
    PartialObjectMetadata,
}

/// The negotiated response: encoding and shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    pub format: Format,
    pub shape: Shape,
}

impl Output {
    /// Plain JSON.
    pub const JSON: Output = Output {
        format: Format::Json,
        shape: Shape::Object,
    };

    /// Picks the first acceptable clause of the `Accept` header (JSON when absent).
    /// Errors: 406 NotAcceptable when no clause is one Skiff can produce.
    pub fn negotiate(headers: &HeaderMap) -> Result<Output, ApiError> {
        let accept = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",");
        if accept.trim().is_empty() {
            return Ok(Output::JSON);
        }
        accept
            .split(',')
            .find_map(clause)
            .ok_or_else(|| {
                ApiError::new(
                    406,
                    "NotAcceptable",
                    "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
                )
            })
    }

    /// The `Content-Type` of the response.
    pub fn content_type(&self) -> &'static str {
        match self.format {
            Format::Json => "application/json",
            Format::Yaml => "application/yaml",
            Format::Protobuf => PROTOBUF,
        }
    }

    /// Encodes `value` with status `code` and the given `Warning` headers. A value without
    /// a protobuf message (a kind Skiff has no table entry for) goes out as JSON.
    pub fn respond(&self, code: StatusCode, value: &Value, warnings: &[String]) -> Response {
        let mut output = *self;
        let body = match self.format {
            Format::Json => serde_json::to_vec(value).map_err(|e| e.to_string()),
            Format::Yaml => serde_yaml_ng::to_string(value)
                .map(String::into_bytes)
                .map_err(|e| e.to_string()),
            Format::Protobuf => protobuf::encode(value).or_else(|_| {
                output.format = Format::Json;
                serde_json::to_vec(value).map_err(|e| e.to_string())
            }),
        };
        let body = match body {
            Ok(body) => body,
            Err(e) => return ApiError::internal(e).into_response(),
        };
        let mut response = (code, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(output.content_type()),
        );
        for warning in warnings {
            if let Ok(value) = HeaderValue::from_str(&warning_header(warning)) {
                headers.append(header::WARNING, value);
            }
        }
        response
    }
}

/// One `Warning` header value as upstream writes it: `299 - "text"` (Go's %q quoting).
pub fn warning_header(text: &str) -> String {
    format!("299 - {}", serde_json::Value::from(text))
}

/// The output one `Accept` clause asks for, if Skiff can produce it.
fn clause(clause: &str) -> Option<Output> {
    let mut parts = clause.split(';').map(str::trim);
    let media_type = parts.next()?.to_ascii_lowercase();
    let mut as_kind = None;
    let mut group = None;
    let mut version = None;
    for param in parts {
        let (key, value) = param.split_once('=')?;
        let value = value.trim().trim_matches('"');
        match key.trim() {
            "as" => as_kind = Some(value),
            "g" => group = Some(value),
            "v" => version = Some(value),
            _ => {}
        }
    }
    let format = match media_type.as_str() {
        "application/json" | "application/*" | "*/*" => Format::Json,
        "application/yaml" => Format::Yaml,
        PROTOBUF => Format::Protobuf,
        _ => return None,
    };
    if format == Format::Protobuf && as_kind.is_some() {
        return None;
    }
    let shape = match as_kind {
        None => Shape::Object,
        Some(kind) => {
            if group != Some("meta.k8s.io") || !matches!(version, Some("v1" | "v1beta1")) {
                return None;
            }
            match kind {
                "Table" => Shape::Table,
                "PartialObjectMetadata" | "PartialObjectMetadataList" => {
                    Shape::PartialObjectMetadata
                }
                _ => return None,
            }
        }
    };
    Some(Output { format, shape })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> Result<Output, ApiError> {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        Output::negotiate(&headers)
    }

    /// A body of `chunks` chunks of 1 KiB; the counter tells how many were read.
    fn chunked(chunks: usize) -> (Body, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use futures::StreamExt as _;
        use std::sync::atomic::Ordering;
        let pulled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = pulled.clone();
        let stream = futures::stream::iter(0..chunks).map(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 1024]))
        });
        (Body::from_stream(stream), pulled)
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_read_to_its_end_before_the_413() {
        let (body, pulled) = chunked(10);
        assert_eq!(
            read_limited(body, 10 * 1024).await.unwrap().len(),
            10 * 1024
        );
        assert_eq!(pulled.load(std::sync::atomic::Ordering::SeqCst), 10);
        // Over the limit: 413, and every chunk was still read, so that the client
        // finishes sending and reads the answer.
        let (body, pulled) = chunked(40);
        let err = read_limited(body, 10 * 1024).await.unwrap_err();
        assert_eq!(err.code, 413);
        assert_eq!(err.message, "Request entity too large: limit is 10240");
        assert_eq!(pulled.load(std::sync::atomic::Ordering::SeqCst), 40);
    }

    #[test]
    fn kubectl_get_asks_for_a_table() {
        let out = accept("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json").unwrap();
        assert_eq!(out.shape, Shape::Table);
        assert_eq!(out.format, Format::Json);
    }

    #[test]
    fn protobuf_is_negotiated_except_for_tables() {
        let out = accept("application/vnd.kubernetes.protobuf, application/json").unwrap();
        assert_eq!(out.format, Format::Protobuf);
        assert_eq!(out.content_type(), PROTOBUF);
        let watch = accept("application/vnd.kubernetes.protobuf;stream=watch").unwrap();
        assert_eq!(watch.format, Format::Protobuf);
        let table = "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1";
        assert_eq!(accept(table).unwrap_err().code, 406);
        let out = accept(&format!(
            "{table}, application/json;as=Table;g=meta.k8s.io;v=v1"
        ));
        assert_eq!(out.unwrap().format, Format::Json);
        assert_eq!(accept("application/yaml").unwrap().format, Format::Yaml);
        assert_eq!(accept("*/*").unwrap(), Output::JSON);
        assert_eq!(
            accept("application/json;as=Foo;g=meta.k8s.io;v=v1")
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn protobuf_responses_fall_back_to_json_for_kinds_without_a_message() {
        let out = accept(PROTOBUF).unwrap();
        let response = out.respond(StatusCode::OK, &serde_json::json!({"kind": "Table"}), &[]);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let status = serde_json::json!({"apiVersion": "v1", "kind": "Status", "code": 404});
        let response = out.respond(StatusCode::NOT_FOUND, &status, &[]);
        assert_eq!(response.headers()[header::CONTENT_TYPE], PROTOBUF);
    }

    #[test]
    fn bodies_decode_from_json_and_yaml() {
        let json = decode_object("application/json", br#"{"a":1}"#).unwrap();
        let yaml = decode_object("application/yaml", b"a: 1\n").unwrap();
        assert_eq!(json, yaml);
        let err = decode_object("application/json", b"{").unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message
                .starts_with("couldn't get version/kind; json parse error")
        );
        let err = decode_object(PROTOBUF, b"{}").unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message
                .starts_with("provided data does not appear to be a protobuf")
        );
        let configmap =
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}});
        let body = protobuf::encode(&configmap).unwrap();
        assert_eq!(decode_object(PROTOBUF, &body).unwrap(), configmap);
        assert_eq!(
            decode_object("application/cbor", b"").unwrap_err().code,
            415
        );
        assert_eq!(
            decode_object("application/json", b"[1]").unwrap_err().code,
            400
        );
    }

    #[test]
    fn warnings_are_quoted_as_upstream() {
        assert_eq!(
            warning_header(r#"unknown field "spec.foo""#),
            r#"299 - "unknown field \"spec.foo\"""#
        );
    }
}
