//! Read-only views of the model and the control parameters (for logs,
//! the lab and tests).

use super::{Bbr, BbrState};
use std::time::Duration;

impl Bbr {
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
}
