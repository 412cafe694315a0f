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

mod cubic;
mod new_reno;

pub use cubic::Cubic;
pub use new_reno::NewReno;

use crate::time::Instant;
use std::time::Duration;

/// Which algorithm a connection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CcAlgorithm {
    /// RFC 5681 + RFC 6582.
    NewReno,
    /// RFC 9438 (the Linux default).
    #[default]
    Cubic,
}

impl CcAlgorithm {
    /// Build a controller for a connection with sender MSS `smss` and an
    /// initial window of `initial_cwnd_segments` (RFC 6928: 10).
    pub fn build(self, smss: usize, initial_cwnd_segments: usize) -> Box<dyn CongestionControl> {
        match self {
            CcAlgorithm::NewReno => Box::new(NewReno::new(smss, initial_cwnd_segments)),
            CcAlgorithm::Cubic => Box::new(Cubic::new(smss, initial_cwnd_segments)),
        }
    }
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
    /// Whether the next ACK is handled by slow start (`cwnd < ssthresh`,
    /// RFC 5681 §3.1).
    fn in_slow_start(&self) -> bool {
        self.cwnd() < self.ssthresh()
    }
}

/// RFC 3465 §2.2: the ABC limit L on the increase per ACK in slow start,
/// in segments (L = 2*SMSS).
pub(crate) const ABC_LIMIT_SEGMENTS: usize = 2;

/// Whether the sender was limited by cwnd (and not by the application or
/// the receive window) when an ACK arrived; see the module doc for the rule
/// (RFC 9438 §5.8, RFC 7661 §4). `flight_size` is measured before the ACK.
pub(crate) fn is_cwnd_limited(cwnd: usize, flight_size: usize, smss: usize, slow_start: bool) -> bool {
    if slow_start {
        flight_size.saturating_mul(2) >= cwnd
    } else {
        flight_size.saturating_add(smss.saturating_mul(3)) >= cwnd
    }
}

/// The smallest window after a loss-triggered reduction (RFC 5681 §3.1
/// eq. 4, RFC 9438 §4.6): 2 segments.
pub(crate) fn min_window(smss: usize) -> usize {
    smss.saturating_mul(2)
}
