//! `skiff server` end to end: the API server, scheduler, controller manager and a real
//! kubelet on its embedded runtime in one process, on the busybox test image. A
//! Deployment runs, a Job completes, a failing Job stops at its backoffLimit, and each
//! component holds its own identity.

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node as KubeNode;
use skiff_testkit::{Node, NodeOptions, NodeRuntime, Registry};

use super::*;

/// Waits, by watching, until the object `name` of `api` satisfies `done`; it then.
async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, done: impl Fn(&K) -> bool) -> K
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let cond = move |o: Option<&K>| o.is_some_and(&done);
    let res = tokio::time::timeout(
        Duration::from_secs(90),
        kube::runtime::wait::await_condition(api.clone(), name, cond),
    )
    .await;
    match res {
        Ok(Ok(Some(o))) => o,
        other => panic!("timed out waiting for {what}: {other:?}"),
    }
}

fn job_condition(job: &Job, type_: &str) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| c.reason.clone().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skiff_server_runs_deployments_and_jobs_in_one_process() {
    let registry = Registry::start().expect("start the test registry");
    let busybox = skiff_testkit::busybox().expect("build the busybox image");
    let image = skiff_testkit::push(registry.host(), "skiff/busybox", "test", &busybox)
        .expect("push the busybox image");
    let node = Node::start_server(NodeOptions {
        skiff_bin: PathBuf::from(env!("CARGO_BIN_EXE_skiff")),
        extra_args: Vec::new(),
        runtime: NodeRuntime::Embedded,
    })
    .unwrap_or_else(|e| panic!("start skiff server: {e:#}"));
    let kubeconfig = node.kubeconfig().expect("a server's kubeconfig");
    let client = skiff_testkit::apiserver::client_for(&kubeconfig)
        .await
        .expect("a client");

    // The kubelet registers its Node, which becomes Ready.
    let nodes: Api<KubeNode> = Api::all(client.clone());
    wait_for(&nodes, &node.node_name(), "the node Ready", |n| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "sleepers"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "sleepers"}},
            "template": {
                "metadata": {"labels": {"app": "sleepers"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": image,
                        "command": ["sleep", "3600"]}],
                },
            },
        },
    }))
    .expect("a Deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create the Deployment");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job = |name: &str, command: &str, spec: serde_json::Value| -> Job {
        let mut j = json!({
            "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": image, "command": ["sh", "-c", command]}]}}},
        });
        if let (Some(dst), Some(src)) = (j["spec"].as_object_mut(), spec.as_object()) {
            dst.extend(src.clone());
        }
        serde_json::from_value(j).expect("a Job")
    };
    jobs.create(
        &PostParams::default(),
        &job(
            "five",
            "exit 0",
            json!({"completions": 5, "parallelism": 2}),
        ),
    )
    .await
    .expect("create job five");
    jobs.create(
        &PostParams::default(),
        &job("broken", "exit 3", json!({"backoffLimit": 1})),
    )
    .await
    .expect("create job broken");

    // Bad input the API server accepts but the kubelet refuses (an unsafe sysctl): the
    // pod fails with the kubelet's reason and the Job at its backoffLimit; nothing else
    // stops.
    let mut refused = job("refused", "exit 0", json!({"backoffLimit": 0}));
    if let Some(pod) = refused.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        pod.security_context = Some(
            serde_json::from_value(json!({
                "sysctls": [{"name": "kernel.msgmax", "value": "65536"}]
            }))
            .expect("a security context"),
        );
    }
    jobs.create(&PostParams::default(), &refused)
        .await
        .expect("create job refused");
    let d = wait_for(&deployments, "sleepers", "3 available replicas", |d| {
        d.status.as_ref().and_then(|s| s.available_replicas) == Some(3)
    })
    .await;
    assert_eq!(d.status.and_then(|s| s.ready_replicas), Some(3));
    let done = wait_for(&jobs, "five", "five Complete", |j| {
        job_condition(j, "Complete").is_some()
    })
    .await;
    assert_eq!(done.status.and_then(|s| s.succeeded), Some(5));
    let broken = wait_for(&jobs, "broken", "broken Failed", |j| {
        job_condition(j, "Failed").is_some()
    })
    .await;
    assert_eq!(
        job_condition(&broken, "Failed").as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(broken.status.and_then(|s| s.failed), Some(2));
    let refused = wait_for(&jobs, "refused", "refused Failed", |j| {
        job_condition(j, "Failed").is_some()
    })
    .await;
    assert_eq!(
        job_condition(&refused, "Failed").as_deref(),
        Some("BackoffLimitExceeded")
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let rejected = pods
        .list(&kube::api::ListParams::default().labels("job-name=refused"))
        .await
        .expect("list the refused Job's pods")
        .items;
    let reasons: Vec<Option<String>> = rejected
        .iter()
        .map(|p| p.status.as_ref().and_then(|s| s.reason.clone()))
        .collect();
    assert_eq!(reasons, [Some("SysctlForbidden".to_owned())]);

    // Every pod was placed on the node by the scheduler.
    for p in pods
        .list(&Default::default())
        .await
        .expect("list pods")
        .items
    {
        let on = p.spec.as_ref().and_then(|s| s.node_name.clone());
        assert_eq!(on, Some(node.node_name()), "{:?}", p.metadata.name);
    }
    // The scheduler and the controller manager lead under their own Leases, and the
    // kubelet renews its node's.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    for name in ["kube-scheduler", "kube-controller-manager"] {
        let lease = leases.get(name).await.expect("the lease");
        let holder = lease
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        assert!(!holder.is_empty(), "{name} has no holder");
    }
    let node_leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    // The kubelet creates it once its Node is registered, at its next renewal at the
    // latest (a quarter of the 40 s lease duration).
    let renewed = tokio::time::timeout(
        Duration::from_secs(40),
        kube::runtime::wait::await_condition(
            node_leases,
            &node.node_name(),
            |l: Option<&Lease>| {
                l.and_then(|l| l.spec.as_ref())
                    .is_some_and(|s| s.renew_time.is_some())
            },
        ),
    )
    .await;
    if !matches!(renewed, Ok(Ok(Some(_)))) {
        // What the kubelet's lease controller and the garbage collector said.
        let log = node.log();
        let said: Vec<&str> = log
            .lines()
            .filter(|l| l.to_lowercase().contains("lease") || l.contains("garbage"))
            .collect();
        panic!("no renewed node lease: {renewed:?}\n{}", said.join("\n"));
    }
    // The components call the API server in process: the server holds no TCP connection
    // to its own API port.
    let pid = node.pid().expect("the server runs");
    let port = node.server_port().expect("a server's port");
    assert_eq!(
        connections_to(pid, port),
        0,
        "connections to its own API port"
    );
    // Each component has its own certificate and kubeconfig beside the admin's.
    for file in [
        "scheduler.kubeconfig",
        "controller-manager.kubeconfig",
        "kubelet.kubeconfig",
    ] {
        assert!(node.dir().join("server").join(file).exists(), "{file}");
    }
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-nameopt", "compat", "-in"])
        .arg(node.dir().join("server/pki/kubelet-client.crt"))
        .output()
        .expect("run openssl");
    let subject = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        subject.contains(&format!("CN=system:node:{}", node.node_name()))
            && subject.contains("O=system:nodes"),
        "{subject}"
    );

    // Clean up through the API: the garbage collector removes the pods.
    kubectl_at(
        &kubeconfig,
        &["delete", "deployment", "sleepers", "--cascade=foreground"],
    );
    kubectl_at(&kubeconfig, &["delete", "jobs", "--all"]);
    wait_objects(
        &pods,
        "sleepers",
        "the Deployment's pods gone",
        BTreeMap::is_empty,
    )
    .await;
    // Every pod goes, by watching until the list is empty.
    let stream = watcher::watcher(pods.clone(), watcher::Config::default());
    futures::pin_mut!(stream);
    let mut seen: BTreeMap<String, Pod> = BTreeMap::new();
    let gone = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(ev) = stream.try_next().await.expect("watch pods") {
            match ev {
                WatchEvent::Init => seen.clear(),
                WatchEvent::InitApply(p) | WatchEvent::Apply(p) => {
                    seen.insert(p.metadata.name.clone().unwrap_or_default(), p);
                }
                WatchEvent::Delete(p) => {
                    seen.remove(&p.metadata.name.clone().unwrap_or_default());
                }
                WatchEvent::InitDone => {}
            }
            if seen.is_empty() {
                return;
            }
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "pods left: {:?}; log:\n{}",
        seen.keys(),
        node.log()
    );
}

