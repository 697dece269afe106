//! Cluster IP and node port allocation (upstream `pkg/registry/core/service/ipallocator`
//! and `portallocator`). What is in use is read from the stored services on every
//! allocation, so deleting a service releases its addresses without bookkeeping;
//! allocations made but not yet stored are remembered for a minute so two concurrent
//! creates never get the same address. Free addresses and ports are picked at random,
//! from the upper part of the range first ([`super::band`]).

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Service;
use serde_json::json;
use skiff_api::core::service::{CLUSTER_IP_NONE, needs_node_ports, service_type};
use skiff_api::field::{FieldError, Path};
use tokio::sync::Mutex;

use super::band::{self, cluster_ip_static_band, node_port_static_band, random_free};
use crate::config::ClusterConfig;
use crate::error::{ApiError, GroupResource};
use crate::registry::Context;

/// How long an allocation not yet seen in the store stays reserved.
const PENDING_TTL: Duration = Duration::from_secs(60);

/// The service that owns the first address of the range.
const KUBERNETES_SERVICE: (&str, &str) = ("default", "kubernetes");

/// Addresses handed out but maybe not stored yet.
#[derive(Default)]
struct Pending {
    ips: HashMap<IpAddr, Instant>,
    ports: HashMap<i32, Instant>,
}

impl Pending {
    fn expire(&mut self) {
        let now = Instant::now();
        self.ips
            .retain(|_, at| now.duration_since(*at) < PENDING_TTL);
        self.ports
            .retain(|_, at| now.duration_since(*at) < PENDING_TTL);
    }
}

/// What the stored services use.
#[derive(Default)]
struct InUse {
    ips: HashSet<IpAddr>,
    ports: HashSet<i32>,
}

/// Allocates cluster IPs from `--service-cluster-ip-range` and node ports from
/// `--service-node-port-range`, one allocation at a time.
#[derive(Default)]
pub struct Allocator {
    pending: Mutex<Pending>,
}

impl Allocator {
    /// Gives `service` a cluster IP (unless headless or ExternalName) and node ports
    /// (NodePort and LoadBalancer) where it has none, and checks the ones it asks for.
    /// `old` is the stored service on an update: its own addresses are not in use by
    /// others. Errors: 422 for an address out of range or in use, 500 when the range is
    /// full.
    pub async fn allocate(
        &self,
        ctx: &Context<'_>,
        service: &mut Service,
        old: Option<&Service>,
    ) -> Result<(), ApiError> {
        let name = service.metadata.name.clone().unwrap_or_default();
        let namespace = service.metadata.namespace.clone().unwrap_or_default();
        let mut pending = self.pending.lock().await;
        pending.expire();
        let mut in_use = InUse::default();
        let resource = GroupResource::new("", "services");
        for value in ctx.objects.list(&resource, None).await? {
            let Ok(other) = serde_json::from_value::<Service>(value) else {
                continue;
            };
            let same = other.metadata.name.as_deref() == Some(name.as_str())
                && other.metadata.namespace.as_deref() == Some(namespace.as_str());
            if !same {
                collect(&other, &mut in_use);
            }
        }
        in_use.ips.extend(pending.ips.keys());
        in_use.ports.extend(pending.ports.keys());
        if let Some(old) = old {
            // Its own addresses stay its own.
            let mut own = InUse::default();
            collect(old, &mut own);
            in_use.ips.retain(|ip| !own.ips.contains(ip));
            in_use.ports.retain(|p| !own.ports.contains(p));
        }
        let is_kubernetes = (namespace.as_str(), name.as_str()) == KUBERNETES_SERVICE;
        let mut new = Allocated::default();
        allocate_ip(ctx.config, service, &in_use, is_kubernetes, &mut new, &name)?;
        allocate_ports(ctx.config, service, &in_use, &mut new, &name)?;
        if !ctx.dry_run {
            let now = Instant::now();
            pending.ips.extend(new.ips.into_iter().map(|ip| (ip, now)));
            pending
                .ports
                .extend(new.ports.into_iter().map(|p| (p, now)));
        }
        Ok(())
    }
}

