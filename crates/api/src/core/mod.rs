//! The core/v1 kinds: upstream's defaulting (`pkg/apis/core/v1/defaults.go`) and
//! validation (`pkg/apis/core/validation`), shared by the API server and the kubelet
//! (static pods go through the same rules as pods posted to the API server).

mod checks;
pub mod config;
pub mod image;
pub mod namespace;
pub mod node;
pub mod persistent_volume;
pub mod pod;
pub mod replication_controller;
pub mod resources;
pub mod scheduling_predicates;
pub mod service;

pub use checks::{
    invalid_each, non_negative, one_of, validate_dns1123_label, validate_dns1123_subdomain,
};
