//! What is specific to Skiff's embedded runtime (the in-process `Runtime`, its shims and its
//! state files), as root with real runc, CNI plugins and a local registry: containers whose
//! shim died are reported truthfully and survive a runtime restart, and a failed network
//! setup leaves nothing behind while a second runtime on the same root is refused; work cut
//! short by a runtime crash is recovered by the next runtime. The CRI
//! behaviour both runtimes share (pod lifecycle, exec, logs, idempotence, NotFound,
//! networking) is in the CRI suite, `cri_lifecycle.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use skiff_runtime::image::ImageManager;
use skiff_runtime::k8s_cri::v1::runtime_service_server::RuntimeService;
use skiff_runtime::k8s_cri::v1::*;
use skiff_runtime::tonic::Request;
use skiff_runtime::{Runtime, RuntimeConfig};

mod common;
use common::embedded::{container_status, create_and_start, is_root, processes_mentioning};

/// A CNI network private to this test: its own bridge, /24 and IPAM directory.
struct TestNetwork {
    bridge: String,
    subnet: String,
    conf_dir: PathBuf,
    ipam_dir: PathBuf,
}

impl TestNetwork {
    /// The network of test `slot` (0 or 1) of this process: tests run in parallel.
    fn new(dir: &Path, slot: u32) -> TestNetwork {
        let pid = std::process::id();
        let net = TestNetwork {
            bridge: format!("skrt{}{slot}", pid % 100_000),
            subnet: format!(
                "10.{}.{}.{}/25",
                200 + pid % 50,
                (pid / 50) % 250,
                slot * 128
            ),
            conf_dir: dir.join("cni"),
            ipam_dir: dir.join("ipam"),
        };
        std::fs::create_dir_all(&net.conf_dir).unwrap();
        let conflist = serde_json::json!({
            "cniVersion": "1.0.0",
            "name": "skiff-runtime-test",
            "plugins": [
                {
                    "type": "bridge", "bridge": net.bridge, "isGateway": true, "ipMasq": true, "hairpinMode": true,
                    "ipam": {
                        "type": "host-local", "ranges": [[{"subnet": net.subnet}]],
                        "routes": [{"dst": "0.0.0.0/0"}], "dataDir": net.ipam_dir
                    }
                },
                {"type": "portmap", "capabilities": {"portMappings": true}}
            ]
        });
        std::fs::write(net.conf_dir.join("10-test.conflist"), conflist.to_string()).unwrap();
        net
    }

