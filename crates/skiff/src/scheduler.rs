//! `skiff scheduler`: the scheduler alone, against any API server.

use tokio_util::sync::CancellationToken;

use crate::cli::SchedulerArgs;

/// Runs the scheduler until SIGTERM or SIGINT; leadership lost ends it with an error.
pub async fn run(args: SchedulerArgs) -> anyhow::Result<()> {
    let opts = skiff_scheduler::app::Options {
        config: args.config,
        kubeconfig: args.kubeconfig,
        api_connector: skiff_client::in_process::Connector::default(),
        bind_address: args.bind_address,
        secure_port: args.secure_port,
        leader_elect: args.leader_elect,
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
        lease_name: args.leader_elect_resource_name,
        lease_namespace: args.leader_elect_resource_namespace,
        kube_api_qps: args.kube_api_qps,
        kube_api_burst: args.kube_api_burst,
        pod_max_in_unschedulable_pods_duration: args.pod_max_in_unschedulable_pods_duration,
    };
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        crate::signals::shutdown().await;
        stop.cancel();
    });
    skiff_scheduler::app::run(opts, cancel).await?;
    Ok(())
}