/// What one allocation handed out.
#[derive(Default)]
struct Allocated {
    ips: Vec<IpAddr>,
    ports: Vec<i32>,
}

fn collect(service: &Service, in_use: &mut InUse) {
    let Some(spec) = &service.spec else {
        return;
    };
    let ips = spec
        .cluster_ips
        .iter()
        .flatten()
        .chain(spec.cluster_ip.iter());
    in_use
        .ips
        .extend(ips.filter_map(|ip| ip.parse::<IpAddr>().ok()));
    let ports = spec.ports.iter().flatten().filter_map(|p| p.node_port);
    in_use
        .ports
        .extend(ports.chain(spec.health_check_node_port));
}

fn invalid(name: &str, path: &Path, value: serde_json::Value, detail: String) -> ApiError {
    ApiError::invalid(
        "",
        "Service",
        name,
        &[FieldError::invalid(path, value, detail)],
    )
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_u128(value: u128, v4: bool) -> Option<IpAddr> {
    if v4 {
        u32::try_from(value).ok().map(|v| IpAddr::V4(v.into()))
    } else {
        Some(IpAddr::V6(value.into()))
    }
}

/// The addresses services may get: the range without its network address (and the
/// IPv4 broadcast address).
fn host_range(range: &IpNet) -> (u128, u128) {
    let first = to_u128(range.network()) + 1;
    let last = match range {
        IpNet::V4(_) => to_u128(range.broadcast()).saturating_sub(1),
        IpNet::V6(_) => to_u128(range.broadcast()),
    };
    (first, last)
}

fn allocate_ip(
    config: &ClusterConfig,
    service: &mut Service,
    in_use: &InUse,
    is_kubernetes: bool,
    new: &mut Allocated,
    name: &str,
) -> Result<(), ApiError> {
    let Some(spec) = service.spec.as_mut() else {
        return Ok(());
    };
    if service_type(spec) == "ExternalName" {
        return Ok(());
    }
    let range = config.service_cluster_ip_range;
    let v4 = matches!(range, IpNet::V4(_));
    let family = if v4 { "IPv4" } else { "IPv6" };
    spec.ip_family_policy
        .get_or_insert_with(|| "SingleStack".to_owned());
    spec.ip_families
        .get_or_insert_with(|| vec![family.to_owned()]);
    let requested = spec
        .cluster_ip
        .clone()
        .filter(|ip| !ip.is_empty())
        .or_else(|| {
            spec.cluster_ips
                .as_ref()
                .and_then(|ips| ips.first().cloned())
        });
    let path = Path::new("spec").child("clusterIPs").index(0);
    let ip = match requested.as_deref() {
        Some(CLUSTER_IP_NONE) => {
            spec.cluster_ip = Some(CLUSTER_IP_NONE.to_owned());
            spec.cluster_ips = Some(vec![CLUSTER_IP_NONE.to_owned()]);
            return Ok(());
        }
        Some(text) => {
            let ip: IpAddr = text.parse().map_err(|_| {
                invalid(
                    name,
                    &path,
                    json!(text),
                    "must be empty, 'None', or a valid IP address".to_owned(),
                )
            })?;
            let (first, last) = host_range(&range);
            if !range.contains(&ip) || !(first..=last).contains(&to_u128(ip)) {
                return Err(invalid(
                    name,
                    &path,
                    json!([text]),
                    format!(
                        "failed to allocate IP {text}: provided IP ({text}) is not in the valid range. The range of valid IPs is {range}"
                    ),
                ));
            }
            if in_use.ips.contains(&ip) {
                return Err(invalid(
                    name,
                    &path,
                    json!([text]),
                    format!("failed to allocate IP {text}: provided IP is already allocated"),
                ));
            }
            ip
        }
        None => free_ip(&range, in_use, is_kubernetes, &mut band::random_below)
            .ok_or_else(|| ApiError::internal("failed to allocate a serviceIP: range is full"))?,
    };
    spec.cluster_ip = Some(ip.to_string());
    spec.cluster_ips = Some(vec![ip.to_string()]);
    new.ips.push(ip);
    Ok(())
}

/// A free address for a service that asks for none: the first of the range for the
/// `kubernetes` service, else a random one ([`random_free`]; the range's lower band is
/// tried last). `random(n)` is a random number below `n`.
fn free_ip(
    range: &IpNet,
    in_use: &InUse,
    is_kubernetes: bool,
    random: &mut dyn FnMut(u128) -> u128,
) -> Option<IpAddr> {
    let v4 = matches!(range, IpNet::V4(_));
    let (first, last) = host_range(range);
    if is_kubernetes {
        let ip = from_u128(first, v4)?;
        if !in_use.ips.contains(&ip) {
            return Some(ip);
        }
    }
    let size = last.checked_sub(first)?.saturating_add(1);
    let host_bits = u32::from(range.max_prefix_len() - range.prefix_len());
    let cidr_size = 1u128.checked_shl(host_bits).unwrap_or(u128::MAX);
    let taken =
        |offset: u128| from_u128(first + offset, v4).is_none_or(|ip| in_use.ips.contains(&ip));
    let band = cluster_ip_static_band(cidr_size);
    let offset = random_free(size, band, in_use.ips.len(), &taken, random)?;
    from_u128(first + offset, v4)
}

fn allocate_ports(
    config: &ClusterConfig,
    service: &mut Service,
    in_use: &InUse,
    new: &mut Allocated,
    name: &str,
) -> Result<(), ApiError> {
    let Some(spec) = service.spec.as_mut() else {
        return Ok(());
    };
    if !needs_node_ports(spec) {
        return Ok(());
    }
    let range = &config.service_node_port_range;
    let (lo, hi) = (i32::from(*range.start()), i32::from(*range.end()));
    let mut taken: HashSet<i32> = in_use.ports.clone();
    // Ports the service asks for, checked first.
    let mut by_port: HashMap<i32, i32> = HashMap::new();
    let ports = spec.ports.iter_mut().flatten();
    for (i, port) in ports.enumerate() {
        let Some(requested) = port.node_port.filter(|p| *p != 0) else {
            continue;
        };
        let path = Path::new("spec").child("ports").index(i).child("nodePort");
        if !(lo..=hi).contains(&requested) {
            return Err(invalid(
                name,
                &path,
                json!(requested),
                format!(
                    "provided port is not in the valid range. The range of valid ports is {lo}-{hi}"
                ),
            ));
        }
        let shared = by_port.get(&port.port) == Some(&requested);
        if !shared && !taken.insert(requested) {
            return Err(invalid(
                name,
                &path,
                json!(requested),
                "provided port is already allocated".to_owned(),
            ));
        }
        by_port.insert(port.port, requested);
        new.ports.push(requested);
    }
    let size = u128::try_from(hi - lo + 1).unwrap_or(0);
    let band = node_port_static_band(size);
    let mut next = || -> Result<i32, ApiError> {
        let busy = |offset: u128| {
            i32::try_from(offset).map_or(true, |offset| taken.contains(&(lo + offset)))
        };
        let offset = random_free(size, band, taken.len(), &busy, &mut band::random_below)
            .ok_or_else(|| ApiError::internal("failed to allocate a nodePort: range is full"))?;
        let port = lo + i32::try_from(offset).map_err(ApiError::internal)?;
        taken.insert(port);
        new.ports.push(port);
        Ok(port)
    };
    for port in spec.ports.iter_mut().flatten() {
        if port.node_port.unwrap_or(0) != 0 {
            continue;
        }
        // The same service port over TCP and UDP shares its node port.
        let node_port = match by_port.get(&port.port) {
            Some(p) => *p,
            None => next()?,
        };
        by_port.insert(port.port, node_port);
        port.node_port = Some(node_port);
    }
    let local = spec.external_traffic_policy.as_deref() == Some("Local");
    if service_type(spec) == "LoadBalancer"
        && local
        && spec.health_check_node_port.unwrap_or(0) == 0
    {
        spec.health_check_node_port = Some(next()?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ClusterConfig {
        ClusterConfig {
            service_cluster_ip_range: "10.96.0.0/29"
                .parse()
                .unwrap_or(IpNet::V4(Default::default())),
            service_node_port_range: 30000..=30002,
            ..ClusterConfig::default()
        }
    }

    fn service(spec: serde_json::Value) -> Service {
        serde_json::from_value(
            json!({"metadata": {"name": "s", "namespace": "default"}, "spec": spec}),
        )
        .unwrap_or_default()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse()
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED))
    }

    #[test]
    fn cluster_ips_skip_the_network_and_kubernetes_addresses() {
        let mut in_use = InUse::default();
        let range = config().service_cluster_ip_range;
        let mut lowest = |_: u128| 0;
        assert_eq!(
            free_ip(&range, &in_use, true, &mut lowest),
            Some(ip("10.96.0.1"))
        );
        // A /29 has no static band: offsets count from .1, the kubernetes address.
        assert_eq!(
            free_ip(&range, &in_use, false, &mut |_| 1),
            Some(ip("10.96.0.2"))
        );
        in_use.ips.extend([
            ip("10.96.0.1"),
            ip("10.96.0.2"),
            ip("10.96.0.3"),
            ip("10.96.0.4"),
            ip("10.96.0.5"),
        ]);
        assert_eq!(
            free_ip(&range, &in_use, false, &mut lowest),
            Some(ip("10.96.0.6"))
        );
        in_use.ips.insert(ip("10.96.0.6"));
        // .7 is the broadcast address.
        assert_eq!(free_ip(&range, &in_use, false, &mut lowest), None);
    }

    #[test]
    fn cluster_ips_are_random_and_leave_the_static_band_to_requests() {
        let range: IpNet = "10.96.0.0/24".parse().unwrap();
        let mut in_use = InUse::default();
        for _ in 0..60 {
            let ip = free_ip(&range, &in_use, false, &mut band::random_below).unwrap();
            in_use.ips.insert(ip);
        }
        // Upstream's band of a /24: the 16 addresses after the network address.
        let static_band = |ip: &IpAddr| to_u128(*ip) <= to_u128(self::ip("10.96.0.16"));
        assert!(!in_use.ips.iter().any(static_band), "{:?}", in_use.ips);
        let lowest: HashSet<IpAddr> = (17..77).map(|i| ip(&format!("10.96.0.{i}"))).collect();
        assert_ne!(in_use.ips, lowest, "lowest-free, not random");
        // Once the upper band is full, the lower one is used.
        in_use
            .ips
            .extend((17..255).map(|i| ip(&format!("10.96.0.{i}"))));
        let last = free_ip(&range, &in_use, false, &mut band::random_below).unwrap();
        assert!(static_band(&last), "{last}");
    }

    #[test]
    fn requested_ips_must_be_in_range_and_free() {
        let in_use = InUse {
            ips: HashSet::from([ip("10.96.0.3")]),
            ..Default::default()
        };
        let mut new = Allocated::default();
        let mut taken = service(json!({"clusterIP": "10.96.0.3", "ports": [{"port": 80}]}));
        let err = allocate_ip(&config(), &mut taken, &in_use, false, &mut new, "s").err();
        assert_eq!(
            err.map(|e| e.message),
            Some(r#"Service "s" is invalid: spec.clusterIPs[0]: Invalid value: ["10.96.0.3"]: failed to allocate IP 10.96.0.3: provided IP is already allocated"#.to_owned())
        );
        let mut outside = service(json!({"clusterIP": "10.0.0.1"}));
        let err = allocate_ip(&config(), &mut outside, &in_use, false, &mut new, "s").err();
        assert!(err.is_some_and(|e| {
            e.code == 422
                && e.message
                    .contains("is not in the valid range. The range of valid IPs is 10.96.0.0/29")
        }));
        let mut headless = service(json!({"clusterIP": "None"}));
        assert!(allocate_ip(&config(), &mut headless, &in_use, false, &mut new, "s").is_ok());
        let spec = headless.spec.unwrap_or_default();
        assert_eq!(spec.cluster_ips, Some(vec!["None".to_owned()]));
        let mut plain = service(json!({"ports": [{"port": 80}]}));
        assert!(allocate_ip(&config(), &mut plain, &in_use, false, &mut new, "s").is_ok());
        let spec = plain.spec.unwrap_or_default();
        let allocated = spec.cluster_ip.as_deref().map(ip);
        assert!(allocated.is_some_and(
            |a| a != ip("10.96.0.3") && config().service_cluster_ip_range.contains(&a)
        ));
        assert_eq!(spec.ip_family_policy.as_deref(), Some("SingleStack"));
        assert_eq!(spec.ip_families, Some(vec!["IPv4".to_owned()]));
    }

    #[test]
    fn node_ports_are_allocated_and_checked() {
        let in_use = InUse {
            ports: HashSet::from([30000]),
            ..Default::default()
        };
        let mut new = Allocated::default();
        let mut svc = service(json!({"type": "NodePort", "ports": [
            {"port": 53, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}, {"port": 80}]}));
        assert!(allocate_ports(&config(), &mut svc, &in_use, &mut new, "s").is_ok());
        let ports: Vec<Option<i32>> = svc
            .spec
            .unwrap_or_default()
            .ports
            .unwrap_or_default()
            .iter()
            .map(|p| p.node_port)
            .collect();
        // Both free ports, in some order; TCP and UDP of port 53 share theirs.
        assert_eq!(ports[0], ports[1]);
        let mut free = vec![ports[0], ports[2]];
        free.sort();
        assert_eq!(free, [Some(30001), Some(30002)]);
        let mut taken =
            service(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30000}]}));
        let err = allocate_ports(&config(), &mut taken, &in_use, &mut new, "s").err();
        assert_eq!(
            err.map(|e| e.message),
            Some(r#"Service "s" is invalid: spec.ports[0].nodePort: Invalid value: 30000: provided port is already allocated"#.to_owned())
        );
        let mut outside =
            service(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}));
        let err = allocate_ports(&config(), &mut outside, &in_use, &mut new, "s").err();
        assert!(err.is_some_and(|e| e.message.ends_with(
            "provided port is not in the valid range. The range of valid ports is 30000-30002"
        )));
        let mut full =
            service(json!({"type": "NodePort", "ports": [{"port": 1}, {"port": 2}, {"port": 3}]}));
        let err = allocate_ports(&config(), &mut full, &in_use, &mut new, "s").err();
        assert_eq!(err.map(|e| e.code), Some(500));
    }

    #[test]
    fn node_ports_are_random_above_the_static_band() {
        let config = ClusterConfig {
            service_node_port_range: 30000..=32767,
            ..ClusterConfig::default()
        };
        let ports: Vec<serde_json::Value> = (1..=40).map(|p| json!({"port": p})).collect();
        let mut svc = service(json!({"type": "NodePort", "ports": ports}));
        let mut new = Allocated::default();
        assert!(allocate_ports(&config, &mut svc, &InUse::default(), &mut new, "s").is_ok());
        let mut got: Vec<i32> = new.ports.clone();
        got.sort();
        got.dedup();
        assert_eq!(got.len(), 40);
        // Upstream's band of 2768 ports: the lowest 86 (30000-30085) are left to requests.
        assert!(got.iter().all(|p| (30086..=32767).contains(p)), "{got:?}");
        assert_ne!(
            got,
            (30086..30126).collect::<Vec<_>>(),
            "lowest-free, not random"
        );
    }
}
