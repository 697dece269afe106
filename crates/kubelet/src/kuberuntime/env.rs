//! Container environment (upstream `makeEnvironmentVariables`) and `$(VAR)` expansion
//! (upstream `third_party/forked/golang/expansion`).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};

/// Node and pod addresses that `fieldRef` env vars may reference.
pub struct EnvContext<'a> {
    /// The pod's IPs, primary first.
    pub pod_ips: &'a [String],
    /// The node's IP.
    pub host_ip: &'a str,
}

/// The container's environment as ordered `(name, value)` pairs, with each plain value
/// `$(VAR)`-expanded against the variables defined before it and `fieldRef` values
/// resolved. A later definition of a name replaces an earlier one.
///
/// Errors on sources a static pod cannot use (configMap/secret/resource refs, unknown fields).
pub fn make_environment(
    pod: &Pod,
    container: &Container,
    ctx: &EnvContext<'_>,
) -> Result<Vec<(String, String)>, String> {
    let mut env: Vec<(String, String)> = Vec::new();
    for var in container.env.iter().flatten() {
        let value = env_value(pod, var, &env, ctx)?;
        match env.iter_mut().find(|(name, _)| *name == var.name) {
            Some(existing) => existing.1 = value,
            None => env.push((var.name.clone(), value)),
        }
    }
    Ok(env)
}

fn env_value(
    pod: &Pod,
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
    match source.field_ref.as_ref() {
        Some(field) => field_value(pod, &field.field_path, ctx).ok_or_else(|| {
            format!(
                "env {}: unsupported fieldRef {:?}",
                var.name, field.field_path
            )
        }),
        None => Err(format!(
            "env {}: only value and fieldRef are supported for static pods (no configMap, secret or resource references)",
            var.name
        )),
    }
}

/// Resolves a downward-API field path (upstream `podFieldSelectorRuntimeValue`).
fn field_value(pod: &Pod, path: &str, ctx: &EnvContext<'_>) -> Option<String> {
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
    use k8s_openapi::api::core::v1::{EnvVarSource, ObjectFieldSelector};
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
    fn secret_refs_are_rejected() {
        let container = Container {
            env: Some(vec![EnvVar {
                name: "S".into(),
                value: None,
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(Default::default()),
                    ..Default::default()
                }),
            }]),
            ..Default::default()
        };
        let ctx = EnvContext {
            pod_ips: &[],
            host_ip: "",
        };
        assert!(make_environment(&Pod::default(), &container, &ctx).is_err());
    }
}
