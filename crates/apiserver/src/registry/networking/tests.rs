//! networking.k8s.io/v1 through the REST layer: create and get, defaults, validation
//! messages, immutable fields, status subresources and table rows.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::registry::testing::{Server, causes};

const NETWORKING: &str = "/apis/networking.k8s.io/v1";

#[tokio::test]
async fn ingresses_validate_keep_status_apart_and_print() {
    let server = Server::start().await;
    let uri = format!("{NETWORKING}/namespaces/default/ingresses");
    let ingress = json!({
        "metadata": {"name": "web"},
        "spec": {
            "ingressClassName": "nginx",
            "tls": [{"hosts": ["a.example.com"], "secretName": "tls"}],
            "rules": [
                {"host": "a.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}},
                {"host": "b.example.com"}, {"host": "c.example.com"}, {"host": "d.example.com"},
            ],
        },
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
    });
    let created = server.send("POST", &uri, &ingress).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["metadata"]["generation"], 1);
    assert_eq!(
        created.body["status"],
        json!({"loadBalancer": {}}),
        "status is reset on create"
    );
    let got = server
        .send("GET", &format!("{uri}/web"), &Value::Null)
        .await;
    assert_eq!(got.body["spec"]["ingressClassName"], "nginx");

    let bad = json!({"metadata": {"name": "bad"}, "spec": {"rules": [{"http": {"paths": [
        {"path": "/", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
    ]}}]}});
    let reply = server.send("POST", &uri, &bad).await;
    assert_eq!(
        causes(&reply),
        ["spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"]
    );

    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example.com"}]}}});
    let reply = server
        .send("PATCH", &format!("{uri}/web/status"), &status)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let bad_status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "not-an-ip"}]}}});
    let reply = server
        .send("PATCH", &format!("{uri}/web/status"), &bad_status)
        .await;
    assert_eq!(
        causes(&reply),
        [
            r#"status.loadBalancer.ingress[0].ip: Invalid value: "not-an-ip": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"#
        ]
    );

    let table = server.table(&uri).await;
    assert_eq!(
        table["rows"][0]["cells"]
            .as_array()
            .map(|c| c[..5].to_vec()),
        Some(vec![
            json!("web"),
            json!("nginx"),
            json!("a.example.com,b.example.com,c.example.com + 1 more..."),
            json!("192.0.2.1,lb.example.com"),
            json!("80, 443"),
        ])
    );
}

#[tokio::test]
async fn ingress_classes_default_scope_and_fix_the_controller() {
    let server = Server::start().await;
    let uri = format!("{NETWORKING}/ingressclasses");
    let class = json!({
        "metadata": {"name": "nginx", "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
        "spec": {"controller": "k8s.io/ingress-nginx", "parameters": {"apiGroup": "k8s.example.com", "kind": "Params", "name": "p"}},
    });
    let created = server.send("POST", &uri, &class).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["spec"]["parameters"]["scope"], "Cluster");
    let reply = server
        .send(
            "PATCH",
            &format!("{uri}/nginx"),
            &json!({"spec": {"controller": "example.com/other"}}),
        )
        .await;
    assert_eq!(
        causes(&reply),
        [r#"spec.controller: Invalid value: "example.com/other": field is immutable"#]
    );
    let table = server.table(&uri).await;
    assert_eq!(
        table["rows"][0]["cells"]
            .as_array()
            .map(|c| c[..3].to_vec()),
        Some(vec![
            json!("nginx"),
            json!("k8s.io/ingress-nginx"),
            json!("Params.k8s.example.com/p")
        ])
    );
}

#[tokio::test]
async fn network_policies_default_and_validate() {
    let server = Server::start().await;
    let uri = format!("{NETWORKING}/namespaces/default/networkpolicies");
    let policy = json!({
        "metadata": {"name": "db"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "db"}},
            "ingress": [{"ports": [{"port": 5432}], "from": [{"podSelector": {}}]}],
        },
    });
    let created = server.send("POST", &uri, &policy).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let spec = &created.body["spec"];
    assert_eq!(spec["policyTypes"], json!(["Ingress"]));
    assert_eq!(spec["ingress"][0]["ports"][0]["protocol"], "TCP");

    let bad = json!({"metadata": {"name": "bad"}, "spec": {
        "podSelector": {},
        "egress": [{"ports": [{"port": 80, "endPort": 70, "protocol": "ICMP"}]}],
        "policyTypes": ["Egress", "Sideways"],
    }});
    let reply = server.send("POST", &uri, &bad).await;
    assert_eq!(
        causes(&reply),
        [
            r#"spec.egress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP""#,
            "spec.egress[0].ports[0].endPort: Invalid value: 80: must be greater than or equal to `port`",
            r#"spec.policyTypes[1]: Unsupported value: "Sideways": supported values: "Ingress", "Egress""#,
        ]
    );
    let table = server.table(&uri).await;
    assert_eq!(table["rows"][0]["cells"][1], "app=db");
}

