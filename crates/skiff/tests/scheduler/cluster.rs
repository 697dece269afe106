//! A cluster for one scheduler scenario: `skiff apiserver` (SQLite), `skiff scheduler`
//! against it, fake Nodes (nothing runs their pods) and helpers that wait, by watching,
//! for a pod to be bound or to be reported unschedulable.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::TryStreamExt as _;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::watcher::{self, Event as WatchEvent};
use serde_json::{Value, json};
use skiff_testkit::{ApiServer, ApiServerOptions, Backend, Scheduler};

/// How long a pod may take to be bound or reported.
pub const WAIT: Duration = Duration::from_secs(30);

/// An API server, a scheduler and a namespace for the scenario's pods.
pub struct Cluster {
    // Field order: the scheduler stops before the API server.
    pub sched: Scheduler,
    pub api: ApiServer,
    pub client: kube::Client,
    pub ns: String,
}

impl Cluster {
    /// Starts both processes; `args` go to `skiff scheduler` (after `--leader-elect=false`
    /// unless they name `--leader-elect`).
    pub async fn start(args: &[&str]) -> Cluster {
        let api = ApiServer::start(ApiServerOptions::new(
            env!("CARGO_BIN_EXE_skiff"),
            Backend::Sqlite,
        ))
        .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
        let mut all = Vec::new();
        if !args.iter().any(|a| a.starts_with("--leader-elect")) {
            all.push("--leader-elect=false");
        }
        all.extend_from_slice(args);
        let sched = Scheduler::start(env!("CARGO_BIN_EXE_skiff"), &api.kubeconfig(), &all)
            .unwrap_or_else(|e| panic!("start skiff scheduler: {e:#}"));
        let client = api.client().await.expect("a client of the API server");
        Cluster {
            sched,
            api,
            client,
            ns: "default".to_owned(),
        }
    }

