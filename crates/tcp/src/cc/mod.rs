//! Congestion control behind a trait, one file per algorithm
//! (after quinn-proto's `congestion/`). The engine calls the hooks; an
//! algorithm owns `cwnd` and `ssthresh` (in bytes).
//!
//! CONTRACT between the engine (`conn`) and the algorithms:
//! - `on_ack` is called once per ACK that advances SND.UNA outside recovery,
//!   with the number of newly acknowledged bytes (RFC 5681 §3.1, RFC 3465
//!   appropriate byte counting with L = 2*SMSS in slow start).
//! - `on_congestion_event` is called once when loss recovery starts (fast
//!   retransmit: RFC 5681 §3.2 / RFC 6582 / RFC 6675 entry), not per loss.
//! - `on_recovery_end` when recovery completes (NewReno full ACK / RFC 6675
//!   exit): cwnd is set per the algorithm (RFC 6582 §3.2 step 3 deflation).
//! - `on_rto` when the retransmission timer expires (RFC 5681 §3.1 eq. 4:
//!   ssthresh = max(FlightSize/2, 2*SMSS), cwnd = 1 SMSS (loss window)).
//! - `on_spurious_congestion` may undo the last reduction (RFC 4015-ish);
//!   default no-op.
//!
//! Further rules both algorithms in this module follow (engine authors:
//! pass `flight_size` as documented, it matters):
//! - **No growth while application-limited** (RFC 9438 §5.8, RFC 7661 §4):
//!   `on_ack` grows cwnd only if the sender was using it, judged from
//!   `flight_size` (outstanding bytes *before* the ACK, RFC 5681 §2
//!   FlightSize): in slow start `2*flight_size >= cwnd` (cwnd may at most
//!   double a window that was in use, as Linux's `tcp_is_cwnd_limited`
//!   does); in congestion avoidance `flight_size + 3*SMSS >= cwnd` (slack
//!   for the sub-MSS tail that sender SWS avoidance leaves unused, RFC
//!   9293 §3.8.6.2.1, and for a delayed ACK's worth of segments).
//! - `cwnd` is the window *outside* recovery. During recovery the engine
//!   owns the sending allowance (NewReno inflation, RFC 6582 §3.2; the
//!   RFC 6675 pipe); the algorithms only set cwnd/ssthresh on entry and
//!   on exit.
//! - Slow start is `cwnd < ssthresh` (RFC 5681 §3.1 leaves `==` to the
//!   implementation; Linux uses `<`).

pub(crate) mod bbr;
mod cubic;
mod hystart;
mod new_reno;

pub use bbr::{Bbr, BbrState};
pub use cubic::Cubic;
pub use new_reno::NewReno;

use crate::time::Instant;
use hollywood_wire::SeqNumber;
use std::time::Duration;

/// Which algorithm a connection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CcAlgorithm {
    /// RFC 5681 + RFC 6582.
    NewReno,
    /// RFC 9438 (the Linux default).
    #[default]
    Cubic,
    /// BBRv3, draft-ietf-ccwg-bbr-01 (model-based: paces, and sets cwnd
    /// itself during recovery).
    Bbr,
}

impl CcAlgorithm {
    /// Every algorithm, in the order tables list them.
    pub const ALL: [CcAlgorithm; 3] = [CcAlgorithm::NewReno, CcAlgorithm::Cubic, CcAlgorithm::Bbr];

    /// Command-line and JSON name (`newreno`, `cubic`, `bbr`).
    pub fn name(self) -> &'static str {
        match self {
            CcAlgorithm::NewReno => "newreno",
            CcAlgorithm::Cubic => "cubic",
            CcAlgorithm::Bbr => "bbr",
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Result<CcAlgorithm, String> {
        let s = if s == "reno" { "newreno" } else { s };
        CcAlgorithm::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = CcAlgorithm::ALL.iter().map(|a| a.name()).collect();
                format!("unknown congestion control '{s}': use {}", names.join(", "))
            })
    }

    /// Build a controller for a connection with sender MSS `smss` and an
    /// initial window of `initial_cwnd_segments` (RFC 6928: 10).
    pub fn build(self, smss: usize, initial_cwnd_segments: usize) -> Box<dyn CongestionControl> {
        match self {
            CcAlgorithm::NewReno => Box::new(NewReno::new(smss, initial_cwnd_segments)),
            CcAlgorithm::Cubic => Box::new(Cubic::new(smss, initial_cwnd_segments)),
            CcAlgorithm::Bbr => Box::new(Bbr::new(smss, initial_cwnd_segments)),
        }
    }
}

