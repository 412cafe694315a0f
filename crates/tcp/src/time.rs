//! Engine time. The engine never reads a clock: every input carries `now`.
//!
//! `Instant` is nanoseconds since an arbitrary epoch chosen by the caller
//! (the simulator starts at zero; the TUN adapter subtracts its start time).

use core::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in (virtual or real) time, nanosecond resolution.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);

    /// From nanoseconds since the epoch.
    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Time since the epoch.
    pub fn since_epoch(self) -> Duration {
        Duration::from_nanos(self.0)
    }
    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
    /// `self - d`, or `None` before the epoch.
    pub fn checked_sub(self, d: Duration) -> Option<Instant> {
        self.0.checked_sub(d.as_nanos() as u64).map(Instant)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_add(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
/// `a - b`; saturates at zero when `b > a`.
impl Sub for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn arithmetic() {
        let t = Instant::from_nanos(1_000);
        assert_eq!((t + Duration::from_micros(1)).as_nanos(), 2_000);
        assert_eq!(t - Instant::from_nanos(4_000), Duration::ZERO);
        assert_eq!(t.checked_sub(Duration::from_micros(2)), None);
    }
}
