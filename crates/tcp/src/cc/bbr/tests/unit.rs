//! Unit tests: single hooks and helpers.

use super::*;
use crate::cc::{CcAlgorithm, RateSample};
use hollywood_wire::SeqNumber;

#[test]
fn initial_state_and_registration() {
    let cc = Bbr::new(SMSS as usize, IW);
    assert_eq!(cc.cwnd(), 10 * SMSS as usize);
    assert_eq!(cc.state(), BbrState::Startup);
    assert!(cc.in_slow_start());
    assert_eq!(cc.ssthresh(), usize::MAX);
    assert_eq!(cc.name(), "bbr");
    assert!(cc.owns_recovery_window());
    //= §4.6.2: 2.77 * InitialCwnd / 1 ms before any RTT is known.
    assert_eq!(cc.pacing_rate(), Some(27_700_000));
    //= §4.6.3: pacing_rate * 1 ms, within [2 SMSS, 64 KB].
    assert_eq!(cc.send_quantum(), Some(27_700));
    check_invariants(&cc, false);
    // Degenerate arguments.
    let cc = Bbr::new(0, 0);
    assert_eq!((cc.smss(), cc.cwnd()), (1, 1));
    assert!(cc.pacing_rate().unwrap() > 0);
    // Registered in the algorithm table; CUBIC stays the default.
    let alg = CcAlgorithm::parse("bbr").expect("bbr is registered");
    assert_eq!(alg, CcAlgorithm::Bbr);
    assert_eq!(alg.name(), "bbr");
    assert!(CcAlgorithm::ALL.contains(&CcAlgorithm::Bbr));
    let boxed = alg.build(1448, 10);
    assert_eq!((boxed.name(), boxed.cwnd()), ("bbr", 14_480));
    assert!(boxed.pacing_rate().is_some() && boxed.owns_recovery_window());
    assert_eq!(CcAlgorithm::default(), CcAlgorithm::Cubic);
}

#[test]
fn initial_pacing_rate_uses_the_first_rtt() {
    let mut cc = Bbr::new(SMSS as usize, IW);
    cc.on_rtt_sample(T0, Duration::from_millis(100), SeqNumber(0), SeqNumber(0));
    //= §4.6.2: 2.77 * 10 000 bytes / 100 ms.
    assert_eq!(cc.pacing_rate(), Some(277_000));
    assert_eq!(cc.send_quantum(), Some(2 * SMSS as usize));
    // Only once: a later sample does not reset it.
    cc.on_rtt_sample(T0, Duration::from_millis(10), SeqNumber(0), SeqNumber(0));
    assert_eq!(cc.pacing_rate(), Some(277_000));
}

#[test]
fn windowed_max_filter() {
    let mut f = WindowedMax::default();
    assert_eq!(f.update(0, 10, 10), 10);
    assert_eq!(f.update(1, 5, 10), 10);
    assert_eq!(f.update(5, 7, 10), 10);
    // The best sample ages out after the window; the next best remain.
    assert_eq!(f.update(11, 3, 10), 7);
    assert_eq!(f.update(16, 2, 10), 3);
    // A larger sample takes over at once.
    assert_eq!(f.update(17, 50, 10), 50);
    // Window of 1 (Startup): only the last round counts.
    let mut f = WindowedMax::default();
    f.update(0, 100, 1);
    assert_eq!(f.update(2, 4, 1), 4);
}

#[test]
fn inflight_at_which_loss_crossed_the_threshold() {
    //= §4.5.10.2: 9 000 bytes in flight before a 1 000-byte packet,
    //= nothing lost before it: 2 % is crossed 183 bytes into it.
    assert_eq!(
        inflight_longterm_from_lost_packet(10_000, 1_000, 1_000),
        9_183
    );
    // Degenerate inputs do not underflow.
    assert_eq!(inflight_longterm_from_lost_packet(0, 0, 1_000), 0);
    assert_eq!(inflight_longterm_from_lost_packet(500, 100_000, 1_000), 0);
    assert!(is_inflight_too_high(3, 100));
    assert!(!is_inflight_too_high(2, 100));
}

