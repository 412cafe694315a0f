//! Startup (§4.3.1): entering it, the full-pipe estimator (§4.3.1.2) and
//! the high-loss exit (§4.3.1.3).

use super::{is_inflight_too_high, Bbr, BbrState, Sample};

/// `BBRStartupFullLossCnt` (§4.3.1.3): lossy events per round to leave
/// Startup on loss.
pub const STARTUP_FULL_LOSS_COUNT: u32 = 6;
/// Full-pipe estimator (§4.3.1.2): growth below 25 % ...
const FULL_BW_GROWTH: f64 = 1.25;
/// ... for 3 non-app-limited rounds means the pipe is full.
const FULL_BW_ROUNDS: u32 = 3;

impl Bbr {
    /// §4.3.1.1 BBREnterStartup.
    pub(super) fn enter_startup(&mut self) {
        self.set_state(BbrState::Startup);
    }

    /// §4.3.1.2 BBRResetFullBW.
    pub(super) fn reset_full_bw(&mut self) {
        self.full_bw = 0.0;
        self.full_bw_count = 0;
        self.full_bw_now = false;
    }

    /// §4.3.1.2 BBRCheckFullBWReached.
    pub(super) fn check_full_bw_reached(&mut self, rs: &Sample) {
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
    pub(super) fn check_startup_high_loss(&mut self, rs: &Sample) {
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
    pub(super) fn check_startup_done(&mut self, rs: &Sample) {
        self.check_startup_high_loss(rs);
        if self.state == BbrState::Startup && self.full_bw_reached {
            self.enter_drain();
        }
    }
}
