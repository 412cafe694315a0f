//! The BBR states and their gains (§4.1.1, §4.6.1 table), the probe
//! feedback phase of the ACK stream (§4.3.3.6 `BBR.ack_phase`), and the
//! state change itself.

use super::Bbr;

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
    pub(super) fn gains(self) -> (f64, f64) {
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
pub(super) enum AckPhase {
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

impl Bbr {
    pub(super) fn set_state(&mut self, next: BbrState) {
        #[cfg(test)]
        self.transitions.push((self.state, next));
        self.state = next;
        (self.pacing_gain, self.cwnd_gain) = next.gains();
    }
}
