//! Network configuration lists: loading the active `*.conflist` and writing Skiff's default.

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

/// File name of the conflist written when the configuration directory has none.
pub const DEFAULT_FILE: &str = "10-skiff.conflist";
/// Bridge device of the default network.
pub const DEFAULT_BRIDGE: &str = "skiff0";

/// A parsed network configuration list (CNI spec 1.0, "Section 1: Network configuration").
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NetworkList {
    /// `name` of the network.
    pub name: String,
    /// `cniVersion` the list (and each plugin invocation) uses.
    pub cni_version: String,
    /// The `plugins` array, in execution order for ADD.
    pub plugins: Vec<Value>,
}

impl NetworkList {
    /// Parses a conflist document.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let doc: Value = serde_json::from_str(text)?;
        let name = doc
            .get("name")
            .and_then(Value::as_str)
            .context("conflist has no \"name\"")?;
        let cni_version = doc
            .get("cniVersion")
            .and_then(Value::as_str)
            .context("conflist has no \"cniVersion\"")?;
        let plugins = doc
            .get("plugins")
            .and_then(Value::as_array)
            .context("conflist has no \"plugins\" array")?;
        if plugins.is_empty() {
            bail!("conflist {name:?} has no plugins");
        }
        Ok(Self {
            name: name.to_string(),
            cni_version: cni_version.to_string(),
            plugins: plugins.clone(),
        })
    }
}

/// Loads the lexically first `*.conflist` of `dir`.
pub fn load(dir: &Path) -> anyhow::Result<NetworkList> {
    let path =
        first_conflist(dir)?.with_context(|| format!("no *.conflist in {}", dir.display()))?;
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    NetworkList::parse(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Writes [`DEFAULT_FILE`] into `dir` (created if needed) unless `dir` already has a
/// conflist: bridge `skiff0` with host-local IPAM over `pod_cidr`, then portmap.
pub fn ensure_default(dir: &Path, pod_cidr: &ipnet::IpNet) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if first_conflist(dir)?.is_some() {
        return Ok(());
    }
    let text = serde_json::to_string_pretty(&default_conflist(pod_cidr))?;
    crate::store::write_atomic(&dir.join(DEFAULT_FILE), text.as_bytes())
}

/// Points Skiff's default conflist at a new pod subnet (CRI UpdateRuntimeConfig):
/// writes [`DEFAULT_FILE`] with `pod_cidr` when `dir` has no conflist, or rewrites it when
/// it is the active conflist and still the one Skiff generated (for another subnet).
/// A conflist written or edited by someone else is never touched. Returns whether the
/// file was (re)written.
pub fn update_default(dir: &Path, pod_cidr: &ipnet::IpNet) -> anyhow::Result<bool> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let ours = dir.join(DEFAULT_FILE);
    match first_conflist(dir)? {
        None => {}
        Some(active) if active == ours => {
            let text = std::fs::read_to_string(&active)
                .with_context(|| format!("reading {}", active.display()))?;
            let current: Value = match serde_json::from_str(&text) {
                Ok(current) => current,
                Err(_) => return Ok(false),
            };
            let subnet = current
                .pointer("/plugins/0/ipam/ranges/0/0/subnet")
                .and_then(Value::as_str)
                .and_then(|subnet| subnet.parse::<ipnet::IpNet>().ok());
            let generated = subnet.is_some_and(|subnet| current == default_conflist(&subnet));
            if !generated || subnet == Some(*pod_cidr) {
                return Ok(false);
            }
        }
        Some(_) => return Ok(false),
    }
    let text = serde_json::to_string_pretty(&default_conflist(pod_cidr))?;
    crate::store::write_atomic(&ours, text.as_bytes())?;
    Ok(true)
}

/// Skiff's default network configuration list.
pub fn default_conflist(pod_cidr: &ipnet::IpNet) -> Value {
    let default_route = match pod_cidr {
        ipnet::IpNet::V4(_) => "0.0.0.0/0",
        ipnet::IpNet::V6(_) => "::/0",
    };
    json!({
        "cniVersion": "1.0.0",
        "name": "skiff",
        "plugins": [
            {
                "type": "bridge",
                "bridge": DEFAULT_BRIDGE,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": pod_cidr.to_string() }]],
                    "routes": [{ "dst": default_route }]
                }
            },
            { "type": "portmap", "capabilities": { "portMappings": true } }
        ]
    })
}

fn first_conflist(dir: &Path) -> anyhow::Result<Option<std::path::PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "conflist") && path.is_file() {
            found.push(path);
        }
    }
    found.sort();
    Ok(found.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_written_once_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let cidr: ipnet::IpNet = "10.99.0.0/16".parse().unwrap();
        ensure_default(dir.path(), &cidr).unwrap();
        let net = load(dir.path()).unwrap();
        assert_eq!(net.name, "skiff");
        assert_eq!(
            net.plugins[0]["ipam"]["ranges"][0][0]["subnet"],
            "10.99.0.0/16"
        );
        assert_eq!(net.plugins[1]["type"], "portmap");
    }

    #[test]
    fn pod_cidr_updates_only_skiffs_own_conflist() {
        let dir = tempfile::tempdir().unwrap();
        let subnet =
            |dir: &Path| load(dir).unwrap().plugins[0]["ipam"]["ranges"][0][0]["subnet"].clone();
        let cidr = |text: &str| -> ipnet::IpNet { text.parse().unwrap() };
        // No conflist yet: written (NetworkReady follows).
        assert!(update_default(dir.path(), &cidr("10.1.0.0/16")).unwrap());
        assert_eq!(subnet(dir.path()), "10.1.0.0/16");
        // Ours: rewritten for a new subnet, left alone for the same one.
        assert!(update_default(dir.path(), &cidr("10.2.0.0/24")).unwrap());
        assert!(!update_default(dir.path(), &cidr("10.2.0.0/24")).unwrap());
        assert_eq!(subnet(dir.path()), "10.2.0.0/24");
        // Ours but edited by the user: kept.
        let path = dir.path().join(DEFAULT_FILE);
        let edited = std::fs::read_to_string(&path)
            .unwrap()
            .replace("\"ipMasq\": true", "\"ipMasq\": false");
        std::fs::write(&path, &edited).unwrap();
        assert!(!update_default(dir.path(), &cidr("10.3.0.0/16")).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);
        // A user's conflist ahead of ours: nothing is written.
        let other = r#"{"cniVersion":"1.0.0","name":"user","plugins":[{"type":"bridge"}]}"#;
        std::fs::remove_file(&path).unwrap();
        std::fs::write(dir.path().join("05-user.conflist"), other).unwrap();
        assert!(!update_default(dir.path(), &cidr("10.4.0.0/16")).unwrap());
        assert!(!path.exists());
    }

    #[test]
    fn first_conflist_wins_and_default_is_not_added() {
        let dir = tempfile::tempdir().unwrap();
        let other = r#"{"cniVersion":"1.0.0","name":"b","plugins":[{"type":"bridge"}]}"#;
        std::fs::write(dir.path().join("20-b.conflist"), other).unwrap();
        std::fs::write(
            dir.path().join("05-a.conflist"),
            other.replace("\"b\"", "\"a\""),
        )
        .unwrap();
        ensure_default(dir.path(), &"10.0.0.0/8".parse().unwrap()).unwrap();
        assert!(!dir.path().join(DEFAULT_FILE).exists());
        assert_eq!(load(dir.path()).unwrap().name, "a");
    }
}
