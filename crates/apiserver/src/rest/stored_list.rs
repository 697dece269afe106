//! LIST served from the stored bytes, as upstream's watch cache serves lists from the
//! objects it keeps instead of decoding each again.
//!
//! For a kind whose stored objects are served as they are ([`Kind::serves_stored`]), a
//! JSON list body is written by splicing each stored value with its
//! `metadata.resourceVersion` (the store keeps values without it), never parsing the value
//! into a `serde_json::Value`. Selectors parse only what they read: `metadata.labels`,
//! `metadata.name` and `metadata.namespace`, or the whole object for a kind's own
//! selectable fields. The body is streamed in chunks with its length known up front.
//!
//! Values the splice cannot vouch for (keys out of the order Skiff writes them in, escaped
//! keys, no `metadata` object, invalid UTF-8, trailing bytes) and objects the kind must
//! convert (events.k8s.io Events, autoscaling/v1 HPAs, custom resources stored in another
//! version) are decoded as [`super::list::page`] decodes them, and serialized. The output
//! is the same bytes the decoded path writes. Protobuf, YAML, Table and
//! PartialObjectMetadata responses take the decoded path of [`super::list::serve`].

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use serde::Deserialize;
use serde_json::Value;

use super::list::{self, Select};
use super::predicate::Predicate;
use super::request::Call;
use super::store::Store;
use crate::error::ApiError;
use crate::registry::Kind;
use crate::storage::{KeyValue, Revision};

/// How much of the body one frame carries (at least; an item is not split).
const CHUNK_BYTES: usize = 64 * 1024;

/// Nesting deeper than this is not scanned (serde_json's recursion limit): such a value
/// goes the decoded way, which refuses it as before.
const MAX_DEPTH: usize = 128;

/// The member written into a stored value's metadata.
const RESOURCE_VERSION: &[u8] = b"resourceVersion";

/// Where a stored value's `metadata.resourceVersion` member goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Splice {
    /// Byte offset where the member is written.
    at: usize,
    /// Bytes after `at` replaced by it (a `resourceVersion` member already there).
    skip: usize,
    /// Whether a comma goes before the member (it is the metadata's last).
    comma_before: bool,
    /// Whether a comma goes after it (members follow).
    comma_after: bool,
}

/// What [`scan`] learned of a stored value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Scan<'a> {
    pub splice: Splice,
    /// The top-level `apiVersion`, when a string without escapes.
    pub api_version: Option<&'a str>,
}

/// One item of a list body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Item {
    /// A stored value written as stored, with its resourceVersion spliced in.
    Stored {
        value: Vec<u8>,
        revision: Revision,
        splice: Splice,
    },
    /// An object decoded (and converted) by the kind, serialized.
    Encoded(Vec<u8>),
}

impl Item {
    /// The item's length in the body.
    fn len(&self) -> usize {
        match self {
            Item::Stored {
                value,
                revision,
                splice,
            } => {
                // `"resourceVersion":"<n>"` and its commas.
                let member = RESOURCE_VERSION.len() + 5 + decimal_len(*revision);
                value.len() - splice.skip
                    + member
                    + usize::from(splice.comma_before)
                    + usize::from(splice.comma_after)
            }
            Item::Encoded(bytes) => bytes.len(),
        }
    }

    /// Appends the item to `out`.
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Item::Stored {
                value,
                revision,
                splice,
            } => {
                out.extend_from_slice(&value[..splice.at]);
                if splice.comma_before {
                    out.push(b',');
                }
                out.push(b'"');
                out.extend_from_slice(RESOURCE_VERSION);
                out.extend_from_slice(b"\":\"");
                out.extend_from_slice(revision.to_string().as_bytes());
                out.push(b'"');
                if splice.comma_after {
                    out.push(b',');
                }
                out.extend_from_slice(&value[splice.at + splice.skip..]);
            }
            Item::Encoded(bytes) => out.extend_from_slice(bytes),
        }
    }
}

