//! How a definition's objects change version (upstream apiextensions-apiserver
//! `pkg/apiserver/conversion`): the `None` strategy only rewrites `apiVersion`; the
//! `Webhook` strategy sends the objects in a `ConversionReview` (apiextensions.k8s.io/v1
//! when `conversionReviewVersions` allows it, else v1beta1) to the definition's webhook
//! and checks its answer as upstream's `webhookConverter` does: the request's uid,
//! `result.status: Success`, as many objects as sent, each in the desired version with
//! the same kind, name, namespace and uid. Of the converted objects' metadata only labels
//! and annotations are kept (validated when changed); the rest is the original's.
//!
//! A failure is upstream's error: 500 with `conversion webhook for
//! stable.example.com/v1, Kind=CronTab failed: Post "https://...": ...` (upstream answers
//! these errors through `ErrorToAPIStatus`, which gives a 500 without a reason).

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use skiff_api::field::{Path, aggregate};

use super::webhook::WebhookClient;
use crate::error::ApiError;
use crate::storage::Storage;

/// The ConversionReview versions this server speaks, in no particular order.
const V1: &str = "v1";
const V1BETA1: &str = "v1beta1";

/// A definition's converter, shared by its versions' kinds.
#[derive(Debug)]
pub(crate) enum Converter {
    /// Only `apiVersion` changes.
    None,
    /// A conversion webhook converts.
    Webhook(WebhookConverter),
}

impl Converter {
    /// The converter of `crd.spec.conversion`; a webhook's Services are read from
    /// `storage`.
    pub(crate) fn new(crd: &CustomResourceDefinition, storage: Arc<dyn Storage>) -> Self {
        let Some(conversion) = crd.spec.conversion.as_ref() else {
            return Converter::None;
        };
        if conversion.strategy != "Webhook" {
            return Converter::None;
        }
        let webhook = conversion.webhook.clone().unwrap_or_default();
        let config = webhook.client_config.unwrap_or_default();
        let review_version = webhook
            .conversion_review_versions
            .iter()
            .find_map(|v| [V1, V1BETA1].into_iter().find(|known| known == v));
        Converter::Webhook(WebhookConverter {
            client: WebhookClient::new(&config, storage),
            review_version,
        })
    }
}

/// Upstream's `webhookConverter`.
#[derive(Debug)]
pub(crate) struct WebhookConverter {
    client: WebhookClient,
    /// The first of `conversionReviewVersions` this server speaks, if any.
    review_version: Option<&'static str>,
}

/// A ConversionReview as sent.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    kind: &'static str,
    api_version: String,
    request: RequestOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestOut<'a> {
    uid: &'a str,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: &'a str,
    objects: &'a [Value],
}

/// A ConversionReview as answered.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewIn {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    response: Option<ResponseIn>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponseIn {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    converted_objects: Option<Vec<Value>>,
    #[serde(default)]
    result: ResultIn,
}

#[derive(Deserialize, Default)]
struct ResultIn {
    #[serde(default)]
    status: String,
    #[serde(default)]
    message: String,
}

/// A conversion failure: 500, `Status.reason` unset, as upstream's `ErrorToAPIStatus`
/// answers an error that is not an API status.
fn failure(message: String) -> ApiError {
    ApiError::new(500, "", message)
}

/// Go's `GroupVersionKind.String()` of an object: `stable.example.com/v1, Kind=CronTab`.
pub(crate) fn gvk(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

fn str_at<'v>(object: &'v Value, pointer: &str) -> &'v str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Go's type name of a JSON value, as upstream's `%T` of a decoded one prints it.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A random (version 4) UUID, the request's uid.
fn new_uid() -> String {
    skiff_api::uuid::format_v4(rand::random())
}

