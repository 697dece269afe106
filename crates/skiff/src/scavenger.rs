//! Gives freed heap memory back to the kernel, as the Go runtime's background scavenger
//! does for upstream's components.
//!
//! glibc's allocator keeps what a thread freed in that thread's arena and returns only
//! the free space at the top of the main heap by itself. A burst of work on another
//! thread (the API server renders its OpenAPI documents at start, about 30 MB of
//! temporary JSON values; a list of thousands of pods is decoded and dropped) stays in
//! the process's RSS for good: an idle `skiff server` measured 52 MB of anonymous
//! memory, and 19 MB after one `malloc_trim(0)`. One thread calls `malloc_trim(0)`
//! every [`INTERVAL`]; it releases the whole free pages of every arena (`madvise`
//! `MADV_DONTNEED`), which costs a fraction of a millisecond on an idle heap.

use std::time::Duration;

/// How often the free pages go back to the kernel.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// Starts the scavenger thread for the rest of the process's life. A failure to start
/// it only costs memory, so it is logged, not returned.
pub fn start() {
    let spawned = std::thread::Builder::new()
        .name("scavenger".to_owned())
        .spawn(|| {
            loop {
                std::thread::sleep(INTERVAL);
                trim();
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("not returning freed memory to the kernel: {e}");
    }
}

/// Returns the free pages of every malloc arena to the kernel.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes the allocator's own locks; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators return memory by themselves.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
