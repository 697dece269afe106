//! The JSON form to protobuf message bytes, by the [`table`](super::table). Fields are
//! written in tag order, lists unpacked, as upstream's generated marshallers do; JSON
//! fields the message does not have, and `null`s, are left out.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::wire::{put_bytes, put_int};
use super::{Error, Label, Message, Type, time};

/// Appends the fields of `object`, an object of `message`, to `out`.
pub fn message(
    message: &Message,
    object: &Map<String, Value>,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    for field in message.fields {
        if field.label == Label::Inline {
            singular(field.tag, field.ty, &Value::Object(object.clone()), out)?;
            continue;
        }
        let Some(value) = object.get(field.json).filter(|v| !v.is_null()) else {
            continue;
        };
        let context = |e: Error| Error::new(format!("{}: {e}", field.json));
        match field.label {
            Label::Inline | Label::Optional | Label::OmitZero => {
                singular(field.tag, field.ty, value, out).map_err(context)?
            }
            Label::Repeated => {
                let Value::Array(items) = value else {
                    return Err(context(Error::new("expected a list")));
                };
                for item in items {
                    singular(field.tag, field.ty, item, out).map_err(context)?;
                }
            }
            Label::Map => {
                let Value::Object(map) = value else {
                    return Err(context(Error::new("expected an object")));
                };
                for (key, value) in map {
                    let mut entry = Vec::new();
                    put_bytes(&mut entry, 1, key.as_bytes());
                    if !value.is_null() {
                        singular(2, field.ty, value, &mut entry).map_err(context)?;
                    }
                    put_bytes(out, field.tag, &entry);
                }
            }
        }
    }
    Ok(())
}

/// Appends one value of `ty` as field `tag`; a `null` list element or map value is the
/// type's empty value.
fn singular(tag: u32, ty: Type, value: &Value, out: &mut Vec<u8>) -> Result<(), Error> {
    match (ty, value) {
        (Type::Bool, Value::Bool(b)) => put_int(out, tag, i64::from(*b)),
        (Type::Int32 | Type::Int64, Value::Number(n)) => {
            let n = n
                .as_i64()
                .ok_or_else(|| Error::new(format!("expected an integer, got {n}")))?;
            if ty == Type::Int32 && i32::try_from(n).is_err() {
                return Err(Error::new(format!("{n} overflows an int32")));
            }
            put_int(out, tag, n);
        }
        (Type::String, Value::String(s)) => put_bytes(out, tag, s.as_bytes()),
        (Type::Bytes, Value::String(s)) => {
            let bytes = STANDARD
                .decode(s)
                .map_err(|e| Error::new(format!("illegal base64 data: {e}")))?;
            put_bytes(out, tag, &bytes);
        }
        (Type::Message(name), Value::Object(object)) => {
            let inner = super::message(name)
                .ok_or_else(|| Error::new(format!("protobuf: no message {name}")))?;
            let mut bytes = Vec::new();
            message(inner, object, &mut bytes)?;
            put_bytes(out, tag, &bytes);
        }
        (Type::Time | Type::MicroTime, Value::String(s)) => {
            let (seconds, nanos) = time::parse(s)?;
            let nanos = if ty == Type::Time { 0 } else { nanos };
            let mut bytes = Vec::new();
            put_int(&mut bytes, 1, seconds);
            put_int(&mut bytes, 2, i64::from(nanos));
            put_bytes(out, tag, &bytes);
        }
        (Type::Quantity, Value::String(_) | Value::Number(_)) => {
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let mut bytes = Vec::new();
            put_bytes(&mut bytes, 1, text.as_bytes());
            put_bytes(out, tag, &bytes);
        }
        (Type::IntOrString, Value::Number(_) | Value::String(_)) => {
            let mut bytes = Vec::new();
            match value {
                Value::String(s) => {
                    put_int(&mut bytes, 1, 1);
                    put_int(&mut bytes, 2, 0);
                    put_bytes(&mut bytes, 3, s.as_bytes());
                }
                other => {
                    let n = other
                        .as_i64()
                        .and_then(|n| i32::try_from(n).ok())
                        .ok_or_else(|| Error::new(format!("{other} is not an int32")))?;
                    put_int(&mut bytes, 1, 0);
                    put_int(&mut bytes, 2, i64::from(n));
                    put_bytes(&mut bytes, 3, b"");
                }
            }
            put_bytes(out, tag, &bytes);
        }
        (Type::Strings, Value::Array(items)) => {
            let mut bytes = Vec::new();
            for item in items {
                let item = item
                    .as_str()
                    .ok_or_else(|| Error::new(format!("expected a string, got {item}")))?;
                put_bytes(&mut bytes, 1, item.as_bytes());
            }
            put_bytes(out, tag, &bytes);
        }
        (Type::RawExtension | Type::FieldsV1, value) => {
            let raw = serde_json::to_vec(value).map_err(|e| Error::new(e.to_string()))?;
            let mut bytes = Vec::new();
            put_bytes(&mut bytes, 1, &raw);
            put_bytes(out, tag, &bytes);
        }
        (Type::Time | Type::MicroTime, Value::Null) => put_bytes(out, tag, b""),
        (ty, value) => {
            return Err(Error::new(format!(
                "cannot encode {value} as a protobuf {ty:?}"
            )));
        }
    }
    Ok(())
}
