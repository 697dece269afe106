//! Objects every cluster has from the start (upstream's `bootstrap-controller` and
//! post-start hooks): the namespaces `default`, `kube-system`, `kube-public` and
//! `kube-node-lease`; the `kubernetes` Service in `default` (cluster IP = the first
//! service IP, port 443 → the secure port) with its Endpoints and EndpointSlice pointing
//! at the advertise address; the system PriorityClasses; the bootstrap FlowSchemas and
//! PriorityLevelConfigurations of API Priority and Fairness. Idempotent: existing
//! namespaces and the Service are kept; the endpoints are brought to the current address
//! and port.

use std::net::IpAddr;

use serde_json::{Value, json};

use crate::authn::UserInfo;
use crate::error::{ApiError, GroupResource};
use crate::registry::{Objects, Registry};

/// The namespaces that always exist.
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Where the `kubernetes` service points.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    /// The cluster IP of the service.
    pub service_ip: IpAddr,
    /// The API server's address for clients inside the cluster.
    pub advertise_address: IpAddr,
    /// The secure port.
    pub port: u16,
}

/// The user the bootstrap writes as.
pub fn system_user() -> UserInfo {
    UserInfo {
        name: "system:apiserver".to_owned(),
        uid: String::new(),
        groups: vec![
            "system:masters".to_owned(),
            crate::authn::AUTHENTICATED.to_owned(),
        ],
    }
}

/// Creates what is missing, skipping kinds `registry` does not serve.
pub async fn run(
    registry: &Registry,
    objects: &dyn Objects,
    endpoint: Endpoint,
) -> Result<(), ApiError> {
    let serves = |group: &str, resource: &str| {
        registry
            .by_resource(&GroupResource::new(group, resource))
            .is_some()
    };
    if serves("", "namespaces") {
        for name in SYSTEM_NAMESPACES {
            let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            ensure(objects, "", "namespaces", None, ns).await?;
        }
    }
    if serves("scheduling.k8s.io", "priorityclasses") {
        for class in skiff_api::scheduling::system_priority_classes() {
            let mut class = serde_json::to_value(class).map_err(ApiError::internal)?;
            class["apiVersion"] = "scheduling.k8s.io/v1".into();
            class["kind"] = "PriorityClass".into();
            ensure(objects, "scheduling.k8s.io", "priorityclasses", None, class).await?;
        }
    }
    // API Priority and Fairness: the mandatory and suggested configuration, levels first.
    const APF: &str = "flowcontrol.apiserver.k8s.io";
    if serves(APF, "flowschemas") && serves(APF, "prioritylevelconfigurations") {
        use skiff_api::flowcontrol::bootstrap as apf;
        let levels = apf::priority_levels().into_iter().map(|o| {
            let kind = ("PriorityLevelConfiguration", "prioritylevelconfigurations");
            (kind, serde_json::to_value(o))
        });
        let schemas = apf::flow_schemas()
            .into_iter()
            .map(|o| (("FlowSchema", "flowschemas"), serde_json::to_value(o)));
        for ((kind, resource), object) in levels.chain(schemas) {
            let mut object = object.map_err(ApiError::internal)?;
            object["apiVersion"] = "flowcontrol.apiserver.k8s.io/v1".into();
            object["kind"] = kind.into();
            ensure(objects, APF, resource, None, object).await?;
        }
    }
    let labels = json!({"component": "apiserver", "provider": "kubernetes"});
    if serves("", "services") {
        let service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "clusterIP": endpoint.service_ip.to_string(),
                "clusterIPs": [endpoint.service_ip.to_string()],
                "sessionAffinity": "None",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": endpoint.port}],
            },
        });
        ensure(objects, "", "services", Some("default"), service).await?;
    }
    let ip = endpoint.advertise_address.to_string();
    if serves("", "endpoints") {
        let subsets = json!([{
            "addresses": [{"ip": ip}],
            "ports": [{"name": "https", "port": endpoint.port, "protocol": "TCP"}],
        }]);
        let endpoints = json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": subsets,
        });
        reconcile(objects, "", "endpoints", endpoints, &["subsets"]).await?;
    }
    if serves("discovery.k8s.io", "endpointslices") {
        let address_type = if endpoint.advertise_address.is_ipv4() {
            "IPv4"
        } else {
            "IPv6"
        };
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "kubernetes",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "kubernetes"},
            },
            "addressType": address_type,
            "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": endpoint.port, "protocol": "TCP"}],
        });
        reconcile(
            objects,
            "discovery.k8s.io",
            "endpointslices",
            slice,
            &["addressType", "endpoints", "ports"],
        )
        .await?;
    }
    crate::aggregator::ensure_local_api_services(registry, objects).await?;
    Ok(())
}

fn name_of(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Creates `object` unless it exists.
pub async fn ensure(
    objects: &dyn Objects,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
    object: Value,
) -> Result<(), ApiError> {
    let gr = GroupResource::new(group, resource);
    match objects.get(&gr, namespace, &name_of(&object)).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => match objects.create(&gr, namespace, object).await {
            Ok(_) => Ok(()),
            // Another API server created it meanwhile.
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// Creates `object` in `default`, or sets its `fields` on the stored one when they differ.
async fn reconcile(
    objects: &dyn Objects,
    group: &str,
    resource: &str,
    object: Value,
    fields: &[&str],
) -> Result<(), ApiError> {
    let gr = GroupResource::new(group, resource);
    let name = name_of(&object);
    match objects.get(&gr, Some("default"), &name).await {
        Ok(stored) if fields.iter().all(|f| stored[*f] == object[*f]) => Ok(()),
        Ok(_) => {
            let mut mutate = |current: &mut Value| {
                for f in fields {
                    current[*f] = object[*f].clone();
                }
                Ok(())
            };
            objects
                .update(&gr, Some("default"), &name, &mut mutate)
                .await
                .map(|_| ())
        }
        Err(e) if e.code == 404 => {
            ensure(objects, group, resource, Some("default"), object.clone()).await
        }
        Err(e) => Err(e),
    }
}
