//! The container process's user: image `User` and CRI security context resolved to numeric
//! IDs against the image's `/etc/passwd` and `/etc/group` (containerd's `WithUser`,
//! `WithUserID`, `WithUsername`, `WithAdditionalGIDs`).

use std::path::Path;

use k8s_cri::v1::LinuxContainerSecurityContext;

use crate::error::{Error, Result};

/// Numeric identity of a container process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User ID.
    pub uid: u32,
    /// Primary group ID.
    pub gid: u32,
    /// Supplementary groups: the primary group, the user's memberships in `/etc/group`,
    /// then the pod's supplemental groups, without repeats.
    pub additional_gids: Vec<u32>,
}

struct PasswdEntry {
    name: String,
    uid: u32,
    gid: u32,
}

struct GroupEntry {
    name: String,
    gid: u32,
    members: Vec<String>,
}

/// Resolves the user for `image_user` (`""`, `uid`, `name`, `uid:gid`, `name:group`) and
/// the CRI security context (`run_as_user`, `run_as_username`, `run_as_group`,
/// `supplemental_groups` take precedence) against the files of `rootfs`.
/// Errors with `InvalidArgument` when a name is not found, and with `Unknown` (containerd's
/// "user group is specified without user") when `run_as_group` comes without
/// `run_as_user` or `run_as_username`.
pub fn resolve(
    rootfs: &Path,
    image_user: &str,
    sc: Option<&LinuxContainerSecurityContext>,
) -> Result<User> {
    let passwd = parse_passwd(&read_image_file(rootfs, "/etc/passwd"));
    let groups = parse_group(&read_image_file(rootfs, "/etc/group"));
    let by_uid = |uid: u32| passwd.iter().find(|e| e.uid == uid);
    let by_name = |name: &str| {
        passwd.iter().find(|e| e.name == name).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "user {name:?} not found in the image's /etc/passwd"
            ))
        })
    };
    let (user_part, group_part) = match image_user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (image_user, None),
    };
    let sc_uid = sc.and_then(|sc| sc.run_as_user.as_ref()).map(|v| v.value);
    let sc_name = sc
        .map(|sc| sc.run_as_username.as_str())
        .filter(|n| !n.is_empty());
    if let Some(group) = sc.and_then(|sc| sc.run_as_group.as_ref())
        && sc_uid.is_none()
        && sc_name.is_none()
    {
        return Err(Error::Unknown(format!(
            "user group \"{}\" is specified without user",
            group.value
        )));
    }
    let (uid, mut gid, name) = if let Some(uid) = sc_uid {
        let uid = to_id(uid)?;
        let entry = by_uid(uid);
        (
            uid,
            entry.map_or(0, |e| e.gid),
            entry.map(|e| e.name.clone()),
        )
    } else if let Some(name) = sc_name {
        let entry = by_name(name)?;
        (entry.uid, entry.gid, Some(entry.name.clone()))
    } else if user_part.is_empty() {
        (0, 0, by_uid(0).map(|e| e.name.clone()))
    } else if let Ok(uid) = user_part.parse::<u32>() {
        let entry = by_uid(uid);
        (
            uid,
            entry.map_or(0, |e| e.gid),
            entry.map(|e| e.name.clone()),
        )
    } else {
        let entry = by_name(user_part)?;
        (entry.uid, entry.gid, Some(entry.name.clone()))
    };
    if let Some(group) = group_part.filter(|_| sc_uid.is_none() && sc_name.is_none()) {
        gid = match group.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => groups
                .iter()
                .find(|g| g.name == group)
                .map(|g| g.gid)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "group {group:?} not found in the image's /etc/group"
                    ))
                })?,
        };
    }
    if let Some(group) = sc.and_then(|sc| sc.run_as_group.as_ref()) {
        gid = to_id(group.value)?;
    }
    // The primary group first (containerd's `ensureAdditionalGids`, so `id` shows it among
    // the groups), then the user's memberships.
    let mut additional_gids: Vec<u32> = vec![gid];
    if let Some(name) = &name {
        additional_gids.extend(
            groups
                .iter()
                .filter(|g| g.members.iter().any(|m| m == name))
                .map(|g| g.gid),
        );
    }
    for extra in sc
        .map(|sc| sc.supplemental_groups.as_slice())
        .unwrap_or_default()
    {
        additional_gids.push(to_id(*extra)?);
    }
    let mut seen = std::collections::HashSet::new();
    additional_gids.retain(|g| seen.insert(*g));
    Ok(User {
        uid,
        gid,
        additional_gids,
    })
}

fn to_id(value: i64) -> Result<u32> {
    u32::try_from(value)
        .map_err(|_| Error::InvalidArgument(format!("invalid user or group ID {value}")))
}

