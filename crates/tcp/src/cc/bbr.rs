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
//! - **Short-term bounds react to rounds losing more than 2 %**
//!   (§4.5.10.3). The draft shrinks `bw_shortterm`/`inflight_shortterm` on
//!   every round with any loss outside bandwidth probing, to the delivered
//!   rate, which on a randomly lossy path is itself below the sending rate
//!   (loss plus the 1 % pacing margin): the rate decays by 1-2 % per round
//!   until the next probe. Random (non-congestive) loss of 0.5-1 % is the
//!   normal case on the wireless paths live media runs over, so here a
//!   round must lose more than `BBRLossThresh` (2 %, the threshold the
//!   draft already uses for `inflight_longterm`) before the short-term
//!   bounds react ([`Bbr::with_lower_bounds_loss_thresh`]`(0.0)` restores
//!   the draft). Measured in the model (10 Mb/s, 40 ms): 90 % → 95 % of the
//!   link at 0.5 % loss, 81 % → 83 % at 1 %; in the simulator (100 Mb/s,
//!   50 ms, 100 MB), 80 % → 89 % at 1 %. Congestive loss at a shallow
//!   buffer exceeds 2 % per round and still shrinks the bounds.
//! - **Loss without a queue is not congestion (the queue gate).** Above
//!   2 % the draft still takes every loss for congestion: on a path that
//!   loses 5-10 % at random (the wireless paths of seed 004) every
//!   bandwidth probe cuts `inflight_longterm` (§4.5.10.2), every round
//!   cuts `bw_shortterm` to the delivered rate, Startup leaves on "high
//!   loss" (§4.3.1.3), and the rate decays round after round (measured in
//!   the model, 10 Mb/s, 40 ms, 5 % loss: 19 % of the link; a 2 Mb/s live
//!   stream after a greedy start queues 8.6 s in the sender at 2 %). A
//!   loss caused by our sending (or anyone's) at a drop-tail bottleneck
//!   comes with a queue; random loss does not. So the three loss
//!   responses fire only when the path queues: the smallest RTT sample of
//!   the round (for the per-packet checks, of the round so far, else the
//!   previous one) more than 12.5 % ([`SIMILAR_MIN_RTT`], the ProbeRTT
//!   rule below) above `min_rtt`, or no sample at all. The smallest sample
//!   is immune to delayed-ACK inflation; a queue that lasts a whole round
//!   raises it. With the gate: 92 % of the link at 5 % loss; a shallow
//!   buffer (a quarter BDP) still makes Startup leave on loss and keeps
//!   steady-state loss under 1 % (`shallow_buffer`: 0.26 %). The cost: a buffer so
//!   shallow that it overflows before it adds 12.5 % to the RTT, or a
//!   policer (no queue at all), is not seen by these responses; BBR's
//!   model still holds the rate to the delivered bandwidth (`max_bw`), as
//!   Linux's BBRv1 — what this machine runs by default — does for all
//!   loss below 20 %. [`Bbr::with_queue_gate`]`(false)` turns it off.
//! - **No ProbeRTT for an application-limited flow on a steady path.**
//!   §4.3.4.4 enters ProbeRTT whenever `BBR.probe_rtt_min_delay` is 5 s old,
//!   i.e. when no RTT sample was *strictly* below it for 5 s, which on a
//!   jitter-free path is always. ProbeRTT then caps cwnd at half the BDP
//!   estimate for 200 ms and a round; for a live-video sender, whose
//!   estimate is about its own rate, that halves its rate and every frame
//!   of those ~300 ms misses its deadline (measured in the simulator: 60
//!   fps with 4-packet I-frames, 100 ms RTT, no loss, delays up to 214 ms
//!   every 5-7 s and 25 packets of 2 340 expired at the sender). Here an
//!   application-limited sample (`rs.is_app_limited`) within 12.5 %
//!   ([`SIMILAR_MIN_RTT`]) of `probe_rtt_min_delay` refreshes its stamp: the
//!   flow's own data is not queueing, which is what ProbeRTT would find
//!   out. A queue built by anyone (our flow when greedy, or cross traffic)
//!   raises the samples above the threshold and ProbeRTT comes as
//!   specified. The same idea is in Chromium's QUIC BBR ("skip ProbeRTT if
//!   the RTT is similar") and, more bluntly, in quinn's BBR, which never
//!   enters ProbeRTT while application-limited.
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
//! loss goodput is 96 % of R at 0.5 % and at 1 %, 92 % at 5 % (as drafted:
//! 90 %, 81 %, 19 %; see `steady_state_goodput_with_random_loss`). An
//! application-limited 2 Mb/s sender at 2 % loss paces above its rate in
//! Startup and in ProbeBW (`live_video_after_greedy_start_...`; as drafted
//! it falls behind once in ProbeBW).

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
/// An application-limited RTT sample at most this factor above
/// `BBR.probe_rtt_min_delay` refreshes its stamp (not in the draft; see
/// the module doc).
pub const SIMILAR_MIN_RTT: f64 = 1.125;
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
pub(crate) struct WindowedMax {
    /// `(time, value)` of the best, 2nd and 3rd best samples.
    s: [(u64, u64); 3],
}

impl WindowedMax {
    fn reset(&mut self, t: u64, v: u64) {
        self.s = [(t, v); 3];
    }

    /// The maximum of the window (0 before any sample).
    pub(crate) fn get(&self) -> u64 {
        self.s[0].1
    }

