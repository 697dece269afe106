//! API server benchmark: `skiff apiserver` on SQLite and on etcd, side by side in one run.
//!
//! `skiff-bench-apiserver --skiff PATH [--requests N] [--watchers N] [--events N]` starts,
//! for each store, a server on a fresh data directory (and, for etcd, Debian's etcd on
//! free ports) and measures, with kube-rs over one keep-alive client:
//!
//! - idle RSS of the server (and of etcd), 2 s after it became ready;
//! - sequential creates per second (N ConfigMaps of 100 bytes, one after the other,
//!   default 1,000) and gets per second (N gets by name);
//! - LIST of 1,000 and of 10,000 ConfigMaps (each list alone in its namespace, filled by 16
//!   concurrent writers): the median of 5 full GETs of the collection as JSON, in ms,
//!   bytes read but not decoded;
//! - a watch fanned out to W watchers (default 100) of one namespace: the time from the
//!   first of E sequential creates (default 100) until every watcher has seen all E
//!   ADDED events, and the events delivered per second (W × E / that time);
//! - RSS of the server (and etcd) after all that.
//!
//! Everything it starts is removed at exit.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use skiff_testkit::Etcd;
use skiff_testkit::{ApiServer, ApiServerOptions, Backend};

const SETTLE: Duration = Duration::from_secs(2);
const FILL_CONCURRENCY: usize = 16;
const LIST_RUNS: usize = 5;
const LIST_SIZES: [usize; 2] = [1_000, 10_000];
const WATCH_TIMEOUT: Duration = Duration::from_secs(120);

struct Args {
    skiff: PathBuf,
    requests: usize,
    watchers: usize,
    events: usize,
}

