//! ProbeBW (§4.3.3): the DOWN, CRUISE, REFILL and UP phases, the
//! randomized wait before probing (§4.3.3.5.3), and probing
//! `inflight_longterm` upward (§4.3.3.6 BBRAdaptUpperBounds).

use super::{AckPhase, Bbr, BbrState, Sample};
use crate::time::Instant;
use rand::Rng;
use std::time::Duration;

/// Upper bound of the Reno-coexistence probe interval in rounds
/// (§4.3.3.5.3: `min(reno_rounds, 63)`).
const BW_PROBE_MAX_ROUNDS: u64 = 63;
/// Cap on `bw_probe_up_rounds` (§4.3.3.6 `BBRRaiseInflightLongtermSlope`).
const BW_PROBE_UP_MAX_ROUNDS: u32 = 30;

impl Bbr {
    /// §4.3.3.6 BBREnterProbeBW.
    pub(super) fn enter_probe_bw(&mut self, now: Instant) {
        self.start_probe_bw_down(now);
    }

    /// §4.3.3.6 BBRStartProbeBW_DOWN.
    pub(super) fn start_probe_bw_down(&mut self, now: Instant) {
        self.reset_congestion_signals();
        self.probe_up_cnt = u64::MAX; // not growing inflight_longterm
        self.pick_probe_wait();
        self.cycle_stamp = now; // start wall clock
        self.ack_phase = AckPhase::ProbeStopping;
        self.start_round();
        self.set_state(BbrState::ProbeBwDown);
    }

    /// §4.3.3.6 BBRStartProbeBW_CRUISE.
    pub(super) fn start_probe_bw_cruise(&mut self) {
        self.set_state(BbrState::ProbeBwCruise);
    }

    /// §4.3.3.6 BBRStartProbeBW_REFILL.
    pub(super) fn start_probe_bw_refill(&mut self) {
        self.reset_lower_bounds();
        self.bw_probe_up_rounds = 0;
        self.bw_probe_up_acks = 0;
        self.ack_phase = AckPhase::Refilling;
        self.start_round();
        self.set_state(BbrState::ProbeBwRefill);
    }

    /// §4.3.3.6 BBRStartProbeBW_UP.
    pub(super) fn start_probe_bw_up(&mut self, rs: &Sample) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.start_round();
        self.reset_full_bw();
        self.full_bw = rs.rate;
        self.set_state(BbrState::ProbeBwUp);
        self.raise_inflight_longterm_slope();
    }

    /// §4.3.3.5.3 BBRPickProbeWait: 0 or 1 rounds already counted, and a
    /// wall-clock wait of 2 s plus 0..1 s.
    pub(super) fn pick_probe_wait(&mut self) {
        self.rounds_since_bw_probe = self.rng.gen_range(0..=1u64);
        let extra_ns = (self.rng.gen::<f64>() * 1e9) as u64;
        self.bw_probe_wait = Duration::from_secs(2) + Duration::from_nanos(extra_ns);
    }

    /// §4.3.3.6 BBRHasElapsedInPhase.
    pub(super) fn has_elapsed_in_phase(&self, now: Instant, interval: Duration) -> bool {
        now > self.cycle_stamp + interval
    }

    /// §4.3.3.5.3 BBRIsRenoCoexistenceProbeTime, in segments.
    pub(super) fn is_reno_coexistence_probe_time(&self) -> bool {
        let reno_rounds = self.target_inflight() / self.smss;
        let rounds = reno_rounds.min(BW_PROBE_MAX_ROUNDS);
        self.rounds_since_bw_probe >= rounds
    }

    /// §4.3.3.5.3 BBRIsTimeToProbeBW: starts REFILL when it is.
    pub(super) fn is_time_to_probe_bw(&mut self, now: Instant) -> bool {
        if self.has_elapsed_in_phase(now, self.bw_probe_wait)
            || self.is_reno_coexistence_probe_time()
        {
            self.start_probe_bw_refill();
            return true;
        }
        false
    }

    /// §4.3.3.6 BBRIsTimeToCruise.
    pub(super) fn is_time_to_cruise(&self) -> bool {
        if self.inflight > self.inflight_with_headroom() {
            return false; // not enough headroom
        }
        self.inflight <= self.inflight_at(self.max_bw, 1.0) // inflight <= estimated BDP
    }

    /// §4.3.3.6 BBRIsTimeToGoDown.
    pub(super) fn is_time_to_go_down(&mut self, rs: &Sample) -> bool {
        if self.is_cwnd_limited() && self.cwnd >= self.inflight_longterm {
            // bw is limited by inflight_longterm: restart the plateau search
            self.reset_full_bw();
            self.full_bw = rs.rate;
            return false;
        }
        self.full_bw_now // we estimate we've fully used path bw
    }

    /// §4.3.3.6 BBRIsProbingBW.
    pub(super) fn is_probing_bw(&self) -> bool {
        matches!(
            self.state,
            BbrState::Startup | BbrState::ProbeBwRefill | BbrState::ProbeBwUp
        )
    }

    /// §4.3.3.6 BBRRaiseInflightLongtermSlope, in bytes (module doc).
    pub(super) fn raise_inflight_longterm_slope(&mut self) {
        let growth_this_round = 1u64 << self.bw_probe_up_rounds; // segments
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(BW_PROBE_UP_MAX_ROUNDS);
        self.probe_up_cnt = (self.cwnd / growth_this_round).max(self.smss);
    }

    /// §4.3.3.6 BBRProbeInflightLongtermUpward.
    pub(super) fn probe_inflight_longterm_upward(&mut self, rs: &Sample) {
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
    pub(super) fn adapt_upper_bounds(&mut self, now: Instant, rs: &Sample) {
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
    pub(super) fn update_probe_bw_cycle_phase(&mut self, now: Instant, rs: &Sample) {
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
}
