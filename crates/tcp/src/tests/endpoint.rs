//! Endpoint behaviour: RSTs for unknown 4-tuples (RFC 9293 §3.10.7.1),
//! listeners (§3.10.7.2), malformed input, ephemeral ports, removal of
//! closed connections, the SYN backlog and SYN cookies (RFC 4987).

use super::{has_event, segment};
use crate::endpoint::{Endpoint, EPHEMERAL_FIRST, EPHEMERAL_LAST};
use crate::pair::{Dir, PacketInfo, Pair, Verdict};
use crate::{Config, Event, Instant, State};
use hollywood_wire::{SeqNumber, TcpFlags, TcpRepr, Timestamp};
use std::net::SocketAddr;
use std::time::Duration;

fn repr(src: u16, dst: u16, seq: u32, ack: Option<u32>, flags: TcpFlags) -> TcpRepr {
    segment((src, dst), SeqNumber(seq), ack.map(SeqNumber), flags, 1000)
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
fn a_flood_to_closed_ports_queues_a_bounded_number_of_resets() {
    // 5 000 segments to closed ports, none of the answers taken out yet: at
    // most MAX_QUEUED_RSTS wait, the rest are counted as suppressed.
    let mut e = Endpoint::new(Config::default(), 1);
    let me = sa("10.0.0.2:80");
    let now = Instant::ZERO;
    for k in 0..5_000u32 {
        let peer = SocketAddr::new(sa("10.0.0.9:1").ip(), 1024 + (k % 60_000) as u16);
        let pkt = hollywood_wire::build_tcp_ip(
            peer,
            me,
            &repr(peer.port(), 80, k, Some(k), TcpFlags::NONE),
            b"x",
        );
        e.handle_packet(now, &pkt);
    }
    let mut queued = 0;
    while e.poll_transmit(now).is_some() {
        queued += 1;
    }
    assert_eq!(queued, crate::endpoint::MAX_QUEUED_RSTS);
    assert_eq!(e.stats().resets_sent as usize, queued);
    assert_eq!(e.stats().resets_suppressed as usize, 5_000 - queued);
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

// ---- SYN floods: backlog and SYN cookies (review B8, RFC 4987) ------------

/// A SYN from a spoofed source `i` (distinct address and port, ports below
/// the ephemeral range so the link can drop what is sent back to them),
/// with every option a modern client offers.
pub(super) fn spoofed_syn(i: u32, to: SocketAddr) -> Vec<u8> {
    let ip = std::net::Ipv4Addr::new(10, 1 + (i >> 16) as u8, (i >> 8) as u8, i as u8);
    let from = SocketAddr::new(ip.into(), 1024 + (i % 30_000) as u16);
    let mut r = repr(
        from.port(),
        to.port(),
        i.wrapping_mul(2_654_435_761),
        None,
        TcpFlags::SYN,
    );
    r.options.mss = Some(1460);
    r.options.window_scale = Some(7);
    r.options.sack_permitted = true;
    r.options.timestamp = Some(Timestamp { tsval: i, tsecr: 0 });
    hollywood_wire::build_tcp_ip(from, to, &r, &[])
}

/// `n` spoofed SYNs to `b`, each followed by a flush (what `b` sends to
/// the spoofed sources is dropped by the link verdict).
fn flood(p: &mut Pair, n: u32) {
    p.ba.verdict = Some(Box::new(|i: &PacketInfo| {
        Verdict::drop_if(i.tcp.dst_port < EPHEMERAL_FIRST)
    }));
    for i in 0..n {
        let pkt = spoofed_syn(i, p.b_addr);
        p.b.handle_packet(p.now, &pkt);
        p.flush();
    }
}

#[test]
fn syn_flood_keeps_the_backlog_and_cookies_let_a_client_in() {
    let mut p = Pair::default_pair(21);
    p.b.listen(p.b_addr).unwrap();
    let limit = Config::default().syn_backlog;
    assert_eq!(limit, 256);
    flood(&mut p, 10_000);
    // Before the limit: every SYN made a TCB that lived for its SYN-ACK
    // retries (about 2 minutes), 10 000 of them. Now at most `limit`.
    assert_eq!(p.b.half_open(p.b_addr), Some(limit));
    assert_eq!(p.b.connection_count(), limit);
    let st = p.b.stats();
    assert_eq!(st.syns_received, limit as u64);
    assert_eq!(st.syn_cookies_sent, 10_000 - limit as u64);
    assert_eq!(st.syns_dropped, 0);
    // A legitimate client while the backlog is still full: its SYN is
    // answered with a cookie and its ACK opens the connection.
    let (ha, hb) = p.connect();
    assert_eq!(p.b.stats().syn_cookies_accepted, 1);
    assert_eq!(p.b.half_open(p.b_addr), Some(limit), "still full");
    // What a cookie carries: MSS and timestamps, not WS or SACK.
    for n in [p.ca(ha).negotiated(), p.cb(hb).negotiated()] {
        assert!(n.timestamps && !n.window_scaling && !n.sack, "{n:?}");
        assert_eq!(n.peer_mss, 1460);
    }
    // The timestamp echo timed the handshake: 2 × 10 ms.
    let srtt = p.cb(hb).srtt().unwrap();
    assert!(
        srtt >= Duration::from_millis(19) && srtt <= Duration::from_millis(21),
        "{srtt:?}"
    );
    let data = Pair::data(300_000, 3);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(60)), data);
    let back = Pair::data(100_000, 4);
    assert_eq!(
        p.transfer_back(hb, ha, &back, Duration::from_secs(60)),
        back
    );
    // The spoofed half-open connections give up their SYN-ACK retries.
    p.run_for(Duration::from_secs(200));
    assert_eq!(p.b.half_open(p.b_addr), Some(0));
    assert!(p.b.connection(hb).is_some());
}