impl WebhookConverter {
    /// Converts `objects` (none of them in `desired` already) to `desired` with one call.
    /// `subject` is what upstream's errors name: the object's group, version and kind, or
    /// for a list the list's (`stable.example.com/v2, Kind=CronTabList`). Errors: 500 with
    /// upstream's messages; no object is returned half-converted.
    pub(crate) async fn convert(
        &self,
        subject: &str,
        objects: Vec<Value>,
        desired: &str,
        list: bool,
    ) -> Result<Vec<Value>, ApiError> {
        let Some(review_version) = self.review_version else {
            return Err(failure(
                "no supported conversion review versions".to_owned(),
            ));
        };
        let uid = new_uid();
        let review = ReviewOut {
            kind: "ConversionReview",
            api_version: format!("apiextensions.k8s.io/{review_version}"),
            request: RequestOut {
                uid: &uid,
                desired_api_version: desired,
                objects: &objects,
            },
        };
        let body = serde_json::to_vec(&review).map_err(ApiError::internal)?;
        let failed =
            |why: String| failure(format!("conversion webhook for {subject} failed: {why}"));
        let answer = self.client.post(body).await.map_err(failed)?;
        let converted =
            response_objects(review_version, &uid, answer.status, &answer.body).map_err(failed)?;
        if converted.len() != objects.len() {
            return Err(failure(format!(
                "conversion webhook for {subject} returned {} objects, expected {}",
                converted.len(),
                objects.len()
            )));
        }
        objects
            .into_iter()
            .zip(converted)
            .enumerate()
            .map(|(i, (original, converted))| {
                check_converted(subject, desired, list, i, &original, converted)
            })
            .collect()
    }
}

/// The converted objects of a webhook's answer (upstream
/// `getConvertedObjectsFromResponse`, after client-go's decoding). Errors: the cause
/// upstream names after `failed: `.
fn response_objects(
    review_version: &str,
    uid: &str,
    status: u16,
    body: &[u8],
) -> Result<Vec<Value>, String> {
    if !(200..=206).contains(&status) {
        return Err(http_error(status, body));
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| format!("couldn't get version/kind; json parse error: {e}"))?;
    let review: ReviewIn = serde_json::from_value(value).map_err(|e| e.to_string())?;
    if review_version == V1 {
        let expected = "apiextensions.k8s.io/v1, Kind=ConversionReview";
        let found = gvk(&review.api_version, &review.kind);
        if found != expected {
            return Err(format!(
                "expected webhook response of {expected}, got {found}"
            ));
        }
    }
    let response = review.response.ok_or("no response provided")?;
    // v1beta1 answers were never checked for their uid; upstream keeps it so.
    if review_version == V1 && response.uid != uid {
        return Err(format!(
            "expected response.uid=\"{uid}\", got \"{}\"",
            response.uid
        ));
    }
    if response.result.status != "Success" {
        if !response.result.message.is_empty() {
            return Err(response.result.message);
        }
        return Err(format!(
            "response.result.status was '{}', not 'Success'",
            response.result.status
        ));
    }
    Ok(response.converted_objects.unwrap_or_default())
}

/// client-go's error for an answer that is not 2xx: the Status it carries, else a
/// generic text by code.
fn http_error(status: u16, body: &[u8]) -> String {
    if let Ok(found) = serde_json::from_slice::<Value>(body)
        && found.get("kind").and_then(Value::as_str) == Some("Status")
        && let Some(message) = found.get("message").and_then(Value::as_str)
    {
        return message.to_owned();
    }
    let text = String::from_utf8_lossy(body);
    match status {
        404 => "the server could not find the requested resource".to_owned(),
        500 => format!(
            "an error on the server ({:?}) has prevented the request from succeeding",
            text.trim()
        ),
        code => format!(
            "the server responded with the status code {code} but did not return more information"
        ),
    }
}

