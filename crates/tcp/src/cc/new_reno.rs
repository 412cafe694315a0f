//! NewReno congestion control: RFC 5681 slow start and congestion
//! avoidance with RFC 3465 byte counting; the window side of RFC 6582.
//!
//! The loss-recovery machinery itself (the `+3*SMSS` inflation, partial
//! ACKs, the RFC 6675 pipe) lives in the engine; this type only decides
//! cwnd and ssthresh when recovery starts and ends, on RTO and on undo.

use super::hystart::{HyStart, Verdict};
use super::{is_cwnd_limited, min_window, rescale, CongestionControl, ABC_LIMIT_SEGMENTS};
use crate::time::Instant;
use hollywood_wire::SeqNumber;
use std::time::Duration;

/// Window state that an undo restores (RFC 4015, RFC 9438 §4.9.2 applied
/// to Reno).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Saved {
    cwnd: usize,
    ssthresh: usize,
}

/// RFC 5681 / RFC 6582 NewReno window management.
#[derive(Debug, Clone)]
pub struct NewReno {
    /// Sender MSS (bytes), at least 1.
    smss: usize,
    /// Congestion window (bytes).
    cwnd: usize,
    /// Slow-start threshold (bytes); `usize::MAX` until the first reduction
    /// (RFC 5681 §3.1: "arbitrarily high").
    ssthresh: usize,
    /// RFC 3465 §2.1 `bytes_acked` counter for congestion avoidance.
    bytes_acked: usize,
    /// A loss-recovery reduction is in force and `on_recovery_end` has not
    /// run yet.
    recovering: bool,
    /// Reductions since the last ACK outside recovery; consecutive
    /// reductions form one episode and an undo goes back to its start.
    in_episode: bool,
    /// State before the current (or last) reduction episode.
    undo: Option<Saved>,
    /// RFC 9406 slow-start exit.
    hystart: HyStart,
}

impl NewReno {
    /// A controller with sender MSS `smss` (bytes; 0 is treated as 1) and
    /// an initial window of `initial_cwnd_segments` segments (RFC 6928: 10;
    /// at least 1 — RFC 5681 §3.1 IW is in whole segments).
    pub fn new(smss: usize, initial_cwnd_segments: usize) -> NewReno {
        let smss = smss.max(1);
        NewReno {
            smss,
            cwnd: smss.saturating_mul(initial_cwnd_segments.max(1)),
            ssthresh: usize::MAX,
            bytes_acked: 0,
            recovering: false,
            in_episode: false,
            undo: None,
            hystart: HyStart::default(),
        }
    }

    /// The sender MSS the controller counts with.
    pub fn smss(&self) -> usize {
        self.smss
    }

    /// Remember the state before the first reduction of an episode.
    fn begin_reduction(&mut self) {
        self.hystart.reset();
        if !self.in_episode {
            self.undo = Some(Saved {
                cwnd: self.cwnd,
                ssthresh: self.ssthresh,
            });
            self.in_episode = true;
        }
        self.bytes_acked = 0;
    }

