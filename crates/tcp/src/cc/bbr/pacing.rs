//! The pacing rate (§4.6.2) and the send quantum (§4.6.3).

use super::{Bbr, STARTUP_PACING_GAIN};
use std::time::Duration;

/// `BBRPacingMarginPercent` (§2.5, §4.6.2): pace 1 % below `bw`.
pub const PACING_MARGIN_PERCENT: f64 = 1.0;

/// `BBR.send_quantum` upper bound (§4.6.3): 64 KBytes.
pub(super) const SEND_QUANTUM_MAX: u64 = 64 * 1024;
/// Nominal RTT for the initial pacing rate when none is known (§4.6.2).
const NOMINAL_RTT: Duration = Duration::from_millis(1);

impl Bbr {
    /// §4.6.2 BBRInitPacingRate: `2.77 * InitialCwnd / (SRTT or 1 ms)`.
    pub(super) fn init_pacing_rate(&mut self, srtt: Option<Duration>) {
        let rtt = srtt.filter(|d| !d.is_zero()).unwrap_or(NOMINAL_RTT);
        let nominal_bandwidth = self.initial_cwnd as f64 / rtt.as_secs_f64();
        self.pacing_rate = (STARTUP_PACING_GAIN * nominal_bandwidth).max(1.0);
    }

    /// Recompute the initial pacing rate at the first RTT sample, unless a
    /// bandwidth sample has already set it (see the module doc).
    pub(super) fn maybe_init_pacing_from_rtt(&mut self, rtt: Option<Duration>) {
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
    pub(super) fn set_pacing_rate_with_gain(&mut self, pacing_gain: f64) {
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
    pub(super) fn set_send_quantum(&mut self) {
        let q = Self::volume(self.pacing_rate, Duration::from_millis(1));
        self.send_quantum = q.min(SEND_QUANTUM_MAX).max(self.smss.saturating_mul(2));
    }
}
