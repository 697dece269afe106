//! Reading CRI container log files (upstream `pkg/kubelet/kuberuntime/logs`).
//!
//! A CRI log line is `<RFC 3339 timestamp> <stdout|stderr> <P|F> <content>\n`: `P` marks a
//! partial line continued by the next entry, `F` a full one. Reading joins partial
//! entries into one line (one timestamp prefix), honours `since`, `tail` (counted in
//! file lines from the end), `limit_bytes` (bytes written) and, with `follow`, keeps
//! reading new lines — across rotation, when the file is replaced or truncated — until
//! the container stops running or the reader goes away.
//!
//! The files the container log manager rotated away (`<log>.<time>`, `<log>.<time>.gz`,
//! [`crate::logs::rotated_logs`]) are read before the live file, so a rotation loses no
//! line from `kubectl logs`; `tail` counts lines across them.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use bytes::Bytes;
use chrono::{DateTime, FixedOffset};
use tokio::sync::mpsc;

/// How often a followed file is checked for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// How often, while no line arrives, a follow checks that the container still runs
/// (upstream `stateCheckPeriod` is 5 s; shorter so that a stopped follow ends soon).
const STATE_CHECK: Duration = Duration::from_secs(1);

/// What to read (upstream `LogOptions`, from the v1 `PodLogOptions`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogOptions {
    /// Skip entries older than this.
    pub since: Option<DateTime<FixedOffset>>,
    /// Start this many file lines before the end (`None`: from the start).
    pub tail: Option<u64>,
    /// Stop after writing this many bytes.
    pub limit_bytes: Option<u64>,
    /// Prefix each line with its RFC 3339 timestamp.
    pub timestamps: bool,
    /// Keep reading new lines.
    pub follow: bool,
}

/// One parsed entry of a CRI log file.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// When the runtime wrote it.
    pub timestamp: DateTime<FixedOffset>,
    /// `stdout` or `stderr`.
    pub stream: String,
    /// True for a `P` (partial) entry: the line continues in the next entry.
    pub partial: bool,
    /// The content, without the trailing newline.
    pub content: Vec<u8>,
}

/// Parses one CRI log line (without or with its trailing `\n`).
///
/// Errors (as a message) when the timestamp, stream or tag is missing or invalid.
pub fn parse_line(line: &[u8]) -> Result<LogEntry> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut fields = line.splitn(4, |b| *b == b' ');
    let timestamp = fields.next().unwrap_or_default();
    let timestamp = std::str::from_utf8(timestamp)
        .ok()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .ok_or_else(|| {
            Error::Log(format!(
                "unexpected timestamp in log line {:?}",
                lossy(line)
            ))
        })?;
    let stream = match fields.next() {
        Some(b"stdout") => "stdout",
        Some(b"stderr") => "stderr",
        _ => {
            return Err(Error::Log(format!(
                "unexpected stream type in log line {:?}",
                lossy(line)
            )));
        }
    };
    let partial = match fields.next() {
        Some(b"P") => true,
        Some(b"F") => false,
        _ => {
            return Err(Error::Log(format!(
                "unexpected tag in log line {:?}",
                lossy(line)
            )));
        }
    };
    Ok(LogEntry {
        timestamp,
        stream: stream.to_owned(),
        partial,
        content: fields.next().unwrap_or_default().to_vec(),
    })
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A timestamp as Go's RFC3339Nano prints it (fraction without trailing zeros, `Z` for
/// UTC), the form upstream writes with `timestamps=true`.
pub fn format_timestamp(t: &DateTime<FixedOffset>) -> String {
    let base = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = format!("{:09}", t.timestamp_subsec_nanos());
    let fraction = nanos.trim_end_matches('0');
    let offset = if t.offset().local_minus_utc() == 0 {
        "Z".to_owned()
    } else {
        t.format("%:z").to_string()
    };
    if fraction.is_empty() {
        format!("{base}{offset}")
    } else {
        format!("{base}.{fraction}{offset}")
    }
}

/// Turns entries into output bytes: timestamps, partial-line joining, `since` and the
/// byte limit.
#[derive(Debug)]
pub struct LogFormatter {
    options: LogOptions,
    /// The previous written entry ended its line (the next one starts a new line).
    at_line_start: bool,
    written: u64,
}

impl LogFormatter {
    /// A formatter for `options`.
    pub fn new(options: LogOptions) -> Self {
        Self {
            options,
            at_line_start: true,
            written: 0,
        }
    }

    /// The byte limit was reached: nothing more will be written.
    pub fn done(&self) -> bool {
        self.options
            .limit_bytes
            .is_some_and(|limit| self.written >= limit)
    }