/// A delivery-rate sample (draft-ietf-ccwg-bbr-01 §4.5.2.1, after
/// draft-cheng-iccrg-delivery-rate-estimation): how much was delivered over
/// which interval, measured from the most recently sent packet that this
/// ACK delivered (cumulatively ACKed or newly SACKed). The engine builds it
/// from per-segment send state; a controller reads it in
/// [`CongestionControl::on_delivery`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateSample {
    /// `rs.delivered`: bytes delivered between the send of that packet's
    /// predecessor state (`prior_delivered`) and now.
    pub delivered: u64,
    /// `rs.interval`: the longer of the send and the ACK elapsed times
    /// (a sample is only produced when this is at least the minimum RTT,
    /// as the draft requires).
    pub interval: Duration,
    /// `rs.prior_delivered`: `C.delivered` when that packet was sent (BBR
    /// counts round trips with it).
    pub prior_delivered: u64,
    /// `rs.is_app_limited`: the packet was sent while the sender had no
    /// more data to send (the rate is then a lower bound).
    pub is_app_limited: bool,
    /// `rs.tx_in_flight`: bytes in flight when that packet was sent,
    /// itself included.
    pub tx_in_flight: u64,
    /// `rs.lost`: bytes newly marked lost between that packet's send and
    /// now (`C.lost - P.lost`).
    pub lost: u64,
    /// `rs.newly_acked`: bytes this ACK delivered.
    pub newly_acked: u64,
    /// `rs.newly_lost`: bytes this ACK's loss detection marked lost.
    pub newly_lost: u64,
    /// RTT of that packet when it was never retransmitted (Karn), else
    /// `None`.
    pub rtt: Option<Duration>,
}

impl RateSample {
    /// `rs.delivery_rate` in bytes per second.
    pub fn delivery_rate(&self) -> f64 {
        if self.interval.is_zero() {
            return 0.0;
        }
        self.delivered as f64 / self.interval.as_secs_f64()
    }
}

/// What an ACK told the sender, for model-based controllers (BBR): passed
/// to [`CongestionControl::on_delivery`] once per ACK that acknowledged or
/// SACKed data or marked some lost, after loss detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryEvent {
    /// Arrival time of the ACK.
    pub now: Instant,
    /// `C.delivered` after this ACK: all bytes ever delivered.
    pub delivered: u64,
    /// `C.lost` after this ACK: all bytes ever marked lost.
    pub lost: u64,
    /// Bytes in flight after this ACK (RFC 6675 pipe: sent, not SACKed,
    /// not marked lost, plus retransmissions outstanding).
    pub inflight: u64,
    /// The rate sample, if this ACK delivered data.
    pub rate: Option<RateSample>,
    /// Smallest RTT seen on the connection (RFC 8985 / RFC 6298 samples).
    pub min_rtt: Option<Duration>,
    /// Smoothed RTT.
    pub srtt: Option<Duration>,
    /// The engine is in loss recovery (fast recovery or after an RTO).
    pub in_recovery: bool,
}

/// A segment newly deemed lost, with its send-time state (for BBRv3's
/// per-loss inflight check, draft-ietf-ccwg-bbr-01 §4.5.10.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostSegment {
    /// When the loss was detected.
    pub now: Instant,
    /// Sequence-space length of the segment.
    pub len: u64,
    /// Bytes in flight when it was (last) sent, itself included.
    pub tx_in_flight: u64,
    /// `C.lost` when it was sent.
    pub lost_at_send: u64,
    /// `C.delivered` when it was sent.
    pub delivered_at_send: u64,
    /// Sent while application limited.
    pub is_app_limited: bool,
}

