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
//! Fields of [`RateSample`](super::RateSample) used: `delivered`, `interval` (the delivery rate
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
//!   loses 5-10 % at random (the wireless paths of [RTP-QUIC]) every
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

mod ack_aggregation;
mod bandwidth;
mod congestion_signals;
mod cwnd;
mod drain;
mod getters;
mod lower_bounds;
mod pacing;
mod probe_bw;
mod probe_rtt;
mod recovery;
mod round;
mod sample;
mod startup;
mod state;
mod windowed_filter;

#[cfg(test)]
mod tests;

use super::{CongestionControl, DeliveryEvent, LostSegment};
use crate::time::Instant;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

pub use congestion_signals::{BETA, LOSS_THRESH};
pub use probe_rtt::SIMILAR_MIN_RTT;
pub use state::{BbrState, DEFAULT_CWND_GAIN, PROBE_RTT_CWND_GAIN, STARTUP_PACING_GAIN};
pub(crate) use windowed_filter::WindowedMax;

use congestion_signals::{inflight_longterm_from_lost_packet, is_inflight_too_high};
use sample::Sample;
use state::AckPhase;

/// Default seed of the probe-timing generator (mixed with SMSS).
const DEFAULT_SEED: u64 = 0xBB3_C0FF_EE00_2024;

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
