//! The registry shared by every [`CriRuntime`](super::CriRuntime) of a test process: started
//! and filled once (busybox and the pause stand-in), stopped when the process exits.

use std::sync::Mutex;

use anyhow::Context;
use tokio::sync::OnceCell;

use crate::Registry;

/// What the shared registry holds.
pub(crate) struct Shared {
    /// `IP:PORT` of the registry.
    pub host: String,
    /// `<host>/skiff/busybox:test`, [`crate::busybox`].
    pub busybox: String,
    /// `<host>/skiff/pause:test`, [`crate::pause`] (containerd's `sandbox_image`).
    pub pause: String,
}

static SHARED: OnceCell<Shared> = OnceCell::const_new();
/// Kept out of [`SHARED`] so that [`stop_registry`] can drop it at exit.
static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// The shared registry, started and filled by the first caller.
///
/// Errors: the registry does not start, an image cannot be built or pushed (a later call
/// tries again).
pub(crate) async fn get() -> anyhow::Result<&'static Shared> {
    SHARED
        .get_or_try_init(|| async {
            tokio::task::spawn_blocking(start)
                .await
                .context("starting the shared registry")?
        })
        .await
}

fn start() -> anyhow::Result<Shared> {
    let registry = Registry::start()?;
    let host = registry.host().to_string();
    let busybox = crate::push(&host, "skiff/busybox", "test", &crate::busybox()?)?;
    let pause = crate::push(&host, "skiff/pause", "test", &crate::pause()?)?;
    if let Ok(mut slot) = REGISTRY.lock() {
        *slot = Some(registry);
        // SAFETY: `stop_registry` is a plain `extern "C" fn()` that never unwinds.
        unsafe { libc::atexit(stop_registry) };
    }
    Ok(Shared {
        host,
        busybox,
        pause,
    })
}

/// Stops the registry and removes its directory when the test process exits (statics
/// are never dropped; the process itself dies with the test process anyway).
extern "C" fn stop_registry() {
    if let Ok(mut slot) = REGISTRY.lock() {
        drop(slot.take());
    }
}