/// The length of `n` in decimal.
fn decimal_len(n: i64) -> usize {
    let mut len = if n < 0 { 2 } else { 1 };
    let mut rest = n.unsigned_abs();
    while rest >= 10 {
        rest /= 10;
        len += 1;
    }
    len
}

/// The items of a list served from stored bytes ([`Select`] for [`list::collect`]).
pub(super) struct StoredItems;

impl Select for StoredItems {
    type Item = Item;

    async fn select(
        &self,
        store: &Store<'_>,
        kvs: Vec<KeyValue>,
        predicate: &Predicate,
    ) -> Result<Vec<(String, Option<Item>)>, ApiError> {
        let kind = store.kind.as_ref();
        let mut items = Vec::with_capacity(kvs.len());
        // Values the kind decodes: their place in `items`, and the values.
        let mut decoding = Vec::new();
        let mut undecoded = Vec::new();
        for kv in kvs {
            let splice = std::str::from_utf8(&kv.value)
                .ok()
                .and_then(|_| scan(&kv.value))
                .filter(|scan| kind.serves_stored(scan.api_version))
                .map(|scan| scan.splice);
            match splice {
                Some(splice) => {
                    let item =
                        matches_stored(kind, predicate, &kv.value)?.then_some(Item::Stored {
                            value: kv.value,
                            revision: kv.mod_revision,
                            splice,
                        });
                    items.push((kv.key, item));
                }
                None => {
                    decoding.push(items.len());
                    items.push((kv.key.clone(), None));
                    undecoded.push(kv);
                }
            }
        }
        if decoding.is_empty() {
            return Ok(items);
        }
        let objects = store.decode_all(&undecoded).await?;
        for (at, object) in decoding.into_iter().zip(objects) {
            if predicate.matches(kind, &object)? {
                let bytes = serde_json::to_vec(&object).map_err(ApiError::internal)?;
                items[at].1 = Some(Item::Encoded(bytes));
            }
        }
        Ok(items)
    }
}

/// The metadata selectors read, parsed alone.
#[derive(Deserialize)]
struct MetadataOnly {
    metadata: Option<SelectedMetadata>,
}

#[derive(Deserialize)]
struct SelectedMetadata {
    name: Option<Value>,
    namespace: Option<Value>,
    labels: Option<Value>,
}

/// Whether a stored object (served as stored) matches `predicate`: nothing is parsed
/// without selectors, only the metadata for label and metadata field selectors.
fn matches_stored(kind: &dyn Kind, predicate: &Predicate, value: &[u8]) -> Result<bool, ApiError> {
    if predicate.is_everything() {
        return Ok(true);
    }
    if predicate.needs_only_metadata()
        && let Ok(found) = serde_json::from_slice::<MetadataOnly>(value)
    {
        let metadata = found.metadata;
        fn text(field: Option<&Value>) -> &str {
            field.and_then(Value::as_str).unwrap_or_default()
        }
        let labels: BTreeMap<String, String> = metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref())
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let name = text(metadata.as_ref().and_then(|m| m.name.as_ref()));
        let namespace = text(metadata.as_ref().and_then(|m| m.namespace.as_ref()));
        return Ok(predicate.matches_metadata(&labels, name, namespace));
    }
    let object: Value = serde_json::from_slice(value).map_err(ApiError::internal)?;
    predicate.matches(kind, &object)
}

