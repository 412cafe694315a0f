//! BBR congestion control, version 3 (BBRv3), as specified by
//! draft-ietf-ccwg-bbr-01 ("BBR Congestion Control", Cardwell, Swett,
//! Beshay, October 2024).
//!
//! Section numbers in the comments are those of draft-ietf-ccwg-bbr-01,
//! where the algorithm is Section 4 ("Detailed Algorithm") and delivery-rate
//! sampling is §4.5.2.1-§4.5.2.4. Later revisions (-02 on) moved the
//! sampling algorithm to a new Section 4 ("Input Signals") and renumbered
//! the algorithm to Section 5: §4.x here is §5.x there.
//!
//! BBR builds a model of the path (the windowed maximum delivery rate
//! `max_bw`, the windowed minimum RTT `min_rtt`, and loss-based bounds on
//! the volume in flight) and derives three control parameters from it: a
//! pacing rate ([`CongestionControl::pacing_rate`]), a send quantum
//! ([`CongestionControl::send_quantum`]) and cwnd. All volumes are bytes:
//! the draft's "packets" are `SMSS` bytes (e.g. `BBRMinPipeCwnd` is
//! `4 * SMSS`), rates are bytes per second.
//!
//! # State machine (§4.1.1)
//!
//! ```text
//!          |
//!          V
//! +---> Startup  ------------+     Startup         pacing 2.77  cwnd 2
//! |        |                 |     Drain           pacing 0.35  cwnd 2
//! |        V                 |     ProbeBW_DOWN    pacing 0.90  cwnd 2
//! |     Drain  --------------+     ProbeBW_CRUISE  pacing 1.00  cwnd 2
//! |        |                 |     ProbeBW_REFILL  pacing 1.00  cwnd 2
//! |        V                 |     ProbeBW_UP      pacing 1.25  cwnd 2.25
//! +---> ProbeBW_DOWN  -------+     ProbeRTT        pacing 1.00  cwnd 0.5
//! | ^      |                 |
//! | |      V                 |     (gains from the §4.6.1 table; Drain
//! | |   ProbeBW_CRUISE ------+     uses 0.35 as §2.5/§4.3.2 say, the
//! | |      |                 |     table's 0.5 is a typo)
//! | |      V                 |
//! | |   ProbeBW_REFILL  -----+
//! | |      |                 |
//! | |      V                 |
//! | |   ProbeBW_UP  ---------+
//! | |      |                 |
//! | +------+                 |
//! |                          |
//! +---- ProbeRTT <-----------+
//! ```
//!
//! [`BbrState::can_transition_to`] lists exactly these edges (DOWN may go
//! straight to REFILL when it is time to probe, §4.3.3.6).
//!
//! # Engine contract
//!
//! The engine drives the controller through the hooks of
//! [`CongestionControl`]; this implementation relies on exactly this:
//!
//! - [`on_send`](CongestionControl::on_send) for every data segment (new or
//!   retransmitted) right before it leaves, with the bytes in flight before
//!   it and whether the sender is application-limited (nothing more queued).
//!   BBR uses it for restart-from-idle (§4.4: `inflight_before == 0` after a
//!   send that left the queue empty, outside loss recovery) and to know
//!   whether cwnd was fully used in the last round (`is_cwnd_limited`, §2.1).
//! - For each ACK: loss detection first, one
//!   [`on_segment_lost`](CongestionControl::on_segment_lost) per newly lost
//!   segment (also for segments an RTO marks lost), then the recovery hooks
//!   ([`on_congestion_event`](CongestionControl::on_congestion_event) when
//!   fast recovery starts, [`on_recovery_end`](CongestionControl::on_recovery_end),
//!   [`on_spurious_congestion`](CongestionControl::on_spurious_congestion)),
//!   then, if the ACK delivered data or marked losses, exactly one
//!   [`on_delivery`](CongestionControl::on_delivery), where the per-ACK
//!   update of §4.2.3 (`BBRUpdateOnACK`) runs.
//! - [`on_rto`](CongestionControl::on_rto) on a retransmission timeout,
//!   after which the engine marks everything lost: cwnd becomes one SMSS
//!   (§4.6.4.4 `cwnd = C.pipe + 1` with `C.pipe` about to be 0) until the
//!   next `on_delivery` grows it again.
//! - [`on_ack`](CongestionControl::on_ack) is ignored: BBR grows cwnd in
//!   `on_delivery` only.
//! - [`owns_recovery_window`](CongestionControl::owns_recovery_window) is
//!   true: the engine allows `cwnd - pipe` during recovery; BBR saves cwnd
//!   on entering recovery or RTO and restores it on exit or undo (§4.6.4.4).
//!
//! Fields of [`DeliveryEvent`] used: `now`, `delivered` (C.delivered: round
//! and loss-round boundaries, ACK-aggregation), `lost` (C.lost, the base of
//! the per-loss check), `inflight` (C.pipe after the ACK), `in_recovery`
//! (entering/leaving recovery is also detected from it, in case a hook was
//! missed), `srtt`/`min_rtt` (only until BBR has its own RTT samples: initial
//! pacing rate §4.6.2 and initial `min_rtt` §4.2.1), and `rate`.
//! Fields of [`RateSample`] used: `delivered`, `interval` (the delivery rate
//! is `delivered / interval`), `prior_delivered` (round counting §4.5.1),
//! `is_app_limited`, `tx_in_flight` and `lost` (loss rate, §4.5.10.2), `rtt`
//! (the min-RTT filter, §4.3.4.4), `newly_acked` (cwnd growth §4.6.4.6,
//! aggregation §4.5.9) and `newly_lost` (Startup loss exit); without a
//! sample the last two are the increase of `C.delivered` and `C.lost` since
//! the previous `on_delivery` (the counters start at 0). When an ACK
//! delivered data but its sample is unusable (interval shorter than the
//! minimum RTT, §4.5.2.3.3), the engine should still pass `Some` with
//! `interval = 0`: BBR then counts the round and checks the loss bounds
//! without taking a bandwidth sample. `None` is accepted too (no round
//! counting on that ACK).
//! Fields of [`LostSegment`] used: `now`, `len`, `tx_in_flight`,
//! `lost_at_send` and `is_app_limited` (§4.5.10.2).
//!
//! # Loss recovery
//!
//! draft-ietf-ccwg-bbr-01 has no packet conservation (BBRv1 and the BBRv2
//! drafts had it): on entering fast recovery cwnd is only saved
//! (§4.6.4.4), and the response to loss is the model's: the short-term
//! bounds `bw_shortterm`/`inflight_shortterm` shrink once per lossy round
//! outside bandwidth probing (§4.5.10.3), `inflight_longterm` drops when
//! the loss rate of probe data exceeds 2 % (§4.5.10.2), and cwnd follows
//! through `BBRBoundCwndForModel` (§4.6.4.7). An RTO sets cwnd to one
//! segment; leaving recovery (end, or undo) restores the saved cwnd, which
//! the next ACK bounds by the model again.
//!
//! # Deviations and interpretations (and why)
//!
//! - **Bytes, not packets.** `BBRRaiseInflightLongtermSlope` (§4.3.3.6) mixes
//!   units once converted to bytes; we keep its intent: `inflight_longterm`
//!   grows by `1, 2, 4, ...` SMSS per round, `probe_up_cnt` being the bytes
//!   ACKed per SMSS of growth (`max(cwnd / growth_segments, SMSS)`), as
//!   Linux does in packets. Reno-coexistence rounds (§4.3.3.5.3) count
//!   `min(bdp, cwnd) / SMSS`.
//! - **End of the probe-feedback round.** §4.3.3.6 `BBRAdaptUpperBounds`
//!   never leaves `ACKS_PROBE_STOPPING`, which would advance the max-bw
//!   filter on every round of DOWN/CRUISE, against §4.5.6 ("one round trip
//!   after exiting ProbeBW_UP"), and keeps `bw_probe_samples` set, against
//!   §4.5.10.2 ("data sent in ... REFILL or UP"). As in Linux BBRv3, the
//!   first round start in that phase advances the filter once, clears
//!   `bw_probe_samples` and returns `ack_phase` to `ACKS_INIT`.
//! - **`MarkConnectionAppLimited` in ProbeRTT** (§4.3.4.4) needs the
//!   engine's delivery-rate sampler; there is no hook for that, so BBR
//!   treats as application-limited every sample whose packet was sent
//!   between ProbeRTT entry and the moment C.delivered passes
//!   `C.delivered + C.pipe` as of the last ProbeRTT ACK, which is what the
//!   engine's sampler would have marked.
//! - **Startup high-loss exit** (§4.3.1.3): "discontiguous lost ranges" are
//!   counted as ACKs that marked new losses (the engine does not say which
//!   ranges were contiguous), as Linux does; "in fast recovery for a full
//!   round" is the ACKed packet having been sent after recovery began.
//! - **Initial pacing rate** (§4.6.2): until an RTT is known the 1 ms
//!   nominal RTT is used; at the first RTT sample (`on_rtt_sample`, or the
//!   `srtt` of the first `on_delivery`), if no bandwidth sample has set the
//!   rate yet, it is recomputed once with that RTT (the draft's "initial
//!   SRTT after the first non-zero RTT sample").
//! - **No zero pacing rate.** A zero bandwidth estimate does not update the
//!   pacing rate (the draft would pace at 0 and stall); `pacing_rate()` is
//!   always at least 1 byte/s.
//! - **Timestamps start at the first event.** The controller has no clock
//!   at construction; the min-RTT, ProbeRTT, cycle and aggregation stamps
//!   that §4.2.1 sets to `Now()` are set at the first hook that carries
//!   `now`.
//! - **Randomness** (§4.3.3.5.3 `BBRPickProbeWait`) comes from a ChaCha8
//!   generator seeded deterministically ([`Bbr::with_seed`], by default a
//!   constant mixed with SMSS): the crate uses no OS entropy.
//! - Not implemented: ECN, `BBR.offload_budget` beyond the draft's
//!   `3 * send_quantum`, and the undo of model state other than cwnd (the
//!   draft restores only cwnd on undo).
//!
//! `ssthresh()` is `usize::MAX` in Startup and afterwards the estimated
//! BDP at unity gain, `BBRInflight(max_bw, 1.0)` (what Linux BBR reports as
//! ssthresh when leaving Startup); BBR never uses it. `in_slow_start()` is
//! true exactly in Startup.
//!
//! # Measured behaviour
//!
//! The tests drive the controller through a packet-level path model (one
//! drop-tail bottleneck, seeded Bernoulli loss, per-packet delivery-rate
//! sampling as in §4.5.2.3). On 10 Mb/s, 40 ms, a 2-BDP buffer: Startup
//! leaves 4 rounds after the bandwidth plateau with `max_bw` = R, Drain
//! empties the queue in under 2 RTTs, greedy goodput is 97 % of R with the
//! RTT in CRUISE at 1.00 x the minimum, ProbeRTT every 5.2 s; with random
//! loss goodput is 90 % of R at 0.5 % and 81 % at 1 % (see
//! `steady_state_goodput_with_random_loss` for why). An application-limited
//! 2 Mb/s sender at 2 % loss paces above its rate while in Startup, but
//! falls behind once in ProbeBW (`live_video_after_greedy_start_...`).