#[tokio::test]
async fn service_cidrs_and_ip_addresses() {
    let server = Server::start().await;
    let cidrs = format!("{NETWORKING}/servicecidrs");
    let cidr = json!({"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.100.0.0/16"]}});
    let created = server.send("POST", &cidrs, &cidr).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let one = format!("{cidrs}/extra");
    let reply = server
        .send(
            "PATCH",
            &one,
            &json!({"spec": {"cidrs": ["10.101.0.0/16"]}}),
        )
        .await;
    assert_eq!(
        causes(&reply),
        [r#"spec.cidrs[0]: Invalid value: "10.101.0.0/16": field is immutable"#]
    );
    let dual = server
        .send(
            "PATCH",
            &one,
            &json!({"spec": {"cidrs": ["10.100.0.0/16", "fd00:100::/108"]}}),
        )
        .await;
    assert_eq!(dual.status, StatusCode::OK, "{}", dual.body);
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
        "lastTransitionTime": "2025-01-01T00:00:00Z", "reason": "", "message": ""}]}});
    let reply = server
        .send("PATCH", &format!("{one}/status"), &status)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["status"]["conditions"][0]["type"], "Ready");
    let bad = json!({"metadata": {"name": "bad"}, "spec": {"cidrs": ["10.1.0.1/16"]}});
    let reply = server.send("POST", &cidrs, &bad).await;
    assert_eq!(
        causes(&reply),
        [
            r#"spec.cidrs[0]: Invalid value: "10.1.0.1/16": must not have bits set beyond the prefix length"#
        ]
    );
    let table = server.table(&cidrs).await;
    assert_eq!(table["rows"][0]["cells"][1], "10.100.0.0/16,fd00:100::/108");

    let addresses = format!("{NETWORKING}/ipaddresses");
    let address = json!({"metadata": {"name": "10.100.0.10"}, "spec": {"parentRef": {
        "group": "", "resource": "services", "namespace": "default", "name": "web"}}});
    let created = server.send("POST", &addresses, &address).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let reply = server
        .send(
            "PATCH",
            &format!("{addresses}/10.100.0.10"),
            &json!({"spec": {"parentRef": {"name": "db"}}}),
        )
        .await;
    let messages = causes(&reply);
    assert!(
        messages[0].starts_with("spec.parentRef: Invalid value: ")
            && messages[0].ends_with("field is immutable"),
        "{messages:?}"
    );
    let noncanonical = json!({"metadata": {"name": "fd00:0::1"}, "spec": {"parentRef": {"resource": "services", "name": "web"}}});
    let reply = server.send("POST", &addresses, &noncanonical).await;
    assert_eq!(
        causes(&reply),
        [r#"metadata.name: Invalid value: "fd00:0::1": must be in canonical form ("fd00::1")"#]
    );
    let orphan = json!({"metadata": {"name": "10.100.0.11"}, "spec": {}});
    let reply = server.send("POST", &addresses, &orphan).await;
    assert_eq!(causes(&reply), ["spec.parentRef: Required value"]);
    let table = server.table(&addresses).await;
    assert_eq!(
        table["rows"][0]["cells"]
            .as_array()
            .map(|c| c[..2].to_vec()),
        Some(vec![json!("10.100.0.10"), json!("services/default/web")])
    );
}