fn kubectl_at(kubeconfig: &std::path::Path, args: &[&str]) {
    let out = Command::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A second real kubelet joins `skiff server`; its pod (placed there by a preferred node
/// affinity, tolerating an unreachable node for 2 s) is evicted once the kubelet is
/// SIGKILLed and the node goes silent past the grace period, and the Deployment's
/// replacement runs on the server's own node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_kubelets_pods_are_evicted_and_replaced_elsewhere() {
    let registry = Registry::start().expect("start the test registry");
    let busybox = skiff_testkit::busybox().expect("build the busybox image");
    let image = skiff_testkit::push(registry.host(), "skiff/busybox", "test", &busybox)
        .expect("push the busybox image");
    let server = Node::start_server(NodeOptions {
        skiff_bin: PathBuf::from(env!("CARGO_BIN_EXE_skiff")),
        extra_args: vec!["--node-monitor-grace-period".into(), "20s".into()],
        runtime: NodeRuntime::Embedded,
    })
    .unwrap_or_else(|e| panic!("start skiff server: {e:#}"));
    let kubeconfig = server.kubeconfig().expect("a server's kubeconfig");
    let mut worker = Node::start(NodeOptions {
        skiff_bin: PathBuf::from(env!("CARGO_BIN_EXE_skiff")),
        extra_args: vec!["--kubeconfig".into(), kubeconfig.display().to_string()],
        runtime: NodeRuntime::Embedded,
    })
    .unwrap_or_else(|e| panic!("start the second kubelet: {e:#}"));
    let client = skiff_testkit::apiserver::client_for(&kubeconfig)
        .await
        .expect("a client");
    let nodes: Api<KubeNode> = Api::all(client.clone());
    let ready = |status: &'static str| {
        move |n: &KubeNode| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == status))
        }
    };
    wait_for(
        &nodes,
        &server.node_name(),
        "the server's node Ready",
        ready("True"),
    )
    .await;
    wait_for(
        &nodes,
        &worker.node_name(),
        "the worker Ready",
        ready("True"),
    )
    .await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "mover"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "mover"}},
            "template": {
                "metadata": {"labels": {"app": "mover"}},
                "spec": {
                    // Long enough that the evicted pod stays Terminating while its node
                    // is silent; the container ends at SIGTERM.
                    "terminationGracePeriodSeconds": 30,
                    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "preference": {"matchExpressions": [{"key": "kubernetes.io/hostname",
                            "operator": "In", "values": [worker.node_name()]}]},
                    }]}},
                    "tolerations": [
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                         "effect": "NoExecute", "tolerationSeconds": 2},
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                         "effect": "NoExecute", "tolerationSeconds": 2},
                    ],
                    "containers": [{"name": "c", "image": image, "command":
                        ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}],
                },
            },
        },
    }))
    .expect("a Deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create the Deployment");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let running_on = |node: String| {
        move |m: &BTreeMap<String, Pod>| {
            m.values().any(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
        }
    };
    let first = wait_objects(
        &pods,
        "mover",
        "the pod Running on the worker",
        running_on(worker.node_name()),
    )
    .await;
    let evicted = first.keys().next().cloned().expect("the worker's pod");

    // The worker's kubelet dies; its Node goes Unknown after the 20 s grace period.
    worker.kill9().expect("SIGKILL the worker's kubelet");
    let silent = std::time::Instant::now();
    wait_for(
        &nodes,
        &worker.node_name(),
        "the worker Unknown",
        ready("Unknown"),
    )
    .await;
    let unknown_after = silent.elapsed();
    assert!(
        unknown_after >= Duration::from_secs(10),
        "Unknown after {unknown_after:?}: sooner than the grace period allows"
    );
    wait_for(
        &nodes,
        &worker.node_name(),
        "the unreachable NoExecute taint",
        |n| {
            n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| {
                    t.iter().any(|t| {
                        t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute"
                    })
                })
        },
    )
    .await;
    // Its pod is evicted after its 2 s toleration and replaced on the server's node.
    wait_objects(
        &pods,
        "mover",
        "the replacement Running on the server's node",
        running_on(server.node_name()),
    )
    .await;
    let old = pods.get(&evicted).await.expect("the evicted pod");
    assert!(old.metadata.deletion_timestamp.is_some(), "{old:?}");
    let target = old
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget");
    assert_eq!(
        target.and_then(|c| c.reason).as_deref(),
        Some("DeletionByTaintManager")
    );

    // The worker comes back, confirms its pod's end; everything goes.
    worker.restart().expect("restart the worker's kubelet");
    kubectl_at(&kubeconfig, &["delete", "deployment", "mover"]);
    wait_objects(&pods, "mover", "the pods gone", BTreeMap::is_empty).await;
    kubectl_at(&kubeconfig, &["delete", "node", &worker.node_name()]);
}

/// Established TCP connections that process `pid` holds to `port` (its sockets'
/// inodes in `/proc/<pid>/net/tcp{,6}` with that remote port).
fn connections_to(pid: u32, port: u16) -> usize {
    let inodes: std::collections::BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the server's fds")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut n = 0;
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let remote = f.get(2).and_then(|r| r.rsplit_once(':')).map(|(_, p)| p);
            let remote = remote.and_then(|p| u16::from_str_radix(p, 16).ok());
            if remote == Some(port)
                && f.get(3) == Some(&"01")
                && f.get(9).is_some_and(|i| inodes.contains(*i))
            {
                n += 1;
            }
        }
    }
    n
}
