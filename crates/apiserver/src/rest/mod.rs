//! The generic REST layer (upstream `k8s.io/apiserver/pkg/endpoints/handlers` and
//! `registry/generic/registry`): routes `/api/v1/...` and `/apis/<group>/<version>/...`
//! to the verbs (get, list, watch, create, update, patch, delete, deletecollection) of
//! every kind in the [`Registry`], with the metadata rules, subresources (`status`,
//! `scale` and the kinds' own), content negotiation and Table output common to all
//! kinds.
//!
//! Modules, one job each: [`router`] (paths to calls), [`request`] (one call's context
//! and body decoding), [`negotiation`], [`params`], [`store`] (the generic store every
//! write goes through), [`meta`] (metadata rules), the verbs ([`get`], [`list`],
//! [`watch`], [`create`], [`update`], [`patch`], [`delete`]), [`scale`], [`table`],
//! [`predicate`] (selectors), [`continue_token`] and [`objects`] (the [`Objects`] the
//! kinds' hooks use).
//!
//! [`Objects`]: crate::registry::Objects

pub mod continue_token;
pub mod create;
pub mod delete;
pub mod duplicates;
pub mod get;
pub mod list;
pub mod managed;
pub mod meta;
pub mod negotiation;
pub mod object;
pub mod objects;
pub mod params;
pub mod patch;
pub mod predicate;
pub mod request;
pub mod router;
pub mod scale;
pub mod store;
pub mod stored_list;
pub mod table;
pub mod unstored;
pub mod update;
pub mod watch;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use skiff_api::schema::Schemas;
use tokio_util::sync::CancellationToken;

use crate::config::ClusterConfig;
use crate::registry::{LiveRegistry, Registry};
use crate::storage::Storage;

pub use router::router;

/// Everything the handlers share.
pub struct State {
    /// The kinds served now (custom resources come and go while the server runs).
    pub registry: Arc<LiveRegistry>,
    pub storage: Arc<dyn Storage>,
    pub config: ClusterConfig,
    /// The built-in kinds' OpenAPI schemas with patch strategies, for strategic merge
    /// patch (which custom resources do not support, as upstream).
    pub schemas: Schemas,
    /// How often an idle watch with `allowWatchBookmarks` gets a BOOKMARK (upstream: about
    /// a minute).
    pub bookmark_interval: Duration,
    /// Cancelled when the server begins to shut down: open watches end then, as
    /// upstream's do (its `ShutdownWatchTerminationGracePeriod` defaults to 0), so that
    /// the connections carrying them can close at once rather than at the drain timeout.
    pub shutting_down: CancellationToken,
}

impl State {
    /// The state of a server of `registry`'s kinds on `storage`.
    pub fn new(registry: Registry, storage: Arc<dyn Storage>, config: ClusterConfig) -> Self {
        let schemas = patch::schemas(&registry);
        State {
            registry: Arc::new(LiveRegistry::new(registry)),
            storage,
            config,
            schemas,
            bookmark_interval: Duration::from_secs(60),
            shutting_down: CancellationToken::new(),
        }
    }
}
