//! cwnd (§4.6.4): the BDP and inflight volumes the model allows
//! (§4.6.4.2), BBRMinPipeCwnd (§4.6.4.3), the ProbeRTT cwnd (§4.6.4.5),
//! BBRSetCwnd (§4.6.4.6) and the bounds on it (§4.6.4.5, §4.6.4.7).

use super::{Bbr, BbrState, Sample, PROBE_RTT_CWND_GAIN};
use std::time::Duration;

/// `BBRHeadroom` (§2.8): share of `inflight_longterm` left to others, 0.15.
pub const HEADROOM: f64 = 0.15;
/// `BBRMinPipeCwnd` (§2.8, §4.6.4.3) in segments: 4.
pub const MIN_PIPE_CWND_SEGMENTS: u64 = 4;

impl Bbr {
    /// `BBRMinPipeCwnd` in bytes (§4.6.4.3).
    pub(super) fn min_pipe_cwnd(&self) -> u64 {
        self.smss.saturating_mul(MIN_PIPE_CWND_SEGMENTS)
    }

    /// `bytes_per_sec * d` in bytes, saturating.
    pub(super) fn volume(bytes_per_sec: f64, d: Duration) -> u64 {
        let v = bytes_per_sec * d.as_secs_f64();
        // `as` saturates (and maps NaN to 0).
        v as u64
    }

    pub(super) fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited[0] || self.cwnd_limited[1]
    }

    /// §4.6.4.2 BBRBDPMultiple: `gain * bw * min_rtt`, or `InitialCwnd`
    /// without an RTT sample.
    pub(super) fn bdp_multiple(&self, bw: f64, gain: f64) -> u64 {
        match self.min_rtt {
            None => self.initial_cwnd,
            Some(min_rtt) => Self::volume(gain * bw, min_rtt),
        }
    }

    /// `BBR.bdp = BBR.bw * BBR.min_rtt` (§2.9.2).
    pub(super) fn bdp(&self) -> u64 {
        self.bdp_multiple(self.bw, 1.0)
    }

    /// §4.6.4.2 BBRQuantizationBudget (with §4.5.8 `offload_budget = 3 *
    /// send_quantum`).
    pub(super) fn quantization_budget(&self, inflight: u64) -> u64 {
        let offload_budget = self.send_quantum.saturating_mul(3);
        let mut inflight = inflight.max(offload_budget).max(self.min_pipe_cwnd());
        if self.state == BbrState::ProbeBwUp {
            inflight = inflight.saturating_add(self.smss.saturating_mul(2));
        }
        inflight
    }

    /// §4.6.4.2 BBRInflight(bw, gain).
    pub(super) fn inflight_at(&self, bw: f64, gain: f64) -> u64 {
        self.quantization_budget(self.bdp_multiple(bw, gain))
    }

    /// §4.6.4.2 BBRUpdateMaxInflight: the volume BBR allows in flight.
    pub(super) fn max_inflight(&self) -> u64 {
        let inflight = self
            .bdp_multiple(self.bw, self.cwnd_gain)
            .saturating_add(self.extra_acked);
        self.quantization_budget(inflight)
    }

    /// §4.3.3.5.3 BBRTargetInflight: `min(BBR.bdp, cwnd)`.
    pub(super) fn target_inflight(&self) -> u64 {
        self.bdp().min(self.cwnd)
    }

    /// §4.3.3.6 BBRInflightWithHeadroom.
    pub(super) fn inflight_with_headroom(&self) -> u64 {
        if self.inflight_longterm == u64::MAX {
            return u64::MAX;
        }
        let headroom = ((HEADROOM * self.inflight_longterm as f64) as u64).max(self.smss);
        self.inflight_longterm
            .saturating_sub(headroom)
            .max(self.min_pipe_cwnd())
    }

    /// §4.6.4.5 BBRProbeRTTCwnd.
    pub(super) fn probe_rtt_cwnd(&self) -> u64 {
        self.bdp_multiple(self.bw, PROBE_RTT_CWND_GAIN)
            .max(self.min_pipe_cwnd())
    }

    /// §4.6.4.6 BBRSetCwnd.
    pub(super) fn set_cwnd(&mut self, rs: &Sample) {
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
    pub(super) fn bound_cwnd_for_probe_rtt(&mut self) {
        if self.state == BbrState::ProbeRtt {
            self.cwnd = self.cwnd.min(self.probe_rtt_cwnd());
        }
    }

    /// §4.6.4.7 BBRBoundCwndForModel.
    pub(super) fn bound_cwnd_for_model(&mut self) {
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
}
