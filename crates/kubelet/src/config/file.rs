//! The file pod source (upstream `pkg/kubelet/config/file.go`): one pod per manifest file
//! in `--pod-manifest-path`, re-read on inotify events and every `file_check_frequency`.
//!
//! Every scan sends the full set of pods of the directory. A file that cannot be parsed
//! is reported once (until its content changes) and never stops the kubelet; a file that
//! used to be good and becomes broken keeps its last good pod.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use super::Snapshot;
use super::static_pod::{FILE_SOURCE, apply_static_pod_defaults, static_pod_uid};
use super::validation::validate_pod;

/// Manifest extensions read from the directory (upstream reads YAML and JSON).
const MANIFEST_EXTENSIONS: &[&str] = &["yaml", "yml", "json"];
/// Delay after a filesystem event before rescanning, to coalesce bursts of events.
const EVENT_SETTLE: Duration = Duration::from_millis(100);

/// A manifest whose pod is currently part of the snapshot.
struct Manifest {
    content: Vec<u8>,
    pod: Pod,
}

/// Watches one manifest directory and sends a snapshot of its pods after every scan.
pub struct FileSource {
    dir: PathBuf,
    node_name: String,
    check_frequency: Duration,
    manifests: HashMap<PathBuf, Manifest>,
    /// Content of files that failed to parse, so each failure is logged once.
    broken: HashMap<PathBuf, Vec<u8>>,
    dir_missing_logged: bool,
}

impl FileSource {
    /// A source for `dir`, rescanned every `check_frequency`; pods are defaulted for `node_name`.
    pub fn new(dir: PathBuf, node_name: String, check_frequency: Duration) -> Self {
        Self {
            dir,
            node_name,
            check_frequency,
            manifests: HashMap::new(),
            broken: HashMap::new(),
            dir_missing_logged: false,
        }
    }

    /// Scans now, then on every directory event and every check period, sending each
    /// snapshot to `snapshots`. Returns when the receiver is gone.
    pub async fn run(mut self, snapshots: mpsc::Sender<Snapshot>) {
        let (event_tx, mut events) = mpsc::unbounded_channel();
        let mut watcher = None;
        let mut ticker = tokio::time::interval(self.check_frequency);
        loop {
            if watcher.is_none() {
                watcher = self.watch(event_tx.clone());
            }
            let snapshot = Snapshot {
                source: FILE_SOURCE,
                pods: self.scan(),
            };
            if snapshots.send(snapshot).await.is_err() {
                return;
            }
            tokio::select! {
                _ = ticker.tick() => {}
                Some(()) = events.recv() => {
                    tokio::time::sleep(EVENT_SETTLE).await;
                    while events.try_recv().is_ok() {}
                }
            }
        }
    }

    /// Starts an inotify watch on the directory; `None` (retried on the next scan) when it
    /// does not exist yet.
    fn watch(&self, events: mpsc::UnboundedSender<()>) -> Option<notify::RecommendedWatcher> {
        let mut watcher =
            notify::recommended_watcher(move |_res: notify::Result<notify::Event>| {
                let _ = events.send(());
            })
            .map_err(
                |e| warn!(error = %e, "cannot create file watcher; relying on periodic rescans"),
            )
            .ok()?;
        watcher.watch(&self.dir, RecursiveMode::NonRecursive).ok()?;
        Some(watcher)
    }

    /// Reads the directory and returns the pods of all good (or last good) manifests.
    pub fn scan(&mut self) -> Vec<Pod> {
        let files = match manifest_files(&self.dir) {
            Ok(files) => {
                self.dir_missing_logged = false;
                files
            }
            Err(e) => {
                if !self.dir_missing_logged {
                    warn!(path = %self.dir.display(), error = %e, "unable to read pod manifest path; no static pods until it exists");
                    self.dir_missing_logged = true;
                }
                Vec::new()
            }
        };
        self.manifests.retain(|path, _| files.contains(path));
        self.broken.retain(|path, _| files.contains(path));
        for path in &files {
            self.read_manifest(path);
        }
        let mut pods: Vec<(&PathBuf, &Manifest)> = self.manifests.iter().collect();
        pods.sort_by(|a, b| a.0.cmp(b.0));
        pods.into_iter().map(|(_, m)| m.pod.clone()).collect()
    }

    /// Re-reads one manifest if its content changed.
    fn read_manifest(&mut self, path: &Path) {
        let content = match std::fs::read(path) {
            Ok(content) => content,
            Err(e) => {
                warn!(file = %path.display(), error = %e, "cannot read pod manifest");
                return;
            }
        };
        if self
            .manifests
            .get(path)
            .is_some_and(|m| m.content == content)
            || self.broken.get(path).is_some_and(|c| *c == content)
        {
            return;
        }
        let seen = crate::status::now().to_string();
        match parse_manifest(path, &content, &self.node_name, &seen) {
            Ok(pod) => {
                self.broken.remove(path);
                info!(file = %path.display(), pod = pod.metadata.name.as_deref().unwrap_or(""), "read static pod manifest");
                self.manifests
                    .insert(path.to_owned(), Manifest { content, pod });
            }
            Err(e) => {
                if self.manifests.contains_key(path) {
                    error!(file = %path.display(), error = %e, "invalid pod manifest; keeping the last good version of this pod running");
                } else {
                    error!(file = %path.display(), error = %e, "invalid pod manifest; ignoring this file");
                }
                self.broken.insert(path.to_owned(), content);
            }
        }
    }
}