/// Serves `GET .../<plural>` as a JSON `<Kind>List` (no `as=`): the same body as
/// [`list::serve`] writes, from the stored bytes where the kind allows.
pub async fn serve(
    call: &Call,
    store: &Store<'_>,
    predicate: &Predicate,
) -> Result<Response, ApiError> {
    let page = list::collect(
        store,
        call.namespace(),
        &call.params,
        predicate,
        &StoredItems,
    )
    .await?;
    let metadata = list::list_metadata(&page, &store.prefix(call.namespace()));
    let info = call.kind.info();
    let json = |value: &Value| serde_json::to_vec(value).map_err(ApiError::internal);
    let mut head = b"{\"apiVersion\":".to_vec();
    head.extend(json(&info.api_version().into())?);
    head.extend_from_slice(b",\"items\":[");
    let mut tail = b"],\"kind\":".to_vec();
    tail.extend(json(&format!("{}List", info.kind).into())?);
    tail.extend_from_slice(b",\"metadata\":");
    tail.extend(json(&metadata)?);
    tail.push(b'}');
    let body = ListBody::new(head, page.items, tail);
    let mut response = Response::new(Body::new(body));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// A list body written as it is read, [`CHUNK_BYTES`] at a time: the head, the items
/// separated by commas, the tail. Its length is exact from the start (a
/// `Content-Length`).
struct ListBody {
    head: Option<Vec<u8>>,
    items: std::vec::IntoIter<Item>,
    /// Whether an item was written (the next one needs a comma).
    started: bool,
    tail: Option<Vec<u8>>,
    /// Bytes not yet written.
    remaining: u64,
}

impl ListBody {
    fn new(head: Vec<u8>, items: Vec<Item>, tail: Vec<u8>) -> ListBody {
        let items_len: usize = items.iter().map(Item::len).sum();
        let commas = items.len().saturating_sub(1);
        let remaining = (head.len() + items_len + commas + tail.len()) as u64;
        ListBody {
            head: Some(head),
            items: items.into_iter(),
            started: false,
            tail: Some(tail),
            remaining,
        }
    }

    /// The next chunk; empty at the end.
    fn next_chunk(&mut self) -> Vec<u8> {
        let mut chunk = self.head.take().unwrap_or_default();
        chunk.reserve(CHUNK_BYTES);
        while chunk.len() < CHUNK_BYTES {
            match self.items.next() {
                Some(item) => {
                    if self.started {
                        chunk.push(b',');
                    }
                    self.started = true;
                    item.write(&mut chunk);
                }
                None => {
                    if let Some(tail) = self.tail.take() {
                        chunk.extend(tail);
                    }
                    break;
                }
            }
        }
        chunk
    }
}

impl hyper::body::Body for ListBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let chunk = this.next_chunk();
        if chunk.is_empty() {
            return Poll::Ready(None);
        }
        this.remaining = this.remaining.saturating_sub(chunk.len() as u64);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// Finds where `metadata.resourceVersion` goes in a stored object, checking the value's
/// shape on the way: a JSON object with its members in strictly increasing key order and
/// unescaped keys (as serde_json writes a `Value`), a `metadata` object likewise, nothing
/// after the object. `None` when the value is not so (it is then decoded instead).
pub(super) fn scan(value: &[u8]) -> Option<Scan<'_>> {
    let mut cursor = Cursor {
        bytes: value,
        at: 0,
    };
    let mut splice = None;
    let mut api_version = None;
    cursor.members(|cursor, key, _| {
        match key {
            b"metadata" => splice = Some(cursor.metadata()?),
            b"apiVersion" if cursor.peek() == Some(b'"') => {
                let (start, end, escaped) = cursor.string()?;
                if !escaped {
                    api_version = std::str::from_utf8(&value[start..end]).ok();
                }
            }
            _ => cursor.value(1)?,
        }
        Some(())
    })?;
    cursor.skip_whitespace();
    if cursor.at != value.len() {
        return None;
    }
    Some(Scan {
        splice: splice?,
        api_version,
    })
}

