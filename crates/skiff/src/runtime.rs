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

/// Opens the runtime's state (recovering what a previous process left running).
pub fn open(root: &Path, state: &Path, network: &NetworkArgs) -> anyhow::Result<Embedded> {
    let config = RuntimeConfig {
        root: root.to_path_buf(),
        state: state.to_path_buf(),
        cni_conf_dir: network.cni_conf_dir.clone(),
        cni_bin_dirs: network.cni_bin_dir.clone(),
        pod_cidr: network.pod_cidr,
        ..RuntimeConfig::default()
    };
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
    let embedded = open(&args.root, &args.state, &args.network)?;
    let socket = socket_path(&args.state);
    tracing::info!(socket = %socket.display(), "serving CRI v1");
    skiff_runtime::server::serve(
        &socket,
        embedded.runtime,
        embedded.images,
        signals::shutdown(),
    )
    .await
}
