//! Informers and their caches (client-go `tools/cache`): a [`reflector`] LISTs and
//! WATCHes one kind and hands each change over as a [`Delta`]; a [`Store`] keeps the
//! objects by [`object_key`] for the readers (listers); a [`SharedInformer`] puts the
//! two together for any number of handlers, one per kind and process through the
//! [`SharedInformerFactory`].

pub mod reflector;
mod shared_informer;
mod store;

pub use reflector::{Delta, object_key};
pub use shared_informer::{Handler, SharedInformer, SharedInformerFactory, Watchable};
pub use store::Store;
