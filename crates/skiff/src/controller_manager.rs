//! `skiff controller-manager`: the controller manager alone, against any API server.

use tokio_util::sync::CancellationToken;

use crate::cli::ControllerManagerArgs;

/// Runs the controller manager until SIGTERM or SIGINT; leadership lost ends it with an
/// error.
pub async fn run(args: Box<ControllerManagerArgs>) -> anyhow::Result<()> {
    let opts = skiff_controllers::app::Options {
        controllers: args.controllers,
        concurrent_replicaset_syncs: args.concurrent_replicaset_syncs,
        concurrent_deployment_syncs: args.concurrent_deployment_syncs,
        concurrent_daemonset_syncs: args.concurrent_daemonset_syncs,
        concurrent_statefulset_syncs: args.concurrent_statefulset_syncs,
        concurrent_gc_syncs: args.concurrent_gc_syncs,
        concurrent_job_syncs: args.concurrent_job_syncs,
        concurrent_namespace_syncs: args.concurrent_namespace_syncs,
        node_monitor: skiff_controllers::nodelifecycle::Timing {
            monitor_period: args.node_monitor_period,
            grace_period: args.node_monitor_grace_period,
        },
        terminated_pod_gc_threshold: args.terminated_pod_gc_threshold,
        root_ca_file: args.root_ca_file,
        concurrent_cron_job_syncs: args.concurrent_cron_job_syncs,
        concurrent_ttl_after_finished_syncs: args.concurrent_ttl_after_finished_syncs,
        concurrent_endpoint_syncs: args.concurrent_endpoint_syncs,
        concurrent_service_endpoint_syncs: args.concurrent_service_endpoint_syncs,
        max_endpoints_per_slice: args.max_endpoints_per_slice,
        concurrent_resource_quota_syncs: args.concurrent_resource_quota_syncs,
        resource_quota_sync_period: args.resource_quota_sync_period,
        leader_elect: args.leader_elect,
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
        bind_address: args.bind_address,
        secure_port: args.secure_port,
        kube_api_qps: args.kube_api_qps,
        kube_api_burst: args.kube_api_burst,
        cluster_signing_cert_file: args.cluster_signing_cert_file,
        cluster_signing_key_file: args.cluster_signing_key_file,
        cluster_signing_duration: args.cluster_signing_duration,
        node_ipam: skiff_controllers::nodeipam::Config {
            allocate_node_cidrs: args.allocate_node_cidrs,
            cluster_cidrs: args.cluster_cidr,
            node_cidr_mask_size: args.node_cidr_mask_size,
            node_cidr_mask_size_ipv4: args.node_cidr_mask_size_ipv4,
            node_cidr_mask_size_ipv6: args.node_cidr_mask_size_ipv6,
            service_cidrs: args.service_cluster_ip_range,
        },
        ..skiff_controllers::app::Options::new(args.kubeconfig)
    };
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        crate::signals::shutdown().await;
        stop.cancel();
    });
    skiff_controllers::app::run(opts, cancel).await?;
    Ok(())
}
