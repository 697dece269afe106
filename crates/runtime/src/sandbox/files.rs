//! Per-sandbox files bind-mounted into every container of the pod: `hostname`,
//! `resolv.conf` and `hosts`, under `<state>/sandboxes/<id>/`.

use std::path::Path;

use anyhow::Context as _;
use k8s_cri::v1::DnsConfig;

/// File names inside a sandbox directory, and where containers see them.
pub const HOSTNAME: &str = "hostname";
/// See [`HOSTNAME`].
pub const RESOLV_CONF: &str = "resolv.conf";
/// See [`HOSTNAME`].
pub const HOSTS: &str = "hosts";

/// Writes `hostname` and `resolv.conf` into `dir` (created here). An empty or absent
/// DNSConfig means "use the node's resolver", so the host's `/etc/resolv.conf` is copied,
/// as containerd does.
pub fn write_initial(dir: &Path, hostname: &str, dns: Option<&DnsConfig>) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join(HOSTNAME), format!("{hostname}\n"))?;
    let resolv = match dns.filter(|dns| {
        !(dns.servers.is_empty() && dns.searches.is_empty() && dns.options.is_empty())
    }) {
        Some(dns) => resolv_conf(dns),
        None => std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default(),
    };
    std::fs::write(dir.join(RESOLV_CONF), resolv)?;
    Ok(())
}

/// Writes the `hosts` file: the loopback entries plus `<pod_ip> <hostname>` when the pod has
/// an address.
pub fn write_hosts(dir: &Path, hostname: &str, pod_ip: Option<&str>) -> anyhow::Result<()> {
    std::fs::write(dir.join(HOSTS), hosts(hostname, pod_ip))
        .with_context(|| format!("writing hosts in {}", dir.display()))
}

/// Copies the node's `/etc/hosts` as the pod's `hosts` (pods on the node's network, as
/// containerd does); an unreadable node file gives the loopback entries only.
pub fn copy_host_hosts(dir: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string("/etc/hosts").unwrap_or_else(|_| hosts("", None));
    std::fs::write(dir.join(HOSTS), text)
        .with_context(|| format!("writing hosts in {}", dir.display()))
}

/// The resolv.conf text for a DNSConfig (`search`, `nameserver`, `options` lines).
pub fn resolv_conf(dns: &DnsConfig) -> String {
    let mut out = String::new();
    if !dns.searches.is_empty() {
        out.push_str(&format!("search {}\n", dns.searches.join(" ")));
    }
    for server in &dns.servers {
        out.push_str(&format!("nameserver {server}\n"));
    }
    if !dns.options.is_empty() {
        out.push_str(&format!("options {}\n", dns.options.join(" ")));
    }
    out
}

/// The hosts file text.
pub fn hosts(hostname: &str, pod_ip: Option<&str>) -> String {
    let mut out = String::from(
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n",
    );
    if let Some(ip) = pod_ip.filter(|_| !hostname.is_empty()) {
        out.push_str(&format!("{ip}\t{hostname}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_from_dns_config() {
        let dns = DnsConfig {
            servers: vec!["10.96.0.10".into()],
            searches: vec![
                "default.svc.cluster.local".into(),
                "svc.cluster.local".into(),
            ],
            options: vec!["ndots:5".into()],
        };
        assert_eq!(
            resolv_conf(&dns),
            "search default.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
        );
    }

    #[test]
    fn hosts_has_pod_entry() {
        let text = hosts("web-0", Some("10.88.0.5"));
        assert!(text.starts_with("127.0.0.1\tlocalhost\n"));
        assert!(text.ends_with("10.88.0.5\tweb-0\n"));
        assert!(!hosts("web-0", None).contains("web-0"));
    }

    #[test]
    fn empty_dns_copies_host_resolv_conf() {
        let dir = tempfile::tempdir().unwrap();
        write_initial(dir.path(), "h", Some(&DnsConfig::default())).unwrap();
        let host = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(RESOLV_CONF)).unwrap(),
            host
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join(HOSTNAME)).unwrap(),
            "h\n"
        );
    }
}
