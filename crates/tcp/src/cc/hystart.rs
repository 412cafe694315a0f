//! HyStart++ (RFC 9406): leave slow start before it overshoots.
//!
//! Plain slow start doubles cwnd every round trip until a loss; on a path
//! with a drop-tail queue of about one BDP it ends with roughly half a window
//! lost, a long SACK recovery and often an RTO (Linux avoids this with
//! HyStart; RFC 9406 is the IETF's version). HyStart++ watches the minimum
//! RTT of each round: when it rises by more than a threshold the queue is
//! building, and slow start turns into Conservative Slow Start (CSS: growth
//! divided by 4) for at most 5 rounds before congestion avoidance; if the RTT
//! falls back below the baseline, slow start resumes (a spurious exit).
//!
//! Shared by [`NewReno`](super::NewReno) and [`Cubic`](super::Cubic); the
//! engine feeds RTT samples with the sequence numbers that delimit rounds via
//! [`CongestionControl::on_rtt_sample`](super::CongestionControl::on_rtt_sample).

use hollywood_wire::SeqNumber;
use std::time::Duration;

//= RFC 9406 §4.3 constants (recommended values).
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
const MIN_RTT_DIVISOR: u32 = 8;
const N_RTT_SAMPLE: u32 = 8;
/// Growth in CSS is divided by this.
pub(crate) const CSS_GROWTH_DIVISOR: usize = 4;
const CSS_ROUNDS: u32 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Standard slow start with RTT monitoring.
    SlowStart,
    /// Conservative slow start; `rounds` completed so far.
    Css { baseline: Duration, rounds: u32 },
}

/// What the controller should do after an RTT sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Keep going.
    Continue,
    /// CSS lasted CSS_ROUNDS rounds: set ssthresh = cwnd (enter congestion
    /// avoidance).
    EnterCongestionAvoidance,
}

/// Per-connection HyStart++ state (RFC 9406 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HyStart {
    phase: Phase,
    window_end: Option<SeqNumber>,
    last_round_min: Option<Duration>,
    current_round_min: Option<Duration>,
    samples: u32,
}

impl Default for HyStart {
    fn default() -> Self {
        HyStart {
            phase: Phase::SlowStart,
            window_end: None,
            last_round_min: None,
            current_round_min: None,
            samples: 0,
        }
    }
}

impl HyStart {
    /// Divisor to apply to slow-start growth (1 in slow start, 4 in CSS).
    pub(crate) fn growth_divisor(&self) -> usize {
        match self.phase {
            Phase::SlowStart => 1,
            Phase::Css { .. } => CSS_GROWTH_DIVISOR,
        }
    }

    /// Forget everything (after a congestion event or RTO; the next slow
    /// start begins afresh — RFC 9406 §4.3 allows using HyStart++ then).
    pub(crate) fn reset(&mut self) {
        *self = HyStart::default();
    }

