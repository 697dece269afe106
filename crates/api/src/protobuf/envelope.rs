//! The `k8s\0` + `runtime.Unknown` envelope of an encoded object, and the
//! `meta/v1 WatchEvent` of a protobuf watch stream.

use serde_json::{Map, Value};

use super::decode::{self, bytes_field, string_field};
use super::wire::{self, Reader, put_bytes};
use super::{Error, Message};

/// The 4 bytes every encoded object starts with.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// Decodes an encoded object (magic, `runtime.Unknown`) into its JSON form, `apiVersion`
/// and `kind` first. Errors: a wrong magic, a malformed or truncated message, a kind
/// without a message, as upstream's words where it has them.
pub fn decode(body: &[u8]) -> Result<Value, Error> {
    decode_at(body, 0)
}

/// [`decode`] of an object embedded `depth` levels deep.
pub(super) fn decode_at(body: &[u8], depth: usize) -> Result<Value, Error> {
    let unknown = body.strip_prefix(&MAGIC).ok_or_else(|| {
        Error::new(format!(
            "provided data does not appear to be a protobuf message, expected prefix {:?}",
            MAGIC
        ))
    })?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut reader = Reader::new(unknown);
    while let Some((tag, value)) = reader.field()? {
        match (tag, value) {
            (1, wire::Value::Bytes(type_meta)) => {
                api_version = string_field(type_meta, 1)?.unwrap_or_default();
                kind = string_field(type_meta, 2)?.unwrap_or_default();
            }
            (2, wire::Value::Bytes(bytes)) => raw = bytes,
            (3, wire::Value::Bytes(encoding)) if !encoding.is_empty() => {
                return Err(Error::new(format!(
                    "unsupported content encoding {:?}",
                    String::from_utf8_lossy(encoding)
                )));
            }
            _ => {}
        }
    }
    let message = message_of(&api_version, &kind)?;
    let Value::Object(fields) = decode::message(message, raw, depth)? else {
        return Err(Error::new("protobuf: message did not decode to an object"));
    };
    let mut object = Map::new();
    object.insert("apiVersion".into(), api_version.into());
    object.insert("kind".into(), kind.into());
    object.extend(fields);
    Ok(Value::Object(object))
}

/// Encodes an object (with `apiVersion` and `kind`) as magic + `runtime.Unknown`.
/// Errors: a kind without a message, a value of the wrong JSON type.
pub fn encode(object: &Value) -> Result<Vec<u8>, Error> {
    let Value::Object(map) = object else {
        return Err(Error::new("protobuf: only objects can be encoded"));
    };
    let api_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or("");
    let message = message_of(api_version, kind)?;
    let mut raw = Vec::new();
    super::encode::message(message, map, &mut raw)?;
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, &raw);
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    Ok(out)
}

/// One event of a protobuf watch stream: the bare `WatchEvent` message (no magic, no
/// envelope: upstream's raw stream serializer) `{1: type, 2: {1: raw}}` whose raw is the
/// encoded object ([`encode`]). The stream frames each with a 4-byte big-endian length.
pub fn encode_watch_event(event_type: &str, object: &Value) -> Result<Vec<u8>, Error> {
    let mut extension = Vec::new();
    put_bytes(&mut extension, 1, &encode(object)?);
    let mut out = Vec::new();
    put_bytes(&mut out, 1, event_type.as_bytes());
    put_bytes(&mut out, 2, &extension);
    Ok(out)
}

/// The type and object of a bare `WatchEvent` message, as [`encode_watch_event`] writes.
pub fn decode_watch_event(bytes: &[u8]) -> Result<(String, Value), Error> {
    let event_type = string_field(bytes, 1)?.unwrap_or_default();
    let extension = bytes_field(bytes, 2)?.unwrap_or_default();
    let raw = bytes_field(extension, 1)?.unwrap_or_default();
    let object = if raw.starts_with(&MAGIC) {
        decode(raw)?
    } else {
        serde_json::from_slice(raw).map_err(|e| Error::new(e.to_string()))?
    };
    Ok((event_type, object))
}

/// The message of `kind` in `api_version`: `io.k8s.api.<group>.<version>.<kind>` (the
/// group's first label, `core` for the legacy group), else the meta/v1 kinds every group
/// version has (DeleteOptions, Status, WatchEvent, ...). Errors: upstream's
/// `no kind "X" is registered for version "v"`.
fn message_of(api_version: &str, kind: &str) -> Result<&'static Message, Error> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let package = match group.split('.').next().unwrap_or_default() {
        "" => "core",
        package => package,
    };
    let candidates = [
        format!("io.k8s.api.{package}.{version}.{kind}"),
        format!("io.k8s.apimachinery.pkg.apis.meta.{version}.{kind}"),
    ];
    candidates
        .iter()
        .find_map(|name| super::message(name))
        .filter(|_| !kind.is_empty())
        .ok_or_else(|| {
            Error::new(format!(
                "no kind {kind:?} is registered for version {api_version:?}"
            ))
        })
}