    /// `max(FlightSize / 2, 2*SMSS)`: RFC 5681 §3.1 eq. (4).
    fn halved(&self, flight_size: usize) -> usize {
        (flight_size / 2).max(min_window(self.smss))
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> usize {
        self.cwnd
    }

    fn ssthresh(&self) -> usize {
        self.ssthresh
    }

    fn on_ack(&mut self, _now: Instant, bytes_acked: usize, flight_size: usize, _rtt: Duration) {
        self.in_episode = false;
        let slow_start = self.cwnd < self.ssthresh;
        //= RFC 7661 §4 / RFC 9438 §5.8: no growth while not using the window.
        if bytes_acked == 0 || !is_cwnd_limited(self.cwnd, flight_size, self.smss, slow_start) {
            return;
        }
        let mut ca_bytes = bytes_acked;
        if slow_start {
            //= RFC 5681 §3.1 eq. (2) with RFC 3465 §2.2 ABC:
            //= cwnd += min(bytes_acked, L*SMSS), L = 2.
            //= RFC 9406 §4.2: divided by CSS_GROWTH_DIVISOR in CSS.
            let inc =
                bytes_acked.min(ABC_LIMIT_SEGMENTS * self.smss) / self.hystart.growth_divisor();
            let room = self.ssthresh - self.cwnd;
            if inc < room {
                self.cwnd += inc;
                return;
            }
            // Slow start ends at ssthresh; the bytes beyond it count
            // towards congestion avoidance.
            self.cwnd = self.ssthresh;
            ca_bytes = bytes_acked.saturating_sub(room);
            if ca_bytes == 0 {
                return;
            }
        }
        //= RFC 3465 §2.1: bytes_acked accumulates; once it reaches cwnd it
        //= is reduced by cwnd and cwnd grows by one SMSS. Exactly one SMSS
        //= per cwnd of acknowledged bytes, i.e. RFC 5681 §3.1 eq. (3)
        //= (cwnd += SMSS*SMSS/cwnd per ACK) without its rounding error.
        self.bytes_acked = self.bytes_acked.saturating_add(ca_bytes);
        if self.bytes_acked >= self.cwnd {
            self.bytes_acked -= self.cwnd;
            self.cwnd = self.cwnd.saturating_add(self.smss);
        }
    }

    /// Enter loss recovery: `ssthresh = max(FlightSize/2, 2*SMSS)` and
    /// `cwnd = ssthresh` (RFC 5681 §3.2 step 2, RFC 6582 §3.2 step 2,
    /// RFC 6675 §5 step 4.2). The value is the *post-recovery* window: the
    /// engine adds the `3*SMSS` (and per-dupACK) inflation of RFC 5681 §3.2
    /// step 3-4 / RFC 6582 on top of it while recovery lasts.
    fn on_congestion_event(&mut self, _now: Instant, flight_size: usize) {
        self.begin_reduction();
        self.ssthresh = self.halved(flight_size);
        self.cwnd = self.ssthresh;
        self.recovering = true;
    }

    /// Leave recovery. We take RFC 6582 §3.2 step 3 option (1):
    /// `cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS)`, where
    /// `flight_size` is what remains outstanding after the full ACK. The RFC
    /// recommends this choice to avoid a burst when little data is left in
    /// flight; slow start then climbs back to ssthresh within an RTT or so.
    /// A no-op unless a reduction is in force (e.g. after an undo or RTO).
    fn on_recovery_end(&mut self, _now: Instant, flight_size: usize) {
        if !self.recovering {
            return;
        }
        self.recovering = false;
        // Leave recovery with cwnd = ssthresh, as Linux does (RFC 6937 §3:
        // at the end of recovery PRR leaves cwnd at ssthresh). RFC 6582's
        // deflation to FlightSize + SMSS (§3.2 step 3, option 1) collapses
        // the window to ~2 segments when the recovery-ending ACK covers
        // nearly everything outstanding, and one lost ACK then costs an RTO.
        let _ = flight_size;
        self.cwnd = self.ssthresh;
    }

    /// `ssthresh = max(FlightSize/2, 2*SMSS)`, `cwnd = LW = 1 SMSS`
    /// (RFC 5681 §3.1 eq. (4) and the loss-window rule after it).
    fn on_rto(&mut self, _now: Instant, flight_size: usize) {
        self.begin_reduction();
        self.ssthresh = self.halved(flight_size);
        self.cwnd = self.smss;
        self.recovering = false;
    }

    /// Keep the window's size in segments (see the module doc of `cc`).
    fn set_mss(&mut self, smss: usize) {
        let smss = smss.max(1);
        if smss == self.smss {
            return;
        }
        let old = self.smss;
        self.smss = smss;
        self.cwnd = rescale(self.cwnd, old, smss).max(smss);
        if self.ssthresh != usize::MAX {
            self.ssthresh = rescale(self.ssthresh, old, smss).max(min_window(smss));
        }
        self.bytes_acked = 0;
        self.undo = None;
        self.in_episode = false;
    }

    /// Undo the last reduction episode (RFC 4015 §3.1's goal of restoring
    /// the pre-timeout state; for fast retransmits, RFC 3708 detection):
    /// restore cwnd and ssthresh saved before it, as RFC 9438 §4.9.2 does
    /// for CUBIC, but only if the current cwnd is smaller — a late detection
    /// keeps the window grown since. Ends any recovery reduction in force.
    fn on_spurious_congestion(&mut self, _now: Instant) {
        let Some(saved) = self.undo.take() else {
            return;
        };
        self.recovering = false;
        // The episode is over: the next reduction saves afresh.
        self.in_episode = false;
        if self.cwnd < saved.cwnd {
            self.cwnd = saved.cwnd;
            self.ssthresh = saved.ssthresh;
            self.bytes_acked = 0;
        }
    }

    fn name(&self) -> &'static str {
        "newreno"
    }

