//! Pod DNS configuration (upstream `pkg/kubelet/network/dns/dns.go`, `Configurer`).
//!
//! [`DnsConfigurer::get_pod_dns`] gives the CRI `DNSConfig` of a pod's sandbox from its
//! `dnsPolicy`, the kubelet's `--cluster-dns` / `--cluster-domain`, the host's
//! resolv.conf (`--resolv-conf`) and the pod's `spec.dnsConfig`:
//! - `ClusterFirst` (not hostNetwork) and `ClusterFirstWithHostNet`: the cluster DNS
//!   servers only, the searches `<ns>.svc.<domain>`, `svc.<domain>`, `<domain>` then the
//!   host's, and `ndots:5`. Without cluster DNS the pod falls back to `Default`, with the
//!   `MissingClusterDNS` events.
//! - `Default` (and `ClusterFirst` with hostNetwork): the host's resolv.conf; with no
//!   resolv.conf configured (an empty path), the node's loopback nameserver and search `.`.
//! - `None`: only the pod's `dnsConfig`.
//!
//! The result is cut to the resolver's limits (3 nameservers; 32 search domains of at most
//! 253 characters, 2048 characters in all) with a `DNSConfigForming` warning event.

use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_cri::v1::DnsConfig;
use k8s_openapi::api::core::v1::{Pod, PodDNSConfig, PodDNSConfigOption};
use tracing::{error, warn};

use super::lifecycle::format_pod_object;
use crate::error::{Error, Result};
use crate::events::{self, EventRecorder, EventType};

/// Most nameservers a pod gets (upstream `validation.MaxDNSNameservers`, glibc `MAXNS`).
pub const MAX_DNS_NAMESERVERS: usize = 3;
/// Most search domains a pod gets (upstream `validation.MaxDNSSearchPaths`).
pub const MAX_DNS_SEARCH_PATHS: usize = 32;
/// Longest search line, domains joined by spaces (upstream
/// `validation.MaxDNSSearchListChars`).
pub const MAX_DNS_SEARCH_LIST_CHARS: usize = 2048;
/// Longest search domain (upstream `DNS1123SubdomainMaxLength`); longer ones are dropped
/// because some resolvers (glibc 2.28) abort on them.
const MAX_SEARCH_DOMAIN_LENGTH: usize = 253;
/// Largest resolv.conf read (upstream `maxResolveConfLength`, 10 MiB).
const MAX_RESOLV_CONF_LENGTH: u64 = 10 << 20;
/// The options of a cluster-DNS pod (upstream `defaultDNSOptions`).
const DEFAULT_DNS_OPTIONS: &[&str] = &["ndots:5"];

/// How a pod's DNS is set up (upstream `podDNSType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodDnsType {
    /// The cluster DNS servers and searches.
    Cluster,
    /// The host's resolv.conf.
    Host,
    /// Only the pod's `dnsConfig`.
    None,
}

/// Why a pod's DNS config could not be formed.
#[derive(Debug)]
pub enum DnsError {
    /// The host resolv.conf could not be read.
    ReadResolvConf {
        /// The resolv.conf path.
        path: PathBuf,
        /// The read error.
        source: std::io::Error,
    },
    /// The host resolv.conf is longer than 10 MiB.
    ResolvConfTooLong(PathBuf),
    /// The host resolv.conf has `nameserver` lines without an address.
    EmptyNameserver,
}

impl fmt::Display for DnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsError::ReadResolvConf { path, source } => {
                write!(f, "open {}: {source}", path.display())
            }
            DnsError::ResolvConfTooLong(path) => {
                write!(f, "{}: the read limit is reached", path.display())
            }
            DnsError::EmptyNameserver => f.write_str("nameserver list is empty "),
        }
    }
}

impl std::error::Error for DnsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DnsError::ReadResolvConf { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A parsed resolv.conf: nameservers, search domains and options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    /// `nameserver` addresses, in order.
    pub nameservers: Vec<String>,
    /// The last `search` line's domains, without trailing dots.
    pub searches: Vec<String>,
    /// The last `options` line's options.
    pub options: Vec<String>,
}

