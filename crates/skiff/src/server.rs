//! `skiff server`: a single-node cluster in one process — the API server, the
//! scheduler, the controller manager and a kubelet with its embedded runtime.
//!
//! The API server starts first; once it listens, each other component gets its own
//! client certificate from the cluster CA and a kubeconfig beside `admin.kubeconfig`
//! (`scheduler.kubeconfig` as `system:kube-scheduler`, `controller-manager.kubeconfig`
//! as `system:kube-controller-manager`, `kubelet.kubeconfig` as `system:node:<name>` in
//! `system:nodes`), as kubeadm's `kubeconfig` phase gives upstream's components, so
//! that access control fits them later. The scheduler and the controller manager run
//! under leader election on their Leases, as upstream's do, so that a second server can
//! join later.
//!
//! SIGTERM or SIGINT stops every component; pods keep running, as with `skiff kubelet`.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use futures::FutureExt as _;
use skiff_apiserver::config::{ClusterConfig, ServerConfig};
use skiff_bootstrap::kubeconfig;
use skiff_bootstrap::pki::Pki;
use skiff_client::in_process::Connector;
use tokio_util::sync::CancellationToken;

use crate::cli::ServerArgs;

/// The kubeconfig files `skiff server` writes in its data directory, one per component.
pub const SCHEDULER_KUBECONFIG: &str = "scheduler.kubeconfig";
/// See [`SCHEDULER_KUBECONFIG`].
pub const CONTROLLER_MANAGER_KUBECONFIG: &str = "controller-manager.kubeconfig";
/// See [`SCHEDULER_KUBECONFIG`].
pub const KUBELET_KUBECONFIG: &str = "kubelet.kubeconfig";

