//! The API server suites' pieces: a [`Server`] on SQLite or on its own etcd, kubectl
//! helpers that fail the test with the server's log, and `apiserver_cases!` (one test per
//! store for each case).

use std::io::{BufRead, BufReader, Write};
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use skiff_testkit::Etcd;
use skiff_testkit::{ApiServer, ApiServerOptions, Backend};
use tempfile::TempDir;

/// The kubectl the suites use by default (the newest on the machine).
pub const KUBECTL: u32 = 33;
/// The oldest kubectl the API server must serve (version skew).
pub const KUBECTL_OLDEST: u32 = 27;

/// Which store a [`Server`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// The embedded SQLite database.
    Sqlite,
    /// A private etcd (Debian's etcd-server) started for the test.
    Etcd,
}

/// An API server for one test, on SQLite or on an etcd of its own, and a directory for the
/// test's manifests.
pub struct Server {
    // Field order matters: the API server stops before its etcd.
    pub api: ApiServer,
    pub etcd: Option<Etcd>,
    files: TempDir,
}

impl Deref for Server {
    type Target = ApiServer;
    fn deref(&self) -> &ApiServer {
        &self.api
    }
}

impl DerefMut for Server {
    fn deref_mut(&mut self) -> &mut ApiServer {
        &mut self.api
    }
}

impl Server {
    /// Starts etcd (for [`Store::Etcd`]) and `skiff apiserver`; fails the test if either
    /// does not start.
    pub fn start(store: Store) -> Server {
        let etcd = match store {
            Store::Sqlite => None,
            Store::Etcd => Some(Etcd::start().unwrap_or_else(|e| panic!("start etcd: {e:#}"))),
        };
        let backend = match &etcd {
            None => Backend::Sqlite,
            Some(etcd) => Backend::Etcd(etcd.endpoint().to_string()),
        };
        let api = ApiServer::start(ApiServerOptions::new(env!("CARGO_BIN_EXE_skiff"), backend))
            .unwrap_or_else(|e| panic!("start skiff apiserver on {store:?}: {e:#}"));
        let files = tempfile::Builder::new()
            .prefix("skiff-manifests-")
            .tempdir()
            .expect("create the manifest directory");
        Server { api, etcd, files }
    }

    /// Writes `contents` to `<manifest dir>/<name>` and returns the path.
    pub fn manifest(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.files.path().join(name);
        std::fs::write(&path, contents).expect("write a manifest");
        path
    }