/// Parses resolv.conf text as upstream's `parseResolvConf`: `nameserver` lines
/// accumulate, the last `search` and `options` lines win, lines starting with `#` are
/// comments (`domain` lines are ignored). Errors when a `nameserver` line has no address.
pub fn parse_resolv_conf(text: &str) -> Result<ResolvConf, DnsError> {
    let mut conf = ResolvConf::default();
    let mut empty_nameserver = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => match fields.next() {
                Some(server) => conf.nameservers.push(server.to_owned()),
                None => empty_nameserver = true,
            },
            // The same domain with and without its trailing dot counts once.
            Some("search") => {
                conf.searches = fields
                    .map(|s| s.strip_suffix('.').unwrap_or(s).to_owned())
                    .collect();
            }
            Some("options") => conf.options = fields.map(str::to_owned).collect(),
            _ => {}
        }
    }
    if empty_nameserver {
        return Err(DnsError::EmptyNameserver);
    }
    Ok(conf)
}

/// Reads and parses the resolv.conf at `path`.
fn read_resolv_conf(path: &Path) -> Result<ResolvConf, DnsError> {
    let read_error = |source| DnsError::ReadResolvConf {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_RESOLV_CONF_LENGTH + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_RESOLV_CONF_LENGTH {
        return Err(DnsError::ResolvConfTooLong(path.to_owned()));
    }
    parse_resolv_conf(&String::from_utf8_lossy(&bytes))
}

/// The pod's DNS type from its `dnsPolicy` (upstream `getPodDNSType`): `ClusterFirst` of a
/// hostNetwork pod is `Default`. Errors on an unknown or unset policy (the API server
/// rejects those; the caller falls back to [`PodDnsType::Cluster`]).
pub fn pod_dns_type(pod: &Pod) -> Result<PodDnsType> {
    let spec = pod.spec.as_ref();
    let policy = spec.and_then(|s| s.dns_policy.as_deref()).unwrap_or("");
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    match policy {
        "None" => Ok(PodDnsType::None),
        "ClusterFirstWithHostNet" => Ok(PodDnsType::Cluster),
        "ClusterFirst" if !host_network => Ok(PodDnsType::Cluster),
        "ClusterFirst" | "Default" => Ok(PodDnsType::Host),
        other => Err(Error::InvalidPod(format!("invalid DNSPolicy={other}"))),
    }
}

/// `values` without repeats, first occurrences kept in order (upstream `omitDuplicates`).
fn omit_duplicates(values: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    values
        .into_iter()
        .filter(|v| seen.insert(v.clone()))
        .collect()
}

/// Merges the pod's DNS options into `existing` (upstream `mergeDNSOptions`): an option is
/// `name` or `name:value`; a pod option replaces an existing one of the same name. Existing
/// options keep their order and new ones follow in the pod's order (upstream's order comes
/// from a Go map, so it is unspecified there).
pub fn merge_dns_options(existing: &[String], pod_options: &[PodDNSConfigOption]) -> Vec<String> {
    let mut merged: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: &str| {
        match merged.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = value.to_owned(),
            None => merged.push((name.to_owned(), value.to_owned())),
        };
    };
    for option in existing {
        let (name, value) = option.split_once(':').unwrap_or((option, ""));
        set(name, value);
    }
    for option in pod_options {
        set(
            option.name.as_deref().unwrap_or(""),
            option.value.as_deref().unwrap_or(""),
        );
    }
    merged
        .into_iter()
        .map(|(name, value)| {
            if value.is_empty() {
                name
            } else {
                format!("{name}:{value}")
            }
        })
        .collect()
}

/// Appends the pod's `dnsConfig` to `config` (upstream `appendDNSConfig`): nameservers and
/// searches without repeats, options merged by name.
pub fn append_dns_config(config: &mut DnsConfig, pod_dns: &PodDNSConfig) {
    let mut servers = std::mem::take(&mut config.servers);
    servers.extend(pod_dns.nameservers.iter().flatten().cloned());
    config.servers = omit_duplicates(servers);
    let mut searches = std::mem::take(&mut config.searches);
    searches.extend(pod_dns.searches.iter().flatten().cloned());
    config.searches = omit_duplicates(searches);
    config.options = merge_dns_options(
        &config.options,
        pod_dns.options.as_deref().unwrap_or_default(),
    );
}