    /// The pods of the scenario's namespace.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// The nodes.
    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Creates any object from its manifest (apiVersion and kind given) with `kubectl
    /// create`, failing the test with kubectl's output if it is refused.
    pub fn kubectl_create(&self, manifest: &Value) {
        let out = self.kubectl_stdin(&["create", "-f", "-"], manifest);
        assert!(
            out.status.success(),
            "kubectl create {manifest}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs kubectl 1.33 with `args` and `manifest` on stdin.
    pub fn kubectl_stdin(&self, args: &[&str], manifest: &Value) -> std::process::Output {
        use std::io::Write as _;
        let mut cmd = self.api.kubectl_command(33);
        cmd.args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("spawn kubectl");
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(manifest.to_string().as_bytes())
                .expect("write kubectl's stdin");
        }
        child.wait_with_output().expect("wait for kubectl")
    }

    /// Runs kubectl 1.33 with `args`; its output, the test failing when it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = self.api.kubectl(33, args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Creates a Ready node with `cpu`, `memory` and `pods` allocatable, `labels` (plus
    /// `kubernetes.io/hostname`) and `taints`, and optional extra `status` fields.
    pub async fn node(
        &self,
        name: &str,
        cpu: &str,
        memory: &str,
        pods: &str,
        labels: &[(&str, &str)],
        taints: Value,
    ) {
        self.node_with(name, cpu, memory, pods, labels, taints, json!({}))
            .await;
    }

    /// [`Cluster::node`] with extra status fields merged (`images`, ...).
    #[allow(clippy::too_many_arguments)]
    pub async fn node_with(
        &self,
        name: &str,
        cpu: &str,
        memory: &str,
        pods: &str,
        labels: &[(&str, &str)],
        taints: Value,
        extra_status: Value,
    ) {
        let mut all: BTreeMap<&str, &str> = labels.iter().copied().collect();
        all.insert("kubernetes.io/hostname", name);
        let resources = json!({"cpu": cpu, "memory": memory, "pods": pods});
        let mut status = json!({
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        });
        if let (Some(s), Some(extra)) = (status.as_object_mut(), extra_status.as_object()) {
            for (k, v) in extra {
                s.insert(k.clone(), v.clone());
            }
        }
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": all},
            "spec": {"taints": taints},
            // A node is created with its status, as the kubelet registers it: the scheduler
            // never sees it without allocatable resources.
            "status": status,
        }))
        .expect("a node");
        self.nodes()
            .create(&PostParams::default(), &node)
            .await
            .unwrap_or_else(|e| panic!("create node {name}: {e}"));
    }

    /// Creates a pod from `manifest` (metadata.name given; containers default to one
    /// `pause` container when the manifest has no `spec.containers`).
    pub async fn pod(&self, manifest: Value) -> Pod {
        let mut manifest = manifest;
        if manifest["spec"]["containers"].is_null() {
            manifest["spec"]["containers"] =
                json!([{"name": "c", "image": "registry.k8s.io/pause:3.10"}]);
        }
        if let Some(requests) = manifest["requests"].as_object().cloned() {
            manifest["spec"]["containers"][0]["resources"] = json!({"requests": requests});
            if let Some(m) = manifest.as_object_mut() {
                m.remove("requests");
            }
        }
        let pod: Pod = serde_json::from_value(manifest.clone())
            .unwrap_or_else(|e| panic!("a pod manifest {manifest}: {e}"));
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("create pod {manifest}: {e}"))
    }

    /// Deletes a pod at once (grace period 0: no kubelet serves the fake nodes).
    pub async fn delete_pod(&self, name: &str) {
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        self.pods()
            .delete(name, &now)
            .await
            .unwrap_or_else(|e| panic!("delete pod {name}: {e}"));
    }

    /// Watches the pod until `done` returns Some, failing the test after [`WAIT`] with
    /// the pod and the scheduler's log.
    pub async fn wait_pod<T>(
        &self,
        name: &str,
        what: &str,
        mut done: impl FnMut(&Pod) -> Option<T>,
    ) -> T {
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let stream = watcher::watcher(self.pods(), config);
        futures::pin_mut!(stream);
        let mut last: Option<Pod> = None;
        let waited = tokio::time::timeout(WAIT, async {
            while let Some(event) = stream.try_next().await.expect("watch the pod") {
                if let WatchEvent::Apply(pod) | WatchEvent::InitApply(pod) = event {
                    if let Some(t) = done(&pod) {
                        return Some(t);
                    }
                    last = Some(pod);
                }
            }
            None
        })
        .await;
        match waited {
            Ok(Some(t)) => t,
            _ => panic!(
                "pod {name} never {what} within {WAIT:?}; last seen: {}\nscheduler log (tail):\n{}",
                serde_json::to_string(&last.map(|p| p.status)).unwrap_or_default(),
                self.sched.log_tail()
            ),
        }
    }

    /// The node the pod is bound to, once it is.
    pub async fn wait_bound(&self, name: &str) -> String {
        self.wait_pod(name, "was bound", |p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty())
        })
        .await
    }

    /// Waits until the pod's `PodScheduled` condition is `False` with reason
    /// `Unschedulable` and `message`; fails with the last message seen.
    pub async fn wait_unschedulable(&self, name: &str, message: &str) {
        let mut seen = String::new();
        let found = tokio::time::timeout(
            WAIT,
            self.wait_pod(name, "was reported unschedulable", |p| {
                let c = unschedulable_condition(p)?;
                seen = c.clone();
                (c == message).then_some(())
            }),
        )
        .await;
        assert!(
            found.is_ok(),
            "pod {name}: expected the message\n  {message}\nlast seen\n  {seen}"
        );
    }

    /// The core/v1 Events about the pod `name`, oldest first.
    pub async fn events_of(&self, name: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        let mut list = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
            .expect("list events")
            .items;
        list.sort_by_key(|e| {
            e.last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or_else(|| e.event_time.as_ref().map(|t| t.0))
        });
        list
    }

    /// Waits, watching Events, until one with `reason` about pod `name` exists; its
    /// message.
    pub async fn wait_event(&self, name: &str, reason: &str) -> String {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        let config = watcher::Config::default().fields(&format!("involvedObject.name={name}"));
        let stream = watcher::watcher(events, config);
        futures::pin_mut!(stream);
        let found = tokio::time::timeout(WAIT, async {
            while let Some(event) = stream.try_next().await.expect("watch events") {
                if let WatchEvent::Apply(e) | WatchEvent::InitApply(e) = event
                    && e.reason.as_deref() == Some(reason)
                {
                    return e.message.unwrap_or_default();
                }
            }
            String::new()
        })
        .await;
        found.unwrap_or_else(|_| {
            panic!(
                "no {reason} event for pod {name} within {WAIT:?}; scheduler log:\n{}",
                self.sched.log_tail()
            )
        })
    }

    /// Every pod of the namespace with its node ("" when pending).
    pub async fn placements(&self) -> BTreeMap<String, String> {
        self.pods()
            .list(&ListParams::default())
            .await
            .expect("list pods")
            .items
            .into_iter()
            .map(|p| {
                let node = p.spec.and_then(|s| s.node_name).unwrap_or_default();
                (p.metadata.name.unwrap_or_default(), node)
            })
            .collect()
    }
}

/// The message of the pod's `PodScheduled=False` condition with reason `Unschedulable`.
pub fn unschedulable_condition(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
        .map(|c| c.message.clone().unwrap_or_default())
}
