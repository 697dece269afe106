//! apps/v1: defaulting (`pkg/apis/apps/v1/defaults.go`) and validation
//! (`pkg/apis/apps/validation`) of deployments, replicasets, daemonsets, statefulsets and
//! controllerrevisions.

pub mod controller_revision;
pub mod daemon_set;
pub mod deployment;
pub mod replica_set;
pub mod stateful_set;

mod template;

use crate::field::{ErrorList, FieldError, Path};

/// `cannot be decremented` for a status collision count lower than before
/// (`apivalidation.IsDecremented`).
fn collision_count_not_decremented(new: Option<i32>, old: Option<i32>, status: &Path) -> ErrorList {
    match old {
        Some(old) if new.is_none_or(|n| n < old) => vec![FieldError::invalid(
            &status.child("collisionCount"),
            new.unwrap_or(0),
            "cannot be decremented",
        )],
        _ => Vec::new(),
    }
}

/// `cannot be greater than status.replicas` for each named count above `replicas`.
fn not_above_replicas(replicas: i32, counts: &[(&str, i32)], status: &Path) -> ErrorList {
    counts
        .iter()
        .filter(|(_, count)| *count > replicas)
        .map(|(name, count)| {
            FieldError::invalid(
                &status.child(name),
                *count,
                "cannot be greater than status.replicas",
            )
        })
        .collect()
}

/// `cannot be greater than <ready_name>` when more replicas are available than ready.
fn available_not_above_ready(
    available: i32,
    ready: i32,
    ready_name: &str,
    status: &Path,
) -> ErrorList {
    if available > ready {
        vec![FieldError::invalid(
            &status.child("availableReplicas"),
            available,
            format!("cannot be greater than {ready_name}"),
        )]
    } else {
        Vec::new()
    }
}