/// `searches` cut to the limits (upstream `formDNSSearchFitsLimits`): at most 32 domains,
/// none longer than 253 characters, the line at most 2048 characters (dropping domains
/// from the end). The second value is true when anything was dropped.
pub fn form_dns_search_fits_limits(mut searches: Vec<String>) -> (Vec<String>, bool) {
    let mut exceeded = false;
    if searches.len() > MAX_DNS_SEARCH_PATHS {
        searches.truncate(MAX_DNS_SEARCH_PATHS);
        exceeded = true;
    }
    let before = searches.len();
    searches.retain(|s| s.len() <= MAX_SEARCH_DOMAIN_LENGTH);
    exceeded |= searches.len() != before;
    let line_len =
        |s: &[String]| s.iter().map(String::len).sum::<usize>() + s.len().saturating_sub(1);
    let total = line_len(&searches);
    if total > MAX_DNS_SEARCH_LIST_CHARS {
        // Drop domains from the end until the line fits, counting each one's separator.
        let mut cut = 0;
        let mut keep = searches.len();
        while keep > 0 {
            keep -= 1;
            cut += searches[keep].len() + 1;
            if total.saturating_sub(cut) <= MAX_DNS_SEARCH_LIST_CHARS {
                break;
            }
        }
        searches.truncate(keep);
        exceeded = true;
    }
    (searches, exceeded)
}

/// `nameservers` cut to 3 (upstream `formDNSNameserversFitsLimits`); true when any was
/// dropped.
pub fn form_dns_nameservers_fits_limits(mut nameservers: Vec<String>) -> (Vec<String>, bool) {
    let exceeded = nameservers.len() > MAX_DNS_NAMESERVERS;
    nameservers.truncate(MAX_DNS_NAMESERVERS);
    (nameservers, exceeded)
}

/// Sets up pod DNS (upstream `dns.Configurer`).
#[derive(Debug, Default)]
pub struct DnsConfigurer {
    /// `--cluster-dns`: the nameservers of cluster-DNS pods.
    cluster_dns: Vec<IpAddr>,
    /// `--cluster-domain`: searched by cluster-DNS pods when not empty.
    cluster_domain: String,
    /// `--resolv-conf`: the host resolv.conf; empty: none (loopback DNS for host pods).
    resolver_config: PathBuf,
    /// The node's IPs (the loopback family of host pods without a resolv.conf).
    node_ips: Vec<IpAddr>,
    /// The missing cluster DNS was logged (once; the events come at every sync).
    warned_missing_cluster_dns: AtomicBool,
}

impl DnsConfigurer {
    /// A configurer with the kubelet's `cluster_dns`, `cluster_domain`, host resolv.conf
    /// path `resolver_config` (empty: none) and the node's IPs.
    pub fn new(
        cluster_dns: Vec<IpAddr>,
        cluster_domain: String,
        resolver_config: PathBuf,
        node_ips: Vec<IpAddr>,
    ) -> Self {
        Self {
            cluster_dns,
            cluster_domain,
            resolver_config,
            node_ips,
            warned_missing_cluster_dns: AtomicBool::new(false),
        }
    }

    /// The cluster searches followed by the host's, without repeats (upstream
    /// `generateSearchesForDNSClusterFirst`); the host's only without a cluster domain.
    pub fn generate_searches_for_dns_cluster_first(
        &self,
        host_searches: Vec<String>,
        pod: &Pod,
    ) -> Vec<String> {
        if self.cluster_domain.is_empty() {
            return host_searches;
        }
        let domain = &self.cluster_domain;
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let mut searches = vec![
            format!("{namespace}.svc.{domain}"),
            format!("svc.{domain}"),
            domain.clone(),
        ];
        searches.extend(host_searches);
        omit_duplicates(searches)
    }

