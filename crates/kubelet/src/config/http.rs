//! The http pod source (upstream `pkg/kubelet/config/http.go`): the pods served at
//! `--manifest-url` (`staticPodURL`), fetched every `httpCheckFrequency` with the
//! configured headers.
//!
//! The URL serves one Pod or a v1 PodList, as JSON or YAML. Each fetch whose body
//! changed sends a snapshot of all its pods (static pods named `<name>-<node>`, with the
//! `config.hash` and `config.source: http` annotations). A failed request, a non-200
//! status or a body that does not parse (one bad pod spoils the whole body, as upstream)
//! keeps the last good pods running and is logged once per distinct error; an empty body
//! means no pods.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::Snapshot;
use super::static_pod::{HTTP_SOURCE, apply_static_pod_defaults, http_pod_uid};
use super::validation::validate_pod;
use crate::error::{Error, Result};

/// Timeout of one request (upstream's http client: 10 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest body read (upstream `maxConfigLength`, 10 MB).
const MAX_BODY: u64 = 10 << 20;

/// What one request gave: the HTTP status and body, or a transport error.
pub type FetchResult = Result<(u16, Vec<u8>)>;

/// Polls one manifest URL and sends a snapshot of its pods whenever the body changes.
pub struct HttpSource {
    url: String,
    headers: BTreeMap<String, Vec<String>>,
    node_name: String,
    check_frequency: Duration,
    agent: ureq::Agent,
    /// The last body received (parsed or not), so unchanged bodies are skipped.
    last_body: Option<Vec<u8>>,
    /// The last error logged, so a persisting failure is logged once.
    last_error: Option<String>,
}

impl HttpSource {
    /// A source for `url`, requested every `check_frequency` with `headers` (each name
    /// sent once per value); pods are defaulted for `node_name`. Proxies from the
    /// environment are not used; `https://` URLs are verified against the system's
    /// trust store (rustls with ring).
    pub fn new(
        url: String,
        headers: BTreeMap<String, Vec<String>>,
        node_name: String,
        check_frequency: Duration,
    ) -> Self {
        // https: the system's trust store, with rustls on ring.
        let tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .root_certs(ureq::tls::RootCerts::PlatformVerifier)
            .build();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .tls_config(tls)
            .build()
            .into();
        Self {
            url,
            headers,
            node_name,
            check_frequency,
            agent,
            last_body: None,
            last_error: None,
        }
    }

    /// Fetches now and then every check period, sending each changed snapshot to
    /// `snapshots`. Returns when the receiver is gone.
    pub async fn run(mut self, snapshots: mpsc::Sender<Snapshot>) {
        let mut ticker = tokio::time::interval(self.check_frequency);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let (agent, url, headers) =
                (self.agent.clone(), self.url.clone(), self.headers.clone());
            let fetched = tokio::task::spawn_blocking(move || fetch(&agent, &url, &headers))
                .await
                .unwrap_or_else(|e| Err(Error::Config(format!("request task failed: {e}"))));
            let seen = crate::status::now().to_string();
            let (pods, error) = self.handle(fetched, &seen);
            match error {
                Some(e) if self.last_error.as_ref() != Some(&e) => {
                    warn!(url = %self.url, error = %e, "unable to read pods from the manifest URL; keeping the last good pods");
                    self.last_error = Some(e);
                }
                Some(_) => {}
                None => self.last_error = None,
            }
            if let Some(pods) = pods {
                info!(url = %self.url, pods = pods.len(), "read pods from the manifest URL");
                let snapshot = Snapshot {
                    source: HTTP_SOURCE,
                    pods,
                };
                if snapshots.send(snapshot).await.is_err() {
                    return;
                }
            }
        }
    }

    /// Turns one fetch into the snapshot to send (`None`: nothing changed or the body is
    /// bad) and the error to report. `seen` is the RFC 3339 time for `config.seen`.
    pub fn handle(
        &mut self,
        fetched: FetchResult,
        seen: &str,
    ) -> (Option<Vec<Pod>>, Option<String>) {
        let (status, body) = match fetched {
            Ok(response) => response,
            Err(e) => return (None, Some(e.to_string())),
        };
        if status != 200 {
            return (None, Some(format!("{}: HTTP status {status}", self.url)));
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            // Upstream reports the empty body and marks the source seen with no pods.
            self.last_body = Some(body);
            return (
                Some(Vec::new()),
                Some(format!("zero-length data received from {}", self.url)),
            );
        }
        if self.last_body.as_ref() == Some(&body) {
            return (None, None);
        }
        let parsed = parse_pods(&self.url, &body, &self.node_name, seen);
        self.last_body = Some(body);
        match parsed {
            Ok(pods) => (Some(pods), None),
            Err(e) => (None, Some(format!("{}: {e}", self.url))),
        }
    }
}

