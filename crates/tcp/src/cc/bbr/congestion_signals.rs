//! Congestion signals (§4.5.10): the per-round delivery and loss signals
//! (§4.5.10.3), the per-loss and per-ACK `inflight_longterm` checks
//! (§4.5.10.2), and the queue gate on the loss responses (a deviation,
//! see the module doc of [`super`]).

use super::{Bbr, BbrState, Sample, SIMILAR_MIN_RTT};
use crate::time::Instant;
use std::time::Duration;

/// `BBRLossThresh` (§2.8): the highest tolerated per-round loss rate, 2 %.
pub const LOSS_THRESH: f64 = 0.02;
/// `BBRBeta` (§2.8): the multiplicative decrease on a lossy round, 0.7.
pub const BETA: f64 = 0.7;

impl Bbr {
    /// §4.5.10.3 BBRUpdateLatestDeliverySignals (near the start of ACK
    /// processing).
    pub(super) fn update_latest_delivery_signals(&mut self, rs: &Sample) {
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
    pub(super) fn advance_latest_delivery_signals(&mut self, rs: &Sample) {
        if self.loss_round_start {
            self.bw_latest = rs.rate;
            self.inflight_latest = rs.delivered;
        }
    }

    /// §4.5.10.3 BBRResetCongestionSignals.
    pub(super) fn reset_congestion_signals(&mut self) {
        self.loss_in_round = false;
        self.bw_latest = 0.0;
        self.inflight_latest = 0;
    }

    /// §4.5.10.3 BBRUpdateCongestionSignals.
    pub(super) fn update_congestion_signals(&mut self, rs: &Sample) {
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
    pub(super) fn round_queued(&self) -> bool {
        self.queued(self.last_round_min_rtt)
    }

    /// Whether the path queues now: the smallest RTT sample of this round
    /// so far (of the previous round before this one has any) is more than
    /// [`SIMILAR_MIN_RTT`] times `min_rtt`; no sample counts as queueing.
    /// Always true without the queue gate.
    pub(super) fn queueing_now(&self) -> bool {
        self.queued(self.loss_round_min_rtt.or(self.last_round_min_rtt))
    }

    pub(super) fn queued(&self, round_min: Option<Duration>) -> bool {
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
    pub(super) fn round_loss_rate(&self) -> f64 {
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

    /// §4.5.10.2 IsInflightTooHigh() and BBRHandleInflightTooHigh.
    pub(super) fn check_inflight_too_high(&mut self, now: Instant, rs: &Sample) -> bool {
        if is_inflight_too_high(rs.lost, rs.tx_in_flight) && self.queueing_now() {
            if self.bw_probe_samples {
                self.handle_inflight_too_high(now, rs.is_app_limited, rs.tx_in_flight);
            }
            return true;
        }
        false
    }

    /// §4.5.10.2 BBRHandleInflightTooHigh.
    pub(super) fn handle_inflight_too_high(
        &mut self,
        now: Instant,
        is_app_limited: bool,
        tx_in_flight: u64,
    ) {
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
    pub(super) fn note_loss(&mut self) {
        if !self.loss_in_round {
            // first loss in this round trip
            self.loss_round_delivered = self.delivered;
        }
        self.loss_in_round = true;
    }
}

/// §4.5.10.2 IsInflightTooHigh(rs): `rs.lost > rs.tx_in_flight *
/// BBRLossThresh`.
pub(super) fn is_inflight_too_high(lost: u64, tx_in_flight: u64) -> bool {
    lost as f64 > tx_in_flight as f64 * LOSS_THRESH
}

/// §4.5.10.2 BBRInflightLongtermFromLostPacket: the inflight at which the
/// loss rate crossed `BBRLossThresh`, somewhere within the lost packet.
pub(super) fn inflight_longterm_from_lost_packet(tx_in_flight: u64, lost: u64, size: u64) -> u64 {
    // What was in flight, and lost, before this packet?
    let inflight_prev = tx_in_flight.saturating_sub(size) as f64;
    let lost_prev = lost.saturating_sub(size) as f64;
    let lost_prefix = (LOSS_THRESH * inflight_prev - lost_prev) / (1.0 - LOSS_THRESH);
    // At what inflight value did losses cross BBRLossThresh?
    (inflight_prev + lost_prefix).max(0.0) as u64
}
