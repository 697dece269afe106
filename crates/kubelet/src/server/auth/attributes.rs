//! The authorization attributes of a request to the main port (upstream
//! `pkg/kubelet/server/auth.go`, `nodeAuthorizerAttributesGetter.GetRequestAttributes`,
//! with the `KubeletFineGrainedAuthz` feature gate on, its v1.33 default).

use axum::http::Method;

use super::UserInfo;

/// What is asked of the authorizer for one request: `verb` on `nodes/<subresource>` named
/// after the node (API group `""`, version `v1`, no namespace, a resource request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// The requesting user.
    pub user: UserInfo,
    /// The API verb of the HTTP method (`get`, `create`, `update`, `patch`, `delete`), or
    /// empty for any other method, as upstream.
    pub verb: String,
    /// Always `nodes`.
    pub resource: &'static str,
    /// `proxy`, `stats`, `metrics`, `log`, `checkpoint`, `pods`, `healthz` or `configz`.
    pub subresource: &'static str,
    /// The node name.
    pub name: String,
    /// The request path (for logs only: the webhook sends resource attributes).
    pub path: String,
}

/// The node's attribute getter (upstream `NewNodeAuthorizerAttributesGetter`).
#[derive(Debug, Clone)]
pub struct NodeAttributesGetter {
    node_name: String,
}

impl NodeAttributesGetter {
    /// The getter for requests to `node_name`'s kubelet.
    pub fn new(node_name: impl Into<String>) -> Self {
        NodeAttributesGetter {
            node_name: node_name.into(),
        }
    }

    /// The attributes to check, in order: a request is allowed as soon as one of them is.
    /// A fine-grained subresource first when the path has one (`/pods` and
    /// `/runningpods/` → `pods`, `/healthz` → `healthz`, `/configz` → `configz`), then
    /// `stats` for `/stats/*`, `metrics` for `/metrics*`, `log` for `/logs/*`,
    /// `checkpoint` for `/checkpoint/*`, and `proxy` for everything else.
    pub fn attributes(&self, user: &UserInfo, method: &Method, path: &str) -> Vec<Attributes> {
        let verb = api_verb(method);
        let mut subresources = Vec::with_capacity(2);
        if let Some(fine) = fine_grained_subresource(path) {
            subresources.push(fine);
        }
        subresources.push(if is_subpath(path, "/stats/") {
            "stats"
        } else if is_subpath(path, "/metrics") {
            "metrics"
        } else if is_subpath(path, "/logs/") {
            // "log", as the pods/log subresource.
            "log"
        } else if is_subpath(path, "/checkpoint/") {
            "checkpoint"
        } else {
            "proxy"
        });
        subresources
            .into_iter()
            .map(|subresource| Attributes {
                user: user.clone(),
                verb: verb.to_owned(),
                resource: "nodes",
                subresource,
                name: self.node_name.clone(),
                path: path.to_owned(),
            })
            .collect()
    }
}

/// The API verb of an HTTP method, empty for methods upstream does not map.
fn api_verb(method: &Method) -> &'static str {
    match *method {
        Method::POST => "create",
        Method::GET => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
}

/// The `KubeletFineGrainedAuthz` subresource of `path`, checked before the coarse one.
fn fine_grained_subresource(path: &str) -> Option<&'static str> {
    if is_subpath(path, "/pods") {
        Some("pods")
    } else if is_subpath(path, "/healthz") {
        Some("healthz")
    } else if is_subpath(path, "/configz") {
        Some("configz")
    } else if is_subpath(path, "/runningpods/") {
        Some("pods")
    } else {
        None
    }
}

/// Whether `subpath` is `path` (without its trailing slash) or below it (upstream
/// `isSubpath`).
fn is_subpath(subpath: &str, path: &str) -> bool {
    let path = path.strip_suffix('/').unwrap_or(path);
    subpath == path
        || subpath
            .strip_prefix(path)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subresources(method: Method, path: &str) -> (String, Vec<&'static str>) {
        let getter = NodeAttributesGetter::new("node-a");
        let attrs = getter.attributes(&UserInfo::named("alice"), &method, path);
        for a in &attrs {
            assert_eq!((a.resource, a.name.as_str()), ("nodes", "node-a"));
            assert_eq!((a.user.name.as_str(), a.path.as_str()), ("alice", path));
        }
        (
            attrs[0].verb.clone(),
            attrs.iter().map(|a| a.subresource).collect(),
        )
    }

    #[test]
    fn maps_paths_to_subresources_as_upstream() {
        let cases: &[(&str, &[&str])] = &[
            ("/stats/summary", &["stats"]),
            ("/stats", &["stats"]),
            ("/statsx", &["proxy"]),
            ("/metrics", &["metrics"]),
            ("/metrics/resource", &["metrics"]),
            ("/metrics/cadvisor", &["metrics"]),
            ("/logs/", &["log"]),
            ("/logs/syslog", &["log"]),
            ("/logs", &["log"]),
            ("/checkpoint/ns/pod/c", &["checkpoint"]),
            ("/pods", &["pods", "proxy"]),
            ("/pods/", &["pods", "proxy"]),
            ("/podsx", &["proxy"]),
            ("/runningpods/", &["pods", "proxy"]),
            ("/runningpods", &["pods", "proxy"]),
            ("/healthz", &["healthz", "proxy"]),
            ("/healthz/ping", &["healthz", "proxy"]),
            ("/configz", &["configz", "proxy"]),
            ("/containerLogs/ns/pod/c", &["proxy"]),
            ("/exec/ns/pod/c", &["proxy"]),
            ("/attach/ns/pod/c", &["proxy"]),
            ("/portForward/ns/pod", &["proxy"]),
            ("/", &["proxy"]),
        ];
        for (path, want) in cases {
            assert_eq!(subresources(Method::GET, path).1, *want, "{path}");
        }
    }

    #[test]
    fn maps_methods_to_verbs_as_upstream() {
        let cases = [
            (Method::GET, "get"),
            (Method::POST, "create"),
            (Method::PUT, "update"),
            (Method::PATCH, "patch"),
            (Method::DELETE, "delete"),
            (Method::HEAD, ""),
            (Method::OPTIONS, ""),
        ];
        for (method, verb) in cases {
            assert_eq!(
                subresources(method.clone(), "/exec/a/b/c").0,
                verb,
                "{method}"
            );
        }
    }
}
