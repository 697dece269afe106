//! Container environment (upstream `makeEnvironmentVariables`), the downward API values
//! of `fieldRef` and `resourceFieldRef` (upstream `podFieldSelectorRuntimeValue`,
//! `ExtractContainerResourceValue`) and `$(VAR)` expansion (upstream
//! `third_party/forked/golang/expansion`).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, ResourceFieldSelector};

use crate::cm::resources::ResourceAmounts;
use skiff_api::quantity;

/// The node's allocatable resources: the values of `resourceFieldRef` limits that a
/// container leaves unset (upstream `defaultPodLimitsForDownwardAPI`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeAllocatable {
    /// CPU in millicores.
    pub cpu_milli: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
}

impl NodeAllocatable {
    /// The cpu, memory and ephemeral-storage entries of the node allocatable the container
    /// manager computes ([`crate::cm::ContainerManager::node_allocatable`], the one source
    /// the node status reports too); a missing entry is 0.
    pub fn from_amounts(allocatable: &ResourceAmounts) -> Self {
        let get = |name: &str| allocatable.get(name).copied().unwrap_or(0);
        Self {
            cpu_milli: get("cpu"),
            memory: get("memory"),
            ephemeral_storage: get("ephemeral-storage"),
        }
    }
}

/// Node and pod facts that `fieldRef` / `resourceFieldRef` env vars may reference.
pub struct EnvContext<'a> {
    /// The pod's IPs, primary first.
    pub pod_ips: &'a [String],
    /// The node's IP.
    pub host_ip: &'a str,
    /// The node's allocatable resources.
    pub allocatable: NodeAllocatable,
}

/// The container's environment as ordered `(name, value)` pairs, with each plain value
/// `$(VAR)`-expanded against the variables defined before it and `fieldRef` /
/// `resourceFieldRef` values resolved. A later definition of a name replaces an earlier one.
///
/// Errors with upstream's messages on sources that need the API server (envFrom,
/// configMapKeyRef, secretKeyRef: "couldn't get configMap ns/name, no kubeClient
/// defined"), on unsupported field paths and resources.
pub fn make_environment(
    pod: &Pod,
    container: &Container,
    ctx: &EnvContext<'_>,
) -> Result<Vec<(String, String)>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    for source in container.env_from.iter().flatten() {
        if let Some(cm) = source.config_map_ref.as_ref() {
            return Err(no_client("configMap", namespace, &cm.name));
        }
        if let Some(secret) = source.secret_ref.as_ref() {
            return Err(no_client("secret", namespace, &secret.name));
        }
    }
    let mut env: Vec<(String, String)> = Vec::new();
    for var in container.env.iter().flatten() {
        let value = env_value(pod, container, var, &env, ctx)?;
        match env.iter_mut().find(|(name, _)| *name == var.name) {
            Some(existing) => existing.1 = value,
            None => env.push((var.name.clone(), value)),
        }
    }
    Ok(env)
}

fn no_client(kind: &str, namespace: &str, name: &str) -> String {
    format!("couldn't get {kind} {namespace}/{name}, no kubeClient defined")
}

fn env_value(
    pod: &Pod,
    container: &Container,
    var: &EnvVar,
    defined: &[(String, String)],
    ctx: &EnvContext<'_>,
) -> Result<String, String> {
    let Some(source) = var.value_from.as_ref() else {
        let lookup: HashMap<&str, &str> = defined
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        return Ok(expand(var.value.as_deref().unwrap_or(""), &lookup));
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    if let Some(field) = source.field_ref.as_ref() {
        return field_value(pod, &field.field_path, ctx)
            .ok_or_else(|| format!("unsupported fieldPath: {}", field.field_path));
    }
    if let Some(resource) = source.resource_field_ref.as_ref() {
        return resource_value(resource, container, ctx.allocatable);
    }
    if let Some(cm) = source.config_map_key_ref.as_ref() {
        return Err(no_client("configMap", namespace, &cm.name));
    }
    if let Some(secret) = source.secret_key_ref.as_ref() {
        return Err(no_client("secret", namespace, &secret.name));
    }
    Ok(String::new())
}

/// Resolves a downward-API field path (upstream `podFieldSelectorRuntimeValue`).
pub fn field_value(pod: &Pod, path: &str, ctx: &EnvContext<'_>) -> Option<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let keyed = |prefix: &str| {
        path.strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")
            .map(str::to_owned)
    };
    if let Some(key) = keyed("metadata.labels") {
        return Some(
            meta.labels
                .as_ref()
                .and_then(|l| l.get(&key))
                .cloned()
                .unwrap_or_default(),
        );
    }
    if let Some(key) = keyed("metadata.annotations") {
        return Some(
            meta.annotations
                .as_ref()
                .and_then(|a| a.get(&key))
                .cloned()
                .unwrap_or_default(),
        );
    }
    Some(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => ctx.host_ip.to_owned(),
        "status.podIP" => ctx.pod_ips.first().cloned().unwrap_or_default(),
        "status.podIPs" => ctx.pod_ips.join(","),
        _ => return None,
    })
}