#[test]
fn the_endpoint_holds_at_most_max_connections() {
    // A server endpoint with room for 3 connections: SYNs beyond are
    // dropped (no SYN-ACK, no state), and its own connect fails; once one
    // connection is gone a client gets in.
    let server = Config {
        max_connections: 3,
        ..Config::default()
    };
    let mut p = Pair::new(Config::default(), server, 23);
    p.b.listen(p.b_addr).unwrap();
    flood(&mut p, 10);
    assert_eq!(p.b.connection_count(), 3);
    assert_eq!(p.b.stats().syns_received, 3);
    assert_eq!(p.b.stats().conn_limit_dropped, 7);
    let other: std::net::SocketAddr = "10.0.0.9:80".parse().unwrap();
    assert_eq!(
        p.b.connect(p.now, p.b_addr, other),
        Err(crate::Error::TooManyConnections)
    );
    // The spoofed half-open connections give up; a client connects.
    p.run_for(Duration::from_secs(200));
    assert_eq!(p.b.connection_count(), 0);
    let (ha, hb) = p.connect();
    let data = Pair::data(50_000, 5);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(60)), data);
}

#[test]
fn syn_flood_without_cookies_drops_and_a_client_connects_afterwards() {
    let server = Config {
        syn_cookies: false,
        syn_backlog: 100,
        ..Config::default()
    };
    let mut p = Pair::new(Config::default(), server, 22);
    p.b.listen(p.b_addr).unwrap();
    flood(&mut p, 10_000);
    assert_eq!(p.b.connection_count(), 100);
    let st = p.b.stats();
    assert_eq!((st.syns_received, st.syns_dropped), (100, 9_900));
    assert_eq!(st.syn_cookies_sent, 0);
    p.run_for(Duration::from_secs(200));
    assert_eq!(p.b.connection_count(), 0);
    let (ha, hb) = p.connect();
    // A normal handshake keeps every option.
    let n = p.cb(hb).negotiated();
    assert!(n.timestamps && n.window_scaling && n.sack);
    let data = Pair::data(50_000, 5);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(30)), data);
}