/// GETs `url` with `headers`; the status and at most [`MAX_BODY`] bytes of body.
fn fetch(agent: &ureq::Agent, url: &str, headers: &BTreeMap<String, Vec<String>>) -> FetchResult {
    let mut request = agent.get(url);
    for (name, values) in headers {
        for value in values {
            request = request.header(name, value);
        }
    }
    let mut response = request
        .call()
        .map_err(|e| Error::Config(format!("GET {url}: {e}")))?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_vec()
        .map_err(|e| Error::Config(format!("GET {url}: reading the body: {e}")))?;
    Ok((status, body))
}

/// Parses a body served at `url` (JSON or YAML) holding one Pod or a v1 PodList into
/// defaulted, validated static pods for `node_name`. Errors name the bad item and field.
pub fn parse_pods(url: &str, body: &[u8], node_name: &str, seen: &str) -> Result<Vec<Pod>> {
    // serde_json is linear and stops at 128 levels; YAML is read bounded (`skiff_api::yaml`).
    let document: Value = serde_json::from_slice(body)
        .or_else(|_| skiff_api::yaml::to_json(body))
        .map_err(|e| Error::Config(format!("neither JSON nor YAML: {e}")))?;
    let kind = document["kind"].as_str().unwrap_or("");
    let api_version = document["apiVersion"].as_str().unwrap_or("");
    if api_version != "v1" {
        return Err(Error::Config(format!(
            "apiVersion: must be \"v1\" (a Pod or a PodList), not {api_version:?}"
        )));
    }
    match kind {
        "Pod" => Ok(vec![parse_pod(url, document, node_name, seen)?]),
        "PodList" => {
            let Value::Array(items) = document["items"].clone() else {
                return Ok(Vec::new());
            };
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| {
                    parse_pod(url, item, node_name, seen)
                        .map_err(|e| Error::Config(format!("items[{i}]: {e}")))
                })
                .collect()
        }
        other => Err(Error::Config(format!(
            "kind: must be Pod or PodList, not {other:?}"
        ))),
    }
}