/// Runs the whole cluster until SIGTERM or SIGINT. Errors: any component failing to
/// start; a component that fails later stops the others.
pub async fn run(args: Box<ServerArgs>) -> anyhow::Result<()> {
    let ServerArgs {
        apiserver,
        mut kubelet,
        scheduler_secure_port: scheduler_port,
        controller_manager_secure_port: controller_manager_port,
        node_monitor_grace_period,
        controller_manager_kube_api_qps,
        controller_manager_kube_api_burst,
        scheduler_kube_api_qps,
        scheduler_kube_api_burst,
        in_process_api,
    } = *args;
    let node_name = crate::kubelet::node_name(kubelet.hostname_override.as_deref())?;
    anyhow::ensure!(
        kubelet.kubeconfig.is_none(),
        "--kubeconfig is not for skiff server: the kubelet's kubeconfig is written in --data-dir"
    );
    let data_dir = apiserver.data_dir.clone();
    let service_cluster_ip_range = apiserver.service_cluster_ip_range;
    let local = skiff_apiserver::server::local_address(apiserver.bind_address);
    let url = format!("https://{}", SocketAddr::new(local, apiserver.secure_port));
    let config = ServerConfig {
        data_dir: apiserver.data_dir,
        bind_address: apiserver.bind_address,
        secure_port: apiserver.secure_port,
        etcd_servers: apiserver.etcd_servers,
        advertise_address: apiserver.advertise_address,
        max_requests_inflight: skiff_apiserver::config::DEFAULT_MAX_REQUESTS_INFLIGHT,
        max_mutating_requests_inflight:
            skiff_apiserver::config::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
        cluster: ClusterConfig {
            service_cluster_ip_range: apiserver.service_cluster_ip_range,
            service_node_port_range: apiserver.service_node_port_range,
            ..ClusterConfig::default()
        },
    };

    // Components stop first (they release their Leases and close their watches), the API
    // server last.
    let cancel = CancellationToken::new();
    let api_stop = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        crate::signals::shutdown().await;
        stop.cancel();
    });
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let api_cancel = api_stop.clone();
    let mut api = tokio::spawn(skiff_apiserver::server::run_with_ready(
        config,
        async move { api_cancel.cancelled().await },
        Some(ready_tx),
    ));
    let ready = tokio::select! {
        ready = ready_rx => ready.context("the API server stopped before it was ready")?,
        result = &mut api => {
            result.context("the API server task")??;
            anyhow::bail!("the API server stopped before it was ready");
        }
        () = cancel.cancelled() => {
            api_stop.cancel();
            return api.await.context("the API server task")?;
        }
    };
    let pki = ready.pki;
    // The components' requests go straight to the API server's handler, each as its own
    // certificate's user, unless --in-process-api=false sends them over HTTPS.
    let connector = if in_process_api {
        Connector::in_process(Arc::new(ready.local))
    } else {
        Connector::default()
    };
    let files = write_kubeconfigs(&data_dir, &url, &pki, &node_name)?;
    tracing::info!(kubeconfig = %data_dir.join(skiff_apiserver::server::ADMIN_KUBECONFIG).display(), node = %node_name, "API server ready; starting the scheduler, the controller manager and the kubelet");

    let scheduler = skiff_scheduler::app::Options {
        secure_port: scheduler_port,
        api_connector: connector.clone(),
        kube_api_qps: scheduler_kube_api_qps,
        kube_api_burst: scheduler_kube_api_burst,
        ..skiff_scheduler::app::Options::new(files.scheduler)
    };
    let mut tasks = tokio::task::JoinSet::new();
    let c = cancel.clone();
    tasks.spawn(async move {
        skiff_scheduler::app::run(scheduler, c)
            .await
            .context("the scheduler")
    });
    let controllers = skiff_controllers::app::Options {
        secure_port: controller_manager_port,
        api_connector: connector.clone(),
        kube_api_qps: controller_manager_kube_api_qps,
        kube_api_burst: controller_manager_kube_api_burst,
        node_monitor: skiff_controllers::nodelifecycle::Timing {
            grace_period: node_monitor_grace_period,
            ..skiff_controllers::nodelifecycle::Timing::default()
        },
        cluster_signing_cert_file: Some(pki.dir.join("ca.crt")),
        cluster_signing_key_file: Some(pki.dir.join("ca.key")),
        node_ipam: node_ipam(kubelet.network.pod_cidr, service_cluster_ip_range),
        ..skiff_controllers::app::Options::new(files.controller_manager)
    };
    let c = cancel.clone();
    tasks.spawn(async move {
        skiff_controllers::app::run(controllers, c)
            .await
            .context("the controller manager")
    });
    kubelet.kubeconfig = Some(files.kubelet);
    kubelet.hostname_override = Some(node_name);
    secure_kubelet_defaults(&mut kubelet, &pki);
    let c = cancel.clone();
    tasks.spawn(async move {
        crate::kubelet::run_until(
            *kubelet,
            connector,
            async move { c.cancelled().await }.boxed(),
        )
        .await
        .context("the kubelet")
    });

    let mut first_error = None;
    let mut api_result = None;
    loop {
        tokio::select! {
            joined = tasks.join_next() => {
                let Some(joined) = joined else { break };
                let result = joined.context("a component task").and_then(|r| r);
                if let Err(e) = result {
                    tracing::error!("{e:#}; stopping the other components");
                    first_error.get_or_insert(e);
                }
                cancel.cancel();
            }
            result = &mut api, if api_result.is_none() => {
                let result = result.context("the API server task").and_then(|r| r);
                if result.is_ok() {
                    tracing::error!("the API server stopped; stopping the other components");
                }
                api_result = Some(result);
                cancel.cancel();
            }
        }
    }
    let result = match api_result {
        Some(result) => result,
        None => {
            api_stop.cancel();
            api.await.context("the API server task").and_then(|r| r)
        }
    };
    if let Err(e) = result {
        first_error.get_or_insert(e);
    }
    first_error.map_or(Ok(()), Err)
}

