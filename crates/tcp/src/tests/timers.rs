//! Keep-alive (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6).

use super::event_time;
use crate::pair::{Dir, Pair};
use crate::{Config, Event, KeepaliveConfig, State};
use std::time::Duration;

fn ka_cfg() -> Config {
    Config {
        keepalive: Some(KeepaliveConfig {
            idle: Duration::from_secs(10),
            interval: Duration::from_secs(1),
            probes: 3,
        }),
        ..Config::default()
    }
}

#[test]
fn keepalive_probes_an_idle_peer_and_keeps_it() {
    let mut p = Pair::new(ka_cfg(), Config::default(), 51);
    let (ha, hb) = p.connect();
    let mark = p.trace.len();
    p.run_for(Duration::from_secs(35));
    let probes: Vec<_> = p.trace[mark..]
        .iter()
        .filter(|t| t.dir == Dir::AtoB)
        .cloned()
        .collect();
    // One probe per idle period, each answered.
    assert_eq!(probes.len(), 3);
    let una = p.ca(ha).snd_una();
    assert!(probes.iter().all(|t| t.tcp.seq == una - 1 && t.len == 0));
    assert_eq!(p.ca(ha).stats().keepalives_sent, 3);
    assert_eq!(p.a.state_of(ha), Some(State::Established));
    assert_eq!(p.b.state_of(hb), Some(State::Established));
}

#[test]
fn keepalive_declares_a_dead_peer() {
    let mut p = Pair::new(ka_cfg(), Config::default(), 52);
    let (ha, _hb) = p.connect();
    let t0 = p.now;
    let una = p.ca(ha).snd_una();
    let mark = p.trace.len();
    p.ba.loss = 1.0;
    p.run_for(Duration::from_secs(30));
    let t = event_time(&p.a_events, ha, Event::TimedOut).expect("keep-alive timeout");
    // Idle 10 s (from the last segment received, just before t0), then 3
    // unanswered probes 1 s apart: dead at 13 s.
    let d = t - t0;
    assert!(
        d > Duration::from_millis(12_900) && d <= Duration::from_secs(13),
        "{d:?}"
    );
    let probes = p.trace[mark..]
        .iter()
        .filter(|t| t.dir == Dir::AtoB && t.tcp.seq == una - 1)
        .count();
    assert_eq!(probes, 3);
    assert_eq!(p.a.connection_count(), 0);
}

/// Fuzz regression (engine_segments): a keep-alive timer serviced late
/// (the caller slept past several intervals) sends one probe and waits a
/// full interval for the answer, instead of firing every overdue probe at
/// once and declaring the peer dead in the same instant.
#[test]
fn late_keepalive_timer_still_spaces_probes() {
    let mut p = Pair::new(ka_cfg(), Config::default(), 53);
    let (ha, _hb) = p.connect();
    p.ba.loss = 1.0;
    // Service the timer 20 s late: past idle + 3 intervals.
    let late = p.now + Duration::from_secs(30);
    p.now = late;
    p.a.handle_timeout(late);
    let mut probes = 0;
    while p.a.poll_transmit(late).is_some() {
        probes += 1;
    }
    assert_eq!(probes, 1);
    assert_eq!(p.a.state_of(ha), Some(State::Established));
    let next = p.a.poll_timeout().expect("keep-alive armed");
    assert_eq!(next - late, Duration::from_secs(1));
    // Still no answer: the connection dies after the remaining probes.
    p.run_for(Duration::from_secs(10));
    assert_eq!(p.a.connection_count(), 0);
    assert!(event_time(&p.a_events, ha, Event::TimedOut)
        .is_some_and(|t| t - late == Duration::from_secs(3)));
}

/// Pacing (found by the engine fuzz target): once the pacing timer has
/// fired, `handle_timeout` must leave no timer due — the release time is
/// recomputed by the next `poll_transmit`, not re-armed in the past. The
/// harness (`Pair::step`) checks that after every `handle_timeout`.
#[test]
fn no_timer_is_due_after_the_pacing_timer_fires() {
    let cfg = Config {
        cc: crate::CcAlgorithm::Bbr,
        ..Config::default()
    };
    let mut p = Pair::new(cfg, Config::default(), 52);
    p.ab.rate_bps = Some(20_000_000);
    p.ab.queue_limit = 200_000;
    let (ha, hb) = p.connect();
    let data = Pair::data(400_000, 3);
    let got = p.transfer(ha, hb, &data, Duration::from_secs(30));
    assert_eq!(got, data);
    assert!(p.ca(ha).pacing_rate().is_some());
}
