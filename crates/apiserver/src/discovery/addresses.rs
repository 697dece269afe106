//! `/api`'s `serverAddressByClientCIDRs` (upstream `discovery.DefaultAddresses` with the
//! service network's `CIDRRule`, `k8s.io/apiserver/pkg/endpoints/discovery/addresses.go`):
//! every client gets the advertise address and secure port under `0.0.0.0/0`; a client in
//! the service network also gets the `kubernetes` service's address and port 443. The
//! client is the first address of `X-Forwarded-For`, else `X-Real-Ip`, else the
//! connection's peer (upstream `utilnet.GetClientIP`).

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap};
use ipnet::IpNet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ServerAddressByClientCIDR;

/// The port of the `kubernetes` service.
const SERVICE_PORT: u16 = 443;

/// Where clients reach the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddresses {
    /// `<advertise address>:<secure port>` (`[v6]:port` for IPv6).
    pub default_address: String,
    /// The service network and the `kubernetes` service's cluster IP.
    pub service_network: Option<(IpNet, IpAddr)>,
}

impl ServerAddresses {
    /// The addresses of the advertise address and port, and of the service network.
    pub fn new(advertise: IpAddr, port: u16, service_network: IpNet, service_ip: IpAddr) -> Self {
        ServerAddresses {
            default_address: SocketAddr::new(advertise, port).to_string(),
            service_network: Some((service_network, service_ip)),
        }
    }

    /// The entries for a client at `client` (unknown: only the default one).
    pub fn for_client(&self, client: Option<IpAddr>) -> Vec<ServerAddressByClientCIDR> {
        let mut addresses = vec![ServerAddressByClientCIDR {
            client_cidr: "0.0.0.0/0".to_owned(),
            server_address: self.default_address.clone(),
        }];
        if let (Some((network, service_ip)), Some(client)) = (&self.service_network, client)
            && network.contains(&client)
        {
            addresses.push(ServerAddressByClientCIDR {
                client_cidr: network.to_string(),
                server_address: SocketAddr::new(*service_ip, SERVICE_PORT).to_string(),
            });
        }
        addresses
    }
}

/// The client's address: `X-Forwarded-For`'s first valid one, `X-Real-Ip`, or the peer
/// the server put in the request's extensions (`ConnectInfo<SocketAddr>`).
pub fn client_ip(headers: &HeaderMap, extensions: &Extensions) -> Option<IpAddr> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let forwarded = header("x-forwarded-for")
        .into_iter()
        .flat_map(|list| list.split(','))
        .find_map(|part| skiff_api::names::parse_ip_sloppy(part.trim()));
    let real = || header("x-real-ip").and_then(|ip| skiff_api::names::parse_ip_sloppy(ip.trim()));
    let peer = || {
        let ConnectInfo(peer) = extensions.get::<ConnectInfo<SocketAddr>>()?;
        Some(peer.ip())
    };
    forwarded.or_else(real).or_else(peer)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn addresses() -> ServerAddresses {
        let network: IpNet = "10.96.0.0/12".parse().unwrap();
        ServerAddresses::new(
            [192, 168, 1, 10].into(),
            6443,
            network,
            [10, 96, 0, 1].into(),
        )
    }

    fn pairs(list: &[ServerAddressByClientCIDR]) -> Vec<(&str, &str)> {
        list.iter()
            .map(|a| (a.client_cidr.as_str(), a.server_address.as_str()))
            .collect()
    }

    #[test]
    fn clients_in_the_service_network_also_get_the_service_address() {
        let outside = addresses().for_client(Some([127, 0, 0, 1].into()));
        assert_eq!(pairs(&outside), [("0.0.0.0/0", "192.168.1.10:6443")]);
        let pod = addresses().for_client(Some([10, 96, 3, 4].into()));
        assert_eq!(
            pairs(&pod),
            [
                ("0.0.0.0/0", "192.168.1.10:6443"),
                ("10.96.0.0/12", "10.96.0.1:443")
            ]
        );
        assert_eq!(addresses().for_client(None).len(), 1);
    }

    #[test]
    fn the_client_is_the_forwarded_one_else_the_peer() {
        let mut extensions = Extensions::new();
        extensions.insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 5000))));
        let mut headers = HeaderMap::new();
        assert_eq!(
            client_ip(&headers, &extensions),
            Some([127, 0, 0, 1].into())
        );
        headers.insert("x-real-ip", HeaderValue::from_static("10.96.0.9"));
        assert_eq!(
            client_ip(&headers, &extensions),
            Some([10, 96, 0, 9].into())
        );
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("bad, 10.0.0.7, 10.0.0.8"),
        );
        assert_eq!(client_ip(&headers, &extensions), Some([10, 0, 0, 7].into()));
        assert_eq!(client_ip(&HeaderMap::new(), &Extensions::new()), None);
    }
}