/// What one store measured.
struct Results {
    store: &'static str,
    idle_rss: (u64, Option<u64>),
    creates_per_s: f64,
    gets_per_s: f64,
    list_ms: Vec<(usize, f64)>,
    fanout_ms: f64,
    fanout_events_per_s: f64,
    loaded_rss: (u64, Option<u64>),
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let mut skiff = None;
    let (mut requests, mut watchers, mut events) = (1_000, 100, 100);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = || -> anyhow::Result<usize> {
            let value = args
                .next()
                .with_context(|| format!("{arg} needs a value"))?;
            value
                .parse()
                .with_context(|| format!("{arg} must be a number"))
        };
        match arg.as_str() {
            "--skiff" => skiff = Some(PathBuf::from(args.next().context("--skiff needs a value")?)),
            "--requests" => requests = number()?,
            "--watchers" => watchers = number()?,
            "--events" => events = number()?,
            "-h" | "--help" => {
                println!(
                    "usage: skiff-bench-apiserver --skiff PATH [--requests N (default 1000)] \
                     [--watchers N (default 100)] [--events N (default 100)]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let skiff = skiff.context("--skiff PATH is required")?;
    if requests == 0 || watchers == 0 || events == 0 {
        bail!("--requests, --watchers and --events must be at least 1");
    }
    Ok(Args {
        skiff,
        requests,
        watchers,
        events,
    })
}

fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut results = Vec::new();

    eprintln!("measuring skiff apiserver on sqlite...");
    let server = ApiServer::start(ApiServerOptions::new(&args.skiff, Backend::Sqlite))?;
    results.push(rt.block_on(measure(&args, "sqlite", &server, None))?);
    drop(server);

    eprintln!("measuring skiff apiserver on etcd...");
    let etcd = Etcd::start()?;
    let backend = Backend::Etcd(etcd.endpoint().to_string());
    let server = ApiServer::start(ApiServerOptions::new(&args.skiff, backend))?;
    let etcd_pid = pid_listening_on(etcd.endpoint())?;
    results.push(rt.block_on(measure(&args, "etcd", &server, Some(etcd_pid)))?);
    drop(server);
    drop(etcd);

    report(&args, &results);
    Ok(())
}

async fn measure(
    args: &Args,
    store: &'static str,
    server: &ApiServer,
    etcd_pid: Option<u32>,
) -> anyhow::Result<Results> {
    let server_pid = server.pid().context("the server is not running")?;
    let rss = || -> anyhow::Result<(u64, Option<u64>)> {
        Ok((rss_kib(server_pid)?, etcd_pid.map(rss_kib).transpose()?))
    };
    tokio::time::sleep(SETTLE).await;
    let idle_rss = rss()?;
    let client = server.client().await?;

    let cms = namespace(&client, "sequential").await?;
    let start = Instant::now();
    for i in 0..args.requests {
        cms.create(&PostParams::default(), &configmap(&format!("cm-{i}"))?)
            .await?;
    }
    let creates_per_s = args.requests as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for i in 0..args.requests {
        cms.get(&format!("cm-{i}")).await?;
    }
    let gets_per_s = args.requests as f64 / start.elapsed().as_secs_f64();

    let mut list_ms = Vec::new();
    for size in LIST_SIZES {
        let ns = format!("list-{size}");
        let cms = namespace(&client, &ns).await?;
        fill(&cms, size).await?;
        let mut runs = Vec::new();
        for _ in 0..LIST_RUNS {
            let request = http::Request::get(format!("/api/v1/namespaces/{ns}/configmaps"))
                .body(Vec::new())?;
            let start = Instant::now();
            let body = client.request_text(request).await?;
            runs.push(start.elapsed().as_secs_f64() * 1000.0);
            let list: serde_json::Value = serde_json::from_str(&body)?;
            let items = list["items"].as_array().map_or(0, Vec::len);
            if items != size {
                bail!("LIST of {ns} returned {items} items, not {size}");
            }
        }
        list_ms.push((size, median(&mut runs)));
    }

    let (fanout_ms, fanout_events_per_s) = fanout(args, &client).await?;
    let loaded_rss = rss()?;
    Ok(Results {
        store,
        idle_rss,
        creates_per_s,
        gets_per_s,
        list_ms,
        fanout_ms,
        fanout_events_per_s,
        loaded_rss,
    })
}

/// Creates namespace `name` and returns its ConfigMaps.
async fn namespace(client: &kube::Client, name: &str) -> anyhow::Result<Api<ConfigMap>> {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(Api::namespaced(client.clone(), name))
}

/// A ConfigMap `name` with 100 bytes of data.
fn configmap(name: &str) -> anyhow::Result<ConfigMap> {
    Ok(serde_json::from_value(
        json!({"metadata": {"name": name}, "data": {"payload": "x".repeat(100)}}),
    )?)
}

/// Creates `cm-0` .. `cm-<count-1>`, 16 at a time.
async fn fill(cms: &Api<ConfigMap>, count: usize) -> anyhow::Result<()> {
    stream::iter(0..count)
        .map(|i| async move {
            cms.create(&PostParams::default(), &configmap(&format!("cm-{i}"))?)
                .await?;
            anyhow::Ok(())
        })
        .buffer_unordered(FILL_CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// Starts the watchers on an empty namespace, then creates the events one after the
/// other; returns (ms until every watcher saw every event, events delivered per second).
async fn fanout(args: &Args, client: &kube::Client) -> anyhow::Result<(f64, f64)> {
    let cms = namespace(client, "fanout").await?;
    let version = cms
        .list(&Default::default())
        .await?
        .metadata
        .resource_version
        .context("list resourceVersion")?;
    let mut watchers = Vec::new();
    for _ in 0..args.watchers {
        let stream = cms
            .watch(&WatchParams::default().timeout(290), &version)
            .await?;
        let events = args.events;
        watchers.push(tokio::spawn(async move {
            let mut stream = Box::pin(stream);
            let mut added = 0;
            while added < events {
                match stream.try_next().await? {
                    Some(WatchEvent::Added(_)) => added += 1,
                    Some(_) => {}
                    None => bail!("watch ended after {added} events"),
                }
            }
            anyhow::Ok(Instant::now())
        }));
    }
    let start = Instant::now();
    for i in 0..args.events {
        cms.create(&PostParams::default(), &configmap(&format!("ev-{i}"))?)
            .await?;
    }
    let mut last = start;
    for watcher in watchers {
        let seen = tokio::time::timeout(WATCH_TIMEOUT, watcher)
            .await
            .context("a watcher did not see every event in time")???;
        last = last.max(seen);
    }
    let elapsed = last.duration_since(start).as_secs_f64();
    let delivered = (args.watchers * args.events) as f64;
    Ok((elapsed * 1000.0, delivered / elapsed))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The PID of the process whose command line has `--listen-client-urls=<endpoint>` (the
/// etcd the testkit started).
fn pid_listening_on(endpoint: &str) -> anyhow::Result<u32> {
    let flag = format!("--listen-client-urls={endpoint}");
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|arg| arg == flag.as_bytes()) {
            return Ok(pid);
        }
    }
    bail!("no process with {flag}")
}

/// `VmRSS` of a process, in KiB.
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no VmRSS in /proc/{pid}/status"))
}

fn report(args: &Args, results: &[Results]) {
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    let mut rows: Vec<(String, Vec<String>)> = vec![
        (
            format!("sequential creates/s ({})", args.requests),
            results
                .iter()
                .map(|r| format!("{:.0}", r.creates_per_s))
                .collect(),
        ),
        (
            format!("sequential gets/s ({})", args.requests),
            results
                .iter()
                .map(|r| format!("{:.0}", r.gets_per_s))
                .collect(),
        ),
    ];
    for (i, size) in LIST_SIZES.iter().enumerate() {
        rows.push((
            format!("LIST of {size} objects (ms, median of {LIST_RUNS})"),
            results
                .iter()
                .map(|r| format!("{:.1}", r.list_ms[i].1))
                .collect(),
        ));
    }
    rows.push((
        format!(
            "watch fan-out: {} watchers x {} events (ms)",
            args.watchers, args.events
        ),
        results
            .iter()
            .map(|r| format!("{:.0}", r.fanout_ms))
            .collect(),
    ));
    rows.push((
        "watch fan-out events delivered/s".to_string(),
        results
            .iter()
            .map(|r| format!("{:.0}", r.fanout_events_per_s))
            .collect(),
    ));
    rows.push((
        "idle RSS apiserver (MiB)".to_string(),
        results.iter().map(|r| mib(r.idle_rss.0)).collect(),
    ));
    rows.push((
        "idle RSS etcd (MiB)".to_string(),
        results
            .iter()
            .map(|r| r.idle_rss.1.map_or("-".into(), mib))
            .collect(),
    ));
    rows.push((
        "RSS apiserver after the runs (MiB)".to_string(),
        results.iter().map(|r| mib(r.loaded_rss.0)).collect(),
    ));
    rows.push((
        "RSS etcd after the runs (MiB)".to_string(),
        results
            .iter()
            .map(|r| r.loaded_rss.1.map_or("-".into(), mib))
            .collect(),
    ));

    let width = rows.iter().map(|(label, _)| label.len()).max().unwrap_or(0);
    print!("{:width$}", "");
    for r in results {
        print!("  {:>10}", r.store);
    }
    println!();
    for (label, values) in rows {
        print!("{label:width$}");
        for v in values {
            print!("  {v:>10}");
        }
        println!();
    }
}