/// Resolves a `resourceFieldRef` for `container` (upstream `ExtractContainerResourceValue`
/// after `defaultPodLimitsForDownwardAPI`): the request or limit divided by the divisor
/// (default `1`) and rounded up; CPU compares millicores, the others base units. A missing
/// cpu, memory or ephemeral-storage limit is the node's allocatable amount.
pub fn resource_value(
    selector: &ResourceFieldSelector,
    container: &Container,
    allocatable: NodeAllocatable,
) -> Result<String, String> {
    let resources = container.resources.as_ref();
    let (kind, name) = selector
        .resource
        .split_once('.')
        .ok_or_else(|| format!("unsupported container resource : {}", selector.resource))?;
    let list = match kind {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => {
            return Err(format!(
                "unsupported container resource : {}",
                selector.resource
            ));
        }
    };
    let amount = list.and_then(|l| l.get(name));
    let divisor = selector
        .divisor
        .as_ref()
        .filter(|d| quantity::parse(d).is_some_and(|v| v != 0.0));
    let value = match name {
        "cpu" => {
            let milli = match (amount, kind) {
                (Some(q), _) => quantity::milli_value(q),
                (None, "limits") => allocatable.cpu_milli,
                (None, _) => 0,
            };
            let per = divisor.map_or(1000, quantity::milli_value).max(1);
            ceil_div(milli, per)
        }
        "memory" | "ephemeral-storage" => {
            let bytes = match (amount, kind) {
                (Some(q), _) => quantity::value(q),
                (None, "limits") if name == "memory" => allocatable.memory,
                (None, "limits") => allocatable.ephemeral_storage,
                (None, _) => 0,
            };
            ceil_div(bytes, divisor.map_or(1, quantity::value).max(1))
        }
        hugepages if hugepages.starts_with("hugepages-") => ceil_div(
            amount.map_or(0, quantity::value),
            divisor.map_or(1, quantity::value).max(1),
        ),
        _ => {
            return Err(format!(
                "unsupported container resource : {}",
                selector.resource
            ));
        }
    };
    Ok(value.to_string())
}

/// `a / b` rounded up, for non-negative `a` and positive `b`.
fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1).div_euclid(b)
}

/// Expands `$(VAR)` references in `input` using `vars`: `$$` is a literal `$`, an
/// undefined `$(VAR)` and anything not of that form are left as written.
pub fn expand(input: &str, vars: &HashMap<&str, &str>) -> String {
    expand_with(input, |name| vars.get(name).map(|v| (*v).to_owned()))
}

