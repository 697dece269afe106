//! SIGKILL of `skiff apiserver` during a write load loses no acknowledged write, on SQLite
//! and on etcd, and the store it restarts on is consistent.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::apiserver::{Server, apiserver_cases};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const WRITERS: usize = 4;
/// The server is killed once this many creates were acknowledged (or after `LOAD_TIME`).
const ACKS_BEFORE_KILL: usize = 300;
const LOAD_TIME: Duration = Duration::from_secs(10);
const NAMESPACE: &str = "durability";

apiserver_cases! { sigkill_during_writes }

/// A create the server acknowledged (201): writer, sequence number, uid, resourceVersion.
#[derive(Debug, Clone)]
struct Ack {
    writer: usize,
    seq: usize,
    uid: String,
    resource_version: u64,
}

fn name(writer: usize, seq: usize) -> String {
    format!("w{writer}-{seq:06}")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn resource_version(cm: &ConfigMap) -> u64 {
    cm.metadata
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("numeric resourceVersion in {:?}", cm.metadata))
}

/// Creates `w<writer>-<seq>` one after the other until a create fails (the server is
/// gone), recording each acknowledged one.
async fn writer(cms: Api<ConfigMap>, writer: usize, acks: Arc<Mutex<Vec<Ack>>>) -> kube::Error {
    let mut seq = 0;
    loop {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name(writer, seq), "labels": {"writer": writer.to_string()}},
            "data": {"payload": "x".repeat(512)}
        }))
        .expect("configmap");
        match cms.create(&PostParams::default(), &cm).await {
            Ok(created) => {
                let ack = Ack {
                    writer,
                    seq,
                    uid: created.metadata.uid.clone().unwrap_or_default(),
                    resource_version: resource_version(&created),
                };
                acks.lock().expect("acks").push(ack);
            }
            Err(e) => return e,
        }
        seq += 1;
    }
}

fn sigkill_during_writes(mut server: Server) {
    let rt = runtime();
    let client = rt.block_on(server.client()).expect("kube client");
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("ns");
    rt.block_on(Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace))
        .expect("create the namespace");

    let acks = Arc::new(Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            rt.spawn(writer(
                Api::namespaced(client.clone(), NAMESPACE),
                w,
                acks.clone(),
            ))
        })
        .collect();
    let start = Instant::now();
    while acks.lock().expect("acks").len() < ACKS_BEFORE_KILL && start.elapsed() < LOAD_TIME {
        std::thread::sleep(Duration::from_millis(5));
    }
    server.kill9().expect("SIGKILL the API server");
    for handle in writers {
        let err = rt.block_on(handle).expect("writer task");
        eprintln!("writer stopped: {err}");
    }
    let acks = acks.lock().expect("acks").clone();
    assert!(
        acks.len() >= 50,
        "only {} creates acknowledged under load",
        acks.len()
    );

    // Each writer's acknowledged creates got increasing resourceVersions.
    let mut per_writer: BTreeMap<usize, Vec<&Ack>> = BTreeMap::new();
    for ack in &acks {
        per_writer.entry(ack.writer).or_default().push(ack);
    }
    for (w, list) in &per_writer {
        assert!(
            list.windows(2)
                .all(|p| p[0].resource_version < p[1].resource_version && p[0].seq + 1 == p[1].seq),
            "writer {w}: {list:?}"
        );
    }
    let max_acked = acks.iter().map(|a| a.resource_version).max().unwrap_or(0);

    server
        .restart()
        .expect("restart the API server on the same store");
    let client = rt
        .block_on(server.client())
        .expect("kube client after restart");
    let cms: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);

    // Everything stored, paged through: every ack is there, unchanged; anything else is a
    // writer's one create in flight at the kill (the next sequence number).
    let mut stored: BTreeMap<String, ConfigMap> = BTreeMap::new();
    let mut token: Option<String> = None;
    let list_version = loop {
        let mut params = ListParams::default().limit(100);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = rt.block_on(cms.list(&params)).expect("list after restart");
        let version: u64 = page
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .expect("list resourceVersion");
        for cm in page.items {
            let name = cm.metadata.name.clone().unwrap_or_default();
            assert!(
                stored.insert(name.clone(), cm).is_none(),
                "{name} listed twice"
            );
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break version;
        }
    };
    assert!(
        list_version >= max_acked,
        "list resourceVersion {list_version} < acknowledged {max_acked}"
    );
    let mut lost = Vec::new();
    for ack in &acks {
        match stored.remove(&name(ack.writer, ack.seq)) {
            Some(cm) => {
                assert_eq!(
                    cm.metadata.uid.as_deref(),
                    Some(ack.uid.as_str()),
                    "{ack:?}"
                );
                assert_eq!(resource_version(&cm), ack.resource_version, "{ack:?}");
            }
            None => lost.push(ack.clone()),
        }
    }
    assert!(
        lost.is_empty(),
        "{} acknowledged creates lost after SIGKILL: {lost:?}",
        lost.len()
    );
    for extra in stored.keys() {
        let in_flight = (0..WRITERS).any(|w| {
            let next = per_writer.get(&w).map_or(0, |l| l.len());
            *extra == name(w, next)
        });
        assert!(in_flight, "{extra} was never written");
    }

    // The store goes on: a new write gets a newer resourceVersion.
    let after: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "after-restart"}})).expect("cm");
    let created = rt
        .block_on(cms.create(&PostParams::default(), &after))
        .expect("create after restart");
    assert!(resource_version(&created) > list_version.max(max_acked));
    eprintln!(
        "{} on {}: {} creates acknowledged before SIGKILL, {} in flight and stored, none lost",
        server.backend().name(),
        server.port(),
        acks.len(),
        stored.len()
    );
}
