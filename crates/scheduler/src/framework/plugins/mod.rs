//! The in-tree plugins of the default profile (upstream `framework/plugins`), by their
//! upstream names, and the registry that builds them.

pub mod defaultbinder;
pub mod defaultpreemption;
pub mod helper;
pub mod imagelocality;
pub mod interpodaffinity;
pub mod nodeaffinity;
pub mod nodename;
pub mod nodeports;
pub mod noderesources;
pub mod nodeunschedulable;
pub mod nodevolumelimits;
pub mod podtopologyspread;
pub mod queuesort;
pub mod schedulinggates;
pub mod tainttoleration;
pub mod volumebinding;
pub mod volumerestrictions;
pub mod volumezone;

use super::runtime::Registry;

/// Every in-tree plugin by name (upstream `NewInTreeRegistry`).
pub fn in_tree_registry() -> Registry {
    let mut registry = Registry::new();
    registry.insert(defaultpreemption::NAME, defaultpreemption::new);
    registry.insert(queuesort::NAME, queuesort::new);
    registry.insert(schedulinggates::NAME, schedulinggates::new);
    registry.insert(nodeunschedulable::NAME, nodeunschedulable::new);
    registry.insert(nodename::NAME, nodename::new);
    registry.insert(nodeports::NAME, nodeports::new);
    registry.insert(imagelocality::NAME, imagelocality::new);
    registry.insert(defaultbinder::NAME, defaultbinder::new);
    registry.insert(noderesources::fit::NAME, noderesources::fit::new);
    registry.insert(
        noderesources::balanced_allocation::NAME,
        noderesources::balanced_allocation::new,
    );
    registry.insert(nodeaffinity::NAME, nodeaffinity::new);
    registry.insert(tainttoleration::NAME, tainttoleration::new);
    registry.insert(interpodaffinity::NAME, interpodaffinity::new);
    registry.insert(podtopologyspread::NAME, podtopologyspread::new);
    registry.insert(nodevolumelimits::NAME, nodevolumelimits::new);
    registry.insert(volumebinding::NAME, volumebinding::new);
    registry.insert(volumerestrictions::NAME, volumerestrictions::new);
    registry.insert(volumezone::NAME, volumezone::new);
    registry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{KubeSchedulerConfiguration, profile_specs};
    use crate::framework::runtime::{Framework, Handle, LogRecorder, Nominator};
    use crate::framework::types::PodInfo;
    use std::sync::Arc;

    struct NoNominations;
    impl Nominator for NoNominations {
        fn nominated_pods_for_node(&self, _: &str) -> Vec<Arc<PodInfo>> {
            Vec::new()
        }
        fn add_nominated_pod(&self, _: Arc<PodInfo>, _: &str) {}
        fn delete_nominated_pod(&self, _: &str) {}
    }

    /// The default KubeSchedulerConfiguration builds with the in-tree plugins: every
    /// plugin is registered and implements the points the configuration enables it at.
    #[test]
    fn default_profile_builds_from_the_registry() {
        let cfg = KubeSchedulerConfiguration::default();
        let specs = profile_specs(&cfg).expect("the default profile expands");
        for spec in &specs {
            let handle = Handle::new(
                None,
                Arc::default(),
                Arc::new(NoNominations),
                Arc::new(LogRecorder),
            );
            let fwk = Framework::new(spec, &in_tree_registry(), handle);
            assert!(fwk.is_ok(), "{:?}", fwk.err());
        }
    }
}
