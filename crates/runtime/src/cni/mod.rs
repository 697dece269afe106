//! CNI plugin invocation (CNI spec 1.0): attaching a pod's network namespace to the
//! network of the active conflist, and detaching it again.

mod bridge;
pub mod config;
mod plugin;

use std::path::PathBuf;

use anyhow::Context as _;
use k8s_cri::v1::{PortMapping, Protocol};
use serde_json::{Value, json};

pub use config::NetworkList;

/// The interface name inside the pod.
const POD_IFNAME: &str = "eth0";

/// The CNI runner: plugin directories, the configuration directory, and the state of the
/// bridge network run in-process (see [`bridge`]).
#[derive(Debug, Clone)]
pub struct Cni {
    conf_dir: PathBuf,
    bin_dirs: Vec<PathBuf>,
    bridge: bridge::State,
}

/// What the plugins learn about the pod being attached.
#[derive(Debug, Clone)]
pub struct Attachment<'a> {
    /// Sandbox ID (`CNI_CONTAINERID`).
    pub sandbox_id: &'a str,
    /// Path of the pinned network namespace (`CNI_NETNS`); empty on DEL when it is gone.
    pub netns: &'a str,
    /// Pod name, namespace and UID for `CNI_ARGS` (`K8S_POD_NAME`, ...).
    pub pod_name: &'a str,
    /// See [`Attachment::pod_name`].
    pub pod_namespace: &'a str,
    /// See [`Attachment::pod_name`].
    pub pod_uid: &'a str,
    /// Host port mappings, passed as `runtimeConfig.portMappings` to plugins that declare
    /// the `portMappings` capability.
    pub port_mappings: &'a [PortMapping],
}

/// The outcome of a successful ADD.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Attached {
    /// The network list used, kept so that DEL runs exactly the same plugins.
    pub network: NetworkList,
    /// The last plugin's result, the `prevResult` of every DEL.
    pub result: Value,
    /// Pod IPs from the result, the first one being the primary IP.
    pub ips: Vec<String>,
    /// Whether the network was attached in-process (see [`bridge`]) rather than by the
    /// plugins; DEL takes the same path. Records written before this field read `false`.
    #[serde(default)]
    pub in_process: bool,
}

impl Cni {
    /// Creates the runner; writes the default conflist into `conf_dir` when it has none.
    pub fn new(
        conf_dir: PathBuf,
        bin_dirs: Vec<PathBuf>,
        pod_cidr: &ipnet::IpNet,
    ) -> anyhow::Result<Self> {
        config::ensure_default(&conf_dir, pod_cidr)?;
        Ok(Self {
            conf_dir,
            bin_dirs,
            bridge: bridge::State::default(),
        })
    }

    /// Applies a new pod subnet to Skiff's default conflist (see
    /// [`config::update_default`]); returns whether the conflist was (re)written.
    pub fn update_pod_cidr(&self, pod_cidr: &ipnet::IpNet) -> anyhow::Result<bool> {
        config::update_default(&self.conf_dir, pod_cidr)
    }

    /// On shutdown: removes the masquerade rules of in-process networks that no pod uses
    /// any more (see [`bridge`]): those this process set up and the active list's, which a
    /// runtime before a restart may have set up.
    pub async fn shutdown(&self) -> anyhow::Result<()> {
        let active = self
            .network()
            .ok()
            .and_then(|list| bridge::BridgeNetwork::from_list(&list));
        self.bridge.shutdown(active.as_ref()).await
    }

    /// The configuration directory (`*.conflist`).
    pub fn conf_dir(&self) -> &std::path::Path {
        &self.conf_dir
    }

    /// Loads the active network list; an error means the network is not ready.
    pub fn network(&self) -> anyhow::Result<NetworkList> {
        config::load(&self.conf_dir)
    }

