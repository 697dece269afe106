//! Registry credentials from a pod's `imagePullSecrets` (upstream
//! `pkg/credentialprovider` `BasicDockerKeyring` and `secrets.MakeDockerKeyring`): the
//! `kubernetes.io/dockerconfigjson` (`.dockerconfigjson`, `{"auths": {...}}`) and
//! `kubernetes.io/dockercfg` (`.dockercfg`, the entries alone) Secrets, matched against
//! the repository to pull by registry host (globs allowed, `*.example.com`), port and path
//! prefix. The matching credentials go to the runtime as CRI `AuthConfig`s, tried in
//! order.

use std::collections::HashMap;

use k8s_cri::v1::AuthConfig;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;
use skiff_api::core::image::split_tag_and_digest;

/// Secret type and key of a `~/.docker/config.json` Secret.
const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// Secret type and key of a legacy `~/.dockercfg` Secret.
const DOCKERCFG_TYPE: &str = "kubernetes.io/dockercfg";
const DOCKERCFG_KEY: &str = ".dockercfg";
/// The registry of unqualified images, and the key its credentials are stored under
/// (upstream `defaultRegistryHost`).
const DEFAULT_REGISTRY: &str = "docker.io";
const DEFAULT_REGISTRY_KEY: &str = "index.docker.io";

/// One entry of a docker config (upstream `DockerConfigEntry`); `auth` is base64
/// `user:password` and fills in the username and password.
#[derive(Debug, Default, Deserialize)]
struct DockerConfigEntry {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    auth: String,
}

#[derive(Debug, Default, Deserialize)]
struct DockerConfigJson {
    #[serde(default)]
    auths: HashMap<String, DockerConfigEntry>,
}

/// Decodes standard base64 (with or without padding); `None` on invalid input.
fn decode_base64(input: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes: Vec<u8> = input.trim_end_matches('=').bytes().collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut acc = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            acc |= value(*c)? << (18 - 6 * i);
        }
        let decoded = acc.to_be_bytes();
        out.extend_from_slice(&decoded[1..chunk.len()]);
    }
    Some(out)
}

/// A schemeless registry location: host (with port) and path.
struct Location<'a> {
    host: &'a str,
    port: &'a str,
    path: &'a str,
}

/// Splits `value` (with or without `http(s)://`) into host, port and path.
fn parse_location(value: &str) -> Location<'_> {
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .unwrap_or(value);
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            (host, port)
        }
        _ => (authority, ""),
    };
    Location { host, port, path }
}

/// Shell-style match of one host label against a glob label (`*`, `?`).
fn glob_match(glob: &[u8], text: &[u8]) -> bool {
    match (glob.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob_match(&glob[1..], text) || (!text.is_empty() && glob_match(glob, &text[1..]))
        }
        (Some(b'?'), Some(_)) => glob_match(&glob[1..], &text[1..]),
        (Some(g), Some(t)) if g == t => glob_match(&glob[1..], &text[1..]),
        _ => false,
    }
}

/// True when the registry `glob` (a keyring key) covers `target` (upstream
/// `URLsMatch`): as many host labels, each matching, the same port, and the target's
/// path starting with the glob's.
fn urls_match(glob: &str, target: &str) -> bool {
    let (glob, target) = (parse_location(glob), parse_location(target));
    let glob_labels: Vec<&str> = glob.host.split('.').collect();
    let target_labels: Vec<&str> = target.host.split('.').collect();
    glob_labels.len() == target_labels.len()
        && glob_labels
            .iter()
            .zip(&target_labels)
            .all(|(g, t)| glob_match(g.as_bytes(), t.as_bytes()))
        && glob.port == target.port
        && target.path.starts_with(glob.path)
}

/// The repository an image is pulled from, without tag or digest, with the default
/// registry and `library/` filled in (upstream `parsers.ParseImageName`):
/// `busybox:1` → `docker.io/library/busybox`.
pub fn repository_to_pull(image: &str) -> String {
    let without_digest = image.split_once('@').map_or(image, |(name, _)| name);
    let name = match split_tag_and_digest(without_digest) {
        (Some(_), _) => without_digest
            .rsplit_once(':')
            .map_or(without_digest, |(name, _)| name),
        _ => without_digest,
    };
    match name.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            name.to_owned()
        }
        Some(_) => format!("{DEFAULT_REGISTRY}/{name}"),
        None => format!("{DEFAULT_REGISTRY}/library/{name}"),
    }
}

/// Credentials by registry location (upstream `BasicDockerKeyring`).
#[derive(Debug, Default)]
pub struct DockerKeyring {
    /// Keys, most specific first (reverse lexical order, as upstream).
    index: Vec<String>,
    creds: HashMap<String, Vec<AuthConfig>>,
}

impl DockerKeyring {
    /// The keyring of `secrets` (upstream `MakeDockerKeyring`): docker config Secrets
    /// add their entries; other Secrets and unparsable contents are skipped.
    pub fn from_pull_secrets(secrets: &[&Secret]) -> Self {
        let mut keyring = Self::default();
        for secret in secrets {
            let data = secret.data.as_ref();
            let get = |key: &str| data.and_then(|d| d.get(key)).map(|b| b.0.as_slice());
            let entries = match secret.type_.as_deref() {
                Some(DOCKER_CONFIG_JSON_TYPE) => get(DOCKER_CONFIG_JSON_KEY)
                    .and_then(|b| serde_json::from_slice::<DockerConfigJson>(b).ok())
                    .map(|c| c.auths),
                Some(DOCKERCFG_TYPE) => {
                    get(DOCKERCFG_KEY).and_then(|b| serde_json::from_slice(b).ok())
                }
                _ => None,
            };
            let mut entries: Vec<(String, DockerConfigEntry)> =
                entries.into_iter().flatten().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (location, entry) in entries {
                keyring.add(&location, entry);
            }
        }
        keyring.index.sort();
        keyring.index.dedup();
        keyring.index.reverse();
        keyring
    }

