//! Protobuf message bytes to the JSON form, by the [`table`](super::table).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::wire::{self, Reader};
use super::{Error, Field, Label, Message, Type, envelope, time};

/// How deep objects may nest through embedded objects (`RawExtension`s holding protobuf).
const MAX_DEPTH: usize = 32;

/// Decodes the bytes of one `message` into a JSON object; `depth` counts the embedded
/// objects already entered. Unknown fields are skipped, as upstream's decoder does.
pub fn message(message: &'static Message, bytes: &[u8], depth: usize) -> Result<Value, Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new("protobuf: objects nested too deeply"));
    }
    let mut object = Map::new();
    let mut reader = Reader::new(bytes);
    while let Some((tag, value)) = reader.field()? {
        let Some(field) = super::field(message, tag) else {
            continue;
        };
        match field.label {
            Label::Inline => {
                if let Some(Value::Object(inner)) = singular(field.ty, value, true, depth)? {
                    object.extend(inner);
                }
            }
            Label::Optional | Label::OmitZero => match singular(field.ty, value, false, depth)? {
                Some(v) if !(field.label == Label::OmitZero && is_zero(&v)) => {
                    object.insert(field.json.to_owned(), v);
                }
                _ => {
                    object.remove(field.json);
                }
            },
            Label::Repeated => {
                let list = object
                    .entry(field.json)
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(list) = list else {
                    return Err(mismatch(field));
                };
                match (field.ty, value) {
                    (Type::Bool | Type::Int32 | Type::Int64, wire::Value::Bytes(packed)) => {
                        let mut packed = Reader::new(packed);
                        while !packed.is_empty() {
                            let v = wire::Value::Varint(packed.varint()?);
                            list.extend(singular(field.ty, v, true, depth)?);
                        }
                    }
                    _ => list.extend(singular(field.ty, value, true, depth)?),
                }
            }
            Label::Map => {
                let wire::Value::Bytes(entry) = value else {
                    return Err(mismatch(field));
                };
                let (key, value) = map_entry(field, entry, depth)?;
                let map = object
                    .entry(field.json)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
        }
    }
    Ok(Value::Object(object))
}

/// One `{1: key, 2: value}` entry of a map field; a missing value is the type's empty value.
fn map_entry(field: &Field, entry: &[u8], depth: usize) -> Result<(String, Value), Error> {
    let mut key = String::new();
    let mut value = None;
    let mut reader = Reader::new(entry);
    while let Some((tag, v)) = reader.field()? {
        match (tag, v) {
            (1, wire::Value::Bytes(bytes)) => key = String::from_utf8_lossy(bytes).into_owned(),
            (2, v) => value = singular(field.ty, v, true, depth)?,
            _ => {}
        }
    }
    let value = match value {
        Some(value) => value,
        None => singular(field.ty, wire::Value::Bytes(&[]), true, depth)?.unwrap_or(Value::Null),
    };
    Ok((key, value))
}

