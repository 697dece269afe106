//! Container environment (upstream `makeEnvironmentVariables`), the downward API values
//! of `fieldRef` and `resourceFieldRef` (upstream `podFieldSelectorRuntimeValue`,
//! `ExtractContainerResourceValue`) and `$(VAR)` expansion (upstream
//! `third_party/forked/golang/expansion`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, ResourceFieldSelector, Secret};

use super::envvars;
use crate::cm::resources::ResourceAmounts;
use crate::config::apiserver::API_SOURCE;
use crate::config::static_pod::CONFIG_SOURCE_ANNOTATION;
use crate::error::{Error, Result};
use crate::objects::ObjectSource;
use crate::volume::configmap::get_optional_config_map;
use crate::volume::secret::{get_optional_secret, secret_data};
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

/// Node and pod facts that `fieldRef` / `resourceFieldRef` env vars may reference, and
/// where ConfigMaps, Secrets and Services are read.
pub struct EnvContext<'a> {
    /// The pod's IPs, primary first.
    pub pod_ips: &'a [String],
    /// The node's IP.
    pub host_ip: &'a str,
    /// The node's allocatable resources.
    pub allocatable: NodeAllocatable,
    /// ConfigMaps, Secrets and Services; `None` (or a source without a client) is a
    /// standalone kubelet.
    pub objects: Option<&'a dyn ObjectSource>,
}

/// The container's environment as ordered `(name, value)` pairs (upstream
/// `makeEnvironmentVariables`): first the keys of each `envFrom` source (with its
/// prefix), then `env` in order, each plain value `$(VAR)`-expanded against the variables
/// defined before it and the service variables, each `valueFrom` resolved; then the
/// service variables not defined otherwise. A later definition of a name replaces an
/// earlier one.
///
/// Errors with upstream's messages: standalone, any ConfigMap or Secret source
/// (`couldn't get configMap ns/name, no kubeClient defined`); a missing object or key
/// unless optional (`configmap "x" not found`, `couldn't find key k in ConfigMap ns/x`);
/// Services not read yet for a pod from the API server (`services have not yet been read
/// at least once, cannot construct envvars`); unsupported field paths and resources.
pub fn make_environment(
    pod: &Pod,
    container: &Container,
    ctx: &EnvContext<'_>,
) -> Result<Vec<(String, String)>> {
    make_environment_reporting(pod, container, ctx, &mut |_| {})
}

