//! API server benchmark: `skiff apiserver` on SQLite and on etcd, side by side in one run.
//!
//! `skiff-bench-apiserver --skiff PATH [--requests N] [--watchers N] [--events N]
//! [--list-runs N]` starts, for each store, a server on a fresh data directory (and, for
//! etcd, Debian's etcd on free ports) and measures, with kube-rs over one keep-alive
//! client:
//!
//! - idle RSS of the server (and of etcd), 2 s after it became ready;
//! - sequential creates per second (N ConfigMaps of 100 bytes, one after the other,
//!   default 1,000) and gets per second (N gets by name);
//! - sequential creates per second of N custom resources whose CustomResourceDefinition
//!   has a 20-field schema and one CEL rule (the definition created first, then waited
//!   for until Established), next to the ConfigMap creates;
//! - LIST of 1,000 and of 10,000 ConfigMaps (each list alone in its namespace, filled by 16
//!   concurrent writers): the median of `--list-runs` (default 5) full GETs of the
//!   collection as JSON and as a Table (`as=Table;g=meta.k8s.io;v=v1`, as kubectl asks),
//!   in ms and objects per second, bytes read but not decoded;
//! - N server-side applies per second (`PATCH` with `application/apply-patch+yaml`,
//!   `fieldManager=bench`) of a ConfigMap with 50 data fields, each changing one field,
//!   next to N JSON merge patches (`application/merge-patch+json`) with the same body;
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
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;
use skiff_testkit::Etcd;
use skiff_testkit::{ApiServer, ApiServerOptions, Backend, rss_kib};

const SETTLE: Duration = Duration::from_secs(2);
const FILL_CONCURRENCY: usize = 16;
const LIST_SIZES: [usize; 2] = [1_000, 10_000];
const WATCH_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the custom resource definition may take to become Established and served.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);
/// What kubectl asks a list for.
const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
/// Fields of the custom resource's spec, and of the applied ConfigMap's data.
const CR_FIELDS: usize = 20;
const APPLY_FIELDS: usize = 50;

struct Args {
    skiff: PathBuf,
    requests: usize,
    watchers: usize,
    events: usize,
    list_runs: usize,
}

/// One LIST size's medians, in ms (in the order of [`LIST_SIZES`]).
struct ListTimes {
    json_ms: f64,
    /// `None` when the Table list failed (the error went to stderr).
    table_ms: Option<f64>,
}

