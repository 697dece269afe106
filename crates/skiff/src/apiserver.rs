//! `skiff apiserver`: the Kubernetes API server alone.

use skiff_apiserver::config::{ClusterConfig, ServerConfig};

use crate::cli::ApiserverArgs;

/// Runs the API server until SIGTERM or SIGINT.
pub async fn run(args: ApiserverArgs) -> anyhow::Result<()> {
    let config = ServerConfig {
        data_dir: args.data_dir,
        bind_address: args.bind_address,
        secure_port: args.secure_port,
        etcd_servers: args.etcd_servers,
        advertise_address: args.advertise_address,
        max_requests_inflight: skiff_apiserver::config::DEFAULT_MAX_REQUESTS_INFLIGHT,
        max_mutating_requests_inflight:
            skiff_apiserver::config::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
        cluster: ClusterConfig {
            service_cluster_ip_range: args.service_cluster_ip_range,
            service_node_port_range: args.service_node_port_range,
            ..ClusterConfig::default()
        },
    };
    skiff_apiserver::server::run(config, crate::signals::shutdown()).await
}
