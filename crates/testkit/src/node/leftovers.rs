//! Finding what pods left on the host: mounts, IP reservations, veths, processes,
//! iptables rules, cgroups. Each function answers one question and never fails (an
//! unreadable source counts as empty).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const CGROUP_FS: &str = "/sys/fs/cgroup";
const CGROUP_DEPTH: usize = 5;
/// The tables where the bridge (ipMasq) and portmap plugins add rules.
pub(crate) const IPTABLES_TABLES: [&str; 2] = ["nat", "filter"];

/// Mount points under `dir`, in /proc/self/mountinfo order (parents before children).
pub(crate) fn mounts_under(dir: &Path) -> Vec<String> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let prefix = format!("{}/", dir.display());
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mountinfo)
        .filter(|m| m.starts_with(&prefix) || Path::new(m) == dir)
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|o| {
            std::str::from_utf8(o)
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// host-local reservations under its `dataDir` (`<network>/<ip>` files; `lock` and
/// `last_reserved_ip.*` are bookkeeping, not reservations).
pub(crate) fn ip_reservations(ipam_dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(networks) = std::fs::read_dir(ipam_dir) else {
        return found;
    };
    for network in networks.flatten() {
        let Ok(files) = std::fs::read_dir(network.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            if name == "lock" || name.starts_with("last_reserved_ip.") {
                continue;
            }
            let owner = std::fs::read_to_string(file.path()).unwrap_or_default();
            let owner = owner.split_whitespace().collect::<Vec<_>>().join(" ");
            found.push(format!(
                "ip reservation {}/{name} ({owner})",
                network.file_name().to_string_lossy()
            ));
        }
    }
    found
}

/// Interfaces enslaved to `bridge` (the pods' host-side veths).
pub(crate) fn veths(bridge: &str) -> Vec<String> {
    let Ok(out) = Command::new("ip")
        .args(["-o", "link", "show", "master", bridge])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|name| {
            format!(
                "veth {} on bridge {bridge}",
                name.split('@').next().unwrap_or(name)
            )
        })
        .collect()
}

/// `(pid, command line)` of processes whose command line mentions `dir`.
pub(crate) fn processes_mentioning(dir: &Path) -> Vec<(u32, String)> {
    let needle = dir.display().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<(u32, String)> = procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&raw)
                .replace('\0', " ")
                .trim()
                .to_string();
            cmd.contains(&needle).then_some((pid, cmd))
        })
        .collect();
    found.sort();
    found
}

/// The comment of Skiff's per-network masquerade rule, which is node set-up (kept while
/// the runtime runs, like the bridge), not something a pod left.
const NODE_MASQUERADE: &str = "skiff: masquerade for CNI network";

/// [`iptables_rules`] without the node's own masquerade rule: what the pods left.
pub(crate) fn pod_iptables_rules(network: &str) -> Vec<(&'static str, String)> {
    let mut rules = iptables_rules(network);
    rules.retain(|(_, rule)| !rule.contains(NODE_MASQUERADE));
    rules
}

/// `(table, rule)` for iptables rules (`-S` format) that mention `network` (the CNI
/// plugins put `name: "<network>"` in their rule comments, Skiff's masquerade rule
/// `network "<network>"`).
pub(crate) fn iptables_rules(network: &str) -> Vec<(&'static str, String)> {
    let needle = format!("\\\"{network}\\\"");
    let mut found = Vec::new();
    for table in IPTABLES_TABLES {
        for rule in iptables_list(table) {
            if rule.contains(&needle) {
                found.push((table, rule));
            }
        }
    }
    found
}

/// `iptables -t <table> -S` lines (empty on error).
pub(crate) fn iptables_list(table: &str) -> Vec<String> {
    Command::new("iptables")
        .args(["-w", "-t", table, "-S"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The cgroup hierarchies: `/sys/fs/cgroup` (v2) and each directory in it (v1).
pub(crate) fn cgroup_hierarchies() -> Vec<PathBuf> {
    let mut roots = vec![PathBuf::from(CGROUP_FS)];
    if let Ok(entries) = std::fs::read_dir(CGROUP_FS) {
        roots.extend(
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
    }
    roots
}

/// cgroup directories named after one of `uids` (`pod<uid>` for the cgroupfs driver,
/// `...pod<uid with _>.slice` for systemd) under `/sys/fs/cgroup/*/kubepods*` and, for
/// kubelets with a `--cgroup-root`, `/sys/fs/cgroup/*/<root>/kubepods*`.
pub(crate) fn pod_cgroups(uids: &BTreeSet<String>) -> Vec<PathBuf> {
    let names: Vec<(String, String)> = uids
        .iter()
        .map(|u| {
            (
                format!("pod{u}"),
                format!("pod{}.slice", u.replace('-', "_")),
            )
        })
        .collect();
    let mut found = Vec::new();
    if names.is_empty() {
        return found;
    }
    for root in cgroup_hierarchies() {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("kubepods") {
                walk(&entry.path(), CGROUP_DEPTH, &names, &mut found);
            } else if let Ok(children) = std::fs::read_dir(entry.path()) {
                for child in children.flatten() {
                    if child.file_name().to_string_lossy().starts_with("kubepods") {
                        walk(&child.path(), CGROUP_DEPTH, &names, &mut found);
                    }
                }
            }
        }
    }
    found
}

fn walk(dir: &Path, depth: usize, names: &[(String, String)], found: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if names
        .iter()
        .any(|(plain, slice)| name == *plain || name.ends_with(slice.as_str()))
    {
        found.push(dir.to_path_buf());
        return;
    }
    if depth == 0 {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            walk(&entry.path(), depth - 1, names, found);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_mountinfo_octal() {
        assert_eq!(unescape_mountinfo(r"/tmp/a\040b\\c"), r"/tmp/a b\\c");
        assert_eq!(unescape_mountinfo(r"/tmp/a\134b"), r"/tmp/a\b");
    }
}
