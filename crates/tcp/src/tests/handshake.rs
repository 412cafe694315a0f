//! Handshake details: the MSS we announce per address family (RFC 9293
//! §3.7.1, RFC 6691 §2, RFC 8200 §3) and piggybacking the ACK of a SYN-ACK
//! on queued data (RFC 9293 §3.10.7.3).

use crate::pair::{Dir, Pair};
use crate::{Config, Connection, State};
use hollywood_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};
use std::net::SocketAddr;
use std::time::Duration;

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// The SYN, the SYN-ACK and every data packet of a transfer, over IPv4 or
/// IPv6: announced MSS and largest IP packet.
fn mss_and_largest_packet(v6: bool) -> (Option<u16>, Option<u16>, usize, usize) {
    let mut p = Pair::default_pair(72);
    if v6 {
        p.a_addr = sa("[fd00::1]:0");
        p.b_addr = sa("[fd00::2]:443");
    }
    let (ha, hb) = p.connect();
    let data = Pair::data(200_000, 3);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(10)), data);
    let ip_header = if v6 { 40 } else { 20 };
    let syn_mss = |dir| {
        p.sent(dir)
            .find(|t| t.tcp.flags.syn())
            .and_then(|t| t.tcp.options.mss)
    };
    let largest = p
        .trace
        .iter()
        .map(|t| ip_header + t.tcp.header_len() + t.len)
        .max()
        .unwrap_or(0);
    let (syn, synack) = (syn_mss(Dir::AtoB), syn_mss(Dir::BtoA));
    (syn, synack, largest, p.ca(ha).negotiated().smss)
}

#[test]
fn ipv6_announces_twenty_bytes_less_mss() {
    // IPv4: Config::mss as is; full packets are exactly the 1500-byte MTU.
    let (syn, synack, largest, smss) = mss_and_largest_packet(false);
    assert_eq!((syn, synack), (Some(1460), Some(1460)));
    assert_eq!((largest, smss), (1500, 1448));
    // IPv6: the 40-byte header leaves 1440 (RFC 8200 §3); packets still
    // fit a 1500-byte MTU.
    let (syn, synack, largest, smss) = mss_and_largest_packet(true);
    assert_eq!((syn, synack), (Some(1440), Some(1440)));
    assert_eq!((largest, smss), (1500, 1428));
}

#[test]
fn ipv6_local_mss_follows_config() {
    let cfg = Config {
        mss: 9000 - 40,
        ..Config::default()
    };
    let c4 = Connection::connect(
        crate::Instant::ZERO,
        cfg.clone(),
        sa("10.0.0.1:1000"),
        sa("10.0.0.2:80"),
        SeqNumber(1),
    );
    let c6 = Connection::connect(
        crate::Instant::ZERO,
        cfg,
        sa("[fd00::1]:1000"),
        sa("[fd00::2]:80"),
        SeqNumber(1),
    );
    assert_eq!((c4.local_mss(), c6.local_mss()), (8960, 8940));
}

/// RFC 9293 §3.10.7.3: after a SYN-ACK, "Data or controls that were queued
/// for transmission may be included" in the ACK: with data waiting, the
/// first segment after the SYN-ACK is that data, carrying the ACK; no pure
/// ACK goes before it.
#[test]
fn active_open_with_queued_data_piggybacks_the_ack() {
    let now = crate::Instant::from_nanos(1_000_000);
    let cfg = Config {
        timestamps: false,
        ..Config::default()
    };
    let iss = SeqNumber(100);
    let mut c = Connection::connect(now, cfg, sa("10.0.0.1:1000"), sa("10.0.0.2:80"), iss);
    let mut buf = Vec::new();
    let syn = c.poll_transmit(now, &mut buf).expect("SYN");
    assert!(syn.flags.syn());
    assert_eq!(c.send(b"queued in SYN-SENT"), Ok(18));
    let synack = TcpRepr {
        src_port: 80,
        dst_port: 1000,
        seq: SeqNumber(7000),
        ack: iss + 1,
        flags: TcpFlags::SYN | TcpFlags::ACK,
        window: 65_535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            sack_permitted: true,
            ..TcpOptions::default()
        },
    };
    c.handle_segment(now, &synack, &[]);
    assert_eq!(c.state(), State::Established);
    let first = c.poll_transmit(now, &mut buf).expect("a segment");
    assert_eq!(
        buf, b"queued in SYN-SENT",
        "the first segment carries the data"
    );
    assert!(first.flags.ack());
    assert_eq!((first.seq, first.ack), (iss + 1, SeqNumber(7001)));
    assert!(
        c.poll_transmit(now, &mut buf).is_none(),
        "no extra pure ACK"
    );
    assert_eq!(c.stats().acks_sent, 0);
}

/// The same through endpoints, for every combination of the options that
/// shape the first data segment: only SYN, data (with the ACK) go a→b.
#[test]
fn piggybacking_holds_for_all_option_combinations() {
    for mask in 0u32..32 {
        let c = Config {
            sack: mask & 1 != 0,
            timestamps: mask & 2 != 0,
            window_scaling: mask & 4 != 0,
            consistent_segmentation: mask & 8 != 0,
            nagle: mask & 16 != 0,
            ..Config::default()
        };
        for v6 in [false, true] {
            let mut p = Pair::new(c.clone(), c.clone(), 71);
            if v6 {
                p.a_addr = sa("[fd00::1]:0");
                p.b_addr = sa("[fd00::2]:80");
            }
            p.b.listen(p.b_addr).unwrap();
            let ha = p.a.connect(p.now, p.a_addr, p.b_addr).unwrap();
            assert_eq!(p.ca(ha).send(b"hello before established"), Ok(24));
            p.run_for(Duration::from_millis(100));
            let out: Vec<_> = p
                .sent(Dir::AtoB)
                .map(|t| (t.tcp.flags.syn(), t.len))
                .collect();
            assert_eq!(out, [(true, 0), (false, 24)], "mask {mask} v6 {v6}");
        }
    }
}

/// A lost SYN-ACK: the client's SYN times out and is resent; the server's
/// second SYN-ACK must echo the resent SYN's timestamp (RFC 7323 §4.3), so
/// the client's handshake RTT sample is the path's RTT (20 ms here), not
/// the time since its first SYN (a whole SYN timeout, 1 s). A one-second
/// SRTT would make a TCP Hollywood sender expire every message with a
/// lifetime under half a second (found by the transport's property test).
#[test]
fn lost_syn_ack_does_not_inflate_the_rtt() {
    let mut p = Pair::default_pair(5);
    let mut dropped = false;
    p.ba.verdict = Some(Box::new(move |i| {
        if i.tcp.flags.syn() && !dropped {
            dropped = true;
            crate::pair::Verdict::Drop
        } else {
            crate::pair::Verdict::Pass
        }
    }));
    let (ha, _) = p.connect();
    assert!(p.now.as_nanos() >= 1_000_000_000, "the SYN timed out");
    let srtt = p.ca(ha).srtt().expect("a handshake sample");
    assert!(srtt < Duration::from_millis(40), "SRTT {srtt:?}");
}