    /// The bytes to write for `entry` (empty when skipped or past the limit).
    pub fn format(&mut self, entry: &LogEntry) -> Vec<u8> {
        if self.done() {
            return Vec::new();
        }
        if self
            .options
            .since
            .is_some_and(|since| entry.timestamp < since)
        {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(entry.content.len() + 40);
        if self.options.timestamps && self.at_line_start {
            out.extend_from_slice(format_timestamp(&entry.timestamp).as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(&entry.content);
        if !entry.partial {
            out.push(b'\n');
        }
        self.at_line_start = !entry.partial;
        if let Some(limit) = self.options.limit_bytes {
            let room = limit.saturating_sub(self.written);
            out.truncate(usize::try_from(room).unwrap_or(usize::MAX));
        }
        self.written += out.len() as u64;
        out
    }
}

/// The byte offset where the last `n` lines of `file` start (upstream
/// `tail.FindTailLineStartIndex`): the file's length for 0, its start when it has
/// fewer lines.
pub fn tail_start(file: &mut std::fs::File, n: u64) -> std::io::Result<u64> {
    const BLOCK: u64 = 64 * 1024;
    let len = file.seek(SeekFrom::End(0))?;
    if n == 0 {
        return Ok(len);
    }
    let mut end = len;
    let mut newlines = 0u64;
    // A final newline ends the last line, it does not start an empty one.
    let mut skip_last = true;
    let mut buf = vec![0u8; BLOCK as usize];
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        for (i, b) in chunk.iter().enumerate().rev() {
            if *b != b'\n' {
                skip_last = false;
                continue;
            }
            if skip_last {
                skip_last = false;
                continue;
            }
            newlines += 1;
            if newlines == n {
                return Ok(start + i as u64 + 1);
            }
        }
        end = start;
    }
    Ok(0)
}

/// Streams the logs of `path` into `out` as [`LogOptions`] say. With `follow`, waits
/// for new lines and follows rotation (the path replaced by a new file, or the file
/// truncated) while `running()` is true. Lines that do not parse are skipped (with a
/// warning). Returns when done, when `out` is closed, or on an I/O error.
pub async fn read_logs<F, Fut>(
    path: PathBuf,
    options: LogOptions,
    out: mpsc::Sender<Bytes>,
    mut running: F,
) -> std::io::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let follow = options.follow;
    let tail = options.tail;
    let mut formatter = LogFormatter::new(options);
    let mut reader = open_at(&path, tail)?;
    // Lines the live file lacks for `tail` come from the rotated files, oldest first.
    let wanted = match tail {
        Some(n) => n.saturating_sub(reader.lines_left()?),
        None => u64::MAX,
    };
    if wanted > 0 {
        let history = {
            let path = path.clone();
            let live = reader.inode;
            tokio::task::spawn_blocking(move || rotated_lines(&path, wanted, live))
                .await
                .map_err(std::io::Error::other)??
        };
        for raw in history {
            if !emit(&mut formatter, &out, &raw, &path).await {
                return Ok(());
            }
        }
    }
    let mut line = Vec::new();
    let mut last_state_check = tokio::time::Instant::now();
    loop {
        // Read what is there.
        loop {
            let n = reader.file.read_until(b'\n', &mut line)?;
            if n == 0 || !line.ends_with(b"\n") {
                // An incomplete last line: keep it and read the rest later.
                break;
            }
            if !emit(&mut formatter, &out, &line, &path).await {
                return Ok(());
            }
            line.clear();
        }
        if !follow {
            return Ok(());
        }
        // Rotated (a new file at the path) or truncated: continue with the new content.
        if reader.replaced(&path) {
            reader = open_at(&path, None)?;
            line.clear();
            continue;
        }
        if out.is_closed() {
            return Ok(());
        }
        if last_state_check.elapsed() >= STATE_CHECK {
            if !running().await {
                // Drain what the container wrote just before it stopped.
                let mut rest = Vec::new();
                reader.file.read_to_end(&mut rest)?;
                line.extend_from_slice(&rest);
                for raw in line.split_inclusive(|b| *b == b'\n') {
                    if let Ok(entry) = parse_line(raw) {
                        let bytes = formatter.format(&entry);
                        if !bytes.is_empty() && out.send(Bytes::from(bytes)).await.is_err() {
                            return Ok(());
                        }
                    }
                }
                return Ok(());
            }
            last_state_check = tokio::time::Instant::now();
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}

/// Formats and sends one raw log line (a line that does not parse is skipped with a
/// warning); false when nothing more is to be sent (the reader left, the limit reached).
async fn emit(
    formatter: &mut LogFormatter,
    out: &mpsc::Sender<Bytes>,
    raw: &[u8],
    path: &Path,
) -> bool {
    match parse_line(raw) {
        Ok(entry) => {
            let bytes = formatter.format(&entry);
            if !bytes.is_empty() && out.send(Bytes::from(bytes)).await.is_err() {
                return false;
            }
            !formatter.done()
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "skipping log line");
            true
        }
    }
}

/// The last `wanted` lines (all for `u64::MAX`) of the rotated files of the log `path`,
/// oldest first; compressed ones are decompressed. A file that vanished meanwhile (the
/// log manager removed it) is skipped, and so is the file of inode `live`: the live file
/// the reader has open, rotated since it was opened.
fn rotated_lines(path: &Path, wanted: u64, live: u64) -> std::io::Result<Vec<Vec<u8>>> {
    let mut lines: std::collections::VecDeque<Vec<u8>> = std::collections::VecDeque::new();
    for file in crate::logs::rotated_logs(path).iter().rev() {
        let opened = match std::fs::File::open(file) {
            Ok(opened) => opened,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if opened.metadata()?.ino() == live {
            continue;
        }
        let reader: Box<dyn BufRead> = if file.extension().is_some_and(|e| e == "gz") {
            Box::new(BufReader::new(flate2::read::GzDecoder::new(opened)))
        } else {
            Box::new(BufReader::new(opened))
        };
        // This file's lines, then the newer ones already collected.
        let mut own: std::collections::VecDeque<Vec<u8>> = std::collections::VecDeque::new();
        for line in reader.split(b'\n') {
            own.push_back(line?);
            if own.len() as u64 > wanted {
                own.pop_front();
            }
        }
        let room = wanted.saturating_sub(lines.len() as u64);
        while own.len() as u64 > room {
            own.pop_front();
        }
        own.extend(lines);
        lines = own;
        if lines.len() as u64 >= wanted {
            break;
        }
    }
    Ok(lines.into_iter().collect())
}

/// An open log file and the identity it was opened with.
struct OpenLog {
    file: BufReader<std::fs::File>,
    inode: u64,
}

impl OpenLog {
    /// Lines from the read position to the end (a last line without a newline counts);
    /// the position is kept.
    fn lines_left(&mut self) -> std::io::Result<u64> {
        let start = self.file.stream_position()?;
        let mut count = 0u64;
        let mut last = b'\n';
        let mut buf = [0u8; 64 * 1024];
        loop {
            let n = self.file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            count += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
            last = buf[n - 1];
        }
        if last != b'\n' {
            count += 1;
        }
        self.file.seek(SeekFrom::Start(start))?;
        Ok(count)
    }

    /// The path now names another file, or the file shrank below the read position.
    fn replaced(&mut self, path: &Path) -> bool {
        let Ok(meta) = std::fs::metadata(path) else {
            return false;
        };
        if meta.ino() != self.inode {
            return true;
        }
        self.file
            .stream_position()
            .is_ok_and(|position| meta.len() < position)
    }
}

fn open_at(path: &Path, tail: Option<u64>) -> std::io::Result<OpenLog> {
    let mut file = std::fs::File::open(path)?;
    let inode = file.metadata()?.ino();
    let start = match tail {
        Some(n) => tail_start(&mut file, n)?,
        None => 0,
    };
    file.seek(SeekFrom::Start(start))?;
    Ok(OpenLog {
        file: BufReader::new(file),
        inode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "2026-01-02T03:04:05.100000000Z stdout F one\n\
        2026-01-02T03:04:06.000000000Z stderr P tw\n\
        2026-01-02T03:04:06.500000000Z stderr F o\n\
        2026-01-02T03:04:07.123456789+01:00 stdout F three\n";

    fn write_log(contents: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, contents).unwrap();
        (dir, path)
    }

    async fn read(path: &Path, options: LogOptions) -> String {
        let (tx, mut rx) = mpsc::channel(16);
        let path = path.to_owned();
        let reader = tokio::spawn(read_logs(path, options, tx, || async { false }));
        let mut out = Vec::new();
        while let Some(chunk) = rx.recv().await {
            out.extend_from_slice(&chunk);
        }
        reader.await.unwrap().unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn parses_entries_and_rejects_garbage() {
        let entry = parse_line(b"2026-01-02T03:04:05.5Z stderr P a b c\n").unwrap();
        assert_eq!(entry.stream, "stderr");
        assert!(entry.partial);
        assert_eq!(entry.content, b"a b c");
        assert_eq!(
            parse_line(b"2026-01-02T03:04:05Z stdout F ")
                .unwrap()
                .content,
            b""
        );
        assert!(parse_line(b"nonsense stdout F x").is_err());
        assert!(parse_line(b"2026-01-02T03:04:05Z other F x").is_err());
        assert!(parse_line(b"2026-01-02T03:04:05Z stdout X x").is_err());
    }

    #[test]
    fn formats_timestamps_as_rfc3339nano() {
        let t = DateTime::parse_from_rfc3339("2026-01-02T03:04:05.100000000Z").unwrap();
        assert_eq!(format_timestamp(&t), "2026-01-02T03:04:05.1Z");
        let t = DateTime::parse_from_rfc3339("2026-01-02T03:04:05+02:00").unwrap();
        assert_eq!(format_timestamp(&t), "2026-01-02T03:04:05+02:00");
    }

    #[tokio::test]
    async fn joins_partial_lines_with_one_timestamp() {
        let (_dir, path) = write_log(LOG);
        assert_eq!(
            read(&path, LogOptions::default()).await,
            "one\ntwo\nthree\n"
        );
        let stamped = read(
            &path,
            LogOptions {
                timestamps: true,
                ..Default::default()
            },
        )
        .await;
        assert_eq!(
            stamped,
            "2026-01-02T03:04:05.1Z one\n2026-01-02T03:04:06Z two\n\
             2026-01-02T03:04:07.123456789+01:00 three\n"
        );
    }

    #[tokio::test]
    async fn tail_since_and_limit() {
        let (_dir, path) = write_log(LOG);
        let tail = |n| LogOptions {
            tail: Some(n),
            ..Default::default()
        };
        assert_eq!(read(&path, tail(1)).await, "three\n");
        // Tail counts file lines: the last two are the end of a partial line and "three".
        assert_eq!(read(&path, tail(2)).await, "o\nthree\n");
        assert_eq!(read(&path, tail(0)).await, "");
        assert_eq!(read(&path, tail(10)).await, "one\ntwo\nthree\n");
        let since = LogOptions {
            since: DateTime::parse_from_rfc3339("2026-01-02T03:04:06Z").ok(),
            ..Default::default()
        };
        // 03:04:07+01:00 is 02:04:07Z: before `since`.
        assert_eq!(read(&path, since).await, "two\n");
        let limited = LogOptions {
            limit_bytes: Some(6),
            ..Default::default()
        };
        assert_eq!(read(&path, limited).await, "one\ntw");
    }

    /// Rotated files (compressed and not) are read before the live file; `tail` counts
    /// lines across them.
    #[tokio::test]
    async fn reads_across_rotated_files() {
        let (dir, path) = write_log("2026-01-02T03:04:09Z stdout F live\n");
        let gz = dir.path().join("0.log.20260102-030406.gz");
        let mut encoder = flate2::write::GzEncoder::new(
            std::fs::File::create(&gz).unwrap(),
            flate2::Compression::fast(),
        );
        std::io::Write::write_all(
            &mut encoder,
            b"2026-01-02T03:04:05Z stdout F one\n2026-01-02T03:04:06Z stdout F two\n",
        )
        .unwrap();
        encoder.finish().unwrap();
        std::fs::write(
            dir.path().join("0.log.20260102-030408"),
            "2026-01-02T03:04:07Z stdout P thr\n2026-01-02T03:04:08Z stdout F ee\n",
        )
        .unwrap();
        let tail = |n| LogOptions {
            tail: Some(n),
            ..Default::default()
        };
        assert_eq!(
            read(&path, LogOptions::default()).await,
            "one\ntwo\nthree\nlive\n"
        );
        assert_eq!(read(&path, tail(1)).await, "live\n");
        assert_eq!(read(&path, tail(3)).await, "three\nlive\n");
        assert_eq!(read(&path, tail(4)).await, "two\nthree\nlive\n");
        assert_eq!(read(&path, tail(100)).await, "one\ntwo\nthree\nlive\n");
    }

    #[tokio::test]
    async fn follow_reads_new_lines_and_rotation() {
        let (_dir, path) = write_log("2026-01-02T03:04:05Z stdout F first\n");
        let (tx, mut rx) = mpsc::channel(16);
        let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = running.clone();
        let reader = tokio::spawn(read_logs(
            path.clone(),
            LogOptions {
                follow: true,
                ..Default::default()
            },
            tx,
            move || {
                let flag = flag.clone();
                async move { flag.load(std::sync::atomic::Ordering::SeqCst) }
            },
        ));
        assert_eq!(rx.recv().await.unwrap(), "first\n");
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(b"2026-01-02T03:04:06Z stdout F second\n")
                .unwrap();
        }
        assert_eq!(rx.recv().await.unwrap(), "second\n");
        // Rotation: the file is renamed away and a new one takes its place.
        std::fs::rename(&path, path.with_extension("log.1")).unwrap();
        std::fs::write(&path, "2026-01-02T03:04:07Z stdout F third\n").unwrap();
        assert_eq!(rx.recv().await.unwrap(), "third\n");
        running.store(false, std::sync::atomic::Ordering::SeqCst);
        assert!(
            rx.recv().await.is_none(),
            "follow ends when the container stops"
        );
        reader.await.unwrap().unwrap();
    }
}
