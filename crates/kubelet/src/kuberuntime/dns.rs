//! Pod DNS configuration (upstream `pkg/kubelet/network/dns`): without cluster DNS,
//! `ClusterFirst` and `Default` pods get the host's resolv.conf; `None` pods get only
//! their `spec.dnsConfig`, which is merged into every policy's result.

use std::path::Path;

use k8s_cri::v1::DnsConfig;
use k8s_openapi::api::core::v1::Pod;

/// Most nameservers a resolver uses (glibc `MAXNS`).
const MAX_NAMESERVERS: usize = 3;

/// Parses resolv.conf text into nameservers, search domains and options.
pub fn parse_resolv_conf(text: &str) -> DnsConfig {
    let mut config = DnsConfig::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("");
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => config.servers.extend(fields.next().map(str::to_owned)),
            Some("search" | "domain") => config.searches = fields.map(str::to_owned).collect(),
            Some("options") => config.options.extend(fields.map(str::to_owned)),
            _ => {}
        }
    }
    config
}

/// The DNS config of the pod's sandbox, reading the host's resolv.conf from `resolv_conf`
/// (a missing file gives an empty host config).
pub fn pod_dns_config(pod: &Pod, resolv_conf: &Path) -> DnsConfig {
    let spec = pod.spec.as_ref();
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let mut config = if policy == "None" {
        DnsConfig::default()
    } else {
        std::fs::read_to_string(resolv_conf)
            .map(|t| parse_resolv_conf(&t))
            .unwrap_or_default()
    };
    if let Some(pod_dns) = spec.and_then(|s| s.dns_config.as_ref()) {
        config
            .servers
            .extend(pod_dns.nameservers.iter().flatten().cloned());
        config
            .searches
            .extend(pod_dns.searches.iter().flatten().cloned());
        for option in pod_dns.options.iter().flatten() {
            let name = option.name.clone().unwrap_or_default();
            let value = option
                .value
                .as_ref()
                .map_or(name.clone(), |v| format!("{name}:{v}"));
            config
                .options
                .retain(|o| o.split(':').next() != Some(name.as_str()));
            config.options.push(value);
        }
    }
    dedup(&mut config.servers);
    dedup(&mut config.searches);
    config.servers.truncate(MAX_NAMESERVERS);
    config
}

fn dedup(values: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    values.retain(|v| seen.insert(v.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodDNSConfig, PodDNSConfigOption, PodSpec};

    #[test]
    fn parses_resolv_conf() {
        let c = parse_resolv_conf(
            "# c\nnameserver 1.1.1.1\nnameserver 8.8.8.8 ; x\nsearch a.b c.d\noptions ndots:2 edns0\n",
        );
        assert_eq!(c.servers, vec!["1.1.1.1", "8.8.8.8"]);
        assert_eq!(c.searches, vec!["a.b", "c.d"]);
        assert_eq!(c.options, vec!["ndots:2", "edns0"]);
    }

    #[test]
    fn policy_none_uses_only_pod_dns_config() {
        let dir = tempfile::tempdir().unwrap();
        let resolv = dir.path().join("resolv.conf");
        std::fs::write(&resolv, "nameserver 9.9.9.9\noptions ndots:1\n").unwrap();
        let mut pod = Pod {
            spec: Some(PodSpec {
                dns_policy: Some("None".into()),
                dns_config: Some(PodDNSConfig {
                    nameservers: Some(vec!["1.2.3.4".into()]),
                    options: Some(vec![PodDNSConfigOption {
                        name: Some("ndots".into()),
                        value: Some("5".into()),
                    }]),
                    searches: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = pod_dns_config(&pod, &resolv);
        assert_eq!(c.servers, vec!["1.2.3.4"]);
        assert_eq!(c.options, vec!["ndots:5"]);
        if let Some(s) = pod.spec.as_mut() {
            s.dns_policy = Some("ClusterFirst".into());
        }
        let c = pod_dns_config(&pod, &resolv);
        assert_eq!(c.servers, vec!["9.9.9.9", "1.2.3.4"]);
        assert_eq!(c.options, vec!["ndots:5"]);
    }
}