    /// Runs ADD: the loopback plugin on `lo`, then each plugin of the active list on `eth0`,
    /// chaining `prevResult`. A list of the bridge network's shape runs in-process instead
    /// ([`bridge`]), with only `portmap` run as a plugin, for pods that map host ports.
    /// On failure nothing is undone here; the caller runs [`Cni::del`].
    pub async fn add(&self, att: &Attachment<'_>) -> anyhow::Result<Attached> {
        let network = self.network()?;
        let args = cni_args(att);
        if let Some(bridge) = bridge::BridgeNetwork::from_list(&network) {
            let mut result = self
                .bridge
                .add(&bridge, att.sandbox_id, std::path::Path::new(att.netns))
                .await?;
            if let Some(portmap) = bridge.portmap_of(&network, att.port_mappings) {
                let eth0 = invocation(att, POD_IFNAME, &args);
                let conf = plugin_conf(&network, portmap, Some(&result), att.port_mappings);
                result = plugin::run(&self.bin_dirs, plugin::Command::Add, &eth0, &conf).await?;
            }
            let ips = result_ips(&result);
            return Ok(Attached {
                network,
                result,
                ips,
                in_process: true,
            });
        }
        let lo = invocation(att, "lo", &args);
        plugin::run(
            &self.bin_dirs,
            plugin::Command::Add,
            &lo,
            &loopback_conf(&network),
        )
        .await?;
        let eth0 = invocation(att, POD_IFNAME, &args);
        let mut prev: Option<Value> = None;
        for conf in &network.plugins {
            let conf = plugin_conf(&network, conf, prev.as_ref(), att.port_mappings);
            prev = Some(plugin::run(&self.bin_dirs, plugin::Command::Add, &eth0, &conf).await?);
        }
        let result = prev.unwrap_or(Value::Null);
        let ips = result_ips(&result);
        Ok(Attached {
            network,
            result,
            ips,
            in_process: false,
        })
    }

    /// Runs DEL for every plugin of `attached.network` in reverse order with the cached
    /// result as `prevResult`, then for loopback. Every plugin is tried; the first error is
    /// returned. Without a cached attachment (ADD failed half-way) the active list is used.
    pub async fn del(
        &self,
        att: &Attachment<'_>,
        attached: Option<&Attached>,
    ) -> anyhow::Result<()> {
        let network = match attached {
            Some(attached) => attached.network.clone(),
            None => self.network()?,
        };
        let prev = attached.map(|a| &a.result).filter(|r| !r.is_null());
        let args = cni_args(att);
        let in_process = attached.is_none_or(|a| a.in_process);
        if let Some(bridge) = bridge::BridgeNetwork::from_list(&network).filter(|_| in_process) {
            let mut first_error = None;
            if let Some(portmap) = bridge.portmap_of(&network, att.port_mappings) {
                let eth0 = invocation(att, POD_IFNAME, &args);
                let conf = plugin_conf(&network, portmap, prev, att.port_mappings);
                if let Err(err) =
                    plugin::run(&self.bin_dirs, plugin::Command::Del, &eth0, &conf).await
                {
                    first_error.get_or_insert(err);
                }
            }
            if let Err(err) = self.bridge.del(&bridge, att.sandbox_id).await {
                first_error.get_or_insert(err);
            }
            return first_error
                .map_or(Ok(()), Err)
                .context("tearing down the pod network");
        }
        let eth0 = invocation(att, POD_IFNAME, &args);
        let mut first_error = None;
        for conf in network.plugins.iter().rev() {
            let conf = plugin_conf(&network, conf, prev, att.port_mappings);
            if let Err(err) = plugin::run(&self.bin_dirs, plugin::Command::Del, &eth0, &conf).await
            {
                first_error.get_or_insert(err);
            }
        }
        let lo = invocation(att, "lo", &args);
        if let Err(err) = plugin::run(
            &self.bin_dirs,
            plugin::Command::Del,
            &lo,
            &loopback_conf(&network),
        )
        .await
        {
            first_error.get_or_insert(err);
        }
        first_error
            .map_or(Ok(()), Err)
            .context("tearing down the pod network")
    }
}

