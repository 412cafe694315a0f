//! Tests of the BBR controller.
//!
//! - [`model`]: a packet-level sender and path simulator that drives the
//!   controller hook by hook (see its documentation for why it is used
//!   here rather than the crate's two-endpoint harness, `crate::pair`);
//! - [`scenarios`]: behaviour measured in that simulator (Startup, Drain,
//!   steady-state goodput and queueing, ProbeRTT, random loss, live video,
//!   a shallow buffer, a state-transition snapshot);
//! - [`unit`]: single-hook checks (initial state, registration, initial
//!   pacing rate, the windowed filter, recovery, MSS changes, the state
//!   machine's edges);
//! - [`prop`]: random hook sequences keep the invariants;
//! - [`engine`]: BBR inside the engine, over `crate::pair`, through the
//!   public connection API (bulk goodput, loss, queueing).

use super::pacing::SEND_QUANTUM_MAX;
use super::*;

mod engine;
mod model;
mod prop;
mod scenarios;
mod unit;

const SMSS: u64 = 1000;
const IW: usize = 10;
const T0: Instant = Instant::from_nanos(1_000_000_000);

/// Megabits per second in bytes per second.
fn mbps(m: f64) -> u64 {
    (m * 1e6 / 8.0) as u64
}

/// Invariants that hold after every step (panics on violation).
/// `rto_window`: `on_rto` ran and no `on_delivery` since (cwnd may be
/// the one-segment loss window).
fn check_invariants(cc: &Bbr, rto_window: bool) {
    let smss = cc.smss;
    if rto_window {
        assert!(cc.cwnd >= smss, "cwnd {} below one segment", cc.cwnd);
    } else {
        //= §4.6.4.3: never below BBRMinPipeCwnd outside the RTO window.
        assert!(
            cc.cwnd >= 4 * smss,
            "cwnd {} below 4*SMSS in {:?}",
            cc.cwnd,
            cc.state
        );
    }
    let rate = cc.pacing_rate().expect("BBR always paces");
    assert!(rate > 0);
    assert!(cc.pacing_rate.is_finite() && cc.pacing_rate >= 1.0);
    assert_eq!((cc.pacing_gain, cc.cwnd_gain), cc.state.gains());
    assert!(cc.pacing_gain.is_finite() && cc.pacing_gain > 0.0);
    assert!(cc.cwnd_gain.is_finite() && cc.cwnd_gain > 0.0);
    assert!(cc.send_quantum >= 2 * smss);
    assert!(cc.send_quantum <= SEND_QUANTUM_MAX.max(2 * smss));
    assert!(cc.max_bw.is_finite() && cc.max_bw >= 0.0);
    assert!(cc.bw.is_finite() && cc.bw >= 0.0 && cc.bw <= cc.max_bw);
    assert!(cc.bw_shortterm >= 0.0 && !cc.bw_shortterm.is_nan());
    assert!(cc.bw_latest.is_finite() && cc.full_bw.is_finite());
    assert_eq!(cc.in_slow_start(), cc.state == BbrState::Startup);
    let ssthresh = cc.ssthresh();
    assert!(
        (ssthresh == usize::MAX) == (cc.state == BbrState::Startup),
        "ssthresh {ssthresh} in {:?}",
        cc.state
    );
    assert!(ssthresh >= 2 * cc.smss());
}

/// Every recorded transition from index `from` on is an edge of the
/// draft's state machine; returns the new length.
fn check_transitions(cc: &Bbr, from: usize) -> usize {
    for &(a, b) in &cc.transitions[from..] {
        assert!(a.can_transition_to(b), "illegal transition {a:?} -> {b:?}");
    }
    cc.transitions.len()
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}
