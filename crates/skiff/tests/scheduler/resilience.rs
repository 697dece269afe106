//! A scheduler SIGKILLed amid 500 pending pods, two schedulers under leader election,
//! and bad input that must not stop the scheduler.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher::{self, Event as WatchEvent};
use serde_json::json;
use skiff_testkit::Scheduler;

use super::cluster::{Cluster, WAIT};
use super::placement::{Expect, cpu_pod, expect};

/// Waits, watching the namespace's pods, until at least `n` are bound.
async fn wait_bound_count(c: &Cluster, n: usize, within: Duration) -> usize {
    let stream = watcher::watcher(c.pods(), watcher::Config::default());
    futures::pin_mut!(stream);
    let mut bound: HashMap<String, String> = HashMap::new();
    let waited = tokio::time::timeout(within, async {
        while let Some(event) = stream.try_next().await.expect("watch pods") {
            if let WatchEvent::Apply(p) | WatchEvent::InitApply(p) = event
                && let Some(node) = p.spec.and_then(|s| s.node_name).filter(|n| !n.is_empty())
            {
                bound.insert(p.metadata.name.unwrap_or_default(), node);
                if bound.len() >= n {
                    return;
                }
            }
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "only {} of {n} pods bound within {within:?}; scheduler log:\n{}",
        bound.len(),
        c.sched.log_tail()
    );
    bound.len()
}

/// 500 pods exactly fill 10 nodes; the scheduler is SIGKILLed after 100 bindings and
/// restarted: every pod ends bound once and no node is over-committed.
pub async fn sigkill_amid_500_pods() {
    let mut c = Cluster::start(&["--kube-api-qps=500", "--kube-api-burst=500"]).await;
    for i in 0..10 {
        c.node(&format!("n{i}"), "5", "64Gi", "110", &[], json!([]))
            .await;
    }
    let pods = c.pods();
    futures::stream::iter(0..500)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("p{i:03}")},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m"}}}]},
                }))
                .expect("a pod");
                pods.create(&PostParams::default(), &pod).await.map(drop)
            }
        })
        .buffer_unordered(16)
        .try_for_each(|()| async { Ok(()) })
        .await
        .expect("create 500 pods");
    wait_bound_count(&c, 100, WAIT).await;
    c.sched.kill9().expect("SIGKILL the scheduler");
    c.sched.restart().expect("restart the scheduler");
    wait_bound_count(&c, 500, Duration::from_secs(120)).await;
    let placements = c.placements().await;
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for node in placements.values() {
        *per_node.entry(node.clone()).or_default() += 1;
    }
    assert_eq!(per_node.len(), 10, "{per_node:?}");
    assert!(
        per_node.values().all(|n| *n == 50),
        "every node holds exactly 5 CPUs of pods: {per_node:?}"
    );
    // Bound exactly once: no pod has two Scheduled events.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(c.client.clone(), "default");
    let mut scheduled: HashMap<String, usize> = HashMap::new();
    for e in events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
    {
        if e.reason.as_deref() == Some("Scheduled") {
            *scheduled
                .entry(e.involved_object.name.unwrap_or_default())
                .or_default() += e.count.unwrap_or(1).max(1) as usize;
        }
    }
    let twice: Vec<_> = scheduled.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "pods scheduled twice: {twice:?}");
    assert!(c.sched.try_wait().expect("poll the scheduler").is_none());
}

fn lease_holder(lease: &Lease) -> String {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default()
}

/// Whether the scheduler's metrics say it leads.
fn leads(s: &Scheduler) -> bool {
    s.get("/metrics")
        .map(|(_, body)| {
            body.lines()
                .any(|l| l.starts_with("leader_election_master_status") && l.ends_with(" 1"))
        })
        .unwrap_or(false)
}

