//! `skiff runtime`: the CRI runtime alone, and the embedded runtime of `skiff kubelet`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use skiff_runtime::image::ImageManager;
use skiff_runtime::{Runtime, RuntimeConfig};

use crate::cli::{NetworkArgs, RuntimeArgs};
use crate::signals;

/// A started runtime: the RuntimeService and ImageService implementations.
pub struct Embedded {
    pub runtime: Arc<Runtime>,
    pub images: Arc<ImageManager>,
}

/// Flags that override the runtime's configuration file (each only when given).
#[derive(Debug, Clone, Copy)]
pub struct Overrides<'a> {
    /// `--root` / `--runtime-root`.
    pub root: Option<&'a Path>,
    /// `--state` / `--runtime-state`.
    pub state: Option<&'a Path>,
    /// The CNI flags.
    pub network: &'a NetworkArgs,
}

/// The runtime configuration: the TOML file `file` (defaults without one), then the
/// flags that were given. Errors name the file and the bad key.
pub fn config(file: Option<&Path>, flags: Overrides<'_>) -> anyhow::Result<RuntimeConfig> {
    let mut config = match file {
        Some(path) => {
            RuntimeConfig::from_toml_file(path).context("loading the runtime configuration")?
        }
        None => RuntimeConfig::default(),
    };
    if let Some(root) = flags.root {
        config.root = root.to_path_buf();
    }
    if let Some(state) = flags.state {
        config.state = state.to_path_buf();
    }
    if let Some(dir) = &flags.network.cni_conf_dir {
        config.cni_conf_dir = dir.clone();
    }
    if let Some(dirs) = &flags.network.cni_bin_dir {
        config.cni_bin_dirs = dirs.clone();
    }
    if let Some(cidr) = flags.network.pod_cidr {
        config.pod_cidr = cidr;
    }
    Ok(config)
}

/// Opens the runtime's state (recovering what a previous process left running).
pub fn open(config: RuntimeConfig) -> anyhow::Result<Embedded> {
    let root = config.root.clone();
    let images = Arc::new(
        ImageManager::new(&config)
            .with_context(|| format!("opening image store {}", root.display()))?,
    );
    let runtime = Runtime::new(config, images.clone()).context("starting the runtime")?;
    Ok(Embedded { runtime, images })
}

/// The CRI socket of a runtime whose volatile state is `state`.
pub fn socket_path(state: &Path) -> PathBuf {
    state.join("skiff.sock")
}

pub async fn run(args: RuntimeArgs) -> anyhow::Result<()> {
    let config = config(
        args.config.as_deref(),
        Overrides {
            root: args.root.as_deref(),
            state: args.state.as_deref(),
            network: &args.network,
        },
    )?;
    let socket = socket_path(&config.state);
    let embedded = open(config)?;
    tracing::info!(socket = %socket.display(), "serving CRI v1");
    skiff_runtime::server::serve(
        &socket,
        embedded.runtime,
        embedded.images,
        signals::shutdown(),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network(pod_cidr: Option<&str>) -> NetworkArgs {
        NetworkArgs {
            cni_conf_dir: None,
            cni_bin_dir: None,
            pod_cidr: pod_cidr.map(|c| c.parse().unwrap()),
        }
    }

    #[test]
    fn flags_override_the_file_only_when_given() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("runtime.toml");
        std::fs::write(
            &file,
            "root = \"/file/root\"\nstate = \"/file/state\"\n[cni]\nconf_dir = \"/file/cni\"\npod_cidr = \"10.1.0.0/16\"\n",
        )
        .unwrap();
        let net = network(Some("10.2.0.0/16"));
        let flags = Overrides {
            root: None,
            state: Some(Path::new("/flag/state")),
            network: &net,
        };
        let config = config(Some(&file), flags).unwrap();
        assert_eq!(config.root, Path::new("/file/root"), "from the file");
        assert_eq!(config.state, Path::new("/flag/state"), "flag wins");
        assert_eq!(config.cni_conf_dir, Path::new("/file/cni"));
        assert_eq!(config.pod_cidr.to_string(), "10.2.0.0/16");
        assert_eq!(config.cni_bin_dirs, RuntimeConfig::default().cni_bin_dirs);
    }

    #[test]
    fn a_bad_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, "rooot = \"/x\"\n").unwrap();
        let net = network(None);
        let flags = Overrides {
            root: None,
            state: None,
            network: &net,
        };
        let err = format!("{:#}", config(Some(&file), flags).unwrap_err());
        assert!(err.contains("bad.toml") && err.contains("rooot"), "{err}");
        let missing = config(Some(&dir.path().join("missing.toml")), flags);
        assert!(missing.is_err());
    }
}