/// The environment of one plugin run for `att` on interface `ifname`.
fn invocation<'a>(att: &Attachment<'a>, ifname: &'a str, args: &'a str) -> plugin::Invocation<'a> {
    plugin::Invocation {
        container_id: att.sandbox_id,
        netns: att.netns,
        ifname,
        args,
    }
}

fn cni_args(att: &Attachment<'_>) -> String {
    format!(
        "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={};K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID={}",
        att.pod_namespace, att.pod_name, att.sandbox_id, att.pod_uid
    )
}

fn loopback_conf(network: &NetworkList) -> Value {
    json!({ "cniVersion": network.cni_version, "name": "cni-loopback", "type": "loopback" })
}

/// One plugin's stdin: its conf with `name`, `cniVersion`, `prevResult` and, for plugins
/// with the `portMappings` capability, `runtimeConfig.portMappings` injected (as libcni does).
fn plugin_conf(
    network: &NetworkList,
    conf: &Value,
    prev: Option<&Value>,
    ports: &[PortMapping],
) -> Value {
    let mut conf = conf.clone();
    if let Some(obj) = conf.as_object_mut() {
        obj.insert("name".into(), json!(network.name));
        obj.insert("cniVersion".into(), json!(network.cni_version));
        if let Some(prev) = prev {
            obj.insert("prevResult".into(), prev.clone());
        }
        let wants_ports = obj
            .get("capabilities")
            .and_then(|c| c.get("portMappings"))
            .and_then(Value::as_bool)
            == Some(true);
        let mappings = port_mappings(ports);
        if wants_ports && !mappings.is_empty() {
            obj.insert("runtimeConfig".into(), json!({ "portMappings": mappings }));
        }
    }
    conf
}

fn port_mappings(ports: &[PortMapping]) -> Vec<Value> {
    ports
        .iter()
        .filter(|p| p.host_port > 0)
        .map(|p| {
            let protocol = match Protocol::try_from(p.protocol).unwrap_or(Protocol::Tcp) {
                Protocol::Tcp => "tcp",
                Protocol::Udp => "udp",
                Protocol::Sctp => "sctp",
            };
            json!({ "hostPort": p.host_port, "containerPort": p.container_port, "protocol": protocol, "hostIP": p.host_ip })
        })
        .collect()
}

/// IP addresses (without prefix length) of a CNI 1.0 result, IPv4 first.
fn result_ips(result: &Value) -> Vec<String> {
    let mut ips: Vec<std::net::IpAddr> = result
        .get("ips")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|ip| ip.get("address").and_then(Value::as_str))
        .filter_map(|addr| addr.split('/').next()?.parse().ok())
        .collect();
    ips.sort_by_key(|ip| ip.is_ipv6());
    ips.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_injection() {
        let net = NetworkList {
            name: "n".into(),
            cni_version: "1.0.0".into(),
            plugins: vec![],
        };
        let ports = [
            PortMapping {
                protocol: 0,
                container_port: 80,
                host_port: 8080,
                host_ip: String::new(),
            },
            PortMapping::default(),
        ];
        let portmap = json!({"type": "portmap", "capabilities": {"portMappings": true}});
        let prev = json!({"ips": []});
        let conf = plugin_conf(&net, &portmap, Some(&prev), &ports);
        assert_eq!(conf["name"], "n");
        assert_eq!(conf["prevResult"], prev);
        assert_eq!(conf["runtimeConfig"]["portMappings"][0]["hostPort"], 8080);
        assert_eq!(
            conf["runtimeConfig"]["portMappings"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        let bridge = plugin_conf(&net, &json!({"type": "bridge"}), None, &ports);
        assert!(bridge.get("runtimeConfig").is_none() && bridge.get("prevResult").is_none());
    }

    #[test]
    fn ips_from_result() {
        let result = json!({"ips": [{"address": "fd00::5/64"}, {"address": "10.88.0.5/16", "gateway": "10.88.0.1"}]});
        assert_eq!(result_ips(&result), vec!["10.88.0.5", "fd00::5"]);
    }
}
