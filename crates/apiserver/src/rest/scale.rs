//! The `scale` subresource (upstream's `ScaleREST` of deployments, replicasets,
//! statefulsets): an `autoscaling/v1` Scale read from and written to the kind's replica
//! fields ([`ScaleSpec`]). Writes go through the main resource's update rules.

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};
use skiff_api::field::{FieldError, Path};

use super::negotiation::{content_type, decode_object, parse_json, read_body};
use super::object::{meta_get, meta_string};
use super::patch::{PatchType, apply};
use super::request::Call;
use super::store::Target;
use crate::error::ApiError;
use crate::registry::ScaleSpec;

/// The Scale of `object`.
pub fn to_scale(spec: &ScaleSpec, object: &Value) -> Value {
    let mut metadata = Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = meta_get(object, field) {
            metadata.insert(field.to_owned(), value.clone());
        }
    }
    let replicas = |pointer: &str| object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({ "replicas": replicas(&spec.status_replicas) });
    if let Some(selector) = spec.selector.as_deref().and_then(|p| object.pointer(p)) {
        status["selector"] = format_selector(selector).into();
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": { "replicas": replicas(&spec.spec_replicas) },
        "status": status,
    })
}

/// A `metav1.LabelSelector` in the query syntax (upstream `FormatLabelSelector`):
/// requirements sorted by key, `a=b`, `k in (x,y)`, `k notin (x)`, `k`, `!k`. A plain
/// label map (a ReplicationController's selector) reads as `a=b,c=d`.
pub fn format_selector(selector: &Value) -> String {
    let mut requirements: Vec<(String, String)> = Vec::new();
    let label_selector = selector.get("matchLabels").is_some_and(Value::is_object)
        || selector
            .get("matchExpressions")
            .is_some_and(Value::is_array);
    if !label_selector && let Some(map) = selector.as_object() {
        let pairs: Vec<String> = map
            .iter()
            .filter_map(|(key, value)| Some(format!("{key}={}", value.as_str()?)))
            .collect();
        return pairs.join(",");
    }
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            let value = value.as_str().unwrap_or_default();
            requirements.push((key.clone(), format!("{key}={value}")));
        }
    }
    for expression in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = expression
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut values: Vec<&str> = expression
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match expression.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("Exists") => key.to_owned(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => continue,
        };
        requirements.push((key.to_owned(), text));
    }
    requirements.sort();
    requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

/// Sets the value at a JSON pointer, creating objects on the way.
fn set_pointer(object: &mut Value, pointer: &str, value: Value) {
    let mut current = object;
    for segment in pointer.trim_start_matches('/').split('/') {
        current = super::object::as_map(current)
            .entry(segment.to_owned())
            .or_insert(Value::Null);
    }
    *current = value;
}

/// Serves GET, PUT and PATCH of `.../<name>/scale`.
pub async fn serve(call: &Call, spec: &ScaleSpec, request: Request) -> Result<Response, ApiError> {
    let method = request.method().clone();
    if method == Method::GET {
        let object = call.store().get(call.namespace(), call.name()).await?;
        return Ok(call.respond(StatusCode::OK, &to_scale(spec, &object), &[]));
    }
    let (parts, body) = request.into_parts();
    let media_type = content_type(&parts.headers);
    let bytes = read_body(body).await?;
    let change = match method {
        Method::PUT => Change::Replace(decode_object(&media_type, &bytes)?),
        Method::PATCH => {
            let patch_type = PatchType::from_media_type(&media_type)?;
            Change::Patch(patch_type, parse_json(&bytes)?)
        }
        _ => return Err(super::router::method_not_allowed()),
    };
    let objects = call.objects();
    let ctx = objects.context();
    let mut build = |current: Option<&Value>| -> Result<Value, ApiError> {
        let current = current
            .ok_or_else(|| ApiError::not_found(&call.kind.info().group_resource(), call.name()))?;
        let scale = match &change {
            Change::Replace(scale) => scale.clone(),
            Change::Patch(patch_type, document) => {
                // A Scale has no lists: a strategic merge patch is a merge patch.
                let patch_type = match patch_type {
                    PatchType::StrategicMerge => PatchType::Merge,
                    other => *other,
                };
                apply(
                    &call.state.schemas,
                    "",
                    patch_type,
                    &to_scale(spec, current),
                    document,
                )?
            }
        };
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            let field = Path::new("spec").child("replicas");
            let errors = [FieldError::invalid(
                &field,
                replicas,
                "must be greater than or equal to 0",
            )];
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                call.name(),
                &errors,
            ));
        }
        let mut object = current.clone();
        set_pointer(&mut object, &spec.spec_replicas, replicas.into());
        let rv = meta_string(&scale, "resourceVersion");
        super::object::set_meta(&mut object, "resourceVersion", Some(rv.into()));
        Ok(object)
    };
    let (updated, _) = call
        .store()
        .owned_by(super::managed::Ownership::of(call, &parts.headers))
        .update(
            &ctx,
            call.namespace(),
            call.name(),
            Target::Main,
            &mut build,
            method == Method::PATCH,
        )
        .await?;
    Ok(call.respond(StatusCode::OK, &to_scale(spec, &updated), &[]))
}

/// What a write to `/scale` asks.
enum Change {
    Replace(Value),
    Patch(PatchType, Value),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_format_as_upstream() {
        let selector = json!({
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [
                {"key": "c", "operator": "In", "values": ["y", "x"]},
                {"key": "d", "operator": "DoesNotExist"},
            ],
        });
        assert_eq!(format_selector(&selector), "a=1,b=2,c in (x,y),!d");
        assert_eq!(format_selector(&json!({"b": "2", "a": "1"})), "a=1,b=2");
    }

    #[test]
    fn scale_reads_the_replica_fields() {
        let spec = ScaleSpec {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: Some("/spec/selector".into()),
        };
        let object = json!({
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": 2},
        });
        let scale = to_scale(&spec, &object);
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(
            scale["status"],
            json!({"replicas": 2, "selector": "app=web"})
        );
        assert_eq!(scale["metadata"]["resourceVersion"], "7");
        let mut changed = object.clone();
        set_pointer(&mut changed, "/spec/replicas", 5.into());
        assert_eq!(changed["spec"]["replicas"], 5);
    }
}
