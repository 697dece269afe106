//! The Endpoints and EndpointSlice controllers end to end: pods placed by hand on a node
//! created by hand, their IPs and readiness patched in as a kubelet would.

use k8s_openapi::api::core::v1::{Endpoints, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::DeleteParams;

use super::*;

/// A pod of `app` on `node` with the container port `http` 8080.
fn backend(name: &str, app: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {
            "nodeName": node,
            "containers": [{
                "name": "c", "image": "registry.example/web:1",
                "ports": [{"name": "http", "containerPort": 8080}],
            }],
        },
    }))
    .expect("a Pod")
}

/// Plays the kubelet: the pod runs at `ip`, Ready or not.
async fn set_status(pods: &Api<Pod>, name: &str, ip: &str, ready: bool) {
    let patch = json!({"status": {
        "phase": "Running",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "conditions": [{
            "type": "Ready", "status": if ready { "True" } else { "False" },
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch the pod's status");
}

/// The ready and not-ready IPs of the Endpoints, across subsets, sorted.
fn addresses(ep: &Endpoints) -> (Vec<String>, Vec<String>) {
    let mut ready = Vec::new();
    let mut not_ready = Vec::new();
    for s in ep.subsets.iter().flatten() {
        ready.extend(s.addresses.iter().flatten().map(|a| a.ip.clone()));
        not_ready.extend(s.not_ready_addresses.iter().flatten().map(|a| a.ip.clone()));
    }
    ready.sort();
    not_ready.sort();
    (ready, not_ready)
}

/// The Endpoints `name` (labelled app=`name`) once `done` holds.
async fn wait_endpoints(
    api: &Api<Endpoints>,
    name: &str,
    what: &str,
    done: impl Fn(&Endpoints) -> bool,
) -> Endpoints {
    let got = wait_objects(api, name, what, |m| m.get(name).is_some_and(&done)).await;
    got[name].clone()
}

/// The endpoints of the slices of `app`: pod name -> (ready, serving, terminating).
fn slice_endpoints(slices: &BTreeMap<String, EndpointSlice>) -> BTreeMap<String, [bool; 3]> {
    slices
        .values()
        .flat_map(|s| s.endpoints.iter().flatten())
        .map(|e| {
            let c = e.conditions.clone().unwrap_or_default();
            let name = e.target_ref.as_ref().and_then(|r| r.name.clone());
            (
                name.unwrap_or_default(),
                [
                    c.ready.unwrap_or(false),
                    c.serving.unwrap_or(false),
                    c.terminating.unwrap_or(false),
                ],
            )
        })
        .collect()
}

fn conditions(list: &[(&str, [bool; 3])]) -> BTreeMap<String, [bool; 3]> {
    list.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_and_slices_follow_pods() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();

    // A Service without a selector and its hand-written Endpoints: never touched.
    let manual: Service = serde_json::from_value(json!({
        "metadata": {"name": "ep-manual", "labels": {"app": "ep-manual"}},
        "spec": {"ports": [{"port": 80, "targetPort": 9000}]},
    }))
    .unwrap();
    services.create(&pp, &manual).await.expect("ep-manual");
    let manual_ep: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "ep-manual", "labels": {"app": "ep-manual"}},
        "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 9000}]}],
    }))
    .unwrap();
    let manual_ep = endpoints.create(&pp, &manual_ep).await.expect("Endpoints");

    // A node in zone-a, and two pods on it: ep-a ready, ep-b not.
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "ep-node", "labels": {
            "kubernetes.io/hostname": "ep-node",
            "topology.kubernetes.io/zone": "zone-a",
        }},
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&pp, &node)
        .await
        .expect("node");
    for name in ["ep-a", "ep-b"] {
        pods.create(&pp, &backend(name, "ep-backend", "ep-node"))
            .await
            .expect("pod");
    }
    set_status(&pods, "ep-a", "10.244.0.11", true).await;
    set_status(&pods, "ep-b", "10.244.0.12", false).await;

    // The Service targets the port by name; a second one publishes not-ready pods.
    for (name, publish) in [("ep-web", false), ("ep-pub", true)] {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {
                "selector": {"app": "ep-backend"},
                "publishNotReadyAddresses": publish,
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
            },
        }))
        .unwrap();
        services.create(&pp, &svc).await.expect("service");
    }
    let svc_uid = services
        .get("ep-web")
        .await
        .expect("get")
        .metadata
        .uid
        .expect("uid");

    let want = |r: &[&str], n: &[&str]| (strings(r), strings(n));
    let ep = wait_endpoints(&endpoints, "ep-web", "ep-a ready, ep-b not", |e| {
        addresses(e) == want(&["10.244.0.11"], &["10.244.0.12"])
    })
    .await;
    let subset = &ep.subsets.as_ref().expect("subsets")[0];
    let port = &subset.ports.as_ref().expect("ports")[0];
    assert_eq!(
        (port.name.as_deref(), port.port, port.protocol.as_deref()),
        (Some("http"), 8080, Some("TCP"))
    );
    let a = &subset.addresses.as_ref().expect("addresses")[0];
    assert_eq!(a.node_name.as_deref(), Some("ep-node"));
    let r = a.target_ref.as_ref().expect("targetRef");
    assert_eq!(
        (r.kind.as_deref(), r.name.as_deref()),
        (Some("Pod"), Some("ep-a"))
    );
    let labels = ep.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("endpoints.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("endpoint-controller")
    );
    let annotations = ep.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations.contains_key("endpoints.kubernetes.io/last-change-trigger-time"),
        "{annotations:?}"
    );

    let got = wait_objects(&slices, "ep-web", "one slice of ep-web", |m| {
        slice_endpoints(m)
            == conditions(&[
                ("ep-a", [true, true, false]),
                ("ep-b", [false, false, false]),
            ])
    })
    .await;
    assert_eq!(got.len(), 1, "{got:?}");
    let (slice_name, slice) = got.iter().next().expect("a slice");
    assert!(slice_name.starts_with("ep-web-"), "{slice_name}");
    assert_eq!(slice.address_type, "IPv4");
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["kubernetes.io/service-name"], "ep-web");
    assert_eq!(
        labels["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    let owner = &slice.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.uid.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("Service", svc_uid.as_str(), Some(true), Some(true))
    );
    let port = &slice.ports.as_ref().expect("ports")[0];
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("http"), Some(8080))
    );
    for e in slice.endpoints.iter().flatten() {
        assert_eq!(e.node_name.as_deref(), Some("ep-node"));
        assert_eq!(e.zone.as_deref(), Some("zone-a"));
    }

    // publishNotReadyAddresses: both listed as ready; the slice says ep-b is not serving.
    wait_endpoints(&endpoints, "ep-pub", "both published", |e| {
        addresses(e) == want(&["10.244.0.11", "10.244.0.12"], &[])
    })
    .await;
    wait_objects(&slices, "ep-pub", "ep-pub's slice", |m| {
        slice_endpoints(m)
            == conditions(&[
                ("ep-a", [true, true, false]),
                ("ep-b", [true, false, false]),
            ])
    })
    .await;

    // ep-b becomes ready.
    set_status(&pods, "ep-b", "10.244.0.12", true).await;
    wait_endpoints(&endpoints, "ep-web", "both ready", |e| {
        addresses(e) == want(&["10.244.0.11", "10.244.0.12"], &[])
    })
    .await;
    let got = wait_objects(&slices, "ep-web", "both ready in the slice", |m| {
        slice_endpoints(m)
            == conditions(&[("ep-a", [true, true, false]), ("ep-b", [true, true, false])])
    })
    .await;
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        [slice_name],
        "updated in place"
    );

    // ep-a is deleted at once: it goes.
    pods.delete("ep-a", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete ep-a");
    wait_endpoints(&endpoints, "ep-web", "ep-a gone", |e| {
        addresses(e) == want(&["10.244.0.12"], &[])
    })
    .await;
    wait_objects(&slices, "ep-web", "ep-a gone from the slice", |m| {
        slice_endpoints(m) == conditions(&[("ep-b", [true, true, false])])
    })
    .await;

    // ep-b is deleted gracefully and, with no kubelet, stays terminating: out of the
    // Endpoints, terminating (serving, not ready) in the slice.
    pods.delete("ep-b", &DeleteParams::default())
        .await
        .expect("delete ep-b");
    wait_endpoints(&endpoints, "ep-web", "ep-b out", |e| {
        addresses(e) == want(&[], &[])
    })
    .await;
    wait_objects(&slices, "ep-web", "ep-b terminating", |m| {
        slice_endpoints(m) == conditions(&[("ep-b", [false, true, true])])
    })
    .await;

    // The Service goes: its Endpoints with it, its slices through the garbage collector.
    services
        .delete("ep-web", &DeleteParams::default())
        .await
        .expect("delete ep-web");
    wait_objects(
        &endpoints,
        "ep-web",
        "no Endpoints of ep-web",
        BTreeMap::is_empty,
    )
    .await;
    wait_objects(&slices, "ep-web", "no slices of ep-web", BTreeMap::is_empty).await;

    // The hand-written Endpoints were left as they were, and got no slice.
    let now = endpoints.get("ep-manual").await.expect("ep-manual");
    assert_eq!(
        now.metadata.resource_version, manual_ep.metadata.resource_version,
        "{now:?}"
    );
    let managed = slices
        .list(&kube::api::ListParams::default().labels(
            "kubernetes.io/service-name=ep-manual,\
             endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io",
        ))
        .await
        .expect("list");
    assert!(managed.items.is_empty(), "{:?}", managed.items);
    let log = cm.log();
    assert!(!log.contains("panicked"), "{log}");
}
