//! LIST (upstream `handlers.ListResource` over the store's GetList): selectors,
//! pagination with `limit` / `continue` (410 when the token's revision is compacted),
//! `resourceVersion` / `resourceVersionMatch`, and `<Kind>List`, Table or
//! PartialObjectMetadataList responses. A plain JSON `<Kind>List` is written from the
//! stored bytes by [`super::stored_list`]; the other forms decode every object.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::continue_token::Continue;
use super::negotiation::{Output, Shape};
use super::params::Params;
use super::predicate::Predicate;
use super::request::Call;
use super::store::{Store, storage_error};
use super::stored_list;
use super::table;
use crate::error::ApiError;
use crate::registry::ApiResource;
use crate::storage::{KeyValue, Revision, StorageError};

/// Upstream's message for a continue token whose revision was compacted (the 410 carries a
/// token that continues at the latest revision).
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// One page of a list: the kind's objects, or the items a [`Select`] makes.
#[derive(Debug, Clone)]
pub struct Page<T = Value> {
    pub items: Vec<T>,
    /// The revision the list was read at (the list's resourceVersion).
    pub revision: Revision,
    /// Where the next page starts, when more objects remain.
    pub next: Option<Continue>,
    /// Objects after this page (only without selectors, as upstream).
    pub remaining: Option<i64>,
}

/// Parses a resourceVersion. Errors: 400.
pub fn parse_revision(text: &str) -> Result<Revision, ApiError> {
    text.parse::<Revision>()
        .ok()
        .filter(|rv| *rv >= 0)
        .ok_or_else(|| ApiError::bad_request(format!("invalid resource version: {text:?}")))
}

