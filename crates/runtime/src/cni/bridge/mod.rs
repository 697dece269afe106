//! The bridge network run in-process: what the CNI plugins `bridge` (with `isGateway`),
//! `host-local` and `portmap` do for a pod, done through rtnetlink instead of three plugin
//! executions and about nine iptables calls per pod.
//!
//! Only a network list of exactly that shape is run here ([`BridgeNetwork::from_list`]):
//! one `bridge` plugin with `isGateway: true` and the keys `bridge`, `ipMasq`,
//! `hairpinMode`; `host-local` IPAM over one IPv4 subnet (optional `gateway`, `routes` by
//! destination, `dataDir`); optionally followed by `portmap` with the `portMappings`
//! capability; CNI version 1.0.0. Skiff's default conflist has this shape. Any other list,
//! or any other key, goes through the plugins unchanged.
//!
//! Differences from the plugins, none visible to a pod:
//! - masquerading is one chain per network, added with its first pod and removed when the
//!   runtime shuts down with no pod left on it ([`masquerade`]), where the plugin adds a
//!   chain per pod;
//! - the host end of the veth is named `veth<first 11 hex digits of the sandbox ID>`, so
//!   that a DEL without the cached result still finds it.
//!
//! Addresses are kept in host-local's on-disk format ([`host_local`]), so the plugin and
//! this code can share a network. Host ports still go through the `portmap` plugin, run
//! with the result built here as `prevResult`, and only for pods that map host ports.

pub(crate) mod host_local;
mod link;
mod masquerade;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use ipnet::Ipv4Net;
use serde::Deserialize;
use serde_json::{Value, json};

use super::NetworkList;
use host_local::{Range, Store};
use masquerade::Masquerade;

/// The interface name inside the pod.
const POD_IFNAME: &str = super::POD_IFNAME;
/// The only CNI version run in-process.
const CNI_VERSION: &str = "1.0.0";
/// The bridge plugin's default bridge name.
const DEFAULT_BRIDGE: &str = "cni0";

