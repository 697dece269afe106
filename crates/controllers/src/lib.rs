//! Skiff's controller manager (kube-controller-manager's role): controllers that watch
//! objects through shared informers and drive the cluster toward what they ask for.
//!
//! Each controller follows upstream's shape: informer event handlers put keys
//! (`namespace/name`) in a rate-limited work queue ([`skiff_client::workqueue`]);
//! workers take one key at a time and sync it, and a failed sync is retried with backoff.
//! [`controller_utils`] holds what several controllers share: expectations, pod
//! creation from a template, adoption and release of pods, the deletion ranking, status
//! writes, the start of a controller and its workers; [`controller_history`] the
//! ControllerRevisions of DaemonSets and StatefulSets.

pub mod app;
pub mod certificates;
pub mod controller_history;
pub mod controller_utils;
pub mod cronjob;
pub mod daemon;
pub mod deployment;
pub mod disruption;
pub mod endpoint;
pub mod endpointslice;
pub(crate) mod endpointslice_util;
pub mod error;
pub mod garbagecollector;
pub mod job;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
mod owner_handlers;
pub mod podgc;
pub mod replicaset;
pub mod resourcequota;
pub mod rootcacertpublisher;
pub mod serviceaccount;
pub mod statefulset;
pub mod ttlafterfinished;

pub use error::Error;