/// What one store measured. `None`: that measurement failed (the error went to stderr),
/// as against a server without custom resources or server-side apply.
struct Results {
    store: &'static str,
    idle_rss: (u64, Option<u64>),
    creates_per_s: f64,
    cr_creates_per_s: Option<f64>,
    gets_per_s: f64,
    lists: Vec<ListTimes>,
    applies_per_s: Option<f64>,
    merge_patches_per_s: Option<f64>,
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
    let (mut requests, mut watchers, mut events, mut list_runs) = (1_000, 100, 100, 5);
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
            "--list-runs" => list_runs = number()?,
            "-h" | "--help" => {
                println!(
                    "usage: skiff-bench-apiserver --skiff PATH [--requests N (default 1000)] \
                     [--watchers N (default 100)] [--events N (default 100)] \
                     [--list-runs N (default 5)]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let skiff = skiff.context("--skiff PATH is required")?;
    if requests == 0 || watchers == 0 || events == 0 || list_runs == 0 {
        bail!("--requests, --watchers, --events and --list-runs must be at least 1");
    }
    Ok(Args {
        skiff,
        requests,
        watchers,
        events,
        list_runs,
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
    let cr_creates_per_s = optional(
        store,
        "custom resource creates",
        custom_resource_creates(args, &client).await,
    );

    let mut lists = Vec::new();
    for size in LIST_SIZES {
        let ns = format!("list-{size}");
        let cms = namespace(&client, &ns).await?;
        fill(&cms, size).await?;
        let path = format!("/api/v1/namespaces/{ns}/configmaps");
        let json_ms = list_median(&client, &path, None, "items", size, args.list_runs).await?;
        let table = list_median(
            &client,
            &path,
            Some(TABLE_ACCEPT),
            "rows",
            size,
            args.list_runs,
        );
        lists.push(ListTimes {
            json_ms,
            table_ms: optional(store, "Table lists", table.await),
        });
    }

    let applies = namespace(&client, "apply").await?;
    let applies_per_s = optional(
        store,
        "server-side applies",
        patches(args, &applies, "applied", true).await,
    );
    let merge_patches_per_s = optional(
        store,
        "merge patches",
        patches(args, &applies, "merged", false).await,
    );

    let (fanout_ms, fanout_events_per_s) = fanout(args, &client).await?;
    let loaded_rss = rss()?;
    Ok(Results {
        store,
        idle_rss,
        creates_per_s,
        cr_creates_per_s,
        gets_per_s,
        lists,
        applies_per_s,
        merge_patches_per_s,
        fanout_ms,
        fanout_events_per_s,
        loaded_rss,
    })
}

/// The value of a measurement that may fail (a server without the feature): the error
/// goes to stderr and the report shows `failed`.
fn optional(store: &str, what: &str, result: anyhow::Result<f64>) -> Option<f64> {
    result
        .inspect_err(|e| eprintln!("{store}: {what} failed: {e:#}"))
        .ok()
}

/// The median time in ms of `runs` GETs of the list at `path` (with `accept`, if given),
/// each checked to carry `size` entries in its `entries` array.
async fn list_median(
    client: &kube::Client,
    path: &str,
    accept: Option<&str>,
    entries: &str,
    size: usize,
    runs: usize,
) -> anyhow::Result<f64> {
    let mut times = Vec::new();
    for _ in 0..runs {
        let mut request = http::Request::get(path);
        if let Some(accept) = accept {
            request = request.header(http::header::ACCEPT, accept);
        }
        let request = request.body(Vec::new())?;
        let start = Instant::now();
        let body = client.request_text(request).await?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        let list: serde_json::Value = serde_json::from_str(&body)?;
        let found = list[entries].as_array().map_or(0, Vec::len);
        if found != size {
            bail!("LIST of {path} returned {found} {entries}, not {size}");
        }
    }
    Ok(median(&mut times))
}

/// Creates a CustomResourceDefinition of `benchwidgets.bench.skiff.dev` whose spec has
/// [`CR_FIELDS`] fields (strings, integers, booleans) and one CEL rule, waits until it is
/// Established and its objects can be created, then creates `--requests` objects one
/// after the other; returns creates per second.
async fn custom_resource_creates(args: &Args, client: &kube::Client) -> anyhow::Result<f64> {
    let mut fields = serde_json::Map::new();
    for i in 0..CR_FIELDS {
        let schema = match i % 3 {
            0 => json!({"type": "string", "maxLength": 64}),
            1 => json!({"type": "integer", "minimum": 0}),
            _ => json!({"type": "boolean"}),
        };
        fields.insert(format!("f{i:02}"), schema);
    }
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "benchwidgets.bench.skiff.dev"},
        "spec": {
            "group": "bench.skiff.dev",
            "scope": "Namespaced",
            "names": {"plural": "benchwidgets", "singular": "benchwidget", "kind": "BenchWidget"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "properties": fields,
                        "x-kubernetes-validations": [
                            {"rule": "self.f01 <= self.f04", "message": "f01 must not exceed f04"}
                        ]
                    }}
                }}
            }]
        }
    }))?;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .context("creating the CustomResourceDefinition")?;
    let deadline = Instant::now() + ESTABLISH_TIMEOUT;
    loop {
        let found = crds.get("benchwidgets.bench.skiff.dev").await?;
        let established = found
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            break;
        }
        if Instant::now() > deadline {
            bail!("the CustomResourceDefinition was not Established in time");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    namespace(client, "custom").await?;
    let resource = ApiResource {
        group: "bench.skiff.dev".into(),
        version: "v1".into(),
        api_version: "bench.skiff.dev/v1".into(),
        kind: "BenchWidget".into(),
        plural: "benchwidgets".into(),
    };
    let widgets = Api::<DynamicObject>::namespaced_with(client.clone(), "custom", &resource);
    let widget = |i: usize| -> anyhow::Result<DynamicObject> {
        let mut spec = serde_json::Map::new();
        for f in 0..CR_FIELDS {
            let value = match f % 3 {
                0 => json!(format!("value-{i}-{f}")),
                1 => json!(f),
                _ => json!(i.is_multiple_of(2)),
            };
            spec.insert(format!("f{f:02}"), value);
        }
        Ok(serde_json::from_value(json!({
            "apiVersion": "bench.skiff.dev/v1",
            "kind": "BenchWidget",
            "metadata": {"name": format!("w-{i}")},
            "spec": spec,
        }))?)
    };
    // The kind is served a moment after the definition is Established.
    loop {
        match widgets.create(&PostParams::default(), &widget(0)?).await {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 404 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e).context("creating the first custom resource"),
        }
    }
    let start = Instant::now();
    for i in 1..=args.requests {
        widgets.create(&PostParams::default(), &widget(i)?).await?;
    }
    Ok(args.requests as f64 / start.elapsed().as_secs_f64())
}