use super::{CongestionControl, DeliveryEvent, LostSegment, RateSample};
use crate::time::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// `BBRStartupPacingGain`: 4 ln 2, the smallest gain that doubles the
/// sending rate each round (§2.5, §4.3.1.1).
pub const STARTUP_PACING_GAIN: f64 = 2.77;
/// `BBRDefaultCwndGain` (§2.6): 2.
pub const DEFAULT_CWND_GAIN: f64 = 2.0;
/// `BBRDrainPacingGain` (§2.5, §4.3.2): 0.35.
pub const DRAIN_PACING_GAIN: f64 = 0.35;
/// ProbeBW_DOWN pacing gain (§4.3.3.1): 0.90.
pub const PROBE_BW_DOWN_PACING_GAIN: f64 = 0.90;
/// ProbeBW_UP pacing gain (§4.3.3.4): 1.25.
pub const PROBE_BW_UP_PACING_GAIN: f64 = 1.25;
/// ProbeBW_UP cwnd gain (§4.3.3.4): 2.25.
pub const PROBE_BW_UP_CWND_GAIN: f64 = 2.25;
/// `BBRProbeRTTCwndGain` (§2.14.2): 0.5.
pub const PROBE_RTT_CWND_GAIN: f64 = 0.5;
/// `BBRPacingMarginPercent` (§2.5, §4.6.2): pace 1 % below `bw`.
pub const PACING_MARGIN_PERCENT: f64 = 1.0;
/// `BBRLossThresh` (§2.8): the highest tolerated per-round loss rate, 2 %.
pub const LOSS_THRESH: f64 = 0.02;
/// `BBRBeta` (§2.8): the multiplicative decrease on a lossy round, 0.7.
pub const BETA: f64 = 0.7;
/// `BBRHeadroom` (§2.8): share of `inflight_longterm` left to others, 0.15.
pub const HEADROOM: f64 = 0.15;
/// `BBRMinPipeCwnd` (§2.8, §4.6.4.3) in segments: 4.
pub const MIN_PIPE_CWND_SEGMENTS: u64 = 4;
/// `BBRExtraAckedFilterLen` (§2.12): 10 packet-timed rounds.
pub const EXTRA_ACKED_FILTER_LEN: u64 = 10;
/// `MinRTTFilterLen` (§2.14.1): 10 s.
pub const MIN_RTT_FILTER_LEN: Duration = Duration::from_secs(10);
/// `ProbeRTTDuration` (§2.14.2): 200 ms.
pub const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// `ProbeRTTInterval` (§2.14.2): 5 s.
pub const PROBE_RTT_INTERVAL: Duration = Duration::from_secs(5);
/// `BBRStartupFullLossCnt` (§4.3.1.3): lossy events per round to leave
/// Startup on loss.
pub const STARTUP_FULL_LOSS_COUNT: u32 = 6;
/// Full-pipe estimator (§4.3.1.2): growth below 25 % ...
const FULL_BW_GROWTH: f64 = 1.25;
/// ... for 3 non-app-limited rounds means the pipe is full.
const FULL_BW_ROUNDS: u32 = 3;
/// Upper bound of the Reno-coexistence probe interval in rounds
/// (§4.3.3.5.3: `min(reno_rounds, 63)`).
const BW_PROBE_MAX_ROUNDS: u64 = 63;
/// Cap on `bw_probe_up_rounds` (§4.3.3.6 `BBRRaiseInflightLongtermSlope`).
const BW_PROBE_UP_MAX_ROUNDS: u32 = 30;
/// `BBR.send_quantum` upper bound (§4.6.3): 64 KBytes.
const SEND_QUANTUM_MAX: u64 = 64 * 1024;
/// Nominal RTT for the initial pacing rate when none is known (§4.6.2).
const NOMINAL_RTT: Duration = Duration::from_millis(1);
/// Default seed of the probe-timing generator (mixed with SMSS).
const DEFAULT_SEED: u64 = 0xBB3_C0FF_EE00_2024;

/// The BBR states (§4.1.1); the four ProbeBW phases are states of their
/// own, as in the draft's diagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BbrState {
    /// Exponential search for the bottleneck bandwidth (§4.3.1).
    Startup,
    /// Drain the queue Startup built (§4.3.2).
    Drain,
    /// Decelerate: pace at 90 % of `bw` until inflight has headroom and is
    /// at most the BDP (§4.3.3.1).
    ProbeBwDown,
    /// Cruise at `bw`, reacting to loss (§4.3.3.2).
    ProbeBwCruise,
    /// One round at `bw` with the short-term bounds lifted (§4.3.3.3).
    ProbeBwRefill,
    /// Accelerate to 125 % of `bw` to probe for more (§4.3.3.4).
    ProbeBwUp,
    /// Cut inflight to half the BDP to measure the propagation RTT
    /// (§4.3.4).
    ProbeRtt,
}

impl BbrState {
    /// Short name for logs (`"startup"`, `"probe_bw_down"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            BbrState::Startup => "startup",
            BbrState::Drain => "drain",
            BbrState::ProbeBwDown => "probe_bw_down",
            BbrState::ProbeBwCruise => "probe_bw_cruise",
            BbrState::ProbeBwRefill => "probe_bw_refill",
            BbrState::ProbeBwUp => "probe_bw_up",
            BbrState::ProbeRtt => "probe_rtt",
        }
    }

    /// One of the four ProbeBW phases (§4.3.3.6 `IsInAProbeBWState`).
    pub fn is_probe_bw(self) -> bool {
        matches!(
            self,
            BbrState::ProbeBwDown
                | BbrState::ProbeBwCruise
                | BbrState::ProbeBwRefill
                | BbrState::ProbeBwUp
        )
    }

    /// Whether the draft's state machine has an edge from `self` to `next`
    /// (§4.1.1 diagram, with DOWN → REFILL from §4.3.3.6 and ProbeRTT →
    /// DOWN → CRUISE from §4.3.4.5).
    pub fn can_transition_to(self, next: BbrState) -> bool {
        use BbrState::*;
        if next == ProbeRtt {
            return self != ProbeRtt;
        }
        matches!(
            (self, next),
            (Startup, Drain)
                | (Drain, ProbeBwDown)
                | (ProbeBwDown, ProbeBwCruise)
                | (ProbeBwDown, ProbeBwRefill)
                | (ProbeBwCruise, ProbeBwRefill)
                | (ProbeBwRefill, ProbeBwUp)
                | (ProbeBwUp, ProbeBwDown)
                | (ProbeRtt, ProbeBwDown)
                | (ProbeRtt, Startup)
        )
    }

    /// `(pacing_gain, cwnd_gain)` of the state (§4.6.1 table).
    fn gains(self) -> (f64, f64) {
        match self {
            BbrState::Startup => (STARTUP_PACING_GAIN, DEFAULT_CWND_GAIN),
            BbrState::Drain => (DRAIN_PACING_GAIN, DEFAULT_CWND_GAIN),
            BbrState::ProbeBwDown => (PROBE_BW_DOWN_PACING_GAIN, DEFAULT_CWND_GAIN),
            BbrState::ProbeBwCruise | BbrState::ProbeBwRefill => (1.0, DEFAULT_CWND_GAIN),
            BbrState::ProbeBwUp => (PROBE_BW_UP_PACING_GAIN, PROBE_BW_UP_CWND_GAIN),
            BbrState::ProbeRtt => (1.0, PROBE_RTT_CWND_GAIN),
        }
    }
}

