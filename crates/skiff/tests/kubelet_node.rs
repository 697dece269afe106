//! End-to-end: what the kubelet does to the node by itself: the pod cgroup tree with its
//! QoS tiers and limits, eviction under nodefs pressure, and garbage collection of dead
//! containers. One node for all of it; its kubelet root directory is a 64 MiB tmpfs so
//! that the test controls nodefs pressure exactly. Run as root.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Cluster, Runtime, container_status, find_pod, pod_phase, single_container_pod};
use serde_json::Value;

const CGROUP_FS: &str = "/sys/fs/cgroup";
/// Size of the tmpfs under the kubelet root directory.
const NODEFS_MIB: u64 = 64;

/// A static pod `name` whose container `main` runs `script` with `resources` (YAML flow).
fn pod_manifest(name: &str, image: &str, script: &str, resources: &str, restart: &str) -> String {
    let container =
        format!("    command: [\"sh\", \"-c\", \"{script}\"]\n    resources: {resources}\n");
    single_container_pod(
        name,
        image,
        &format!("  restartPolicy: {restart}\n"),
        &container,
    )
}

/// Reads a cgroup control file of `cgroup` (relative to the hierarchy), from the v1
/// hierarchy `controller` or the v2 unified one.
fn cgroup_file(controller: &str, cgroup: &str, file: &str) -> String {
    let v2 = Path::new(CGROUP_FS).join("cgroup.controllers").exists();
    let dir = if v2 {
        PathBuf::from(CGROUP_FS).join(cgroup)
    } else {
        PathBuf::from(CGROUP_FS).join(controller).join(cgroup)
    };
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.join(file).display()))
        .trim()
        .to_owned()
}

fn is_v2() -> bool {
    Path::new(CGROUP_FS).join("cgroup.controllers").exists()
}

/// cpu shares (v1) or the weight libcontainer derives from them (v2).
fn assert_cpu_shares(cgroup: &str, shares: u64) {
    if is_v2() {
        let weight = 1 + (shares - 2) * 9999 / 262_142;
        assert_eq!(
            cgroup_file("cpu", cgroup, "cpu.weight"),
            weight.to_string(),
            "{cgroup}"
        );
    } else {
        assert_eq!(
            cgroup_file("cpu", cgroup, "cpu.shares"),
            shares.to_string(),
            "{cgroup}"
        );
    }
}

fn assert_memory_limit(cgroup: &str, bytes: u64) {
    let file = if is_v2() {
        "memory.max"
    } else {
        "memory.limit_in_bytes"
    };
    assert_eq!(
        cgroup_file("memory", cgroup, file),
        bytes.to_string(),
        "{cgroup}"
    );
}

/// Process IDs in `cgroup` and its children, in the memory hierarchy (v1) or unified (v2).
fn cgroup_pids(cgroup: &str) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            out.extend(procs.lines().map(str::to_owned));
        }
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), out);
            }
        }
    }
    let base = if is_v2() {
        PathBuf::from(CGROUP_FS)
    } else {
        Path::new(CGROUP_FS).join("memory")
    };
    let mut out = Vec::new();
    walk(&base.join(cgroup), &mut out);
    out
}

fn cgroup_exists(cgroup: &str) -> bool {
    let base = if is_v2() {
        PathBuf::from(CGROUP_FS)
    } else {
        Path::new(CGROUP_FS).join("cpu")
    };
    base.join(cgroup).exists()
}