/// The revision to read at (`None`: the latest) and the key to start after, from the
/// `continue`, `resourceVersion` and `resourceVersionMatch` parameters.
fn start(params: &Params, prefix: &str) -> Result<(Option<Revision>, Option<String>), ApiError> {
    if let Some(token) = &params.continue_token {
        if params
            .resource_version
            .as_deref()
            .is_some_and(|rv| rv != "0")
        {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let next = Continue::decode(token, prefix)?;
        let revision = (next.revision != super::continue_token::LATEST).then_some(next.revision);
        return Ok((revision, Some(next.last_key)));
    }
    match (
        params.resource_version.as_deref(),
        params.resource_version_match.as_deref(),
    ) {
        (None, Some(_)) => Err(ApiError::bad_request(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        (_, Some(other)) if other != "Exact" && other != "NotOlderThan" => {
            Err(ApiError::bad_request(format!(
                "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
            )))
        }
        (Some(rv), Some("Exact")) => Ok((Some(parse_revision(rv)?), None)),
        (Some(rv), _) => {
            parse_revision(rv)?;
            Ok((None, None))
        }
        (None, None) => Ok((None, None)),
    }
}

/// How a list makes its items of the values of one storage page.
pub(super) trait Select {
    type Item;

    /// Each value's key, with its item when it matches `predicate` (`None` when not), in
    /// order.
    async fn select(
        &self,
        store: &Store<'_>,
        kvs: Vec<KeyValue>,
        predicate: &Predicate,
    ) -> Result<Vec<(String, Option<Self::Item>)>, ApiError>;
}

/// Items as the kind's objects, decoded (and converted) from storage.
struct Decoded;

impl Select for Decoded {
    type Item = Value;

    async fn select(
        &self,
        store: &Store<'_>,
        kvs: Vec<KeyValue>,
        predicate: &Predicate,
    ) -> Result<Vec<(String, Option<Value>)>, ApiError> {
        let objects = store.decode_all(&kvs).await?;
        let mut items = Vec::with_capacity(kvs.len());
        for (kv, object) in kvs.into_iter().zip(objects) {
            let matches = predicate.matches(store.kind.as_ref(), &object)?;
            items.push((kv.key, matches.then_some(object)));
        }
        Ok(items)
    }
}

/// Reads one page of `store`'s objects in `namespace` (all namespaces when `None`) that
/// match `predicate`, as `params` ask.
pub async fn page(
    store: &Store<'_>,
    namespace: Option<&str>,
    params: &Params,
    predicate: &Predicate,
) -> Result<Page, ApiError> {
    collect(store, namespace, params, predicate, &Decoded).await
}

/// [`page`] with the items `select` makes.
pub(super) async fn collect<S: Select>(
    store: &Store<'_>,
    namespace: Option<&str>,
    params: &Params,
    predicate: &Predicate,
    select: &S,
) -> Result<Page<S::Item>, ApiError> {
    let prefix = store.prefix(namespace);
    let (mut revision, mut after) = start(params, &prefix)?;
    // Where a client resumes when the continue token's revision is gone.
    let resume = params
        .continue_token
        .is_some()
        .then(|| after.clone())
        .flatten();
    let limit = params.limit;
    let mut items = Vec::new();
    loop {
        let page = store
            .state
            .storage
            .list(&prefix, after.as_deref(), limit, revision)
            .await
            .map_err(|e| match (e, &resume) {
                (StorageError::Compacted { .. }, Some(key)) => {
                    let token = Continue {
                        revision: super::continue_token::LATEST,
                        last_key: key.clone(),
                    };
                    ApiError::gone(INCONSISTENT_CONTINUE).with_continue(token.encode(&prefix))
                }
                (other, _) => storage_error(other, &store.resource(), ""),
            })?;
        revision = Some(page.revision);
        let count = page.items.len();
        let selected = select.select(store, page.items, predicate).await?;
        for (i, (key, item)) in selected.into_iter().enumerate() {
            if let Some(item) = item {
                items.push(item);
            }
            if limit > 0 && items.len() == limit {
                let more = i + 1 < count || page.remaining > 0;
                let next = more.then(|| Continue {
                    revision: page.revision,
                    last_key: key.clone(),
                });
                let remaining = (more && predicate.is_everything())
                    .then(|| page.remaining + (count - i - 1) as i64);
                return Ok(Page {
                    items,
                    revision: page.revision,
                    next,
                    remaining,
                });
            }
            after = Some(key);
        }
        if limit == 0 || page.remaining == 0 || count == 0 {
            return Ok(Page {
                items,
                revision: page.revision,
                next: None,
                remaining: None,
            });
        }
    }
}

/// A list's `metadata`: its resourceVersion, and the continue token (for keys under
/// `prefix`) and remainingItemCount when more objects remain.
pub fn list_metadata<T>(page: &Page<T>, prefix: &str) -> Value {
    let mut metadata = json!({ "resourceVersion": page.revision.to_string() });
    if let Some(next) = &page.next {
        metadata["continue"] = next.encode(prefix).into();
    }
    if let Some(remaining) = page.remaining {
        metadata["remainingItemCount"] = remaining.into();
    }
    metadata
}

/// `{"kind": "<Kind>List", "apiVersion": ..., "metadata": ..., "items": [...]}`.
pub fn list_object(info: &ApiResource, items: Vec<Value>, metadata: Value) -> Value {
    json!({
        "kind": format!("{}List", info.kind),
        "apiVersion": info.api_version(),
        "metadata": metadata,
        "items": items,
    })
}

/// Serves `GET .../<plural>` without `watch`.
pub async fn serve(call: &Call) -> Result<Response, ApiError> {
    let predicate = Predicate::new(
        call.kind.as_ref(),
        call.params.label_selector.as_deref(),
        call.params.field_selector.as_deref(),
    )?;
    let store = call.store();
    // A plain JSON list is written from the stored bytes; the other forms decode.
    if call.output == Output::JSON {
        return stored_list::serve(call, &store, &predicate).await;
    }
    let page = page(&store, call.namespace(), &call.params, &predicate).await?;
    let metadata = list_metadata(&page, &store.prefix(call.namespace()));
    let body = match call.output.shape {
        Shape::Object => list_object(call.kind.info(), page.items, metadata),
        Shape::Table => table::table(
            call.kind.as_ref(),
            &page.items,
            metadata,
            call.params.include_object,
        )?,
        Shape::PartialObjectMetadata => table::partial_object_metadata_list(&page.items, metadata),
    };
    Ok(call.respond(StatusCode::OK, &body, &[]))
}
