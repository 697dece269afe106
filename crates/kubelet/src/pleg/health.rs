//! PLEG health (upstream `GenericPLEG.Healthy` / `EventedPLEG.Healthy`): the PLEG is
//! healthy while it relisted or processed a runtime event within its threshold.

use crate::error::{Error, Result};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// Threshold of the relisting PLEG (upstream `genericPlegRelistThreshold`, 3 min).
pub const RELIST_THRESHOLD: Duration = Duration::from_secs(3 * 60);
/// Threshold while events drive the PLEG (upstream `eventedPlegRelistThreshold`, 10 min).
pub const EVENTED_RELIST_THRESHOLD: Duration = Duration::from_secs(10 * 60);

/// How the PLEG learns about runtime changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlegMode {
    /// CRI GetContainerEvents, with a rare relist as a safety net.
    Evented,
    /// The periodic relist alone (the runtime has no event stream, or it broke).
    Relist,
}

#[derive(Debug)]
struct State {
    mode: PlegMode,
    /// Monotonic and wall-clock time of the last relist or processed event.
    last_active: Option<(Instant, SystemTime)>,
}

/// A shared, cheap-to-clone view of the PLEG's health, for `/healthz` and the node
/// status (upstream `PodLifecycleEventGenerator.Healthy`).
#[derive(Debug, Clone)]
pub struct PlegHealth(Arc<Mutex<State>>);

impl Default for PlegHealth {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(State {
            mode: PlegMode::Relist,
            last_active: None,
        })))
    }
}

impl PlegHealth {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `Ok` while the PLEG was active within its threshold; otherwise the upstream
    /// reason, e.g. `pleg was last seen active 3m0.5s ago; threshold is 3m0s`, or
    /// `pleg has yet to be successful` before the first relist.
    pub fn healthy(&self) -> Result<()> {
        let state = self.lock();
        check(
            state.mode,
            state.last_active.map(|(at, _)| at),
            Instant::now(),
        )
    }

    /// The current mode.
    pub fn mode(&self) -> PlegMode {
        self.lock().mode
    }

    /// Wall-clock time of the last relist or processed event (upstream metric
    /// `kubelet_pleg_last_seen_seconds`); `None` before the first one.
    pub fn last_seen(&self) -> Option<SystemTime> {
        self.lock().last_active.map(|(_, at)| at)
    }

    /// Records a successful relist or a processed event.
    pub(crate) fn mark_active(&self) {
        self.lock().last_active = Some((Instant::now(), SystemTime::now()));
    }

    /// Records a mode change; returns the previous mode.
    pub(crate) fn set_mode(&self, mode: PlegMode) -> PlegMode {
        std::mem::replace(&mut self.lock().mode, mode)
    }
}

/// The health verdict at `now` for a PLEG in `mode` last active at `last_active`.
fn check(mode: PlegMode, last_active: Option<Instant>, now: Instant) -> Result<()> {
    let Some(last_active) = last_active else {
        return Err(Error::Pleg("pleg has yet to be successful".to_owned()));
    };
    let (threshold, prefix) = match mode {
        PlegMode::Relist => (RELIST_THRESHOLD, ""),
        PlegMode::Evented => (EVENTED_RELIST_THRESHOLD, "EventedPLEG: "),
    };
    let elapsed = now.saturating_duration_since(last_active);
    if elapsed > threshold {
        return Err(Error::Pleg(format!(
            "{prefix}pleg was last seen active {} ago; threshold is {}",
            go_duration(elapsed),
            go_duration(threshold)
        )));
    }
    Ok(())
}

/// `d` as Go's `time.Duration.String` prints it (`3m0s`, `1h2m3.5s`, `1.5ms`), the form
/// of upstream's messages.
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        let (unit, scale) = match nanos {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, scale));
    }
    let secs = d.as_secs();
    let (hours, minutes) = (secs / 3600, secs / 60 % 60);
    let seconds = decimal(
        u128::from(secs % 60) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        1_000_000_000,
    );
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

/// `value / scale` in decimal without trailing zeros; `scale` is a power of ten.
fn decimal(value: u128, scale: u128) -> String {
    let (whole, fraction) = (value / scale, value % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_duration_matches_go() {
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_secs(180)), "3m0s");
        assert_eq!(go_duration(Duration::from_millis(180_500)), "3m0.5s");
        assert_eq!(go_duration(Duration::from_secs(3723)), "1h2m3s");
        assert_eq!(go_duration(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(
            go_duration(Duration::from_nanos(1_000_000_001)),
            "1.000000001s"
        );
        assert_eq!(go_duration(Duration::from_nanos(500)), "500ns");
        assert_eq!(go_duration(Duration::from_micros(2)), "2µs");
    }

    #[test]
    fn unhealthy_after_threshold_with_upstream_message() {
        let now = Instant::now() + Duration::from_secs(3600);
        assert_eq!(
            check(PlegMode::Relist, None, now),
            Err(Error::Pleg("pleg has yet to be successful".to_owned()))
        );
        assert!(check(PlegMode::Relist, Some(now - RELIST_THRESHOLD), now).is_ok());
        assert_eq!(
            check(
                PlegMode::Relist,
                Some(now - Duration::from_millis(180_001)),
                now
            ),
            Err(Error::Pleg(
                "pleg was last seen active 3m0.001s ago; threshold is 3m0s".to_owned()
            ))
        );
        assert!(check(PlegMode::Evented, Some(now - Duration::from_secs(300)), now).is_ok());
        assert_eq!(
            check(PlegMode::Evented, Some(now - Duration::from_secs(601)), now),
            Err(Error::Pleg(
                "EventedPLEG: pleg was last seen active 10m1s ago; threshold is 10m0s".to_owned()
            ))
        );
    }

    #[test]
    fn handle_tracks_activity_and_mode() {
        let health = PlegHealth::default();
        assert!(health.healthy().is_err());
        assert_eq!(health.last_seen(), None);
        health.mark_active();
        assert!(health.healthy().is_ok());
        assert!(health.last_seen().is_some());
        assert_eq!(health.set_mode(PlegMode::Evented), PlegMode::Relist);
        assert_eq!(health.mode(), PlegMode::Evented);
    }
}