/// How the ACK stream relates to bandwidth probing (§4.3.3.6
/// `BBR.ack_phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AckPhase {
    /// Not probing, no probe feedback expected.
    Init,
    /// Probing stopped; ACKs of probe data still arriving.
    ProbeStopping,
    /// Sending at `bw` to refill the pipe.
    Refilling,
    /// Inflight rising to probe; feedback not yet arriving.
    ProbeStarting,
    /// ACKs of probe data arriving.
    ProbeFeedback,
}

/// A windowed running maximum over a virtual time (packet-timed rounds),
/// keeping the best, second-best and third-best samples of the window
/// (Kathleen Nichols' algorithm, as the draft's `UpdateWindowedMaxFilter`
/// suggests). Used for `BBR.extra_acked` (§4.5.9).
#[derive(Debug, Clone, Copy, Default)]
struct WindowedMax {
    /// `(time, value)` of the best, 2nd and 3rd best samples.
    s: [(u64, u64); 3],
}

impl WindowedMax {
    fn reset(&mut self, t: u64, v: u64) {
        self.s = [(t, v); 3];
    }

    /// Add sample `v` at time `t` to a window of length `win`.
    fn update(&mut self, t: u64, v: u64, win: u64) -> u64 {
        let sample = (t, v);
        if v >= self.s[0].1 || t.saturating_sub(self.s[2].0) > win {
            // A new maximum, or nothing left in the window.
            self.reset(t, v);
            return v;
        }
        if v >= self.s[1].1 {
            self.s[1] = sample;
            self.s[2] = sample;
        } else if v >= self.s[2].1 {
            self.s[2] = sample;
        }
        // Age the best samples out of the window, and keep the 2nd and 3rd
        // samples spread over its quarters and halves.
        let dt = t.saturating_sub(self.s[0].0);
        if dt > win {
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = sample;
            if t.saturating_sub(self.s[0].0) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = sample;
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            self.s[1] = sample;
            self.s[2] = sample;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = sample;
        }
        self.s[0].1
    }
}

/// The per-ACK rate sample `rs` as BBR reads it (§2.3), built from the
/// engine's [`RateSample`] and counters.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    /// The interval was positive: `rate` is a bandwidth sample.
    valid: bool,
    /// `rs.delivery_rate` (bytes/s), 0 when not `valid`.
    rate: f64,
    /// `rs.delivered`.
    delivered: u64,
    /// `rs.prior_delivered`, if the engine passed a sample.
    prior_delivered: Option<u64>,
    /// `rs.is_app_limited`.
    is_app_limited: bool,
    /// `rs.tx_in_flight`.
    tx_in_flight: u64,
    /// `rs.lost`.
    lost: u64,
    /// `rs.newly_acked`.
    newly_acked: u64,
    /// `rs.newly_lost`.
    newly_lost: u64,
    /// `rs.rtt`.
    rtt: Option<Duration>,
}

/// BBRv3 (draft-ietf-ccwg-bbr-01); see the module documentation.
#[derive(Debug, Clone)]
pub struct Bbr {
    /// Sender MSS (bytes), at least 1.
    smss: u64,
    /// `InitialCwnd` (bytes).
    initial_cwnd: u64,
    /// `cwnd` (bytes).
    cwnd: u64,
    /// `BBR.prior_cwnd`: last known good cwnd (§4.6.4.4).
    prior_cwnd: u64,
    /// `BBR.state`.
    state: BbrState,
    /// `BBR.pacing_gain`.
    pacing_gain: f64,
    /// `BBR.cwnd_gain`.
    cwnd_gain: f64,
    /// `BBR.pacing_rate` (bytes/s).
    pacing_rate: f64,
    /// The initial pacing rate was computed from a real RTT (or a
    /// bandwidth sample has taken over).
    pacing_from_rtt: bool,
    /// `BBR.send_quantum` (bytes).
    send_quantum: u64,
    /// `C.delivered` as of the last event.
    delivered: u64,
    /// `C.lost`: from the last `on_delivery`, plus losses reported since.
    lost: u64,
    /// `C.lost` at the last `on_delivery` (for `rs.newly_lost`).
    lost_at_last_delivery: u64,
    /// `C.pipe` as of the last event.
    inflight: u64,
    /// A hook carrying `now` has run (the stamps below are valid).
    started: bool,
    /// `BBR.next_round_delivered` (§4.5.1).
    next_round_delivered: u64,
    /// `BBR.round_start`.
    round_start: bool,
    /// `BBR.round_count`.
    round_count: u64,
    /// `BBR.rounds_since_bw_probe` (§4.3.3.5.3).
    rounds_since_bw_probe: u64,
    /// `BBR.MaxBwFilter` over `MaxBwFilterLen = 2` ProbeBW cycles: the
    /// maximum of the previous cycle and of the current one (§4.5.3,
    /// §4.5.6: `cycle_count` needs one bit).
    bw_hi: [f64; 2],
    /// `BBR.max_bw` (bytes/s).
    max_bw: f64,
    /// `BBR.bw_shortterm` (bytes/s), infinite when unset.
    bw_shortterm: f64,
    /// `BBR.bw = min(max_bw, bw_shortterm)`.
    bw: f64,
    /// `BBR.min_rtt`; `None` is infinity.
    min_rtt: Option<Duration>,
    /// `BBR.min_rtt_stamp`.
    min_rtt_stamp: Instant,
    /// `BBR.probe_rtt_min_delay`; `None` is infinity.
    probe_rtt_min_delay: Option<Duration>,
    /// `BBR.probe_rtt_min_stamp`.
    probe_rtt_min_stamp: Instant,
    /// `BBR.probe_rtt_expired`.
    probe_rtt_expired: bool,
    /// `BBR.probe_rtt_done_stamp`; `None` is 0.
    probe_rtt_done_stamp: Option<Instant>,
    /// `BBR.probe_rtt_round_done`.
    probe_rtt_round_done: bool,
    /// Range of `P.delivered` values whose samples count as app-limited
    /// because ProbeRTT marked the connection so (see the module doc).
    probe_rtt_app_limited: Option<(u64, u64)>,
    /// `BBR.idle_restart` (§4.4).
    idle_restart: bool,
    /// `BBR.extra_acked_interval_start` (§4.5.9).
    extra_acked_interval_start: Instant,
    /// `BBR.extra_acked_delivered`.
    extra_acked_delivered: u64,
    /// `BBR.ExtraACKedFilter`.
    extra_acked_filter: WindowedMax,
    /// `BBR.extra_acked` (bytes).
    extra_acked: u64,
    /// `BBR.full_bw_reached` (§4.3.1.2).
    full_bw_reached: bool,
    /// `BBR.full_bw_now`.
    full_bw_now: bool,
    /// `BBR.full_bw` (bytes/s).
    full_bw: f64,
    /// `BBR.full_bw_count`.
    full_bw_count: u32,
    /// `BBR.loss_in_round` (§4.5.10.2).
    loss_in_round: bool,
    /// `BBR.loss_round_delivered`.
    loss_round_delivered: u64,
    /// `BBR.loss_round_start`.
    loss_round_start: bool,
    /// Lossy ACKs in this loss round (Startup high-loss exit, §4.3.1.3).
    loss_events_in_round: u32,
    /// `BBR.bw_latest` (bytes/s, §2.10).
    bw_latest: f64,
    /// `BBR.inflight_latest` (bytes).
    inflight_latest: u64,
    /// `BBR.inflight_longterm` (bytes), `u64::MAX` when unset.
    inflight_longterm: u64,
    /// `BBR.inflight_shortterm` (bytes), `u64::MAX` when unset.
    inflight_shortterm: u64,
    /// `BBR.cycle_stamp` (§4.3.3.6).
    cycle_stamp: Instant,
    /// `BBR.bw_probe_wait`.
    bw_probe_wait: Duration,
    /// `BBR.ack_phase`.
    ack_phase: AckPhase,
    /// `BBR.bw_probe_up_rounds`.
    bw_probe_up_rounds: u32,
    /// `BBR.bw_probe_up_acks` (bytes).
    bw_probe_up_acks: u64,
    /// `BBR.probe_up_cnt`: bytes ACKed per SMSS of `inflight_longterm`
    /// growth, `u64::MAX` when not growing.
    probe_up_cnt: u64,
    /// `BBR.bw_probe_samples`.
    bw_probe_samples: bool,
    /// cwnd was fully used in the current round / in the previous one
    /// (`C.is_cwnd_limited`, §2.1).
    cwnd_limited: [bool; 2],
    /// The last segment sent left nothing queued (application-limited).
    last_send_app_limited: bool,
    /// In loss recovery (fast recovery or after an RTO).
    in_recovery: bool,
    /// `C.delivered` when recovery began.
    recovery_start_delivered: u64,
    /// Probe-timing randomness (§4.3.3.5.3).
    rng: ChaCha8Rng,
    /// Every state change, for the tests.
    #[cfg(test)]
    transitions: Vec<(BbrState, BbrState)>,
}