#[test]
fn cookie_client_without_timestamps() {
    // No timestamps: the handshake cannot be timed; the connection starts
    // from a conservative sample (initial_rto) and still works.
    let client = Config {
        timestamps: false,
        ..Config::default()
    };
    let mut p = Pair::new(client, Config::default(), 23);
    p.b.listen(p.b_addr).unwrap();
    flood(&mut p, 300);
    let (ha, hb) = p.connect();
    assert_eq!(p.b.stats().syn_cookies_accepted, 1);
    let n = p.cb(hb).negotiated();
    assert!(!n.timestamps && !n.window_scaling && !n.sack);
    assert_eq!(p.cb(hb).srtt(), Some(Config::default().initial_rto));
    let data = Pair::data(100_000, 6);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(60)), data);
    // As the server sends, its samples (20 ms) pull the average down.
    let back = Pair::data(200_000, 7);
    assert_eq!(
        p.transfer_back(hb, ha, &back, Duration::from_secs(60)),
        back
    );
    let srtt = p.cb(hb).srtt().unwrap();
    assert!(srtt < Duration::from_millis(900), "{srtt:?}");
}

/// The SYN-ACK `b` sends to `from` for a SYN with `isn`, MSS `mss`.
fn synack_for(
    e: &mut Endpoint,
    now: Instant,
    from: SocketAddr,
    to: SocketAddr,
    isn: u32,
    mss: u16,
) -> TcpRepr {
    let mut r = repr(from.port(), to.port(), isn, None, TcpFlags::SYN);
    r.options.mss = Some(mss);
    r.options.timestamp = Some(Timestamp {
        tsval: 777,
        tsecr: 0,
    });
    e.handle_packet(now, &hollywood_wire::build_tcp_ip(from, to, &r, &[]));
    let out = e.poll_transmit(now).expect("SYN-ACK");
    let s = hollywood_wire::parse_tcp_ip(&out).unwrap().tcp;
    assert_eq!(s.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(s.ack, SeqNumber(isn.wrapping_add(1)));
    s
}

/// The client's ACK of `synack`.
fn ack_of(
    from: SocketAddr,
    to: SocketAddr,
    isn: u32,
    synack: &TcpRepr,
    cookie_delta: u32,
) -> Vec<u8> {
    let mut r = repr(
        from.port(),
        to.port(),
        isn.wrapping_add(1),
        Some(synack.seq.0.wrapping_add(1).wrapping_add(cookie_delta)),
        TcpFlags::NONE,
    );
    r.options.timestamp = Some(Timestamp {
        tsval: 778,
        tsecr: synack.options.timestamp.unwrap().tsval,
    });
    hollywood_wire::build_tcp_ip(from, to, &r, &[])
}

#[test]
fn syn_cookies_are_checked() {
    let cfg = Config {
        syn_backlog: 1,
        ..Config::default()
    };
    let mut e = Endpoint::new(cfg, 31);
    let me = sa("10.0.0.2:80");
    e.listen(me).unwrap();
    let t0 = Instant::from_nanos(5_000_000_000);
    // The first SYN takes the only backlog slot (a normal SYN-ACK with
    // every option the client offered).
    let a = sa("10.0.0.7:4000");
    let s1 = synack_for(&mut e, t0, a, me, 100, 1460);
    assert_eq!(e.half_open(me), Some(1));
    // The next ones get cookies: MSS 1450 is rounded down to 1440.
    let b = sa("10.0.0.8:4001");
    let s2 = synack_for(&mut e, t0, b, me, 5000, 1450);
    assert_eq!(s2.options.mss, Some(1460), "ours");
    assert!(s2.options.window_scale.is_none() && !s2.options.sack_permitted);
    assert!(s2.options.timestamp.is_some());
    assert_eq!(e.stats().syn_cookies_sent, 1);
    assert_eq!(e.connection_count(), 1, "no state for the cookie");
    // Forged: another cookie value, another ISN, the MSS bits changed.
    let t1 = t0 + Duration::from_millis(20);
    for bad in [
        ack_of(b, me, 5000, &s2, 1),
        ack_of(b, me, 5001, &s2, 0),
        ack_of(b, me, 5000, &s2, 1 << 24),
        ack_of(sa("10.0.0.9:4001"), me, 5000, &s2, 0),
    ] {
        e.handle_packet(t1, &bad);
        let out = e.poll_transmit(t1).unwrap();
        let rst = hollywood_wire::parse_tcp_ip(&out).unwrap().tcp;
        assert_eq!(rst.flags, TcpFlags::RST);
    }
    assert_eq!(e.stats().syn_cookies_rejected, 4);
    assert_eq!(e.connection_count(), 1);
    // The genuine ACK opens the connection, announced as accepted.
    e.handle_packet(t1, &ack_of(b, me, 5000, &s2, 0));
    assert_eq!(e.stats().syn_cookies_accepted, 1);
    assert_eq!(e.connection_count(), 2);
    let mut accepted = None;
    while let Some(ev) = e.poll_event() {
        if let crate::EndpointEvent::Accepted { handle, remote } = ev {
            accepted = Some((handle, remote));
        }
    }
    let (h, remote) = accepted.expect("accepted");
    assert_eq!(remote, b);
    let c = e.connection(h).unwrap();
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.negotiated().peer_mss, 1440);
    assert_eq!(c.srtt(), Some(Duration::from_millis(20)));
    // Replayed much later (and the backlog overflowing again meanwhile):
    // the cookie has expired.
    let c3 = sa("10.0.0.10:4002");
    let late = t0 + Duration::from_secs(200);
    let s3 = synack_for(&mut e, late, c3, me, 9000, 536);
    assert_eq!(e.stats().syn_cookies_sent, 2);
    e.handle_packet(late, &ack_of(c3, me, 9000, &s3, 0)); // fresh: fine
    let _ = e.poll_transmit(late);
    let before = e.stats().syn_cookies_accepted;
    assert_eq!(before, 2);
    let d = sa("10.0.0.11:4003");
    let s4 = synack_for(&mut e, late, d, me, 1, 536);
    e.handle_packet(late + Duration::from_secs(130), &ack_of(d, me, 1, &s4, 0));
    assert_eq!(e.stats().syn_cookies_accepted, 2, "older than two periods");
    // The normal half-open connection completes and leaves the backlog.
    e.handle_packet(late, &ack_of(a, me, 100, &s1, 0));
    while e.poll_event().is_some() {}
    assert_eq!(e.half_open(me), Some(0));
}