/// One converted object, checked against its original and given back the original's
/// metadata with the converted labels and annotations (upstream's checks in `Convert`,
/// `validateConvertedObject` and `restoreObjectMeta`, with their messages: a list's
/// objects are numbered from 1 in most, as upstream counts them).
fn check_converted(
    subject: &str,
    desired: &str,
    list: bool,
    index: usize,
    original: &Value,
    mut converted: Value,
) -> Result<Value, ApiError> {
    let object_error = |why: String| {
        if list {
            failure(format!(
                "conversion webhook for {subject} returned invalid converted object at index {}: {why}",
                index + 1
            ))
        } else {
            failure(format!(
                "conversion webhook for {subject} returned invalid object at index 0: {why}"
            ))
        }
    };
    match &converted {
        Value::Object(map)
            if map
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| !k.is_empty()) => {}
        Value::Object(_) => {
            let why = format!("Object 'Kind' is missing in '{converted}'");
            return Err(if list {
                failure(format!(
                    "conversion webhook for {subject} returned invalid converted object at index {index}: {why}"
                ))
            } else {
                failure(why)
            });
        }
        other => {
            let why = format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go_type(other)
            );
            return Err(if list {
                failure(format!(
                    "conversion webhook for {subject} returned invalid converted object at index {index}: {why}"
                ))
            } else {
                failure(why)
            });
        }
    }
    let received = str_at(&converted, "/apiVersion");
    if received != desired {
        return Err(object_error(format!(
            "invalid groupVersion (expected {desired}, received {received})"
        )));
    }
    let (expected_kind, kind) = (str_at(original, "/kind"), str_at(&converted, "/kind"));
    if expected_kind != kind {
        return Err(object_error(format!(
            "invalid kind (expected {expected_kind}, received {kind})"
        )));
    }
    if let Err(why) = same_identity(original, &converted) {
        return Err(if list {
            object_error(why)
        } else {
            failure(format!(
                "conversion webhook for {subject} returned invalid object: {why}"
            ))
        });
    }
    if let Err(why) = restore_metadata(original, &mut converted) {
        return Err(if list {
            failure(format!(
                "conversion webhook for {subject} returned invalid metadata in object at index {}: {why}",
                index + 1
            ))
        } else {
            failure(format!(
                "conversion webhook for {subject} returned invalid metadata: {why}"
            ))
        });
    }
    Ok(converted)
}

/// Kind, name, namespace and uid must stay (upstream `validateConvertedObject`).
fn same_identity(original: &Value, converted: &Value) -> Result<(), String> {
    for (pointer, what) in [
        ("/kind", "kind"),
        ("/metadata/name", "name"),
        ("/metadata/namespace", "namespace"),
        ("/metadata/uid", "UID"),
    ] {
        let (expected, found) = (str_at(original, pointer), str_at(converted, pointer));
        if expected != found {
            return Err(format!("must have the same {what}: {expected} != {found}"));
        }
    }
    Ok(())
}