    /// Add sample `v` at time `t` to a window of length `win`.
    pub(crate) fn update(&mut self, t: u64, v: u64, win: u64) -> u64 {
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
    /// The sender itself had no data to send (the engine's mark, without
    /// the ProbeRTT marking in `is_app_limited`).
    sender_app_limited: bool,
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
    /// `C.lost` and `C.delivered` when the current loss round began (the
    /// round's loss rate, see [`Bbr::with_lower_bounds_loss_thresh`]).
    loss_round_lost_base: u64,
    loss_round_delivered_base: u64,
    /// Loss rate a round must exceed for the short-term bounds to react
    /// (0.0 = any loss, as draft-ietf-ccwg-bbr-01 §4.5.10.3).
    lower_bounds_loss_thresh: f64,
    /// The loss responses (short-term bounds, `inflight_longterm` cuts,
    /// Startup's high-loss exit) fire only when the path queues (see
    /// [`Bbr::with_queue_gate`]).
    queue_gate: bool,
    /// The smallest RTT sample since the loss round began (`None`: none).
    loss_round_min_rtt: Option<Duration>,
    /// The smallest RTT sample of the previous loss round.
    last_round_min_rtt: Option<Duration>,
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
            loss_round_lost_base: 0,
            loss_round_delivered_base: 0,
            lower_bounds_loss_thresh: LOSS_THRESH,
            queue_gate: true,
            loss_round_min_rtt: None,
            last_round_min_rtt: None,
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

    /// The loss rate a round must exceed before the short-term bounds
    /// (`bw_shortterm`, `inflight_shortterm`) shrink. The default is
    /// [`LOSS_THRESH`] (2 %), a deviation from draft-ietf-ccwg-bbr-01
    /// §4.5.10.3, where any loss in a round shrinks them; `0.0` restores
    /// the draft's behaviour.
    pub fn with_lower_bounds_loss_thresh(mut self, thresh: f64) -> Bbr {
        self.lower_bounds_loss_thresh = thresh.clamp(0.0, 1.0);
        self
    }

    /// Whether the loss responses (short-term bounds, `inflight_longterm`
    /// cuts, Startup's high-loss exit) fire only when the path queued:
    /// every RTT sample of the round more than 12.5 %
    /// ([`SIMILAR_MIN_RTT`]) above `min_rtt` (default `true`, a deviation
    /// from draft-ietf-ccwg-bbr-01 §4.5.10; see the module doc). `false`
    /// takes every loss above the thresholds for congestion; together with
    /// `with_lower_bounds_loss_thresh(0.0)` that is the draft.
    pub fn with_queue_gate(mut self, on: bool) -> Bbr {
        self.queue_gate = on;
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
            && self.round_queued()
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
        let steady = rs.sender_app_limited && self.state != BbrState::ProbeRtt;
        if let (Some(rtt), Some(d), true) = (rs.rtt, self.probe_rtt_min_delay, steady) {
            // An application-limited sample within 12.5 % of the minimum:
            // the flow's own data is not queueing, so the minimum is as
            // fresh as ProbeRTT would make it (see the module doc).
            if rtt.as_secs_f64() <= d.as_secs_f64() * SIMILAR_MIN_RTT {
                self.probe_rtt_min_stamp = now;
            }
        }
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
        if let Some(rtt) = rs.rtt {
            self.loss_round_min_rtt = Some(self.loss_round_min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        if !self.loss_round_start {
            return; // wait until the end of the round trip
        }
        // The round just ended: what it showed is read by the lower bounds
        // here and by Startup's high-loss check later on this ACK.
        self.last_round_min_rtt = self.loss_round_min_rtt.take();
        self.adapt_lower_bounds_from_congestion();
        self.loss_in_round = false;
        self.loss_round_lost_base = self.lost;
        self.loss_round_delivered_base = self.delivered;
    }

    /// Whether the round that just ended queued at the bottleneck: its
    /// smallest RTT sample was more than [`SIMILAR_MIN_RTT`] times
    /// `min_rtt` (a queue that lasted the whole round), or it gave no RTT
    /// sample (no evidence either way: treated as queueing). Always true
    /// without the queue gate.
    fn round_queued(&self) -> bool {
        self.queued(self.last_round_min_rtt)
    }

    /// Whether the path queues now: the smallest RTT sample of this round
    /// so far (of the previous round before this one has any) is more than
    /// [`SIMILAR_MIN_RTT`] times `min_rtt`; no sample counts as queueing.
    /// Always true without the queue gate.
    fn queueing_now(&self) -> bool {
        self.queued(self.loss_round_min_rtt.or(self.last_round_min_rtt))
    }

    fn queued(&self, round_min: Option<Duration>) -> bool {
        if !self.queue_gate {
            return true;
        }
        match (round_min, self.min_rtt) {
            (Some(r), Some(m)) => r.as_secs_f64() > m.as_secs_f64() * SIMILAR_MIN_RTT,
            _ => true,
        }
    }

    /// The loss rate of the round that just ended: bytes lost over bytes
    /// lost or delivered.
    fn round_loss_rate(&self) -> f64 {
        let lost = self.lost.saturating_sub(self.loss_round_lost_base) as f64;
        let delivered = self
            .delivered
            .saturating_sub(self.loss_round_delivered_base) as f64;
        if lost + delivered == 0.0 {
            0.0
        } else {
            lost / (lost + delivered)
        }
    }

    /// §4.5.10.3 BBRAdaptLowerBoundsFromCongestion: once per round.
    /// *Deviations*: the short-term bounds react only to a round whose loss
    /// rate exceeds `lower_bounds_loss_thresh` (BBRLossThresh, 2 %, by
    /// default) rather than to any loss, and only if the round queued
    /// (`round_queued`); see the module doc.
    fn adapt_lower_bounds_from_congestion(&mut self) {
        if self.is_probing_bw() {
            return;
        }
        if self.loss_in_round
            && self.round_loss_rate() > self.lower_bounds_loss_thresh
            && self.round_queued()
        {
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
        if is_inflight_too_high(rs.lost, rs.tx_in_flight) && self.queueing_now() {
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
            sender_app_limited: r.is_app_limited && !probe_rtt_app_limited,
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
        if is_inflight_too_high(lost_since_send, seg.tx_in_flight) && self.queueing_now() {
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

#[cfg(test)]
mod tests {
    use super::super::CcAlgorithm;
    use super::*;
    use hollywood_wire::SeqNumber;
    use proptest::prelude::*;
    use rand::Rng;
    use std::collections::VecDeque;

    const SMSS: u64 = 1000;
    const IW: usize = 10;
    const T0: Instant = Instant::from_nanos(1_000_000_000);

    /// Megabits per second in bytes per second.
    fn mbps(m: f64) -> u64 {
        (m * 1e6 / 8.0) as u64
    }

    /// Invariants that hold after every step (panics on violation).
    /// `rto_window`: `on_rto` ran and no `on_delivery` since (cwnd may be
    /// the one-segment loss window).
    fn check_invariants(cc: &Bbr, rto_window: bool) {
        let smss = cc.smss;
        if rto_window {
            assert!(cc.cwnd >= smss, "cwnd {} below one segment", cc.cwnd);
        } else {
            //= §4.6.4.3: never below BBRMinPipeCwnd outside the RTO window.
            assert!(
                cc.cwnd >= 4 * smss,
                "cwnd {} below 4*SMSS in {:?}",
                cc.cwnd,
                cc.state
            );
        }
        let rate = cc.pacing_rate().expect("BBR always paces");
        assert!(rate > 0);
        assert!(cc.pacing_rate.is_finite() && cc.pacing_rate >= 1.0);
        assert_eq!((cc.pacing_gain, cc.cwnd_gain), cc.state.gains());
        assert!(cc.pacing_gain.is_finite() && cc.pacing_gain > 0.0);
        assert!(cc.cwnd_gain.is_finite() && cc.cwnd_gain > 0.0);
        assert!(cc.send_quantum >= 2 * smss);
        assert!(cc.send_quantum <= SEND_QUANTUM_MAX.max(2 * smss));
        assert!(cc.max_bw.is_finite() && cc.max_bw >= 0.0);
        assert!(cc.bw.is_finite() && cc.bw >= 0.0 && cc.bw <= cc.max_bw);
        assert!(cc.bw_shortterm >= 0.0 && !cc.bw_shortterm.is_nan());
        assert!(cc.bw_latest.is_finite() && cc.full_bw.is_finite());
        assert_eq!(cc.in_slow_start(), cc.state == BbrState::Startup);
        let ssthresh = cc.ssthresh();
        assert!(
            (ssthresh == usize::MAX) == (cc.state == BbrState::Startup),
            "ssthresh {ssthresh} in {:?}",
            cc.state
        );
        assert!(ssthresh >= 2 * cc.smss());
    }

    /// Every recorded transition from index `from` on is an edge of the
    /// draft's state machine; returns the new length.
    fn check_transitions(cc: &Bbr, from: usize) -> usize {
        for &(a, b) in &cc.transitions[from..] {
            assert!(a.can_transition_to(b), "illegal transition {a:?} -> {b:?}");
        }
        cc.transitions.len()
    }

    // ---- a packet-level path model --------------------------------------

    /// What the application offers.
    #[derive(Debug, Clone, Copy)]
    enum App {
        /// Always has data to send.
        Greedy,
        /// Writes one SMSS every `SMSS / rate` seconds (rate in bytes/s).
        Rate(u64),
        /// Greedy for the given time, then `Rate`.
        GreedyThenRate(Duration, u64),
    }

    /// One bottleneck: `rate` bytes/s, a drop-tail buffer of `queue`
    /// bytes, then `rtt` of propagation delay (both ways together), and
    /// Bernoulli loss of data packets before the bottleneck. ACKs are never
    /// lost; every data packet is ACKed at once (no delayed ACKs).
    #[derive(Debug, Clone, Copy)]
    struct Path {
        rate: u64,
        rtt: Duration,
        queue: u64,
        loss: f64,
        seed: u64,
    }

    impl Path {
        fn new(rate: u64, rtt: Duration) -> Path {
            let mut p = Path {
                rate,
                rtt,
                queue: 0,
                loss: 0.0,
                seed: 1,
            };
            p.queue = 2 * p.bdp();
            p
        }
        fn with_loss(mut self, loss: f64) -> Path {
            self.loss = loss;
            self
        }
        fn with_queue(mut self, bytes: u64) -> Path {
            self.queue = bytes;
            self
        }
        /// Bytes per base RTT.
        fn bdp(&self) -> u64 {
            Bbr::volume(self.rate as f64, self.rtt)
        }
        /// Serialization time of `len` bytes at the bottleneck.
        fn ser(&self, len: u64) -> Duration {
            Duration::from_nanos(len * 1_000_000_000 / self.rate)
        }
        /// The smallest RTT a full-size packet can see.
        fn min_rtt(&self) -> Duration {
            self.rtt + self.ser(SMSS)
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Fate {
        InFlight,
        Acked,
        Lost,
    }

    /// Per-packet send state (draft §4.5.2.3.1.2, plus what BBR's loss
    /// handling needs). Every transmission is a packet of its own.
    #[derive(Debug, Clone, Copy)]
    struct Pkt {
        len: u64,
        sent: Instant,
        delivered: u64,
        delivered_time: Instant,
        first_sent_time: Instant,
        is_app_limited: bool,
        tx_in_flight: u64,
        lost_at_send: u64,
        retx: bool,
        fate: Fate,
    }

    /// What the sender saw on one ACK.
    #[derive(Debug, Clone, Copy)]
    struct Obs {
        t: Duration,
        state: BbrState,
        cwnd: u64,
        pacing: u64,
        inflight: u64,
        /// Bytes queued at the bottleneck.
        backlog: u64,
        rtt: Option<Duration>,
        max_bw: u64,
        round: u64,
        /// Bytes written by the application but not yet sent.
        app_backlog: u64,
    }

    /// A state change: when, to what, and the model at that moment.
    #[derive(Debug, Clone, Copy)]
    struct Change {
        t: Duration,
        to: BbrState,
        round: u64,
        max_bw: u64,
        backlog: u64,
        inflight_longterm: Option<u64>,
    }

    /// The sender (a minimal engine honouring the contract in the module
    /// doc) and the path, in virtual time, jumping from event to event.
    struct Sim {
        cc: Bbr,
        path: Path,
        app: App,
        rng: ChaCha8Rng,
        start: Instant,
        now: Instant,
        pkts: Vec<Pkt>,
        lowest_outstanding: usize,
        /// ACK arrival times (FIFO: one link, constant delay).
        acks: VecDeque<(Instant, usize)>,
        link_free: Instant,
        // Connection state of the delivery-rate sampler (§4.5.2.3.1.1).
        delivered: u64,
        delivered_time: Instant,
        first_sent_time: Instant,
        app_limited: u64,
        lost: u64,
        inflight: u64,
        // Application and sender queues.
        app_queue: u64,
        next_write: Instant,
        retx: VecDeque<u64>,
        next_send: Instant,
        // RTT estimation (RFC 6298) and timers.
        srtt: Option<Duration>,
        rttvar: Duration,
        latest_rtt: Duration,
        min_rtt: Option<Duration>,
        rto_at: Option<Instant>,
        rto_backoff: u32,
        in_recovery: bool,
        recovery_start: usize,
        rto_window: bool,
        // Measurements.
        goodput: u64,
        obs: Vec<Obs>,
        changes: Vec<Change>,
        checked: usize,
    }

    impl Sim {
        fn new(path: Path, app: App) -> Sim {
            Sim {
                cc: Bbr::new(SMSS as usize, IW),
                path,
                app,
                rng: ChaCha8Rng::seed_from_u64(path.seed),
                start: T0,
                now: T0,
                pkts: Vec::new(),
                lowest_outstanding: 0,
                acks: VecDeque::new(),
                link_free: T0,
                delivered: 0,
                delivered_time: T0,
                first_sent_time: T0,
                app_limited: 0,
                lost: 0,
                inflight: 0,
                app_queue: 0,
                next_write: T0,
                retx: VecDeque::new(),
                next_send: T0,
                srtt: None,
                rttvar: Duration::ZERO,
                latest_rtt: Duration::ZERO,
                min_rtt: None,
                rto_at: None,
                rto_backoff: 0,
                in_recovery: false,
                recovery_start: 0,
                rto_window: false,
                goodput: 0,
                obs: Vec::new(),
                changes: Vec::new(),
                checked: 0,
            }
        }

        fn elapsed(&self) -> Duration {
            self.now - self.start
        }

        /// Bytes per second the application writes, if rate-limited now.
        fn app_rate(&self) -> Option<u64> {
            match self.app {
                App::Greedy => None,
                App::Rate(r) => Some(r),
                App::GreedyThenRate(until, r) => (self.elapsed() >= until).then_some(r),
            }
        }

        fn has_data(&self) -> bool {
            !self.retx.is_empty() || self.app_rate().is_none() || self.app_queue > 0
        }

        fn next_len(&self) -> u64 {
            match self.retx.front() {
                Some(&len) => len,
                None if self.app_rate().is_none() => SMSS,
                None => self.app_queue.min(SMSS),
            }
        }

        fn can_send(&self) -> bool {
            //= The engine limits bytes in flight to cwnd (in recovery too:
            //= owns_recovery_window).
            self.has_data() && self.inflight + self.next_len() <= self.cc.cwnd() as u64
        }

        /// §4.5.2.3.4 CheckIfApplicationLimited.
        fn check_app_limited(&mut self) {
            if self.app_rate().is_some()
                && self.app_queue < SMSS
                && self.inflight < self.cc.cwnd() as u64
                && self.retx.is_empty()
            {
                self.app_limited = (self.delivered + self.inflight).max(1);
            }
        }

        fn backlog(&self) -> u64 {
            Bbr::volume(self.path.rate as f64, self.link_free - self.now)
        }

        fn rto(&self) -> Duration {
            let base = match self.srtt {
                Some(srtt) => (srtt + 4 * self.rttvar).max(Duration::from_millis(200)),
                None => Duration::from_secs(1),
            };
            (base * (1 << self.rto_backoff.min(6))).min(Duration::from_secs(60))
        }

        fn send(&mut self) {
            let len = self.next_len();
            let retx = self.retx.pop_front().is_some();
            if !retx && self.app_rate().is_some() {
                self.app_queue -= len;
            }
            //= §4.5.2.3.2 SendPacket.
            if self.inflight == 0 {
                self.first_sent_time = self.now;
                self.delivered_time = self.now;
            }
            let app_limited_after = !self.has_data();
            self.cc
                .on_send(self.now, self.inflight, len as usize, app_limited_after);
            self.inflight += len;
            let idx = self.pkts.len();
            self.pkts.push(Pkt {
                len,
                sent: self.now,
                delivered: self.delivered,
                delivered_time: self.delivered_time,
                first_sent_time: self.first_sent_time,
                is_app_limited: self.app_limited != 0,
                tx_in_flight: self.inflight,
                lost_at_send: self.lost,
                retx,
                fate: Fate::InFlight,
            });
            // The path: random loss, then the drop-tail bottleneck.
            if self.rng.gen::<f64>() >= self.path.loss && self.backlog() + len <= self.path.queue {
                let depart = self.link_free.max(self.now) + self.path.ser(len);
                self.link_free = depart;
                self.acks.push_back((depart + self.path.rtt, idx));
            }
            // Pacing at the controller's rate.
            let rate = self.cc.pacing_rate().expect("BBR paces");
            let gap = Duration::from_nanos(len * 1_000_000_000 / rate);
            self.next_send = self.next_send.max(self.now) + gap;
            if self.rto_at.is_none() {
                self.rto_at = Some(self.now + self.rto());
            }
        }

        fn mark_lost(&mut self, i: usize) {
            let p = self.pkts[i];
            self.pkts[i].fate = Fate::Lost;
            self.inflight -= p.len;
            self.lost += p.len;
            self.retx.push_back(p.len);
            self.cc.on_segment_lost(&LostSegment {
                now: self.now,
                len: p.len,
                tx_in_flight: p.tx_in_flight,
                lost_at_send: p.lost_at_send,
                delivered_at_send: p.delivered,
                is_app_limited: p.is_app_limited,
            });
        }

        fn on_ack(&mut self, idx: usize) {
            self.check_app_limited();
            let flight_before = self.inflight;
            let p = self.pkts[idx];
            match p.fate {
                Fate::InFlight => {
                    self.inflight -= p.len;
                    self.goodput += p.len;
                }
                Fate::Lost => {} // spurious: the retransmission counts
                Fate::Acked => return,
            }
            self.pkts[idx].fate = Fate::Acked;
            //= §4.5.2.3.3 UpdateRateSample / GenerateRateSample.
            self.delivered += p.len;
            self.delivered_time = self.now;
            self.first_sent_time = p.sent;
            if self.app_limited != 0 && self.delivered > self.app_limited {
                self.app_limited = 0;
            }
            let rtt = (!p.retx).then(|| self.now - p.sent); // Karn
            if let Some(r) = rtt {
                match self.srtt {
                    None => {
                        self.srtt = Some(r);
                        self.rttvar = r / 2;
                    }
                    Some(s) => {
                        let d = s.abs_diff(r);
                        self.rttvar = (self.rttvar * 3 + d) / 4;
                        self.srtt = Some((s * 7 + r) / 8);
                    }
                }
                self.latest_rtt = r;
                self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
            }
            let send_elapsed = p.sent - p.first_sent_time;
            let ack_elapsed = self.delivered_time - p.delivered_time;
            let mut interval = send_elapsed.max(ack_elapsed);
            if self.min_rtt.is_some_and(|m| interval < m) {
                interval = Duration::ZERO; // no reliable sample
            }
            // Loss detection: 3 packets or 9/8 RTT later (RFC 9002 §6.1).
            let thresh = self.srtt.unwrap_or(self.latest_rtt).max(self.latest_rtt) * 9 / 8;
            let lost_before = self.lost;
            for i in self.lowest_outstanding..idx {
                if self.pkts[i].fate == Fate::InFlight
                    && (idx - i >= 3 || self.now - self.pkts[i].sent > thresh)
                {
                    self.mark_lost(i);
                }
            }
            while self.lowest_outstanding < self.pkts.len()
                && self.pkts[self.lowest_outstanding].fate != Fate::InFlight
            {
                self.lowest_outstanding += 1;
            }
            let newly_lost = self.lost - lost_before;
            // Recovery (RFC 9002 §7.3.2: it ends when a packet sent during
            // it is acknowledged).
            if self.in_recovery && idx >= self.recovery_start {
                self.in_recovery = false;
                self.cc.on_recovery_end(self.now, self.inflight as usize);
            }
            if newly_lost > 0 && !self.in_recovery {
                self.in_recovery = true;
                self.recovery_start = self.pkts.len();
                self.cc
                    .on_congestion_event(self.now, flight_before as usize);
            }
            self.rto_backoff = 0;
            self.rto_at = (self.inflight > 0).then(|| self.now + self.rto());
            if let Some(r) = rtt {
                self.cc
                    .on_rtt_sample(self.now, r, SeqNumber(0), SeqNumber(0));
            }
            if !self.in_recovery {
                // Legacy hook: BBR must ignore it.
                let before = self.cc.cwnd;
                self.cc.on_ack(
                    self.now,
                    p.len as usize,
                    flight_before as usize,
                    self.srtt.unwrap_or_default(),
                );
                assert_eq!(self.cc.cwnd, before, "on_ack changed cwnd");
            }
            let rs = RateSample {
                delivered: self.delivered - p.delivered,
                interval,
                prior_delivered: p.delivered,
                is_app_limited: p.is_app_limited,
                tx_in_flight: p.tx_in_flight,
                lost: self.lost - p.lost_at_send,
                newly_acked: p.len,
                newly_lost,
                rtt,
            };
            self.cc.on_delivery(&DeliveryEvent {
                now: self.now,
                delivered: self.delivered,
                lost: self.lost,
                inflight: self.inflight,
                rate: Some(rs),
                min_rtt: self.min_rtt,
                srtt: self.srtt,
                in_recovery: self.in_recovery,
            });
            self.rto_window = false;
            self.obs.push(Obs {
                t: self.elapsed(),
                state: self.cc.state,
                cwnd: self.cc.cwnd,
                pacing: self.cc.pacing_rate().unwrap_or(0),
                inflight: self.inflight,
                backlog: self.backlog(),
                rtt,
                max_bw: self.cc.max_bw(),
                round: self.cc.round_count,
                app_backlog: self.app_queue,
            });
        }

        fn on_rto(&mut self) {
            self.cc.on_rto(self.now, self.inflight as usize);
            for i in self.lowest_outstanding..self.pkts.len() {
                if self.pkts[i].fate == Fate::InFlight {
                    self.mark_lost(i);
                }
            }
            self.lowest_outstanding = self.pkts.len();
            self.in_recovery = true;
            self.recovery_start = self.pkts.len();
            self.rto_window = true;
            self.rto_backoff += 1;
            self.rto_at = None;
        }

        fn next_write(&self) -> Option<Instant> {
            match self.app {
                App::Greedy => None,
                App::Rate(_) => Some(self.next_write),
                App::GreedyThenRate(until, _) => Some(self.next_write.max(self.start + until)),
            }
        }

        fn write(&mut self) {
            self.check_app_limited();
            self.app_queue += SMSS;
            let r = self.app_rate().unwrap_or(1);
            self.next_write = self.now + Duration::from_nanos(SMSS * 1_000_000_000 / r);
        }

        /// Run until `elapsed() == t`, checking the invariants after every
        /// event.
        fn run_until(&mut self, t: Duration) {
            let end = self.start + t;
            loop {
                let t_ack = self.acks.front().map(|a| a.0);
                let t_rto = self.rto_at;
                let t_write = self.next_write();
                let t_send = self.can_send().then(|| self.next_send.max(self.now));
                let Some(next) = [t_ack, t_rto, t_write, t_send].into_iter().flatten().min() else {
                    break;
                };
                if next > end {
                    break;
                }
                self.now = next;
                if t_ack == Some(next) {
                    let (_, idx) = self.acks.pop_front().expect("an ACK");
                    self.on_ack(idx);
                } else if t_rto == Some(next) {
                    self.on_rto();
                } else if t_write == Some(next) {
                    self.write();
                } else {
                    self.send();
                }
                self.after_step();
            }
            self.now = end;
        }

        fn after_step(&mut self) {
            check_invariants(&self.cc, self.rto_window);
            let n = check_transitions(&self.cc, self.checked);
            for i in self.checked..n {
                let change = Change {
                    t: self.elapsed(),
                    to: self.cc.transitions[i].1,
                    round: self.cc.round_count,
                    max_bw: self.cc.max_bw(),
                    backlog: self.backlog(),
                    inflight_longterm: self.cc.inflight_longterm(),
                };
                self.changes.push(change);
            }
            self.checked = n;
        }

        /// Goodput (bytes/s) over the next `d`.
        fn goodput_over(&mut self, d: Duration) -> f64 {
            let (g0, t0) = (self.goodput, self.elapsed());
            self.run_until(t0 + d);
            (self.goodput - g0) as f64 / d.as_secs_f64()
        }

        /// State-change times of `state`.
        fn entries(&self, state: BbrState) -> Vec<&Change> {
            self.changes.iter().filter(|c| c.to == state).collect()
        }
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    // ---- model tests ------------------------------------------------------

    /// 10 Mb/s, 40 ms, a 2-BDP buffer: Startup finds the bottleneck rate
    /// and leaves within a few rounds of the plateau; Drain empties the
    /// queue it built.
    #[test]
    fn startup_finds_bandwidth_then_drain_empties_the_queue() {
        let path = Path::new(mbps(10.0), Duration::from_millis(40));
        let mut sim = Sim::new(path, App::Greedy);
        sim.run_until(secs(3.0));
        let r = path.rate as f64;
        let drain = sim.entries(BbrState::Drain)[0];
        let down = sim.entries(BbrState::ProbeBwDown)[0];
        // The round in which the bandwidth estimate reached its plateau.
        let plateau = sim
            .obs
            .iter()
            .find(|o| o.max_bw as f64 >= 0.9 * r)
            .expect("max_bw reaches the link rate");
        eprintln!(
            "startup: plateau at round {} ({:?}), exit at round {} ({:?}), max_bw {:.3} of R; \
             drain: {:?} -> {:?}, backlog {} -> {} bytes (BDP {})",
            plateau.round,
            plateau.t,
            drain.round,
            drain.t,
            drain.max_bw as f64 / r,
            drain.t,
            down.t,
            drain.backlog,
            down.backlog,
            path.bdp(),
        );
        //= §4.3.1.2: three rounds without 25 % growth, plus the round in
        //= which the estimate stops growing.
        assert!(drain.round - plateau.round <= 4);
        assert!((drain.max_bw as f64 / r - 1.0).abs() <= 0.10);
        //= §4.3.2: Drain ends when inflight <= BBRInflight(1.0), within a
        //= few round trips, with the queue (nearly) empty.
        assert!(down.t - drain.t <= 3 * path.min_rtt());
        assert!(down.backlog <= path.bdp() / 4, "backlog {}", down.backlog);
        // And it stays small: inflight <= BDP + quantization slack a few
        // rounds later.
        let later = sim
            .obs
            .iter()
            .find(|o| o.t >= down.t + 2 * path.rtt)
            .expect("later ACKs");
        assert!(later.inflight <= path.bdp() + 8 * SMSS, "{later:?}");
    }

    /// Greedy, no random loss: at least 90 % of the link in steady state,
    /// with little queueing delay while cruising.
    #[test]
    fn steady_state_goodput_and_queueing_delay() {
        let path = Path::new(mbps(10.0), Duration::from_millis(40));
        let mut sim = Sim::new(path, App::Greedy);
        sim.run_until(secs(10.0));
        let goodput = sim.goodput_over(secs(30.0)) / path.rate as f64;
        let cruise: Vec<Duration> = sim
            .obs
            .iter()
            .filter(|o| o.t >= secs(10.0) && o.state == BbrState::ProbeBwCruise)
            .filter_map(|o| o.rtt)
            .collect();
        let avg_rtt = cruise.iter().sum::<Duration>() / cruise.len() as u32;
        let ratio = avg_rtt.as_secs_f64() / path.min_rtt().as_secs_f64();
        let max_queue = sim
            .obs
            .iter()
            .filter(|o| o.t >= secs(10.0) && o.state == BbrState::ProbeBwCruise)
            .map(|o| o.backlog)
            .max()
            .unwrap_or(0);
        let avg_all: f64 = sim
            .obs
            .iter()
            .filter(|o| o.t >= secs(10.0))
            .filter_map(|o| o.rtt)
            .map(|r| r.as_secs_f64())
            .sum::<f64>()
            / sim
                .obs
                .iter()
                .filter(|o| o.t >= secs(10.0) && o.rtt.is_some())
                .count() as f64;
        eprintln!(
            "steady state, no loss: goodput {:.3} of R, avg RTT in CRUISE {:.3} x min RTT \
             (bottleneck queue at most {} bytes), overall {:.3} x",
            goodput,
            ratio,
            max_queue,
            avg_all / path.min_rtt().as_secs_f64()
        );
        assert!(goodput >= 0.90, "goodput {goodput}");
        assert!(ratio <= 1.25, "avg RTT in CRUISE {ratio} x min RTT");
        assert!(max_queue <= path.bdp() / 4, "queue {max_queue} in CRUISE");
    }

    /// Random loss below BBRLossThresh (2 %). The target was 85 % of the
    /// link at 1 % loss; BBRv3 as specified gets 81 % here (90 % at 0.5 %);
    /// with our two deviations (short-term bounds react only to rounds
    /// losing more than 2 %, and no loss response without a queue) 96 %
    /// at both. As specified it falls short for two reasons, measured by
    /// disabling each in turn:
    /// - on a 50-packet BDP, 1 % random loss exceeds 2 % over some one-RTT
    ///   windows, so `IsInflightTooHigh` fires during REFILL/UP and
    ///   `BBRHandleInflightTooHigh` cuts `inflight_longterm` (§4.5.10.2),
    ///   which caps cwnd at 85 % of it in CRUISE (without this reaction:
    ///   87 %);
    /// - every round with a loss outside probing sets `bw_shortterm =
    ///   max(bw_latest, 0.7 * bw_shortterm)` (§4.5.10.3) where `bw_latest` is
    ///   the delivered rate, itself 1 % below the pacing rate
    ///   (`BBRPacingMarginPercent`) and short of the lost packets: the rate
    ///   decays by 1-2 % per lossy round until the next REFILL resets it,
    ///   about 50 rounds later (without both reactions: 96 %).
    #[test]
    fn steady_state_goodput_with_random_loss() {
        let path = Path::new(mbps(10.0), Duration::from_millis(40)).with_loss(0.01);
        let mut sim = Sim::new(path, App::Greedy);
        sim.run_until(secs(10.0));
        let one = sim.goodput_over(secs(30.0)) / path.rate as f64;
        let path = path.with_loss(0.005);
        let mut sim = Sim::new(path, App::Greedy);
        sim.run_until(secs(10.0));
        let half = sim.goodput_over(secs(30.0)) / path.rate as f64;
        eprintln!("steady state: goodput {one:.3} of R at 1 % loss, {half:.3} at 0.5 %");
        assert!(one >= 0.90, "goodput {one} at 1 % loss");
        assert!(half >= 0.90, "goodput {half} at 0.5 % loss");
    }

    /// Random loss well above BBRLossThresh on a path that never queues
    /// (5 %, the lossy wireless paths of seed 004's experiments): as drafted
    /// every probe cuts `inflight_longterm` and every round `bw_shortterm`,
    /// and the rate decays; with the queue gate (default) the losses are
    /// taken as what they are, not congestion.
    #[test]
    fn queue_gate_keeps_the_rate_at_five_percent_random_loss() {
        let path = Path::new(mbps(10.0), Duration::from_millis(40)).with_loss(0.05);
        let run = |cc: Bbr| {
            let mut sim = Sim::new(path, App::Greedy);
            sim.cc = cc;
            sim.run_until(secs(10.0));
            sim.goodput_over(secs(30.0)) / path.rate as f64
        };
        let gated = run(Bbr::new(SMSS as usize, IW));
        let draft = run(Bbr::new(SMSS as usize, IW)
            .with_lower_bounds_loss_thresh(0.0)
            .with_queue_gate(false));
        eprintln!(
            "5 % random loss: goodput {draft:.3} of R as drafted, {gated:.3} with the queue gate"
        );
        assert!(gated >= 0.85, "gated {gated}");
        assert!(draft < gated / 2.0, "draft {draft}");
    }

    /// The draft's own reaction (any loss in a round shrinks the short-term
    /// bounds) against the default (only rounds above 2 % loss): the
    /// deviation is what keeps BBR near the link rate at 0.5 % random loss.
    #[test]
    fn lower_bounds_threshold_deviation_matters_at_low_random_loss() {
        let path = Path::new(mbps(10.0), Duration::from_millis(40)).with_loss(0.005);
        let mut strict = Sim::new(path, App::Greedy);
        strict.cc = Bbr::new(SMSS as usize, IW)
            .with_lower_bounds_loss_thresh(0.0)
            .with_queue_gate(false);
        strict.run_until(secs(10.0));
        let strict = strict.goodput_over(secs(30.0)) / path.rate as f64;
        let mut ours = Sim::new(path, App::Greedy);
        ours.run_until(secs(10.0));
        let ours = ours.goodput_over(secs(30.0)) / path.rate as f64;
        eprintln!("0.5 % loss: goodput {strict:.3} of R as drafted, {ours:.3} with the threshold");
        assert!(ours > strict + 0.02, "{ours} vs {strict}");
    }

    /// Without a lower RTT sample, ProbeRTT comes every ProbeRTTInterval
    /// (5 s, plus the time ProbeRTT itself takes) and cuts cwnd to about
    /// half the BDP.
    #[test]
    fn probe_rtt_every_five_seconds() {
        let path = Path::new(mbps(10.0), Duration::from_millis(40));
        let mut sim = Sim::new(path, App::Greedy);
        sim.run_until(secs(21.0));
        let entries: Vec<Duration> = sim
            .entries(BbrState::ProbeRtt)
            .iter()
            .map(|c| c.t)
            .collect();
        eprintln!("ProbeRTT entries: {entries:?}");
        assert!(entries.len() >= 3, "{entries:?}");
        for w in entries.windows(2) {
            let gap = w[1] - w[0];
            assert!(gap >= secs(5.0) && gap <= secs(5.6), "gap {gap:?}");
        }
        // cwnd in ProbeRTT: max(BDP/2, 4*SMSS) (§4.6.4.5), well below the
        // cwnd before it.
        for &t in &entries {
            let before = sim.obs.iter().rev().find(|o| o.t < t).expect("ACKs before");
            let min_in = sim
                .obs
                .iter()
                .filter(|o| o.t >= t && o.state == BbrState::ProbeRtt)
                .map(|o| o.cwnd)
                .min()
                .expect("ACKs in ProbeRTT");
            assert!(
                min_in <= path.bdp() / 2 + 2 * SMSS,
                "cwnd {min_in} in ProbeRTT"
            );
            assert!(min_in < before.cwnd / 2, "{min_in} vs {}", before.cwnd);
        }
    }

    /// An application sending at 20 % of the link: max_bw never drops
    /// below its own rate (app-limited samples cannot lower it, §4.5.4) and
    /// cwnd stays bounded by the model. Measured: the sender stays in
    /// Startup (every sample is app-limited, so no plateau is ever seen);
    /// each ProbeRTT holds back the application for about 200 ms and the
    /// backlog then leaves at the Startup pacing rate, which measures more
    /// of the link (max_bw rises to about 0.57 R) and lets cwnd follow
    /// (`2 * max_bw * min_rtt` plus aggregation, 1.4 BDP of the path), where
    /// it stays.
    #[test]
    fn app_limited_sender_keeps_its_rate_and_a_bounded_cwnd() {
        let path = Path::new(mbps(10.0), Duration::from_millis(40));
        let app = path.rate / 5;
        let mut sim = Sim::new(path, App::Rate(app));
        sim.run_until(secs(30.0));
        let after: Vec<&Obs> = sim.obs.iter().filter(|o| o.t >= secs(2.0)).collect();
        let min_bw = after.iter().map(|o| o.max_bw).min().expect("ACKs");
        let max_cwnd = |from: f64, to: f64| {
            after
                .iter()
                .filter(|o| o.t >= secs(from) && o.t < secs(to))
                .map(|o| o.cwnd)
                .max()
                .expect("ACKs")
        };
        let (first, second) = (max_cwnd(2.0, 16.0), max_cwnd(16.0, 30.0));
        eprintln!(
            "app-limited 20 %: min max_bw {:.3} of the app rate, final max_bw {:.3} R, \
             max cwnd {first} then {second} (path BDP {}), states {:?}",
            min_bw as f64 / app as f64,
            sim.cc.max_bw() as f64 / path.rate as f64,
            path.bdp(),
            sim.changes.iter().map(|c| c.to).collect::<Vec<_>>()
        );
        assert!(min_bw as f64 >= 0.95 * app as f64, "max_bw {min_bw}");
        assert!(first <= 2 * path.bdp(), "cwnd {first}");
        assert!(second <= first, "cwnd still growing: {first} then {second}");
    }

    /// Pacing of a 2 Mb/s live-video-like sender on a 10 Mb/s, 100 ms path
    /// with 2 % random loss, from the start and after a greedy start (a
    /// player filling its buffer): how often is the pacing rate below the
    /// sending rate, i.e. does BBR build a queue in the sender?
    fn live_video(app: App) -> (f64, f64, f64, Duration) {
        live_video_with(app, Bbr::new(SMSS as usize, IW))
    }

    fn live_video_with(app: App, cc: Bbr) -> (f64, f64, f64, Duration) {
        let path = Path::new(mbps(10.0), Duration::from_millis(100)).with_loss(0.02);
        let rate = mbps(2.0);
        let mut sim = Sim::new(path, app);
        sim.cc = cc;
        sim.run_until(secs(60.0));
        let from = match app {
            App::GreedyThenRate(t, _) => t + secs(2.0),
            _ => secs(2.0),
        };
        let obs: Vec<&Obs> = sim.obs.iter().filter(|o| o.t >= from).collect();
        let below = obs.iter().filter(|o| o.pacing < rate).count() as f64 / obs.len() as f64;
        let min_pacing = obs.iter().map(|o| o.pacing).min().unwrap_or(0) as f64 / rate as f64;
        let mean_pacing =
            obs.iter().map(|o| o.pacing as f64).sum::<f64>() / obs.len() as f64 / rate as f64;
        let max_backlog = obs.iter().map(|o| o.app_backlog).max().unwrap_or(0);
        let delay = Duration::from_nanos(max_backlog * 1_000_000_000 / rate);
        eprintln!(
            "live video {app:?}: pacing < send rate on {:.1} % of ACKs, min {:.2} x, mean {:.2} x \
             the send rate, max sender queue {} bytes ({:?}); states {:?}",
            100.0 * below,
            min_pacing,
            mean_pacing,
            max_backlog,
            delay,
            sim.changes
                .iter()
                .map(|c| c.to.name())
                .collect::<Vec<_>>()
                .join(",")
        );
        (below, min_pacing, mean_pacing, delay)
    }

    /// From the start, the 2 Mb/s sender is application-limited on every
    /// sample, so BBR never sees a full pipe and stays in Startup (as Linux
    /// BBR does), pacing at 2.77 x its estimate: the pacing rate is always
    /// above the sending rate (measured: at least 4.8 x). Its RTT samples
    /// stay at the minimum, so it never enters ProbeRTT (the draft would,
    /// every 5 s, capping cwnd at half the BDP estimate for 200 ms and a
    /// round: measured before that deviation, up to 26 kB, 104 ms, queued
    /// in the sender): nothing ever waits in the sender.
    #[test]
    fn live_video_at_two_percent_loss_paces_above_its_rate() {
        let (below, min_pacing, _, delay) = live_video(App::Rate(mbps(2.0)));
        assert_eq!(below, 0.0);
        assert!(min_pacing >= 1.0);
        assert_eq!(delay, Duration::ZERO);
        let mut sim = Sim::new(
            Path::new(mbps(10.0), Duration::from_millis(100)).with_loss(0.02),
            App::Rate(mbps(2.0)),
        );
        sim.run_until(secs(30.0));
        assert!(sim.entries(BbrState::ProbeRtt).is_empty());
    }

    /// A greedy flow builds its own queue, so the samples rise above the
    /// minimum and ProbeRTT still comes every ~5 s.
    #[test]
    fn a_greedy_flow_still_probes_rtt() {
        let mut sim = Sim::new(
            Path::new(mbps(10.0), Duration::from_millis(40)).with_loss(0.01),
            App::Greedy,
        );
        sim.run_until(secs(30.0));
        let n = sim.entries(BbrState::ProbeRtt).len();
        assert!((5..=6).contains(&n), "{n} ProbeRTT entries in 30 s");
    }

    /// The same sender after 3 s of greedy sending (a player filling its
    /// buffer), so BBR is in ProbeBW: here BBRv3 as specified does not keep
    /// up. Measured over 5-60 s without the queue gate: the pacing rate is
    /// below the 2 Mb/s sending rate on 41 % of ACKs (down to 0.38 x) and
    /// the sender queue grows without bound (2.1 MB, 8.6 s, at 60 s).
    /// Both loss responses cause it: 2 % random loss crosses
    /// `BBRLossThresh` over many one-RTT windows, so `inflight_longterm` is
    /// cut in every probe and caps cwnd; and each lossy round in CRUISE/DOWN
    /// cuts `bw_shortterm` to the delivered rate, which is below the
    /// sending rate by the loss and the pacing margin. The path never
    /// queues (every RTT sample at the minimum), so with the queue gate
    /// (default) neither response fires: the pacing rate never falls below
    /// the sending rate and nothing waits in the sender.
    #[test]
    fn live_video_after_greedy_start_at_two_percent_loss() {
        let app = App::GreedyThenRate(secs(3.0), mbps(2.0));
        let (below, min_pacing, _, delay) = live_video(app);
        assert_eq!(below, 0.0);
        assert!(min_pacing >= 1.0);
        assert_eq!(delay, Duration::ZERO);
        let draft = Bbr::new(SMSS as usize, IW)
            .with_lower_bounds_loss_thresh(0.0)
            .with_queue_gate(false);
        let (below, _, _, delay) = live_video_with(app, draft);
        assert!(below > 0.3, "as drafted: pacing below the rate on {below}");
        assert!(
            delay > secs(1.0),
            "as drafted: {delay:?} queued in the sender"
        );
    }

    /// A shallow buffer (a quarter of the BDP): Startup overflows it and
    /// leaves on loss (§4.3.1.3: recovery for a round, > 2 % lost, 6 lossy
    /// ACKs), setting `inflight_longterm`; then BBR keeps the link busy
    /// with few losses.
    #[test]
    fn shallow_buffer() {
        let path = Path::new(mbps(10.0), Duration::from_millis(40)).with_queue(12_500);
        let mut sim = Sim::new(path, App::Greedy);
        sim.run_until(secs(5.0));
        let drain = *sim.entries(BbrState::Drain)[0];
        let (sent0, lost0) = (sim.pkts.len(), sim.lost);
        let goodput = sim.goodput_over(secs(20.0)) / path.rate as f64;
        let loss = (sim.lost - lost0) as f64 / ((sim.pkts.len() - sent0) as u64 * SMSS) as f64;
        eprintln!(
            "shallow buffer: Startup exit at round {} ({:?}), inflight_longterm {:?}, \
             goodput {goodput:.3} of R, loss rate {:.2} % in steady state",
            drain.round,
            drain.t,
            sim.cc.inflight_longterm(),
            100.0 * loss
        );
        assert!(drain.t <= secs(1.0));
        assert!(drain.inflight_longterm.is_some(), "not a loss exit");
        assert!(goodput >= 0.85, "goodput {goodput}");
        assert!(loss <= 0.02, "loss {loss}");
    }

    // ---- unit tests ---------------------------------------------------------

    #[test]
    fn initial_state_and_registration() {
        let cc = Bbr::new(SMSS as usize, IW);
        assert_eq!(cc.cwnd(), 10 * SMSS as usize);
        assert_eq!(cc.state(), BbrState::Startup);
        assert!(cc.in_slow_start());
        assert_eq!(cc.ssthresh(), usize::MAX);
        assert_eq!(cc.name(), "bbr");
        assert!(cc.owns_recovery_window());
        //= §4.6.2: 2.77 * InitialCwnd / 1 ms before any RTT is known.
        assert_eq!(cc.pacing_rate(), Some(27_700_000));
        //= §4.6.3: pacing_rate * 1 ms, within [2 SMSS, 64 KB].
        assert_eq!(cc.send_quantum(), Some(27_700));
        check_invariants(&cc, false);
        // Degenerate arguments.
        let cc = Bbr::new(0, 0);
        assert_eq!((cc.smss(), cc.cwnd()), (1, 1));
        assert!(cc.pacing_rate().unwrap() > 0);
        // Registered in the algorithm table; CUBIC stays the default.
        let alg = CcAlgorithm::parse("bbr").expect("bbr is registered");
        assert_eq!(alg, CcAlgorithm::Bbr);
        assert_eq!(alg.name(), "bbr");
        assert!(CcAlgorithm::ALL.contains(&CcAlgorithm::Bbr));
        let boxed = alg.build(1448, 10);
        assert_eq!((boxed.name(), boxed.cwnd()), ("bbr", 14_480));
        assert!(boxed.pacing_rate().is_some() && boxed.owns_recovery_window());
        assert_eq!(CcAlgorithm::default(), CcAlgorithm::Cubic);
    }

    #[test]
    fn initial_pacing_rate_uses_the_first_rtt() {
        let mut cc = Bbr::new(SMSS as usize, IW);
        cc.on_rtt_sample(T0, Duration::from_millis(100), SeqNumber(0), SeqNumber(0));
        //= §4.6.2: 2.77 * 10 000 bytes / 100 ms.
        assert_eq!(cc.pacing_rate(), Some(277_000));
        assert_eq!(cc.send_quantum(), Some(2 * SMSS as usize));
        // Only once: a later sample does not reset it.
        cc.on_rtt_sample(T0, Duration::from_millis(10), SeqNumber(0), SeqNumber(0));
        assert_eq!(cc.pacing_rate(), Some(277_000));
    }

    #[test]
    fn windowed_max_filter() {
        let mut f = WindowedMax::default();
        assert_eq!(f.update(0, 10, 10), 10);
        assert_eq!(f.update(1, 5, 10), 10);
        assert_eq!(f.update(5, 7, 10), 10);
        // The best sample ages out after the window; the next best remain.
        assert_eq!(f.update(11, 3, 10), 7);
        assert_eq!(f.update(16, 2, 10), 3);
        // A larger sample takes over at once.
        assert_eq!(f.update(17, 50, 10), 50);
        // Window of 1 (Startup): only the last round counts.
        let mut f = WindowedMax::default();
        f.update(0, 100, 1);
        assert_eq!(f.update(2, 4, 1), 4);
    }

    #[test]
    fn inflight_at_which_loss_crossed_the_threshold() {
        //= §4.5.10.2: 9 000 bytes in flight before a 1 000-byte packet,
        //= nothing lost before it: 2 % is crossed 183 bytes into it.
        assert_eq!(
            inflight_longterm_from_lost_packet(10_000, 1_000, 1_000),
            9_183
        );
        // Degenerate inputs do not underflow.
        assert_eq!(inflight_longterm_from_lost_packet(0, 0, 1_000), 0);
        assert_eq!(inflight_longterm_from_lost_packet(500, 100_000, 1_000), 0);
        assert!(is_inflight_too_high(3, 100));
        assert!(!is_inflight_too_high(2, 100));
    }

    fn ack(now: Instant, delivered: u64, inflight: u64, in_recovery: bool) -> DeliveryEvent {
        DeliveryEvent {
            now,
            delivered,
            lost: 0,
            inflight,
            rate: Some(RateSample {
                delivered: SMSS,
                interval: Duration::from_millis(40),
                prior_delivered: delivered.saturating_sub(SMSS),
                is_app_limited: false,
                tx_in_flight: inflight + SMSS,
                lost: 0,
                newly_acked: SMSS,
                newly_lost: 0,
                rtt: Some(Duration::from_millis(40)),
            }),
            min_rtt: Some(Duration::from_millis(40)),
            srtt: Some(Duration::from_millis(40)),
            in_recovery,
        }
    }

    #[test]
    fn recovery_saves_and_restores_cwnd() {
        //= §4.6.4.4: save cwnd on entering fast recovery or RTO, restore
        //= it (then bound it by the model) on exit or undo.
        let mut cc = Bbr::new(SMSS as usize, IW);
        cc.on_delivery(&ack(T0, SMSS, 9 * SMSS, false));
        let before = cc.cwnd;
        cc.on_congestion_event(T0, 10 * SMSS as usize);
        assert_eq!(cc.cwnd, before, "no multiplicative decrease on entry");
        cc.on_rto(T0, 10 * SMSS as usize);
        assert_eq!(cc.cwnd(), SMSS as usize, "RTO: cwnd = pipe (0) + 1 segment");
        check_invariants(&cc, true);
        // The next ACK in recovery: at least BBRMinPipeCwnd.
        cc.on_delivery(&ack(T0 + Duration::from_millis(40), 2 * SMSS, 0, true));
        assert!(cc.cwnd >= 4 * SMSS && cc.cwnd < before);
        // Leaving recovery (as seen in the DeliveryEvent): restored.
        cc.on_delivery(&ack(T0 + Duration::from_millis(80), 3 * SMSS, SMSS, false));
        assert!(cc.cwnd >= before);
        // Undo ends recovery and restores too.
        let before = cc.cwnd;
        cc.on_rto(T0, 0);
        cc.on_spurious_congestion(T0);
        assert_eq!(cc.cwnd, before);
        // The legacy hook is ignored.
        cc.on_ack(T0, 100 * SMSS as usize, 0, Duration::from_millis(40));
        assert_eq!(cc.cwnd, before);
    }

    #[test]
    fn mss_change_keeps_segments() {
        let mut cc = Bbr::new(SMSS as usize, IW);
        cc.set_mss(1500);
        assert_eq!(cc.cwnd(), 15_000);
        check_invariants(&cc, false);
        cc.set_mss(0);
        assert_eq!(cc.smss(), 1);
        assert!(cc.cwnd() >= 4);
    }

    /// The state machine edges of §4.1.1.
    #[test]
    fn state_machine_edges() {
        use BbrState::*;
        let all = [
            Startup,
            Drain,
            ProbeBwDown,
            ProbeBwCruise,
            ProbeBwRefill,
            ProbeBwUp,
            ProbeRtt,
        ];
        let edges: Vec<(BbrState, BbrState)> = all
            .iter()
            .flat_map(|&a| all.iter().map(move |&b| (a, b)))
            .filter(|&(a, b)| a.can_transition_to(b))
            .collect();
        assert_eq!(edges.len(), 15);
        assert!(!Startup.can_transition_to(ProbeBwDown));
        assert!(!ProbeBwCruise.can_transition_to(ProbeBwUp));
        assert!(!ProbeRtt.can_transition_to(Drain));
        assert!(all.iter().filter(|s| s.is_probe_bw()).count() == 4);
    }

    // ---- property test: random operation sequences ----------------------

    /// One step of the property test.
    #[derive(Debug, Clone)]
    enum Op {
        /// `on_send`, with this many bytes in flight before it.
        Send {
            len: u16,
            inflight: u32,
            app_limited: bool,
        },
        /// `on_delivery` for an ACK of `acked` bytes that marked `lost`
        /// bytes lost, with `inflight_pct` % of cwnd left in flight.
        Ack {
            acked: u32,
            lost: u32,
            inflight_pct: u16,
            sample: Option<Rs>,
            in_recovery: bool,
            srtt_us: Option<u32>,
        },
        /// `on_segment_lost`.
        Lost {
            len: u16,
            tx_in_flight: u32,
            lost_since: u32,
            app_limited: bool,
        },
        Rto,
        RecoveryStart,
        RecoveryEnd,
        Spurious,
        /// Time passes.
        Idle {
            ms: u32,
        },
        RttSample {
            us: u32,
        },
        SetMss {
            mss: u16,
        },
    }

    /// A random rate sample (`prior_delivered` is `back` bytes before
    /// C.delivered).
    #[derive(Debug, Clone)]
    struct Rs {
        delivered: u32,
        interval_us: u64,
        back: u32,
        app_limited: bool,
        tx_in_flight: u32,
        lost: u32,
        rtt_us: Option<u32>,
    }

    fn op() -> impl Strategy<Value = Op> {
        let sample = proptest::option::weighted(
            0.9,
            (
                any::<u32>(),
                prop_oneof![0..2_000_000u64, 0..20_000_000u64, Just(0u64), any::<u64>()],
                any::<u32>(),
                any::<bool>(),
                any::<u32>(),
                0..50_000u32,
                proptest::option::of(0..2_000_000u32),
            )
                .prop_map(
                    |(delivered, interval_us, back, app_limited, tx_in_flight, lost, rtt_us)| Rs {
                        delivered,
                        interval_us,
                        back,
                        app_limited,
                        tx_in_flight,
                        lost,
                        rtt_us,
                    },
                ),
        );
        prop_oneof![
            10 => (1..=9000u16, any::<u32>(), proptest::bool::weighted(0.2))
                .prop_map(|(len, inflight, app_limited)| Op::Send { len, inflight, app_limited }),
            12 => (
                prop_oneof![0..20_000u32, any::<u32>()],
                prop_oneof![4 => Just(0u32), 1 => 0..10_000u32],
                0..=300u16,
                sample,
                proptest::bool::weighted(0.2),
                proptest::option::of(0..2_000_000u32),
            )
                .prop_map(|(acked, lost, inflight_pct, sample, in_recovery, srtt_us)| Op::Ack {
                    acked,
                    lost,
                    inflight_pct,
                    sample,
                    in_recovery,
                    srtt_us,
                }),
            3 => (1..=9000u16, any::<u32>(), any::<u32>(), any::<bool>()).prop_map(
                |(len, tx_in_flight, lost_since, app_limited)| Op::Lost {
                    len,
                    tx_in_flight,
                    lost_since,
                    app_limited,
                }
            ),
            1 => Just(Op::Rto),
            1 => Just(Op::RecoveryStart),
            1 => Just(Op::RecoveryEnd),
            1 => Just(Op::Spurious),
            3 => prop_oneof![0..50u32, 0..20_000u32, Just(u32::MAX)].prop_map(|ms| Op::Idle { ms }),
            1 => (0..5_000_000u32).prop_map(|us| Op::RttSample { us }),
            1 => (0..=9000u16).prop_map(|mss| Op::SetMss { mss }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Any sequence of hook calls: no panic, and the invariants hold
        /// after every step.
        #[test]
        fn random_operations_keep_the_invariants(
            base in prop_oneof![Just(0u64), 0..u64::MAX / 4, Just(u64::MAX - 1_000_000)],
            ops in proptest::collection::vec(op(), 1..400),
        ) {
            let mut cc = Bbr::new(SMSS as usize, IW);
            let mut now = T0;
            let (mut delivered, mut lost) = (base, base / 2);
            let mut rto_window = false;
            let mut checked = 0;
            for op in ops {
                match op {
                    Op::Send { len, inflight, app_limited } => {
                        cc.on_send(now, u64::from(inflight), usize::from(len), app_limited);
                    }
                    Op::Ack { acked, lost: l, inflight_pct, sample, in_recovery, srtt_us } => {
                        now += Duration::from_micros(u64::from(acked % 5000));
                        delivered = delivered.saturating_add(u64::from(acked));
                        lost = lost.saturating_add(u64::from(l));
                        let inflight = (cc.cwnd / 100).saturating_mul(u64::from(inflight_pct));
                        let rate = sample.map(|r| RateSample {
                            delivered: u64::from(r.delivered),
                            interval: Duration::from_micros(r.interval_us),
                            prior_delivered: delivered.saturating_sub(u64::from(r.back)),
                            is_app_limited: r.app_limited,
                            tx_in_flight: u64::from(r.tx_in_flight),
                            lost: u64::from(r.lost),
                            newly_acked: u64::from(acked),
                            newly_lost: u64::from(l),
                            rtt: r.rtt_us.map(|us| Duration::from_micros(u64::from(us))),
                        });
                        let srtt = srtt_us.map(|us| Duration::from_micros(u64::from(us)));
                        cc.on_delivery(&DeliveryEvent {
                            now,
                            delivered,
                            lost,
                            inflight,
                            rate,
                            min_rtt: srtt,
                            srtt,
                            in_recovery,
                        });
                        rto_window = false;
                    }
                    Op::Lost { len, tx_in_flight, lost_since, app_limited } => {
                        cc.on_segment_lost(&LostSegment {
                            now,
                            len: u64::from(len),
                            tx_in_flight: u64::from(tx_in_flight),
                            lost_at_send: lost.saturating_sub(u64::from(lost_since)),
                            delivered_at_send: delivered,
                            is_app_limited: app_limited,
                        });
                    }
                    Op::Rto => {
                        cc.on_rto(now, cc.cwnd());
                        rto_window = true;
                    }
                    Op::RecoveryStart => cc.on_congestion_event(now, cc.cwnd()),
                    Op::RecoveryEnd => cc.on_recovery_end(now, cc.cwnd() / 2),
                    Op::Spurious => cc.on_spurious_congestion(now),
                    Op::Idle { ms } => now += Duration::from_millis(u64::from(ms)),
                    Op::RttSample { us } => cc.on_rtt_sample(
                        now,
                        Duration::from_micros(u64::from(us)),
                        SeqNumber(0),
                        SeqNumber(0),
                    ),
                    Op::SetMss { mss } => cc.set_mss(usize::from(mss)),
                }
                check_invariants(&cc, rto_window);
                checked = check_transitions(&cc, checked);
            }
        }
    }

    /// A fixed scenario's state sequence, as a literal (a snapshot of what
    /// the controller did; after s2n-quic's event snapshots).
    #[test]
    fn transition_trace() {
        let path = Path::new(mbps(10.0), Duration::from_millis(40));
        let mut sim = Sim::new(path, App::Greedy);
        sim.run_until(secs(7.0));
        let trace: Vec<(u128, BbrState)> = sim
            .changes
            .iter()
            .map(|c| (c.t.as_millis(), c.to))
            .collect();
        use BbrState::*;
        assert_eq!(
            trace,
            [
                (472, Drain),
                (541, ProbeBwDown),
                (541, ProbeBwCruise),
                (2644, ProbeBwRefill),
                (2685, ProbeBwUp),
                (2841, ProbeBwDown),
                (3173, ProbeBwCruise),
                (5040, ProbeRtt),
                (5265, ProbeBwDown),
                (5265, ProbeBwCruise),
            ]
        );
    }
}
