//! Endpoint behaviour: RSTs for unknown 4-tuples (RFC 9293 §3.10.7.1),
//! listeners (§3.10.7.2), malformed input, ephemeral ports, removal of
//! closed connections.

use super::has_event;
use crate::endpoint::{Endpoint, EPHEMERAL_FIRST, EPHEMERAL_LAST};
use crate::pair::{Dir, Pair};
use crate::{Config, Event, Instant, State};
use hollywood_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};
use std::net::SocketAddr;
use std::time::Duration;

fn repr(src: u16, dst: u16, seq: u32, ack: Option<u32>, flags: TcpFlags) -> TcpRepr {
    TcpRepr {
        src_port: src,
        dst_port: dst,
        seq: SeqNumber(seq),
        ack: SeqNumber(ack.unwrap_or(0)),
        flags: if ack.is_some() {
            flags | TcpFlags::ACK
        } else {
            flags
        },
        window: 1000,
        urgent: 0,
        options: TcpOptions::default(),
    }
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn connect_to_closed_port_is_reset() {
    let mut p = Pair::default_pair(3);
    // Nobody listens on b: the SYN is answered <SEQ=0><ACK=ISS+1><CTL=RST,ACK>.
    let ha = p.a.connect(p.now, p.a_addr, p.b_addr).unwrap();
    p.run_for(Duration::from_millis(100));
    assert!(has_event(&p.a_events, ha, Event::Reset));
    assert!(has_event(&p.a_events, ha, Event::Closed));
    let rst = p.sent(Dir::BtoA).next().unwrap();
    let syn = p.sent(Dir::AtoB).next().unwrap();
    assert_eq!(rst.tcp.flags, TcpFlags::RST | TcpFlags::ACK);
    assert_eq!((rst.tcp.seq, rst.tcp.ack), (SeqNumber(0), syn.tcp.seq + 1));
    assert_eq!(p.b.stats().resets_sent, 1);
    assert_eq!(p.a.connection_count(), 0, "closed connection removed");
    assert!(p.a.connection(ha).is_none());
}

#[test]
fn rst_rules_for_unknown_tuples_and_listeners() {
    let mut e = Endpoint::new(Config::default(), 1);
    let me = sa("10.0.0.2:80");
    let peer = sa("10.0.0.9:1234");
    let now = Instant::ZERO;
    // ACK to a closed port: <SEQ=SEG.ACK><CTL=RST>.
    let pkt = hollywood_wire::build_tcp_ip(
        peer,
        me,
        &repr(1234, 80, 77, Some(4242), TcpFlags::NONE),
        b"xy",
    );
    e.handle_packet(now, &pkt);
    let out = e.poll_transmit(now).unwrap();
    let r = hollywood_wire::parse_tcp_ip(&out).unwrap();
    assert_eq!((r.tcp.flags, r.tcp.seq), (TcpFlags::RST, SeqNumber(4242)));
    // A RST is never answered.
    let pkt = hollywood_wire::build_tcp_ip(peer, me, &repr(1234, 80, 77, None, TcpFlags::RST), &[]);
    e.handle_packet(now, &pkt);
    assert!(e.poll_transmit(now).is_none());
    // A listener answers a bare ACK with RST and drops segments with
    // neither SYN nor ACK.
    e.listen(me).unwrap();
    let pkt =
        hollywood_wire::build_tcp_ip(peer, me, &repr(1234, 80, 77, Some(99), TcpFlags::NONE), &[]);
    e.handle_packet(now, &pkt);
    let r = hollywood_wire::parse_tcp_ip(&e.poll_transmit(now).unwrap())
        .unwrap()
        .tcp;
    assert_eq!((r.flags, r.seq), (TcpFlags::RST, SeqNumber(99)));
    let pkt =
        hollywood_wire::build_tcp_ip(peer, me, &repr(1234, 80, 77, None, TcpFlags::NONE), b"data");
    e.handle_packet(now, &pkt);
    assert!(e.poll_transmit(now).is_none());
    assert_eq!(e.stats().resets_sent, 2);
    // Malformed input is counted and dropped.
    e.handle_packet(now, &[0x45, 0, 0]);
    e.handle_packet(now, &[]);
    assert_eq!(e.stats().malformed_dropped, 2);
    assert_eq!(e.listen(me), Err(crate::Error::AddrInUse));
}

#[test]
fn ephemeral_ports_are_deterministic() {
    let ports = |seed| {
        let mut e = Endpoint::new(Config::default(), seed);
        (0..5)
            .map(|_| {
                let h = e
                    .connect(Instant::ZERO, sa("10.0.0.1:0"), sa("10.0.0.2:80"))
                    .unwrap();
                e.connection(h).unwrap().local().port()
            })
            .collect::<Vec<_>>()
    };
    let a = ports(5);
    assert_eq!(a, ports(5));
    assert_ne!(a, ports(6));
    for w in a.windows(2) {
        assert_ne!(w[0], w[1]);
    }
    assert!(a
        .iter()
        .all(|&p| (EPHEMERAL_FIRST..=EPHEMERAL_LAST).contains(&p)));
    let mut e = Endpoint::new(Config::default(), 1);
    assert_eq!(
        e.connect(Instant::ZERO, sa("10.0.0.1:0"), sa("[::1]:80"))
            .err(),
        Some(crate::Error::InvalidAddress)
    );
    e.connect(Instant::ZERO, sa("10.0.0.1:5000"), sa("10.0.0.2:80"))
        .unwrap();
    assert_eq!(
        e.connect(Instant::ZERO, sa("10.0.0.1:5000"), sa("10.0.0.2:80"))
            .err(),
        Some(crate::Error::AddrInUse)
    );
}

#[test]
fn ipv6_connection() {
    let mut p = Pair::default_pair(9);
    p.a_addr = sa("[fd00::1]:0");
    p.b_addr = sa("[fd00::2]:443");
    let (ha, hb) = p.connect();
    let data = Pair::data(100_000, 1);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(10)), data);
    // IPv6 announces Config::mss - 20 (see tests::handshake).
    assert_eq!(p.ca(ha).negotiated().peer_mss, 1440);
}