/// A congestion controller. All sizes are bytes.
pub trait CongestionControl: core::fmt::Debug + Send {
    /// Current congestion window.
    fn cwnd(&self) -> usize;
    /// Current slow-start threshold (`usize::MAX` before the first loss).
    fn ssthresh(&self) -> usize;
    /// Newly acknowledged bytes outside loss recovery. `flight_size` is the
    /// data outstanding *before* this ACK; `rtt` the latest smoothed RTT.
    fn on_ack(&mut self, now: Instant, bytes_acked: usize, flight_size: usize, rtt: Duration);
    /// Loss detected by duplicate ACKs / SACK: enter recovery once.
    fn on_congestion_event(&mut self, now: Instant, flight_size: usize);
    /// Recovery finished.
    fn on_recovery_end(&mut self, now: Instant, flight_size: usize);
    /// Retransmission timeout.
    fn on_rto(&mut self, now: Instant, flight_size: usize);
    /// The sender MSS changed (e.g. after option negotiation).
    fn set_mss(&mut self, smss: usize);
    /// The last congestion event was spurious (e.g. found by D-SACK or
    /// timestamps); an algorithm may restore its previous state.
    fn on_spurious_congestion(&mut self, _now: Instant) {}
    /// Short name for logs and JSON (`"newreno"`, `"cubic"`).
    fn name(&self) -> &'static str;
    /// An RTT sample was taken from an ACK (RFC 6298 / RFC 7323 RTTM).
    /// `snd_una` is the cumulative ACK after it, `snd_nxt` the next sequence
    /// number to be sent: together they delimit round trips for HyStart++
    /// (RFC 9406), which both built-in algorithms use in slow start.
    fn on_rtt_sample(
        &mut self,
        _now: Instant,
        _rtt: Duration,
        _snd_una: SeqNumber,
        _snd_nxt: SeqNumber,
    ) {
    }
    /// Whether the next ACK is handled by slow start (`cwnd < ssthresh`,
    /// RFC 5681 §3.1).
    fn in_slow_start(&self) -> bool {
        self.cwnd() < self.ssthresh()
    }
    /// Every ACK that delivered data or let the engine mark segments lost,
    /// after loss detection, in or out of recovery (BBR's per-ACK model
    /// update, draft-ietf-ccwg-bbr-01 §4.2.3 `BBRUpdateOnACK`). Default:
    /// nothing (loss-based algorithms use `on_ack`).
    fn on_delivery(&mut self, _ev: &DeliveryEvent) {}
    /// One segment was newly deemed lost (RACK, RFC 6675 `IsLost`, or an
    /// RTO), before the `on_delivery` of the same ACK (draft-ietf-ccwg-bbr-01
    /// §4.5.10.2 `BBRHandleLostPacket`). Default: nothing.
    fn on_segment_lost(&mut self, _seg: &LostSegment) {}
    /// A data segment of `len` bytes is about to be sent with
    /// `inflight_before` bytes in flight; `app_limited` says the sender
    /// had nothing more to send (draft-ietf-ccwg-bbr-01 §4.4.1
    /// `BBRHandleRestartFromIdle` runs when a flight starts from idle).
    fn on_send(&mut self, _now: Instant, _inflight_before: u64, _len: usize, _app_limited: bool) {}
    /// The rate (bytes per second) at which the engine paces data
    /// segments, if the algorithm sets one (BBR always does). `None`: the
    /// engine's default pacing (`Config::pacing`, from cwnd and SRTT) or
    /// none.
    fn pacing_rate(&self) -> Option<u64> {
        None
    }
    /// The largest burst (bytes) the pacer may release at once, if the
    /// algorithm chooses it (draft-ietf-ccwg-bbr-01 §4.6.3
    /// `BBR.send_quantum`). `None`: the engine's default.
    fn send_quantum(&self) -> Option<usize> {
        None
    }
    /// `true` if the algorithm sets cwnd itself during loss recovery (BBR's
    /// cwnd modulation in loss recovery, draft-ietf-ccwg-bbr-01 §4.6.4.4,
    /// which has no packet conservation any more): the engine
    /// then allows cwnd - pipe instead of PRR (RFC 6937) or NewReno
    /// inflation, as Linux does for `cong_control` algorithms.
    fn owns_recovery_window(&self) -> bool {
        false
    }
}

/// RFC 3465 §2.2: the ABC limit L on the increase per ACK in slow start,
/// in segments (L = 2*SMSS).
pub(crate) const ABC_LIMIT_SEGMENTS: usize = 2;

/// Whether the sender was limited by cwnd (and not by the application or
/// the receive window) when an ACK arrived; see the module doc for the rule
/// (RFC 9438 §5.8, RFC 7661 §4). `flight_size` is measured before the ACK.
pub(crate) fn is_cwnd_limited(
    cwnd: usize,
    flight_size: usize,
    smss: usize,
    slow_start: bool,
) -> bool {
    if slow_start {
        flight_size.saturating_mul(2) >= cwnd
    } else {
        flight_size.saturating_add(smss.saturating_mul(3)) >= cwnd
    }
}

