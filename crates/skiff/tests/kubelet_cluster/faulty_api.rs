//! A kubelet whose API server answers only 500s, then JSON that does not parse, then
//! bytes that are not HTTP: the kubelet says so in its log, keeps retrying, and its static
//! pod runs on undisturbed.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Cluster, Runtime};

/// How the fake API server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Fault {
    /// `500 Internal Server Error` with a Status body.
    ServerError = 0,
    /// `200 OK` with a body that is not JSON.
    GarbageJson = 1,
    /// Bytes that are not HTTP at all.
    NotHttp = 2,
}

/// The message of the injected 500s, which the kubelet's log must show.
const INJECTED: &str = "injected failure for the kubelet test";

/// A plain-HTTP "API server" on loopback that answers every request with its fault.
struct FaultyApi {
    port: u16,
    fault: Arc<AtomicU8>,
    /// Requests answered under the current fault.
    answered: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl FaultyApi {
    fn start() -> FaultyApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake API server");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let port = listener.local_addr().expect("its address").port();
        let fault = Arc::new(AtomicU8::new(Fault::ServerError as u8));
        let answered = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (f, a, s) = (fault.clone(), answered.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (f, a) = (f.clone(), a.clone());
                        std::thread::spawn(move || answer(stream, &f, &a));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        FaultyApi {
            port,
            fault,
            answered,
            stop,
        }
    }

    fn set(&self, fault: Fault) {
        self.fault.store(fault as u8, Ordering::SeqCst);
        self.answered.store(0, Ordering::SeqCst);
    }

    /// Waits until the kubelet has sent `n` requests under the current fault.
    fn wait_answered(&self, n: usize, cluster: &Cluster) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while self.answered.load(Ordering::SeqCst) < n {
            assert!(
                Instant::now() < deadline,
                "the kubelet stopped calling its API server:\n{}",
                cluster.node.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: faulty\n  cluster: {{server: \"http://127.0.0.1:{}\"}}\nusers:\n- name: faulty\n  user: {{}}\ncontexts:\n- name: faulty\n  context: {{cluster: faulty, user: faulty}}\ncurrent-context: faulty\n",
            self.port
        )
    }
}

impl Drop for FaultyApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads one request (head and `Content-Length` body) and answers it with the fault.
fn answer(stream: TcpStream, fault: &AtomicU8, answered: &AtomicUsize) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(&stream);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length.min(1 << 20)];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let reply: Vec<u8> = match fault.load(Ordering::SeqCst) {
        0 => {
            let status = format!(
                r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"{INJECTED}","reason":"InternalError","code":500}}"#
            );
            format!(
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{status}",
                status.len()
            )
            .into_bytes()
        }
        1 => {
            let body = "}{ this is not JSON";
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
        _ => b"\x00\x01\x02 not http at all \xff\xfe\r\n\r\n".to_vec(),
    };
    answered.fetch_add(1, Ordering::SeqCst);
    let mut stream = &stream;
    let _ = stream.write_all(&reply);
    let _ = stream.flush();
}

/// A kubelet whose API server answers 500, garbage JSON and then non-HTTP bytes logs
/// each failure, keeps calling, and runs its static pod undisturbed throughout.
#[test]
fn api_server_answering_errors_and_garbage() {
    let api = FaultyApi::start();
    let dir = tempfile::tempdir().expect("a directory for the kubeconfig");
    let kubeconfig = dir.path().join("faulty.kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig()).expect("write the kubeconfig");
    let cluster = Cluster::start_with(
        Runtime::Embedded,
        vec!["--kubeconfig".into(), kubeconfig.display().to_string()],
    );
    cluster.write_manifest(
        "steady.yaml",
        &crate::common::sleep_pod("steady", &cluster.image, "1"),
    );
    let name = cluster.static_name("steady");
    let first = cluster.wait_running(&name);
    let identity = |pod: &serde_json::Value| {
        let status = &pod["status"]["containerStatuses"][0];
        (
            status["containerID"].clone(),
            status["restartCount"].clone(),
        )
    };

    api.wait_answered(3, &cluster);
    cluster.wait_log(INJECTED);

    // Each failure is logged as what it is.
    api.set(Fault::GarbageJson);
    api.wait_answered(5, &cluster);
    cluster.wait_log("Error deserializing response: expected value at line 1 column 1");
    api.set(Fault::NotHttp);
    api.wait_answered(5, &cluster);
    cluster.wait_log("client error (SendRequest)");

    let log = cluster.node.log();
    assert!(!log.contains("panicked"), "the kubelet panicked:\n{log}");
    assert!(cluster.node.pid().is_some(), "the kubelet exited:\n{log}");
    let now = cluster.wait_running(&name);
    assert_eq!(identity(&now), identity(&first));

    cluster.remove_manifest("steady.yaml");
    cluster.wait_gone(&name);
    cluster.assert_no_leftovers();
}
