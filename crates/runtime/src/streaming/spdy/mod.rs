//! SPDY/3.1, the multiplexing protocol the Kubernetes streaming endpoints speak after an
//! HTTP `Upgrade: SPDY/3.1`: [`frame`] (wire format), [`zlib`] (header compression),
//! [`session`] (streams over one connection, client or server side).

pub mod frame;
pub mod session;
pub mod zlib;

pub use frame::{Frame, Headers};
pub use session::{Role, Session, Stream, StreamReader, StreamWriter};

/// The `Upgrade` token of SPDY/3.1 connections.
pub const UPGRADE: &str = "SPDY/3.1";