    fn on_rtt_sample(
        &mut self,
        _now: Instant,
        rtt: Duration,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
    ) {
        if self.cwnd < self.ssthresh
            && self.hystart.on_rtt_sample(rtt, snd_una, snd_nxt)
                == Verdict::EnterCongestionAvoidance
        {
            self.ssthresh = self.cwnd.max(min_window(self.smss));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::{operation, Model, Operation, IW, SMSS};
    use super::*;
    use proptest::prelude::*;

    const RTT: Duration = Duration::from_millis(100);
    const T: Instant = Instant::from_nanos(1_000_000_000);

    fn reno() -> NewReno {
        NewReno::new(SMSS, IW)
    }

    /// ACK a whole window one full segment at a time, cwnd-limited.
    fn ack_window(cc: &mut NewReno, segment: usize) {
        let window = cc.cwnd();
        let mut left = window;
        while left > 0 {
            let b = left.min(segment);
            let flight = cc.cwnd();
            cc.on_ack(T, b, flight, RTT);
            left -= b;
        }
    }

    #[test]
    fn initial_state() {
        let cc = reno();
        assert_eq!(cc.cwnd(), 10 * SMSS);
        assert_eq!(cc.ssthresh(), usize::MAX);
        assert!(cc.in_slow_start());
        assert_eq!(cc.name(), "newreno");
        // Degenerate arguments do not yield a zero window.
        let cc = NewReno::new(0, 0);
        assert_eq!((cc.smss(), cc.cwnd()), (1, 1));
    }

    #[test]
    fn slow_start_doubles_per_rtt() {
        let mut cc = reno();
        for rtt in 1..=5 {
            ack_window(&mut cc, SMSS);
            assert_eq!(cc.cwnd(), (10 << rtt) * SMSS);
        }
        // With delayed ACKs (2 segments per ACK) ABC still doubles.
        let mut cc = reno();
        ack_window(&mut cc, 2 * SMSS);
        assert_eq!(cc.cwnd(), 20 * SMSS);
    }

    #[test]
    fn abc_limits_stretch_acks_to_two_segments() {
        let mut cc = reno();
        cc.on_ack(T, 8 * SMSS, 10 * SMSS, RTT);
        assert_eq!(cc.cwnd(), 12 * SMSS);
        // A small ACK counts only its bytes.
        cc.on_ack(T, 100, 12 * SMSS, RTT);
        assert_eq!(cc.cwnd(), 12 * SMSS + 100);
    }

    #[test]
    fn slow_start_stops_at_ssthresh_and_carries_the_rest() {
        let mut cc = reno();
        cc.on_rto(T, 40 * SMSS); // ssthresh = 20, cwnd = 1
        assert_eq!(cc.cwnd(), SMSS);
        while cc.in_slow_start() {
            let flight = cc.cwnd();
            cc.on_ack(T, SMSS, flight, RTT);
        }
        assert_eq!(cc.cwnd(), 20 * SMSS);
        // Overshoot: the ACK that crosses ssthresh caps at ssthresh.
        let mut cc = reno();
        cc.on_rto(T, 40 * SMSS); // ssthresh = 20, cwnd = 1
        cc.cwnd = 20 * SMSS - 500; // just below ssthresh
        cc.on_ack(T, 2 * SMSS, 20 * SMSS, RTT);
        assert_eq!(cc.cwnd(), 20 * SMSS);
        assert_eq!(cc.bytes_acked, 2 * SMSS - 500);
    }

    #[test]
    fn congestion_avoidance_adds_one_smss_per_window() {
        let mut cc = reno();
        cc.on_congestion_event(T, 40 * SMSS);
        cc.on_recovery_end(T, 30 * SMSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (20 * SMSS, 20 * SMSS));
        assert!(!cc.in_slow_start());
        for i in 1..=10 {
            ack_window(&mut cc, SMSS);
            assert_eq!(cc.cwnd(), (20 + i) * SMSS);
        }
        // Byte counting is exact for sub-MSS and odd-sized ACKs too: 30*SMSS
        // of 333-byte ACKs still adds exactly one SMSS.
        let before = cc.cwnd();
        let mut acked = 0;
        while acked + 333 <= before {
            cc.on_ack(T, 333, before, RTT);
            acked += 333;
        }
        assert_eq!(cc.cwnd(), before);
        cc.on_ack(T, before - acked, before, RTT);
        assert_eq!(cc.cwnd(), before + SMSS);
    }

    #[test]
    fn congestion_event_halves_flight() {
        let mut cc = reno();
        cc.on_congestion_event(T, 31 * SMSS);
        assert_eq!(cc.ssthresh(), 31 * SMSS / 2);
        assert_eq!(cc.cwnd(), 31 * SMSS / 2);
        // Floor of 2*SMSS.
        let mut cc = reno();
        cc.on_congestion_event(T, SMSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (2 * SMSS, 2 * SMSS));
    }

    #[test]
    fn recovery_end_leaves_cwnd_at_ssthresh() {
        // Whatever is in flight when recovery ends, cwnd = ssthresh (RFC 6937
        // end of recovery; no collapse when the final ACK covers everything).
        for flight in [0, 5 * SMSS, 25 * SMSS] {
            let mut cc = reno();
            cc.on_congestion_event(T, 40 * SMSS);
            cc.on_recovery_end(T, flight);
            assert_eq!(cc.cwnd(), 20 * SMSS);
            assert_eq!(cc.ssthresh(), 20 * SMSS);
            // A second call is a no-op.
            cc.on_ack(T, SMSS, 20 * SMSS, RTT);
            let grown = cc.cwnd();
            cc.on_recovery_end(T, 0);
            assert_eq!(cc.cwnd(), grown);
        }
    }

    #[test]
    fn rto_sets_loss_window() {
        let mut cc = reno();
        cc.on_rto(T, 10 * SMSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (SMSS, 5 * SMSS));
        ack_window(&mut cc, SMSS);
        assert_eq!(cc.cwnd(), 2 * SMSS);
    }

    #[test]
    fn app_limited_acks_do_not_grow() {
        let mut cc = reno();
        cc.on_ack(T, SMSS, 4 * SMSS, RTT); // 4 < 10/2 outstanding
        assert_eq!(cc.cwnd(), 10 * SMSS);
        cc.on_ack(T, SMSS, 5 * SMSS, RTT); // half the window in use: grows
        assert_eq!(cc.cwnd(), 11 * SMSS);
        cc.on_congestion_event(T, 40 * SMSS);
        cc.on_recovery_end(T, 40 * SMSS);
        for _ in 0..100 {
            cc.on_ack(T, SMSS, 16 * SMSS, RTT); // 16 + 3 < 20
        }
        assert_eq!(cc.cwnd(), 20 * SMSS);
    }

    #[test]
    fn spurious_congestion_restores_previous_window() {
        let mut cc = reno();
        ack_window(&mut cc, SMSS); // 20 segments
        cc.on_congestion_event(T, 20 * SMSS);
        assert_eq!(cc.cwnd(), 10 * SMSS);
        cc.on_spurious_congestion(T);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (20 * SMSS, usize::MAX));
        // The undo is consumed, and recovery_end after it is a no-op.
        cc.on_recovery_end(T, 0);
        assert_eq!(cc.cwnd(), 20 * SMSS);
        cc.on_spurious_congestion(T);
        assert_eq!(cc.cwnd(), 20 * SMSS);
        // Congestion event then RTO in one episode: undo goes to the start.
        cc.on_congestion_event(T, 20 * SMSS);
        cc.on_rto(T, 20 * SMSS);
        cc.on_spurious_congestion(T);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (20 * SMSS, usize::MAX));
        // A late detection after cwnd regrew keeps the current window.
        cc.on_congestion_event(T, 20 * SMSS);
        cc.on_recovery_end(T, 20 * SMSS);
        for _ in 0..12 {
            ack_window(&mut cc, SMSS);
        }
        let (cwnd, ssthresh) = (cc.cwnd(), cc.ssthresh());
        assert!(cwnd > 20 * SMSS);
        cc.on_spurious_congestion(T);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (cwnd, ssthresh));
    }

    #[test]
    fn set_mss_keeps_segment_counts() {
        let mut cc = NewReno::new(1460, 10);
        cc.set_mss(1000);
        assert_eq!(cc.cwnd(), 10_000);
        cc.on_congestion_event(T, 40_000);
        cc.set_mss(500);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (10_000, 10_000));
        cc.set_mss(0);
        assert_eq!(cc.smss(), 1);
        assert!(cc.cwnd() >= 1 && cc.ssthresh() >= 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn model(ops in proptest::collection::vec(operation(), 1..300)) {
            let mut m = Model::new(reno(), RTT);
            m.invariants();
            for op in ops {
                let s = m.apply(op);
                if !s.applied {
                    continue;
                }
                let (cwnd, ssthresh) = (m.cc.cwnd(), m.cc.ssthresh());
                match s.op {
                    Operation::Ack { bytes, .. } if s.cwnd_limited => {
                        if s.cwnd_before < s.ssthresh_before {
                            // Slow start: at most L = 2*SMSS per ACK (RFC 3465 §2.2).
                            prop_assert!(cwnd - s.cwnd_before <= bytes.min(2 * SMSS));
                        } else {
                            // Congestion avoidance: at most one SMSS per ACK.
                            prop_assert!(cwnd - s.cwnd_before <= SMSS);
                        }
                    }
                    Operation::Congestion => {
                        prop_assert_eq!(ssthresh, (s.flight / 2).max(2 * SMSS));
                        prop_assert_eq!(cwnd, ssthresh);
                    }
                    Operation::Rto => {
                        prop_assert_eq!(ssthresh, (s.flight / 2).max(2 * SMSS));
                    }
                    Operation::RecoveryEnd { .. } if m.cc.recovering => {
                        prop_assert!(false, "still recovering after recovery end");
                    }
                    _ => {}
                }
            }
        }
    }
}