    /// An RTT sample from an ACK in slow start. `snd_una` is the cumulative
    /// ACK, `snd_nxt` the next sequence number to send (round boundaries,
    /// RFC 9406 §4.2: a round ends when an ACK covers `windowEnd`).
    pub(crate) fn on_rtt_sample(
        &mut self,
        rtt: Duration,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
    ) -> Verdict {
        // Round boundaries.
        let new_round = match self.window_end {
            None => true,
            Some(end) => snd_una >= end,
        };
        if new_round {
            self.window_end = Some(snd_nxt);
            if self.window_end.is_some() && self.current_round_min.is_some() {
                self.last_round_min = self.current_round_min;
            }
            self.current_round_min = None;
            self.samples = 0;
            if let Phase::Css { baseline, rounds } = self.phase {
                let rounds = rounds + 1;
                if rounds >= CSS_ROUNDS {
                    //= RFC 9406 §4.2: after CSS_ROUNDS rounds in CSS,
                    //= ssthresh = cwnd and congestion avoidance.
                    self.reset();
                    return Verdict::EnterCongestionAvoidance;
                }
                self.phase = Phase::Css { baseline, rounds };
            }
        }
        self.current_round_min = Some(self.current_round_min.map_or(rtt, |m| m.min(rtt)));
        self.samples += 1;
        if self.samples < N_RTT_SAMPLE {
            return Verdict::Continue;
        }
        let (Some(cur), Some(last)) = (self.current_round_min, self.last_round_min) else {
            return Verdict::Continue;
        };
        match self.phase {
            Phase::SlowStart => {
                //= RFC 9406 §4.2: RttThresh = clamp(lastRoundMinRTT / 8,
                //= MIN_RTT_THRESH, MAX_RTT_THRESH); delay increase ⇒ CSS.
                let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                if cur >= last + thresh {
                    self.phase = Phase::Css {
                        baseline: cur,
                        rounds: 0,
                    };
                }
            }
            Phase::Css { baseline, .. } => {
                //= RFC 9406 §4.2: the RTT fell below the CSS baseline: the
                //= exit was spurious, resume slow start.
                if cur < baseline {
                    self.phase = Phase::SlowStart;
                }
            }
        }
        Verdict::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Feed `rounds` rounds of `per_round` samples with RTT `rtt(round)`.
    fn drive(
        h: &mut HyStart,
        rounds: u32,
        per_round: u32,
        rtt: impl Fn(u32) -> Duration,
    ) -> Vec<Verdict> {
        let mut v = Vec::new();
        // Continue from the current round (a previous `drive` call).
        let mut una = h.window_end.map_or(SeqNumber(0), |e| e - 1000usize);
        let mut nxt = una + 1000usize;
        for r in 0..rounds {
            for _ in 0..per_round {
                v.push(h.on_rtt_sample(rtt(r), una, nxt));
            }
            // The next ACK completes the round.
            una = nxt;
            nxt += 1000usize;
        }
        v
    }

    #[test]
    fn flat_rtt_stays_in_slow_start() {
        let mut h = HyStart::default();
        let v = drive(&mut h, 20, 10, |_| ms(50));
        assert!(v.iter().all(|x| *x == Verdict::Continue));
        assert_eq!(h.growth_divisor(), 1);
    }

    #[test]
    fn rising_rtt_enters_css_then_congestion_avoidance() {
        let mut h = HyStart::default();
        // 50 ms for 3 rounds, then +10 ms (threshold = 50/8 = 6.25 ms).
        let v = drive(&mut h, 4, 10, |r| if r < 3 { ms(50) } else { ms(60) });
        assert!(v.iter().all(|x| *x == Verdict::Continue));
        assert_eq!(h.growth_divisor(), CSS_GROWTH_DIVISOR);
        // Five more rounds at the higher RTT end CSS.
        let v = drive(&mut h, 6, 10, |_| ms(61));
        assert!(v.contains(&Verdict::EnterCongestionAvoidance));
    }

    #[test]
    fn small_rise_below_threshold_is_ignored() {
        let mut h = HyStart::default();
        // Threshold is at least 4 ms: +3 ms does not count.
        drive(&mut h, 5, 10, |r| if r < 2 { ms(10) } else { ms(13) });
        assert_eq!(h.growth_divisor(), 1);
    }

    #[test]
    fn rtt_falling_below_baseline_resumes_slow_start() {
        let mut h = HyStart::default();
        drive(&mut h, 4, 10, |r| if r < 3 { ms(50) } else { ms(70) });
        assert_eq!(h.growth_divisor(), CSS_GROWTH_DIVISOR);
        drive(&mut h, 1, 10, |_| ms(55));
        assert_eq!(h.growth_divisor(), 1);
    }

    #[test]
    fn needs_enough_samples() {
        let mut h = HyStart::default();
        // Only 5 samples per round: never decides.
        drive(&mut h, 6, 5, |r| ms(50 + 20 * r as u64));
        assert_eq!(h.growth_divisor(), 1);
    }
}
