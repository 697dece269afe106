//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) to and from the JSON form
//! (`serde_json::Value`) the rest of Skiff works on, table-driven and without I/O.
//!
//! An encoded object is the 4 magic bytes `k8s\0` followed by a `runtime.Unknown` message
//! `{1: TypeMeta{1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding, 4: contentType}`
//! whose `raw` is the kind's own message (upstream
//! `k8s.io/apimachinery/pkg/runtime/serializer/protobuf`). The messages' field numbers and
//! shapes are in [`table`], generated from upstream's `generated.proto` files (through
//! the `k8s-pb` crate) by `crates/api/tests/protobuf_table.rs`.
//!
//! Upstream's hand-written types are transcoded as their JSON forms: meta/v1 `Time`
//! (`{1: seconds, 2: nanos}`, RFC 3339 with second precision), `MicroTime` (six fractional
//! digits), api/resource `Quantity` (`{1: string}`), util/intstr `IntOrString`
//! (`{1: type, 2: intVal, 3: strVal}`, a number or a string), runtime `RawExtension` and
//! meta/v1 `FieldsV1` (`{1: raw}`, the embedded JSON), `ExtraValue` (`{1: items}`, a
//! list of strings), and `bytes` fields (base64 strings).
//!
//! Decoding gives what upstream's Go decoding followed by its JSON encoding gives: Go
//! marshals non-pointer fields even when empty, so an empty singular string or bytes field
//! and a zero `Time` are dropped (like `omitempty`), and so are zero numbers and bools of
//! the non-pointer `omitempty` fields ([`Label::OmitZero`]); other numbers and bools (Go
//! pointers, required fields) and empty messages are kept. The few pointer-to-string fields whose empty value is meaningful therefore lose
//! it when sent in protobuf (PersistentVolumeClaim `spec.storageClassName: ""`, Pod
//! `spec.runtimeClassName`, ...): they read as absent.

mod decode;
mod encode;
mod envelope;
#[rustfmt::skip]
mod table;
mod time;
mod wire;

pub use envelope::{MAGIC, decode, decode_watch_event, encode, encode_watch_event};

use std::fmt;

/// A malformed or unsupported protobuf message; the text is the cause, in the words of
/// upstream's decoder where it has one (`unexpected EOF`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl Error {
    fn new(message: impl Into<String>) -> Self {
        Error(message.into())
    }
}

/// One message: its OpenAPI definition name (`io.k8s.api.core.v1.Pod`) and its fields,
/// sorted by tag.
#[derive(Debug)]
pub struct Message {
    pub name: &'static str,
    pub fields: &'static [Field],
}

/// One field of a [`Message`]: its tag, its JSON name, whether it is repeated or a map
/// (string keys), and the type of its value.
#[derive(Debug)]
pub struct Field {
    pub tag: u32,
    pub json: &'static str,
    pub label: Label,
    pub ty: Type,
}

impl Field {
    /// A field (used by the generated table).
    pub const fn new(tag: u32, json: &'static str, label: Label, ty: Type) -> Self {
        Field {
            tag,
            json,
            label,
            ty,
        }
    }
}

/// Cardinality of a [`Field`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// At most one value (proto2 `optional`).
    Optional,
    /// At most one number or bool, a zero (`0`, `false`) decoded as absent: a Go
    /// non-pointer `omitempty` field, which Go clients always send and upstream's JSON
    /// leaves out when zero (Container `stdin`, ContainerPort `hostPort`, ...).
    OmitZero,
    /// A list (proto2 `repeated`, unpacked; packed input is accepted too).
    Repeated,
    /// A `map<string, ty>`: repeated entries `{1: key, 2: value}`, a JSON object.
    Map,
    /// A Go struct embedded inline (`json:",inline"`, Volume's VolumeSource, Probe's
    /// ProbeHandler): a message field whose fields are the enclosing JSON object's.
    Inline,
}

/// The type of a [`Field`]'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    String,
    /// Base64 in JSON.
    Bytes,
    Bool,
    Int32,
    Int64,
    /// Another message of the table, by name.
    Message(&'static str),
    /// meta/v1 `Time`.
    Time,
    /// meta/v1 `MicroTime`.
    MicroTime,
    /// api/resource `Quantity`.
    Quantity,
    /// util/intstr `IntOrString`.
    IntOrString,
    /// runtime `RawExtension`.
    RawExtension,
    /// meta/v1 `FieldsV1`.
    FieldsV1,
    /// A `{1: repeated string}` message whose JSON form is the list (certificates/v1
    /// `ExtraValue`).
    Strings,
}

/// The message named `name` (an OpenAPI definition name), if the table has it.
pub fn message(name: &str) -> Option<&'static Message> {
    table::MESSAGES
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .map(|i| &table::MESSAGES[i])
}

/// The field of `message` with `tag`.
fn field(message: &'static Message, tag: u32) -> Option<&'static Field> {
    message
        .fields
        .binary_search_by(|f| f.tag.cmp(&tag))
        .ok()
        .map(|i| &message.fields[i])
}
