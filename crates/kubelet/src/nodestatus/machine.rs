//! The machine facts of the node status (what upstream's kubelet gets from cAdvisor's
//! `MachineInfo` and `VersionInfo`): machine ID, system UUID, boot ID, kernel version, OS
//! image and swap capacity. Read once at start, as upstream caches its machine info.

use std::path::Path;

/// The OS image reported when `/etc/os-release` has no `PRETTY_NAME` (cAdvisor's default).
const DEFAULT_OS_IMAGE: &str = "Linux";

/// The machine facts of `status.nodeInfo`. Unreadable values are empty strings, as
/// upstream reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MachineInfo {
    /// `/etc/machine-id` (else `/var/lib/dbus/machine-id`).
    pub machine_id: String,
    /// `/sys/class/dmi/id/product_uuid` (readable by root only on most machines).
    pub system_uuid: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// `/proc/sys/kernel/osrelease`, what `uname -r` prints.
    pub kernel_version: String,
    /// `PRETTY_NAME` of `/etc/os-release`, else `Linux`.
    pub os_image: String,
    /// `SwapTotal` of `/proc/meminfo` in bytes, `None` when unreadable.
    pub swap_capacity: Option<i64>,
}

impl MachineInfo {
    /// The facts of this machine.
    pub(crate) fn read() -> Self {
        Self::read_from(Path::new("/"))
    }

    /// The facts read from the files under `root` (`/` on a real machine).
    pub(crate) fn read_from(root: &Path) -> Self {
        let read = |path: &str| {
            std::fs::read_to_string(root.join(path))
                .map(|s| s.trim().to_owned())
                .unwrap_or_default()
        };
        let machine_id = Some(read("etc/machine-id"))
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| read("var/lib/dbus/machine-id"));
        let os_image = std::fs::read_to_string(root.join("etc/os-release"))
            .ok()
            .and_then(|release| pretty_name(&release))
            .unwrap_or_else(|| DEFAULT_OS_IMAGE.to_owned());
        let swap_capacity = std::fs::read_to_string(root.join("proc/meminfo"))
            .ok()
            .and_then(|info| {
                let line = info.lines().find(|l| l.starts_with("SwapTotal:"))?;
                let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
                kib.checked_mul(1024)
            });
        Self {
            machine_id,
            system_uuid: read("sys/class/dmi/id/product_uuid"),
            boot_id: read("proc/sys/kernel/random/boot_id"),
            kernel_version: read("proc/sys/kernel/osrelease"),
            os_image,
            swap_capacity,
        }
    }
}

/// `PRETTY_NAME` of an os-release file, unquoted.
fn pretty_name(os_release: &str) -> Option<String> {
    let value = os_release
        .lines()
        .find_map(|line| line.trim().strip_prefix("PRETTY_NAME="))?;
    let value = value.trim();
    let unquoted = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value);
    (!unquoted.is_empty()).then(|| unquoted.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, contents: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }

    #[test]
    fn reads_the_machine_facts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "etc/machine-id", "0123abcd\n");
        write(root, "sys/class/dmi/id/product_uuid", "4C4C4544-0042\n");
        write(root, "proc/sys/kernel/random/boot_id", "b0a1c2d3\n");
        write(root, "proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
        write(
            root,
            "etc/os-release",
            "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
        );
        write(
            root,
            "proc/meminfo",
            "MemTotal: 100 kB\nSwapTotal:  2048 kB\n",
        );
        assert_eq!(
            MachineInfo::read_from(root),
            MachineInfo {
                machine_id: "0123abcd".into(),
                system_uuid: "4C4C4544-0042".into(),
                boot_id: "b0a1c2d3".into(),
                kernel_version: "6.1.0-18-amd64".into(),
                os_image: "Debian GNU/Linux 12 (bookworm)".into(),
                swap_capacity: Some(2 << 20),
            }
        );
    }

    #[test]
    fn missing_files_give_empty_values_and_defaults() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "var/lib/dbus/machine-id", "dbus-id\n");
        let info = MachineInfo::read_from(dir.path());
        assert_eq!(info.machine_id, "dbus-id");
        assert_eq!(info.system_uuid, "");
        assert_eq!(info.os_image, "Linux");
        assert_eq!(info.swap_capacity, None);
        assert_eq!(pretty_name("PRETTY_NAME='Alpine'\n"), Some("Alpine".into()));
        assert_eq!(pretty_name("PRETTY_NAME=\n"), None);
    }
}