/// The earliest timer of every connection, by visiting each one.
fn earliest_timer_by_scan(e: &Endpoint) -> Option<Instant> {
    e.handles()
        .filter_map(|h| e.connection(h)?.poll_timeout())
        .min()
}

#[test]
fn the_timer_index_agrees_with_a_scan_of_every_connection() {
    // Forty connections with keep-alive, retransmission, delayed-ACK and
    // TIME-WAIT timers in flight; the endpoint's filed earliest timer must
    // be the scan's at every step, including right after the application
    // changed connections through `connection_mut`.
    let cfg = Config {
        keepalive: Some(crate::KeepaliveConfig {
            idle: Duration::from_millis(700),
            interval: Duration::from_millis(150),
            probes: 3,
        }),
        time_wait: Duration::from_millis(400),
        ..Config::default()
    };
    let mut p = Pair::new(cfg.clone(), cfg, 11);
    let mut conns = Vec::new();
    for _ in 0..40 {
        conns.push(p.connect());
    }
    p.ab.loss = 0.05;
    p.ba.loss = 0.05;
    let check = |p: &Pair| {
        assert_eq!(p.a.poll_timeout(), earliest_timer_by_scan(&p.a));
        assert_eq!(p.b.poll_timeout(), earliest_timer_by_scan(&p.b));
    };
    for round in 0..30u32 {
        for (i, &(ha, hb)) in conns.iter().enumerate() {
            let i = i as u32;
            if (i + round).is_multiple_of(7) {
                if let Some(c) = p.a.connection_mut(ha) {
                    let _ = c.send(&[round as u8; 3000]);
                    if i.is_multiple_of(2) {
                        // The application drives the connection itself (a
                        // segment it then loses): that arms its timers
                        // outside the endpoint's own calls.
                        let mut buf = Vec::new();
                        let _ = c.poll_transmit(p.now, &mut buf);
                    }
                }
            }
            if round == 20 && i.is_multiple_of(5) {
                for c in [p.a.connection_mut(ha), p.b.connection_mut(hb)]
                    .into_iter()
                    .flatten()
                {
                    c.close();
                }
            }
        }
        check(&p);
        let until = p.now + Duration::from_millis(97);
        while p.now < until && p.step() {
            check(&p);
        }
    }
    assert!(p.a.stats().packets_out > 200, "the connections did work");
}