/// `--requests` patches of ConfigMap `name` (created by the first), each setting its
/// [`APPLY_FIELDS`] data fields with one of them changed: server-side applies
/// (`fieldManager=bench`, forced) when `apply`, else JSON merge patches of the same body.
/// Returns patches per second.
async fn patches(
    args: &Args,
    cms: &Api<ConfigMap>,
    name: &str,
    apply: bool,
) -> anyhow::Result<f64> {
    let body = |i: usize| {
        let mut data = serde_json::Map::new();
        for f in 0..APPLY_FIELDS {
            let value = if f == 0 {
                format!("changed-{i}")
            } else {
                format!("value-{f}")
            };
            data.insert(format!("k{f:02}"), value.into());
        }
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
    };
    let params = if apply {
        PatchParams::apply("bench").force()
    } else {
        PatchParams {
            field_manager: Some("bench".into()),
            ..Default::default()
        }
    };
    let patch = |i: usize| {
        if apply {
            Patch::Apply(body(i))
        } else {
            Patch::Merge(body(i))
        }
    };
    if !apply {
        cms.create(&PostParams::default(), &serde_json::from_value(body(0))?)
            .await?;
    }
    // The first apply creates the object; time the changes after it.
    cms.patch(name, &params, &patch(0)).await?;
    let start = Instant::now();
    for i in 1..=args.requests {
        cms.patch(name, &params, &patch(i)).await?;
    }
    Ok(args.requests as f64 / start.elapsed().as_secs_f64())
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

/// A rate for the report: `failed` when it was not measured.
fn per_s(rate: Option<f64>) -> String {
    rate.map_or("failed".to_string(), |rate| format!("{rate:.0}"))
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
            format!(
                "sequential creates/s, custom resources ({CR_FIELDS} fields, 1 CEL rule) ({})",
                args.requests
            ),
            results.iter().map(|r| per_s(r.cr_creates_per_s)).collect(),
        ),
        (
            format!("sequential gets/s ({})", args.requests),
            results
                .iter()
                .map(|r| format!("{:.0}", r.gets_per_s))
                .collect(),
        ),
    ];
    let runs = args.list_runs;
    for (i, size) in LIST_SIZES.iter().enumerate() {
        let objects_per_s = |ms: Option<f64>| per_s(ms.map(|ms| *size as f64 / (ms / 1000.0)));
        let ms = |ms: Option<f64>| ms.map_or("failed".to_string(), |ms| format!("{ms:.1}"));
        let json = |r: &Results| Some(r.lists[i].json_ms);
        let table = |r: &Results| r.lists[i].table_ms;
        rows.push((
            format!("LIST of {size} ConfigMaps, JSON (ms, median of {runs})"),
            results.iter().map(|r| ms(json(r))).collect(),
        ));
        rows.push((
            format!("LIST of {size} ConfigMaps, JSON (objects/s)"),
            results.iter().map(|r| objects_per_s(json(r))).collect(),
        ));
        rows.push((
            format!("LIST of {size} ConfigMaps, Table (ms, median of {runs})"),
            results.iter().map(|r| ms(table(r))).collect(),
        ));
        rows.push((
            format!("LIST of {size} ConfigMaps, Table (objects/s)"),
            results.iter().map(|r| objects_per_s(table(r))).collect(),
        ));
    }
    rows.push((
        format!(
            "server-side applies/s, {APPLY_FIELDS}-field ConfigMap ({})",
            args.requests
        ),
        results.iter().map(|r| per_s(r.applies_per_s)).collect(),
    ));
    rows.push((
        format!("JSON merge patches/s, same change ({})", args.requests),
        results
            .iter()
            .map(|r| per_s(r.merge_patches_per_s))
            .collect(),
    ));
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