/// Reads `rootfs/<path>` with symlinks resolved inside the rootfs, as containerd does
/// (an image's `/etc/passwd` may be a link, absolute or through a linked `/etc`); missing or
/// unreadable files read as empty.
fn read_image_file(rootfs: &Path, path: &str) -> String {
    super::root_path::read_in_root(rootfs, path).unwrap_or_default()
}

fn parse_passwd(text: &str) -> Vec<PasswdEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            Some(PasswdEntry {
                name: fields.first()?.to_string(),
                uid: fields.get(2)?.parse().ok()?,
                gid: fields.get(3)?.parse().ok()?,
            })
        })
        .collect()
}

fn parse_group(text: &str) -> Vec<GroupEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let members = fields
                .get(3)
                .map(|m| {
                    m.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            Some(GroupEntry {
                name: fields.first()?.to_string(),
                gid: fields.get(2)?.parse().ok()?,
                members,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_cri::v1::Int64Value;

    fn rootfs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::fs::write(
            dir.path().join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\nwww:x:33:34::/var/www:/bin/false\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("etc/group"),
            "root:x:0:\nwww-data:x:34:\nstaff:x:50:www,other\n",
        )
        .unwrap();
        dir
    }

    #[test]
    fn image_user_forms() {
        let dir = rootfs();
        let r = |u: &str| resolve(dir.path(), u, None).unwrap();
        assert_eq!(
            r(""),
            User {
                uid: 0,
                gid: 0,
                additional_gids: vec![0]
            }
        );
        assert_eq!(
            r("www"),
            User {
                uid: 33,
                gid: 34,
                additional_gids: vec![34, 50]
            }
        );
        assert_eq!(
            r("33"),
            User {
                uid: 33,
                gid: 34,
                additional_gids: vec![34, 50]
            }
        );
        assert_eq!(
            r("1000:1000"),
            User {
                uid: 1000,
                gid: 1000,
                additional_gids: vec![1000]
            }
        );
        assert_eq!(r("www:staff").gid, 50);
        assert!(matches!(
            resolve(dir.path(), "nobody", None),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn security_context_wins() {
        let dir = rootfs();
        let sc = LinuxContainerSecurityContext {
            run_as_user: Some(Int64Value { value: 33 }),
            run_as_group: Some(Int64Value { value: 7 }),
            supplemental_groups: vec![9, 50],
            ..Default::default()
        };
        assert_eq!(
            resolve(dir.path(), "root", Some(&sc)).unwrap(),
            User {
                uid: 33,
                gid: 7,
                additional_gids: vec![7, 50, 9]
            }
        );
        let sc = LinuxContainerSecurityContext {
            run_as_username: "www".into(),
            ..Default::default()
        };
        assert_eq!(resolve(dir.path(), "", Some(&sc)).unwrap().uid, 33);
        let group_only = LinuxContainerSecurityContext {
            run_as_group: Some(Int64Value { value: 7 }),
            ..Default::default()
        };
        assert!(matches!(
            resolve(dir.path(), "www", Some(&group_only)),
            Err(Error::Unknown(_))
        ));
    }

    /// `/etc/passwd` and `/etc/group` may be symlinks, absolute or through a linked `/etc`:
    /// they resolve inside the rootfs, never on the host.
    #[test]
    fn linked_passwd_and_group_resolve_inside_the_rootfs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("usr/lib/accounts")).unwrap();
        std::fs::write(
            root.join("usr/lib/accounts/passwd"),
            "app:x:1234:1235::/:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(
            root.join("usr/lib/accounts/group"),
            "app:x:1235:\nextra:x:77:app\n",
        )
        .unwrap();
        std::fs::create_dir(root.join("etc")).unwrap();
        std::os::unix::fs::symlink("/usr/lib/accounts/passwd", root.join("etc/passwd")).unwrap();
        std::os::unix::fs::symlink("../usr/lib/accounts/group", root.join("etc/group")).unwrap();
        let want = User {
            uid: 1234,
            gid: 1235,
            additional_gids: vec![1235, 77],
        };
        assert_eq!(resolve(root, "app", None).unwrap(), want);

        // The same through a linked `/etc`; a link out of the root stays inside it.
        let other = tempfile::tempdir().unwrap();
        let root = other.path();
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::write(root.join("real/passwd"), "app:x:1234:1235::/:/bin/sh\n").unwrap();
        std::fs::write(root.join("real/group"), "app:x:1235:\nextra:x:77:app\n").unwrap();
        std::os::unix::fs::symlink("/real", root.join("etc")).unwrap();
        assert_eq!(resolve(root, "app", None).unwrap(), want);
        std::fs::remove_file(root.join("real/passwd")).unwrap();
        std::os::unix::fs::symlink("../../../../etc/passwd", root.join("real/passwd")).unwrap();
        assert!(
            matches!(resolve(root, "root", None), Err(Error::InvalidArgument(_))),
            "the host's /etc/passwd was read"
        );
    }
}
