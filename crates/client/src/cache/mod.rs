//! Informers and their caches (client-go `tools/cache`): a [`reflector`] LISTs and
//! WATCHes one kind and hands each change over as a [`Delta`]; a [`Store`] keeps the
//! objects by [`object_key`] for the readers (listers).

pub mod reflector;
mod store;

pub use reflector::{Delta, object_key};
pub use store::Store;
