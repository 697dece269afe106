//! storage.k8s.io/v1 through the REST layer: create and get, defaults, validation
//! messages, immutable fields, the status subresource and table rows.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::registry::testing::{Server, causes};

const STORAGE: &str = "/apis/storage.k8s.io/v1";

#[tokio::test]
async fn storage_classes_default_validate_and_print() {
    let server = Server::start().await;
    let uri = format!("{STORAGE}/storageclasses");
    let class = json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "example.com/fast",
        "parameters": {"type": "ssd"},
    });
    let created = server.send("POST", &uri, &class).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let got = server
        .send("GET", &format!("{uri}/fast"), &Value::Null)
        .await;
    assert_eq!(got.body["reclaimPolicy"], "Delete");
    assert_eq!(got.body["volumeBindingMode"], "Immediate");

    let bad = json!({"metadata": {"name": "bad"}, "provisioner": "", "reclaimPolicy": "Recycle"});
    let reply = server.send("POST", &uri, &bad).await;
    assert_eq!(
        causes(&reply),
        [
            "provisioner: Required value",
            r#"reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain""#,
        ]
    );

    let patch = json!({"provisioner": "example.com/slow", "parameters": {"type": "hdd"}});
    let reply = server.send("PATCH", &format!("{uri}/fast"), &patch).await;
    assert_eq!(
        causes(&reply),
        [
            "parameters: Forbidden: updates to parameters are forbidden.",
            "provisioner: Forbidden: updates to provisioner are forbidden.",
        ]
    );

    let table = server.table(&uri).await;
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Provisioner",
            "ReclaimPolicy",
            "VolumeBindingMode",
            "AllowVolumeExpansion",
            "Age"
        ]
    );
    assert_eq!(
        table["rows"][0]["cells"]
            .as_array()
            .map(|c| c[..5].to_vec()),
        Some(vec![
            json!("fast (default)"),
            json!("example.com/fast"),
            json!("Delete"),
            json!("Immediate"),
            json!(false)
        ])
    );
}

#[tokio::test]
async fn csi_drivers_default_and_keep_attach_required() {
    let server = Server::start().await;
    let uri = format!("{STORAGE}/csidrivers");
    let driver = json!({"metadata": {"name": "csi.example.com"}, "spec": {"tokenRequests": [{"audience": "a"}]}});
    let created = server.send("POST", &uri, &driver).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let spec = &created.body["spec"];
    assert_eq!(spec["attachRequired"], true);
    assert_eq!(spec["podInfoOnMount"], false);
    assert_eq!(spec["storageCapacity"], false);
    assert_eq!(spec["requiresRepublish"], false);
    assert_eq!(spec["seLinuxMount"], false);
    assert_eq!(spec["fsGroupPolicy"], "ReadWriteOnceWithFSType");
    assert_eq!(spec["volumeLifecycleModes"], json!(["Persistent"]));
    assert_eq!(created.body["metadata"]["generation"], 1);

    let one = format!("{uri}/csi.example.com");
    let reply = server
        .send("PATCH", &one, &json!({"spec": {"attachRequired": false}}))
        .await;
    assert_eq!(
        causes(&reply),
        ["spec.attachedRequired: Invalid value: false: field is immutable"]
    );
    let mutable = server
        .send("PATCH", &one, &json!({"spec": {"podInfoOnMount": true}}))
        .await;
    assert_eq!(mutable.status, StatusCode::OK, "{}", mutable.body);
    assert_eq!(mutable.body["metadata"]["generation"], 2);

    let table = server.table(&uri).await;
    assert_eq!(
        table["rows"][0]["cells"]
            .as_array()
            .map(|c| c[..7].to_vec()),
        Some(vec![
            json!("csi.example.com"),
            json!(true),
            json!(true),
            json!(false),
            json!("a"),
            json!(false),
            json!("Persistent")
        ])
    );
}

#[tokio::test]
async fn csi_nodes_and_capacities() {
    let server = Server::start().await;
    let uri = format!("{STORAGE}/csinodes");
    let node = json!({"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "csi.example.com", "nodeID": "n1", "topologyKeys": ["topology.kubernetes.io/zone"]},
    ]}});
    let created = server.send("POST", &uri, &node).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let changed = json!({"spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n2"}]}});
    let reply = server.send("PATCH", &format!("{uri}/n1"), &changed).await;
    let messages = causes(&reply);
    assert_eq!(messages.len(), 1);
    assert!(
        messages[0].starts_with("spec.drivers: Invalid value: "),
        "{messages:?}"
    );
    assert!(
        messages[0].ends_with(": field is immutable"),
        "{messages:?}"
    );
    let empty =
        json!({"metadata": {"name": "n2"}, "spec": {"drivers": [{"name": "", "nodeID": "x"}]}});
    let reply = server.send("POST", &uri, &empty).await;
    assert_eq!(causes(&reply)[0], "spec.drivers[0].name: Required value");
    let table = server.table(&uri).await;
    assert_eq!(table["rows"][0]["cells"][1], 1);

    let capacities = format!("{STORAGE}/namespaces/default/csistoragecapacities");
    let capacity =
        json!({"metadata": {"name": "cap"}, "storageClassName": "fast", "capacity": "10Gi"});
    let created = server.send("POST", &capacities, &capacity).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let reply = server
        .send(
            "PATCH",
            &format!("{capacities}/cap"),
            &json!({"storageClassName": "slow"}),
        )
        .await;
    assert_eq!(
        causes(&reply),
        [r#"storageClassName: Invalid value: "slow": field is immutable"#]
    );
    let table = server.table(&capacities).await;
    assert_eq!(table["rows"][0]["cells"], json!(["cap", "fast", "10Gi"]));
}

#[tokio::test]
async fn volume_attachments_have_status_and_a_fixed_spec() {
    let server = Server::start().await;
    let uri = format!("{STORAGE}/volumeattachments");
    let attachment = json!({
        "metadata": {"name": "va"},
        "spec": {"attacher": "csi.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}},
        "status": {"attached": true},
    });
    let created = server.send("POST", &uri, &attachment).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["status"], json!({"attached": false}));

    let one = format!("{uri}/va");
    let reply = server
        .send("PATCH", &one, &json!({"spec": {"nodeName": "n2"}}))
        .await;
    let messages = causes(&reply);
    assert!(
        messages[0].starts_with("spec: Invalid value: "),
        "{messages:?}"
    );
    assert!(
        messages[0].ends_with(": field is immutable"),
        "{messages:?}"
    );

    let status = server
        .send(
            "PATCH",
            &format!("{one}/status"),
            &json!({"status": {"attached": true}}),
        )
        .await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.body);
    let bad = server
        .send(
            "PATCH",
            &format!("{one}/status"),
            &json!({"status": {"attachError": {"errorCode": -1}}}),
        )
        .await;
    assert_eq!(
        causes(&bad),
        [
            "status.attachError.errorCode: Invalid value: -1: must be between 0 and 2147483647, inclusive"
        ]
    );

    let missing = json!({"metadata": {"name": "nosource"}, "spec": {"attacher": "csi.example.com", "nodeName": "n1", "source": {}}});
    let reply = server.send("POST", &uri, &missing).await;
    assert_eq!(
        causes(&reply),
        [
            "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName"
        ]
    );

    let table = server.table(&uri).await;
    assert_eq!(
        table["rows"][0]["cells"]
            .as_array()
            .map(|c| c[..5].to_vec()),
        Some(vec![
            json!("va"),
            json!("csi.example.com"),
            json!("pv1"),
            json!("n1"),
            json!(true)
        ])
    );
}