/// One value of type `ty`. `keep_empty` (list elements, map values) keeps empty strings
/// and bytes and turns a zero time into `null`; otherwise they are `None` (dropped).
fn singular(
    ty: Type,
    value: wire::Value<'_>,
    keep_empty: bool,
    depth: usize,
) -> Result<Option<Value>, Error> {
    let value = match (ty, value) {
        (Type::Bool, wire::Value::Varint(v)) => Value::Bool(v != 0),
        (Type::Int32, wire::Value::Varint(v)) => Value::from(v as i32),
        (Type::Int64, wire::Value::Varint(v)) => Value::from(v as i64),
        (Type::String, wire::Value::Bytes(bytes)) => {
            if bytes.is_empty() && !keep_empty {
                return Ok(None);
            }
            Value::String(String::from_utf8_lossy(bytes).into_owned())
        }
        (Type::Bytes, wire::Value::Bytes(bytes)) => {
            if bytes.is_empty() && !keep_empty {
                return Ok(None);
            }
            Value::String(STANDARD.encode(bytes))
        }
        (Type::Message(name), wire::Value::Bytes(bytes)) => {
            let inner = super::message(name)
                .ok_or_else(|| Error::new(format!("protobuf: no message {name}")))?;
            message(inner, bytes, depth)?
        }
        (Type::Time | Type::MicroTime, wire::Value::Bytes(bytes)) => {
            if bytes.is_empty() {
                return Ok(keep_empty.then_some(Value::Null));
            }
            let (seconds, nanos) = timestamp(bytes)?;
            Value::String(time::format(seconds, nanos, ty == Type::MicroTime)?)
        }
        (Type::Quantity, wire::Value::Bytes(bytes)) => {
            let text = string_field(bytes, 1)?.unwrap_or_default();
            Value::String(if text.is_empty() { "0".into() } else { text })
        }
        (Type::IntOrString, wire::Value::Bytes(bytes)) => int_or_string(bytes)?,
        (Type::Strings, wire::Value::Bytes(bytes)) => {
            let mut items = Vec::new();
            let mut reader = Reader::new(bytes);
            while let Some((tag, value)) = reader.field()? {
                if let (1, wire::Value::Bytes(b)) = (tag, value) {
                    items.push(Value::String(String::from_utf8_lossy(b).into_owned()));
                }
            }
            Value::Array(items)
        }
        (Type::RawExtension | Type::FieldsV1, wire::Value::Bytes(bytes)) => {
            match bytes_field(bytes, 1)? {
                Some(raw) if !raw.is_empty() => embedded(raw, depth)?,
                _ => return Ok(keep_empty.then_some(Value::Null)),
            }
        }
        (ty, _) => {
            return Err(Error::new(format!(
                "protobuf: wrong wire type for a value of type {ty:?}"
            )));
        }
    };
    Ok(Some(value))
}

/// The seconds (1) and nanos (2) of a meta/v1 `Timestamp`.
fn timestamp(bytes: &[u8]) -> Result<(i64, i32), Error> {
    let (mut seconds, mut nanos) = (0, 0);
    let mut reader = Reader::new(bytes);
    while let Some((tag, value)) = reader.field()? {
        match (tag, value) {
            (1, wire::Value::Varint(v)) => seconds = v as i64,
            (2, wire::Value::Varint(v)) => nanos = v as i32,
            _ => {}
        }
    }
    Ok((seconds, nanos))
}

/// util/intstr `IntOrString`: `{1: type (0 int, 1 string), 2: intVal, 3: strVal}`.
fn int_or_string(bytes: &[u8]) -> Result<Value, Error> {
    let (mut is_string, mut int, mut string) = (false, 0, String::new());
    let mut reader = Reader::new(bytes);
    while let Some((tag, value)) = reader.field()? {
        match (tag, value) {
            (1, wire::Value::Varint(v)) => is_string = v == 1,
            (2, wire::Value::Varint(v)) => int = v as i32,
            (3, wire::Value::Bytes(b)) => string = String::from_utf8_lossy(b).into_owned(),
            _ => {}
        }
    }
    Ok(if is_string {
        Value::String(string)
    } else {
        Value::from(int)
    })
}

/// The embedded object of a `RawExtension` or `FieldsV1`: JSON, or an encoded protobuf
/// object (with the magic prefix) as in watch events.
fn embedded(raw: &[u8], depth: usize) -> Result<Value, Error> {
    if raw.starts_with(&super::MAGIC) {
        return envelope::decode_at(raw, depth + 1);
    }
    serde_json::from_slice(raw)
        .map_err(|e| Error::new(format!("protobuf: embedded object is not JSON: {e}")))
}

/// The last length-delimited field `tag` of a message.
pub fn bytes_field(bytes: &[u8], tag: u32) -> Result<Option<&[u8]>, Error> {
    let mut found = None;
    let mut reader = Reader::new(bytes);
    while let Some((t, value)) = reader.field()? {
        if let (true, wire::Value::Bytes(b)) = (t == tag, value) {
            found = Some(b);
        }
    }
    Ok(found)
}

/// The last string field `tag` of a message.
pub fn string_field(bytes: &[u8], tag: u32) -> Result<Option<String>, Error> {
    Ok(bytes_field(bytes, tag)?.map(|b| String::from_utf8_lossy(b).into_owned()))
}

/// `0` or `false`.
fn is_zero(value: &Value) -> bool {
    value == &Value::Bool(false) || value.as_i64() == Some(0)
}

fn mismatch(field: &Field) -> Error {
    Error::new(format!(
        "protobuf: wrong wire type for field {:?} (tag {})",
        field.json, field.tag
    ))
}
