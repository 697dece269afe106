//! The `info` maps of verbose Status, ContainerStatus and PodSandboxStatus replies: JSON
//! documents under the key `"info"` (objects) and `"config"` (runtime), shaped after
//! containerd's CRI plugin so that `crictl inspect*` shows the same kind of detail.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::container::Container;
use crate::runtime::Runtime;
use crate::sandbox::{Sandbox, ns};

/// Name of the snapshotter reported for writable layers.
const SNAPSHOTTER: &str = "overlayfs";

/// One JSON document in an `info` map.
fn entry(key: &str, value: &Value) -> HashMap<String, String> {
    HashMap::from([(key.to_string(), value.to_string())])
}

impl Runtime {
    /// Status `info`: `"config"` (the effective configuration; registry credentials are
    /// left out), `"cniconfig"` (the active network list) and `"lastCNILoadStatus"`.
    pub(crate) fn status_info(&self) -> HashMap<String, String> {
        let config = &self.config;
        let handlers: serde_json::Map<String, Value> = config
            .handlers
            .iter()
            .map(|(name, handler)| (name.clone(), json!({ "binary": handler.binary })))
            .collect();
        let registries: serde_json::Map<String, Value> = config
            .registries
            .iter()
            .map(|(host, settings)| {
                let value = json!({
                    "mirrors": settings.mirrors,
                    "plainHttp": settings.plain_http,
                    "hasCredentials": settings.auth.is_some(),
                });
                (host.clone(), value)
            })
            .collect();
        let document = json!({
            "root": config.root,
            "state": config.state,
            "defaultRuntimeName": crate::config::DEFAULT_HANDLER,
            "runtimes": handlers,
            "cni": {
                "confDir": self.cni.conf_dir(),
                "binDirs": config.cni_bin_dirs,
            },
            "cgroupDriver": "cgroupfs",
            "streamServerAddress": config.stream.address.to_string(),
            "streamServerPort": config.stream.port.to_string(),
            "registries": registries,
            "imagePullProgressTimeout": humantime::format_duration(config.pull_progress_timeout).to_string(),
            "snapshotter": SNAPSHOTTER,
        });
        let mut info = entry("config", &document);
        match self.cni.network() {
            Ok(network) => {
                info.insert(
                    "cniconfig".into(),
                    json!({ "name": network.name, "cniVersion": network.cni_version, "plugins": network.plugins }).to_string(),
                );
                info.insert("lastCNILoadStatus".into(), "OK".into());
            }
            Err(err) => {
                info.insert("lastCNILoadStatus".into(), format!("{err:#}"));
            }
        }
        info
    }

    /// ContainerStatus verbose `info`: `{"info": {...}}` with the sandbox ID, the init
    /// PID, the snapshot, the OCI runtime, the CRI config and the OCI runtime spec.
    pub(crate) fn container_info(&self, container: &Container) -> HashMap<String, String> {
        let spec = std::fs::read(self.bundle(&container.id).join("config.json"))
            .ok()
            .and_then(|data| serde_json::from_slice::<Value>(&data).ok())
            .unwrap_or(Value::Null);
        let document = json!({
            "sandboxID": container.sandbox_id,
            "pid": container.init.map(|p| p.pid).unwrap_or(0),
            "snapshotKey": container.id,
            "snapshotter": SNAPSHOTTER,
            "runtimeType": self.runc(&container.runtime_handler).binary,
            "config": container.config,
            "runtimeSpec": spec,
        });
        entry("info", &document)
    }

    /// PodSandboxStatus verbose `info`: `{"info": {...}}` with the pinned namespaces, the
    /// runtime handler, the pod cgroup, the CRI config and the CNI result. There is no
    /// pause process (`pid` 0) unless the pod shares its PID namespace.
    pub(crate) fn sandbox_info(&self, sandbox: &Sandbox) -> HashMap<String, String> {
        let dir = self.sandbox_paths(&sandbox.id).ns;
        let namespaces: serde_json::Map<String, Value> = sandbox
            .pinned
            .iter()
            .map(|&kind| {
                (
                    kind.proc_name().to_string(),
                    json!(ns::pin_path(&dir, kind)),
                )
            })
            .collect();
        let document = json!({
            "pid": 0,
            "namespaces": namespaces,
            "netNamespaceClosed": !sandbox.ready,
            "runtimeHandler": sandbox.runtime_handler,
            "cgroupParent": sandbox.cgroup_parent,
            "config": sandbox.config,
            "cniResult": sandbox.network.as_ref().map(|n| &n.result),
        });
        entry("info", &document)
    }
}
