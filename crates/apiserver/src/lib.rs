//! Skiff's API server: the Kubernetes REST API that kubectl, client-go, kube-rs and the
//! Python client use, stored in SQLite (default) or etcd v3.
//!
//! A request flows: TLS + [`authn`] → [`rest`] (routing, verbs, watch, patch,
//! negotiation) → [`registry`] (the kind's [`registry::Strategy`]: defaulting,
//! validation, status/scale rules, tables) → [`storage`] (revisioned key-value store and
//! the watch cache). [`discovery`] and [`openapi`] describe what [`registry`] serves.

// ApiError carries a whole metav1.Status (details and causes), as upstream's StatusError;
// every fallible API path returns it by value.
#![allow(clippy::result_large_err)]

pub mod aggregator;
pub mod apf;
pub mod authn;
pub mod bootstrap;
pub mod config;
pub mod discovery;
pub mod error;
pub mod health;
pub mod openapi;
pub mod proxy;
pub mod registry;
pub mod rest;
pub mod server;
pub mod storage;

pub use error::ApiError;
