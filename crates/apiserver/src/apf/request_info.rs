//! What a request asks for, as API Priority and Fairness matches it (upstream
//! `k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`, `RequestInfoFactory`): resource
//! requests under `/api` and `/apis` with their verb, group, version, namespace, resource,
//! subresource and name; everything else is a non-resource request with the lower-case
//! HTTP method as its verb.

use axum::http::{Method, Uri};

/// Verbs written as the first path segment after the version (`/api/v1/watch/pods`).
const SPECIAL_VERBS: &[&str] = &["proxy", "watch"];
/// Subresources of a namespace itself (`/api/v1/namespaces/<ns>/status`).
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// One request's attributes (upstream `RequestInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the path names an API resource (under `/api` or `/apis`).
    pub is_resource_request: bool,
    /// The URL path, for non-resource rules.
    pub path: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `proxy`; for non-resource requests the lower-case method.
    pub verb: String,
    pub api_prefix: String,
    pub api_group: String,
    pub api_version: String,
    /// Empty for cluster-scoped requests.
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
}

impl RequestInfo {
    /// Parses a request line. Paths upstream cannot parse (a special verb without a
    /// resource) come back as non-resource requests.
    pub fn parse(method: &Method, uri: &Uri) -> RequestInfo {
        let path = uri.path();
        let info = RequestInfo {
            path: path.to_owned(),
            verb: method.as_str().to_ascii_lowercase(),
            ..RequestInfo::default()
        };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let parts: Vec<&str> = if parts == [""] { Vec::new() } else { parts };
        if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
            return info;
        }
        let mut rest = &parts[1..];
        let mut resource = info.clone();
        resource.api_prefix = parts[0].to_owned();
        if parts[0] == "apis" {
            if rest.len() < 3 {
                return info;
            }
            resource.api_group = rest[0].to_owned();
            rest = &rest[1..];
        }
        resource.is_resource_request = true;
        resource.api_version = rest[0].to_owned();
        rest = &rest[1..];
        if rest.first().is_some_and(|p| SPECIAL_VERBS.contains(p)) {
            if rest.len() < 2 {
                return info;
            }
            resource.verb = rest[0].to_owned();
            rest = &rest[1..];
        } else {
            resource.verb = match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            }
            .to_owned();
        }
        if rest.first() == Some(&"namespaces")
            && let Some(ns) = rest.get(1)
        {
            resource.namespace = (*ns).to_owned();
            if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
                rest = &rest[2..];
            }
        }
        if rest.len() >= 3 && resource.verb != "proxy" {
            resource.subresource = rest[2].to_owned();
        }
        if rest.len() >= 2 {
            resource.name = rest[1].to_owned();
        }
        if let Some(first) = rest.first() {
            resource.resource = (*first).to_owned();
        }
        if resource.name.is_empty() && resource.verb == "get" {
            let query = Query::parse(uri.query());
            resource.verb = if query.watch { "watch" } else { "list" }.to_owned();
            if let Some(name) = query
                .field_selector_name()
                .filter(|n| valid_path_segment(n))
            {
                resource.name = name;
            }
        }
        if resource.name.is_empty() && resource.verb == "delete" {
            resource.verb = "deletecollection".to_owned();
        }
        resource
    }

    /// Upstream's `BasicLongRunningRequestCheck` of kube-apiserver: the `watch` and `proxy`
    /// verbs and the `attach`, `exec`, `proxy`, `log` and `portforward` subresources.
    pub fn is_long_running(&self) -> bool {
        self.is_resource_request
            && (matches!(self.verb.as_str(), "watch" | "proxy")
                || matches!(
                    self.subresource.as_str(),
                    "attach" | "exec" | "proxy" | "log" | "portforward"
                ))
    }
}