impl Bbr {
    /// A controller with sender MSS `smss` (bytes; 0 is treated as 1) and
    /// an initial window of `initial_cwnd_segments` segments (at least 1).
    /// Runs `BBROnInit` (§4.2.1).
    pub fn new(smss: usize, initial_cwnd_segments: usize) -> Bbr {
        let smss = (smss as u64).max(1);
        let initial_cwnd = smss.saturating_mul((initial_cwnd_segments as u64).max(1));
        let mut bbr = Bbr {
            smss,
            initial_cwnd,
            cwnd: initial_cwnd,
            prior_cwnd: 0,
            state: BbrState::Startup,
            pacing_gain: STARTUP_PACING_GAIN,
            cwnd_gain: DEFAULT_CWND_GAIN,
            pacing_rate: 0.0,
            pacing_from_rtt: false,
            send_quantum: 0,
            delivered: 0,
            lost: 0,
            lost_at_last_delivery: 0,
            inflight: 0,
            started: false,
            next_round_delivered: 0,
            round_start: false,
            round_count: 0,
            rounds_since_bw_probe: 0,
            bw_hi: [0.0; 2],
            max_bw: 0.0,
            bw_shortterm: f64::INFINITY,
            bw: 0.0,
            min_rtt: None,
            min_rtt_stamp: Instant::ZERO,
            probe_rtt_min_delay: None,
            probe_rtt_min_stamp: Instant::ZERO,
            probe_rtt_expired: false,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            probe_rtt_app_limited: None,
            idle_restart: false,
            extra_acked_interval_start: Instant::ZERO,
            extra_acked_delivered: 0,
            extra_acked_filter: WindowedMax::default(),
            extra_acked: 0,
            full_bw_reached: false,
            full_bw_now: false,
            full_bw: 0.0,
            full_bw_count: 0,
            loss_in_round: false,
            loss_round_delivered: 0,
            loss_round_start: false,
            loss_events_in_round: 0,
            bw_latest: 0.0,
            inflight_latest: 0,
            inflight_longterm: u64::MAX,
            inflight_shortterm: u64::MAX,
            cycle_stamp: Instant::ZERO,
            bw_probe_wait: Duration::ZERO,
            ack_phase: AckPhase::Init,
            bw_probe_up_rounds: 0,
            bw_probe_up_acks: 0,
            probe_up_cnt: u64::MAX,
            bw_probe_samples: false,
            cwnd_limited: [false; 2],
            last_send_app_limited: false,
            in_recovery: false,
            recovery_start_delivered: 0,
            rng: ChaCha8Rng::seed_from_u64(DEFAULT_SEED ^ smss),
            #[cfg(test)]
            transitions: Vec::new(),
        };
        //= §4.2.1 BBROnInit: BBRResetCongestionSignals, BBRResetLowerBounds,
        //= BBRInitRoundCounting, BBRResetFullBW and BBREnterStartup are the
        //= initial values above; BBRInitPacingRate follows.
        bbr.init_pacing_rate(None);
        bbr.set_send_quantum();
        bbr
    }

    /// Use `seed` for the randomized probe timing (§4.3.3.5.3) instead of
    /// the default (a constant mixed with SMSS).
    pub fn with_seed(mut self, seed: u64) -> Bbr {
        self.rng = ChaCha8Rng::seed_from_u64(seed);
        self
    }

    /// The current state.
    pub fn state(&self) -> BbrState {
        self.state
    }

    /// `BBR.max_bw` in bytes per second (0 before the first sample).
    pub fn max_bw(&self) -> u64 {
        self.max_bw as u64
    }

    /// `BBR.bw` in bytes per second: `min(max_bw, bw_shortterm)`.
    pub fn bw(&self) -> u64 {
        self.bw as u64
    }

