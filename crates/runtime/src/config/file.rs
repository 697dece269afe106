//! The TOML configuration file (`skiff runtime --config FILE`).
//!
//! ```toml
//! root = "/var/lib/skiff/runtime"
//! state = "/run/skiff"
//! pull_progress_timeout = "5m"
//!
//! [runtimes.crun]
//! binary = "/usr/bin/crun"
//!
//! [cni]
//! conf_dir = "/etc/cni/net.d"
//! bin_dirs = ["/usr/lib/cni"]
//! pod_cidr = "10.88.0.0/16"
//!
//! [stream]
//! address = "127.0.0.1"
//! port = 0
//!
//! [registries."registry.example:5000"]
//! mirrors = ["http://mirror.example:5000"]
//! plain_http = true
//! username = "user"
//! password = "secret"
//! ```
//!
//! Unknown keys and bad values are errors naming the key, so a typo never silently
//! falls back to a default.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde::Deserialize;

use super::{Credentials, DEFAULT_HANDLER, Handler, RegistryHost, RuntimeConfig};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    root: Option<PathBuf>,
    state: Option<PathBuf>,
    pull_progress_timeout: Option<String>,
    #[serde(default)]
    runtimes: BTreeMap<String, FileHandler>,
    #[serde(default)]
    cni: FileCni,
    #[serde(default)]
    stream: FileStream,
    #[serde(default)]
    registries: BTreeMap<String, FileRegistry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHandler {
    binary: PathBuf,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCni {
    conf_dir: Option<PathBuf>,
    bin_dirs: Option<Vec<PathBuf>>,
    pod_cidr: Option<ipnet::IpNet>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileStream {
    address: Option<IpAddr>,
    port: Option<u16>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRegistry {
    #[serde(default)]
    mirrors: Vec<String>,
    #[serde(default)]
    plain_http: bool,
    username: Option<String>,
    password: Option<String>,
    identity_token: Option<String>,
}

impl RuntimeConfig {
    /// Reads a TOML configuration file over the defaults.
    ///
    /// Errors: the file cannot be read, is not TOML, has an unknown key, or a value is
    /// invalid (bad duration, CIDR, address, mirror URL, handler binary, half-given
    /// credentials); the message names the file and the key.
    pub fn from_toml_file(path: &Path) -> anyhow::Result<RuntimeConfig> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::from_toml(&text).with_context(|| format!("in {}", path.display()))
    }

    /// Parses TOML configuration text over the defaults (see [`Self::from_toml_file`]).
    pub fn from_toml(text: &str) -> anyhow::Result<RuntimeConfig> {
        let file: File = toml::from_str(text).map_err(|err| anyhow::anyhow!("{err}"))?;
        let mut config = RuntimeConfig::default();
        if let Some(root) = file.root {
            config.root = root;
        }
        if let Some(state) = file.state {
            config.state = state;
        }
        if let Some(timeout) = file.pull_progress_timeout {
            config.pull_progress_timeout = humantime::parse_duration(&timeout)
                .with_context(|| format!("pull_progress_timeout: bad duration {timeout:?}"))?;
        }
        for (name, handler) in file.runtimes {
            if name.is_empty() || handler.binary.as_os_str().is_empty() {
                bail!("runtimes.{name:?}: a handler needs a name and a binary");
            }
            config.handlers.insert(
                name,
                Handler {
                    binary: handler.binary,
                },
            );
        }
        debug_assert!(config.handlers.contains_key(DEFAULT_HANDLER));
        if let Some(dir) = file.cni.conf_dir {
            config.cni_conf_dir = dir;
        }
        if let Some(dirs) = file.cni.bin_dirs {
            config.cni_bin_dirs = dirs;
        }
        if let Some(cidr) = file.cni.pod_cidr {
            config.pod_cidr = cidr;
        }
        if let Some(address) = file.stream.address {
            config.stream.address = address;
        }
        if let Some(port) = file.stream.port {
            config.stream.port = port;
        }
        for (host, registry) in file.registries {
            let parsed =
                registry_host(&host, registry).with_context(|| format!("registries.{host:?}"))?;
            config.registries.insert(host, parsed);
        }
        Ok(config)
    }
}

fn registry_host(host: &str, file: FileRegistry) -> anyhow::Result<RegistryHost> {
    if host.is_empty() || host.contains('/') {
        bail!("a registry key is a host[:port], without scheme or path");
    }
    for mirror in &file.mirrors {
        let rest = mirror
            .strip_prefix("http://")
            .or_else(|| mirror.strip_prefix("https://"))
            .with_context(|| format!("mirror {mirror:?} must start with http:// or https://"))?;
        if rest.is_empty() || rest.trim_end_matches('/').contains('/') {
            bail!("mirror {mirror:?} must be scheme://host[:port]");
        }
    }
    let auth = match (file.username, file.password, file.identity_token) {
        (None, None, None) => None,
        (Some(username), Some(password), None) => Some(Credentials::Basic { username, password }),
        (None, None, Some(token)) => Some(Credentials::IdentityToken(token)),
        _ => bail!("give username and password together, or identity_token alone"),
    };
    Ok(RegistryHost {
        mirrors: file.mirrors,
        plain_http: file.plain_http,
        auth,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_the_defaults() {
        let config = RuntimeConfig::from_toml("").unwrap();
        assert_eq!(config.root, RuntimeConfig::default().root);
        assert_eq!(config.handler("").unwrap().binary, PathBuf::from("runc"));
        assert_eq!(
            config.handler("crun").unwrap().binary,
            PathBuf::from("crun")
        );
        assert!(config.handler("kata").is_none());
    }

    #[test]
    fn full_file() {
        let config = RuntimeConfig::from_toml(
            r#"
            root = "/r"
            pull_progress_timeout = "30s"
            [runtimes.kata]
            binary = "/opt/kata"
            [cni]
            pod_cidr = "10.1.0.0/24"
            [stream]
            port = 10010
            [registries."reg:5000"]
            mirrors = ["http://m:5000"]
            plain_http = true
            username = "u"
            password = "p"
            "#,
        )
        .unwrap();
        assert_eq!(config.root, PathBuf::from("/r"));
        assert_eq!(config.pull_progress_timeout.as_secs(), 30);
        assert_eq!(
            config.handler("kata").unwrap().binary,
            PathBuf::from("/opt/kata")
        );
        assert_eq!(config.pod_cidr.to_string(), "10.1.0.0/24");
        assert_eq!(config.stream.port, 10010);
        let registry = &config.registries["reg:5000"];
        assert!(registry.plain_http);
        assert_eq!(
            registry.auth,
            Some(Credentials::Basic {
                username: "u".into(),
                password: "p".into()
            })
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            ("rooot = \"/r\"", "rooot"),
            ("pull_progress_timeout = \"soon\"", "pull_progress_timeout"),
            ("[cni]\npod_cidr = \"10.1.0.0\"", "pod_cidr"),
            ("[registries.\"r\"]\nmirrors = [\"m:5000\"]", "registries"),
            ("[registries.\"r\"]\nusername = \"u\"", "registries"),
            ("[runtimes.x]\nbinary = \"\"", "runtimes"),
        ];
        for (text, key) in cases {
            let err = format!("{:#}", RuntimeConfig::from_toml(text).unwrap_err());
            assert!(err.contains(key), "{text:?} gave {err:?}");
        }
    }
}