/// `bytes` measured in segments of `old_smss`, re-expressed in segments of
/// `new_smss` (a window keeps its segment count when the MSS changes, as
/// Linux's packet-counted cwnd does). Saturates instead of overflowing.
pub(crate) fn rescale(bytes: usize, old_smss: usize, new_smss: usize) -> usize {
    if bytes == usize::MAX || old_smss == 0 {
        return bytes;
    }
    let v = bytes as u128 * new_smss as u128 / old_smss as u128;
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// The smallest window after a loss-triggered reduction (RFC 5681 §3.1
/// eq. 4, RFC 9438 §4.6): 2 segments.
pub(crate) fn min_window(smss: usize) -> usize {
    smss.saturating_mul(2)
}

/// Model-based testing shared by the algorithms (after s2n-quic's
/// congestion-controller model tests): random [`model::Operation`]
/// sequences that honour the engine contract above drive a controller, and
/// [`model::Model::invariants`] runs after every step. Each algorithm's
/// test module adds its own exact per-step checks.
#[cfg(test)]
pub(crate) mod model {
    use super::{is_cwnd_limited, CongestionControl};
    use crate::time::Instant;
    use proptest::prelude::*;
    use std::time::Duration;

    /// Sender MSS used by the model tests.
    pub(crate) const SMSS: usize = 1000;
    /// Initial window (segments) used by the model tests.
    pub(crate) const IW: usize = 10;

    /// One step of the model.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Operation {
        /// An ACK for `bytes` new bytes outside recovery. With `app_limited`
        /// the sender had only a quarter of cwnd outstanding.
        Ack { bytes: usize, app_limited: bool },
        /// Fast retransmit: enter loss recovery.
        Congestion,
        /// The retransmission timer expired.
        Rto,
        /// Recovery completed with `flight_pct`% of ssthresh outstanding.
        RecoveryEnd { flight_pct: usize },
        /// Virtual time passes.
        AdvanceTime { ms: u64 },
        /// The last reduction turned out to be spurious.
        Spurious,
    }

    /// A random operation; ACKs dominate as they do on a real connection.
    pub(crate) fn operation() -> impl Strategy<Value = Operation> {
        prop_oneof![
            12 => (1..=4 * SMSS, proptest::bool::weighted(0.15))
                .prop_map(|(bytes, app_limited)| Operation::Ack { bytes, app_limited }),
            1 => Just(Operation::Congestion),
            1 => Just(Operation::Rto),
            2 => (0..=150usize).prop_map(|flight_pct| Operation::RecoveryEnd { flight_pct }),
            4 => (0..3000u64).prop_map(|ms| Operation::AdvanceTime { ms }),
            1 => Just(Operation::Spurious),
        ]
    }

    /// Controller state seen around one step, for per-algorithm checks.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Step {
        /// The operation as applied (ACK bytes clipped to the flight).
        pub op: Operation,
        /// Whether the controller was called at all (the contract filters
        /// some operations, e.g. ACKs during recovery).
        pub applied: bool,
        /// Bytes outstanding passed to the hook.
        pub flight: usize,
        /// cwnd before the step.
        pub cwnd_before: usize,
        /// ssthresh before the step.
        pub ssthresh_before: usize,
        /// Whether the sender counted as cwnd-limited (ACKs only).
        pub cwnd_limited: bool,
    }

    /// The model: a controller plus what the engine would know.
    pub(crate) struct Model<C> {
        /// The controller under test.
        pub cc: C,
        now: Instant,
        rtt: Duration,
        in_recovery: bool,
        /// Bytes outstanding while in recovery (the pre-reduction window).
        recovery_flight: usize,
        /// A loss-triggered reduction happened and no RTO since.
        reduced_since_rto: bool,
        /// All bytes acknowledged so far.
        total_acked: usize,
        /// cwnd when the model started (the base of the byte-counting bound).
        initial_cwnd: usize,
    }

    impl<C: CongestionControl> Model<C> {
        /// A model around a fresh controller.
        pub(crate) fn new(cc: C, rtt: Duration) -> Model<C> {
            let initial_cwnd = cc.cwnd();
            Model {
                cc,
                now: Instant::from_nanos(1_000_000_000),
                rtt,
                in_recovery: false,
                recovery_flight: 0,
                reduced_since_rto: false,
                total_acked: 0,
                initial_cwnd,
            }
        }

        /// Apply one operation the way the engine would, check the generic
        /// per-step rules and the invariants, and report what happened.
        pub(crate) fn apply(&mut self, op: Operation) -> Step {
            let cwnd_before = self.cc.cwnd();
            let ssthresh_before = self.cc.ssthresh();
            let mut step = Step {
                op,
                applied: false,
                flight: 0,
                cwnd_before,
                ssthresh_before,
                cwnd_limited: false,
            };
            match op {
                Operation::Ack { bytes, app_limited } => {
                    if self.in_recovery {
                        return step;
                    }
                    let flight = if app_limited {
                        cwnd_before / 4
                    } else {
                        cwnd_before
                    };
                    let bytes = bytes.min(flight).max(1);
                    step.op = Operation::Ack { bytes, app_limited };
                    step.flight = flight;
                    step.cwnd_limited =
                        is_cwnd_limited(cwnd_before, flight, SMSS, self.cc.in_slow_start());
                    // ACK clocking: `flight` bytes are acknowledged per RTT.
                    self.now += self.rtt.mul_f64(bytes as f64 / flight as f64);
                    self.cc.on_ack(self.now, bytes, flight, self.rtt);
                    self.total_acked += bytes;
                    assert!(self.cc.cwnd() >= cwnd_before, "an ACK shrank cwnd");
                    if !step.cwnd_limited {
                        assert_eq!(self.cc.cwnd(), cwnd_before, "grew while app-limited");
                    }
                }
                Operation::Congestion => {
                    if self.in_recovery {
                        return step;
                    }
                    step.flight = cwnd_before;
                    self.cc.on_congestion_event(self.now, cwnd_before);
                    self.in_recovery = true;
                    self.recovery_flight = cwnd_before;
                    self.reduced_since_rto = true;
                    assert!(self.cc.cwnd() <= cwnd_before.max(2 * SMSS));
                }
                Operation::Rto => {
                    step.flight = if self.in_recovery {
                        self.recovery_flight
                    } else {
                        cwnd_before
                    };
                    self.cc.on_rto(self.now, step.flight);
                    self.in_recovery = false;
                    self.reduced_since_rto = false;
                    assert_eq!(self.cc.cwnd(), SMSS, "RTO must leave the loss window");
                }
                Operation::RecoveryEnd { flight_pct } => {
                    if !self.in_recovery {
                        return step;
                    }
                    step.flight = ssthresh_before / 100 * flight_pct;
                    self.cc.on_recovery_end(self.now, step.flight);
                    self.in_recovery = false;
                    assert!(self.cc.cwnd() <= self.cc.ssthresh().max(cwnd_before));
                }
                Operation::AdvanceTime { ms } => {
                    self.now += Duration::from_millis(ms);
                    assert_eq!(self.cc.cwnd(), cwnd_before, "time alone changed cwnd");
                }
                Operation::Spurious => {
                    self.cc.on_spurious_congestion(self.now);
                    // An undo also ends recovery on the engine side.
                    self.in_recovery = false;
                    assert!(self.cc.cwnd() >= cwnd_before, "an undo shrank cwnd");
                }
            }
            step.applied = true;
            self.invariants();
            step
        }

        /// Invariants that hold after every step.
        pub(crate) fn invariants(&self) {
            let (cwnd, ssthresh) = (self.cc.cwnd(), self.cc.ssthresh());
            assert!(cwnd >= SMSS, "cwnd {cwnd} below one segment");
            if self.reduced_since_rto {
                assert!(
                    cwnd >= 2 * SMSS,
                    "cwnd {cwnd} below 2*SMSS after a congestion event"
                );
            }
            assert!(
                ssthresh == usize::MAX || ssthresh >= 2 * SMSS,
                "ssthresh {ssthresh} below 2*SMSS"
            );
            // Slow start at most doubles, congestion avoidance grows slower:
            // the window can never exceed the initial window plus every byte
            // ever acknowledged.
            assert!(
                cwnd <= self.initial_cwnd + self.total_acked,
                "cwnd {cwnd} > IW {} + acked {}",
                self.initial_cwnd,
                self.total_acked
            );
        }
    }
}
