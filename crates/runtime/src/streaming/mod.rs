//! The CRI streaming server: exec, attach and port-forward over SPDY/3.1 (as the kubelet
//! proxies them) and WebSocket (the v4/v5 channel protocols of current kubectl).
//!
//! [`StreamServer`] binds the listener and caches the requests behind the URLs it hands
//! out; [`remotecommand`] and [`portforward`] run the sessions against a
//! [`StreamBackend`]. The wire formats ([`spdy`], [`channel`], [`protocol`]) are public
//! so that clients (the test kit) share them.

mod backend;
mod cache;
pub mod channel;
pub mod io;
mod portforward;
pub mod protocol;
mod remotecommand;
mod runtime_backend;
mod server;
pub mod spdy;
mod websocket;

pub use backend::{Input, Output, StreamBackend, Streams, TerminalSize};
pub use cache::{MAX_IN_FLIGHT, TOKEN_TTL};
pub use server::StreamServer;
