//! The CRI streaming server: exec, attach and port-forward over SPDY/3.1 (as the kubelet
//! proxies them) and WebSocket (the v4/v5 channel protocols of current kubectl).

mod backend;
mod runtime_backend;

pub use backend::{Input, Output, StreamBackend, Streams, TerminalSize};
