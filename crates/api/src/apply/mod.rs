//! Server-side apply and field ownership (`metadata.managedFields`), as kube-apiserver
//! does them (upstream `k8s.io/apimachinery/pkg/util/managedfields` over
//! `sigs.k8s.io/structured-merge-diff`).
//!
//! - [`fieldpath`]: paths, sets of paths and their `FieldsV1` JSON;
//! - [`types`]: type information from OpenAPI schemas with the `x-kubernetes-*`
//!   extensions, for built-in kinds ([`TypeSource::Definition`]) and custom resources
//!   ([`TypeSource::Structural`]);
//! - [`typed`]: field sets of values, comparison, the apply merge, removal;
//! - [`managed`]: managedFields entries decoded and encoded;
//! - [`manager`]: the [`FieldManager`] of a kind: ownership of every write
//!   ([`FieldManager::update`]) and server-side apply ([`FieldManager::apply`]) with
//!   conflicts, `before-first-apply`, the client-side-apply upgrade and the cap on update
//!   managers.
//!
//! ```
//! use serde_json::json;
//! use skiff_api::apply::{FieldManager, TypeSource};
//!
//! let schema = json!({"type": "object", "properties": {
//!     "apiVersion": {"type": "string"}, "kind": {"type": "string"},
//!     "metadata": {"type": "object"},
//!     "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}});
//! let manager = FieldManager::new(TypeSource::Structural(&schema), "example.com/v1", "Widget");
//! let config = json!({"apiVersion": "example.com/v1", "kind": "Widget",
//!     "metadata": {"name": "w"}, "spec": {"replicas": 1}});
//! let now = chrono::Utc::now();
//! let created = manager.apply(&manager.empty_object(), &config, "alice", false, now).unwrap();
//! assert_eq!(created["spec"]["replicas"], 1);
//! assert_eq!(created["metadata"]["managedFields"][0]["manager"], "alice");
//! ```

pub mod fieldpath;
pub mod managed;
pub mod manager;
pub mod typed;
pub mod types;

pub use fieldpath::{Path, PathElement, Set};
pub use managed::{Managed, ManagerId, Operation};
pub use manager::{ApplyError, Conflict, FieldManager};
pub use types::TypeSource;

#[cfg(test)]
mod tests;