/// The original's metadata with the converted object's labels and annotations (upstream
/// `restoreObjectMeta`). Errors: metadata missing or not an object, labels or annotations
/// not string maps, or invalid when changed.
fn restore_metadata(original: &Value, converted: &mut Value) -> Result<(), String> {
    let answered = match converted.get_mut("metadata").map(Value::take) {
        None => return Err("missing metadata in converted object".to_owned()),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(&other)
            ));
        }
    };
    let mut metadata = match original.get("metadata") {
        Some(Value::Object(map)) => map.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in input object",
                go_type(other)
            ));
        }
        None => Map::new(),
    };
    for field in ["labels", "annotations"] {
        let found = match answered.get(field) {
            None | Some(Value::Null) => {
                metadata.remove(field);
                continue;
            }
            Some(Value::Object(map)) => map,
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ));
            }
        };
        let before = match metadata.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(map),
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in original object",
                    go_type(other)
                ));
            }
        };
        let mut strings = std::collections::BTreeMap::new();
        for (key, value) in found {
            let Some(text) = value.as_str() else {
                return Err(format!(
                    "metadata.{field}[{key}] must be a string, but is {} in converted object",
                    go_type(value)
                ));
            };
            strings.insert(key.clone(), text.to_owned());
        }
        let changed = before.is_none_or(|before| before != found);
        if changed {
            let errors = if field == "labels" {
                skiff_api::meta::validate_labels(&strings, &Path::new("metadata").child("labels"))
            } else {
                // Upstream names the field `metadata.annotation` here.
                skiff_api::meta::validate_annotations(
                    &strings,
                    &Path::new("metadata").child("annotation"),
                )
            };
            if !errors.is_empty() {
                return Err(aggregate(&errors));
            }
        }
        metadata.insert(field.to_owned(), Value::Object(found.clone()));
    }
    if let Some(map) = converted.as_object_mut() {
        map.insert("metadata".to_owned(), Value::Object(metadata));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn answers_are_checked_as_upstream() {
        let ok = |objects: Value| {
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": "u", "result": {"status": "Success"}, "convertedObjects": objects}
            })
            .to_string()
        };
        let objects = response_objects(V1, "u", 200, ok(json!([{"a": 1}])).as_bytes());
        assert_eq!(objects, Ok(vec![json!({"a": 1})]));
        assert_eq!(
            response_objects(V1, "other", 200, ok(json!([])).as_bytes()),
            Err("expected response.uid=\"other\", got \"u\"".to_owned())
        );
        // v1beta1 answers are not checked for their uid or kind.
        assert!(
            response_objects(
                V1BETA1,
                "other",
                200,
                br#"{"response":{"result":{"status":"Success"}}}"#
            )
            .is_ok()
        );
        assert_eq!(
            response_objects(V1, "u", 200, br#"{"kind":"Nope"}"#),
            Err("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got /, Kind=Nope".to_owned())
        );
        let failed = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Failure"}}
        });
        assert_eq!(
            response_objects(V1, "u", 200, failed.to_string().as_bytes()),
            Err("response.result.status was 'Failure', not 'Success'".to_owned())
        );
        let error = response_objects(V1, "u", 200, b"garbage").unwrap_err();
        assert!(
            error.starts_with("couldn't get version/kind; json parse error: "),
            "{error}"
        );
        assert_eq!(
            response_objects(V1, "u", 404, b""),
            Err("the server could not find the requested resource".to_owned())
        );
    }

    #[test]
    fn converted_objects_keep_identity_and_only_their_labels_and_annotations() {
        let original = json!({
            "apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "a", "namespace": "default", "uid": "1", "resourceVersion": "5",
                         "labels": {"x": "1"}},
            "spec": {"cronSpec": "* * * * *"}
        });
        let converted = json!({
            "apiVersion": "stable.example.com/v2", "kind": "CronTab",
            "metadata": {"name": "a", "namespace": "default", "uid": "1", "resourceVersion": "999",
                         "labels": {"x": "2"}, "annotations": {"n": "m"}, "generation": 7},
            "spec": {"schedule": "* * * * *"}
        });
        let subject = gvk("stable.example.com/v1", "CronTab");
        assert_eq!(subject, "stable.example.com/v1, Kind=CronTab");
        let checked = check_converted(
            &subject,
            "stable.example.com/v2",
            false,
            0,
            &original,
            converted.clone(),
        )
        .unwrap();
        assert_eq!(
            checked["metadata"],
            json!({"name": "a", "namespace": "default", "uid": "1", "resourceVersion": "5",
                   "labels": {"x": "2"}, "annotations": {"n": "m"}})
        );
        let mut renamed = converted.clone();
        renamed["metadata"]["name"] = json!("b");
        let error = check_converted(
            &subject,
            "stable.example.com/v2",
            false,
            0,
            &original,
            renamed,
        )
        .unwrap_err();
        assert_eq!(error.code, 500);
        assert_eq!(
            error.message,
            "conversion webhook for stable.example.com/v1, Kind=CronTab returned invalid object: must have the same name: a != b"
        );
        let error = check_converted(
            &subject,
            "stable.example.com/v3",
            true,
            0,
            &original,
            converted.clone(),
        )
        .unwrap_err();
        assert_eq!(
            error.message,
            "conversion webhook for stable.example.com/v1, Kind=CronTab returned invalid converted object at index 1: invalid groupVersion (expected stable.example.com/v3, received stable.example.com/v2)"
        );
        let mut bad_label = converted;
        bad_label["metadata"]["labels"] = json!({"x": 1});
        let error = check_converted(
            &subject,
            "stable.example.com/v2",
            false,
            0,
            &original,
            bad_label,
        )
        .unwrap_err();
        assert_eq!(
            error.message,
            "conversion webhook for stable.example.com/v1, Kind=CronTab returned invalid metadata: metadata.labels[x] must be a string, but is int64 in converted object"
        );
        let uid = new_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4");
    }
}