    /// Runs kubectl 1.33 with `args`; fails the test unless it succeeds. Returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        self.kubectl_ok_at(KUBECTL, args)
    }

    /// Runs kubectl `1.<minor>` with `args`; fails the test unless it succeeds. Returns
    /// stdout.
    pub fn kubectl_ok_at(&self, minor: u32, args: &[&str]) -> String {
        let output = self.api.kubectl(minor, args);
        if !output.status.success() {
            panic!("{}", self.report(minor, args, &output, "expected success"));
        }
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs kubectl 1.33 with `args`; fails the test if it succeeds. Returns stderr.
    pub fn kubectl_err(&self, args: &[&str]) -> String {
        self.kubectl_err_at(KUBECTL, args)
    }

    /// Runs kubectl `1.<minor>` with `args`; fails the test if it succeeds. Returns stderr.
    pub fn kubectl_err_at(&self, minor: u32, args: &[&str]) -> String {
        let output = self.api.kubectl(minor, args);
        if output.status.success() {
            panic!("{}", self.report(minor, args, &output, "expected failure"));
        }
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    /// `kubectl get <args> -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let out = self.kubectl_ok(&all);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("kubectl {all:?}: bad JSON ({e}):\n{out}"))
    }

    /// Runs kubectl 1.33 with `args`, `env` and `stdin`; returns the whole output.
    pub fn kubectl_with(&self, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Output {
        let mut cmd = self.api.kubectl_command(KUBECTL);
        cmd.args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn kubectl");
        if let Some(mut input) = child.stdin.take() {
            input
                .write_all(stdin.as_bytes())
                .expect("write kubectl's stdin");
        }
        child.wait_with_output().expect("wait for kubectl")
    }

    /// Starts kubectl 1.33 with `args` in the background (e.g. `get -w`, `wait`), its
    /// stdout read line by line.
    pub fn kubectl_spawn(&self, args: &[&str]) -> Background {
        let mut cmd = self.api.kubectl_command(KUBECTL);
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        Background::spawn(cmd, args)
    }

    /// A failure message: the command, its output and the server's log tail.
    pub fn report(&self, minor: u32, args: &[&str], output: &Output, what: &str) -> String {
        format!(
            "kubectl.1.{minor} {args:?} ({what}) exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--- apiserver log (tail) ---\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            self.api.log_tail()
        )
    }
}

/// A kubectl running in the background, whose stdout lines arrive on a channel. Killed on
/// drop.
pub struct Background {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    args: Vec<String>,
}

impl Background {
    fn spawn(mut cmd: Command, args: &[&str]) -> Background {
        let mut child = cmd.spawn().expect("spawn kubectl");
        let stdout = child.stdout.take().expect("kubectl's stdout is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Background {
            child,
            lines,
            seen: Vec::new(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// Waits (up to `timeout`) for a line of stdout matching `pred` and returns it; fails
    /// the test with every line seen so far and kubectl's stderr otherwise.
    pub fn wait_line(&mut self, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    let mut stderr = String::new();
                    if let Some(mut err) = self.child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut err, &mut stderr);
                    }
                    panic!(
                        "kubectl {:?}: no matching line within {timeout:?}\n--- lines ---\n{}\n--- stderr ---\n{stderr}",
                        self.args,
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Waits (up to `timeout`) for kubectl to exit and returns its status and stderr, with
    /// the stdout lines not yet read appended to [`Background::seen`].
    pub fn wait_exit(&mut self, timeout: Duration) -> (std::process::ExitStatus, String) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for kubectl") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!(
                    "kubectl {:?} still running after {timeout:?}; stdout so far:\n{}",
                    self.args,
                    self.seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.seen.push(line);
        }
        let mut stderr = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut err, &mut stderr);
        }
        (status, stderr)
    }

    /// Every stdout line read so far.
    pub fn seen(&self) -> &[String] {
        &self.seen
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` every 100 ms until it returns `Some`, failing the test after `timeout`.
pub fn eventually<T>(desc: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {desc}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The rows of a kubectl table (header included), each split on runs of two or more
/// spaces (single spaces stay inside cells such as `NOMINATED NODE`).
pub fn table(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            line.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect()
}

/// The row of `rows` whose first cell is `name`; fails the test if there is none.
pub fn row<'a>(rows: &'a [Vec<String>], name: &str) -> &'a [String] {
    rows.iter()
        .find(|r| r.first().is_some_and(|c| c == name))
        .unwrap_or_else(|| panic!("no row {name:?} in {rows:#?}"))
}

/// The `metadata.name`s of a list's `items`, in order.
pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// One test per store for each case `fn case(server: Server)`: `case::sqlite` and
/// `case::etcd`.
///
/// ```ignore
/// common::apiserver::apiserver_cases! { creates, deletes }
/// fn creates(server: Server) { ... }
/// ```
macro_rules! apiserver_cases {
    ($($case:ident),* $(,)?) => {
        $(
            mod $case {
                #[test]
                fn sqlite() {
                    super::$case($crate::common::apiserver::Server::start(
                        $crate::common::apiserver::Store::Sqlite,
                    ));
                }

                #[test]
                fn etcd() {
                    super::$case($crate::common::apiserver::Server::start(
                        $crate::common::apiserver::Store::Etcd,
                    ));
                }
            }
        )*
    };
}
pub(crate) use apiserver_cases;

/// [`apiserver_cases!`] for `async fn case(server: Server)`, each run on a two-thread
/// tokio runtime (the server starts before the runtime).
macro_rules! apiserver_async_cases {
    ($($case:ident),* $(,)?) => {
        $(
            mod $case {
                #[test]
                fn sqlite() {
                    $crate::common::apiserver::block_on(super::$case(
                        $crate::common::apiserver::Server::start(
                            $crate::common::apiserver::Store::Sqlite,
                        ),
                    ));
                }

                #[test]
                fn etcd() {
                    $crate::common::apiserver::block_on(super::$case(
                        $crate::common::apiserver::Server::start(
                            $crate::common::apiserver::Store::Etcd,
                        ),
                    ));
                }
            }
        )*
    };
}
pub(crate) use apiserver_async_cases;

/// Runs `future` on a new two-thread tokio runtime.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build a tokio runtime")
        .block_on(future)
}
