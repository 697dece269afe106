//! The node status patch (upstream `pkg/util/node.PatchNodeStatus` and
//! `preparePatchBytesforNodeStatus`) and the change test that decides whether to send it
//! (upstream `nodeStatusHasChanged`).

use k8s_openapi::api::core::v1::{Node, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Map, Value, json};

/// The strategic merge patch that turns `original` into `updated` through `nodes/<name>/status`
/// (upstream's two-way merge patch of the two Nodes): the spec is never patched; maps
/// merge, with `null` for removed keys; `status.conditions` merges by `type` with
/// `$setElementOrder`; `status.addresses` is replaced whole (upstream's fix-up: its merge
/// key `type` is not unique); every other list is replaced. An empty object when nothing
/// changed.
///
/// Errors only if a Node cannot be serialized.
pub(crate) fn node_status_patch(original: &Node, updated: &Node) -> serde_json::Result<Value> {
    let mut diff_node = updated.clone();
    diff_node.spec.clone_from(&original.spec);
    let (Value::Object(old), Value::Object(new)) = (
        serde_json::to_value(original)?,
        serde_json::to_value(&diff_node)?,
    ) else {
        return Ok(json!({}));
    };
    Ok(Value::Object(diff_maps(&old, &new, "")))
}

/// The patch of `new` over `old` at JSON path `path` (`/status`).
fn diff_maps(old: &Map<String, Value>, new: &Map<String, Value>, path: &str) -> Map<String, Value> {
    let mut patch = Map::new();
    for (key, new_value) in new {
        let Some(old_value) = old.get(key) else {
            patch.insert(key.clone(), new_value.clone());
            continue;
        };
        if old_value == new_value {
            continue;
        }
        let child = format!("{path}/{key}");
        match (old_value, new_value) {
            (Value::Object(o), Value::Object(n)) => {
                let d = diff_maps(o, n, &child);
                if !d.is_empty() {
                    patch.insert(key.clone(), Value::Object(d));
                }
            }
            (Value::Array(o), Value::Array(n)) if child == "/status/conditions" => {
                merge_list_diff(&mut patch, key, o, n, "type", &child);
            }
            (_, Value::Array(n)) if child == "/status/addresses" => {
                let mut items = n.clone();
                items.push(json!({"$patch": "replace"}));
                patch.insert(key.clone(), Value::Array(items));
            }
            _ => {
                patch.insert(key.clone(), new_value.clone());
            }
        }
    }
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        patch.insert(key.clone(), Value::Null);
    }
    patch
}

/// The patch of a list merged by `merge_key`: changed and new items (changed ones as
/// their own diff plus the key), `$patch: delete` for removed ones, and the new order.
fn merge_list_diff(
    patch: &mut Map<String, Value>,
    field: &str,
    old: &[Value],
    new: &[Value],
    merge_key: &str,
    path: &str,
) {
    let key_of = |item: &Value| item.get(merge_key).cloned();
    let mut items = Vec::new();
    for item in new {
        let found = old.iter().find(|o| key_of(o) == key_of(item));
        match (found, item) {
            (None, _) => items.push(item.clone()),
            (Some(o), _) if o == item => {}
            (Some(Value::Object(o)), Value::Object(n)) => {
                let mut d = diff_maps(o, n, path);
                if let Some(key) = key_of(item) {
                    d.insert(merge_key.to_owned(), key);
                }
                items.push(Value::Object(d));
            }
            (Some(_), _) => items.push(item.clone()),
        }
    }
    for item in old {
        if !new.iter().any(|n| key_of(n) == key_of(item))
            && let Some(key) = key_of(item)
        {
            items.push(json!({merge_key: key, "$patch": "delete"}));
        }
    }
    if items.is_empty() {
        return;
    }
    let order: Vec<Value> = new
        .iter()
        .filter_map(|n| key_of(n).map(|k| json!({merge_key: k})))
        .collect();
    patch.insert(format!("$setElementOrder/{field}"), Value::Array(order));
    patch.insert(field.to_owned(), Value::Array(items));
}

/// Whether `status` differs from `original` other than by the conditions' heartbeat times
/// (upstream `nodeStatusHasChanged`; quantities compare by value, conditions in any order).
pub(crate) fn node_status_has_changed(
    original: Option<&NodeStatus>,
    status: Option<&NodeStatus>,
) -> bool {
    comparable(original) != comparable(status)
}

