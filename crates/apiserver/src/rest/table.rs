//! Table and metadata-only responses (upstream `TableConvertor` and
//! `endpoints/handlers/response.go`): `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`
//! turns an object or a list into a `meta.k8s.io/v1` Table whose columns are the kind's
//! (upstream's `Name` and `Created At` by default) and whose rows carry the object as
//! PartialObjectMetadata (`includeObject=Metadata`, the default), whole (`Object`) or not
//! at all (`None`).

use serde_json::{Value, json};

use super::params::IncludeObject;
use crate::error::ApiError;
use crate::registry::{Kind, TableColumn};

const META_API_VERSION: &str = "meta.k8s.io/v1";

/// Upstream's default columns (`rest.NewDefaultTableConvertor`).
fn default_columns() -> Vec<TableColumn> {
    vec![
        TableColumn {
            name: "Name".into(),
            type_: "string".into(),
            format: "name".into(),
            description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names".into(),
            priority: 0,
        },
        TableColumn {
            name: "Created At".into(),
            type_: "date".into(),
            format: "".into(),
            description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata".into(),
            priority: 0,
        },
    ]
}

/// A Table of `objects` of `kind`; `list_metadata` is the Table's `metadata` (the list's
/// resourceVersion and continue token, or empty for one object).
pub fn table(
    kind: &dyn Kind,
    objects: &[Value],
    list_metadata: Value,
    include: IncludeObject,
) -> Result<Value, ApiError> {
    let custom = kind.columns();
    let columns = if custom.is_empty() {
        default_columns()
    } else {
        custom.clone()
    };
    let mut rows = Vec::with_capacity(objects.len());
    for object in objects {
        let cells = if custom.is_empty() {
            let metadata = object.get("metadata");
            vec![
                metadata
                    .and_then(|m| m.get("name"))
                    .cloned()
                    .unwrap_or(Value::Null),
                metadata
                    .and_then(|m| m.get("creationTimestamp"))
                    .cloned()
                    .unwrap_or(Value::Null),
            ]
        } else {
            kind.row(object)?
        };
        let mut row = json!({ "cells": cells });
        match include {
            IncludeObject::None => {}
            IncludeObject::Metadata => row["object"] = partial_object_metadata(object),
            IncludeObject::Object => row["object"] = object.clone(),
        }
        rows.push(row);
    }
    Ok(json!({
        "kind": "Table",
        "apiVersion": META_API_VERSION,
        "metadata": list_metadata,
        "columnDefinitions": columns,
        "rows": rows,
    }))
}

/// An object's metadata as `meta.k8s.io/v1 PartialObjectMetadata`.
pub fn partial_object_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": META_API_VERSION,
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A list's items as `meta.k8s.io/v1 PartialObjectMetadataList`.
pub fn partial_object_metadata_list(items: &[Value], list_metadata: Value) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": META_API_VERSION,
        "metadata": list_metadata,
        "items": items.iter().map(partial_object_metadata).collect::<Vec<_>>(),
    })
}
