//! The file pod source (upstream `pkg/kubelet/config/file.go`): one pod per manifest file
//! in `--pod-manifest-path`, re-read on inotify events and every `file_check_frequency`.
//!
//! Every scan sends the full set of pods of the directory. A file that cannot be parsed
//! is reported once (until its content changes) and never stops the kubelet; a file that
//! used to be good and becomes broken keeps its last good pod.
//!
//! Manifests are untrusted input: a file larger than [`MAX_MANIFEST_BYTES`] or nesting
//! deeper than `skiff_api::yaml::MAX_FLOW_DEPTH` is refused before it is parsed; a FIFO,
//! a device, a directory, a dangling link or a link loop named `*.yaml` is reported once
//! and never opened for reading (a FIFO never blocks the source); scans run on a blocking
//! thread, off the kubelet's async workers. Two files giving the same pod name: the first
//! in name order wins, as upstream's `filterInvalidPods` keeps the first, and the log names
//! both files.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use super::Snapshot;
use super::static_pod::{FILE_SOURCE, apply_static_pod_defaults, static_pod_uid};
use super::validation::validate_pod;
use crate::error::{Error, Result};

/// Manifest extensions read from the directory (upstream reads YAML and JSON).
const MANIFEST_EXTENSIONS: &[&str] = &["yaml", "yml", "json"];
/// Largest manifest read, in bytes: the API server's request body limit (upstream
/// `MaxRequestBodyBytes`, 3 MiB), beyond which a mirror pod could not be stored either.
pub const MAX_MANIFEST_BYTES: u64 = 3 << 20;

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
    /// Files that could not be read (not a regular file, too large, a dangling link, ...)
    /// with the problem last logged, so each is logged once until it changes.
    unreadable: HashMap<PathBuf, String>,
    /// Pairs of files (kept, ignored) whose duplicate pod name was logged.
    duplicates: HashSet<(PathBuf, PathBuf)>,
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
            unreadable: HashMap::new(),
            duplicates: HashSet::new(),
            dir_missing_logged: false,
        }
    }

    /// Scans now, then on every directory event and every check period, sending each
    /// snapshot to `snapshots`. Returns when the receiver is gone. Each scan runs on a
    /// blocking thread.
    pub async fn run(mut self, snapshots: mpsc::Sender<Snapshot>) {
        let (event_tx, mut events) = mpsc::unbounded_channel();
        let mut watcher = None;
        let mut ticker = tokio::time::interval(self.check_frequency);
        loop {
            if watcher.is_none() {
                watcher = self.watch(event_tx.clone());
            }
            let scanned = tokio::task::spawn_blocking(move || {
                let pods = self.scan();
                (self, pods)
            })
            .await;
            let pods;
            (self, pods) = match scanned {
                Ok(done) => done,
                Err(e) => {
                    error!(error = %e, "the manifest scan failed; the file source stops");
                    return;
                }
            };
            let snapshot = Snapshot {
                source: FILE_SOURCE,
                pods,
            };
            if snapshots.send(snapshot).await.is_err() {
                return;
            }
            tokio::select! {
                _ = ticker.tick() => {}
                Some(()) = events.recv() => {
                    // Events that came meanwhile are covered by this scan.
                    while events.try_recv().is_ok() {}
                }
            }
        }
    }

    /// Starts an inotify watch on the directory; `None` (retried on the next scan) when it
    /// does not exist yet. Only events after which a file is complete trigger a scan (see
    /// [`completes_a_file`]), so a scan never waits for a settle window and never reads a
    /// file half written.
    fn watch(&self, events: mpsc::UnboundedSender<()>) -> Option<notify::RecommendedWatcher> {
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.as_ref().map_or(true, completes_a_file) {
                let _ = events.send(());
            }
        })
        .map_err(|e| warn!(error = %e, "cannot create file watcher; relying on periodic rescans"))
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
        self.unreadable.retain(|path, _| files.contains(path));
        for path in &files {
            self.read_manifest(path);
        }
        let mut manifests: Vec<(&PathBuf, &Manifest)> = self.manifests.iter().collect();
        manifests.sort_by(|a, b| a.0.cmp(b.0));
        // Upstream's `filterInvalidPods`: one pod per full name, the first file's.
        let mut first_file: HashMap<(&str, &str), &PathBuf> = HashMap::new();
        let mut pods = Vec::with_capacity(manifests.len());
        let mut duplicates = HashSet::new();
        for (path, manifest) in manifests {
            let meta = &manifest.pod.metadata;
            let key = (
                meta.namespace.as_deref().unwrap_or(""),
                meta.name.as_deref().unwrap_or(""),
            );
            match first_file.get(&key) {
                Some(kept) => {
                    let pair = ((*kept).clone(), path.clone());
                    if !self.duplicates.contains(&pair) {
                        warn!(
                            file = %path.display(),
                            kept = %kept.display(),
                            pod = key.1,
                            namespace = key.0,
                            "pod failed validation due to duplicate pod name, ignoring this file"
                        );
                    }
                    duplicates.insert(pair);
                }
                None => {
                    first_file.insert(key, path);
                    pods.push(manifest.pod.clone());
                }
            }
        }
        self.duplicates = duplicates;
        pods
    }

    /// Logs `problem` about `path` unless it was the last one logged for it.
    fn report_unreadable(&mut self, path: &Path, problem: String) {
        if self.unreadable.get(path) != Some(&problem) {
            warn!(file = %path.display(), problem = %problem, "cannot read pod manifest; ignoring this file");
            self.unreadable.insert(path.to_owned(), problem);
        }
    }

    /// Re-reads one manifest if its content changed.
    fn read_manifest(&mut self, path: &Path) {
        let content = match read_bounded(path) {
            Ok(content) => {
                self.unreadable.remove(path);
                content
            }
            Err(problem) => {
                self.report_unreadable(path, problem.to_string());
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

/// Whether `event` may leave a manifest complete: a file closed after writing, a rename,
/// a removal, a change of attributes, or a creation of anything but an empty regular file
/// (a symlink or a directory gets no close event). Writes to a file still open, and the
/// creation of an empty file about to be written, wait for its close.
fn completes_a_file(event: &notify::Event) -> bool {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Data(_)) => false,
        EventKind::Create(CreateKind::File) | EventKind::Create(CreateKind::Any) => !event
            .paths
            .iter()
            .all(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0)),
        _ => true,
    }
}