/// `status` as compared: conditions without heartbeat, sorted by type; capacity and
/// allocatable as numbers.
fn comparable(status: Option<&NodeStatus>) -> Value {
    let Some(status) = status else {
        return Value::Null;
    };
    let mut status = status.clone();
    if let Some(conditions) = status.conditions.as_mut() {
        for c in conditions.iter_mut() {
            c.last_heartbeat_time = None;
        }
        conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    }
    let mut value = serde_json::to_value(&status).unwrap_or(Value::Null);
    for field in ["capacity", "allocatable"] {
        if let Some(Value::Object(map)) = value.get_mut(field) {
            for amount in map.values_mut() {
                if let Value::String(s) = amount {
                    let parsed = skiff_api::quantity::parse(&Quantity(s.clone()));
                    if let Some(number) = parsed.and_then(serde_json::Number::from_f64) {
                        *amount = Value::Number(number);
                    }
                }
            }
        }
    }
    value
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress, NodeCondition, NodeSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;
    use skiff_api::patch::strategic_merge_patch;
    use skiff_api::schema::Schemas;

    /// The OpenAPI definitions the Node status patch touches, with upstream's patch tags.
    pub(crate) fn node_schemas() -> Schemas {
        let reference =
            |name: &str| json!({"$ref": format!("#/definitions/io.k8s.api.core.v1.{name}")});
        let list = |name: &str| json!({"type": "array", "items": reference(name)});
        let definitions = json!({
            "io.k8s.api.core.v1.Node": {"properties": {
                "spec": reference("NodeSpec"), "status": reference("NodeStatus")}},
            "io.k8s.api.core.v1.NodeSpec": {"properties": {}},
            "io.k8s.api.core.v1.NodeStatus": {"properties": {
                "addresses": list("NodeAddress"), "conditions": list("NodeCondition"),
                "images": list("ContainerImage")}},
            "io.k8s.api.core.v1.NodeAddress": {"properties": {}},
            "io.k8s.api.core.v1.NodeCondition": {"properties": {}},
            "io.k8s.api.core.v1.ContainerImage": {"properties": {}},
        });
        let Value::Object(definitions) = definitions else {
            unreachable!()
        };
        Schemas::new(definitions)
    }

    /// Applies `patch` to `node` as the API server does.
    pub(crate) fn apply(node: &Value, patch: &Value) -> Value {
        strategic_merge_patch(&node_schemas(), "io.k8s.api.core.v1.Node", node, patch).unwrap()
    }

    fn condition(kind: &str, status: &str, heartbeat: i64) -> NodeCondition {
        NodeCondition {
            type_: kind.into(),
            status: status.into(),
            last_heartbeat_time: Some(Time(Timestamp::from_second(heartbeat).unwrap())),
            ..Default::default()
        }
    }

    fn address(kind: &str, address: &str) -> NodeAddress {
        NodeAddress {
            type_: kind.into(),
            address: address.into(),
        }
    }

    #[test]
    fn patch_turns_the_original_into_the_update() {
        let original = Node {
            metadata: ObjectMeta {
                name: Some("n".into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                unschedulable: Some(true),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(vec![
                    address("InternalIP", "10.0.0.1"),
                    address("Hostname", "n"),
                ]),
                conditions: Some(vec![
                    condition("NetworkUnavailable", "False", 1),
                    condition("Ready", "False", 1),
                    condition("Stale", "True", 1),
                ]),
                capacity: Some([("cpu".to_owned(), Quantity("2".into()))].into()),
                ..Default::default()
            }),
        };
        let mut updated = original.clone();
        updated.spec = None;
        let status = updated.status.as_mut().unwrap();
        status.addresses = Some(vec![
            address("InternalIP", "10.0.0.2"),
            address("Hostname", "n"),
        ]);
        status.conditions = Some(vec![
            condition("NetworkUnavailable", "False", 1),
            condition("Ready", "True", 2),
        ]);
        status.capacity = Some([("memory".to_owned(), Quantity("1Gi".into()))].into());
        let patch = node_status_patch(&original, &updated).unwrap();
        assert!(
            patch.get("spec").is_none(),
            "spec is never patched: {patch}"
        );
        assert_eq!(
            patch["status"]["capacity"],
            json!({"cpu": null, "memory": "1Gi"})
        );
        assert_eq!(
            patch["status"]["conditions"],
            json!([
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "1970-01-01T00:00:02Z"},
                {"type": "Stale", "$patch": "delete"}
            ])
        );

        let live = serde_json::to_value(&original).unwrap();
        let result: Node = serde_json::from_value(apply(&live, &patch)).unwrap();
        let mut expected = updated.clone();
        expected.spec.clone_from(&original.spec);
        assert_eq!(result, expected);
        assert_eq!(node_status_patch(&original, &original).unwrap(), json!({}));
    }

    #[test]
    fn heartbeats_alone_are_no_change() {
        let status = |heartbeat, cpu: &str| NodeStatus {
            conditions: Some(vec![condition("Ready", "True", heartbeat)]),
            capacity: Some([("cpu".to_owned(), Quantity(cpu.into()))].into()),
            ..Default::default()
        };
        assert!(!node_status_has_changed(
            Some(&status(1, "2")),
            Some(&status(9, "2000m"))
        ));
        assert!(node_status_has_changed(
            Some(&status(1, "2")),
            Some(&status(1, "3"))
        ));
        let mut not_ready = status(1, "2");
        not_ready.conditions = Some(vec![condition("Ready", "False", 1)]);
        assert!(node_status_has_changed(
            Some(&status(1, "2")),
            Some(&not_ready)
        ));
        assert!(node_status_has_changed(None, Some(&status(1, "2"))));
    }
}
