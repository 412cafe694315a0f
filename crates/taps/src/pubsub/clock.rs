//! The caller's estimate of the relay's clock (NTP's on-wire exchange,
//! RFC 5905 §8), and the bounds on it that deadlines are converted with.
//!
//! A sample is (t1 caller sends, t2 relay receives and answers, t4 caller
//! receives). The relay read t2 after the caller's t1 and before the
//! caller's t4, so the offset θ (relay clock minus caller clock) lies in
//! [t2 − t4, t2 − t1] — whatever the two directions took, a retransmission
//! or a queue included. That interval is what a deadline is converted
//! with ([`ClockOffset::bounds`]): a deadline from the relay becomes the
//! *earliest* local time it can be ([`ClockOffset::deadline_to_local`]),
//! a local deadline the earliest relay time it can be
//! ([`ClockOffset::deadline_to_relay`]), so a conversion never moves a
//! deadline later; it moves it earlier by at most the width of the
//! interval (one way's time plus the other's, of the best exchanges).
//! The intervals of the samples kept are intersected, each widened by
//! [`DRIFT_PPM`] of its age for the two clocks' drift.
//!
//! The midpoint θ = t2 − (t1 + t4)/2 of the sample with the shortest
//! round trip (NTP's clock filter) is kept for figures
//! ([`ClockOffset::offset`], [`ClockOffset::to_relay`]): it is wrong by
//! half the asymmetry of its exchange, in either direction, so it must
//! not carry a deadline. Sans-IO: times are microseconds given by the
//! caller.

/// Samples kept (the last this many).
pub const SAMPLES: usize = 8;

/// The most two clocks may drift apart, in parts per million: a sample's
/// interval widens by this much of its age. Two crystals of ±50 ppm each
/// (an undisciplined PC clock is within this; NTP assumes 15 ppm).
pub const DRIFT_PPM: i64 = 100;

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct ClockOffset {
    /// (t1, t2, t4), newest last.
    samples: Vec<(i64, i64, i64)>,
}

impl ClockOffset {
    /// No samples yet.
    pub fn new() -> ClockOffset {
        ClockOffset::default()
    }

    /// A sample from a hello/accept or ping/pong exchange. A sample with a
    /// negative round trip (a clock that went back) is ignored.
    pub fn sample(&mut self, t1: i64, t2: i64, t4: i64) {
        if t4 < t1 {
            return;
        }
        if self.samples.len() == SAMPLES {
            self.samples.remove(0);
        }
        self.samples.push((t1, t2, t4));
    }

    /// (round trip, midpoint offset) of the sample with the shortest round trip.
    fn best(&self) -> Option<(i64, i64)> {
        self.samples
            .iter()
            .map(|&(t1, t2, t4)| {
                let rtt = t4 - t1;
                (rtt, t2 - t1 - rtt / 2)
            })
            .min_by_key(|(rtt, _)| *rtt)
    }

    /// Relay clock minus caller clock (µs), the midpoint estimate, once
    /// there is a sample (figures only: see the module documentation).
    pub fn offset(&self) -> Option<i64> {
        self.best().map(|(_, o)| o)
    }

    /// The round trip of the sample with the shortest one.
    pub fn rtt(&self) -> Option<i64> {
        self.best().map(|(r, _)| r)
    }

    /// Bounds (lo, hi) on the offset (relay minus caller clock) at the
    /// caller's time `now`: every sample's [t2 − t4, t2 − t1], widened by
    /// [`DRIFT_PPM`] of its age, intersected. `None` with no sample.
    pub fn bounds(&self, now: i64) -> Option<(i64, i64)> {
        let widen = |t1: i64| ((now - t1).max(0) * DRIFT_PPM + 999_999) / 1_000_000;
        let interval = |&(t1, t2, t4): &(i64, i64, i64)| {
            let w = widen(t1);
            (t2 - t4 - w, t2 - t1 + w)
        };
        let mut lo = i64::MIN;
        let mut hi = i64::MAX;
        for s in &self.samples {
            let (l, h) = interval(s);
            lo = lo.max(l);
            hi = hi.min(h);
        }
        if lo > hi {
            // The samples disagree beyond the drift allowed (a clock was
            // stepped): the newest alone.
            return self.samples.last().map(interval);
        }
        self.samples.last().map(|_| (lo, hi))
    }

    /// The width of [`ClockOffset::bounds`]: how much earlier than the
    /// truth a converted deadline may be (µs).
    pub fn uncertainty(&self, now: i64) -> Option<i64> {
        self.bounds(now).map(|(lo, hi)| hi - lo)
    }

    /// A deadline on the caller's clock as the earliest relay time it can
    /// be (at the caller's time `now`): never later than the truth. With
    /// no sample, unchanged.
    pub fn deadline_to_relay(&self, local: i64, now: i64) -> i64 {
        self.bounds(now)
            .map_or(local, |(lo, _)| local.saturating_add(lo))
    }

    /// A deadline on the relay's clock as the earliest caller time it can
    /// be (at the caller's time `now`): never later than the truth. With
    /// no sample, unchanged.
    pub fn deadline_to_local(&self, relay: i64, now: i64) -> i64 {
        self.bounds(now)
            .map_or(relay, |(_, hi)| relay.saturating_sub(hi))
    }