/// One served pod: its UID from its JSON and the URL, then the static pod defaults.
fn parse_pod(url: &str, item: Value, node_name: &str, seen: &str) -> Result<Pod> {
    let uid = http_pod_uid(url, item.to_string().as_bytes());
    let mut pod: Pod =
        serde_json::from_value(item).map_err(|e| Error::Config(format!("invalid pod: {e}")))?;
    if pod.metadata.name.as_deref().unwrap_or("").is_empty() {
        return Err(Error::Config("metadata.name: Required value".to_owned()));
    }
    apply_static_pod_defaults(&mut pod, node_name, HTTP_SOURCE, uid, seen);
    validate_pod(&pod)?;
    Ok(pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::static_pod::{CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION};

    const URL: &str = "http://127.0.0.1:1/pods";
    const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n";

    fn list(names: &[&str]) -> String {
        let items: Vec<String> = names
            .iter()
            .map(|n| format!(r#"{{"metadata":{{"name":"{n}"}},"spec":{{"containers":[{{"name":"c","image":"busybox"}}]}}}}"#))
            .collect();
        format!(
            r#"{{"apiVersion":"v1","kind":"PodList","items":[{}]}}"#,
            items.join(",")
        )
    }

    fn names(pods: &[Pod]) -> Vec<String> {
        pods.iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    }

    #[test]
    fn a_pod_or_a_pod_list_in_yaml_or_json() {
        let pods = parse_pods(URL, POD.as_bytes(), "node1", "T").unwrap_or_default();
        assert_eq!(names(&pods), vec!["web-node1"]);
        let meta = &pods[0].metadata;
        let ann = meta.annotations.clone().unwrap_or_default();
        assert_eq!(ann[CONFIG_SOURCE_ANNOTATION], "http");
        assert_eq!(Some(&ann[CONFIG_HASH_ANNOTATION]), meta.uid.as_ref());
        assert_eq!(meta.namespace.as_deref(), Some("default"));
        let spec = pods[0].spec.clone().unwrap_or_default();
        assert_eq!(spec.node_name.as_deref(), Some("node1"));

        let pods = parse_pods(URL, list(&["a", "b"]).as_bytes(), "node1", "T").unwrap_or_default();
        assert_eq!(names(&pods), vec!["a-node1", "b-node1"]);
        assert_ne!(pods[0].metadata.uid, pods[1].metadata.uid);
        let again = parse_pods(URL, list(&["a"]).as_bytes(), "node1", "T2").unwrap_or_default();
        assert_eq!(again[0].metadata.uid, pods[0].metadata.uid, "UID is stable");
        let other_url =
            parse_pods("http://x/", list(&["a"]).as_bytes(), "node1", "T").unwrap_or_default();
        assert_ne!(other_url[0].metadata.uid, pods[0].metadata.uid);
        assert!(
            parse_pods(
                URL,
                br#"{"apiVersion":"v1","kind":"PodList","items":[]}"#,
                "n",
                "T"
            )
            .is_ok_and(|p| p.is_empty())
        );
    }

    #[test]
    fn bad_bodies_are_errors() {
        let err = |body: &str| {
            parse_pods(URL, body.as_bytes(), "n", "T")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(err("{").contains("neither JSON nor YAML"));
        assert!(err(&POD.replace("kind: Pod", "kind: Service")).contains("kind:"));
        assert!(err(&POD.replace("apiVersion: v1", "apiVersion: v2")).contains("apiVersion"));
        assert!(err(&POD.replace("    image: busybox\n", "")).contains("image: Required"));
        let bad_item = list(&["ok", "Bad_Name"]);
        assert!(
            err(&bad_item).starts_with("items[1]: metadata.name"),
            "{}",
            err(&bad_item)
        );
    }

    #[tokio::test]
    async fn https_errors_are_reported_not_fatal() {
        let source = HttpSource::new(
            "https://127.0.0.1:1/pods".into(),
            BTreeMap::new(),
            "n".into(),
            Duration::from_secs(1),
        );
        let (tx, mut rx) = mpsc::channel(1);
        let task = tokio::spawn(source.run(tx));
        let no_snapshot = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await;
        assert!(no_snapshot.is_err(), "a refused connection sends nothing");
        assert!(!task.is_finished(), "the source keeps polling");
        task.abort();
        let agent = HttpSource::new(
            URL.into(),
            BTreeMap::new(),
            "n".into(),
            Duration::from_secs(1),
        )
        .agent;
        let err = fetch(&agent, "https://127.0.0.1:1/pods", &BTreeMap::new())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.starts_with("GET https://127.0.0.1:1/pods:"), "{err}");
    }

    #[test]
    fn failures_keep_the_last_pods_and_unchanged_bodies_are_skipped() {
        let mut source = HttpSource::new(
            URL.into(),
            BTreeMap::new(),
            "n".into(),
            Duration::from_secs(1),
        );
        let body = |s: String| Ok((200, s.into_bytes()));
        let (pods, error) = source.handle(body(list(&["a"])), "T");
        assert_eq!(pods.map(|p| names(&p)), Some(vec!["a-n".to_owned()]));
        assert!(error.is_none());
        assert_eq!(source.handle(body(list(&["a"])), "T2"), (None, None));
        let (pods, error) = source.handle(Ok((404, Vec::new())), "T");
        assert!(pods.is_none() && error.is_some_and(|e| e.contains("404")));
        let (pods, error) = source.handle(Err(Error::Config("connection refused".into())), "T");
        assert!(pods.is_none() && error.is_some());
        let (pods, error) = source.handle(body("kind: [".into()), "T");
        assert!(pods.is_none() && error.is_some());
        let (pods, _) = source.handle(body(list(&["a", "b"])), "T");
        assert_eq!(pods.map(|p| p.len()), Some(2));
        let (pods, error) = source.handle(body(String::new()), "T");
        assert_eq!(pods, Some(Vec::new()), "an empty body means no pods");
        assert!(error.is_some());
    }
}