fn ack(now: Instant, delivered: u64, inflight: u64, in_recovery: bool) -> DeliveryEvent {
    DeliveryEvent {
        now,
        delivered,
        lost: 0,
        inflight,
        rate: Some(RateSample {
            delivered: SMSS,
            interval: Duration::from_millis(40),
            prior_delivered: delivered.saturating_sub(SMSS),
            is_app_limited: false,
            tx_in_flight: inflight + SMSS,
            lost: 0,
            newly_acked: SMSS,
            newly_lost: 0,
            rtt: Some(Duration::from_millis(40)),
        }),
        min_rtt: Some(Duration::from_millis(40)),
        srtt: Some(Duration::from_millis(40)),
        in_recovery,
    }
}

#[test]
fn recovery_saves_and_restores_cwnd() {
    //= §4.6.4.4: save cwnd on entering fast recovery or RTO, restore
    //= it (then bound it by the model) on exit or undo.
    let mut cc = Bbr::new(SMSS as usize, IW);
    cc.on_delivery(&ack(T0, SMSS, 9 * SMSS, false));
    let before = cc.cwnd;
    cc.on_congestion_event(T0, 10 * SMSS as usize);
    assert_eq!(cc.cwnd, before, "no multiplicative decrease on entry");
    cc.on_rto(T0, 10 * SMSS as usize);
    assert_eq!(cc.cwnd(), SMSS as usize, "RTO: cwnd = pipe (0) + 1 segment");
    check_invariants(&cc, true);
    // The next ACK in recovery: at least BBRMinPipeCwnd.
    cc.on_delivery(&ack(T0 + Duration::from_millis(40), 2 * SMSS, 0, true));
    assert!(cc.cwnd >= 4 * SMSS && cc.cwnd < before);
    // Leaving recovery (as seen in the DeliveryEvent): restored.
    cc.on_delivery(&ack(T0 + Duration::from_millis(80), 3 * SMSS, SMSS, false));
    assert!(cc.cwnd >= before);
    // Undo ends recovery and restores too.
    let before = cc.cwnd;
    cc.on_rto(T0, 0);
    cc.on_spurious_congestion(T0);
    assert_eq!(cc.cwnd, before);
    // The legacy hook is ignored.
    cc.on_ack(T0, 100 * SMSS as usize, 0, Duration::from_millis(40));
    assert_eq!(cc.cwnd, before);
}

#[test]
fn mss_change_keeps_segments() {
    let mut cc = Bbr::new(SMSS as usize, IW);
    cc.set_mss(1500);
    assert_eq!(cc.cwnd(), 15_000);
    check_invariants(&cc, false);
    cc.set_mss(0);
    assert_eq!(cc.smss(), 1);
    assert!(cc.cwnd() >= 4);
}

/// The state machine edges of §4.1.1.
#[test]
fn state_machine_edges() {
    use BbrState::*;
    let all = [
        Startup,
        Drain,
        ProbeBwDown,
        ProbeBwCruise,
        ProbeBwRefill,
        ProbeBwUp,
        ProbeRtt,
    ];
    let edges: Vec<(BbrState, BbrState)> = all
        .iter()
        .flat_map(|&a| all.iter().map(move |&b| (a, b)))
        .filter(|&(a, b)| a.can_transition_to(b))
        .collect();
    assert_eq!(edges.len(), 15);
    assert!(!Startup.can_transition_to(ProbeBwDown));
    assert!(!ProbeBwCruise.can_transition_to(ProbeBwUp));
    assert!(!ProbeRtt.can_transition_to(Drain));
    assert!(all.iter().filter(|s| s.is_probe_bw()).count() == 4);
}
