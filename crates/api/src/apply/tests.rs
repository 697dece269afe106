//! Apply and ownership scenarios on built-in kinds, as upstream's field manager tests.

use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use super::*;
use crate::schema::Schemas;

fn schemas() -> Schemas {
    crate::schema::tests::builtin()
}

fn deployments(schemas: &Schemas) -> FieldManager<'_> {
    let types = TypeSource::Definition {
        schemas,
        definition: "io.k8s.api.apps.v1.Deployment",
    };
    FieldManager::new(types, "apps/v1", "Deployment")
        .reset_fields(Set::from_paths([Path::fields(&["status"])]))
}

fn at(second: u32) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, second)
        .single()
        .expect("valid time")
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]},
            },
        },
    })
}

/// The stored object after a write: a uid, as the store gives.
fn stored(mut object: Value) -> Value {
    object["metadata"]["uid"] = "u-1".into();
    object
}

fn entry<'v>(object: &'v Value, manager: &str) -> &'v Value {
    object["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["manager"] == manager))
        .unwrap_or_else(|| panic!("no entry of {manager} in {object}"))
}

#[test]
fn apply_creates_then_conflicts_then_force_shares_and_takes_ownership() {
    let schemas = schemas();
    let fm = deployments(&schemas);
    let created = fm
        .apply(
            &fm.empty_object(),
            &deployment(1, "nginx"),
            "alice",
            false,
            at(1),
        )
        .unwrap();
    let alice = entry(&created, "alice");
    assert_eq!(alice["operation"], "Apply");
    assert_eq!(alice["apiVersion"], "apps/v1");
    assert_eq!(alice["time"], "2025-01-01T00:00:01Z");
    assert_eq!(alice["fieldsType"], "FieldsV1");
    assert_eq!(
        alice["fieldsV1"],
        json!({
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {
                        ".": {}, "f:image": {}, "f:name": {}
                    }}},
                },
            },
        })
    );
    let live = stored(created);

    // Another manager with a different value conflicts.
    let err = fm
        .apply(&live, &deployment(3, "nginx"), "bob", false, at(2))
        .unwrap_err();
    assert_eq!(
        err.message(),
        r#"Apply failed with 1 conflict: conflict with "alice": .spec.replicas"#
    );
    let ApplyError::Conflicts(conflicts) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(conflicts[0].message(), r#"conflict with "alice""#);
    assert_eq!(conflicts[0].path.to_string(), ".spec.replicas");

    // Two conflicts are listed per manager.
    let err = fm
        .apply(&live, &deployment(3, "httpd"), "bob", false, at(2))
        .unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .spec.replicas\n- .spec.template.spec.containers[name=\"web\"].image"
    );

    // The same values are shared, force takes the field over.
    let shared = fm
        .apply(&live, &deployment(1, "nginx"), "bob", false, at(3))
        .unwrap();
    assert_eq!(
        entry(&shared, "bob")["fieldsV1"],
        entry(&shared, "alice")["fieldsV1"]
    );
    let forced = fm
        .apply(&stored(shared), &deployment(3, "nginx"), "bob", true, at(4))
        .unwrap();
    assert_eq!(forced["spec"]["replicas"], 3);
    assert!(
        entry(&forced, "alice")["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none()
    );
    assert!(
        entry(&forced, "bob")["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_some()
    );
}

#[test]
fn apply_removes_what_the_applier_no_longer_sets() {
    let schemas = schemas();
    let fm = deployments(&schemas);
    let mut config = deployment(1, "nginx");
    config["metadata"]["labels"] = json!({"a": "1", "b": "2"});
    let live = stored(
        fm.apply(&fm.empty_object(), &config, "alice", false, at(1))
            .unwrap(),
    );
    let mut next = deployment(1, "nginx");
    next["metadata"]["labels"] = json!({"a": "1"});
    next["spec"].as_object_mut().unwrap().remove("replicas");
    let applied = fm.apply(&live, &next, "alice", false, at(2)).unwrap();
    assert_eq!(applied["metadata"]["labels"], json!({"a": "1"}));
    assert!(applied["spec"].get("replicas").is_none());
    assert_eq!(
        applied["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx"
    );

    // A field another manager also owns stays.
    let shared = stored(
        fm.apply(&live, &deployment(1, "nginx"), "bob", false, at(3))
            .unwrap(),
    );
    let applied = fm.apply(&shared, &next, "alice", false, at(4)).unwrap();
    assert_eq!(applied["spec"]["replicas"], 1);
}

#[test]
fn updates_record_update_managers_and_before_first_apply() {
    let schemas = schemas();
    let fm = deployments(&schemas);
    let created = fm.update(
        &fm.empty_object(),
        deployment(2, "nginx"),
        "kubectl-create",
        at(1),
    );
    let creator = entry(&created, "kubectl-create");
    assert_eq!(creator["operation"], "Update");
    assert_eq!(creator["apiVersion"], "apps/v1");
    assert!(creator["fieldsV1"]["f:spec"].get("f:replicas").is_some());
    assert!(creator["fieldsV1"].get("f:metadata").is_none());

    // An update by another manager takes the changed field.
    let mut changed = stored(created.clone());
    changed["spec"]["replicas"] = 5.into();
    let updated = fm.update(&stored(created), changed, "kubectl-edit", at(2));
    let edit = entry(&updated, "kubectl-edit");
    assert_eq!(edit["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    assert!(
        entry(&updated, "kubectl-create")["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none()
    );

    // Clearing with [{}] leaves the object untracked; updates do not track it again, and
    // the first apply gives its fields to before-first-apply.
    let mut cleared = stored(updated.clone());
    cleared["metadata"]["managedFields"] = json!([{}]);
    let cleared = fm.update(&stored(updated), cleared, "x", at(3));
    assert!(cleared["metadata"].get("managedFields").is_none());
    let mut again = stored(cleared.clone());
    again["spec"]["replicas"] = 6.into();
    let again = fm.update(&stored(cleared), again, "x", at(4));
    assert!(again["metadata"].get("managedFields").is_none());
    let applied = fm
        .apply(
            &stored(again),
            &deployment(6, "nginx"),
            "alice",
            false,
            at(5),
        )
        .unwrap();
    let before = entry(&applied, "before-first-apply");
    assert_eq!(before["operation"], "Update");
    // The same value is shared; a different one conflicts with before-first-apply.
    assert!(before["fieldsV1"]["f:spec"].get("f:replicas").is_some());
    assert!(
        entry(&applied, "alice")["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_some()
    );
    let err = fm
        .apply(
            &stored(applied),
            &deployment(7, "nginx"),
            "alice",
            false,
            at(6),
        )
        .unwrap_err();
    assert_eq!(
        err.message(),
        r#"Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1: .spec.replicas"#
    );
}

#[test]
fn kubectl_takes_over_client_side_applied_fields() {
    let schemas = schemas();
    let fm = deployments(&schemas);
    let mut object = deployment(1, "nginx");
    let last = object.to_string();
    object["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/last-applied-configuration": last});
    let live = stored(fm.update(
        &fm.empty_object(),
        object,
        "kubectl-client-side-apply",
        at(1),
    ));
    // Another manager conflicts with the client-side applier...
    let err = fm
        .apply(&live, &deployment(2, "nginx"), "other", false, at(2))
        .unwrap_err();
    assert_eq!(
        err.message(),
        r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#
    );
    // ...kubectl does not, and keeps the annotation up to date.
    let applied = fm
        .apply(&live, &deployment(2, "nginx"), "kubectl", false, at(2))
        .unwrap();
    assert_eq!(applied["spec"]["replicas"], 2);
    let annotation =
        applied["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap();
    let annotation: Value = serde_json::from_str(annotation).unwrap();
    assert_eq!(annotation["spec"]["replicas"], 2);
}

#[test]
fn bad_applies_are_refused() {
    let schemas = schemas();
    let fm = deployments(&schemas);
    let empty = fm.empty_object();
    let mut wrong = deployment(1, "x");
    wrong["apiVersion"] = "apps/v1beta1".into();
    assert_eq!(
        fm.apply(&empty, &wrong, "a", false, at(1)).unwrap_err(),
        ApplyError::BadRequest("invalid object type: apps/v1beta1, Kind=Deployment".into())
    );
    let mut unknown = deployment(1, "x");
    unknown["spec"]["bogus"] = 1.into();
    assert_eq!(
        fm.apply(&empty, &unknown, "a", false, at(1))
            .unwrap_err()
            .message(),
        "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): .spec.bogus: field not declared in schema"
    );
    let mut nameless = deployment(1, "x");
    nameless["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("name");
    assert!(fm.apply(&empty, &nameless, "a", false, at(1)).unwrap_err().message().ends_with(
        r#".spec.template.spec.containers: element 0: associative list with keys has an element that omits key field "name" (and doesn't have default value)"#
    ));
    let mut managed = deployment(1, "x");
    managed["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        fm.apply(&empty, &managed, "a", false, at(1)).unwrap_err(),
        ApplyError::BadRequest("metadata.managedFields must be nil".into())
    );
}

#[test]
fn update_managers_are_capped_into_ancient_changes() {
    let schemas = schemas();
    let fm = deployments(&schemas);
    let mut first = deployment(0, "x");
    first["metadata"]["labels"] = json!({});
    let mut live = stored(fm.update(&fm.empty_object(), first, "m0", at(0)));
    for i in 1..=11u32 {
        let mut next = live.clone();
        next["metadata"]["labels"][format!("l{i}")] = "v".into();
        live = stored(fm.update(&live, next, &format!("m{i}"), at(i)));
    }
    let entries = live["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries.len(), 10);
    assert!(entries.iter().any(|e| e["manager"] == "ancient-changes"));
    assert!(!entries.iter().any(|e| e["manager"] == "m0"));
}

#[test]
fn builtin_schemas_give_list_and_struct_types() {
    let schemas = schemas();
    let types = TypeSource::Definition {
        schemas: &schemas,
        definition: "io.k8s.api.core.v1.Pod",
    };
    let pod = json!({"spec": {
        "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
            "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}],
        "tolerations": [{"key": "k"}],
    }});
    let set = typed::to_field_set(&pod, &types.root());
    let fields = set.to_fields_v1();
    let container = &fields["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"];
    assert!(
        container["f:ports"]
            .get("k:{\"containerPort\":80,\"protocol\":\"TCP\"}")
            .is_some()
    );
    assert_eq!(
        container["f:env"]["k:{\"name\":\"A\"}"]["f:valueFrom"],
        json!({"f:secretKeyRef": {}})
    );
    assert_eq!(fields["f:spec"]["f:tolerations"], json!({}));
}