/// [`make_environment`], giving `invalid_keys` the message of each `envFrom` source
/// whose keys were skipped as invalid variable names (upstream's
/// `InvalidEnvironmentVariableNames` event).
pub fn make_environment_reporting(
    pod: &Pod,
    container: &Container,
    ctx: &EnvContext<'_>,
    invalid_keys: &mut dyn FnMut(String),
) -> Result<Vec<(String, String)>> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let objects = ctx.objects.filter(|o| o.has_client());
    let service_env = service_env(pod, objects)?;
    let mut config_maps: HashMap<String, Option<Arc<ConfigMap>>> = HashMap::new();
    let mut secrets: HashMap<String, Option<Arc<Secret>>> = HashMap::new();
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, name: String, value: String| match env
        .iter_mut()
        .find(|(n, _)| *n == name)
    {
        Some(existing) => existing.1 = value,
        None => env.push((name, value)),
    };
    for source in container.env_from.iter().flatten() {
        let prefix = source.prefix.as_deref().unwrap_or("");
        let (kind, name, data) = if let Some(cm) = source.config_map_ref.as_ref() {
            let objects = objects.ok_or_else(|| no_client("configMap", namespace, &cm.name))?;
            let optional = cm.optional == Some(true);
            let Some(config_map) =
                cached_config_map(&mut config_maps, objects, namespace, &cm.name, optional)?
            else {
                continue;
            };
            let data: BTreeMap<String, String> = config_map
                .data
                .clone()
                .unwrap_or_default()
                .into_iter()
                .collect();
            ("configMap", &cm.name, data)
        } else if let Some(secret_ref) = source.secret_ref.as_ref() {
            let objects =
                objects.ok_or_else(|| no_client("secret", namespace, &secret_ref.name))?;
            let optional = secret_ref.optional == Some(true);
            let Some(secret) =
                cached_secret(&mut secrets, objects, namespace, &secret_ref.name, optional)?
            else {
                continue;
            };
            let data: BTreeMap<String, String> = secret_data(Some(&secret))
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
                .collect();
            ("secret", &secret_ref.name, data)
        } else {
            continue;
        };
        let mut invalid = Vec::new();
        for (key, value) in data {
            let key = format!("{prefix}{key}");
            if !is_env_var_name(&key) {
                invalid.push(key);
                continue;
            }
            set(&mut env, key, value);
        }
        if !invalid.is_empty() {
            invalid.sort();
            invalid_keys(format!(
                "Keys [{}] from the EnvFrom {kind} {namespace}/{name} were skipped since they are considered invalid environment variable names.",
                invalid.join(", ")
            ));
        }
    }
    for var in container.env.iter().flatten() {
        let value = match var.value_from.as_ref() {
            Some(source) if var.value.as_deref().unwrap_or("").is_empty() => {
                if let Some(cm) = source.config_map_key_ref.as_ref() {
                    let objects =
                        objects.ok_or_else(|| no_client("configMap", namespace, &cm.name))?;
                    let optional = cm.optional == Some(true);
                    let value = cached_config_map(
                        &mut config_maps,
                        objects,
                        namespace,
                        &cm.name,
                        optional,
                    )?
                    .and_then(|c| c.data.as_ref()?.get(&cm.key).cloned());
                    match value {
                        Some(value) => value,
                        None if optional => continue,
                        None => {
                            return Err(Error::InvalidPod(format!(
                                "couldn't find key {} in ConfigMap {namespace}/{}",
                                cm.key, cm.name
                            )));
                        }
                    }
                } else if let Some(key_ref) = source.secret_key_ref.as_ref() {
                    let objects =
                        objects.ok_or_else(|| no_client("secret", namespace, &key_ref.name))?;
                    let optional = key_ref.optional == Some(true);
                    let value =
                        cached_secret(&mut secrets, objects, namespace, &key_ref.name, optional)?
                            .and_then(|s| secret_data(Some(&s)).remove(&key_ref.key));
                    match value {
                        Some(value) => String::from_utf8_lossy(&value).into_owned(),
                        None if optional => continue,
                        None => {
                            return Err(Error::InvalidPod(format!(
                                "couldn't find key {} in Secret {namespace}/{}",
                                key_ref.key, key_ref.name
                            )));
                        }
                    }
                } else if let Some(field) = source.field_ref.as_ref() {
                    field_value(pod, &field.field_path, ctx).ok_or_else(|| {
                        Error::InvalidPod(format!("unsupported fieldPath: {}", field.field_path))
                    })?
                } else if let Some(resource) = source.resource_field_ref.as_ref() {
                    resource_value(resource, container, ctx.allocatable)?
                } else {
                    String::new()
                }
            }
            _ => expand_with(var.value.as_deref().unwrap_or(""), |name| {
                env.iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
                    .or_else(|| service_env.get(name).cloned())
            }),
        };
        set(&mut env, var.name.clone(), value);
    }
    for (name, value) in service_env {
        if !env.iter().any(|(n, _)| *n == name) {
            env.push((name, value));
        }
    }
    Ok(env)
}

/// The service variables of `pod` (empty standalone). A pod from the API server waits
/// until the Services were read once; a static pod takes what is there.
fn service_env(pod: &Pod, objects: Option<&dyn ObjectSource>) -> Result<BTreeMap<String, String>> {
    let Some(objects) = objects else {
        return Ok(BTreeMap::new());
    };
    match objects.services() {
        Ok(services) => Ok(envvars::service_env_var_map(pod, &services)),
        Err(_) if is_static_pod(pod) => Ok(BTreeMap::new()),
        Err(_) => Err(Error::InvalidPod(
            "services have not yet been read at least once, cannot construct envvars".to_owned(),
        )),
    }
}

/// True for pods from a file or HTTP source (upstream `IsStaticPod`: a config source
/// other than the API server).
fn is_static_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
        .is_some_and(|source| source != API_SOURCE)
}

/// A valid variable name under the relaxed validation of v1.33
/// (`RelaxedEnvironmentVariableValidation`, on by default): printable ASCII except `=`.
fn is_env_var_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
}

/// ConfigMap `name` from `cache` or `objects`; `None` when missing and `optional`.
fn cached_config_map(
    cache: &mut HashMap<String, Option<Arc<ConfigMap>>>,
    objects: &dyn ObjectSource,
    namespace: &str,
    name: &str,
    optional: bool,
) -> Result<Option<Arc<ConfigMap>>> {
    if let Some(Some(found)) = cache.get(name) {
        return Ok(Some(found.clone()));
    }
    let found = get_optional_config_map(objects, namespace, name, optional)?;
    cache.insert(name.to_owned(), found.clone());
    Ok(found)
}

