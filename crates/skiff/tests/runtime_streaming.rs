//! The embedded runtime's streaming verbs through the `StreamBackend` trait, as root, with
//! real runc and the real `skiff shim`: exec with pipes and with a terminal (resize seen by
//! `stty size`), attach to a container's stdin/stdout (`stdin_once`, tty), tty output in the
//! CRI log, ReopenContainerLog after the log was renamed, and all of it again after the
//! runtime restarted while the shims kept running.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use skiff_runtime::image::ImageManager;
use skiff_runtime::k8s_cri::v1::runtime_service_server::RuntimeService;
use skiff_runtime::k8s_cri::v1::*;
use skiff_runtime::streaming::{StreamBackend, Streams, TerminalSize};
use skiff_runtime::tonic::{Code, Request};
use skiff_runtime::{Runtime, RuntimeConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, DuplexStream};

mod common;
use common::embedded::{container_status, create_and_start, is_root, processes_mentioning};

/// How long any one step may take.
const STEP: Duration = Duration::from_secs(20);

/// Removes what a failed test left: runc containers (their shims then exit), other
/// processes naming the test directory (namespace pins) and mounts under it.
impl Drop for Fixture {
    fn drop(&mut self) {
        let runc_root = self.dir().join("state/oci/runc");
        let runc = |args: &[&str]| {
            std::process::Command::new("runc")
                .arg("--root")
                .arg(&runc_root)
                .args(args)
                .output()
        };
        if let Ok(list) = runc(&["list", "-q"]) {
            for id in String::from_utf8_lossy(&list.stdout).split_whitespace() {
                let _ = runc(&["delete", "--force", id]);
            }
        }
        let dir = self.dir().to_string_lossy().into_owned();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let pid = entry.file_name().to_string_lossy().into_owned();
            if String::from_utf8_lossy(&cmdline).contains(&dir)
                && pid != std::process::id().to_string()
            {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid])
                    .status();
            }
        }
        let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.starts_with(&dir))
            .map(str::to_string)
            .collect();
        mounts.sort_by(|a, b| b.cmp(a));
        for mount in mounts {
            let _ = umount_lazy(&mount);
        }
        let parent = self.cgroup_parent();
        for hierarchy in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            let _ = std::fs::remove_dir(hierarchy.path().join(parent.trim_start_matches('/')));
        }
    }
}

fn umount_lazy(path: &str) -> std::io::Result<std::process::ExitStatus> {
    std::process::Command::new("umount")
        .args(["-l", path])
        .status()
}

fn runtime_config(dir: &Path) -> RuntimeConfig {
    RuntimeConfig {
        root: dir.join("root"),
        state: dir.join("state"),
        shim_binary: env!("CARGO_BIN_EXE_skiff").into(),
        cni_conf_dir: dir.join("cni"),
        cni_bin_dirs: vec!["/usr/lib/cni".into()],
        ..RuntimeConfig::default()
    }
}

/// A runtime on its own directories with the busybox test image pulled, and a host-network
/// pod sandbox (no CNI needed).
struct Fixture {
    tmp: tempfile::TempDir,
    _registry: skiff_testkit::Registry,
    reference: String,
    images: Arc<ImageManager>,
}