/// A network list of the shape run in-process (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BridgeNetwork {
    name: String,
    bridge: String,
    masquerade: bool,
    hairpin: bool,
    range: Range,
    routes: Vec<Ipv4Net>,
    data_dir: PathBuf,
    /// Whether a `portmap` plugin follows (host ports go through it).
    portmap: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BridgeConf {
    #[serde(rename = "type")]
    kind: String,
    bridge: Option<String>,
    is_gateway: bool,
    #[serde(default)]
    ip_masq: bool,
    #[serde(default)]
    hairpin_mode: bool,
    ipam: IpamConf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct IpamConf {
    #[serde(rename = "type")]
    kind: String,
    ranges: Vec<Vec<RangeConf>>,
    #[serde(default)]
    routes: Vec<RouteConf>,
    data_dir: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeConf {
    subnet: Ipv4Net,
    gateway: Option<Ipv4Addr>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteConf {
    dst: Ipv4Net,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PortmapConf {
    #[serde(rename = "type")]
    kind: String,
    capabilities: PortmapCapabilities,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PortmapCapabilities {
    port_mappings: bool,
}

impl BridgeNetwork {
    /// The in-process form of `list`, or `None` when the list must go through the plugins.
    pub(crate) fn from_list(list: &NetworkList) -> Option<Self> {
        if list.cni_version != CNI_VERSION {
            return None;
        }
        let (first, rest) = list.plugins.split_first()?;
        let bridge: BridgeConf = serde_json::from_value(first.clone()).ok()?;
        let portmap = match rest {
            [] => false,
            [next] => {
                let conf: PortmapConf = serde_json::from_value(next.clone()).ok()?;
                if conf.kind != "portmap" || !conf.capabilities.port_mappings {
                    return None;
                }
                true
            }
            _ => return None,
        };
        if bridge.kind != "bridge" || !bridge.is_gateway || bridge.ipam.kind != "host-local" {
            return None;
        }
        let [set] = bridge.ipam.ranges.as_slice() else {
            return None;
        };
        let [range] = set.as_slice() else {
            return None;
        };
        let subnet = range.subnet.trunc();
        let gateway = match range.gateway {
            Some(gateway) => gateway,
            None => Ipv4Addr::from(u32::from(subnet.network()).checked_add(1)?),
        };
        if !subnet.contains(&gateway) || subnet.prefix_len() > 30 {
            return None;
        }
        Some(Self {
            name: list.name.clone(),
            bridge: bridge.bridge.unwrap_or_else(|| DEFAULT_BRIDGE.to_string()),
            masquerade: bridge.ip_masq,
            hairpin: bridge.hairpin_mode,
            range: Range { subnet, gateway },
            routes: bridge.ipam.routes.iter().map(|r| r.dst.trunc()).collect(),
            data_dir: bridge
                .ipam
                .data_dir
                .unwrap_or_else(|| PathBuf::from(host_local::DEFAULT_DATA_DIR)),
            portmap,
        })
    }

    /// The `portmap` plugin's conf in `list` (this network's list) when it has one and the
    /// pod maps host ports; host ports go through that plugin.
    pub(crate) fn portmap_of<'a>(
        &self,
        list: &'a NetworkList,
        ports: &[k8s_cri::v1::PortMapping],
    ) -> Option<&'a Value> {
        let maps_host_ports = ports.iter().any(|p| p.host_port > 0);
        list.plugins
            .get(1)
            .filter(|_| self.portmap && maps_host_ports)
    }

    fn store(&self) -> anyhow::Result<Store> {
        Store::new(&self.data_dir, &self.name)
    }

    fn masquerade_rules(&self) -> Masquerade {
        Masquerade::new(&self.name, self.range.subnet)
    }
}

/// The host end of a sandbox's veth: `veth` and the first 11 hex digits of its ID.
fn host_veth(sandbox_id: &str) -> String {
    let prefix: String = sandbox_id.chars().take(11).collect();
    format!("veth{prefix}")
}

/// What the in-process bridge network keeps across calls: the netlink connection of the
/// runtime's namespace and the networks whose masquerade rules are known to be in place.
#[derive(Debug, Default, Clone)]
pub(crate) struct State {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The masquerade rules this process put in place, with their network's addresses;
    /// held while rules are added or removed.
    masquerading: tokio::sync::Mutex<HashMap<Masquerade, Store>>,
    /// Bridge name -> (index, gateway) last found in place, so that the address check (a
    /// netlink dump) runs once per bridge rather than once per pod.
    bridges: std::sync::Mutex<HashMap<String, (u32, Ipv4Net)>>,
    /// Whether `net.ipv4.ip_forward` was seen set.
    forwarding: std::sync::atomic::AtomicBool,
}

impl State {
    /// ADD: reserves an address, makes sure the bridge is up with the gateway, creates the
    /// veth pair, configures `eth0` and the routes in the pod, and masquerades the subnet.
    /// Returns the CNI 1.0 result the plugins would have given. On failure the caller
    /// runs [`State::del`], which undoes whatever was done.
    pub(crate) async fn add(
        &self,
        network: &BridgeNetwork,
        sandbox_id: &str,
        netns: &Path,
    ) -> anyhow::Result<Value> {
        let started = std::time::Instant::now();
        let store = network.store()?;
        let (range, id) = (network.range, sandbox_id.to_string());
        let ip = tokio::task::spawn_blocking(move || store.reserve(&range, &id, POD_IFNAME))
            .await
            .context("IPAM task")??;
        let reserved = started.elapsed();
        let address = Ipv4Net::new(ip, network.range.subnet.prefix_len())?;
        let gateway = Ipv4Net::new(network.range.gateway, network.range.subnet.prefix_len())?;
        self.ensure_forwarding()?;
        let checked = self
            .bridges()
            .get(&network.bridge)
            .filter(|(_, known)| *known == gateway)
            .map(|(index, _)| *index);
        let host = host_veth(sandbox_id);
        let host_side = link::HostSide {
            bridge: network.bridge.clone(),
            gateway,
            checked,
            veth: host.clone(),
            hairpin: network.hairpin,
        };
        let pod_side = link::PodSide {
            address,
            gateway: network.range.gateway,
            routes: network.routes.clone(),
        };
        let attached = link::attach(netns.to_path_buf(), host_side, pod_side).await?;
        self.bridges()
            .insert(network.bridge.clone(), (attached.bridge_index, gateway));
        let mac = attached.mac;
        let configured = started.elapsed();
        if network.masquerade {
            let rules = network.masquerade_rules();
            let mut present = self.inner.masquerading.lock().await;
            if let std::collections::hash_map::Entry::Vacant(entry) = present.entry(rules) {
                entry.key().ensure().await?;
                entry.insert(network.store()?);
            }
        }
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        tracing::debug!(
            sandbox = sandbox_id,
            reserved_ms = ms(reserved),
            attached_ms = ms(configured),
            total_ms = ms(started.elapsed()),
            "attached to the bridge network (times since the start)"
        );
        let routes: Vec<Value> = network
            .routes
            .iter()
            .map(|dst| json!({ "dst": dst.to_string(), "gw": network.range.gateway.to_string() }))
            .collect();
        Ok(json!({
            "cniVersion": CNI_VERSION,
            "interfaces": [
                { "name": network.bridge },
                { "name": host },
                { "name": POD_IFNAME, "mac": mac, "sandbox": netns },
            ],
            "ips": [{ "interface": 2, "address": address.to_string(), "gateway": network.range.gateway.to_string() }],
            "routes": routes,
            "dns": {},
        }))
    }

    /// DEL: deletes the veth pair (gone already when the pod's namespace is) and releases
    /// the sandbox's addresses. Both are tried; the first error is returned.
    pub(crate) async fn del(
        &self,
        network: &BridgeNetwork,
        sandbox_id: &str,
    ) -> anyhow::Result<()> {
        let deleted = link::detach(host_veth(sandbox_id)).await;
        let store = network.store()?;
        let id = sandbox_id.to_string();
        let released = tokio::task::spawn_blocking(move || store.release(&id, POD_IFNAME))
            .await
            .context("IPAM task")
            .and_then(|released| released);
        deleted.and(released.map(drop))
    }

    /// At shutdown: removes the masquerade rules of every network this process set up, and
    /// of `active` (the active list, whose rules an earlier runtime may have set up), that
    /// has no address reserved any more. Every network is tried; the first error is
    /// returned.
    pub(crate) async fn shutdown(&self, active: Option<&BridgeNetwork>) -> anyhow::Result<()> {
        let mut present = self.inner.masquerading.lock().await;
        let mut first_error = None;
        if let Some(network) = active.filter(|network| network.masquerade) {
            match network.store() {
                Ok(store) => {
                    present.entry(network.masquerade_rules()).or_insert(store);
                }
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        let networks: Vec<(Masquerade, Store)> = present.drain().collect();
        for (rules, store) in networks {
            let reserved = tokio::task::spawn_blocking(move || store.reserved())
                .await
                .context("IPAM task")
                .and_then(|reserved| reserved);
            let removed = match reserved {
                Ok(0) => rules.remove().await,
                Ok(_) => Ok(()),
                Err(err) => Err(err),
            };
            if let Err(err) = removed {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn bridges(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u32, Ipv4Net)>> {
        self.inner
            .bridges
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The bridge plugin's `isGateway` turns on IPv4 forwarding in the runtime's namespace.
    fn ensure_forwarding(&self) -> anyhow::Result<()> {
        use std::sync::atomic::Ordering;
        if self.inner.forwarding.load(Ordering::Relaxed) {
            return Ok(());
        }
        let path = "/proc/sys/net/ipv4/ip_forward";
        let current = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
        if current.trim() != "1" {
            std::fs::write(path, "1").with_context(|| format!("writing {path}"))?;
        }
        self.inner.forwarding.store(true, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str) -> NetworkList {
        NetworkList::parse(text).unwrap()
    }

    #[test]
    fn the_default_conflist_runs_in_process() {
        let default = super::super::config::default_conflist(&"10.88.0.0/16".parse().unwrap());
        let net = BridgeNetwork::from_list(&list(&default.to_string())).unwrap();
        assert_eq!(net.bridge, "skiff0");
        assert_eq!(net.range.gateway, Ipv4Addr::new(10, 88, 0, 1));
        assert_eq!(net.routes, vec!["0.0.0.0/0".parse::<Ipv4Net>().unwrap()]);
        assert!(net.masquerade && net.hairpin && net.portmap);
        assert_eq!(net.data_dir, Path::new("/var/lib/cni/networks"));
    }

    #[test]
    fn anything_else_goes_to_the_plugins() {
        let base = json!({
            "cniVersion": "1.0.0", "name": "n",
            "plugins": [{ "type": "bridge", "bridge": "b0", "isGateway": true,
                "ipam": { "type": "host-local", "ranges": [[{ "subnet": "10.5.0.0/24" }]], "dataDir": "/x" } }]
        });
        let net = BridgeNetwork::from_list(&list(&base.to_string())).unwrap();
        assert!(!net.portmap && !net.masquerade && net.data_dir == Path::new("/x"));
        let variants: [(&str, Value); 8] = [
            ("/plugins/0/mtu", json!(1400)),
            ("/plugins/0/isGateway", json!(false)),
            ("/plugins/0/ipam/type", json!("dhcp")),
            ("/plugins/0/ipam/ranges/0/0/rangeStart", json!("10.5.0.10")),
            ("/plugins/0/ipam/ranges/0/0/subnet", json!("fd00::/64")),
            ("/plugins/0/type", json!("macvlan")),
            ("/cniVersion", json!("0.4.0")),
            ("/plugins/1", json!({ "type": "tuning" })),
        ];
        for (pointer, value) in variants {
            let mut doc = base.clone();
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            let target = doc.pointer_mut(parent).unwrap();
            match target {
                Value::Array(items) => items.push(value),
                Value::Object(map) => {
                    map.insert(key.to_string(), value);
                }
                _ => unreachable!(),
            }
            let parsed = NetworkList::parse(&doc.to_string()).unwrap();
            assert!(
                BridgeNetwork::from_list(&parsed).is_none(),
                "{pointer} must go to the plugins"
            );
        }
    }

    #[test]
    fn veth_names_fit() {
        let id = "0123456789abcdef".repeat(4);
        assert_eq!(host_veth(&id), "veth0123456789a");
        assert!(host_veth(&id).len() <= 15, "IFNAMSIZ - 1");
    }
}
