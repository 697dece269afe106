//! Settings: [`ClusterConfig`], what the kinds and subresources need at request time
//! (service IP ranges, the service-account token issuer, the kubelet client), and
//! [`ServerConfig`], what `skiff apiserver` starts with (its flags).

use std::net::IpAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::sync::Arc;

use ipnet::IpNet;

use crate::authn::TokenIssuer;
use crate::proxy::KubeletClient;

/// Settings shared by every request (reached through [`crate::registry::Context`]).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// `--service-cluster-ip-range` (upstream kubeadm default `10.96.0.0/12`).
    pub service_cluster_ip_range: IpNet,
    /// `--service-node-port-range`, `30000-32767`.
    pub service_node_port_range: RangeInclusive<u16>,
    /// Signs service-account tokens (`serviceaccounts/token`); `None` when the server has
    /// no signing key (unit tests).
    pub service_account_tokens: Option<Arc<TokenIssuer>>,
    /// Calls kubelets for `pods/log`, `exec`, `attach` and `portforward`; `None` when the
    /// server has no kubelet client certificate (unit tests).
    pub kubelet_client: Option<Arc<KubeletClient>>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            service_cluster_ip_range: "10.96.0.0/12"
                .parse()
                .unwrap_or(IpNet::V4(Default::default())),
            service_node_port_range: 30000..=32767,
            service_account_tokens: None,
            kubelet_client: None,
        }
    }
}

/// The IP of the `kubernetes` service: the first address of the service range (upstream
/// `GetIndexedIP(serviceCIDR, 1)`), or `None` if the range has no room for it.
pub fn first_service_ip(range: &IpNet) -> Option<IpAddr> {
    match range {
        IpNet::V4(net) => {
            let ip = u32::from(net.network()).checked_add(1)?;
            let ip = std::net::Ipv4Addr::from(ip);
            net.contains(&ip).then_some(IpAddr::V4(ip))
        }
        IpNet::V6(net) => {
            let ip = u128::from(net.network()).checked_add(1)?;
            let ip = std::net::Ipv6Addr::from(ip);
            net.contains(&ip).then_some(IpAddr::V6(ip))
        }
    }
}

/// How `skiff apiserver` runs (its flags, upstream's names).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `--data-dir`: the SQLite store, `pki/` and `admin.kubeconfig`.
    pub data_dir: PathBuf,
    /// `--bind-address` (`0.0.0.0`).
    pub bind_address: IpAddr,
    /// `--secure-port` (6443).
    pub secure_port: u16,
    /// `--etcd-servers`: etcd instead of SQLite when not empty.
    pub etcd_servers: Vec<String>,
    /// `--advertise-address`: the address of the `kubernetes` service's endpoints; default
    /// the host's first non-loopback address.
    pub advertise_address: Option<IpAddr>,
    /// `--max-requests-inflight` (400): with `--max-mutating-requests-inflight`, the seats
    /// API Priority and Fairness divides among the priority levels.
    pub max_requests_inflight: u32,
    /// `--max-mutating-requests-inflight` (200).
    pub max_mutating_requests_inflight: u32,
    pub cluster: ClusterConfig,
}

/// Upstream's `--max-requests-inflight` default.
pub const DEFAULT_MAX_REQUESTS_INFLIGHT: u32 = 400;
/// Upstream's `--max-mutating-requests-inflight` default.
pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: u32 = 200;

impl ServerConfig {
    /// The defaults of upstream and kubeadm with the store in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            data_dir: data_dir.into(),
            bind_address: IpAddr::from([0, 0, 0, 0]),
            secure_port: 6443,
            etcd_servers: Vec::new(),
            advertise_address: None,
            max_requests_inflight: DEFAULT_MAX_REQUESTS_INFLIGHT,
            max_mutating_requests_inflight: DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            cluster: ClusterConfig::default(),
        }
    }

    /// The server's total concurrency limit for API Priority and Fairness: the sum of the
    /// two in-flight limits (at least 1).
    pub fn server_concurrency_limit(&self) -> usize {
        (self.max_requests_inflight as usize + self.max_mutating_requests_inflight as usize).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_service_ip_is_network_plus_one() {
        let ip = |s: &str| first_service_ip(&s.parse().unwrap());
        assert_eq!(ip("10.96.0.0/12"), Some("10.96.0.1".parse().unwrap()));
        assert_eq!(ip("10.96.5.7/24"), Some("10.96.5.1".parse().unwrap()));
        assert_eq!(ip("fd00::/108"), Some("fd00::1".parse().unwrap()));
        assert_eq!(ip("10.0.0.5/32"), None);
    }
}