/// [`expand`] with the value of each referenced name from `mapping` (`None`: undefined,
/// left as written); `mapping` sees every reference, so callers can note missing names.
pub fn expand_with(input: &str, mut mapping: impl FnMut(&str) -> Option<String>) -> String {
    let bytes = input.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < bytes.len() {
        if bytes[cursor] == b'$' && cursor + 1 < bytes.len() {
            out.extend_from_slice(&bytes[checkpoint..cursor]);
            let rest = &bytes[cursor + 1..];
            let advance = match rest[0] {
                b'$' => {
                    out.push(b'$');
                    1
                }
                b'(' => match rest.iter().position(|b| *b == b')') {
                    Some(end) => {
                        let name = String::from_utf8_lossy(&rest[1..end]);
                        match mapping(name.as_ref()) {
                            Some(value) => out.extend_from_slice(value.as_bytes()),
                            None => {
                                out.push(b'$');
                                out.extend_from_slice(&rest[..=end]);
                            }
                        }
                        end + 1
                    }
                    None => {
                        out.extend_from_slice(b"$(");
                        1
                    }
                },
                other => {
                    out.push(b'$');
                    out.push(other);
                    1
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.extend_from_slice(&bytes[checkpoint.min(bytes.len())..]);
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The container's command and args with `$(VAR)` expanded against its environment.
pub fn expand_command_and_args(
    container: &Container,
    env: &[(String, String)],
) -> (Vec<String>, Vec<String>) {
    let vars: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let expand_all = |list: &Option<Vec<String>>| {
        list.iter()
            .flatten()
            .map(|s| expand(s, &vars))
            .collect::<Vec<_>>()
    };
    (expand_all(&container.command), expand_all(&container.args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapEnvSource, EnvFromSource, EnvVarSource, ObjectFieldSelector, PodSpec,
        ResourceRequirements, SecretKeySelector,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn expansion_follows_upstream_rules() {
        let vars = HashMap::from([("A", "a"), ("EMPTY", ""), ("U", "ü")]);
        let cases = [
            ("$(A)", "a"),
            ("x$(A)y$(A)", "xaya"),
            ("$(B)", "$(B)"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$a"),
            ("$(A", "$(A"),
            ("$A", "$A"),
            ("a$", "a$"),
            ("$(EMPTY)!", "!"),
            ("ü$(U)ü", "üüü"),
            ("$()", "$()"),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, &vars), want, "input {input:?}");
        }
    }

    #[test]
    fn env_uses_earlier_vars_and_field_refs() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web-n".into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let field = |p: &str| {
            Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: p.into(),
                    api_version: None,
                }),
                ..Default::default()
            })
        };
        let var = |n: &str, v: &str| EnvVar {
            name: n.into(),
            value: Some(v.into()),
            value_from: None,
        };
        let container = Container {
            name: "c".into(),
            env: Some(vec![
                var("GREETING", "hello $(NAME)"),
                var("NAME", "world"),
                var("MSG", "$(GREETING) $(NAME)"),
                EnvVar {
                    name: "POD".into(),
                    value: None,
                    value_from: field("metadata.name"),
                },
                EnvVar {
                    name: "IP".into(),
                    value: None,
                    value_from: field("status.podIP"),
                },
            ]),
            command: Some(vec!["echo".into(), "$(MSG)".into()]),
            args: Some(vec!["$(POD)@$(IP)".into(), "$$(POD)".into()]),
            ..Default::default()
        };
        let ips = ["10.88.0.5".to_owned()];
        let ctx = EnvContext {
            pod_ips: &ips,
            host_ip: "192.168.1.2",
            allocatable: NodeAllocatable::default(),
        };
        let env = make_environment(&pod, &container, &ctx).unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("GREETING"), Some("hello $(NAME)"));
        assert_eq!(get("MSG"), Some("hello $(NAME) world"));
        assert_eq!(get("POD"), Some("web-n"));
        let (command, args) = expand_command_and_args(&container, &env);
        assert_eq!(command, vec!["echo", "hello $(NAME) world"]);
        assert_eq!(args, vec!["web-n@10.88.0.5", "$(POD)"]);
    }

    #[test]
    fn api_server_sources_are_rejected_with_upstream_messages() {
        let pod = Pod {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let ctx = EnvContext {
            pod_ips: &[],
            host_ip: "",
            allocatable: NodeAllocatable::default(),
        };
        let secret = Container {
            env: Some(vec![EnvVar {
                name: "S".into(),
                value: None,
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: "creds".into(),
                        key: "k".into(),
                        optional: None,
                    }),
                    ..Default::default()
                }),
            }]),
            ..Default::default()
        };
        assert_eq!(
            make_environment(&pod, &secret, &ctx),
            Err("couldn't get secret ns/creds, no kubeClient defined".into())
        );
        let env_from = Container {
            env_from: Some(vec![EnvFromSource {
                config_map_ref: Some(ConfigMapEnvSource {
                    name: "settings".into(),
                    optional: Some(true),
                }),
                ..Default::default()
            }]),
            ..Default::default()
        };
        assert_eq!(
            make_environment(&pod, &env_from, &ctx),
            Err("couldn't get configMap ns/settings, no kubeClient defined".into())
        );
        let bad_field = Container {
            env: Some(vec![EnvVar {
                name: "F".into(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "spec.hostname".into(),
                        api_version: None,
                    }),
                    ..Default::default()
                }),
            }]),
            ..Default::default()
        };
        assert_eq!(
            make_environment(&pod, &bad_field, &ctx),
            Err("unsupported fieldPath: spec.hostname".into())
        );
    }

    #[test]
    fn downward_api_fields() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u-1".into()),
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                annotations: Some([("a.b/c".to_owned(), "v".to_owned())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node1".into()),
                service_account_name: Some("sa".into()),
                ..Default::default()
            }),
            status: None,
        };
        let ips = ["10.0.0.2".to_owned(), "fd00::2".to_owned()];
        let ctx = EnvContext {
            pod_ips: &ips,
            host_ip: "192.168.1.2",
            allocatable: NodeAllocatable::default(),
        };
        let cases = [
            ("metadata.name", "p"),
            ("metadata.namespace", "ns"),
            ("metadata.uid", "u-1"),
            ("metadata.labels['app']", "web"),
            ("metadata.labels['missing']", ""),
            ("metadata.annotations['a.b/c']", "v"),
            ("spec.nodeName", "node1"),
            ("spec.serviceAccountName", "sa"),
            ("status.hostIP", "192.168.1.2"),
            ("status.hostIPs", "192.168.1.2"),
            ("status.podIP", "10.0.0.2"),
            ("status.podIPs", "10.0.0.2,fd00::2"),
        ];
        for (path, want) in cases {
            assert_eq!(
                field_value(&pod, path, &ctx).as_deref(),
                Some(want),
                "{path}"
            );
        }
        assert_eq!(field_value(&pod, "metadata.labels", &ctx), None);
    }

    #[test]
    fn resource_values_use_divisors_and_node_allocatable() {
        let q = |s: &str| Quantity(s.into());
        let container = Container {
            resources: Some(ResourceRequirements {
                requests: Some(
                    [
                        ("cpu".to_owned(), q("250m")),
                        ("memory".to_owned(), q("64Mi")),
                    ]
                    .into(),
                ),
                limits: Some([("memory".to_owned(), q("128Mi"))].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let node = NodeAllocatable {
            cpu_milli: 2000,
            memory: 8 << 30,
            ephemeral_storage: 10_000_000_000,
        };
        let value = |resource: &str, divisor: Option<&str>| {
            let selector = ResourceFieldSelector {
                resource: resource.into(),
                divisor: divisor.map(q),
                container_name: None,
            };
            resource_value(&selector, &container, node)
        };
        let ok = |s: &str| Ok(s.to_owned());
        assert_eq!(value("requests.cpu", None), ok("1"));
        assert_eq!(value("requests.cpu", Some("1m")), ok("250"));
        assert_eq!(value("requests.cpu", Some("100m")), ok("3"));
        assert_eq!(value("limits.cpu", None), ok("2"));
        assert_eq!(value("limits.cpu", Some("1m")), ok("2000"));
        assert_eq!(value("requests.memory", None), ok("67108864"));
        assert_eq!(value("limits.memory", Some("1Mi")), ok("128"));
        assert_eq!(value("limits.memory", Some("1G")), ok("1"));
        assert_eq!(value("limits.ephemeral-storage", Some("1G")), ok("10"));
        assert_eq!(value("requests.ephemeral-storage", None), ok("0"));
        assert_eq!(value("limits.cpu", Some("0")), ok("2"));
        assert_eq!(
            value("limits.gpu", None),
            Err("unsupported container resource : limits.gpu".into())
        );
    }

    #[test]
    fn allocatable_comes_from_the_container_manager_amounts() {
        let amounts: ResourceAmounts = [
            ("cpu".to_owned(), 3500),
            ("memory".to_owned(), 1 << 30),
            ("pid".to_owned(), 1000),
        ]
        .into();
        assert_eq!(
            NodeAllocatable::from_amounts(&amounts),
            NodeAllocatable {
                cpu_milli: 3500,
                memory: 1 << 30,
                ephemeral_storage: 0,
            }
        );
    }
}