/// The manifest candidates of `dir`: entries with a manifest extension, no dotfiles,
/// whatever their type ([`read_bounded`] tells what is wrong with one that is no file).
fn manifest_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ext_ok = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| MANIFEST_EXTENSIONS.contains(&e));
        if !name.starts_with('.') && ext_ok {
            files.push(path);
        }
    }
    Ok(files)
}

/// Reads the manifest at `path` (symlinks followed, as upstream's `os.Stat`): only a
/// regular file of at most [`MAX_MANIFEST_BYTES`]. Errors with the problem to log: a
/// directory ("not recursing into manifest path"), anything else that is no regular file,
/// a dangling link, a link loop, a file too large. Nothing that is not a regular file is
/// ever opened (a FIFO would block), and the file read is checked to be the one stat'ed.
fn read_bounded(path: &Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::Config(format!("could not get metadata: {e}")))?;
    if meta.is_dir() {
        return Err(Error::Config(
            "not recursing into manifest path: it is a directory".to_owned(),
        ));
    }
    if !meta.is_file() {
        return Err(Error::Config(
            "manifest path is not a directory or file".to_owned(),
        ));
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(Error::Config(format!(
            "manifest is {} bytes, more than the limit of {MAX_MANIFEST_BYTES} bytes",
            meta.len()
        )));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Error::Config(format!("could not open: {e}")))?;
    let opened = file
        .metadata()
        .map_err(|e| Error::Config(format!("could not stat: {e}")))?;
    if !opened.is_file() || (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
        return Err(Error::Config(
            "manifest changed while it was opened".to_owned(),
        ));
    }
    let mut content = Vec::with_capacity(opened.len() as usize);
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut content)
        .map_err(|e| Error::Config(format!("could not read: {e}")))?;
    if content.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(Error::Config(format!(
            "manifest grew beyond the limit of {MAX_MANIFEST_BYTES} bytes"
        )));
    }
    Ok(content)
}