/// Two schedulers with `--leader-elect`: only the leader binds; when it is killed the
/// other takes the Lease over within the lease duration.
pub async fn leader_election_fails_over() {
    let args = [
        "--leader-elect=true",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
    ];
    let mut c = Cluster::start(&args).await;
    let mut second = Scheduler::start(env!("CARGO_BIN_EXE_skiff"), &c.api.kubeconfig(), &args)
        .unwrap_or_else(|e| panic!("start the second scheduler: {e:#}"));
    c.node("a", "4", "8Gi", "10", &[], json!([])).await;
    expect(&c, cpu_pod("first", "100m"), Expect::Node("a")).await;
    let leases: Api<Lease> = Api::namespaced(c.client.clone(), "kube-system");
    let lease = leases
        .get("kube-scheduler")
        .await
        .expect("the kube-scheduler Lease");
    let holder = lease_holder(&lease);
    assert!(!holder.is_empty(), "{lease:?}");
    let (first_leads, second_leads) = (leads(&c.sched), leads(&second));
    assert!(
        first_leads ^ second_leads,
        "exactly one leader: first {first_leads}, second {second_leads}"
    );
    let attempts = |s: &Scheduler| -> u64 {
        s.get("/metrics")
            .map(|(_, body)| {
                body.lines()
                    .filter(|l| l.starts_with("scheduler_schedule_attempts_total{"))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum::<f64>() as u64
            })
            .unwrap_or(0)
    };
    let (leader, follower) = if first_leads {
        (&mut c.sched, &mut second)
    } else {
        (&mut second, &mut c.sched)
    };
    assert!(attempts(leader) >= 1);
    assert_eq!(attempts(follower), 0, "the follower scheduled pods");
    // The Lease as last renewed by the leader, read after its death: its renewTime is
    // the last renewal.
    let killed = Instant::now();
    leader.kill9().expect("SIGKILL the leader");
    let last = leases.get("kube-scheduler").await.expect("the Lease");
    assert_eq!(
        lease_holder(&last),
        holder,
        "the Lease changed hands too early"
    );
    let renewed = last
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0)
        .expect("a renewTime");
    let stream = watcher::watcher(
        leases.clone(),
        watcher::Config::default().fields("metadata.name=kube-scheduler"),
    );
    futures::pin_mut!(stream);
    let taken = tokio::time::timeout(WAIT, async {
        while let Some(event) = stream.try_next().await.expect("watch the Lease") {
            if let WatchEvent::Apply(l) | WatchEvent::InitApply(l) = event {
                let h = lease_holder(&l);
                if !h.is_empty() && h != holder {
                    return Some(l);
                }
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .expect("the follower never took the Lease over");
    let acquired = taken
        .spec
        .as_ref()
        .and_then(|s| s.acquire_time.as_ref())
        .map(|t| t.0)
        .expect("an acquireTime");
    let gap = acquired.duration_since(renewed);
    println!(
        "lease taken over by {} {:?} after the leader was killed, {gap:#} after its last renewal",
        lease_holder(&taken),
        killed.elapsed()
    );
    // Safety, as client-go: a lease is taken only once leaseDuration (4 s) has passed
    // since the follower last saw it renewed; liveness: it is taken (within WAIT).
    assert!(
        gap.as_secs_f64() >= 4.0,
        "taken {gap:#} after the last renewal, before the 4 s lease expired"
    );
    // The follower writes the Lease before it marks itself leader: the watch can see the
    // new holder a moment before the metric does.
    let deadline = Instant::now() + WAIT;
    while !leads(follower) {
        assert!(
            Instant::now() < deadline,
            "the follower holds the Lease but never reported leading"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The new leader binds new pods.
    let pod = cpu_pod("second", "100m");
    c.pod(pod).await;
    assert_eq!(c.wait_bound("second").await, "a");
    drop(second);
}

/// Bad input: none of it stops the scheduler.
pub async fn bad_input_does_not_stop_the_scheduler() {
    let mut c = Cluster::start(&[]).await;
    c.node("ok", "4", "8Gi", "10", &[], json!([])).await;
    // A node whose capacity is not a quantity is refused by the API server.
    let out = c.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "broken"},
                "status": {"capacity": {"cpu": "lots"}}}),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("quantities must match the regular expression"),
        "{stderr}"
    );
    // A node without any status (no allocatable): nothing fits there.
    let bare: k8s_openapi::api::core::v1::Node = serde_json::from_value(
        json!({"metadata": {"name": "bare", "labels": {"kubernetes.io/hostname": "bare"}}}),
    )
    .expect("a node");
    c.nodes()
        .create(&PostParams::default(), &bare)
        .await
        .expect("create a bare node");
    let on_bare = json!({"metadata": {"name": "on-bare"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "bare"}}});
    c.pod(on_bare).await;
    let mut message = String::new();
    c.wait_pod("on-bare", "was reported unschedulable", |p| {
        message = super::cluster::unschedulable_condition(p)?;
        Some(())
    })
    .await;
    assert!(message.contains("Too many pods"), "{message}");
    // An unknown schedulerName: left alone, and said so in the log.
    c.pod(json!({"metadata": {"name": "stranger"}, "spec": {"schedulerName": "nobody"}}))
        .await;
    // Affinity terms whose selector the API server accepts but that select nothing
    // sensible still get a clear message.
    let odd = json!({"metadata": {"name": "odd"}, "spec": {"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}}]}}}});
    c.pod(odd).await;
    // A pod deleted while it waits in the queue.
    let doomed =
        json!({"metadata": {"name": "doomed"}, "spec": {"nodeSelector": {"nowhere": "x"}}});
    c.pod(doomed).await;
    c.wait_pod("doomed", "was reported unschedulable", |p| {
        super::cluster::unschedulable_condition(p)
    })
    .await;
    c.delete_pod("doomed").await;
    // A node deleted right before a pod that only fits there.
    c.node("gone", "4", "8Gi", "10", &[], json!([])).await;
    c.nodes()
        .delete("gone", &Default::default())
        .await
        .expect("delete node gone");
    c.pod(json!({"metadata": {"name": "late"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "gone"}}}))
        .await;
    // The scheduler still works and still runs.
    expect(
        &c,
        json!({"metadata": {"name": "after"}}),
        Expect::Node("ok"),
    )
    .await;
    assert!(c.sched.try_wait().expect("poll the scheduler").is_none());
    let log = c.sched.log();
    assert!(
        log.contains("stranger") && log.contains("nobody"),
        "no log line about the stranger pod"
    );
    let placements = c.placements().await;
    assert_eq!(placements["stranger"], "");
    assert!(!placements.contains_key("doomed"));
    // `late` was either bound by a scheduler that had not yet seen the deletion, or is
    // reported unschedulable; never does it stop the scheduler.
    let late = c.pods().get("late").await.expect("get pod late");
    let bound = late
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    assert!(
        bound == "gone"
            || super::cluster::unschedulable_condition(&late).is_some()
            || bound.is_empty(),
        "{late:?}"
    );
}