    /// The host's DNS settings (upstream `getHostDNSConfig`); empty without a resolv.conf.
    fn host_dns_config(&self) -> Result<DnsConfig, DnsError> {
        if self.resolver_config.as_os_str().is_empty() {
            return Ok(DnsConfig::default());
        }
        let conf = read_resolv_conf(&self.resolver_config)?;
        Ok(DnsConfig {
            servers: conf.nameservers,
            searches: conf.searches,
            options: conf.options,
        })
    }

    /// The DNS config of `pod`'s sandbox (upstream `GetPodDNS`); see the module docs.
    /// Records `MissingClusterDNS` (on the node and the pod) and `DNSConfigForming` (on the
    /// pod) warnings through `recorder`. Errors when the host resolv.conf cannot be read
    /// or parsed (the sandbox is then not created).
    pub fn get_pod_dns(&self, pod: &Pod, recorder: &EventRecorder) -> Result<DnsConfig, DnsError> {
        let mut config = self.host_dns_config()?;
        let dns_type = pod_dns_type(pod).unwrap_or_else(|e| {
            error!(pod = %format_pod_object(pod), error = %e, "Failed to get DNS type for pod. Falling back to DNSClusterFirst policy.");
            PodDnsType::Cluster
        });
        match dns_type {
            PodDnsType::None => config = DnsConfig::default(),
            PodDnsType::Cluster if !self.cluster_dns.is_empty() => {
                // The cluster DNS server is the pod's only nameserver: it forwards what it
                // cannot resolve itself.
                config.servers = self.cluster_dns.iter().map(ToString::to_string).collect();
                config.searches =
                    self.generate_searches_for_dns_cluster_first(config.searches, pod);
                config.options = DEFAULT_DNS_OPTIONS
                    .iter()
                    .map(|o| (*o).to_owned())
                    .collect();
            }
            PodDnsType::Cluster | PodDnsType::Host => {
                if dns_type == PodDnsType::Cluster {
                    let node_message = "kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.";
                    if !self
                        .warned_missing_cluster_dns
                        .swap(true, Ordering::Relaxed)
                    {
                        warn!(pod = %format_pod_object(pod), "{node_message}");
                    }
                    recorder.node_event(
                        EventType::Warning,
                        events::MISSING_CLUSTER_DNS,
                        node_message,
                    );
                    recorder.pod_event(
                        pod,
                        EventType::Warning,
                        events::MISSING_CLUSTER_DNS,
                        &format!("pod: {:?}. {node_message}", format_pod_object(pod)),
                    );
                }
                if self.resolver_config.as_os_str().is_empty() {
                    // No resolv.conf: "use the nameserver on the local machine", which
                    // also overrides the runtime's default of the host's file.
                    config.servers.extend(
                        self.node_ips
                            .iter()
                            .map(|ip| if ip.is_ipv6() { "::1" } else { "127.0.0.1" }.to_owned()),
                    );
                    if config.servers.is_empty() {
                        config.servers.push("127.0.0.1".to_owned());
                    }
                    config.searches = vec![".".to_owned()];
                }
            }
        }
        if let Some(pod_dns) = pod.spec.as_ref().and_then(|s| s.dns_config.as_ref()) {
            append_dns_config(&mut config, pod_dns);
        }
        Ok(self.form_dns_config_fits_limits(config, pod, recorder))
    }

