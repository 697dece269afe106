//! The node's CNI configuration: one bridge network on a /24 of 10.240.0.0/12.

use std::path::Path;
use std::process::Command;

use anyhow::bail;
use serde_json::json;

use crate::sys;

/// A random `10.<240..255>.<0..255>.0/24` not already on a host interface.
pub(crate) fn free_subnet() -> anyhow::Result<String> {
    let out = Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()?;
    let used = String::from_utf8_lossy(&out.stdout).into_owned();
    for _ in 0..64 {
        let [a, b] = sys::random_bytes::<2>()?;
        let prefix = format!("10.{}.{}.", 240 + (a & 0x0f), b);
        if !used.contains(&format!("inet {prefix}")) {
            return Ok(format!("{prefix}0/24"));
        }
    }
    bail!("no free /24 in 10.240.0.0/12")
}

/// Writes `<conf_dir>/10-test.conflist`: bridge (gateway, masquerade, host-local IPAM
/// with a default route, state in `ipam_dir`) and portmap.
pub(crate) fn write_conflist(
    conf_dir: &Path,
    network: &str,
    bridge: &str,
    subnet: &str,
    ipam_dir: &Path,
) -> anyhow::Result<()> {
    let conflist = json!({
        "cniVersion": "1.0.0",
        "name": network,
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": true,
                "ipMasq": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": subnet}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": ipam_dir,
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    });
    std::fs::write(
        conf_dir.join("10-test.conflist"),
        serde_json::to_vec_pretty(&conflist)?,
    )?;
    Ok(())
}
