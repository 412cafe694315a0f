//! Pacing: spacing data segments at a rate instead of sending a window in
//! a burst (draft-ietf-ccwg-bbr-01 §4.6.1 "pacing rate", §5.6.3 "send
//! quantum"; Linux `sk_pacing_rate` with its default for loss-based
//! algorithms).
//!
//! A token bucket: tokens (bytes) accrue at the pacing rate up to one send
//! quantum; a segment may go when the bucket holds at least its length
//! (or a full quantum, for segments larger than the quantum), and takes
//! its length out of it. All arithmetic is integer nanoseconds and bytes.

use crate::time::Instant;
use std::time::Duration;

/// Smallest burst the pacer allows, in segments (Linux keeps at least two
/// segments per TSO burst; draft §5.6.3 sends at least 2 SMSS at low rates).
pub const MIN_QUANTUM_SEGMENTS: usize = 2;

/// Largest burst: 64 KB (draft §5.6.3, Linux's TSO autosizing cap).
pub const MAX_QUANTUM: usize = 64 * 1024;

/// The default send quantum at `rate` bytes/s for segments of `smss`:
/// one millisecond of data, at least two segments, at most 64 KB.
pub fn default_quantum(rate: u64, smss: usize) -> usize {
    let one_ms = (rate / 1000) as usize;
    one_ms.clamp(
        MIN_QUANTUM_SEGMENTS * smss,
        MAX_QUANTUM.max(MIN_QUANTUM_SEGMENTS * smss),
    )
}

/// A token-bucket pacer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pacer {
    /// Bytes that may go now.
    tokens: u64,
    /// When `tokens` was last brought up to date.
    last: Option<Instant>,
}

impl Pacer {
    fn refill(&mut self, now: Instant, rate: u64, quantum: u64) {
        match self.last {
            None => self.tokens = quantum,
            Some(t) => {
                let dt = now.saturating_duration_since(t).as_nanos();
                let add = dt.saturating_mul(u128::from(rate)) / 1_000_000_000;
                self.tokens = (u128::from(self.tokens) + add).min(u128::from(quantum)) as u64;
            }
        }
        self.last = Some(now);
    }

    /// Whether `len` bytes may be sent at `now` with pacing `rate`
    /// (bytes/s) and burst `quantum`; if not, when they may.
    pub(crate) fn check(
        &mut self,
        now: Instant,
        rate: u64,
        quantum: usize,
        len: usize,
    ) -> Result<(), Instant> {
        let quantum = quantum.max(1) as u64;
        let rate = rate.max(1);
        self.refill(now, rate, quantum);
        let need = (len as u64).min(quantum);
        if self.tokens >= need {
            return Ok(());
        }
        let missing = u128::from(need - self.tokens);
        let wait = missing * 1_000_000_000 / u128::from(rate) + 1;
        Err(now + Duration::from_nanos(wait.min(u128::from(u64::MAX)) as u64))
    }

    /// `len` bytes were sent.
    pub(crate) fn on_sent(&mut self, len: usize) {
        self.tokens = self.tokens.saturating_sub(len as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    #[test]
    fn spaces_segments_at_the_rate_after_one_quantum() {
        // 1 MB/s, quantum 3000 bytes, 1000-byte segments: three at once,
        // then one per millisecond.
        let mut p = Pacer::default();
        let mut sent = Vec::new();
        let mut now = at(0);
        while sent.len() < 10 {
            match p.check(now, 1_000_000, 3000, 1000) {
                Ok(()) => {
                    p.on_sent(1000);
                    sent.push(now);
                }
                Err(t) => {
                    assert!(t > now);
                    now = t;
                }
            }
        }
        assert_eq!(&sent[..3], &[at(0), at(0), at(0)]);
        for w in sent[3..].windows(2) {
            let gap = w[1].saturating_duration_since(w[0]);
            assert!(
                gap >= Duration::from_micros(999) && gap <= Duration::from_micros(1001),
                "{gap:?}"
            );
        }
    }

    #[test]
    fn idle_time_accrues_at_most_one_quantum() {
        let mut p = Pacer::default();
        assert!(p.check(at(0), 1_000_000, 2000, 1000).is_ok());
        p.on_sent(1000);
        assert!(p.check(at(0), 1_000_000, 2000, 1000).is_ok());
        p.on_sent(1000);
        // A long pause: only two segments may go at once again.
        let t = at(10_000_000);
        assert!(p.check(t, 1_000_000, 2000, 1000).is_ok());
        p.on_sent(1000);
        assert!(p.check(t, 1_000_000, 2000, 1000).is_ok());
        p.on_sent(1000);
        assert!(p.check(t, 1_000_000, 2000, 1000).is_err());
    }

    #[test]
    fn a_segment_larger_than_the_quantum_waits_for_a_full_bucket() {
        let mut p = Pacer::default();
        assert!(p.check(at(0), 1000, 100, 1500).is_ok());
        p.on_sent(1500);
        let Err(t) = p.check(at(0), 1000, 100, 1500) else {
            panic!("must wait")
        };
        assert!(t >= at(100_000), "100 bytes at 1000 B/s: 100 ms");
    }

    #[test]
    fn default_quantum_is_one_millisecond_within_bounds() {
        assert_eq!(default_quantum(1_000, 1448), 2 * 1448);
        assert_eq!(default_quantum(12_500_000, 1448), 12_500);
        assert_eq!(default_quantum(10_000_000_000, 1448), MAX_QUANTUM);
    }
}