    /// The latest the relay's clock can read when the caller's reads `now`.
    pub fn latest_relay_now(&self, now: i64) -> i64 {
        self.bounds(now)
            .map_or(now, |(_, hi)| now.saturating_add(hi))
    }

    /// A caller time on the relay's clock, by the midpoint estimate (the
    /// caller's own time until there is a sample). Not for deadlines.
    pub fn to_relay(&self, local: i64) -> i64 {
        local + self.offset().unwrap_or(0)
    }

    /// A relay time on the caller's clock, by the midpoint estimate. Not
    /// for deadlines.
    pub fn to_local(&self, relay: i64) -> i64 {
        relay - self.offset().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_symmetric_path_gives_the_exact_offset() {
        let mut c = ClockOffset::new();
        assert_eq!(c.offset(), None);
        // Relay 5 s ahead; 20 ms each way.
        c.sample(1_000_000, 1_000_000 + 20_000 + 5_000_000, 1_040_000);
        assert_eq!(c.offset(), Some(5_000_000));
        assert_eq!(c.to_local(c.to_relay(123)), 123);
        assert_eq!(c.rtt(), Some(40_000));
    }

    #[test]
    fn the_shortest_round_trip_wins() {
        let mut c = ClockOffset::new();
        // A pong held 200 ms by a retransmission: its offset is off by 100 ms.
        c.sample(0, 20_000, 240_000);
        c.sample(1_000_000, 1_020_000, 1_040_000);
        assert_eq!(c.offset(), Some(0));
        c.sample(5, 0, 0); // the clock went back: ignored
        assert_eq!(c.offset(), Some(0));
    }

    #[test]
    fn the_bounds_hold_the_truth_whatever_each_way_took() {
        let mut c = ClockOffset::new();
        assert_eq!(c.bounds(0), None);
        assert_eq!(c.deadline_to_local(77, 0), 77);
        // Relay 5 s ahead. 20 ms up, a pong held 60 ms behind a repair.
        c.sample(1_000_000, 1_020_000 + 5_000_000, 1_080_000);
        assert_eq!(c.bounds(1_080_000), Some((4_939_992, 5_020_008)));
        // The midpoint is 20 ms off; the bounds are not.
        assert_eq!(c.offset(), Some(4_980_000));
        // 20 ms each way a second later: the intersection.
        c.sample(2_000_000, 2_020_000 + 5_000_000, 2_040_000);
        let (lo, hi) = c.bounds(2_040_000).unwrap();
        assert!(lo <= 5_000_000 && 5_000_000 <= hi, "{lo} {hi}");
        assert_eq!((lo, hi), (4_979_996, 5_020_004));
        // A deadline converted either way is never later than the truth.
        assert!(c.deadline_to_local(9_000_000, 2_040_000) <= 9_000_000 - 5_000_000);
        assert!(c.deadline_to_relay(4_000_000, 2_040_000) <= 4_000_000 + 5_000_000);
        assert_eq!(c.uncertainty(2_040_000), Some(hi - lo));
    }

    #[test]
    fn samples_that_disagree_beyond_the_drift_leave_the_newest() {
        let mut c = ClockOffset::new();
        c.sample(0, 1_000, 2_000);
        // The relay's clock was stepped 1 s.
        c.sample(10_000_000, 11_001_000, 10_002_000);
        assert_eq!(c.bounds(10_002_000), Some((998_999, 1_001_001)));
    }

    proptest! {
        /// Whatever each way took and however the clocks drift within
        /// [`DRIFT_PPM`], the offset lies within the bounds.
        #[test]
        fn the_offset_is_within_the_bounds(off in -1_000_000_000i64..1_000_000_000,
                                           ppm in -DRIFT_PPM..=DRIFT_PPM,
                                           ways in proptest::collection::vec((0i64..500_000, 0i64..500_000, 0i64..3_000_000), 1..12),
                                           later in 0i64..10_000_000) {
            // The relay's clock: off + ppm·t (its drift against the caller's).
            let relay = |t: i64| t + off + t * ppm / 1_000_000;
            let mut c = ClockOffset::new();
            let mut t = 1_000_000i64;
            for (up, down, gap) in ways {
                c.sample(t, relay(t + up), t + up + down);
                t += up + down + gap;
            }
            let now = t + later;
            let (lo, hi) = c.bounds(now).unwrap();
            let truth = relay(now) - now;
            prop_assert!(lo <= truth && truth <= hi, "{lo} {truth} {hi}");
        }

        /// The error is at most half the asymmetry of the best sample.
        #[test]
        fn error_is_bounded_by_half_the_asymmetry(off in -1_000_000_000i64..1_000_000_000,
                                                 up in 0i64..500_000, down in 0i64..500_000, t1 in 0i64..1_000_000_000) {
            let mut c = ClockOffset::new();
            c.sample(t1, t1 + up + off, t1 + up + down);
            let e = (c.offset().unwrap() - off).abs();
            prop_assert!(e <= (up - down).abs() / 2 + 1, "error {e}");
        }
    }
}
