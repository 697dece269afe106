//! Why a pod fits no node, in upstream's words (upstream `framework.Diagnosis`,
//! `FitError`): `0/3 nodes are available: 1 node(s) had untolerated taint
//! {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. preemption: 0/3 nodes
//! are available: 3 No preemption victims found for incoming pod.`

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::interface::NodeToStatus;

/// The start of the message (upstream `NoNodeAvailableMsg`).
pub const NO_NODE_AVAILABLE_MSG: &str = "0/%v nodes are available";

/// What the failed cycle learned (upstream `Diagnosis`).
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    /// The status of each node filtered out.
    pub node_to_status: NodeToStatus,
    /// The plugins that rejected the pod (to requeue it on their events).
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// The plugins that answered Pending.
    pub pending_plugins: BTreeSet<&'static str>,
    /// A PreFilter plugin's rejection message, when PreFilter rejected the pod.
    pub pre_filter_msg: String,
    /// The PostFilter plugins' message (preemption's), when they ran.
    pub post_filter_msg: String,
}

/// No node fits the pod (upstream `FitError`).
#[derive(Debug, Clone)]
pub struct FitError {
    /// The number of nodes in the snapshot.
    pub num_all_nodes: usize,
    /// Why.
    pub diagnosis: Diagnosis,
}

/// Counts each reason over `nodes` statuses (with `absent` for the nodes without one)
/// and renders upstream's sorted histogram, `"2 Insufficient cpu, 1 node(s) ..."`.
pub fn reasons_histogram<'a>(
    statuses: impl Iterator<Item = &'a super::status::Status>,
) -> Vec<String> {
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for status in statuses {
        for reason in status.reasons() {
            *reasons.entry(reason.as_str()).or_default() += 1;
        }
    }
    let mut out: Vec<String> = reasons
        .into_iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    out.sort();
    out
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        let d = &self.diagnosis;
        if !d.pre_filter_msg.is_empty() {
            write!(f, " {}.", d.pre_filter_msg)?;
        } else {
            let statuses = &d.node_to_status;
            let absent = self.num_all_nodes.saturating_sub(statuses.statuses.len());
            let absent_status = statuses
                .absent
                .iter()
                .cycle()
                .take(if statuses.absent.is_some() { absent } else { 0 });
            let histogram = reasons_histogram(statuses.statuses.values().chain(absent_status));
            if !histogram.is_empty() {
                write!(f, " {}.", histogram.join(", "))?;
            }
        }
        if !d.post_filter_msg.is_empty() {
            write!(f, " {}", d.post_filter_msg)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::status::Status;

    #[test]
    fn message_as_upstream() {
        let mut d = Diagnosis::default();
        d.node_to_status.statuses.insert(
            "a".into(),
            Status::unresolvable(
                "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }",
            ),
        );
        for n in ["b", "c"] {
            d.node_to_status
                .statuses
                .insert(n.into(), Status::unschedulable("Insufficient cpu"));
        }
        d.post_filter_msg =
            "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
                .into();
        let e = FitError {
            num_all_nodes: 3,
            diagnosis: d,
        };
        assert_eq!(
            e.to_string(),
            "0/3 nodes are available: 1 node(s) had untolerated taint \
             {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. preemption: 0/3 \
             nodes are available: 3 No preemption victims found for incoming pod."
        );
    }

    #[test]
    fn prefilter_message_replaces_the_histogram() {
        let mut d = Diagnosis {
            pre_filter_msg: "1 node(s) didn't match Pod's node affinity/selector".into(),
            ..Default::default()
        };
        d.node_to_status.absent = Some(Status::unresolvable("x"));
        let e = FitError {
            num_all_nodes: 2,
            diagnosis: d,
        };
        assert_eq!(
            e.to_string(),
            "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
        );
    }
}
