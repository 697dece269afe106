//! The CRI container log format (kubelet `pkg/kubelet/kuberuntime/logs`):
//! `<RFC3339Nano timestamp> <stdout|stderr> <F|P> <content>\n`, one record per line of
//! output; lines longer than [`MAX_LINE`] are split into partial (`P`) records ending with
//! a full (`F`) one, as containerd's CRI plugin does. Output that ends without a newline
//! ends with a partial record, as containerd's `redirectLogs` writes it, so readers (the
//! kubelet's `kubectl logs`, its `FallbackToLogsOnError` termination message) add nothing.

use std::io::{self, Read, Write};
use std::sync::Mutex;

/// Longest content of one log record, in bytes (containerd's `max_container_log_line_size`).
pub const MAX_LINE: usize = 16 * 1024;

/// Which output stream a record came from.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    /// The container's stdout.
    Stdout,
    /// The container's stderr.
    Stderr,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// A log file shared by the stdout and stderr copiers; each record is one locked write.
pub struct Sink<W: Write> {
    out: Mutex<W>,
}

impl<W: Write> Sink<W> {
    /// Wraps `out` (the log file, opened for appending).
    pub fn new(out: W) -> Self {
        Self {
            out: Mutex::new(out),
        }
    }

    /// Replaces the output: the log file reopened after rotation (ReopenContainerLog).
    /// Returns the previous output.
    pub fn replace(&self, out: W) -> W {
        let mut current = self
            .out
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::replace(&mut *current, out)
    }

    fn record(&self, stream: Stream, partial: bool, content: &[u8]) -> io::Result<()> {
        let ts = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        let tag = if partial { "P" } else { "F" };
        let mut line = Vec::with_capacity(content.len() + 48);
        line.extend_from_slice(format!("{ts} {} {tag} ", stream.as_str()).as_bytes());
        line.extend_from_slice(content);
        line.push(b'\n');
        let mut out = self
            .out
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        out.write_all(&line)
    }

    /// Writes one line, split into records of at most [`MAX_LINE`] bytes; the last record
    /// is full unless `ends_partial` (output that ended without a newline).
    fn line(&self, stream: Stream, line: &[u8], ends_partial: bool) -> io::Result<()> {
        let mut rest = line;
        while rest.len() > MAX_LINE {
            self.record(stream, true, &rest[..MAX_LINE])?;
            rest = &rest[MAX_LINE..];
        }
        self.record(stream, ends_partial, rest)
    }

    /// Copies `src` until EOF into records. Output without a final newline is written as a
    /// partial record at EOF.
    pub fn copy(&self, stream: Stream, mut src: impl Read) -> io::Result<()> {
        let mut pending = Vec::new();
        let mut buf = vec![0u8; 8192];
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            pending.extend_from_slice(&buf[..n]);
            let mut start = 0;
            while let Some(pos) = pending[start..].iter().position(|&b| b == b'\n') {
                self.line(stream, &pending[start..start + pos], false)?;
                start += pos + 1;
            }
            while pending.len() - start > MAX_LINE {
                self.record(stream, true, &pending[start..start + MAX_LINE])?;
                start += MAX_LINE;
            }
            pending.drain(..start);
        }
        if !pending.is_empty() {
            self.line(stream, &pending, true)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(out: &[u8]) -> Vec<(String, String, String)> {
        String::from_utf8_lossy(out)
            .lines()
            .map(|line| {
                let mut parts = line.splitn(4, ' ');
                let ts = parts.next().unwrap();
                assert!(
                    chrono::DateTime::parse_from_rfc3339(ts).is_ok(),
                    "bad timestamp {ts}"
                );
                let (s, t, c) = (
                    parts.next().unwrap(),
                    parts.next().unwrap(),
                    parts.next().unwrap_or(""),
                );
                (s.to_string(), t.to_string(), c.to_string())
            })
            .collect()
    }

    #[test]
    fn lines_and_trailing_partial() {
        let sink = Sink::new(Vec::new());
        sink.copy(Stream::Stderr, &b"hello\n\nworld"[..]).unwrap();
        let out = sink.out.into_inner().unwrap();
        let recs = parse(&out);
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0], ("stderr".into(), "F".into(), "hello".into()));
        assert_eq!(recs[1].2, "");
        // No newline at the end: a partial record, as containerd writes it.
        assert_eq!(recs[2], ("stderr".into(), "P".into(), "world".into()));
    }

    #[test]
    fn replaced_output_gets_later_records() {
        let sink = Sink::new(Vec::new());
        sink.copy(Stream::Stdout, &b"before\n"[..]).unwrap();
        let old = sink.replace(Vec::new());
        sink.copy(Stream::Stdout, &b"after\n"[..]).unwrap();
        assert_eq!(parse(&old)[0].2, "before");
        let new = parse(&sink.out.into_inner().unwrap());
        assert_eq!(new.len(), 1);
        assert_eq!(new[0].2, "after");
    }

    #[test]
    fn long_lines_are_split() {
        let sink = Sink::new(Vec::new());
        let mut input = vec![b'a'; MAX_LINE * 2 + 10];
        input.push(b'\n');
        input.extend_from_slice(&vec![b'b'; MAX_LINE]);
        input.push(b'\n');
        sink.copy(Stream::Stdout, &input[..]).unwrap();
        let recs = parse(&sink.out.into_inner().unwrap());
        let tags: Vec<_> = recs.iter().map(|r| (r.1.as_str(), r.2.len())).collect();
        assert_eq!(
            tags,
            vec![("P", MAX_LINE), ("P", MAX_LINE), ("F", 10), ("F", MAX_LINE)]
        );
    }
}