/// The controller manager's node IPAM settings: with `--pod-cidr`, each Node gets a pod
/// CIDR of it (`--allocate-node-cidrs --cluster-cidr <pod-cidr>`, node CIDRs of /24 for
/// IPv4 and /64 for IPv6, or the whole range when it is smaller), the Services' range
/// excluded. The kubelet's own `--pod-cidr` (its default CNI configuration) is unchanged.
fn node_ipam(
    pod_cidr: Option<ipnet::IpNet>,
    service_cluster_ip_range: ipnet::IpNet,
) -> skiff_controllers::nodeipam::Config {
    let Some(cidr) = pod_cidr else {
        return skiff_controllers::nodeipam::Config::default();
    };
    let default_mask = match cidr {
        ipnet::IpNet::V4(_) => skiff_controllers::nodeipam::DEFAULT_NODE_MASK_IPV4,
        ipnet::IpNet::V6(_) => skiff_controllers::nodeipam::DEFAULT_NODE_MASK_IPV6,
    };
    skiff_controllers::nodeipam::Config {
        allocate_node_cidrs: true,
        cluster_cidrs: vec![cidr],
        node_cidr_mask_size: Some(default_mask.max(cidr.prefix_len())),
        service_cidrs: vec![service_cluster_ip_range],
        ..skiff_controllers::nodeipam::Config::default()
    }
}

/// kubeadm's kubelet settings where no flag gave one: the main port on every address
/// (the API server dials the Node's InternalIP for logs, exec and port-forward), client
/// certificates checked against the cluster CA, bearer tokens by TokenReview, no
/// anonymous requests, authorization by SubjectAccessReview, and no unauthenticated
/// read-only port.
fn secure_kubelet_defaults(kubelet: &mut crate::cli::KubeletArgs, pki: &Pki) {
    kubelet.address.get_or_insert(IpAddr::from([0, 0, 0, 0]));
    kubelet
        .client_ca_file
        .get_or_insert_with(|| pki.dir.join("ca.crt"));
    kubelet.read_only_port.get_or_insert(0);
    kubelet.anonymous_auth.get_or_insert(false);
    kubelet.authentication_token_webhook.get_or_insert(true);
    kubelet
        .authorization_mode
        .get_or_insert(skiff_kubelet::AuthorizationMode::Webhook);
}

/// The per-component kubeconfig files.
struct Kubeconfigs {
    scheduler: PathBuf,
    controller_manager: PathBuf,
    kubelet: PathBuf,
}

/// Issues each component's client certificate and writes its kubeconfig in `dir`.
fn write_kubeconfigs(
    dir: &Path,
    url: &str,
    pki: &Pki,
    node_name: &str,
) -> anyhow::Result<Kubeconfigs> {
    let write = |file: &str, stem: &str, cn: &str, org: Option<&str>| {
        let cert = pki
            .client_certificate(stem, cn, org)
            .with_context(|| format!("issuing the {cn} client certificate"))?;
        let path = dir.join(file);
        kubeconfig::write(&path, url, &pki.ca.cert_pem, &cert)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok::<_, anyhow::Error>(path)
    };
    Ok(Kubeconfigs {
        scheduler: write(
            SCHEDULER_KUBECONFIG,
            "scheduler",
            "system:kube-scheduler",
            None,
        )?,
        controller_manager: write(
            CONTROLLER_MANAGER_KUBECONFIG,
            "controller-manager",
            "system:kube-controller-manager",
            None,
        )?,
        kubelet: write(
            KUBELET_KUBECONFIG,
            "kubelet-client",
            &format!("system:node:{node_name}"),
            Some("system:nodes"),
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_cidr_turns_node_ipam_on() {
        let services: ipnet::IpNet = "10.96.0.0/12".parse().unwrap();
        assert!(!node_ipam(None, services).allocate_node_cidrs);
        let on = node_ipam(Some("10.88.0.0/16".parse().unwrap()), services);
        assert!(on.allocate_node_cidrs);
        assert_eq!(
            on.cluster_cidrs,
            ["10.88.0.0/16".parse::<ipnet::IpNet>().unwrap()]
        );
        assert_eq!(on.node_cidr_mask_size, Some(24));
        assert_eq!(on.service_cidrs, [services]);
        // A range smaller than a /24 is one node CIDR.
        let small = node_ipam(Some("10.88.0.0/26".parse().unwrap()), services);
        assert_eq!(small.node_cidr_mask_size, Some(26));
        let v6 = node_ipam(Some("fd00:88::/48".parse().unwrap()), services);
        assert_eq!(v6.node_cidr_mask_size, Some(64));
    }
}