/// Parses one manifest (JSON for `.json`, else YAML) into a defaulted, validated pod.
pub fn parse_manifest(path: &Path, content: &[u8], node_name: &str, seen: &str) -> Result<Pod> {
    if content.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::Config("manifest is empty".to_owned()));
    }
    let is_json = path.extension().is_some_and(|e| e == "json");
    // YAML becomes JSON first and the pod is decoded from that, as upstream decodes a
    // manifest, so JSON's types hold (`name: 12345` is a number, not a name).
    let mut pod: Pod = if is_json {
        skiff_api::yaml::check_nesting(content, skiff_api::yaml::MAX_FLOW_DEPTH)
            .map_err(|e| Error::Config(format!("invalid JSON pod: {e}")))?;
        serde_json::from_slice(content)
            .map_err(|e| Error::Config(format!("invalid JSON pod: {e}")))?
    } else {
        let value = skiff_api::yaml::to_json(content)
            .map_err(|e| Error::Config(format!("invalid YAML pod: {e}")))?;
        serde_json::from_value(value)
            .map_err(|e| Error::Config(format!("invalid YAML pod: {e}")))?
    };
    if pod.metadata.name.as_deref().unwrap_or("").is_empty() {
        return Err(Error::Config("metadata.name: Required value".to_owned()));
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

    fn parse(name: &str, content: &str) -> Result<Pod> {
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
        let err = |name: &str, c: &str| {
            parse(name, c)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
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

    /// Hostile or odd entries are refused or reported without blocking or stalling the
    /// scan: a FIFO, a directory, a dangling link, a link loop, an oversized file and a
    /// deeply nested one, all named `*.yaml`, next to a good manifest.
    #[test]
    fn odd_entries_never_block_or_stall_the_scan() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("web.yaml"), GOOD).unwrap_or_else(|e| panic!("{e}"));
        nix::unistd::mkfifo(
            &path("fifo.yaml"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap_or_else(|e| panic!("mkfifo: {e}"));
        std::fs::create_dir(path("dir.yaml")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("missing.yaml", path("dangling.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("loop.yaml", path("loop.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(path("nested.yaml"), "[".repeat(100_000)).unwrap_or_else(|e| panic!("{e}"));
        let big = std::fs::File::create(path("big.yaml")).unwrap_or_else(|e| panic!("{e}"));
        big.set_len(MAX_MANIFEST_BYTES + 1)
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("web.yaml", path("link.yml")).unwrap_or_else(|e| panic!("{e}"));

        let mut source = FileSource::new(
            dir.path().to_owned(),
            "node1".into(),
            Duration::from_secs(20),
        );
        let started = std::time::Instant::now();
        let pods = source.scan();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        // web.yaml, and link.yml (a link to it) gives the same pod name: one pod.
        assert_eq!(pods.len(), 1, "{pods:?}");
        let problem = |name: &str| {
            source
                .unreadable
                .get(&path(name))
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(
            problem("fifo.yaml"),
            "manifest path is not a directory or file"
        );
        for (name, says) in [
            ("dir.yaml", "not recursing"),
            ("dangling.yaml", "No such file"),
            ("loop.yaml", "symbolic links"),
            ("big.yaml", "more than the limit"),
        ] {
            assert!(problem(name).contains(says), "{name}: {}", problem(name));
        }
        assert!(
            source.broken.contains_key(&path("nested.yaml")),
            "the nested file is a parse error"
        );
        assert!(
            source
                .duplicates
                .contains(&(path("link.yml"), path("web.yaml"))),
            "{:?}",
            source.duplicates
        );
    }

    /// Two files with the same pod name: the first in name order wins, the other is
    /// ignored until the name is free again.
    #[test]
    fn duplicate_pod_names_keep_the_first_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        std::fs::write(dir.path().join("a.yaml"), GOOD).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.path().join("b.yaml"),
            GOOD.replace("busybox", "busybox:1.36"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut source = FileSource::new(
            dir.path().to_owned(),
            "node1".into(),
            Duration::from_secs(20),
        );
        let pods = source.scan();
        assert_eq!(pods.len(), 1);
        assert_eq!(
            pods[0].spec.as_ref().map(|s| s.containers[0].image.clone()),
            Some(Some("busybox".to_owned()))
        );
        std::fs::remove_file(dir.path().join("a.yaml")).unwrap_or_else(|e| panic!("{e}"));
        let pods = source.scan();
        assert_eq!(
            pods[0].spec.as_ref().map(|s| s.containers[0].image.clone()),
            Some(Some("busybox:1.36".to_owned()))
        );
    }

    #[test]
    fn metadata_is_validated_with_json_types() {
        let err = |c: &str| {
            parse("/m/a.yaml", c)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let number = GOOD.replace("name: web", "name: 12345");
        assert!(
            err(&number).contains("expected a string"),
            "{}",
            err(&number)
        );
        let label = GOOD.replace(
            "  name: web\n",
            "  name: web\n  labels: {\"-bad key\": x}\n",
        );
        assert!(
            err(&label).contains("metadata.labels: Invalid value: \"-bad key\""),
            "{}",
            err(&label)
        );
        // Quantities may be numbers, as upstream's JSON decoding allows.
        let cpu = GOOD.replace(
            "    image: busybox\n",
            "    image: busybox\n    resources: {limits: {cpu: 1, memory: 64Mi}}\n",
        );
        assert!(parse("/m/a.yaml", &cpu).is_ok(), "{}", err(&cpu));
    }
}
