//! Skiff's scheduler: binds pending pods to nodes as kube-scheduler does with its default
//! profile.
//!
//! Informers feed the [`backend::cache`] (nodes and the pods on them, with pods assumed
//! between the bind decision and the bind's confirmation) and the
//! [`backend::queue`] (activeQ by priority, backoffQ, the unschedulable pool). One
//! scheduling cycle at a time pops a pod and runs the profile's [`framework`] plugins over
//! a snapshot of the cache; the binding cycle runs concurrently, through the API.

pub mod app;
pub mod backend;
pub mod config;
pub mod error;
pub mod eventhandlers;
pub mod framework;
pub mod informers;
pub mod metrics;
pub mod schedule_one;
pub mod scheduler;

pub use error::Error;