    /// host-local allocation files (named after the IP) still present.
    fn allocations(&self) -> Vec<String> {
        std::fs::read_dir(self.ipam_dir.join("skiff-runtime-test"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for TestNetwork {
    /// Deletes the bridge and the network's masquerade rule and chain: the runtime keeps
    /// them while it runs and removes them only when its CRI server shuts down, which these
    /// tests, driving `Runtime` directly, never do.
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
        let iptables = |args: &[&str]| {
            std::process::Command::new("iptables")
                .args(["-w", "-t", "nat"])
                .args(args)
                .output()
        };
        let Ok(rules) = iptables(&["-S", "POSTROUTING"]) else {
            return;
        };
        let source = format!("-s {} ", self.subnet);
        for rule in String::from_utf8_lossy(&rules.stdout).lines() {
            let Some(chain) = rule
                .split_whitespace()
                .last()
                .filter(|chain| chain.starts_with("SKIFF-MASQ-"))
            else {
                continue;
            };
            if !rule.contains(&source) {
                continue;
            }
            let comment = "skiff: masquerade for CNI network \"skiff-runtime-test\"";
            let _ = iptables(&[
                "-D",
                "POSTROUTING",
                "-s",
                &self.subnet,
                "-m",
                "comment",
                "--comment",
                comment,
                "-j",
                chain,
            ]);
            let _ = iptables(&["-F", chain]);
            let _ = iptables(&["-X", chain]);
        }
    }
}

fn runtime_config(dir: &Path, net: &TestNetwork) -> RuntimeConfig {
    RuntimeConfig {
        root: dir.join("root"),
        state: dir.join("state"),
        shim_binary: env!("CARGO_BIN_EXE_skiff").into(),
        cni_conf_dir: net.conf_dir.clone(),
        cni_bin_dirs: vec!["/usr/lib/cni".into()],
        pod_cidr: net.subnet.parse().unwrap(),
        ..RuntimeConfig::default()
    }
}

/// The memory cgroup directory of container `id` (found through its init's
/// `/proc/<pid>/cgroup`) and every parent the runtime made for it, up to the hierarchy root.
fn cgroups_of(id: &str, dir: &Path) -> Vec<PathBuf> {
    let pid =
        std::fs::read_to_string(dir.join("state/containers").join(id).join("init.pid")).unwrap();
    let cgroup = std::fs::read_to_string(format!("/proc/{}/cgroup", pid.trim())).unwrap();
    let path = cgroup
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))
        .unwrap();
    Path::new(&path)
        .ancestors()
        .filter(|p| *p != Path::new("/"))
        .map(|p| Path::new("/sys/fs/cgroup/memory").join(p.strip_prefix("/").unwrap()))
        .collect()
}

/// RunPodSandbox; returns the sandbox ID.
async fn run_sandbox(runtime: &Runtime, config: &PodSandboxConfig) -> String {
    runtime
        .run_pod_sandbox(Request::new(RunPodSandboxRequest {
            config: Some(config.clone()),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .pod_sandbox_id
}

fn mounts_under(dir: &Path) -> Vec<String> {
    let dir = dir.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&dir))
        .map(str::to_string)
        .collect()
}

/// A runtime with its own directories and network, and the busybox test image pulled from
/// a local registry.
struct Fixture {
    tmp: tempfile::TempDir,
    net: TestNetwork,
    _registry: skiff_testkit::Registry,
    reference: String,
    images: Arc<ImageManager>,
}

impl Fixture {
    async fn new(slot: u32) -> Fixture {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tmp = tempfile::Builder::new()
            .prefix("skiff-runtime-test")
            .tempdir()
            .unwrap();
        let net = TestNetwork::new(tmp.path(), slot);
        let registry = skiff_testkit::Registry::start().unwrap();
        let image = skiff_testkit::busybox().unwrap();
        let reference =
            skiff_testkit::push(registry.host(), "busybox", "runtime-test", &image).unwrap();
        let images = Arc::new(
            ImageManager::new(&RuntimeConfig {
                root: tmp.path().join("root"),
                ..RuntimeConfig::default()
            })
            .unwrap(),
        );
        let record = images.pull(&reference, None).await.unwrap();
        assert_eq!(record.id, image.config_digest());
        Fixture {
            tmp,
            net,
            _registry: registry,
            reference,
            images,
        }
    }

    fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// A (re)started runtime on the fixture's state.
    fn runtime(&self) -> Arc<Runtime> {
        Runtime::new(runtime_config(self.dir(), &self.net), self.images.clone()).unwrap()
    }
}

/// PID of the shim of container `id` (its command line names the container).
fn shim_pid(id: &str) -> i32 {
    let shims: Vec<i32> = processes_mentioning(id)
        .iter()
        .filter(|p| p.contains(" shim "))
        .filter_map(|p| p.split(':').next()?.parse().ok())
        .collect();
    assert_eq!(shims.len(), 1, "one shim for {id}: {shims:?}");
    shims[0]
}

/// Whether `pid` runs (exists and is not a zombie waiting for a parent that never reaps).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

async fn sigkill_and_wait(pid: i32) {
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -KILL {pid}");
    for _ in 0..100 {
        if !running(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{pid} survived SIGKILL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_whose_shim_died_are_reported_truthfully() {
    if !is_root() {
        eprintln!("skipping: needs root");
        return;
    }
    let fixture = Fixture::new(1).await;
    let dir = fixture.dir().to_path_buf();
    let runtime = fixture.runtime();
    let sandbox_config = PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: "orphans".into(),
            uid: "uid2".into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: "orphans".into(),
        log_directory: dir.join("logs/orphans").to_string_lossy().into_owned(),
        ..Default::default()
    };
    let sandbox_id = run_sandbox(&runtime, &sandbox_config).await;
    let mut ids = Vec::new();
    for name in ["survivor", "lost"] {
        let config = ContainerConfig {
            metadata: Some(ContainerMetadata {
                name: name.into(),
                attempt: 0,
            }),
            image: Some(ImageSpec {
                image: fixture.reference.clone(),
                ..Default::default()
            }),
            command: vec!["sleep".into(), "1000".into()],
            log_path: format!("{name}/0.log"),
            ..Default::default()
        };
        ids.push(create_and_start(&runtime, &sandbox_id, &sandbox_config, config).await);
    }
    let (survivor, lost) = (ids[0].clone(), ids[1].clone());
    let cgroups = cgroups_of(&survivor, &dir);
    let init_of = |id: &str| -> i32 {
        std::fs::read_to_string(dir.join("state/containers").join(id).join("init.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };

    // The shim dies, the container keeps running: still RUNNING.
    sigkill_and_wait(shim_pid(&survivor)).await;
    assert!(running(init_of(&survivor)));
    let status = container_status(&runtime, &survivor).await;
    assert_eq!(status.state, ContainerState::ContainerRunning as i32);

    // Shim and container both gone without an exit file: EXITED, 255, Error, and it stays so.
    let lost_init = init_of(&lost);
    sigkill_and_wait(shim_pid(&lost)).await;
    sigkill_and_wait(lost_init).await;
    let status = container_status(&runtime, &lost).await;
    assert_eq!(
        (status.state, status.exit_code, status.reason.as_str()),
        (ContainerState::ContainerExited as i32, 255, "Error")
    );
    assert!(
        status.message.contains("exit status is unknown"),
        "{status:?}"
    );
    assert!(status.finished_at >= status.started_at);
    let exited = runtime
        .list_containers(Request::new(ListContainersRequest {
            filter: Some(ContainerFilter {
                state: Some(ContainerStateValue {
                    state: ContainerState::ContainerExited as i32,
                }),
                ..Default::default()
            }),
        }))
        .await
        .unwrap()
        .into_inner()
        .containers;
    assert_eq!(
        exited.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        [lost.as_str()]
    );
    drop(runtime);
    let runtime = fixture.runtime();
    let persisted = container_status(&runtime, &lost).await;
    assert_eq!(
        (persisted.exit_code, persisted.finished_at),
        (255, status.finished_at)
    );
    assert_eq!(
        container_status(&runtime, &survivor).await.state,
        ContainerState::ContainerRunning as i32
    );

    // The unmonitored container still stops (SIGTERM is ignored by `sleep` as PID 1, so this
    // goes through SIGKILL) and everything is cleaned up.
    runtime
        .stop_container(Request::new(StopContainerRequest {
            container_id: survivor.clone(),
            timeout: 1,
        }))
        .await
        .unwrap();
    let status = container_status(&runtime, &survivor).await;
    assert_eq!(
        (status.state, status.exit_code),
        (ContainerState::ContainerExited as i32, 255)
    );
    for id in [&survivor, &lost] {
        runtime
            .remove_container(Request::new(RemoveContainerRequest {
                container_id: id.clone(),
            }))
            .await
            .unwrap();
    }
    runtime
        .remove_pod_sandbox(Request::new(RemovePodSandboxRequest {
            pod_sandbox_id: sandbox_id.clone(),
        }))
        .await
        .unwrap();

    let ns_root = dir.join("state/ns").to_string_lossy().into_owned();
    let leftover: Vec<String> = mounts_under(&dir)
        .into_iter()
        .filter(|m| *m != ns_root)
        .collect();
    assert_eq!(leftover, Vec::<String>::new(), "mounts under the test dir");
    if mounts_under(&dir).contains(&ns_root) {
        let _ = std::process::Command::new("umount").arg(&ns_root).status();
    }
    for id in [&survivor, &lost] {
        assert_eq!(processes_mentioning(id), Vec::<String>::new(), "processes");
        assert!(!dir.join("state/containers").join(id).exists(), "bundle");
    }
    let left: Vec<&PathBuf> = cgroups.iter().filter(|c| c.exists()).collect();
    assert_eq!(left, Vec::<&PathBuf>::new(), "container and pod cgroups");
    assert_eq!(
        fixture.net.allocations(),
        Vec::<String>::new(),
        "IPAM allocations"
    );
}

/// A sandbox whose CNI ADD fails is cleaned up at once: its namespace pins, files and record
/// go even though CNI DEL fails too (as it often does after a failed ADD), since nothing
/// would be left to retry from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_network_setup_leaves_nothing() {
    if !is_root() {
        eprintln!("skipping: needs root");
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("skiff-runtime-test")
        .tempdir()
        .unwrap();
    let conf_dir = tmp.path().join("cni");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let conflist = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "skiff-broken",
        "plugins": [{"type": "skiff-no-such-plugin"}]
    });
    std::fs::write(conf_dir.join("10-broken.conflist"), conflist.to_string()).unwrap();
    let config = || RuntimeConfig {
        root: tmp.path().join("root"),
        state: tmp.path().join("state"),
        shim_binary: env!("CARGO_BIN_EXE_skiff").into(),
        cni_conf_dir: conf_dir.clone(),
        cni_bin_dirs: vec!["/usr/lib/cni".into()],
        pod_cidr: "10.99.0.0/24".parse().unwrap(),
        ..RuntimeConfig::default()
    };
    let images = Arc::new(
        ImageManager::new(&RuntimeConfig {
            root: tmp.path().join("root"),
            ..RuntimeConfig::default()
        })
        .unwrap(),
    );
    let runtime = Runtime::new(config(), images.clone()).unwrap();
    let err = runtime
        .run_pod_sandbox(Request::new(RunPodSandboxRequest {
            config: Some(PodSandboxConfig {
                metadata: Some(PodSandboxMetadata {
                    name: "broken".into(),
                    uid: "uid-broken".into(),
                    namespace: "default".into(),
                    attempt: 0,
                }),
                hostname: "broken".into(),
                ..Default::default()
            }),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert!(err.message().contains("skiff-no-such-plugin"), "{err:?}");
    assert_eq!(mounts_under(tmp.path()), Vec::<String>::new());

    // A second runtime on the same root is refused while the first lives.
    let Err(err) = Runtime::new(config(), images.clone()) else {
        panic!("two runtimes opened the same root");
    };
    assert!(
        format!("{err:#}").contains("another skiff runtime"),
        "{err:#}"
    );

    // Nothing is listed, now or by a restarted runtime.
    assert_no_sandboxes(&runtime).await;
    drop(runtime);
    assert_no_sandboxes(&Runtime::new(config(), images).unwrap()).await;
}

async fn assert_no_sandboxes(runtime: &Runtime) {
    let listed = runtime
        .list_pod_sandbox(Request::new(ListPodSandboxRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .items;
    assert!(listed.is_empty(), "{listed:?}");
}

/// Rewrites the JSON record at `path` with `edit`.
fn edit_record(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut record);
    std::fs::write(path, serde_json::to_vec(&record).unwrap()).unwrap();
}

/// RPCs cut short by a runtime crash, as the records of a killed runtime show them, are
/// recovered by the next runtime: a RunPodSandbox that never finished is torn down
/// (namespace pins, shm, IP) and never listed; a StartContainer whose shim started the
/// container is adopted (RUNNING, one shim, a second start refused with
/// FailedPrecondition); a CreateContainer without a record leaves no bundle or rootfs
/// mount; sandbox directories without a record are removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_cut_short_by_a_crash_is_recovered_on_restart() {
    if !is_root() {
        eprintln!("skipping: needs root");
        return;
    }
    let fixture = Fixture::new(0).await;
    let dir = fixture.dir().to_path_buf();
    let runtime = fixture.runtime();
    let pod = |name: &str| PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: name.into(),
            uid: format!("uid-{name}"),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: name.into(),
        log_directory: dir.join("logs").join(name).to_string_lossy().into_owned(),
        ..Default::default()
    };
    let (half, kept) = (pod("half"), pod("kept"));
    let half_id = run_sandbox(&runtime, &half).await;
    let kept_id = run_sandbox(&runtime, &kept).await;
    let container = |name: &str| ContainerConfig {
        metadata: Some(ContainerMetadata {
            name: name.into(),
            attempt: 0,
        }),
        image: Some(ImageSpec {
            image: fixture.reference.clone(),
            ..Default::default()
        }),
        command: vec!["sleep".into(), "1000".into()],
        log_path: format!("{name}/0.log"),
        ..Default::default()
    };
    let started = create_and_start(&runtime, &kept_id, &kept, container("started")).await;
    let cut = runtime
        .create_container(Request::new(CreateContainerRequest {
            pod_sandbox_id: kept_id.clone(),
            config: Some(container("cut")),
            sandbox_config: Some(kept.clone()),
        }))
        .await
        .unwrap()
        .into_inner()
        .container_id;
    assert_eq!(fixture.net.allocations().len(), 2);
    drop(runtime);

    // The records as the crashes would have left them.
    let records = dir.join("root");
    edit_record(
        &records.join("sandboxes").join(format!("{half_id}.json")),
        |r| {
            r["creating"] = true.into();
            r["ready"] = false.into();
        },
    );
    edit_record(
        &records.join("containers").join(format!("{started}.json")),
        |r| {
            r["state"] = "created".into();
            r["init"] = serde_json::Value::Null;
            r["shim"] = serde_json::Value::Null;
            r["started_at"] = 0.into();
        },
    );
    std::fs::remove_file(records.join("containers").join(format!("{cut}.json"))).unwrap();
    let orphan_files = dir.join("state/sandboxes/orphan");
    std::fs::create_dir_all(orphan_files.join("shm")).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "shm"])
        .arg(orphan_files.join("shm"))
        .status()
        .unwrap();
    assert!(mounted.success());
    std::fs::create_dir_all(dir.join("state/ns/orphan")).unwrap();

    let runtime = fixture.runtime();
    let listed: Vec<String> = runtime
        .list_pod_sandbox(Request::new(ListPodSandboxRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .items
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, [kept_id.as_str()]);
    let status = container_status(&runtime, &started).await;
    assert_eq!(status.state, ContainerState::ContainerRunning as i32);
    assert!(status.started_at > 0, "{status:?}");
    let err = runtime
        .start_container(Request::new(StartContainerRequest {
            container_id: started.clone(),
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), skiff_runtime::tonic::Code::FailedPrecondition);
    shim_pid(&started);
    let listed = runtime
        .list_containers(Request::new(ListContainersRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .containers;
    assert_eq!(
        listed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        [started.as_str()]
    );
    assert!(!dir.join("state/containers").join(&cut).exists(), "bundle");
    assert!(!orphan_files.exists() && !dir.join("state/ns/orphan").exists());

    // The half-created sandbox is torn down in the background.
    let half_gone = || {
        fixture.net.allocations().len() == 1
            && !mounts_under(&dir).iter().any(|m| m.contains(&half_id))
            && !dir.join("state/sandboxes").join(&half_id).exists()
            && !records
                .join("sandboxes")
                .join(format!("{half_id}.json"))
                .exists()
    };
    for _ in 0..100 {
        if half_gone() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        half_gone(),
        "half-created sandbox left: {:?}",
        mounts_under(&dir)
    );

    runtime
        .remove_pod_sandbox(Request::new(RemovePodSandboxRequest {
            pod_sandbox_id: kept_id.clone(),
        }))
        .await
        .unwrap();
    let ns_root = dir.join("state/ns").to_string_lossy().into_owned();
    let leftover: Vec<String> = mounts_under(&dir)
        .into_iter()
        .filter(|m| *m != ns_root)
        .collect();
    if mounts_under(&dir).contains(&ns_root) {
        let _ = std::process::Command::new("umount").arg(&ns_root).status();
    }
    assert_eq!(leftover, Vec::<String>::new(), "mounts under the test dir");
    assert_eq!(processes_mentioning(&started), Vec::<String>::new());
    assert_eq!(fixture.net.allocations(), Vec::<String>::new());
}
