//! `skiff apiserver` as a process: first start writes the PKI and a kubeconfig that
//! kubectl uses as is; health and version need no credentials; everything else needs
//! them (401); a restart reuses the PKI; SIGTERM stops the server.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

/// A `skiff apiserver` child on a free loopback port, killed on drop.
struct Server {
    child: Child,
    port: u16,
    data_dir: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Server {
    /// Starts the server on `data_dir` and waits until `/readyz` answers `ok`.
    fn start(data_dir: &Path) -> Server {
        let port = free_port();
        let log = std::fs::File::create(data_dir.with_extension("log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_skiff"))
            .args(["apiserver", "--bind-address", "127.0.0.1", "--secure-port"])
            .arg(port.to_string())
            .arg("--data-dir")
            .arg(data_dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawning skiff apiserver");
        let mut server = Server {
            child,
            port,
            data_dir: data_dir.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = server.kubectl(&["get", "--raw", "/readyz"]);
            if out.status.success() && out.stdout == b"ok" {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("apiserver exited with {status}: {}", server.log());
            }
            assert!(
                Instant::now() < deadline,
                "not ready in 60 s: {}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.data_dir.join("admin.kubeconfig")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.with_extension("log")).unwrap_or_default()
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(KUBECTL)
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .output()
            .expect("running kubectl")
    }

    /// `curl` without credentials, trusting the CA: (HTTP code, body).
    fn anonymous(&self, path: &str) -> (u16, String) {
        let out = Command::new("curl")
            .args(["-sS", "--cacert"])
            .arg(self.data_dir.join("pki/ca.crt"))
            .args(["-w", "\n%{http_code}"])
            .arg(format!("https://127.0.0.1:{}{path}", self.port))
            .output()
            .expect("running curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.parse().unwrap_or(0), body.to_owned())
    }

    /// SIGTERM, then the exit status within 20 s.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id() as i32;
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(Instant::now() < deadline, "no exit 20 s after SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn serves_kubectl_with_the_generated_kubeconfig() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("server");
    let mut server = Server::start(&data_dir);

    assert_eq!(stdout(&server.kubectl(&["get", "--raw", "/healthz"])), "ok");
    let verbose = stdout(&server.kubectl(&["get", "--raw", "/readyz?verbose"]));
    assert!(verbose.contains("[+]ping ok\n"), "{verbose}");
    assert!(verbose.contains("[+]etcd ok\n"), "{verbose}");
    assert!(verbose.ends_with("readyz check passed\n"), "{verbose}");
    let version: serde_json::Value =
        serde_json::from_str(&stdout(&server.kubectl(&["get", "--raw", "/version"]))).unwrap();
    assert_eq!(version["gitVersion"], "v1.37.0+skiff");

    // The bootstrap objects.
    let namespaces = stdout(&server.kubectl(&["get", "namespaces", "-o", "name"]));
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            namespaces.contains(&format!("namespace/{ns}\n")),
            "{namespaces}"
        );
    }
    let service: serde_json::Value = serde_json::from_str(&stdout(&server.kubectl(&[
        "get",
        "service",
        "kubernetes",
        "-n",
        "default",
        "-o",
        "json",
    ])))
    .unwrap();
    assert_eq!(service["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], server.port);
    let classes = stdout(&server.kubectl(&["get", "priorityclasses", "-o", "name"]));
    assert!(classes.contains("system-node-critical"), "{classes}");

    // Health and version are public; the API is not.
    assert_eq!(server.anonymous("/livez"), (200, "ok".to_owned()));
    assert_eq!(server.anonymous("/version").0, 200);
    let (code, body) = server.anonymous("/api/v1/namespaces");
    assert_eq!(code, 401, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "Unauthorized");

    // The PKI is kept across restarts.
    let ca = std::fs::read(data_dir.join("pki/ca.crt")).unwrap();
    let serving = std::fs::read(data_dir.join("pki/apiserver.crt")).unwrap();
    // A watch open at SIGTERM ends with the stop (upstream's watch termination grace
    // period of 0): its connection is not what the server waits for.
    let mut watch = Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .args(["get", "namespaces", "--watch", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running kubectl --watch");
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(watch.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.starts_with("namespace/"), "{first:?}");
    assert!(server.terminate().success(), "{}", server.log());
    assert!(
        !server.log().contains("closing connections still open"),
        "the watch kept its connection open until the drain timeout:\n{}",
        server.log()
    );
    let _ = watch.kill();
    let _ = watch.wait();
    drop(server);
    let server = Server::start(&data_dir);
    assert_eq!(std::fs::read(data_dir.join("pki/ca.crt")).unwrap(), ca);
    assert_eq!(
        std::fs::read(data_dir.join("pki/apiserver.crt")).unwrap(),
        serving
    );
    assert_eq!(stdout(&server.kubectl(&["get", "--raw", "/livez"])), "ok");
}