/// Secret `name` from `cache` or `objects`; `None` when missing and `optional`.
fn cached_secret(
    cache: &mut HashMap<String, Option<Arc<Secret>>>,
    objects: &dyn ObjectSource,
    namespace: &str,
    name: &str,
    optional: bool,
) -> Result<Option<Arc<Secret>>> {
    if let Some(Some(found)) = cache.get(name) {
        return Ok(Some(found.clone()));
    }
    let found = get_optional_secret(objects, namespace, name, optional)?;
    cache.insert(name.to_owned(), found.clone());
    Ok(found)
}

fn no_client(kind: &str, namespace: &str, name: &str) -> Error {
    Error::InvalidPod(format!(
        "couldn't get {kind} {namespace}/{name}, no kubeClient defined"
    ))
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
) -> Result<String> {
    let resources = container.resources.as_ref();
    let (kind, name) = selector.resource.split_once('.').ok_or_else(|| {
        Error::InvalidPod(format!(
            "unsupported container resource : {}",
            selector.resource
        ))
    })?;
    let list = match kind {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => {
            return Err(Error::InvalidPod(format!(
                "unsupported container resource : {}",
                selector.resource
            )));
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
            return Err(Error::InvalidPod(format!(
                "unsupported container resource : {}",
                selector.resource
            )));
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
    use crate::objects::fake::FakeObjects;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{
        ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVar, EnvVarSource,
        ObjectFieldSelector, PodSpec, ResourceRequirements, SecretEnvSource, SecretKeySelector,
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
            objects: None,
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
            objects: None,
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
            Err(Error::InvalidPod(
                "couldn't get secret ns/creds, no kubeClient defined".into()
            ))
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
            Err(Error::InvalidPod(
                "couldn't get configMap ns/settings, no kubeClient defined".into()
            ))
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
            Err(Error::InvalidPod(
                "unsupported fieldPath: spec.hostname".into()
            ))
        );
    }

    fn api_pod(ns: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some(ns.into()),
                annotations: Some(
                    [(CONFIG_SOURCE_ANNOTATION.to_owned(), API_SOURCE.to_owned())].into(),
                ),
                ..Default::default()
            },
            spec: Some(PodSpec {
                enable_service_links: Some(true),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn key_ref(name: &str, key: &str, optional: Option<bool>, secret: bool) -> EnvVarSource {
        if secret {
            EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: name.into(),
                    key: key.into(),
                    optional,
                }),
                ..Default::default()
            }
        } else {
            EnvVarSource {
                config_map_key_ref: Some(ConfigMapKeySelector {
                    name: name.into(),
                    key: key.into(),
                    optional,
                }),
                ..Default::default()
            }
        }
    }

    fn from_ref(name: &str, key: &str, optional: Option<bool>, secret: bool) -> EnvVar {
        EnvVar {
            name: format!("V_{}", key.to_uppercase()),
            value: None,
            value_from: Some(key_ref(name, key, optional, secret)),
        }
    }

    fn objects() -> Arc<FakeObjects> {
        FakeObjects::with(|s| {
            s.config_maps.insert(
                ("ns".into(), "cfg".into()),
                ConfigMap {
                    data: Some(
                        [
                            ("mode".to_owned(), "fast".to_owned()),
                            ("level".to_owned(), "3".to_owned()),
                            ("bad=key".to_owned(), "x".to_owned()),
                        ]
                        .into(),
                    ),
                    ..Default::default()
                },
            );
            s.secrets.insert(
                ("ns".into(), "creds".into()),
                Secret {
                    data: Some([("password".to_owned(), ByteString(b"hunter2".to_vec()))].into()),
                    ..Default::default()
                },
            );
            s.services = Some(vec![
                crate::kuberuntime::envvars::tests::service(
                    "default",
                    "kubernetes",
                    "10.96.0.1",
                    &[(Some("https"), 443, None)],
                ),
                crate::kuberuntime::envvars::tests::service(
                    "ns",
                    "db",
                    "10.96.0.9",
                    &[(None, 5432, None)],
                ),
            ]);
        })
    }

    #[test]
    fn config_map_and_secret_references_resolve() {
        let fake = objects();
        let ctx = EnvContext {
            pod_ips: &[],
            host_ip: "",
            allocatable: NodeAllocatable::default(),
            objects: Some(fake.as_ref()),
        };
        let container = Container {
            env_from: Some(vec![
                EnvFromSource {
                    config_map_ref: Some(ConfigMapEnvSource {
                        name: "cfg".into(),
                        optional: None,
                    }),
                    prefix: Some("CFG_".into()),
                    ..Default::default()
                },
                EnvFromSource {
                    secret_ref: Some(SecretEnvSource {
                        name: "creds".into(),
                        optional: None,
                    }),
                    ..Default::default()
                },
                EnvFromSource {
                    secret_ref: Some(SecretEnvSource {
                        name: "absent".into(),
                        optional: Some(true),
                    }),
                    ..Default::default()
                },
            ]),
            env: Some(vec![
                from_ref("cfg", "mode", None, false),
                from_ref("creds", "password", None, true),
                from_ref("cfg", "nope", Some(true), false),
                from_ref("absent", "x", Some(true), false),
                EnvVar {
                    name: "URL".into(),
                    value: Some("pg://$(DB_SERVICE_HOST):$(DB_SERVICE_PORT)/$(V_MODE)".into()),
                    value_from: None,
                },
                EnvVar {
                    name: "CFG_LEVEL".into(),
                    value: Some("override".into()),
                    value_from: None,
                },
            ]),
            ..Default::default()
        };
        let mut warnings = Vec::new();
        let env =
            make_environment_reporting(&api_pod("ns"), &container, &ctx, &mut |m| warnings.push(m))
                .unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("CFG_mode"), Some("fast"));
        assert_eq!(get("CFG_LEVEL"), Some("override"));
        assert_eq!(get("CFG_level"), Some("3"));
        assert_eq!(get("password"), Some("hunter2"));
        assert_eq!(get("V_MODE"), Some("fast"));
        assert_eq!(get("V_PASSWORD"), Some("hunter2"));
        assert_eq!(get("V_NOPE"), None);
        assert_eq!(get("V_X"), None);
        assert_eq!(get("URL"), Some("pg://10.96.0.9:5432/fast"));
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("10.96.0.1"));
        assert_eq!(get("DB_PORT"), Some("tcp://10.96.0.9:5432"));
        assert_eq!(
            warnings,
            vec![
                "Keys [CFG_bad=key] from the EnvFrom configMap ns/cfg were skipped since they are considered invalid environment variable names."
                    .to_owned()
            ]
        );
        // Declared variables come first, in order; service variables last.
        let position = |k: &str| env.iter().position(|(n, _)| n == k).unwrap();
        assert!(position("CFG_mode") < position("V_MODE"));
        assert!(position("URL") < position("KUBERNETES_SERVICE_HOST"));
    }

    #[test]
    fn missing_references_fail_with_upstream_messages() {
        let fake = objects();
        let ctx = EnvContext {
            pod_ips: &[],
            host_ip: "",
            allocatable: NodeAllocatable::default(),
            objects: Some(fake.as_ref()),
        };
        let with = |var: EnvVar| Container {
            env: Some(vec![var]),
            ..Default::default()
        };
        let pod = api_pod("ns");
        assert_eq!(
            make_environment(&pod, &with(from_ref("cfg", "missing", None, false)), &ctx),
            Err(Error::InvalidPod(
                "couldn't find key missing in ConfigMap ns/cfg".into()
            ))
        );
        assert_eq!(
            make_environment(&pod, &with(from_ref("creds", "user", None, true)), &ctx),
            Err(Error::InvalidPod(
                "couldn't find key user in Secret ns/creds".into()
            ))
        );
        assert_eq!(
            make_environment(&pod, &with(from_ref("gone", "k", None, false)), &ctx),
            Err(Error::Object(crate::objects::ObjectError::NotFound {
                resource: "configmap",
                name: "gone".into()
            }))
        );
        // Services not read yet: pods from the API wait, static pods go on without them.
        fake.edit(|s| s.services = None);
        assert_eq!(
            make_environment(&pod, &Container::default(), &ctx),
            Err(Error::InvalidPod(
                "services have not yet been read at least once, cannot construct envvars".into()
            ))
        );
        let mut static_pod = pod.clone();
        static_pod.metadata.annotations =
            Some([(CONFIG_SOURCE_ANNOTATION.to_owned(), "file".to_owned())].into());
        assert_eq!(
            make_environment(&static_pod, &Container::default(), &ctx),
            Ok(vec![])
        );
        // Standalone: no service variables, API sources rejected.
        let standalone = crate::objects::Standalone;
        let ctx = EnvContext {
            objects: Some(&standalone),
            ..ctx
        };
        assert_eq!(
            make_environment(&pod, &Container::default(), &ctx),
            Ok(vec![])
        );
        assert_eq!(
            make_environment(
                &pod,
                &with(from_ref("cfg", "mode", Some(true), false)),
                &ctx
            ),
            Err(Error::InvalidPod(
                "couldn't get configMap ns/cfg, no kubeClient defined".into()
            ))
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
            objects: None,
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
            Err(Error::InvalidPod(
                "unsupported container resource : limits.gpu".into()
            ))
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