    /// `config` cut to the limits, with a `DNSConfigForming` warning on the pod for each
    /// list that was cut (upstream `formDNSConfigFitsLimits`).
    fn form_dns_config_fits_limits(
        &self,
        mut config: DnsConfig,
        pod: &Pod,
        recorder: &EventRecorder,
    ) -> DnsConfig {
        let (servers, exceeded) = form_dns_nameservers_fits_limits(config.servers);
        if exceeded {
            let message = format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
                servers.join(" ")
            );
            error!(pod = %format_pod_object(pod), "{message}");
            recorder.pod_event(
                pod,
                EventType::Warning,
                events::DNS_CONFIG_FORMING,
                &message,
            );
        }
        config.servers = servers;
        let (searches, exceeded) = form_dns_search_fits_limits(config.searches);
        if exceeded {
            let message = format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                searches.join(" ")
            );
            error!(pod = %format_pod_object(pod), "{message}");
            recorder.pod_event(
                pod,
                EventType::Warning,
                events::DNS_CONFIG_FORMING,
                &message,
            );
        }
        config.searches = searches;
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::captured_events;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    fn pod(name: &str, policy: &str, host_network: bool, dns: Option<PodDNSConfig>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns1".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                dns_policy: (!policy.is_empty()).then(|| policy.to_owned()),
                host_network: Some(host_network),
                dns_config: dns,
                ..Default::default()
            }),
            status: None,
        }
    }

    fn option(name: &str, value: Option<&str>) -> PodDNSConfigOption {
        PodDNSConfigOption {
            name: Some(name.into()),
            value: value.map(Into::into),
        }
    }

    #[test]
    fn parses_resolv_conf_as_upstream() {
        let c = parse_resolv_conf(
            "# c\n  # indented comment\nnameserver 1.1.1.1\nnameserver 8.8.8.8 ; x\ndomain ignored.example\nsearch old.example\nsearch a.b. c.d\noptions timeout:1\noptions ndots:2 edns0\n",
        )
        .unwrap();
        assert_eq!(c.nameservers, strings(&["1.1.1.1", "8.8.8.8"]));
        assert_eq!(c.searches, strings(&["a.b", "c.d"]));
        assert_eq!(c.options, strings(&["ndots:2", "edns0"]));
        let err = parse_resolv_conf("nameserver\nnameserver 1.1.1.1\n").unwrap_err();
        assert_eq!(err.to_string(), "nameserver list is empty ");
        assert_eq!(parse_resolv_conf("").unwrap(), ResolvConf::default());
    }

    #[test]
    fn dns_type_per_policy() {
        let cases = [
            ("ClusterFirst", false, Ok(PodDnsType::Cluster)),
            ("ClusterFirst", true, Ok(PodDnsType::Host)),
            ("ClusterFirstWithHostNet", true, Ok(PodDnsType::Cluster)),
            ("ClusterFirstWithHostNet", false, Ok(PodDnsType::Cluster)),
            ("Default", false, Ok(PodDnsType::Host)),
            ("None", true, Ok(PodDnsType::None)),
            (
                "Bogus",
                false,
                Err(Error::InvalidPod("invalid DNSPolicy=Bogus".to_owned())),
            ),
            (
                "",
                false,
                Err(Error::InvalidPod("invalid DNSPolicy=".to_owned())),
            ),
        ];
        for (policy, host_network, want) in cases {
            assert_eq!(
                pod_dns_type(&pod("p", policy, host_network, None)),
                want,
                "{policy} hostNetwork={host_network}"
            );
        }
    }

    /// One row of the GetPodDNS table.
    struct Case {
        name: &'static str,
        policy: &'static str,
        host_network: bool,
        cluster_dns: &'static [&'static str],
        cluster_domain: &'static str,
        /// None: no resolv.conf configured (empty path).
        resolv_conf: Option<&'static str>,
        dns_config: Option<PodDNSConfig>,
        servers: &'static [&'static str],
        searches: &'static [&'static str],
        options: &'static [&'static str],
        /// Reasons of the events recorded on the pod.
        events: &'static [&'static str],
    }

    const HOST: &str = "nameserver 10.0.0.1\nnameserver 10.0.0.2\nsearch corp.example lab.example\noptions ndots:1 timeout:2\n";

    #[test]
    fn get_pod_dns_per_policy() {
        let cases = vec![
            Case {
                name: "cluster-first",
                policy: "ClusterFirst",
                host_network: false,
                cluster_dns: &["10.96.0.10"],
                cluster_domain: "cluster.local",
                resolv_conf: Some(HOST),
                dns_config: None,
                servers: &["10.96.0.10"],
                searches: &[
                    "ns1.svc.cluster.local",
                    "svc.cluster.local",
                    "cluster.local",
                    "corp.example",
                    "lab.example",
                ],
                options: &["ndots:5"],
                events: &[],
            },
            Case {
                name: "cluster-first-no-domain",
                policy: "ClusterFirst",
                host_network: false,
                cluster_dns: &["10.96.0.10", "10.96.0.11"],
                cluster_domain: "",
                resolv_conf: Some(HOST),
                dns_config: None,
                servers: &["10.96.0.10", "10.96.0.11"],
                searches: &["corp.example", "lab.example"],
                options: &["ndots:5"],
                events: &[],
            },
            Case {
                name: "cluster-first-host-network",
                policy: "ClusterFirst",
                host_network: true,
                cluster_dns: &["10.96.0.10"],
                cluster_domain: "cluster.local",
                resolv_conf: Some(HOST),
                dns_config: None,
                servers: &["10.0.0.1", "10.0.0.2"],
                searches: &["corp.example", "lab.example"],
                options: &["ndots:1", "timeout:2"],
                events: &[],
            },
            Case {
                name: "cluster-first-with-host-net",
                policy: "ClusterFirstWithHostNet",
                host_network: true,
                cluster_dns: &["10.96.0.10"],
                cluster_domain: "cluster.local",
                resolv_conf: Some(HOST),
                dns_config: None,
                servers: &["10.96.0.10"],
                searches: &[
                    "ns1.svc.cluster.local",
                    "svc.cluster.local",
                    "cluster.local",
                    "corp.example",
                    "lab.example",
                ],
                options: &["ndots:5"],
                events: &[],
            },
            Case {
                name: "default",
                policy: "Default",
                host_network: false,
                cluster_dns: &["10.96.0.10"],
                cluster_domain: "cluster.local",
                resolv_conf: Some(HOST),
                dns_config: None,
                servers: &["10.0.0.1", "10.0.0.2"],
                searches: &["corp.example", "lab.example"],
                options: &["ndots:1", "timeout:2"],
                events: &[],
            },
            Case {
                name: "default-no-resolv-conf",
                policy: "Default",
                host_network: false,
                cluster_dns: &[],
                cluster_domain: "",
                resolv_conf: None,
                dns_config: None,
                servers: &["127.0.0.1"],
                searches: &["."],
                options: &[],
                events: &[],
            },
            Case {
                name: "none",
                policy: "None",
                host_network: false,
                cluster_dns: &["10.96.0.10"],
                cluster_domain: "cluster.local",
                resolv_conf: Some(HOST),
                dns_config: Some(PodDNSConfig {
                    nameservers: Some(strings(&["1.2.3.4", "1.2.3.4"])),
                    searches: Some(strings(&["my.example"])),
                    options: Some(vec![option("ndots", Some("2")), option("edns0", None)]),
                }),
                servers: &["1.2.3.4"],
                searches: &["my.example"],
                options: &["ndots:2", "edns0"],
                events: &[],
            },
            Case {
                name: "cluster-first-missing-cluster-dns",
                policy: "ClusterFirst",
                host_network: false,
                cluster_dns: &[],
                cluster_domain: "cluster.local",
                resolv_conf: Some(HOST),
                dns_config: None,
                servers: &["10.0.0.1", "10.0.0.2"],
                searches: &["corp.example", "lab.example"],
                options: &["ndots:1", "timeout:2"],
                events: &["MissingClusterDNS"],
            },
            Case {
                name: "cluster-first-with-pod-dns-config",
                policy: "ClusterFirst",
                host_network: false,
                cluster_dns: &["10.96.0.10"],
                cluster_domain: "cluster.local",
                resolv_conf: Some(HOST),
                dns_config: Some(PodDNSConfig {
                    nameservers: Some(strings(&["10.96.0.10", "9.9.9.9"])),
                    searches: Some(strings(&["cluster.local", "extra.example"])),
                    options: Some(vec![option("ndots", Some("3")), option("rotate", None)]),
                }),
                servers: &["10.96.0.10", "9.9.9.9"],
                searches: &[
                    "ns1.svc.cluster.local",
                    "svc.cluster.local",
                    "cluster.local",
                    "corp.example",
                    "lab.example",
                    "extra.example",
                ],
                options: &["ndots:3", "rotate"],
                events: &[],
            },
            Case {
                name: "too-many-nameservers",
                policy: "Default",
                host_network: false,
                cluster_dns: &[],
                cluster_domain: "",
                resolv_conf: Some(HOST),
                dns_config: Some(PodDNSConfig {
                    nameservers: Some(strings(&["1.1.1.1", "2.2.2.2"])),
                    ..Default::default()
                }),
                servers: &["10.0.0.1", "10.0.0.2", "1.1.1.1"],
                searches: &["corp.example", "lab.example"],
                options: &["ndots:1", "timeout:2"],
                events: &["DNSConfigForming"],
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        for case in cases {
            let resolv = match case.resolv_conf {
                Some(text) => {
                    let path = dir.path().join(format!("{}.conf", case.name));
                    std::fs::write(&path, text).unwrap();
                    path
                }
                None => PathBuf::new(),
            };
            let configurer = DnsConfigurer::new(
                case.cluster_dns
                    .iter()
                    .map(|s| s.parse().unwrap())
                    .collect(),
                case.cluster_domain.to_owned(),
                resolv,
                vec!["192.168.0.2".parse().unwrap()],
            );
            let node = format!("dns-node-{}", case.name);
            let recorder = EventRecorder::log_only(&node);
            let p = pod(case.name, case.policy, case.host_network, case.dns_config);
            let got = configurer.get_pod_dns(&p, &recorder).unwrap();
            assert_eq!(got.servers, strings(case.servers), "{}: servers", case.name);
            assert_eq!(
                got.searches,
                strings(case.searches),
                "{}: searches",
                case.name
            );
            assert_eq!(got.options, strings(case.options), "{}: options", case.name);
            let pod_events: Vec<String> = captured_events(&node)
                .into_iter()
                .filter(|e| e.involved_object.kind.as_deref() == Some("Pod"))
                .filter_map(|e| e.reason)
                .collect();
            assert_eq!(pod_events, strings(case.events), "{}: events", case.name);
        }
    }

    #[test]
    fn missing_cluster_dns_events_carry_upstream_text() {
        let dir = tempfile::tempdir().unwrap();
        let resolv = dir.path().join("resolv.conf");
        std::fs::write(&resolv, HOST).unwrap();
        let configurer = DnsConfigurer::new(Vec::new(), "cluster.local".into(), resolv, vec![]);
        let recorder = EventRecorder::log_only("dns-node-missing");
        let p = pod("web", "ClusterFirst", false, None);
        configurer.get_pod_dns(&p, &recorder).unwrap();
        let events = captured_events("dns-node-missing");
        let node_message = "kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.";
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].involved_object.kind.as_deref(), Some("Node"));
        assert_eq!(events[0].message.as_deref(), Some(node_message));
        assert_eq!(events[0].type_.as_deref(), Some("Warning"));
        assert_eq!(
            events[1].message.as_deref(),
            Some(format!("pod: \"web_ns1(uid-web)\". {node_message}").as_str())
        );
    }

    #[test]
    fn missing_or_broken_resolv_conf_fails() {
        let configurer = DnsConfigurer::new(
            vec![],
            String::new(),
            PathBuf::from("/nonexistent/resolv.conf"),
            vec![],
        );
        let recorder = EventRecorder::log_only("dns-node-broken");
        let err = configurer
            .get_pod_dns(&pod("p", "Default", false, None), &recorder)
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("open /nonexistent/resolv.conf: "),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let resolv = dir.path().join("resolv.conf");
        std::fs::write(&resolv, "nameserver\n").unwrap();
        let configurer = DnsConfigurer::new(vec![], String::new(), resolv, vec![]);
        assert!(
            configurer
                .get_pod_dns(&pod("p", "None", false, None), &recorder)
                .is_err()
        );
    }

    #[test]
    fn loopback_nameservers_follow_the_node_ip_families() {
        let configurer = DnsConfigurer::new(
            vec![],
            String::new(),
            PathBuf::new(),
            vec!["10.0.0.2".parse().unwrap(), "fd00::2".parse().unwrap()],
        );
        let got = configurer
            .get_pod_dns(
                &pod("p", "Default", false, None),
                &EventRecorder::log_only("dns-node-loopback"),
            )
            .unwrap();
        assert_eq!(got.servers, strings(&["127.0.0.1", "::1"]));
        assert_eq!(got.searches, strings(&["."]));
    }

    #[test]
    fn merge_options_overrides_by_name() {
        let merged = merge_dns_options(
            &strings(&["ndots:5", "edns0", "timeout:1", "ndots:4"]),
            &[
                option("timeout", Some("3")),
                option("edns0", None),
                option("rotate", None),
            ],
        );
        assert_eq!(
            merged,
            strings(&["ndots:4", "edns0", "timeout:3", "rotate"])
        );
        let merged = merge_dns_options(&strings(&["ndots:5"]), &[option("ndots", None)]);
        assert_eq!(merged, strings(&["ndots"]));
    }

    #[test]
    fn search_limits_as_upstream() {
        let domain = |i: usize, len: usize| {
            let prefix = format!("d{i}.");
            format!("{prefix}{}", "a".repeat(len - prefix.len()))
        };
        // (input, expected output, exceeded)
        let many: Vec<String> = (0..40).map(|i| format!("s{i}.example")).collect();
        let long = "x".repeat(254);
        let ok_253 = "y".repeat(253);
        // 10 domains of 250 characters: the 2048-character line keeps the first 8
        // (8 * 250 + 7 separators = 2007; a 9th would make 2258).
        let wide: Vec<String> = (0..10).map(|i| domain(i, 250)).collect();
        let exact: Vec<String> = (0..9)
            .map(|i| domain(i, if i == 8 { 224 } else { 227 }))
            .collect();
        let cases: Vec<(Vec<String>, Vec<String>, bool)> = vec![
            (
                strings(&["a.example", "b.example"]),
                strings(&["a.example", "b.example"]),
                false,
            ),
            (many.clone(), many[..32].to_vec(), true),
            (
                vec!["a.example".into(), long, ok_253.clone()],
                vec!["a.example".into(), ok_253],
                true,
            ),
            (wide.clone(), wide[..8].to_vec(), true),
            // Exactly 2048 characters fit: 8 * 227 + 224 + 8 separators.
            (exact.clone(), exact, false),
            (Vec::new(), Vec::new(), false),
        ];
        for (i, (input, want, want_exceeded)) in cases.into_iter().enumerate() {
            let (got, exceeded) = form_dns_search_fits_limits(input);
            assert_eq!(got, want, "case {i}");
            assert_eq!(exceeded, want_exceeded, "case {i}");
        }
        // The cut line goes into the event: 33 searches through the pod's dnsConfig.
        let configurer = DnsConfigurer::new(vec![], String::new(), PathBuf::new(), vec![]);
        let p = pod(
            "many",
            "None",
            false,
            Some(PodDNSConfig {
                nameservers: Some(strings(&["1.1.1.1"])),
                searches: Some(many[..33].to_vec()),
                options: None,
            }),
        );
        let got = configurer
            .get_pod_dns(&p, &EventRecorder::log_only("dns-node-search-limit"))
            .unwrap();
        assert_eq!(got.searches.len(), 32);
        let events = captured_events("dns-node-search-limit");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason.as_deref(), Some("DNSConfigForming"));
        assert_eq!(
            events[0].message.as_deref(),
            Some(
                format!(
                    "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                    many[..32].join(" ")
                )
                .as_str()
            )
        );
    }

    #[test]
    fn nameserver_limit_keeps_the_first_three() {
        let (got, exceeded) = form_dns_nameservers_fits_limits(strings(&[
            "1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4",
        ]));
        assert_eq!(got, strings(&["1.1.1.1", "2.2.2.2", "3.3.3.3"]));
        assert!(exceeded);
        let (got, exceeded) = form_dns_nameservers_fits_limits(strings(&["1.1.1.1"]));
        assert_eq!(got, strings(&["1.1.1.1"]));
        assert!(!exceeded);
    }
}
