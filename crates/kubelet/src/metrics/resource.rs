//! `/metrics/resource` (upstream `pkg/kubelet/metrics/collectors/resource_metrics.go`):
//! node, pod and container CPU and memory from the Summary, in the Prometheus text
//! format with sample timestamps.

use std::fmt::Write;

use chrono::DateTime;

use crate::stats::summary::{CpuStats, MemoryStats, Summary};

/// The content type of [`encode`]'s output.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the resource metrics of `summary` (`None`: the summary failed, only
/// `scrape_error 1` is reported).
pub fn encode(summary: Option<&Summary>) -> String {
    let mut out = Metrics::default();
    let Some(summary) = summary else {
        out.gauge(
            "scrape_error",
            "1 if there was an error while getting container metrics, 0 otherwise",
            &[],
            1.0,
            None,
        );
        return out.finish();
    };
    let node = &summary.node;
    if let Some((v, t)) = cpu_seconds(node.cpu.as_ref()) {
        out.counter(
            "node_cpu_usage_seconds_total",
            "Cumulative cpu time consumed by the node in core-seconds",
            &[],
            v,
            t,
        );
    }
    if let Some((v, t)) = working_set(node.memory.as_ref()) {
        out.gauge(
            "node_memory_working_set_bytes",
            "Current working set of the node in bytes",
            &[],
            v,
            t,
        );
    }
    for pod in &summary.pods {
        let r = &pod.pod_ref;
        let pod_labels = [
            ("namespace", r.namespace.as_str()),
            ("pod", r.name.as_str()),
        ];
        for c in &pod.containers {
            let labels = [("container", c.name.as_str()), pod_labels[0], pod_labels[1]];
            if let Some((v, t)) = cpu_seconds(c.cpu.as_ref()) {
                out.counter(
                    "container_cpu_usage_seconds_total",
                    "Cumulative cpu time consumed by the container in core-seconds",
                    &labels,
                    v,
                    t,
                );
            }
            if let Some((v, t)) = working_set(c.memory.as_ref()) {
                out.gauge(
                    "container_memory_working_set_bytes",
                    "Current working set of the container in bytes",
                    &labels,
                    v,
                    t,
                );
            }
            if let Some(start) = timestamp(&c.start_time) {
                out.gauge(
                    "container_start_time_seconds",
                    "Start time of the container since unix epoch in seconds",
                    &labels,
                    start as f64 / 1000.0,
                    Some(start),
                );
            }
        }
        if let Some((v, t)) = cpu_seconds(pod.cpu.as_ref()) {
            out.counter(
                "pod_cpu_usage_seconds_total",
                "Cumulative cpu time consumed by the pod in core-seconds",
                &pod_labels,
                v,
                t,
            );
        }
        if let Some((v, t)) = working_set(pod.memory.as_ref()) {
            out.gauge(
                "pod_memory_working_set_bytes",
                "Current working set of the pod in bytes",
                &pod_labels,
                v,
                t,
            );
        }
    }
    out.gauge(
        "scrape_error",
        "1 if there was an error while getting container metrics, 0 otherwise",
        &[],
        0.0,
        None,
    );
    out.finish()
}

/// Core-seconds and the sample time (ms).
fn cpu_seconds(cpu: Option<&CpuStats>) -> Option<(f64, Option<i64>)> {
    let cpu = cpu?;
    Some((
        cpu.usage_core_nano_seconds? as f64 / 1e9,
        timestamp(&cpu.time),
    ))
}

fn working_set(memory: Option<&MemoryStats>) -> Option<(f64, Option<i64>)> {
    let memory = memory?;
    Some((memory.working_set_bytes? as f64, timestamp(&memory.time)))
}

/// An RFC 3339 time in milliseconds since the epoch.
fn timestamp(time: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(time)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// Text-format writer: one `# HELP` / `# TYPE` header per family, families in order of
/// first use.
#[derive(Default)]
struct Metrics {
    families: Vec<(String, String)>,
}

impl Metrics {
    fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64, t: Option<i64>) {
        self.sample("counter", name, help, labels, v, t);
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64, t: Option<i64>) {
        self.sample("gauge", name, help, labels, v, t);
    }

    fn sample(
        &mut self,
        kind: &str,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        v: f64,
        t: Option<i64>,
    ) {
        let index = match self.families.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                self.families.push((
                    name.to_owned(),
                    format!("# HELP {name} [ALPHA] {help}\n# TYPE {name} {kind}\n"),
                ));
                self.families.len() - 1
            }
        };
        let body = &mut self.families[index].1;
        body.push_str(name);
        if !labels.is_empty() {
            let pairs: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let _ = write!(body, "{{{}}}", pairs.join(","));
        }
        let _ = write!(body, " {v}");
        if let Some(t) = t {
            let _ = write!(body, " {t}");
        }
        body.push('\n');
    }

    fn finish(self) -> String {
        self.families.into_iter().map(|(_, body)| body).collect()
    }
}

/// Label value escaping of the text format.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summary::*;

    #[test]
    fn renders_node_pod_and_container_series() {
        let time = "2026-01-01T00:00:00Z".to_owned();
        let cpu = Some(CpuStats {
            time: time.clone(),
            usage_nano_cores: None,
            usage_core_nano_seconds: Some(1_500_000_000),
        });
        let memory = Some(MemoryStats {
            time: time.clone(),
            working_set_bytes: Some(4096),
            ..Default::default()
        });
        let summary = Summary {
            node: NodeStats {
                cpu: cpu.clone(),
                memory: memory.clone(),
                ..Default::default()
            },
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "p".into(),
                    namespace: "ns".into(),
                    uid: "u".into(),
                },
                containers: vec![ContainerStats {
                    name: "c".into(),
                    start_time: time.clone(),
                    cpu: cpu.clone(),
                    memory: memory.clone(),
                    ..Default::default()
                }],
                cpu,
                memory,
                ..Default::default()
            }],
        };
        let text = encode(Some(&summary));
        for line in [
            "# TYPE node_cpu_usage_seconds_total counter",
            "node_cpu_usage_seconds_total 1.5 1767225600000",
            "node_memory_working_set_bytes 4096 1767225600000",
            "container_cpu_usage_seconds_total{container=\"c\",namespace=\"ns\",pod=\"p\"} 1.5 1767225600000",
            "container_memory_working_set_bytes{container=\"c\",namespace=\"ns\",pod=\"p\"} 4096",
            "container_start_time_seconds{container=\"c\",namespace=\"ns\",pod=\"p\"} 1767225600 1767225600000",
            "pod_cpu_usage_seconds_total{namespace=\"ns\",pod=\"p\"} 1.5",
            "pod_memory_working_set_bytes{namespace=\"ns\",pod=\"p\"} 4096",
            "scrape_error 0",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(encode(None).contains("scrape_error 1"));
    }
}