/// The manifest files of `dir`: regular files with a manifest extension, no dotfiles.
fn manifest_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ext_ok = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| MANIFEST_EXTENSIONS.contains(&e));
        if !name.starts_with('.') && ext_ok && path.is_file() {
            files.push(path);
        }
    }
    Ok(files)
}

/// Parses one manifest (JSON for `.json`, else YAML) into a defaulted, validated pod.
pub fn parse_manifest(
    path: &Path,
    content: &[u8],
    node_name: &str,
    seen: &str,
) -> Result<Pod, String> {
    if content.iter().all(u8::is_ascii_whitespace) {
        return Err("manifest is empty".to_owned());
    }
    let is_json = path.extension().is_some_and(|e| e == "json");
    let mut pod: Pod = if is_json {
        serde_json::from_slice(content).map_err(|e| format!("invalid JSON pod: {e}"))?
    } else {
        serde_yaml_ng::from_slice(content).map_err(|e| format!("invalid YAML pod: {e}"))?
    };
    if pod.metadata.name.as_deref().unwrap_or("").is_empty() {
        return Err("metadata.name: Required value".to_owned());
    }
    let uid = static_pod_uid(node_name, path, content);
    apply_static_pod_defaults(&mut pod, node_name, FILE_SOURCE, uid, seen);
    validate_pod(&pod)?;
    Ok(pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n";

    fn parse(name: &str, content: &str) -> Result<Pod, String> {
        parse_manifest(Path::new(name), content.as_bytes(), "node1", "T")
    }

    #[test]
    fn parses_yaml_and_json() {
        let pod = parse("/m/web.yaml", GOOD);
        assert_eq!(
            pod.ok().and_then(|p| p.metadata.name),
            Some("web-node1".to_owned())
        );
        let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#;
        assert!(parse("/m/j.json", json).is_ok());
    }

    #[test]
    fn parse_errors_are_clear() {
        let err = |name: &str, c: &str| parse(name, c).err().unwrap_or_default();
        assert!(err("/m/a.yaml", "").contains("empty"));
        assert!(err("/m/a.yaml", "metadata: [unclosed").contains("invalid YAML"));
        assert!(err("/m/a.json", "{").contains("invalid JSON"));
        let wrong_type = GOOD.replace(
            "  containers:",
            "  terminationGracePeriodSeconds: soon\n  containers:",
        );
        assert!(err("/m/a.yaml", &wrong_type).contains("invalid YAML"));
        let no_containers =
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers: []\n";
        assert!(err("/m/a.yaml", no_containers).contains("spec.containers: Required value"));
        assert!(
            err("/m/a.yaml", &GOOD.replace("name: web", "name: Web_1")).contains("metadata.name")
        );
        assert!(
            err("/m/a.yaml", &GOOD.replace("name: web\n", "labels: {}\n"))
                .contains("metadata.name: Required")
        );
        assert!(err("/m/a.yaml", &GOOD.replace("kind: Pod", "kind: Service")).contains("Service"));
        assert!(
            err("/m/a.yaml", &GOOD.replace("    image: busybox\n", "")).contains("image: Required")
        );
    }

    #[test]
    fn scan_ignores_dotfiles_and_other_extensions_and_keeps_last_good() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let write = |name: &str, c: &str| {
            std::fs::write(dir.path().join(name), c).unwrap_or_else(|e| panic!("{e}"))
        };
        write("web.yaml", GOOD);
        write(".hidden.yaml", &GOOD.replace("web", "hidden"));
        write("notes.txt", "hello");
        write("bad.yml", "spec: [");
        let mut source = FileSource::new(
            dir.path().to_owned(),
            "node1".into(),
            Duration::from_secs(20),
        );
        let pods = source.scan();
        assert_eq!(pods.len(), 1);
        let uid = pods[0].metadata.uid.clone();

        write("web.yaml", "not: [valid");
        let pods = source.scan();
        assert_eq!(pods.len(), 1, "broken file keeps its last good pod");
        assert_eq!(pods[0].metadata.uid, uid);

        write("web.yaml", &GOOD.replace("busybox", "busybox:1.36"));
        let pods = source.scan();
        assert_eq!(pods.len(), 1);
        assert_ne!(pods[0].metadata.uid, uid, "an edit gives a new UID");

        std::fs::remove_file(dir.path().join("web.yaml")).unwrap_or_else(|e| panic!("{e}"));
        assert!(source.scan().is_empty());
    }

    #[test]
    fn rescanning_unchanged_file_keeps_the_same_pod() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        std::fs::write(dir.path().join("web.yaml"), GOOD).unwrap_or_else(|e| panic!("{e}"));
        let mut source = FileSource::new(
            dir.path().to_owned(),
            "node1".into(),
            Duration::from_secs(20),
        );
        let first = source.scan();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(first, source.scan());
    }
}
