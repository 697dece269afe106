//! A tiny blocking HTTP/1.1 server for the files of a private directory (`GET /<name>`),
//! e.g. pod manifests for the kubelet's `--manifest-url`. It records the head (request
//! line and headers) of every request it answers.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;

/// Largest request head read, bytes.
const MAX_HEAD: usize = 64 * 1024;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A file server on `127.0.0.1:<free port>`; dropping it stops the server and removes
/// its directory.
pub struct FileServer {
    dir: tempfile::TempDir,
    port: u16,
    stop: Arc<AtomicBool>,
    requests: Arc<Mutex<Vec<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl FileServer {
    /// Starts a server for a new empty directory. `GET /<name>` answers 200 with the
    /// file's bytes, 404 when there is no such file (names with `/` or `..` included);
    /// every response closes the connection.
    ///
    /// Errors: no free loopback port, or no temporary directory.
    pub fn start() -> anyhow::Result<FileServer> {
        let dir = tempfile::tempdir().context("file server directory")?;
        let listener = TcpListener::bind("127.0.0.1:0").context("file server listen")?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (root, stop, requests) = (dir.path().to_owned(), stop.clone(), requests.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        serve(stream, &root, &requests);
                    }
                }
            })
        };
        Ok(FileServer {
            dir,
            port,
            stop,
            requests,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:<port>/<name>`.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    /// Replaces file `name` atomically (written aside, then renamed), so a request never
    /// sees half of it.
    pub fn write(&self, name: &str, contents: &str) -> anyhow::Result<()> {
        let tmp = self.dir.path().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, self.dir.path().join(name))
            .with_context(|| format!("renaming {} into place", tmp.display()))
    }

    /// The heads of the requests answered so far, oldest first (lossy UTF-8).
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers one request on `stream` from the files of `root`.
fn serve(mut stream: TcpStream, root: &std::path::Path, requests: &Mutex<Vec<String>>) {
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let Some(head) = read_head(&mut stream) else {
        return;
    };
    let target = head
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .trim_start_matches('/');
    let name = target.split('?').next().unwrap_or("");
    let file = (!name.is_empty() && !name.contains('/') && !name.contains(".."))
        .then(|| PathBuf::from(root).join(name))
        .and_then(|path| std::fs::read(path).ok());
    if let Ok(mut log) = requests.lock() {
        log.push(head);
    }
    let (status, body) = match file {
        Some(body) => ("200 OK", body),
        None => ("404 Not Found", b"not found\n".to_vec()),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream
        .write_all(header.as_bytes())
        .and_then(|()| stream.write_all(&body));
}

/// Reads up to the blank line ending the request head; `None` on error or oversize.
fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).ok().filter(|n| *n > 0)?;
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            return None;
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}
