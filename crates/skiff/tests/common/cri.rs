//! The CRI integration suite's glue: [`cri_cases!`] turns `async fn case(rt: &CriRuntime)
//! -> anyhow::Result<()>` functions into one test per runtime flavor. How to write a case:
//! see the docs of `skiff_testkit::cri` (crates/testkit/src/cri/mod.rs).
//!
//! ```ignore
//! mod common;
//! use common::cri::*;
//!
//! common::cri_cases! {
//!     pod_lifecycle,
//!     container_events => skiff_only("containerd 1.6 does not implement GetContainerEvents"),
//! }
//!
//! async fn pod_lifecycle(rt: &CriRuntime) -> anyhow::Result<()> { ... }
//! ```
//!
//! generates `pod_lifecycle::skiff`, `pod_lifecycle::containerd`,
//! `container_events::skiff` and `container_events::containerd`, the last one
//! `#[ignore = "containerd 1.6 does not implement GetContainerEvents"]` (listed by
//! `cargo test` as ignored, with the reason). Each test starts its own runtime, runs the
//! case with a 5-minute limit, and on failure panics with the error and the tail of the
//! runtime's log. The runtime is torn down when the test ends, pass or fail.
//!
//! Startup cost per test, printed as `started <flavor> in ...` (see it with
//! `--nocapture`); measured on the 2-core CI machine, debug build: Skiff 60–80 ms,
//! containerd 110–170 ms (its plugins beyond CRI, overlayfs and runc are disabled), plus
//! about 0.6 s once per test process for the shared registry and its images. The 12
//! cases of `cri_lifecycle.rs` take about 14 s in all.

use std::time::{Duration, Instant};

pub use skiff_testkit::cri::{CriRuntime, Flavor};

/// The longest a case may run.
pub const CASE_TIMEOUT: Duration = Duration::from_secs(300);

/// Starts a runtime of `flavor` for a test (the Skiff flavor runs this crate's `skiff`
/// binary); panics with the reason when it cannot start.
pub async fn start(flavor: Flavor) -> CriRuntime {
    skiff_testkit::cri::set_skiff_binary(env!("CARGO_BIN_EXE_skiff"));
    let started = Instant::now();
    let rt = CriRuntime::start(flavor)
        .await
        .unwrap_or_else(|e| panic!("starting {flavor}: {e:#}"));
    eprintln!("started {flavor} in {:?}", started.elapsed());
    rt
}

/// Runs `case` on `rt` with [`CASE_TIMEOUT`]; panics with the error and the runtime's
/// log tail when it fails or times out.
pub async fn run(rt: &CriRuntime, case: impl Future<Output = anyhow::Result<()>>) {
    let outcome = match tokio::time::timeout(CASE_TIMEOUT, case).await {
        Ok(Ok(())) => return,
        Ok(Err(e)) => format!("{e:?}"),
        Err(_) => format!("timed out after {CASE_TIMEOUT:?}"),
    };
    panic!(
        "{} case failed: {outcome}\n--- {} log (tail) ---\n{}",
        rt.flavor(),
        rt.flavor(),
        rt.log_tail()
    );
}

/// One test per flavor for each case (module docs).
macro_rules! cri_cases {
    ($($case:ident $(=> skiff_only($reason:literal))?),* $(,)?) => {
        $(
            mod $case {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn skiff() {
                    let rt = crate::common::cri::start(crate::common::cri::Flavor::Skiff).await;
                    crate::common::cri::run(&rt, super::$case(&rt)).await;
                }

                $(#[ignore = $reason])?
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn containerd() {
                    let rt =
                        crate::common::cri::start(crate::common::cri::Flavor::Containerd).await;
                    crate::common::cri::run(&rt, super::$case(&rt)).await;
                }
            }
        )*
    };
}
pub(crate) use cri_cases;
