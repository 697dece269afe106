//! A TCP proxy in front of a server (a registry) that can slow down or stall what the
//! server sends, to test download timeouts and concurrent downloads.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use anyhow::Context;

/// Size of one forwarded chunk, bytes.
const CHUNK: usize = 16 * 1024;

/// What the proxy does to the server's responses (per connection).
#[derive(Debug, Clone, Copy, Default)]
pub struct Throttle {
    /// Forward at most this many bytes per second; `None`: as fast as possible.
    pub bytes_per_second: Option<u64>,
    /// After this many bytes of a connection's responses, forward nothing more but keep
    /// the connection open (a server that stops sending); `None`: never stall.
    pub stall_after: Option<u64>,
}

/// A running proxy on `127.0.0.1:<free port>`; dropping it closes every connection.
pub struct Proxy {
    host: String,
    stop: Arc<AtomicBool>,
    /// Both ends of every connection, shut down on drop.
    connections: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    /// Starts a proxy forwarding to `target` (`IP:PORT`) with `throttle` applied to what
    /// `target` sends back.
    ///
    /// Errors: no free loopback port.
    pub fn start(target: &str, throttle: Throttle) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").context("proxy listen")?;
        let host = listener.local_addr()?.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let target = target.to_string();
        {
            let stop = stop.clone();
            let connections = connections.clone();
            thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(server) = TcpStream::connect(&target) else {
                        continue;
                    };
                    if let Err(err) = forward(client, server, throttle, &connections) {
                        eprintln!("proxy to {target}: {err:#}");
                    }
                }
            });
        }
        Ok(Proxy {
            host,
            stop,
            connections,
        })
    }

    /// `IP:PORT` of the proxy, the registry part of image references through it.
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// Starts copying both ways between `client` and `server` on two threads.
fn forward(
    client: TcpStream,
    server: TcpStream,
    throttle: Throttle,
    connections: &Mutex<Vec<TcpStream>>,
) -> anyhow::Result<()> {
    {
        let mut open = connections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        open.push(client.try_clone()?);
        open.push(server.try_clone()?);
    }
    let (client_in, server_out) = (client.try_clone()?, server.try_clone()?);
    thread::spawn(move || copy(client_in, server_out, Throttle::default()));
    thread::spawn(move || copy(server, client, throttle));
    Ok(())
}

/// Copies `from` to `to` with `throttle` until either side closes; a stalled copy keeps
/// `to` open without writing.
fn copy(mut from: TcpStream, mut to: TcpStream, throttle: Throttle) {
    let mut buffer = vec![0u8; CHUNK];
    let mut sent: u64 = 0;
    loop {
        let want = match throttle.stall_after {
            Some(limit) if sent >= limit => {
                // Hold the connection open until the proxy is dropped.
                while from.read(&mut buffer).is_ok_and(|n| n > 0) {}
                return;
            }
            Some(limit) => CHUNK.min(usize::try_from(limit - sent).unwrap_or(CHUNK)),
            None => CHUNK,
        };
        let n = match from.read(&mut buffer[..want]) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
        sent += n as u64;
        if let Some(rate) = throttle.bytes_per_second.filter(|rate| *rate > 0) {
            thread::sleep(Duration::from_secs_f64(n as f64 / rate as f64));
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(&self.host);
        let open = self
            .connections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for stream in open.iter() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}