/// A position in a JSON text.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn skip_whitespace(&mut self) {
        while matches!(self.bytes.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace.
    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes.get(self.at).copied()
    }

    /// Consumes `byte` after whitespace.
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// A string: the range of its contents, and whether it has escapes.
    fn string(&mut self) -> Option<(usize, usize, bool)> {
        self.eat(b'"')?;
        let start = self.at;
        let mut escaped = false;
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    self.at += 2;
                }
                control if control < 0x20 => return None,
                _ => self.at += 1,
            }
        }
        let end = self.at;
        self.at += 1;
        Some((start, end, escaped))
    }

    /// An object's members, `member` reading each value (after the colon; it is given the
    /// key and where the member starts); keys must be unescaped and strictly increasing.
    fn members(
        &mut self,
        mut member: impl FnMut(&mut Self, &[u8], usize) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        let bytes = self.bytes;
        let mut previous: Option<&[u8]> = None;
        loop {
            self.skip_whitespace();
            let member_start = self.at;
            let (start, end, escaped) = self.string()?;
            let key = &bytes[start..end];
            if escaped || previous.is_some_and(|p| p >= key) {
                return None;
            }
            previous = Some(key);
            self.eat(b':')?;
            member(self, key, member_start)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The metadata object, and where its resourceVersion goes: replacing the one there,
    /// before the first key after it, or last.
    fn metadata(&mut self) -> Option<Splice> {
        let mut replace = None;
        let mut before = None;
        let mut any = false;
        self.members(|cursor, key, start| {
            any = true;
            cursor.value(2)?;
            if key == RESOURCE_VERSION {
                replace = Some((start, cursor.at));
            } else if before.is_none() && key > RESOURCE_VERSION {
                before = Some(start);
            }
            Some(())
        })?;
        // The closing brace is the last byte read.
        let close = self.at - 1;
        Some(match (replace, before) {
            (Some((start, end)), _) => Splice {
                at: start,
                skip: end - start,
                comma_before: false,
                comma_after: false,
            },
            (None, Some(at)) => Splice {
                at,
                skip: 0,
                comma_before: false,
                comma_after: true,
            },
            (None, None) => Splice {
                at: close,
                skip: 0,
                comma_before: any,
                comma_after: false,
            },
        })
    }

    /// Skips one value (checking its shape, not its numbers' digits).
    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'{' => {
                self.at += 1;
                if self.peek()? == b'}' {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    self.string()?;
                    self.eat(b':')?;
                    self.value(depth + 1)?;
                    match self.peek()? {
                        b',' => self.at += 1,
                        b'}' => {
                            self.at += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.at += 1;
                if self.peek()? == b']' {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    self.value(depth + 1)?;
                    match self.peek()? {
                        b',' => self.at += 1,
                        b']' => {
                            self.at += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => {
                self.at += 1;
                while matches!(
                    self.bytes.get(self.at),
                    Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                ) {
                    self.at += 1;
                }
            }
            _ => return None,
        }
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spliced(stored: &str, revision: Revision) -> Option<String> {
        let scan = scan(stored.as_bytes())?;
        let item = Item::Stored {
            value: stored.as_bytes().to_vec(),
            revision,
            splice: scan.splice,
        };
        let mut out = Vec::new();
        item.write(&mut out);
        assert_eq!(out.len(), item.len(), "length of {stored}");
        Some(String::from_utf8(out).unwrap())
    }

    /// The decoded path's bytes: parse, set the resourceVersion, serialize.
    fn decoded(stored: &str, revision: Revision) -> String {
        let mut value: Value = serde_json::from_str(stored).unwrap();
        value["metadata"]["resourceVersion"] = revision.to_string().into();
        serde_json::to_string(&value).unwrap()
    }

    #[test]
    fn the_resource_version_is_spliced_where_a_sorted_map_puts_it() {
        for stored in [
            r#"{"apiVersion":"v1","data":{"a":"b"},"kind":"ConfigMap","metadata":{"name":"x","namespace":"d","uid":"u"}}"#,
            r#"{"metadata":{"annotations":{"resourceVersion":"no"},"name":"x"}}"#,
            r#"{"metadata":{"uid":"u"}}"#,
            r#"{"metadata":{}}"#,
            r#"{"metadata":{"name":"x","resourceVersion":"5","uid":"u"},"z":[1,-2500.0,0.5,true,null,{},[]]}"#,
            r#"{"a":"\"}\\","metadata":{"labels":{"k":"café"},"name":"é"}}"#,
        ] {
            assert_eq!(
                spliced(stored, 1234).as_deref(),
                Some(decoded(stored, 1234).as_str()),
                "{stored}"
            );
        }
        // Whitespace is kept; the member still lands in the metadata.
        let spaced = "{ \"metadata\" : { \"name\" : \"x\" } }\n";
        let out: Value = serde_json::from_str(&spliced(spaced, 7).unwrap()).unwrap();
        assert_eq!(out["metadata"]["resourceVersion"], "7");
        assert_eq!(out["metadata"]["name"], "x");
        assert_eq!(
            scan(br#"{"apiVersion":"stable.example.com/v1","metadata":{}}"#)
                .unwrap()
                .api_version,
            Some("stable.example.com/v1")
        );
    }

    #[test]
    fn values_the_splice_cannot_vouch_for_are_refused() {
        for stored in [
            "",
            "[]",
            r#"{"kind":"ConfigMap"}"#,
            r#"{"metadata":[]}"#,
            r#"{"metadata":{"name":"x"}} {}"#,
            r#"{"metadata":{"name":"x"},"data":{}}"#,
            r#"{"metadata":{"uid":"u","name":"x"}}"#,
            r#"{"metadata":{"name":"x","name":"y"}}"#,
            r#"{"meta\u0064ata":{},"metadata":{}}"#,
            r#"{"metadata":{"name":"x}"#,
            r#"{"metadata":{"name":tru}}"#,
            "{\"metadata\":{\"name\":\"a\nb\"}}",
        ] {
            assert_eq!(scan(stored.as_bytes()), None, "{stored}");
        }
        let deep = format!(
            r#"{{"metadata":{{}},"x":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(scan(deep.as_bytes()), None);
    }

    /// A built-in kind that says its stored objects are served as stored must decode them
    /// unchanged; the kinds stored in another form say they are not.
    #[tokio::test]
    async fn built_in_kinds_that_serve_stored_bytes_do_not_convert() {
        let registry = crate::registry::Registry::builtin();
        let mut converting = Vec::new();
        for kind in registry.kinds() {
            let info = kind.info();
            let api_version = info.api_version();
            if !kind.serves_stored(Some(&api_version)) {
                converting.push(format!("{api_version}/{}", info.kind));
                continue;
            }
            let stored = serde_json::json!({
                "apiVersion": api_version,
                "kind": info.kind,
                "metadata": {"name": "x", "resourceVersion": "1"},
            });
            let decoded = kind.decode_from_storage(stored.clone()).await.unwrap();
            assert_eq!(decoded, stored, "{api_version} {}", info.kind);
        }
        for expected in [
            "events.k8s.io/v1/Event",
            "autoscaling/v1/HorizontalPodAutoscaler",
        ] {
            assert!(converting.iter().any(|k| k == expected), "{converting:?}");
        }
    }

    #[test]
    fn decimal_lengths() {
        for n in [0, 9, 10, 99, 100, 123_456_789, i64::MAX, -1, -10, i64::MIN] {
            assert_eq!(decimal_len(n), n.to_string().len(), "{n}");
        }
    }

    #[test]
    fn the_body_is_chunked_with_an_exact_length() {
        let stored = br#"{"metadata":{"name":"x"}}"#.to_vec();
        let splice = scan(&stored).unwrap().splice;
        let items: Vec<Item> = (0..5000)
            .map(|i| Item::Stored {
                value: stored.clone(),
                revision: i,
                splice,
            })
            .chain([Item::Encoded(b"{}".to_vec())])
            .collect();
        let mut body = ListBody::new(b"[".to_vec(), items, b"]".to_vec());
        let expected = body.remaining;
        let mut whole = Vec::new();
        let mut chunks = 0;
        loop {
            let chunk = body.next_chunk();
            if chunk.is_empty() {
                break;
            }
            chunks += 1;
            whole.extend(chunk);
        }
        assert!(chunks > 1);
        assert_eq!(whole.len() as u64, expected);
        let list: Vec<Value> = serde_json::from_slice(&whole).unwrap();
        assert_eq!(list.len(), 5001);
        assert_eq!(list[4999]["metadata"]["resourceVersion"], "4999");
        assert_eq!(list[5000], serde_json::json!({}));
    }
}
