//! ProbeRTT (§4.3.4): the min-RTT filter (§4.3.4.4 BBRUpdateMinRTT),
//! entering, holding and leaving ProbeRTT (§4.3.4.4, §4.3.4.5).

use super::{AckPhase, Bbr, BbrState, Sample};
use crate::time::Instant;
use std::time::Duration;

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

impl Bbr {
    /// §4.3.4.4 BBRUpdateMinRTT.
    pub(super) fn update_min_rtt(&mut self, now: Instant, rs: &Sample) {
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
    pub(super) fn check_probe_rtt(&mut self, now: Instant, rs: &Sample) {
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
    pub(super) fn enter_probe_rtt(&mut self) {
        self.probe_rtt_app_limited = Some((self.delivered, self.delivered));
        self.set_state(BbrState::ProbeRtt);
    }

    /// §4.3.4.4 BBRHandleProbeRTT.
    pub(super) fn handle_probe_rtt(&mut self, now: Instant) {
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
    pub(super) fn check_probe_rtt_done(&mut self, now: Instant) {
        if self.probe_rtt_done_stamp.is_some_and(|t| now > t) {
            // schedule the next ProbeRTT
            self.probe_rtt_min_stamp = now;
            self.restore_cwnd();
            self.exit_probe_rtt(now);
        }
    }

    /// §4.3.4.5 BBRExitProbeRTT.
    pub(super) fn exit_probe_rtt(&mut self, now: Instant) {
        self.reset_lower_bounds();
        if self.full_bw_reached {
            self.start_probe_bw_down(now);
            self.start_probe_bw_cruise();
        } else {
            self.enter_startup();
        }
    }
}
