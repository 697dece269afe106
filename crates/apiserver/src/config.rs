//! Cluster-wide settings the API server's kinds and subresources need (service IP ranges,
//! the service-account token issuer, the kubelet client). Built by `skiff apiserver` from
//! its flags and first-start PKI.

use std::ops::RangeInclusive;

use ipnet::IpNet;

/// Settings shared by every request (reached through [`crate::registry::Context`]).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// `--service-cluster-ip-range` (upstream kubeadm default `10.96.0.0/12`).
    pub service_cluster_ip_range: IpNet,
    /// `--service-node-port-range`, `30000-32767`.
    pub service_node_port_range: RangeInclusive<u16>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            service_cluster_ip_range: "10.96.0.0/12"
                .parse()
                .unwrap_or(IpNet::V4(Default::default())),
            service_node_port_range: 30000..=32767,
        }
    }
}