/// `IsValidPathSegmentName`: not `.` or `..`, without `/` or `%`.
fn valid_path_segment(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

/// The query parameters the request info and the work estimate read.
#[derive(Debug, Default)]
pub struct Query {
    pub watch: bool,
    pub limit: i64,
    pub label_selector: String,
    pub field_selector: String,
    pub resource_version: String,
    pub continue_token: String,
    pub send_initial_events: bool,
    /// `timeout`, a Go duration (`30s`, `1m`).
    pub timeout: Option<std::time::Duration>,
}

impl Query {
    /// Reads the parameters; malformed values count as absent (the REST layer reports
    /// them).
    pub fn parse(query: Option<&str>) -> Query {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default();
        let mut out = Query::default();
        for (key, value) in pairs {
            match key.as_str() {
                "watch" => out.watch = matches!(value.as_str(), "true" | "1"),
                "limit" => out.limit = value.parse().unwrap_or(0),
                "labelSelector" => out.label_selector = value,
                "fieldSelector" => out.field_selector = value,
                "resourceVersion" => out.resource_version = value,
                "continue" => out.continue_token = value,
                "sendInitialEvents" => out.send_initial_events = value == "true",
                "timeout" => out.timeout = parse_go_duration(&value),
                _ => {}
            }
        }
        out
    }

    /// The name a field selector requires exactly (`metadata.name=x` or `==x`).
    fn field_selector_name(&self) -> Option<String> {
        self.field_selector.split(',').find_map(|term| {
            let (key, value) = term
                .split_once("==")
                .or_else(|| term.split_once('='))
                .filter(|(k, _)| !k.ends_with('!'))?;
            (key.trim() == "metadata.name").then(|| value.trim().to_owned())
        })
    }
}

/// A Go `time.ParseDuration` string (`1h2m3.5s`, `300ms`); `None` when malformed or
/// negative.
pub fn parse_go_duration(text: &str) -> Option<std::time::Duration> {
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Some(std::time::Duration::ZERO);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds;
    }
    std::time::Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, uri: &str) -> RequestInfo {
        RequestInfo::parse(&method, &uri.parse().unwrap())
    }

    #[test]
    fn resource_requests() {
        let list = info(Method::GET, "/api/v1/namespaces/ns1/pods?limit=5");
        assert!(list.is_resource_request);
        assert_eq!(
            (
                list.verb.as_str(),
                list.api_group.as_str(),
                list.namespace.as_str()
            ),
            ("list", "", "ns1")
        );
        assert_eq!(list.resource, "pods");

        let status = info(
            Method::PUT,
            "/apis/apps/v1/namespaces/a/deployments/d/status",
        );
        assert_eq!(
            (
                status.verb.as_str(),
                status.api_group.as_str(),
                status.resource.as_str(),
                status.name.as_str(),
                status.subresource.as_str()
            ),
            ("update", "apps", "deployments", "d", "status")
        );

        let watch = info(Method::GET, "/api/v1/watch/namespaces/a/pods");
        assert_eq!(
            (watch.verb.as_str(), watch.namespace.as_str()),
            ("watch", "a")
        );
        assert!(watch.is_long_running());
        let watch_param = info(Method::GET, "/api/v1/pods?watch=true");
        assert_eq!(watch_param.verb, "watch");

        let single = info(
            Method::GET,
            "/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dcm1",
        );
        assert_eq!(
            (single.verb.as_str(), single.name.as_str()),
            ("list", "cm1")
        );

        let collection = info(Method::DELETE, "/api/v1/namespaces/a/pods");
        assert_eq!(collection.verb, "deletecollection");

        let ns_status = info(Method::PUT, "/api/v1/namespaces/a/finalize");
        assert_eq!(
            (
                ns_status.resource.as_str(),
                ns_status.name.as_str(),
                ns_status.subresource.as_str(),
                ns_status.namespace.as_str()
            ),
            ("namespaces", "a", "finalize", "a")
        );

        let exec = info(Method::POST, "/api/v1/namespaces/a/pods/p/exec");
        assert!(exec.is_long_running());
        let nodes = info(Method::GET, "/api/v1/nodes/n1");
        assert_eq!((nodes.verb.as_str(), nodes.namespace.as_str()), ("get", ""));
    }

    #[test]
    fn non_resource_requests() {
        let health = info(Method::GET, "/readyz");
        assert!(!health.is_resource_request);
        assert_eq!(
            (health.verb.as_str(), health.path.as_str()),
            ("get", "/readyz")
        );
        let discovery = info(Method::GET, "/apis/apps");
        assert!(!discovery.is_resource_request);
        let core = info(Method::GET, "/api/v1");
        assert!(!core.is_resource_request);
        assert_eq!(info(Method::POST, "/version").verb, "post");
    }

    #[test]
    fn go_durations() {
        use std::time::Duration;
        assert_eq!(parse_go_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("10"), None);
        assert_eq!(parse_go_duration("-1s"), None);
    }
}
