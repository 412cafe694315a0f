//! Closing: half-close, simultaneous close, TIME-WAIT, abort.

use super::{event_time, has_event};
use crate::pair::Pair;
use crate::{Config, Event, State};
use std::time::Duration;

#[test]
fn half_close_peer_keeps_sending() {
    let mut p = Pair::default_pair(21);
    let (ha, hb) = p.connect();
    let up = Pair::data(50_000, 1);
    assert_eq!(p.transfer(ha, hb, &up, Duration::from_secs(10)), up);
    p.ca(ha).close();
    p.run_for(Duration::from_millis(100));
    assert_eq!(p.a.state_of(ha), Some(State::FinWait2));
    assert_eq!(p.b.state_of(hb), Some(State::CloseWait));
    let mut buf = [0u8; 16];
    assert_eq!(p.cb(hb).recv(&mut buf), Ok(0), "EOF after the data");
    // The server keeps sending after the client's FIN.
    let down = Pair::data(300_000, 2);
    assert_eq!(
        p.transfer_back(hb, ha, &down, Duration::from_secs(10)),
        down
    );
    p.cb(hb).close();
    p.run_for(Duration::from_millis(100));
    assert_eq!(p.a.state_of(ha), Some(State::TimeWait));
    assert!(has_event(&p.b_events, hb, Event::Closed));
}

#[test]
fn simultaneous_close_both_time_wait_then_closed() {
    let cfg = Config {
        time_wait: Duration::from_secs(3),
        ..Config::default()
    };
    let mut p = Pair::new(cfg.clone(), cfg, 22);
    let (ha, hb) = p.connect();
    p.ca(ha).close();
    p.cb(hb).close();
    p.run_for(Duration::from_millis(100));
    assert_eq!(p.a.state_of(ha), Some(State::TimeWait));
    assert_eq!(p.b.state_of(hb), Some(State::TimeWait));
    let t0 = p.now;
    p.run_for(Duration::from_secs(5));
    let ta = event_time(&p.a_events, ha, Event::Closed).unwrap();
    let tb = event_time(&p.b_events, hb, Event::Closed).unwrap();
    // TIME-WAIT lasts config.time_wait from entering it (~10 ms after close).
    for t in [ta, tb] {
        let d = t - t0;
        assert!(
            d > Duration::from_millis(2800) && d < Duration::from_secs(3),
            "{d:?}"
        );
    }
    assert_eq!((p.a.connection_count(), p.b.connection_count()), (0, 0));
}

#[test]
fn abort_resets_the_peer() {
    let mut p = Pair::default_pair(23);
    let (ha, hb) = p.connect();
    p.ca(ha).send(b"unsent data").unwrap();
    p.ca(ha).abort();
    p.run_for(Duration::from_millis(100));
    assert!(has_event(&p.b_events, hb, Event::Reset));
    assert!(has_event(&p.b_events, hb, Event::Closed));
    assert!(has_event(&p.a_events, ha, Event::Closed));
    assert_eq!((p.a.connection_count(), p.b.connection_count()), (0, 0));
}

#[test]
fn a_reset_connections_counters_outlive_it() {
    let mut p = Pair::default_pair(25);
    let (ha, hb) = p.connect();
    assert_eq!(p.ca(ha).send(&[7; 5_000]), Ok(5_000));
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.a.final_stats(ha), None, "still open");
    p.cb(hb).abort();
    p.run_for(Duration::from_millis(100));
    assert!(has_event(&p.a_events, ha, Event::Reset));
    assert!(p.a.connection(ha).is_none(), "removed");
    let st = p.a.final_stats(ha).expect("kept");
    assert_eq!(st.data_bytes_first_sent, 5_000, "{st:?}");
}

#[test]
fn close_with_lost_fin_retransmits_it() {
    let mut p = Pair::default_pair(24);
    let (ha, hb) = p.connect();
    let mut dropped = false;
    p.ab.verdict = Some(Box::new(move |i| {
        if i.tcp.flags.fin() && !dropped {
            dropped = true;
            crate::pair::Verdict::Drop
        } else {
            crate::pair::Verdict::Pass
        }
    }));
    p.ca(ha).send(b"last words").unwrap();
    p.ca(ha).close();
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.b.state_of(hb), Some(State::CloseWait));
    let mut buf = [0u8; 32];
    assert_eq!(p.cb(hb).recv(&mut buf), Ok(10));
    assert_eq!(p.a.state_of(ha), Some(State::FinWait2));
    assert_eq!(p.ca(ha).stats().retransmitted_segments, 1);
}