    fn add(&mut self, location: &str, entry: DockerConfigEntry) {
        let (mut username, mut password) = (entry.username, entry.password);
        if username.is_empty()
            && password.is_empty()
            && let Some(decoded) = decode_base64(&entry.auth)
            && let Some((user, pass)) = String::from_utf8_lossy(&decoded).split_once(':')
        {
            username = user.to_owned();
            password = pass.to_owned();
        }
        let parsed = parse_location(location);
        // `/v1/` and `/v2/` paths stand for the registry itself.
        let path = parsed
            .path
            .strip_prefix("/v1")
            .or_else(|| parsed.path.strip_prefix("/v2"))
            .filter(|p| p.starts_with('/'))
            .unwrap_or(parsed.path);
        let host = match parsed.port {
            "" => parsed.host.to_owned(),
            port => format!("{}:{port}", parsed.host),
        };
        let key = if path.is_empty() || path == "/" {
            host
        } else {
            format!("{host}{path}")
        };
        self.creds.entry(key.clone()).or_default().push(AuthConfig {
            username,
            password,
            ..Default::default()
        });
        self.index.push(key);
    }

    /// The credentials for `repository` (from [`repository_to_pull`]), most specific
    /// location first; for the default registry, those stored under `index.docker.io`
    /// when nothing else matches (upstream `Lookup`).
    pub fn lookup(&self, repository: &str) -> Vec<AuthConfig> {
        let found: Vec<AuthConfig> = self
            .index
            .iter()
            .filter(|key| urls_match(key, repository))
            .flat_map(|key| self.creds.get(key).cloned().unwrap_or_default())
            .collect();
        if !found.is_empty() {
            return found;
        }
        if repository.starts_with(&format!("{DEFAULT_REGISTRY}/")) {
            return self
                .creds
                .get(DEFAULT_REGISTRY_KEY)
                .cloned()
                .unwrap_or_default();
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(type_: &str, key: &str, content: &str) -> Secret {
        Secret {
            type_: Some(type_.into()),
            data: Some([(key.to_owned(), ByteString(content.as_bytes().to_vec()))].into()),
            ..Default::default()
        }
    }

    fn users(auths: &[AuthConfig]) -> Vec<(&str, &str)> {
        auths
            .iter()
            .map(|a| (a.username.as_str(), a.password.as_str()))
            .collect()
    }

    #[test]
    fn repositories_are_normalized() {
        assert_eq!(repository_to_pull("busybox"), "docker.io/library/busybox");
        assert_eq!(repository_to_pull("me/app:1.0"), "docker.io/me/app");
        assert_eq!(
            repository_to_pull("reg.example.com:5000/team/app:v1@sha256:abc"),
            "reg.example.com:5000/team/app"
        );
        assert_eq!(repository_to_pull("localhost/app"), "localhost/app");
    }

    #[test]
    fn base64_decodes() {
        assert_eq!(decode_base64("dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(decode_base64("YQ==").unwrap(), b"a");
        assert_eq!(decode_base64("YWI").unwrap(), b"ab");
        assert!(decode_base64("!!").is_none());
    }

    #[test]
    fn credentials_match_by_host_port_and_path() {
        let json = r#"{"auths": {
            "https://reg.example.com": {"username": "host", "password": "h"},
            "reg.example.com/team": {"auth": "dGVhbTp0"},
            "*.corp.io": {"username": "glob", "password": "g"},
            "reg.example.com:5000": {"username": "port", "password": "p"},
            "https://index.docker.io/v1/": {"username": "hub", "password": "d"}
        }}"#;
        let config = secret(DOCKER_CONFIG_JSON_TYPE, DOCKER_CONFIG_JSON_KEY, json);
        let legacy = secret(
            DOCKERCFG_TYPE,
            DOCKERCFG_KEY,
            r#"{"legacy.example.com": {"username": "old", "password": "o"}}"#,
        );
        let opaque = secret("Opaque", DOCKER_CONFIG_JSON_KEY, json);
        let keyring = DockerKeyring::from_pull_secrets(&[&config, &legacy, &opaque]);
        let lookup = |image: &str| keyring.lookup(&repository_to_pull(image));
        assert_eq!(
            users(&lookup("reg.example.com/team/app:1")),
            vec![("team", "t"), ("host", "h")]
        );
        assert_eq!(users(&lookup("reg.example.com/other")), vec![("host", "h")]);
        assert_eq!(
            users(&lookup("reg.example.com:5000/x")),
            vec![("port", "p")]
        );
        assert_eq!(users(&lookup("a.corp.io/x")), vec![("glob", "g")]);
        assert!(lookup("a.b.corp.io/x").is_empty());
        assert_eq!(users(&lookup("legacy.example.com/x")), vec![("old", "o")]);
        assert_eq!(users(&lookup("busybox")), vec![("hub", "d")]);
        assert!(lookup("elsewhere.io/x").is_empty());
    }
}