impl Fixture {
    async fn new() -> Fixture {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tmp = tempfile::Builder::new()
            .prefix("skiff-streaming-test")
            .tempdir()
            .unwrap();
        let registry = skiff_testkit::Registry::start().unwrap();
        let image = skiff_testkit::busybox().unwrap();
        let reference =
            skiff_testkit::push(registry.host(), "busybox", "streaming-test", &image).unwrap();
        let images = Arc::new(ImageManager::new(&runtime_config(tmp.path())).unwrap());
        images.pull(&reference, None).await.unwrap();
        Fixture {
            tmp,
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
        Runtime::new(runtime_config(self.dir()), self.images.clone()).unwrap()
    }

    fn sandbox_config(&self) -> PodSandboxConfig {
        PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: "streams".into(),
                uid: format!("uid-{}", std::process::id()),
                namespace: "default".into(),
                attempt: 0,
            }),
            log_directory: self.dir().join("logs").to_string_lossy().into_owned(),
            linux: Some(LinuxPodSandboxConfig {
                cgroup_parent: self.cgroup_parent(),
                security_context: Some(LinuxSandboxSecurityContext {
                    namespace_options: Some(NamespaceOption {
                        network: NamespaceMode::Node as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The pod's cgroup, made by runc, removed by the fixture (as the kubelet does).
    fn cgroup_parent(&self) -> String {
        let name = self.dir().file_name().unwrap_or_default().to_string_lossy();
        format!("/{name}")
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir().join("logs").join(format!("{name}.log"))
    }

    fn container_config(&self, name: &str, command: &[&str]) -> ContainerConfig {
        ContainerConfig {
            metadata: Some(ContainerMetadata {
                name: name.into(),
                attempt: 0,
            }),
            image: Some(ImageSpec {
                image: self.reference.clone(),
                ..Default::default()
            }),
            command: command.iter().map(|s| s.to_string()).collect(),
            log_path: format!("{name}.log"),
            ..Default::default()
        }
    }
}

async fn wait_exited(runtime: &Runtime, id: &str) -> ContainerStatus {
    for _ in 0..200 {
        let status = container_status(runtime, id).await;
        if status.state == ContainerState::ContainerExited as i32 {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("container {id} did not exit");
}

async fn reopen_log(runtime: &Runtime, id: &str) -> Result<(), skiff_runtime::tonic::Status> {
    runtime
        .reopen_container_log(Request::new(ReopenContainerLogRequest {
            container_id: id.to_string(),
        }))
        .await
        .map(|_| ())
}

/// The client's ends of a session's streams.
struct Client {
    stdin: Option<DuplexStream>,
    stdout: DuplexStream,
    stderr: Option<DuplexStream>,
    resize: Option<tokio::sync::mpsc::Sender<TerminalSize>>,
}

/// Streams for a session: stdout always, stdin / stderr / resize as asked.
fn streams(stdin: bool, tty: bool) -> (Streams, Client) {
    let pair = || tokio::io::duplex(64 * 1024);
    let (stdin_client, stdin_runtime) = pair();
    let (stdout_runtime, stdout_client) = pair();
    let (stderr_runtime, stderr_client) = pair();
    let (resize_tx, resize_rx) = tokio::sync::mpsc::channel(4);
    let streams = Streams {
        stdin: stdin.then(|| Box::new(stdin_runtime) as _),
        stdout: Some(Box::new(stdout_runtime)),
        stderr: (!tty).then(|| Box::new(stderr_runtime) as _),
        tty,
        resize: tty.then_some(resize_rx),
    };
    let client = Client {
        stdin: stdin.then_some(stdin_client),
        stdout: stdout_client,
        stderr: (!tty).then_some(stderr_client),
        resize: tty.then_some(resize_tx),
    };
    (streams, client)
}

/// Reads `from` until the text read contains `needle`; returns all of it.
async fn read_until(from: &mut DuplexStream, needle: &str) -> String {
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    let read = async {
        while !text.contains(needle) {
            let n = from.read(&mut buf).await.unwrap();
            assert!(n > 0, "end of stream before {needle:?}, got {text:?}");
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    };
    if tokio::time::timeout(STEP, read).await.is_err() {
        panic!("no {needle:?} within {STEP:?}, got {text:?}");
    }
    text
}

async fn read_to_end(from: &mut DuplexStream) -> String {
    let mut text = String::new();
    tokio::time::timeout(STEP, from.read_to_string(&mut text))
        .await
        .expect("end of stream")
        .unwrap();
    text
}

async fn send(client: &mut Client, text: &str) {
    let stdin = client.stdin.as_mut().unwrap();
    stdin.write_all(text.as_bytes()).await.unwrap();
}

async fn resize(client: &Client, width: u16, height: u16) {
    let size = TerminalSize { width, height };
    client.resize.as_ref().unwrap().send(size).await.unwrap();
}

/// CRI log records of `path` as (stream, tag, content).
fn log_records(path: &Path) -> Vec<(String, String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.splitn(4, ' ').collect();
            assert_eq!(fields.len(), 4, "CRI log line {line:?}");
            (fields[1].into(), fields[2].into(), fields[3].into())
        })
        .collect()
}

fn log_contains(path: &Path, stream: &str, text: &str) -> bool {
    log_records(path)
        .iter()
        .any(|(s, _, content)| s == stream && content.contains(text))
}

async fn wait_for_log(path: &Path, stream: &str, text: &str) {
    for _ in 0..200 {
        if log_contains(path, stream, text) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{text:?} on {stream} not in {}: {:?}",
        path.display(),
        log_records(path)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_attach_tty_and_log_reopening() {
    if !is_root() {
        eprintln!("skipping: needs root");
        return;
    }
    let fixture = Fixture::new().await;
    let runtime = fixture.runtime();
    let sandbox_config = fixture.sandbox_config();
    let sandbox_id = runtime
        .run_pod_sandbox(Request::new(RunPodSandboxRequest {
            config: Some(sandbox_config.clone()),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .pod_sandbox_id;

    // Attach to `cat` with stdin_once: input echoes back (and into the log); the end of
    // the session's stdin closes the container's stdin, so cat exits 0.
    let cat = create_and_start(
        &runtime,
        &sandbox_id,
        &sandbox_config,
        ContainerConfig {
            stdin: true,
            stdin_once: true,
            ..fixture.container_config("cat", &["cat"])
        },
    )
    .await;
    let (session, mut client) = streams(true, false);
    let backend: Arc<dyn StreamBackend> = runtime.clone();
    let attach = tokio::spawn({
        let (backend, cat) = (backend.clone(), cat.clone());
        async move { backend.attach(&cat, session).await }
    });
    // stdin ends right away: the output that follows still reaches the session.
    send(&mut client, "hello attach\n").await;
    drop(client.stdin.take());
    read_until(&mut client.stdout, "hello attach\n").await;
    tokio::time::timeout(STEP, attach)
        .await
        .expect("attach ends with the container")
        .unwrap()
        .unwrap();
    let exited = wait_exited(&runtime, &cat).await;
    assert_eq!((exited.exit_code, exited.reason.as_str()), (0, "Completed"));
    assert!(log_contains(&fixture.log("cat"), "stdout", "hello attach"));
    let (session, _client) = streams(true, false);
    let err = backend.attach(&cat, session).await.unwrap_err();
    assert_eq!(
        skiff_runtime::tonic::Status::from(err).code(),
        Code::FailedPrecondition
    );
    let err = reopen_log(&runtime, &cat).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let err = reopen_log(&runtime, "no-such-container").await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    // A tty container running an interactive shell: its output is in the CRI log as
    // stdout, attach sessions drive it and resize its terminal.
    let shell = create_and_start(
        &runtime,
        &sandbox_id,
        &sandbox_config,
        ContainerConfig {
            stdin: true,
            tty: true,
            ..fixture.container_config("shell", &["sh", "-c", "echo tty-up; exec sh"])
        },
    )
    .await;
    let shell_log = fixture.log("shell");
    wait_for_log(&shell_log, "stdout", "tty-up").await;
    let (session, mut client) = streams(true, true);
    let attach = tokio::spawn({
        let (backend, shell) = (backend.clone(), shell.clone());
        async move { backend.attach(&shell, session).await }
    });
    resize(&client, 77, 22).await;
    send(&mut client, "stty size; echo $TERM\n").await;
    read_until(&mut client.stdout, "22 77\r\nxterm").await;
    // Without stdin_once (or with a tty) the end of the client's stdin ends the session
    // and leaves the container running.
    drop(client.stdin.take());
    tokio::time::timeout(STEP, attach)
        .await
        .expect("the session ends with its stdin")
        .unwrap()
        .unwrap();
    assert_eq!(
        container_status(&runtime, &shell).await.state,
        ContainerState::ContainerRunning as i32
    );

    // Streaming exec with pipes: stdin in, stdout and stderr apart, the exit code out.
    let (session, mut client) = streams(true, false);
    let exec = tokio::spawn({
        let (backend, shell) = (backend.clone(), shell.clone());
        let cmd = ["sh", "-c", "read x; echo out:$x; echo err >&2; exit 7"];
        let cmd = cmd.iter().map(|s| s.to_string()).collect();
        async move { backend.exec(&shell, cmd, session).await }
    });
    send(&mut client, "value\n").await;
    assert_eq!(read_to_end(&mut client.stdout).await, "out:value\n");
    assert_eq!(read_to_end(client.stderr.as_mut().unwrap()).await, "err\n");
    let code = tokio::time::timeout(STEP, exec).await.unwrap().unwrap();
    assert_eq!(code.unwrap(), 7);

    // Streaming exec with a terminal: the size known at the start, then a resize while it
    // runs (`stty size` prints rows and columns). runc passes the initial size on just
    // after the process started, hence the short sleep.
    let (session, mut client) = streams(true, true);
    resize(&client, 91, 33).await;
    let exec = tokio::spawn({
        let (backend, shell) = (backend.clone(), shell.clone());
        let cmd = [
            "sh",
            "-c",
            "sleep 0.5; stty size; echo ready; read x; stty size; exit 4",
        ];
        let cmd = cmd.iter().map(|s| s.to_string()).collect();
        async move { backend.exec(&shell, cmd, session).await }
    });
    read_until(&mut client.stdout, "33 91\r\nready").await;
    resize(&client, 40, 12).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    send(&mut client, "\n").await;
    read_until(&mut client.stdout, "12 40").await;
    let code = tokio::time::timeout(STEP, exec).await.unwrap().unwrap();
    assert_eq!(code.unwrap(), 4);

    // The runtime restarts (the shim keeps running): attach and ReopenContainerLog still
    // reach the shim; after the log was renamed, new output goes to a new file.
    drop(backend);
    drop(runtime);
    let runtime = fixture.runtime();
    let backend: Arc<dyn StreamBackend> = runtime.clone();
    let (session, mut client) = streams(true, true);
    let attach = tokio::spawn({
        let (backend, shell) = (backend.clone(), shell.clone());
        async move { backend.attach(&shell, session).await }
    });
    send(&mut client, "echo before-$((20+1))\n").await;
    read_until(&mut client.stdout, "before-21").await;
    wait_for_log(&shell_log, "stdout", "before-21").await;
    let rotated = shell_log.with_extension("log.1");
    std::fs::rename(&shell_log, &rotated).unwrap();
    reopen_log(&runtime, &shell).await.unwrap();
    send(&mut client, "echo after-$((20+2))\n").await;
    read_until(&mut client.stdout, "after-22").await;
    wait_for_log(&shell_log, "stdout", "after-22").await;
    assert!(!log_contains(&shell_log, "stdout", "before-21"));
    assert!(log_contains(&rotated, "stdout", "tty-up"));
    assert!(!log_contains(&rotated, "stdout", "after-22"));
    send(&mut client, "exit 3\n").await;
    tokio::time::timeout(STEP, attach)
        .await
        .expect("attach ends with the container")
        .unwrap()
        .unwrap();
    let exited = wait_exited(&runtime, &shell).await;
    assert_eq!(exited.exit_code, 3);
    let (session, _client) = streams(false, false);
    let err = backend
        .exec(&shell, vec!["true".into()], session)
        .await
        .unwrap_err();
    assert_eq!(
        skiff_runtime::tonic::Status::from(err).code(),
        Code::FailedPrecondition
    );

    for id in [&cat, &shell] {
        runtime
            .remove_container(Request::new(RemoveContainerRequest {
                container_id: id.to_string(),
            }))
            .await
            .unwrap();
    }
    runtime
        .stop_pod_sandbox(Request::new(StopPodSandboxRequest {
            pod_sandbox_id: sandbox_id.clone(),
        }))
        .await
        .unwrap();
    runtime
        .remove_pod_sandbox(Request::new(RemovePodSandboxRequest {
            pod_sandbox_id: sandbox_id.clone(),
        }))
        .await
        .unwrap();
    for id in [&cat, &shell] {
        assert_eq!(processes_mentioning(id), Vec::<String>::new());
    }
}
