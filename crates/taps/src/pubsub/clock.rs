//! The caller's estimate of the relay's clock (NTP's on-wire exchange,
//! RFC 5905 §8, with its clock filter's idea: trust the sample with the
//! shortest round trip).
//!
//! A sample is (t1 caller sends, t2 relay receives and answers at once,
//! t4 caller receives): the round trip is t4 − t1 and the offset
//! θ = t2 − (t1 + t4)/2, wrong by at most half the round trip's asymmetry.
//! A sample delayed by a retransmission has a long round trip and is
//! passed over. Sans-IO: times are microseconds given by the caller.

/// Samples kept (the last this many; the one with the shortest round trip
/// is used).
pub const SAMPLES: usize = 8;

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct ClockOffset {
    /// (round trip, offset), newest last.
    samples: Vec<(i64, i64)>,
}

impl ClockOffset {
    /// No samples yet.
    pub fn new() -> ClockOffset {
        ClockOffset::default()
    }

    /// A sample from a hello/accept or ping/pong exchange. A sample with a
    /// negative round trip (a clock that went back) is ignored.
    pub fn sample(&mut self, t1: i64, t2: i64, t4: i64) {
        let rtt = t4 - t1;
        if rtt < 0 {
            return;
        }
        if self.samples.len() == SAMPLES {
            self.samples.remove(0);
        }
        self.samples.push((rtt, t2 - t1 - rtt / 2));
    }

    fn best(&self) -> Option<(i64, i64)> {
        self.samples.iter().copied().min_by_key(|(rtt, _)| *rtt)
    }

    /// Relay clock minus caller clock (µs), once there is a sample.
    pub fn offset(&self) -> Option<i64> {
        self.best().map(|(_, o)| o)
    }

    /// The round trip of the sample used: twice the offset's worst error.
    pub fn rtt(&self) -> Option<i64> {
        self.best().map(|(r, _)| r)
    }

    /// A caller time on the relay's clock (the caller's own time until
    /// there is a sample).
    pub fn to_relay(&self, local: i64) -> i64 {
        local + self.offset().unwrap_or(0)
    }

    /// A relay time on the caller's clock.
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

    proptest! {
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
