//! Mapping between Hollywood time ([`Instant`], nanoseconds) and the
//! `std::time::Instant` quinn-proto wants.
//!
//! A `std::time::Instant` cannot be built from a number, so a [`Clock`]
//! reads the OS clock once, as an arbitrary epoch, and maps `t` to
//! `epoch + t`. quinn-proto only ever subtracts instants, so a run depends
//! on the virtual times alone (quinn's own test harness does the same).
//! Times coming back are rounded up to the nanosecond: quinn computes some
//! timers with floating-point factors (e.g. 9/8 of an RTT), and a timer
//! reported a fraction of a nanosecond early would fire before it is due.

use crate::Instant;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Epoch-based conversion between [`Instant`] and `std::time::Instant`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock whose epoch is an arbitrary (real) instant. Only differences
    /// of converted times are meaningful.
    #[allow(clippy::disallowed_methods)] // the one read: an arbitrary epoch, never a time
    pub fn new() -> Clock {
        Clock {
            epoch: std::time::Instant::now(),
        }
    }

    /// `t` as a `std::time::Instant`.
    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.epoch + Duration::from_nanos(t.as_nanos())
    }

    /// A `std::time::Instant` from [`Clock::to_std`] arithmetic back as an
    /// [`Instant`], rounded up to the nanosecond.
    pub fn from_std(&self, t: std::time::Instant) -> Instant {
        let d = t.saturating_duration_since(self.epoch);
        let ns = d.as_nanos();
        // `Duration` is exact in nanoseconds; round-up matters only if a
        // platform instant is finer. Saturate far in the future.
        Instant::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

/// quinn-proto's wall-clock source (retry and address-validation tokens)
/// driven by the transport's `now`: the Unix epoch plus virtual time, so no
/// token depends on the machine's clock.
#[derive(Debug, Default)]
pub struct VirtualSystemTime {
    ns: AtomicU64,
}

impl VirtualSystemTime {
    /// A source at time zero.
    pub fn new() -> Arc<VirtualSystemTime> {
        Arc::new(VirtualSystemTime::default())
    }

    /// Advance to `now` (never backwards).
    pub fn set(&self, now: Instant) {
        self.ns.fetch_max(now.as_nanos(), Ordering::Relaxed);
    }
}

impl quinn_proto::TimeSource for VirtualSystemTime {
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(self.ns.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        let c = Clock::new();
        for ns in [0, 1, 999, 1_000_000_007, 86_400 * 1_000_000_000] {
            let t = Instant::from_nanos(ns);
            assert_eq!(c.from_std(c.to_std(t)), t);
        }
        let t = Instant::from_nanos(5);
        assert_eq!(
            c.from_std(c.to_std(t) + Duration::from_nanos(3)),
            Instant::from_nanos(8)
        );
    }

    #[test]
    fn virtual_system_time_only_moves_forward() {
        let s = VirtualSystemTime::new();
        s.set(Instant::from_nanos(10));
        s.set(Instant::from_nanos(4));
        assert_eq!(
            quinn_proto::TimeSource::now(&*s),
            SystemTime::UNIX_EPOCH + Duration::from_nanos(10)
        );
    }
}
