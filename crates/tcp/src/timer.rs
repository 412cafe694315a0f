//! Connection timers (after quinn-proto's `connection/timer.rs`): an enum
//! with one variant per timer and a small table whose minimum is the next
//! wake-up.

use crate::time::Instant;

/// The timers of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Retransmission timer for SYN, SYN-ACK, data and FIN (RFC 6298 §5).
    Retransmit = 0,
    /// Persist timer: zero-window probes (RFC 9293 §3.8.6.1) and the
    /// sender-side SWS override (RFC 9293 §3.8.6.2.1).
    Persist = 1,
    /// Delayed ACK (RFC 9293 §3.8.6.3, RFC 5681 §4.2).
    DelayedAck = 2,
    /// Keep-alive (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6).
    Keepalive = 3,
    /// TIME-WAIT 2*MSL (RFC 9293 §3.10.7.4).
    TimeWait = 4,
    /// RACK reordering timer (RFC 8985 §6.2 step 5): a segment sent before
    /// a delivered one becomes lost once its reordering window has passed.
    Reorder = 5,
    /// Tail loss probe timeout, PTO (RFC 8985 §7.2).
    Tlp = 6,
    /// The pacer releases the next data segment (`crate::pacing`).
    Pacing = 7,
}

impl Timer {
    /// All timers, in the order they are serviced when due together. The
    /// RACK timers go before the RTO: when the PTO is capped at the RTO
    /// deadline, the probe is sent and re-arms the RTO instead (RFC 8985
    /// §8: the three timers are mutually exclusive).
    pub(crate) const ALL: [Timer; 8] = [
        Timer::TimeWait,
        Timer::Reorder,
        Timer::Tlp,
        Timer::Retransmit,
        Timer::Persist,
        Timer::DelayedAck,
        Timer::Keepalive,
        Timer::Pacing,
    ];
}

/// Deadline per timer, in nanoseconds of engine time; [`UNARMED`] when the
/// timer is not armed (a deadline 584 years on is never reached: the same
/// as unarmed). Eight bytes a timer rather than sixteen for an
/// `Option<Instant>`: every connection holds one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimerTable {
    data: [u64; 8],
}

/// A timer that is not armed.
const UNARMED: u64 = u64::MAX;

impl Default for TimerTable {
    fn default() -> Self {
        TimerTable { data: [UNARMED; 8] }
    }
}

impl TimerTable {
    /// Arm `timer` for `at` (replacing any deadline).
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.data[timer as usize] = at.as_nanos();
    }
    /// Disarm `timer`.
    pub(crate) fn stop(&mut self, timer: Timer) {
        self.data[timer as usize] = UNARMED;
    }
    /// `timer` is armed.
    pub(crate) fn is_set(&self, timer: Timer) -> bool {
        self.data[timer as usize] != UNARMED
    }
    /// Deadline of `timer`, if armed.
    pub(crate) fn deadline(&self, timer: Timer) -> Option<Instant> {
        let t = self.data[timer as usize];
        (t != UNARMED).then(|| Instant::from_nanos(t))
    }
    /// `timer` is armed and due at `now`.
    pub(crate) fn is_expired(&self, timer: Timer, now: Instant) -> bool {
        let t = self.data[timer as usize];
        t != UNARMED && t <= now.as_nanos()
    }
    /// Earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        let t = *self.data.iter().min().expect("eight timers");
        (t != UNARMED).then(|| Instant::from_nanos(t))
    }
    /// Disarm everything.
    pub(crate) fn clear(&mut self) {
        self.data = [UNARMED; 8];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_the_minimum() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Keepalive, Instant::from_nanos(30));
        t.set(Timer::DelayedAck, Instant::from_nanos(10));
        assert_eq!(t.next(), Some(Instant::from_nanos(10)));
        assert!(t.is_expired(Timer::DelayedAck, Instant::from_nanos(10)));
        assert!(!t.is_expired(Timer::Keepalive, Instant::from_nanos(10)));
        t.stop(Timer::DelayedAck);
        assert_eq!(t.next(), Some(Instant::from_nanos(30)));
        t.set(Timer::Tlp, Instant::from_nanos(5));
        assert_eq!(t.next(), Some(Instant::from_nanos(5)));
        t.clear();
        assert!(!t.is_set(Timer::Keepalive));
        assert_eq!(t.next(), None);
    }
}
