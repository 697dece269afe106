//! The cluster under test: one Skiff API server and one kubelet joined to it with the
//! admin kubeconfig, shared by every module of this binary.

use std::time::{Duration, Instant};

use serde_json::Value;
use skiff_testkit::{ApiServer, ApiServerOptions, Backend};

use crate::common::{Cluster, Runtime};

/// A Skiff API server and a kubelet joined to it with the admin kubeconfig.
pub struct Joined {
    // The kubelet goes first: it must not outlive its API server's store.
    pub cluster: Cluster,
    pub api: ApiServer,
}

impl Joined {
    pub fn start() -> Joined {
        let api = ApiServer::start(ApiServerOptions::new(
            env!("CARGO_BIN_EXE_skiff"),
            Backend::Sqlite,
        ))
        .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
        let kubeconfig = api.kubeconfig().display().to_string();
        // The main port as a kubeadm node's: client certificates of the cluster CA
        // (the API server's `apiserver-kubelet-client` among them), tokens and
        // authorization through the API server, no anonymous requests; on every address,
        // as the API server dials the node's InternalIP.
        let client_ca = api.data_dir().join("pki").join("ca.crt");
        let cluster = Cluster::start_with(
            Runtime::Embedded,
            vec![
                "--kubeconfig".into(),
                kubeconfig,
                "--client-ca-file".into(),
                client_ca.display().to_string(),
                "--anonymous-auth=false".into(),
                "--authentication-token-webhook".into(),
                "--authorization-mode".into(),
                "Webhook".into(),
                "--address".into(),
                "0.0.0.0".into(),
            ],
        );
        Joined { cluster, api }
    }

    pub fn node_name(&self) -> String {
        self.cluster.node.node_name()
    }

    /// Runs kubectl 1.33; fails the test unless it succeeds. Returns stdout.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_stdin(args, "")
    }

    /// Runs kubectl 1.33 with `stdin`; fails the test unless it succeeds.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> String {
        use std::io::Write as _;
        let mut child = self
            .api
            .kubectl_command(33)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn kubectl");
        if let Some(mut input) = child.stdin.take() {
            input
                .write_all(stdin.as_bytes())
                .expect("write kubectl's stdin");
        }
        let output = child.wait_with_output().expect("wait for kubectl");
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}\n--- kubelet log (tail) ---\n{}",
            String::from_utf8_lossy(&output.stderr),
            tail(&self.cluster.node.log()),
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `kubectl get <args> -o json` when it succeeds.
    pub fn get(&self, args: &[&str]) -> Option<Value> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let output = self.api.kubectl(33, &all);
        output
            .status
            .success()
            .then(|| serde_json::from_slice(&output.stdout).ok())
            .flatten()
    }

    /// Polls `check` every 200 ms until it gives a value; fails the test after `timeout`
    /// with the kubelet's log.
    pub fn eventually<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(value) = check() {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n--- kubelet log (tail) ---\n{}\n--- apiserver log (tail) ---\n{}",
                tail(&self.cluster.node.log()),
                self.api.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

pub fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}