fn uid(pod: &Value) -> String {
    pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn poll(desc: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {desc}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The kubelet root directory on a tmpfs of [`NODEFS_MIB`] (set up while the kubelet is
/// stopped); unmounted on drop.
struct SmallNodeFs(PathBuf);

impl SmallNodeFs {
    fn mount(cluster: &mut Cluster) -> SmallNodeFs {
        cluster.node.stop().expect("stop the kubelet");
        let root = cluster.node.dir().join("kubelet");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={NODEFS_MIB}m"), "tmpfs"])
            .arg(&root)
            .status()
            .expect("run mount");
        assert!(status.success(), "mounting a tmpfs on {}", root.display());
        cluster.node.restart().expect("restart the kubelet");
        SmallNodeFs(root)
    }

    fn unmount(&self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

impl Drop for SmallNodeFs {
    /// Unmounts on failure paths too (a no-op after [`SmallNodeFs::unmount`]).
    fn drop(&mut self) {
        self.unmount();
    }
}

#[test]
fn pod_cgroups_eviction_and_container_gc() {
    // Evict when less than half of the 64 MiB nodefs is free: 32Mi.
    let mut cluster = Cluster::start_with(
        Runtime::Embedded,
        vec!["--eviction-hard=nodefs.available<50%".into()],
    );
    let nodefs = SmallNodeFs::mount(&mut cluster);
    let image = cluster.image.clone();
    let root = cluster.node.cgroup_root();
    let root = root.trim_start_matches('/');

    // Writes ~400 KB of logs, the largest disk user: evicted first.
    let chatty = "seq 1 5000 | sed s/^/chatty-besteffort-pod-log-line-/; exec sleep 3600";
    cluster.write_manifest(
        "be.yaml",
        &pod_manifest("be", &image, chatty, "{}", "Always"),
    );
    cluster.write_manifest(
        "burst.yaml",
        &pod_manifest(
            "burst",
            &image,
            "exec sleep 3600",
            "{requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 64Mi}}",
            "Always",
        ),
    );
    // Its ephemeral-storage fits the node's allocatable (the 64 MiB tmpfs less the 32 MiB
    // threshold): admission refuses a pod that does not fit.
    let guaranteed = "{requests: {cpu: 200m, memory: 48Mi, ephemeral-storage: 16Mi}, limits: {cpu: 200m, memory: 48Mi, ephemeral-storage: 16Mi}}";
    cluster.write_manifest(
        "guar.yaml",
        &pod_manifest("guar", &image, "exec sleep 3600", guaranteed, "Always"),
    );
    cluster.write_manifest(
        "crash.yaml",
        &pod_manifest("crash", &image, "echo crashing; exit 1", "{}", "Always"),
    );
    let be = cluster.wait_running(&cluster.static_name("be"));
    let burst = cluster.wait_running(&cluster.static_name("burst"));
    let guar = cluster.wait_running(&cluster.static_name("guar"));
    assert_eq!(be["status"]["qosClass"], "BestEffort");
    assert_eq!(burst["status"]["qosClass"], "Burstable");
    assert_eq!(guar["status"]["qosClass"], "Guaranteed");

    // The cgroup tree: QoS tiers and pod cgroups with their limits, holding the containers.
    let be_cg = format!("{root}/kubepods/besteffort/pod{}", uid(&be));
    let burst_cg = format!("{root}/kubepods/burstable/pod{}", uid(&burst));
    let guar_cg = format!("{root}/kubepods/pod{}", uid(&guar));
    assert_cpu_shares(&format!("{root}/kubepods/besteffort"), 2);
    assert_cpu_shares(&format!("{root}/kubepods/burstable"), 102);
    assert_cpu_shares(&be_cg, 2);
    assert_cpu_shares(&burst_cg, 102);
    assert_memory_limit(&burst_cg, 64 << 20);
    assert_cpu_shares(&guar_cg, 204);
    assert_memory_limit(&guar_cg, 48 << 20);
    if is_v2() {
        assert_eq!(cgroup_file("cpu", &guar_cg, "cpu.max"), "20000 100000");
    } else {
        assert_eq!(cgroup_file("cpu", &guar_cg, "cpu.cfs_quota_us"), "20000");
        assert_eq!(cgroup_file("cpu", &burst_cg, "cpu.cfs_quota_us"), "-1");
    }
    for cg in [&be_cg, &burst_cg, &guar_cg] {
        assert!(!cgroup_pids(cg).is_empty(), "no process in {cg}");
    }

    // A pod's cgroup goes with the pod.
    cluster.remove_manifest("burst.yaml");
    cluster.wait_gone(&cluster.static_name("burst"));
    poll(
        "the burstable pod cgroup removed",
        Duration::from_secs(20),
        || !cgroup_exists(&burst_cg),
    );
    // Without Burstable pods, the Burstable tier is back to the minimum.
    let burstable_tier = format!("{root}/kubepods/burstable");
    let (file, minimum) = if is_v2() {
        ("cpu.weight", "1")
    } else {
        ("cpu.shares", "2")
    };
    poll(
        "the burstable tier's shares reset",
        Duration::from_secs(10),
        || cgroup_file("cpu", &burstable_tier, file) == minimum,
    );

    // nodefs pressure: fill the tmpfs past the threshold. The BestEffort pod with the most
    // log usage is evicted; the Guaranteed one stays.
    let filler = cluster.node.dir().join("kubelet/filler");
    std::fs::write(&filler, vec![0u8; 40 << 20]).expect("write the filler file");
    let be_name = cluster.static_name("be");
    let guar_name = cluster.static_name("guar");
    let pods = cluster.wait_for("be evicted", Duration::from_secs(60), |pods| {
        find_pod(pods, &be_name).is_some_and(|p| pod_phase(p) == "Failed")
    });
    std::fs::remove_file(&filler).expect("remove the filler file");
    let evicted = find_pod(&pods, &be_name).cloned().unwrap_or_default();
    assert_eq!(evicted["status"]["reason"], "Evicted", "{evicted}");
    let message = evicted["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "The node was low on resource: ephemeral-storage. Threshold quantity: 32Mi, available: "
        ),
        "{message}"
    );
    assert!(message.contains("Container main was using "), "{message}");
    assert!(
        message.ends_with("has larger consumption of ephemeral-storage. "),
        "{message}"
    );
    let disruption = evicted["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionTarget"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(disruption["reason"], "TerminationByKubelet", "{evicted}");
    assert!(
        container_status(&evicted, "main")["state"]["terminated"].is_object(),
        "{evicted}"
    );
    let guar_now = find_pod(&pods, &guar_name).cloned().unwrap_or_default();
    assert_eq!(pod_phase(&guar_now), "Running", "{guar_now}");
    poll(
        "the evicted pod's cgroup removed",
        Duration::from_secs(20),
        || !cgroup_exists(&be_cg),
    );

    // Container GC (every minute): the crash-looping container keeps its newest dead
    // instance only. Meanwhile no further eviction: the Guaranteed pod keeps running and
    // the evicted pod is not restarted.
    let crash_name = cluster.static_name("crash");
    let crash = cluster.wait_for("crash restarted twice", Duration::from_secs(60), |pods| {
        find_pod(pods, &crash_name)
            .is_some_and(|p| container_status(p, "main")["restartCount"].as_i64() >= Some(2))
    });
    let crash_uid = find_pod(&crash, &crash_name).map(uid).unwrap_or_default();
    let socket = cluster.node.dir().join("st/skiff.sock");
    let dead_crash_containers = || {
        common::cri_containers(&socket)
            .iter()
            .filter(|c| c.labels.get("io.kubernetes.pod.uid") == Some(&crash_uid))
            .filter(|c| c.state == k8s_cri::v1::ContainerState::ContainerExited as i32)
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut saw_many = false;
    loop {
        let pods = cluster.node.pods().expect("GET /pods");
        let guar_now = find_pod(&pods, &guar_name).cloned().unwrap_or_default();
        assert_eq!(pod_phase(&guar_now), "Running", "{guar_now}");
        let be_now = find_pod(&pods, &be_name).cloned().unwrap_or_default();
        assert_eq!(pod_phase(&be_now), "Failed", "{be_now}");
        let dead = dead_crash_containers();
        saw_many |= dead >= 2;
        if saw_many && dead <= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "dead containers of the crash-looping pod were not collected (dead: {dead})"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    for file in ["be.yaml", "guar.yaml", "crash.yaml"] {
        cluster.remove_manifest(file);
    }
    for name in [&be_name, &guar_name, &crash_name] {
        cluster.wait_gone(name);
    }
    poll("pod cgroups removed", Duration::from_secs(20), || {
        !cgroup_exists(&guar_cg) && !cgroup_exists(&be_cg)
    });
    cluster.node.stop().expect("stop the kubelet");
    nodefs.unmount();
    cluster.assert_no_leftovers();
}