    /// `BBR.min_rtt`, once measured.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// `BBR.pacing_gain`.
    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }

    /// `BBR.cwnd_gain`.
    pub fn cwnd_gain(&self) -> f64 {
        self.cwnd_gain
    }

    /// `BBR.inflight_longterm` (bytes; `None` when unset).
    pub fn inflight_longterm(&self) -> Option<u64> {
        (self.inflight_longterm != u64::MAX).then_some(self.inflight_longterm)
    }

    /// `BBR.inflight_shortterm` (bytes; `None` when unset).
    pub fn inflight_shortterm(&self) -> Option<u64> {
        (self.inflight_shortterm != u64::MAX).then_some(self.inflight_shortterm)
    }

    /// `BBR.bw_shortterm` (bytes per second; `None` when unset).
    pub fn bw_shortterm(&self) -> Option<u64> {
        self.bw_shortterm
            .is_finite()
            .then_some(self.bw_shortterm as u64)
    }

    /// `BBR.extra_acked` (bytes).
    pub fn extra_acked(&self) -> u64 {
        self.extra_acked
    }

    /// `BBR.full_bw_reached`: Startup has (ever) filled the pipe.
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_reached
    }

    /// `BBR.round_count`: packet-timed round trips so far.
    pub fn round_count(&self) -> u64 {
        self.round_count
    }

    /// The sender MSS the controller counts with.
    pub fn smss(&self) -> usize {
        usize::try_from(self.smss).unwrap_or(usize::MAX)
    }

    // ---- helpers -------------------------------------------------------

    /// `BBRMinPipeCwnd` in bytes (§4.6.4.3).
    fn min_pipe_cwnd(&self) -> u64 {
        self.smss.saturating_mul(MIN_PIPE_CWND_SEGMENTS)
    }

    /// Set the stamps §4.2.1 initializes to `Now()` at the first event.
    fn start(&mut self, now: Instant) {
        if self.started {
            return;
        }
        self.started = true;
        self.min_rtt_stamp = now;
        self.probe_rtt_min_stamp = now;
        self.extra_acked_interval_start = now;
        self.cycle_stamp = now;
    }

    fn set_state(&mut self, next: BbrState) {
        #[cfg(test)]
        self.transitions.push((self.state, next));
        self.state = next;
        (self.pacing_gain, self.cwnd_gain) = next.gains();
    }

    /// `bytes_per_sec * d` in bytes, saturating.
    fn volume(bytes_per_sec: f64, d: Duration) -> u64 {
        let v = bytes_per_sec * d.as_secs_f64();
        // `as` saturates (and maps NaN to 0).
        v as u64
    }

    fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited[0] || self.cwnd_limited[1]
    }

    // ---- §4.6.2 pacing rate --------------------------------------------

    /// §4.6.2 BBRInitPacingRate: `2.77 * InitialCwnd / (SRTT or 1 ms)`.
    fn init_pacing_rate(&mut self, srtt: Option<Duration>) {
        let rtt = srtt.filter(|d| !d.is_zero()).unwrap_or(NOMINAL_RTT);
        let nominal_bandwidth = self.initial_cwnd as f64 / rtt.as_secs_f64();
        self.pacing_rate = (STARTUP_PACING_GAIN * nominal_bandwidth).max(1.0);
    }

    /// Recompute the initial pacing rate at the first RTT sample, unless a
    /// bandwidth sample has already set it (see the module doc).
    fn maybe_init_pacing_from_rtt(&mut self, rtt: Option<Duration>) {
        if self.pacing_from_rtt {
            return;
        }
        if self.max_bw > 0.0 {
            self.pacing_from_rtt = true;
            return;
        }
        if let Some(rtt) = rtt.filter(|d| !d.is_zero()) {
            self.init_pacing_rate(Some(rtt));
            self.set_send_quantum();
            self.pacing_from_rtt = true;
        }
    }

    /// §4.6.2 BBRSetPacingRateWithGain.
    fn set_pacing_rate_with_gain(&mut self, pacing_gain: f64) {
        if self.bw <= 0.0 || !self.bw.is_finite() {
            // No bandwidth estimate: keep the current rate (module doc).
            return;
        }
        let rate = pacing_gain * self.bw * (100.0 - PACING_MARGIN_PERCENT) / 100.0;
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate.max(1.0);
        }
    }

    /// §4.6.3 BBRSetSendQuantum: `pacing_rate * 1 ms` within
    /// `[2 * SMSS, 64 KBytes]`.
    fn set_send_quantum(&mut self) {
        let q = Self::volume(self.pacing_rate, Duration::from_millis(1));
        self.send_quantum = q.min(SEND_QUANTUM_MAX).max(self.smss.saturating_mul(2));
    }

    // ---- §4.6.4 cwnd helpers -------------------------------------------

    /// §4.6.4.2 BBRBDPMultiple: `gain * bw * min_rtt`, or `InitialCwnd`
    /// without an RTT sample.
    fn bdp_multiple(&self, bw: f64, gain: f64) -> u64 {
        match self.min_rtt {
            None => self.initial_cwnd,
            Some(min_rtt) => Self::volume(gain * bw, min_rtt),
        }
    }

    /// `BBR.bdp = BBR.bw * BBR.min_rtt` (§2.9.2).
    fn bdp(&self) -> u64 {
        self.bdp_multiple(self.bw, 1.0)
    }

    /// §4.6.4.2 BBRQuantizationBudget (with §4.5.8 `offload_budget = 3 *
    /// send_quantum`).
    fn quantization_budget(&self, inflight: u64) -> u64 {
        let offload_budget = self.send_quantum.saturating_mul(3);
        let mut inflight = inflight.max(offload_budget).max(self.min_pipe_cwnd());
        if self.state == BbrState::ProbeBwUp {
            inflight = inflight.saturating_add(self.smss.saturating_mul(2));
        }
        inflight
    }

    /// §4.6.4.2 BBRInflight(bw, gain).
    fn inflight_at(&self, bw: f64, gain: f64) -> u64 {
        self.quantization_budget(self.bdp_multiple(bw, gain))
    }

    /// §4.6.4.2 BBRUpdateMaxInflight: the volume BBR allows in flight.
    fn max_inflight(&self) -> u64 {
        let inflight = self
            .bdp_multiple(self.bw, self.cwnd_gain)
            .saturating_add(self.extra_acked);
        self.quantization_budget(inflight)
    }

    /// §4.3.3.5.3 BBRTargetInflight: `min(BBR.bdp, cwnd)`.
    fn target_inflight(&self) -> u64 {
        self.bdp().min(self.cwnd)
    }

    /// §4.3.3.6 BBRInflightWithHeadroom.
    fn inflight_with_headroom(&self) -> u64 {
        if self.inflight_longterm == u64::MAX {
            return u64::MAX;
        }
        let headroom = ((HEADROOM * self.inflight_longterm as f64) as u64).max(self.smss);
        self.inflight_longterm
            .saturating_sub(headroom)
            .max(self.min_pipe_cwnd())
    }

    /// §4.6.4.5 BBRProbeRTTCwnd.
    fn probe_rtt_cwnd(&self) -> u64 {
        self.bdp_multiple(self.bw, PROBE_RTT_CWND_GAIN)
            .max(self.min_pipe_cwnd())
    }

    /// §4.6.4.4 BBRSaveCwnd.
    fn save_cwnd(&mut self) {
        if !self.in_recovery && self.state != BbrState::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    /// §4.6.4.4 BBRRestoreCwnd.
    fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    // ---- §4.3.1 Startup, §4.3.2 Drain ----------------------------------

    /// §4.3.1.1 BBREnterStartup.
    fn enter_startup(&mut self) {
        self.set_state(BbrState::Startup);
    }

    /// §4.3.1.2 BBRResetFullBW.
    fn reset_full_bw(&mut self) {
        self.full_bw = 0.0;
        self.full_bw_count = 0;
        self.full_bw_now = false;
    }

    /// §4.3.1.2 BBRCheckFullBWReached.
    fn check_full_bw_reached(&mut self, rs: &Sample) {
        if self.full_bw_now || !self.round_start || rs.is_app_limited || !rs.valid {
            return; // no need to check for a full pipe now
        }
        if rs.rate >= self.full_bw * FULL_BW_GROWTH {
            // bw is still growing: reset, record the new baseline
            self.reset_full_bw();
            self.full_bw = rs.rate;
            return;
        }
        self.full_bw_count += 1; // another round without much growth
        self.full_bw_now = self.full_bw_count >= FULL_BW_ROUNDS;
        if self.full_bw_now {
            self.full_bw_reached = true;
        }
    }

    /// §4.3.1.3 BBRCheckStartupHighLoss: in fast recovery for a full round,
    /// loss rate over the round above `BBRLossThresh`, and at least
    /// `BBRStartupFullLossCnt` lossy events in the round.
    fn check_startup_high_loss(&mut self, rs: &Sample) {
        if self.state != BbrState::Startup || self.full_bw_reached {
            return;
        }
        if rs.newly_lost > 0 {
            self.loss_events_in_round = self.loss_events_in_round.saturating_add(1);
        }
        let recovery_round_done = self.in_recovery
            && rs
                .prior_delivered
                .is_some_and(|d| d >= self.recovery_start_delivered);
        if self.loss_round_start
            && recovery_round_done
            && self.loss_events_in_round >= STARTUP_FULL_LOSS_COUNT
            && is_inflight_too_high(rs.lost, rs.tx_in_flight)
        {
            self.full_bw_reached = true;
            self.inflight_longterm = self.bdp().max(self.inflight_latest);
        }
        if self.loss_round_start {
            self.loss_events_in_round = 0;
        }
    }

    /// §4.3.1.1 BBRCheckStartupDone.
    fn check_startup_done(&mut self, rs: &Sample) {
        self.check_startup_high_loss(rs);
        if self.state == BbrState::Startup && self.full_bw_reached {
            self.enter_drain();
        }
    }

    /// §4.3.2 BBREnterDrain.
    fn enter_drain(&mut self) {
        self.set_state(BbrState::Drain);
    }

    /// §4.3.2 BBRCheckDrainDone: the estimated queue is drained.
    fn check_drain_done(&mut self, now: Instant) {
        if self.state == BbrState::Drain && self.inflight <= self.inflight_at(self.bw, 1.0) {
            self.enter_probe_bw(now);
        }
    }

    // ---- §4.3.3 ProbeBW -------------------------------------------------

    /// §4.3.3.6 BBREnterProbeBW.
    fn enter_probe_bw(&mut self, now: Instant) {
        self.start_probe_bw_down(now);
    }

    /// §4.3.3.6 BBRStartProbeBW_DOWN.
    fn start_probe_bw_down(&mut self, now: Instant) {
        self.reset_congestion_signals();
        self.probe_up_cnt = u64::MAX; // not growing inflight_longterm
        self.pick_probe_wait();
        self.cycle_stamp = now; // start wall clock
        self.ack_phase = AckPhase::ProbeStopping;
        self.start_round();
        self.set_state(BbrState::ProbeBwDown);
    }

    /// §4.3.3.6 BBRStartProbeBW_CRUISE.
    fn start_probe_bw_cruise(&mut self) {
        self.set_state(BbrState::ProbeBwCruise);
    }

    /// §4.3.3.6 BBRStartProbeBW_REFILL.
    fn start_probe_bw_refill(&mut self) {
        self.reset_lower_bounds();
        self.bw_probe_up_rounds = 0;
        self.bw_probe_up_acks = 0;
        self.ack_phase = AckPhase::Refilling;
        self.start_round();
        self.set_state(BbrState::ProbeBwRefill);
    }

    /// §4.3.3.6 BBRStartProbeBW_UP.
    fn start_probe_bw_up(&mut self, rs: &Sample) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.start_round();
        self.reset_full_bw();
        self.full_bw = rs.rate;
        self.set_state(BbrState::ProbeBwUp);
        self.raise_inflight_longterm_slope();
    }

    /// §4.3.3.5.3 BBRPickProbeWait: 0 or 1 rounds already counted, and a
    /// wall-clock wait of 2 s plus 0..1 s.
    fn pick_probe_wait(&mut self) {
        self.rounds_since_bw_probe = self.rng.gen_range(0..=1u64);
        let extra_ns = (self.rng.gen::<f64>() * 1e9) as u64;
        self.bw_probe_wait = Duration::from_secs(2) + Duration::from_nanos(extra_ns);
    }

    /// §4.3.3.6 BBRHasElapsedInPhase.
    fn has_elapsed_in_phase(&self, now: Instant, interval: Duration) -> bool {
        now > self.cycle_stamp + interval
    }

    /// §4.3.3.5.3 BBRIsRenoCoexistenceProbeTime, in segments.
    fn is_reno_coexistence_probe_time(&self) -> bool {
        let reno_rounds = self.target_inflight() / self.smss;
        let rounds = reno_rounds.min(BW_PROBE_MAX_ROUNDS);
        self.rounds_since_bw_probe >= rounds
    }

    /// §4.3.3.5.3 BBRIsTimeToProbeBW: starts REFILL when it is.
    fn is_time_to_probe_bw(&mut self, now: Instant) -> bool {
        if self.has_elapsed_in_phase(now, self.bw_probe_wait)
            || self.is_reno_coexistence_probe_time()
        {
            self.start_probe_bw_refill();
            return true;
        }
        false
    }

    /// §4.3.3.6 BBRIsTimeToCruise.
    fn is_time_to_cruise(&self) -> bool {
        if self.inflight > self.inflight_with_headroom() {
            return false; // not enough headroom
        }
        self.inflight <= self.inflight_at(self.max_bw, 1.0) // inflight <= estimated BDP
    }

    /// §4.3.3.6 BBRIsTimeToGoDown.
    fn is_time_to_go_down(&mut self, rs: &Sample) -> bool {
        if self.is_cwnd_limited() && self.cwnd >= self.inflight_longterm {
            // bw is limited by inflight_longterm: restart the plateau search
            self.reset_full_bw();
            self.full_bw = rs.rate;
            return false;
        }
        self.full_bw_now // we estimate we've fully used path bw
    }

    /// §4.3.3.6 BBRIsProbingBW.
    fn is_probing_bw(&self) -> bool {
        matches!(
            self.state,
            BbrState::Startup | BbrState::ProbeBwRefill | BbrState::ProbeBwUp
        )
    }

    /// §4.3.3.6 BBRRaiseInflightLongtermSlope, in bytes (module doc).
    fn raise_inflight_longterm_slope(&mut self) {
        let growth_this_round = 1u64 << self.bw_probe_up_rounds; // segments
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(BW_PROBE_UP_MAX_ROUNDS);
        self.probe_up_cnt = (self.cwnd / growth_this_round).max(self.smss);
    }

    /// §4.3.3.6 BBRProbeInflightLongtermUpward.
    fn probe_inflight_longterm_upward(&mut self, rs: &Sample) {
        if !self.is_cwnd_limited() || self.cwnd < self.inflight_longterm {
            return; // not fully using inflight_longterm, so don't grow it
        }
        self.bw_probe_up_acks = self.bw_probe_up_acks.saturating_add(rs.newly_acked);
        if self.probe_up_cnt > 0 && self.bw_probe_up_acks >= self.probe_up_cnt {
            let delta = self.bw_probe_up_acks / self.probe_up_cnt;
            self.bw_probe_up_acks -= delta.saturating_mul(self.probe_up_cnt);
            self.inflight_longterm = self
                .inflight_longterm
                .saturating_add(delta.saturating_mul(self.smss));
        }
        if self.round_start {
            self.raise_inflight_longterm_slope();
        }
    }

    /// §4.3.3.6 BBRAdaptUpperBounds.
    fn adapt_upper_bounds(&mut self, now: Instant, rs: &Sample) {
        if self.ack_phase == AckPhase::ProbeStarting && self.round_start {
            // starting to get bw probing samples
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.ack_phase == AckPhase::ProbeStopping && self.round_start {
            // End of samples from the bw probing phase. §4.5.6 advances the
            // filter once per cycle; as Linux does, leave this phase and
            // stop treating samples as probe samples (module doc).
            self.bw_probe_samples = false;
            self.ack_phase = AckPhase::Init;
            if self.state.is_probe_bw() && !rs.is_app_limited {
                self.advance_max_bw_filter();
            }
        }
        if !self.check_inflight_too_high(now, rs) {
            // Loss rate is safe. Adjust upper bounds upward.
            if self.inflight_longterm == u64::MAX {
                return; // no upper bounds to raise
            }
            if rs.tx_in_flight > self.inflight_longterm {
                self.inflight_longterm = rs.tx_in_flight;
            }
            if self.state == BbrState::ProbeBwUp {
                self.probe_inflight_longterm_upward(rs);
            }
        }
    }

    /// §4.3.3.6 BBRUpdateProbeBWCyclePhase.
    fn update_probe_bw_cycle_phase(&mut self, now: Instant, rs: &Sample) {
        if !self.full_bw_reached {
            return; // only handling steady-state behavior here
        }
        self.adapt_upper_bounds(now, rs);
        match self.state {
            BbrState::ProbeBwDown => {
                if self.is_time_to_probe_bw(now) {
                    return; // already decided state transition
                }
                if self.is_time_to_cruise() {
                    self.start_probe_bw_cruise();
                }
            }
            BbrState::ProbeBwCruise => {
                self.is_time_to_probe_bw(now);
            }
            BbrState::ProbeBwRefill => {
                // After one round of REFILL, start UP.
                if self.round_start {
                    self.bw_probe_samples = true;
                    self.start_probe_bw_up(rs);
                }
            }
            BbrState::ProbeBwUp => {
                if self.is_time_to_go_down(rs) {
                    self.start_probe_bw_down(now);
                }
            }
            BbrState::Startup | BbrState::Drain | BbrState::ProbeRtt => {}
        }
    }

    // ---- §4.3.4 ProbeRTT ------------------------------------------------

    /// §4.3.4.4 BBRUpdateMinRTT.
    fn update_min_rtt(&mut self, now: Instant, rs: &Sample) {
        self.probe_rtt_expired = now > self.probe_rtt_min_stamp + PROBE_RTT_INTERVAL;
        if let Some(rtt) = rs.rtt {
            if self.probe_rtt_min_delay.is_none_or(|d| rtt < d) || self.probe_rtt_expired {
                self.probe_rtt_min_delay = Some(rtt);
                self.probe_rtt_min_stamp = now;
            }
        }
        let min_rtt_expired = now > self.min_rtt_stamp + MIN_RTT_FILTER_LEN;
        if let Some(delay) = self.probe_rtt_min_delay {
            if self.min_rtt.is_none_or(|m| delay < m) || min_rtt_expired {
                self.min_rtt = Some(delay);
                self.min_rtt_stamp = self.probe_rtt_min_stamp;
            }
        }
    }

    /// §4.3.4.4 BBRCheckProbeRTT.
    fn check_probe_rtt(&mut self, now: Instant, rs: &Sample) {
        if self.state != BbrState::ProbeRtt && self.probe_rtt_expired && !self.idle_restart {
            self.enter_probe_rtt();
            self.save_cwnd();
            self.probe_rtt_done_stamp = None;
            self.ack_phase = AckPhase::ProbeStopping;
            self.start_round();
        }
        if self.state == BbrState::ProbeRtt {
            self.handle_probe_rtt(now);
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    /// §4.3.4.4 BBREnterProbeRTT.
    fn enter_probe_rtt(&mut self) {
        self.probe_rtt_app_limited = Some((self.delivered, self.delivered));
        self.set_state(BbrState::ProbeRtt);
    }

    /// §4.3.4.4 BBRHandleProbeRTT.
    fn handle_probe_rtt(&mut self, now: Instant) {
        // Ignore low rate samples during ProbeRTT (MarkConnectionAppLimited,
        // emulated: module doc).
        let mark = self.delivered.saturating_add(self.inflight).max(1);
        let (lo, hi) = self.probe_rtt_app_limited.unwrap_or((self.delivered, 0));
        self.probe_rtt_app_limited = Some((lo, hi.max(mark)));
        if self.probe_rtt_done_stamp.is_none() && self.inflight <= self.probe_rtt_cwnd() {
            // Wait for at least ProbeRTTDuration to elapse, and for at
            // least one round to elapse.
            self.probe_rtt_done_stamp = Some(now + PROBE_RTT_DURATION);
            self.probe_rtt_round_done = false;
            self.start_round();
        } else if self.probe_rtt_done_stamp.is_some() {
            if self.round_start {
                self.probe_rtt_round_done = true;
            }
            if self.probe_rtt_round_done {
                self.check_probe_rtt_done(now);
            }
        }
    }

    /// §4.3.4.4 BBRCheckProbeRTTDone.
    fn check_probe_rtt_done(&mut self, now: Instant) {
        if self.probe_rtt_done_stamp.is_some_and(|t| now > t) {
            // schedule the next ProbeRTT
            self.probe_rtt_min_stamp = now;
            self.restore_cwnd();
            self.exit_probe_rtt(now);
        }
    }

    /// §4.3.4.5 BBRExitProbeRTT.
    fn exit_probe_rtt(&mut self, now: Instant) {
        self.reset_lower_bounds();
        if self.full_bw_reached {
            self.start_probe_bw_down(now);
            self.start_probe_bw_cruise();
        } else {
            self.enter_startup();
        }
    }

    // ---- §4.5 the model -------------------------------------------------

    /// §4.5.1 BBRStartRound.
    fn start_round(&mut self) {
        self.next_round_delivered = self.delivered;
    }

    /// §4.5.1 BBRUpdateRound.
    fn update_round(&mut self, rs: &Sample) {
        self.round_start = false;
        if let Some(prior_delivered) = rs.prior_delivered {
            if prior_delivered >= self.next_round_delivered {
                self.start_round();
                self.round_count = self.round_count.saturating_add(1);
                self.rounds_since_bw_probe = self.rounds_since_bw_probe.saturating_add(1);
                self.round_start = true;
                // C.is_cwnd_limited looks back one round (§2.1).
                self.cwnd_limited = [false, self.cwnd_limited[0]];
            }
        }
    }

    /// §4.5.5 BBRUpdateMaxBw, with §4.5.4: app-limited samples count only
    /// when they raise the estimate.
    fn update_max_bw(&mut self, rs: &Sample) {
        self.update_round(rs);
        if rs.valid && (rs.rate >= self.max_bw || !rs.is_app_limited) {
            self.bw_hi[1] = self.bw_hi[1].max(rs.rate);
            self.max_bw = self.bw_hi[0].max(self.bw_hi[1]);
        }
    }

    /// §4.5.6 BBRAdvanceMaxBwFilter: forget the cycle before last.
    fn advance_max_bw_filter(&mut self) {
        self.bw_hi = [self.bw_hi[1], 0.0];
        self.max_bw = self.bw_hi[0];
    }

    /// §4.5.9 BBRUpdateACKAggregation.
    fn update_ack_aggregation(&mut self, now: Instant, rs: &Sample) {
        // Find the excess ACKed beyond the expected amount over this
        // interval; reset the interval if the ACK rate is below it.
        let interval = now.saturating_duration_since(self.extra_acked_interval_start);
        let mut expected_delivered = Self::volume(self.bw, interval);
        if self.extra_acked_delivered <= expected_delivered {
            self.extra_acked_delivered = 0;
            self.extra_acked_interval_start = now;
            expected_delivered = 0;
        }
        self.extra_acked_delivered = self.extra_acked_delivered.saturating_add(rs.newly_acked);
        let extra = self
            .extra_acked_delivered
            .saturating_sub(expected_delivered)
            .min(self.cwnd);
        // In Startup, just remember one round.
        let filter_len = if self.full_bw_reached {
            EXTRA_ACKED_FILTER_LEN
        } else {
            1
        };
        self.extra_acked = self
            .extra_acked_filter
            .update(self.round_count, extra, filter_len);
    }

    /// §4.5.10.3 BBRUpdateLatestDeliverySignals (near the start of ACK
    /// processing).
    fn update_latest_delivery_signals(&mut self, rs: &Sample) {
        self.loss_round_start = false;
        self.bw_latest = self.bw_latest.max(rs.rate);
        self.inflight_latest = self.inflight_latest.max(rs.delivered);
        if rs
            .prior_delivered
            .is_some_and(|d| d >= self.loss_round_delivered)
        {
            self.loss_round_delivered = self.delivered;
            self.loss_round_start = true;
        }
    }

    /// §4.5.10.3 BBRAdvanceLatestDeliverySignals (near the end).
    fn advance_latest_delivery_signals(&mut self, rs: &Sample) {
        if self.loss_round_start {
            self.bw_latest = rs.rate;
            self.inflight_latest = rs.delivered;
        }
    }

    /// §4.5.10.3 BBRResetCongestionSignals.
    fn reset_congestion_signals(&mut self) {
        self.loss_in_round = false;
        self.bw_latest = 0.0;
        self.inflight_latest = 0;
    }

    /// §4.5.10.3 BBRUpdateCongestionSignals.
    fn update_congestion_signals(&mut self, rs: &Sample) {
        self.update_max_bw(rs);
        if !self.loss_round_start {
            return; // wait until the end of the round trip
        }
        self.adapt_lower_bounds_from_congestion();
        self.loss_in_round = false;
    }

    /// §4.5.10.3 BBRAdaptLowerBoundsFromCongestion: once per round.
    fn adapt_lower_bounds_from_congestion(&mut self) {
        if self.is_probing_bw() {
            return;
        }
        if self.loss_in_round {
            self.init_lower_bounds();
            self.loss_lower_bounds();
        }
    }

    /// §4.5.10.3 BBRInitLowerBounds.
    fn init_lower_bounds(&mut self) {
        if self.bw_shortterm.is_infinite() {
            self.bw_shortterm = self.max_bw;
        }
        if self.inflight_shortterm == u64::MAX {
            self.inflight_shortterm = self.cwnd;
        }
    }

    /// §4.5.10.3 BBRLossLowerBounds.
    fn loss_lower_bounds(&mut self) {
        self.bw_shortterm = self.bw_latest.max(BETA * self.bw_shortterm);
        self.inflight_shortterm = self
            .inflight_latest
            .max((BETA * self.inflight_shortterm as f64) as u64);
    }

    /// §4.5.10.3 BBRResetLowerBounds.
    fn reset_lower_bounds(&mut self) {
        self.bw_shortterm = f64::INFINITY;
        self.inflight_shortterm = u64::MAX;
    }

    /// §4.5.10.3 BBRBoundBWForModel.
    fn bound_bw_for_model(&mut self) {
        self.bw = self.max_bw.min(self.bw_shortterm);
    }

    /// §4.5.10.2 IsInflightTooHigh() and BBRHandleInflightTooHigh.
    fn check_inflight_too_high(&mut self, now: Instant, rs: &Sample) -> bool {
        if is_inflight_too_high(rs.lost, rs.tx_in_flight) {
            if self.bw_probe_samples {
                self.handle_inflight_too_high(now, rs.is_app_limited, rs.tx_in_flight);
            }
            return true;
        }
        false
    }

    /// §4.5.10.2 BBRHandleInflightTooHigh.
    fn handle_inflight_too_high(&mut self, now: Instant, is_app_limited: bool, tx_in_flight: u64) {
        self.bw_probe_samples = false; // only react once per bw probe
        if !is_app_limited {
            let floor = (self.target_inflight() as f64 * BETA) as u64;
            self.inflight_longterm = tx_in_flight.max(floor);
        }
        if self.state == BbrState::ProbeBwUp {
            self.start_probe_bw_down(now);
        }
    }

    /// §4.5.10.2 BBRNoteLoss.
    fn note_loss(&mut self) {
        if !self.loss_in_round {
            // first loss in this round trip
            self.loss_round_delivered = self.delivered;
        }
        self.loss_in_round = true;
    }

    // ---- §4.2.3 per-ACK steps ------------------------------------------

    /// §4.2.3 BBRUpdateModelAndState.
    fn update_model_and_state(&mut self, now: Instant, rs: &Sample) {
        self.update_latest_delivery_signals(rs);
        self.update_congestion_signals(rs);
        self.update_ack_aggregation(now, rs);
        self.check_full_bw_reached(rs);
        self.check_startup_done(rs);
        self.check_drain_done(now);
        self.update_probe_bw_cycle_phase(now, rs);
        self.update_min_rtt(now, rs);
        self.check_probe_rtt(now, rs);
        self.advance_latest_delivery_signals(rs);
        self.bound_bw_for_model();
    }

    /// §4.2.3 BBRUpdateControlParameters.
    fn update_control_parameters(&mut self, rs: &Sample) {
        self.set_pacing_rate_with_gain(self.pacing_gain);
        self.set_send_quantum();
        self.set_cwnd(rs);
    }

    /// §4.6.4.6 BBRSetCwnd.
    fn set_cwnd(&mut self, rs: &Sample) {
        let max_inflight = self.max_inflight();
        if self.full_bw_reached {
            self.cwnd = self.cwnd.saturating_add(rs.newly_acked).min(max_inflight);
        } else if self.cwnd < max_inflight || self.delivered < self.initial_cwnd {
            self.cwnd = self.cwnd.saturating_add(rs.newly_acked);
        }
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd());
        self.bound_cwnd_for_probe_rtt();
        self.bound_cwnd_for_model();
    }

    /// §4.6.4.5 BBRBoundCwndForProbeRTT.
    fn bound_cwnd_for_probe_rtt(&mut self) {
        if self.state == BbrState::ProbeRtt {
            self.cwnd = self.cwnd.min(self.probe_rtt_cwnd());
        }
    }

    /// §4.6.4.7 BBRBoundCwndForModel.
    fn bound_cwnd_for_model(&mut self) {
        let mut cap = u64::MAX;
        if self.state.is_probe_bw() && self.state != BbrState::ProbeBwCruise {
            cap = self.inflight_longterm;
        } else if self.state == BbrState::ProbeRtt || self.state == BbrState::ProbeBwCruise {
            cap = self.inflight_with_headroom();
        }
        // apply inflight_shortterm (possibly infinite)
        cap = cap.min(self.inflight_shortterm).max(self.min_pipe_cwnd());
        self.cwnd = self.cwnd.min(cap);
    }

    /// The engine's sample as BBR reads it.
    fn sample(&self, rate: Option<&RateSample>, newly_acked: u64, newly_lost: u64) -> Sample {
        let Some(r) = rate else {
            return Sample {
                newly_acked,
                newly_lost,
                ..Sample::default()
            };
        };
        let valid = !r.interval.is_zero();
        let rate_bps = if valid { r.delivery_rate() } else { 0.0 };
        let valid = valid && rate_bps.is_finite();
        let probe_rtt_app_limited = self
            .probe_rtt_app_limited
            .is_some_and(|(lo, hi)| (lo..=hi).contains(&r.prior_delivered));
        Sample {
            valid,
            rate: if valid { rate_bps } else { 0.0 },
            delivered: r.delivered,
            prior_delivered: Some(r.prior_delivered),
            is_app_limited: r.is_app_limited || probe_rtt_app_limited,
            tx_in_flight: r.tx_in_flight,
            lost: r.lost,
            newly_acked,
            newly_lost,
            rtt: r.rtt,
        }
    }

    /// Enter loss recovery (§4.6.4.4 BBROnEnterFastRecovery): save cwnd.
    fn enter_recovery(&mut self) {
        if self.in_recovery {
            self.save_cwnd();
            return;
        }
        self.save_cwnd();
        self.in_recovery = true;
        self.recovery_start_delivered = self.delivered;
    }

    /// Leave loss recovery (§4.6.4.4): restore the last known good cwnd.
    fn exit_recovery(&mut self) {
        if !self.in_recovery {
            return;
        }
        self.in_recovery = false;
        self.restore_cwnd();
    }
}

/// §4.5.10.2 IsInflightTooHigh(rs): `rs.lost > rs.tx_in_flight *
/// BBRLossThresh`.
fn is_inflight_too_high(lost: u64, tx_in_flight: u64) -> bool {
    lost as f64 > tx_in_flight as f64 * LOSS_THRESH
}

/// §4.5.10.2 BBRInflightLongtermFromLostPacket: the inflight at which the
/// loss rate crossed `BBRLossThresh`, somewhere within the lost packet.
fn inflight_longterm_from_lost_packet(tx_in_flight: u64, lost: u64, size: u64) -> u64 {
    // What was in flight, and lost, before this packet?
    let inflight_prev = tx_in_flight.saturating_sub(size) as f64;
    let lost_prev = lost.saturating_sub(size) as f64;
    let lost_prefix = (LOSS_THRESH * inflight_prev - lost_prev) / (1.0 - LOSS_THRESH);
    // At what inflight value did losses cross BBRLossThresh?
    (inflight_prev + lost_prefix).max(0.0) as u64
}

impl CongestionControl for Bbr {
    fn cwnd(&self) -> usize {
        usize::try_from(self.cwnd).unwrap_or(usize::MAX)
    }

    /// `usize::MAX` in Startup, afterwards `BBRInflight(max_bw, 1.0)`, the
    /// estimated BDP (module doc). BBR does not use it.
    fn ssthresh(&self) -> usize {
        if self.state == BbrState::Startup {
            return usize::MAX;
        }
        usize::try_from(self.inflight_at(self.max_bw, 1.0)).unwrap_or(usize::MAX)
    }

    /// Ignored: BBR adapts cwnd in `on_delivery` (module doc).
    fn on_ack(&mut self, _now: Instant, _bytes_acked: usize, _flight_size: usize, _rtt: Duration) {}

    /// §4.6.4.4 BBROnEnterFastRecovery: save cwnd; the loss response is
    /// the model's (§4.5.10).
    fn on_congestion_event(&mut self, now: Instant, _flight_size: usize) {
        self.start(now);
        self.enter_recovery();
    }

    /// §4.6.4.4: leaving recovery restores the cwnd saved on entry; the
    /// next `on_delivery` bounds it by the model.
    fn on_recovery_end(&mut self, now: Instant, _flight_size: usize) {
        self.start(now);
        self.exit_recovery();
    }

    /// §4.6.4.4 BBROnEnterRTO: save cwnd, `cwnd = C.pipe + 1` segment, where
    /// the engine is about to mark everything lost (`C.pipe` = 0).
    fn on_rto(&mut self, now: Instant, _flight_size: usize) {
        self.start(now);
        if self.in_recovery {
            self.save_cwnd();
        } else {
            self.enter_recovery();
        }
        self.cwnd = self.smss;
    }

    /// Keep windows at the same number of segments (as the other
    /// algorithms do); model volumes in bytes are unchanged.
    fn set_mss(&mut self, smss: usize) {
        let smss = (smss as u64).max(1);
        if smss == self.smss {
            return;
        }
        let old = self.smss;
        let rescale = |v: u64| -> u64 {
            let r = u128::from(v) * u128::from(smss) / u128::from(old);
            u64::try_from(r).unwrap_or(u64::MAX)
        };
        self.smss = smss;
        self.cwnd = rescale(self.cwnd).max(smss);
        self.prior_cwnd = rescale(self.prior_cwnd);
        self.initial_cwnd = rescale(self.initial_cwnd).max(smss);
        self.set_send_quantum();
    }

    /// §4.6.4.4: an undo restores the cwnd saved before recovery and ends
    /// it.
    fn on_spurious_congestion(&mut self, now: Instant) {
        self.start(now);
        self.exit_recovery();
    }

    fn name(&self) -> &'static str {
        "bbr"
    }

    /// Only for the initial pacing rate (§4.6.2); `min_rtt` comes from the
    /// rate samples (`rs.rtt`).
    fn on_rtt_sample(
        &mut self,
        now: Instant,
        rtt: Duration,
        _snd_una: hollywood_wire::SeqNumber,
        _snd_nxt: hollywood_wire::SeqNumber,
    ) {
        self.start(now);
        self.maybe_init_pacing_from_rtt(Some(rtt));
    }

    /// Startup is BBR's slow start.
    fn in_slow_start(&self) -> bool {
        self.state == BbrState::Startup
    }

    /// §4.2.3 BBRUpdateOnACK.
    fn on_delivery(&mut self, ev: &DeliveryEvent) {
        let now = ev.now;
        self.start(now);
        // rs.newly_acked / rs.newly_lost, else the counters' increase.
        let (newly_acked, newly_lost) = match &ev.rate {
            Some(r) => (r.newly_acked, r.newly_lost),
            None => (
                ev.delivered.saturating_sub(self.delivered),
                ev.lost.saturating_sub(self.lost_at_last_delivery),
            ),
        };
        self.delivered = self.delivered.max(ev.delivered);
        self.lost = ev.lost;
        self.lost_at_last_delivery = ev.lost;
        self.inflight = ev.inflight;
        // Recovery as the engine sees it (in case a hook was missed).
        if self.in_recovery && !ev.in_recovery {
            self.exit_recovery();
        } else if !self.in_recovery && ev.in_recovery {
            self.enter_recovery();
        }
        let rate = ev.rate.as_ref();
        self.maybe_init_pacing_from_rtt(ev.srtt.or(ev.min_rtt).or(rate.and_then(|r| r.rtt)));
        let mut rs = self.sample(rate, newly_acked, newly_lost);
        if rs.rtt.is_none() && self.min_rtt.is_none() {
            // §4.2.1: BBR.min_rtt starts from the connection's RTT estimate.
            rs.rtt = ev.min_rtt.or(ev.srtt);
        }
        if self.state != BbrState::ProbeRtt
            && self
                .probe_rtt_app_limited
                .is_some_and(|(_, hi)| self.delivered > hi)
        {
            // The ProbeRTT bubble has been delivered.
            self.probe_rtt_app_limited = None;
        }
        self.update_model_and_state(now, &rs);
        self.update_control_parameters(&rs);
    }

    /// §4.2.4 BBRUpdateOnLoss / §4.5.10.2 BBRHandleLostPacket.
    fn on_segment_lost(&mut self, seg: &LostSegment) {
        self.start(seg.now);
        self.lost = self.lost.saturating_add(seg.len);
        self.note_loss();
        if !self.bw_probe_samples {
            return; // not a packet sent while probing bandwidth
        }
        let lost_since_send = self.lost.saturating_sub(seg.lost_at_send);
        if is_inflight_too_high(lost_since_send, seg.tx_in_flight) {
            let tx_in_flight =
                inflight_longterm_from_lost_packet(seg.tx_in_flight, lost_since_send, seg.len);
            self.handle_inflight_too_high(seg.now, seg.is_app_limited, tx_in_flight);
        }
    }

    /// §4.2.2 BBROnTransmit / §4.4.1 BBRHandleRestartFromIdle, and
    /// `C.is_cwnd_limited` bookkeeping.
    fn on_send(&mut self, now: Instant, inflight_before: u64, len: usize, app_limited: bool) {
        self.start(now);
        if inflight_before == 0 && self.last_send_app_limited && !self.in_recovery {
            self.idle_restart = true;
            self.extra_acked_interval_start = now;
            if self.state.is_probe_bw() {
                self.set_pacing_rate_with_gain(1.0);
                self.set_send_quantum();
            } else if self.state == BbrState::ProbeRtt {
                self.check_probe_rtt_done(now);
            }
        }
        self.last_send_app_limited = app_limited;
        let after = inflight_before.saturating_add(len as u64);
        if after.saturating_add(self.smss) > self.cwnd {
            self.cwnd_limited[0] = true;
        }
        self.inflight = after;
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some((self.pacing_rate as u64).max(1))
    }

    fn send_quantum(&self) -> Option<usize> {
        Some(usize::try_from(self.send_quantum).unwrap_or(usize::MAX))
    }

    fn owns_recovery_window(&self) -> bool {
        true
    }
}
