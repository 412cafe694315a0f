//! The short-term (lower) bounds `bw_shortterm` and `inflight_shortterm`
//! (§4.5.10.3).

use super::{Bbr, BETA};

impl Bbr {
    /// §4.5.10.3 BBRAdaptLowerBoundsFromCongestion: once per round.
    /// *Deviations*: the short-term bounds react only to a round whose loss
    /// rate exceeds `lower_bounds_loss_thresh` (BBRLossThresh, 2 %, by
    /// default) rather than to any loss, and only if the round queued
    /// (`round_queued`); see the module doc.
    pub(super) fn adapt_lower_bounds_from_congestion(&mut self) {
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
    pub(super) fn init_lower_bounds(&mut self) {
        if self.bw_shortterm.is_infinite() {
            self.bw_shortterm = self.max_bw;
        }
        if self.inflight_shortterm == u64::MAX {
            self.inflight_shortterm = self.cwnd;
        }
    }

    /// §4.5.10.3 BBRLossLowerBounds.
    pub(super) fn loss_lower_bounds(&mut self) {
        self.bw_shortterm = self.bw_latest.max(BETA * self.bw_shortterm);
        self.inflight_shortterm = self
            .inflight_latest
            .max((BETA * self.inflight_shortterm as f64) as u64);
    }

    /// §4.5.10.3 BBRResetLowerBounds.
    pub(super) fn reset_lower_bounds(&mut self) {
        self.bw_shortterm = f64::INFINITY;
        self.inflight_shortterm = u64::MAX;
    }

    /// §4.5.10.3 BBRBoundBWForModel.
    pub(super) fn bound_bw_for_model(&mut self) {
        self.bw = self.max_bw.min(self.bw_shortterm);
    }
}