#[test]
fn touched_lists_only_the_connections_that_took_input() {
    let mut p = Pair::default_pair(12);
    let mut conns = Vec::new();
    for _ in 0..10 {
        conns.push(p.connect());
    }
    p.run_for(Duration::from_secs(1));
    p.b.track_touched(true);
    let mut touched = Vec::new();
    p.b.take_touched(&mut touched);
    assert!(touched.is_empty(), "nothing before tracking");
    let (ha, hb) = conns[3];
    p.ca(ha).send(b"hello").unwrap();
    p.run_for(Duration::from_millis(200));
    p.b.take_touched(&mut touched);
    assert_eq!(touched, vec![hb], "only the connection that took data");
    touched.clear();
    p.b.take_touched(&mut touched);
    assert!(touched.is_empty(), "taken once");
    // The application's own commands are not reported back.
    p.cb(conns[5].1).close();
    p.b.take_touched(&mut touched);
    assert!(touched.is_empty());
}

/// Packets built in recycled buffers ([`Endpoint::recycle`]) are the
/// packets built in fresh ones: the same exchange, byte for byte.
#[test]
fn recycled_packet_buffers_change_no_byte() {
    fn exchange(recycle: bool) -> Vec<Vec<u8>> {
        let (a_addr, b_addr) = (sa("10.0.0.1:5000"), sa("10.0.0.2:80"));
        let mut a = Endpoint::new(Config::default(), 1);
        let mut b = Endpoint::new(Config::default(), 2);
        b.listen(b_addr).unwrap();
        let mut now = Instant::ZERO;
        let h = a.connect(now, a_addr, b_addr).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut sent = 0;
        let mut wire = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        for _ in 0..2000 {
            now += Duration::from_millis(1);
            if let Some(c) = a.connection_mut(h) {
                if sent < data.len() {
                    sent += c.send(&data[sent..]).unwrap_or(0);
                }
            }
            let mut moved = false;
            while let Some(p) = a.poll_transmit(now) {
                b.handle_packet(now, &p);
                wire.push(p.clone());
                if recycle {
                    b.recycle(p);
                }
                moved = true;
            }
            while let Some(p) = b.poll_transmit(now) {
                a.handle_packet(now, &p);
                wire.push(p.clone());
                if recycle {
                    a.recycle(p);
                }
                moved = true;
            }
            while let Some(ev) = b.poll_event() {
                let (crate::EndpointEvent::Conn { handle, .. }
                | crate::EndpointEvent::Accepted { handle, .. }) = ev;
                if let Some(c) = b.connection_mut(handle) {
                    while c.recv(&mut buf).unwrap_or(0) > 0 {}
                }
            }
            while a.poll_event().is_some() {}
            if let Some(t) = [a.poll_timeout(), b.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
            {
                if t <= now {
                    a.handle_timeout(now);
                    b.handle_timeout(now);
                }
            }
            if !moved && sent == data.len() && wire.len() > 200 {
                break;
            }
        }
        assert_eq!(sent, data.len());
        wire
    }
    let plain = exchange(false);
    assert!(plain.len() > 150, "{} packets", plain.len());
    assert_eq!(exchange(true), plain);
}

#[test]
fn a_vouched_packet_skips_the_checksum_check_and_nothing_else() {
    let me = sa("10.0.0.2:80");
    let peer = sa("10.0.0.9:1234");
    let now = Instant::ZERO;
    // An ACK to a closed port whose TCP checksum is wrong (zero, as the
    // TUN host leaves it on segments cut from a super-packet).
    let mut pkt = hollywood_wire::build_tcp_ip(
        peer,
        me,
        &repr(1234, 80, 77, Some(4242), TcpFlags::NONE),
        b"xy",
    );
    pkt[20 + 16..20 + 18].fill(0);
    let mut checked = Endpoint::new(Config::default(), 1);
    checked.handle_packet(now, &pkt);
    assert!(
        checked.poll_transmit(now).is_none(),
        "bad checksum: dropped"
    );
    assert_eq!(checked.stats().malformed_dropped, 1);
    let mut vouched = Endpoint::new(Config::default(), 1);
    vouched.handle_packet_vouched(now, &pkt);
    let out = vouched
        .poll_transmit(now)
        .expect("answered like a good packet");
    let r = hollywood_wire::parse_tcp_ip(&out).unwrap();
    assert_eq!((r.tcp.flags, r.tcp.seq), (TcpFlags::RST, SeqNumber(4242)));
    // The IPv4 header checksum is still checked.
    pkt[10] ^= 0xff;
    vouched.handle_packet_vouched(now, &pkt);
    assert!(vouched.poll_transmit(now).is_none());
    assert_eq!(vouched.stats().malformed_dropped, 1);
}

/// One segment built from consecutive segments, as Linux's GRO merges them
/// (the first one's header; PSH and FIN of the last).
fn merged(segs: &[Vec<u8>]) -> Vec<u8> {
    let first = hollywood_wire::parse_tcp_ip(&segs[0]).unwrap();
    let last = hollywood_wire::parse_tcp_ip(segs.last().unwrap()).unwrap();
    let mut tcp = first.tcp;
    tcp.flags = TcpFlags(tcp.flags.0 | (last.tcp.flags.0 & (TcpFlags::PSH.0 | TcpFlags::FIN.0)));
    let mut payload = Vec::new();
    for s in segs {
        let p = hollywood_wire::parse_tcp_ip(s).unwrap();
        assert_eq!(p.tcp.seq, first.tcp.seq + payload.len(), "consecutive");
        payload.extend_from_slice(p.payload);
    }
    hollywood_wire::build_tcp_ip(first.src, first.dst, &tcp, &payload)
}

/// Host mode gives the engine a TUN super-packet whole, as one segment
/// larger than the MSS (`TunHost::set_rx_whole`, like GRO): the receiver
/// must take it exactly as the segments it stands for — same bytes to the
/// application (in order, and segment by segment with out-of-order
/// delivery, thesis §4.3), the same ACK, window and SACK state.
#[test]
fn a_merged_segment_is_received_like_the_segments_it_stands_for() {
    for ooo in [false, true] {
        let run = |merge: bool| {
            let mut c = Config::default();
            c.hollywood.out_of_order_delivery = ooo;
            let mut p = Pair::new(c.clone(), c, 9);
            let (ha, hb) = p.connect();
            let data = Pair::data(9_000, 4);
            assert_eq!(p.ca(ha).send(&data).unwrap(), data.len());
            let now = p.now;
            let mut segs = Vec::new();
            while let Some(s) = p.a.poll_transmit(now) {
                segs.push(s);
            }
            assert!(segs.len() >= 6, "{} segments", segs.len());
            let sent: usize = segs
                .iter()
                .map(|s| hollywood_wire::parse_tcp_ip(s).unwrap().payload.len())
                .sum();
            // The first segment is lost: the rest arrive merged (out of
            // order, SACKed), then the first one fills the hole.
            let rest = if merge {
                vec![merged(&segs[1..])]
            } else {
                segs[1..].to_vec()
            };
            let mut acks = Vec::new();
            for input in [rest, vec![segs[0].clone()]] {
                for s in &input {
                    p.b.handle_packet(now, s);
                }
                while let Some(s) = p.b.poll_transmit(now) {
                    let r = hollywood_wire::parse_tcp_ip(&s).unwrap().tcp;
                    acks.push((r.ack, r.window, r.options.sacks().to_vec()));
                }
            }
            let mut got = Vec::new();
            let mut bytes = vec![0u8; sent];
            let mut n = 0;
            if ooo {
                // Out-of-order delivery: every segment as it arrived, by
                // sequence number (the first one after the rest here).
                let first = hollywood_wire::parse_tcp_ip(&segs[0]).unwrap().tcp.seq;
                while let Some(s) = p.cb(hb).recv_segment() {
                    let at = s.seq - first;
                    bytes[at..at + s.payload.len()].copy_from_slice(&s.payload);
                    n += s.payload.len();
                    got.push((s.seq, s.payload.len()));
                }
            } else {
                n = p.cb(hb).recv(&mut bytes).unwrap();
            }
            assert_eq!(n, sent, "merge={merge} ooo={ooo}");
            assert!(bytes == data[..n], "merge={merge} ooo={ooo}: bytes differ");
            (got, acks.last().cloned(), acks.len())
        };
        let (split, whole) = (run(false), run(true));
        // Same final ACK and window; each input answered at once
        // (out-of-order data, then the hole filled).
        assert_eq!(split.1, whole.1, "ooo={ooo}");
        assert_eq!(whole.2, 2, "ooo={ooo}");
        assert!(split.2 >= 2, "ooo={ooo}");
        if ooo {
            // The same bytes, in one piece instead of several.
            let total = |v: &[(SeqNumber, usize)]| v.iter().map(|s| s.1).sum::<usize>();
            assert_eq!(total(&split.0), total(&whole.0));
            assert_eq!(whole.0.len(), 2, "the merged segment and the first");
        }
    }
}

#[test]
fn the_tuple_log_follows_connections_from_open_to_removal() {
    let cfg = Config {
        time_wait: Duration::from_secs(1),
        ..Config::default()
    };
    let mut p = Pair::new(cfg.clone(), cfg, 5);
    p.a.track_tuples(true);
    p.b.track_tuples(true);
    let (ha, hb) = p.connect();
    let (la, ra) = {
        let c = p.a.connection(ha).unwrap();
        (c.local(), c.remote())
    };
    assert!(p.a.owns(la, ra) && p.b.owns(ra, la));
    assert!(!p.a.owns(ra, la), "the tuple is directional");
    let mut log = Vec::new();
    p.a.take_tuple_changes(&mut log);
    assert_eq!(
        log,
        [crate::TupleChange {
            local: la,
            remote: ra,
            owned: true
        }]
    );
    log.clear();
    p.b.take_tuple_changes(&mut log);
    assert_eq!(log.len(), 1, "the accepted connection: {log:?}");
    assert!(log[0].owned && (log[0].local, log[0].remote) == (ra, la));
    log.clear();
    p.ca(ha).close();
    p.run_for(Duration::from_millis(100));
    p.cb(hb).close();
    p.run_for(Duration::from_secs(2));
    assert!(!p.a.owns(la, ra) && !p.b.owns(ra, la));
    p.a.take_tuple_changes(&mut log);
    assert_eq!(
        log,
        [crate::TupleChange {
            local: la,
            remote: ra,
            owned: false
        }],
        "removed after TIME-WAIT"
    );
    log.clear();
    p.a.take_tuple_changes(&mut log);
    assert!(log.is_empty(), "drained");
    // Untracked: nothing is kept.
    let mut e = Endpoint::new(Config::default(), 1);
    e.connect(Instant::ZERO, sa("10.0.0.2:0"), sa("10.0.0.9:80"))
        .unwrap();
    e.take_tuple_changes(&mut log);
    assert!(log.is_empty());
}

#[test]
fn endpoints_with_distinct_ephemeral_shares_never_pick_the_same_port() {
    let remote = sa("10.0.0.9:80");
    let ports = |index| {
        let mut e = Endpoint::new(Config::default(), 7);
        e.set_ephemeral_share(index, 3);
        (0..50)
            .map(|_| {
                let h = e.connect(Instant::ZERO, sa("10.0.0.2:0"), remote).unwrap();
                e.connection(h).unwrap().local().port()
            })
            .collect::<Vec<_>>()
    };
    for index in 0..3u16 {
        for p in ports(index) {
            assert!((EPHEMERAL_FIRST..=EPHEMERAL_LAST).contains(&p));
            assert_eq!((p - EPHEMERAL_FIRST) % 3, index, "port {p}");
        }
    }
}
