//! Best-effort removal of everything a node may have left behind, so a failing test
//! does not leak containers, mounts, rules or interfaces into the next one.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::leftovers;
use crate::sys;

/// Removes, in order: runc containers under `<dir>/st/runc`, processes mentioning
/// `dir`, iptables rules of `network`, mounts under `dir`, the `bridge`, pod cgroups
/// and `/var/log/pods` directories of `uids`, the kubelet's `cgroup_root` (if any, and
/// never a hierarchy's root itself) in every hierarchy, and finally `dir`. Errors are
/// ignored.
pub(crate) fn force(
    dir: &Path,
    network: &str,
    bridge: &str,
    uids: &BTreeSet<String>,
    cgroup_root: Option<&str>,
) {
    runc_containers(&dir.join("st/runc"));
    let me = std::process::id();
    for (pid, _) in leftovers::processes_mentioning(dir) {
        if pid != me {
            sys::signal(pid, libc::SIGKILL);
        }
    }
    iptables(network);
    for mount in leftovers::mounts_under(dir).iter().rev() {
        if let Ok(path) = CString::new(mount.as_bytes()) {
            // SAFETY: `path` is a valid NUL-terminated string.
            unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
        }
    }
    quiet(Command::new("ip").args(["link", "del", bridge]));
    for cgroup in leftovers::pod_cgroups(uids) {
        remove_cgroup(&cgroup);
    }
    let cgroup_root = cgroup_root
        .map(|r| r.trim_matches('/'))
        .filter(|r| !r.is_empty());
    if let Some(root) = cgroup_root {
        for hierarchy in leftovers::cgroup_hierarchies() {
            remove_cgroup(&hierarchy.join(root));
        }
    }
    pod_log_dirs(uids);
    if std::fs::remove_dir_all(dir).is_err() {
        std::thread::sleep(Duration::from_millis(500));
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// `runc delete --force` for every container in the runc state root.
fn runc_containers(root: &Path) {
    if !root.exists() {
        return;
    }
    let Ok(out) = Command::new("runc")
        .arg("--root")
        .arg(root)
        .args(["list", "-q"])
        .output()
    else {
        return;
    };
    for id in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
    {
        quiet(
            Command::new("runc")
                .arg("--root")
                .arg(root)
                .args(["delete", "--force", id]),
        );
    }
}

/// Deletes the rules mentioning `network`, then the per-pod `CNI-*` chains and Skiff's
/// per-network `SKIFF-MASQ-*` chain they jumped to once nothing references them. Shared
/// `CNI-HOSTPORT-*` chains are kept.
fn iptables(network: &str) {
    let mut chains = BTreeSet::new();
    for (table, rule) in leftovers::iptables_rules(network) {
        let mut args = split_rule(&rule);
        if args.first().map(String::as_str) != Some("-A") {
            continue;
        }
        if let Some(i) = args.iter().position(|a| a == "-j")
            && let Some(target) = args.get(i + 1)
            && ((target.starts_with("CNI-") && !target.starts_with("CNI-HOSTPORT-"))
                || target.starts_with("SKIFF-MASQ-"))
        {
            chains.insert((table, target.clone()));
        }
        args[0] = "-D".into();
        quiet(
            Command::new("iptables")
                .args(["-w", "-t", table])
                .args(&args),
        );
    }
    for (table, chain) in chains {
        let jump = format!("-j {chain}");
        let referenced = leftovers::iptables_list(table)
            .iter()
            .any(|r| r.ends_with(&jump) || r.contains(&format!("{jump} ")));
        if !referenced {
            quiet(Command::new("iptables").args(["-w", "-t", table, "-F", &chain]));
            quiet(Command::new("iptables").args(["-w", "-t", table, "-X", &chain]));
        }
    }
}

/// Splits an `iptables -S` line into arguments: whitespace-separated, with `"..."`
/// quoting and `\` escapes.
fn split_rule(rule: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let (mut quoted, mut in_arg) = (false, false);
    let mut chars = rule.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                current.extend(chars.next());
                in_arg = true;
            }
            '"' => {
                quoted = !quoted;
                in_arg = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_arg {
                    args.push(std::mem::take(&mut current));
                    in_arg = false;
                }
            }
            c => {
                current.push(c);
                in_arg = true;
            }
        }
    }
    if in_arg {
        args.push(current);
    }
    args
}

/// Kills what is still in a cgroup, then removes it bottom-up.
fn remove_cgroup(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&entry.path());
            }
        }
    }
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        for pid in procs.lines().filter_map(|p| p.parse().ok()) {
            sys::signal(pid, libc::SIGKILL);
        }
    }
    for _ in 0..10 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Removes `/var/log/pods/<ns>_<name>_<uid>` for each of `uids`.
fn pod_log_dirs(uids: &BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir("/var/log/pods") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.as_bytes();
        if uids
            .iter()
            .any(|u| name.ends_with(format!("_{u}").as_bytes()))
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Runs a cleanup command, discarding its output and status.
fn quiet(cmd: &mut Command) {
    let _ = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_iptables_rules_with_quoted_comments() {
        let rule = r#"-A POSTROUTING -s 10.1.2.3/32 -m comment --comment "name: \"sk-1\" id: \"ab\"" -j CNI-x"#;
        assert_eq!(
            split_rule(rule),
            [
                "-A",
                "POSTROUTING",
                "-s",
                "10.1.2.3/32",
                "-m",
                "comment",
                "--comment",
                r#"name: "sk-1" id: "ab""#,
                "-j",
                "CNI-x"
            ]
        );
        assert_eq!(
            split_rule(r#"-A X --comment """#),
            ["-A", "X", "--comment", ""]
        );
    }
}