#[test]
fn connections_are_removed_after_closed_is_reported() {
    let cfg = Config {
        time_wait: Duration::from_secs(1),
        ..Config::default()
    };
    let mut p = Pair::new(cfg.clone(), cfg, 4);
    let (ha, hb) = p.connect();
    p.ca(ha).close();
    p.run_for(Duration::from_millis(100));
    assert_eq!(p.b.state_of(hb), Some(State::CloseWait));
    p.cb(hb).close();
    p.run_for(Duration::from_millis(100));
    // Server: LAST-ACK → CLOSED, removed; client lingers in TIME-WAIT.
    assert_eq!(p.b.connection_count(), 0);
    assert_eq!(p.a.state_of(ha), Some(State::TimeWait));
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.a.connection_count(), 0);
    assert!(has_event(&p.a_events, ha, Event::Closed));
    assert!(has_event(&p.b_events, hb, Event::Closed));
    assert_eq!(p.a.stats().connections_closed, 1);
}

#[test]
fn time_wait_is_replaced_by_a_newer_syn() {
    let mut p = Pair::default_pair(12);
    let (ha, hb) = p.connect();
    let client = p.ca(ha).local();
    // Server closes first and ends in TIME-WAIT.
    p.cb(hb).close();
    p.run_for(Duration::from_millis(100));
    p.ca(ha).close();
    p.run_for(Duration::from_millis(100));
    assert_eq!(p.b.state_of(hb), Some(State::TimeWait));
    // A new connection from the same client port (newer timestamps).
    let h2 = p.a.connect(p.now, client, p.b_addr).unwrap();
    p.run_for(Duration::from_millis(200));
    assert_eq!(p.a.connection(h2).unwrap().state(), State::Established);
    assert_eq!(p.b.stats().time_wait_reused, 1);
}
