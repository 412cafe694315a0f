//! Flow control and small-segment behaviour: zero window and persist
//! probes (RFC 9293 §3.8.6.1), Nagle (§3.7.4), delayed ACKs (§3.8.6.3,
//! RFC 5681 §4.2).

use crate::endpoint::ConnHandle;
use crate::pair::{Dir, Pair, Verdict};
use crate::{Config, DelayedAckConfig};
use std::time::Duration;

#[test]
fn zero_window_probing_and_reopening() {
    let small = Config {
        recv_buffer: 16 * 1024,
        ..Config::default()
    };
    let mut p = Pair::new(Config::default(), small, 61);
    let (ha, hb) = p.connect();
    let data = Pair::data(100_000, 1);
    assert_eq!(p.ca(ha).send(&data), Ok(100_000));
    // The receiver does not read: its window closes.
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.ca(ha).peer_window(), 0);
    assert_eq!(p.cb(hb).recv_ready(), 16 * 1024);
    let mark = p.trace.len();
    p.run_for(Duration::from_secs(30));
    let probes: Vec<_> = p.trace[mark..]
        .iter()
        .filter(|t| t.dir == Dir::AtoB && t.len > 0)
        .cloned()
        .collect();
    assert!(probes.len() >= 5, "{} probes", probes.len());
    assert!(
        probes.iter().all(|t| t.len == 1),
        "a probe carries one octet"
    );
    let gaps: Vec<u128> = probes
        .windows(2)
        .map(|w| (w[1].time - w[0].time).as_millis())
        .collect();
    for w in gaps.windows(2) {
        assert_eq!(w[1], 2 * w[0], "probe intervals double: {gaps:?}");
    }
    // Every probe was answered, so the connection stays up.
    assert_eq!(p.a.state_of(ha), Some(crate::State::Established));
    assert!(p.ca(ha).stats().window_probes_sent as usize >= probes.len());
    // Reading reopens the window and the transfer completes.
    let got = p.transfer(ha, hb, &[], Duration::from_secs(1));
    assert!(got.is_empty());
    let out = read_stepping(&mut p, hb, data.len(), 8192, Duration::from_secs(120));
    assert_eq!(out, data);
    // Reopening retransmits the probe byte without a congestion response.
    assert_eq!(p.ca(ha).stats().fast_retransmits, 0);
    assert_eq!(p.ca(ha).stats().rto_events, 0);
}

#[test]
fn lost_window_update_is_recovered_by_probes() {
    let small = Config {
        recv_buffer: 8 * 1024,
        ..Config::default()
    };
    let mut p = Pair::new(Config::default(), small, 62);
    let (ha, hb) = p.connect();
    let data = Pair::data(30_000, 2);
    p.ca(ha).send(&data).unwrap();
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.ca(ha).peer_window(), 0);
    // Drop the next ACK from b (the window update).
    let mut once = true;
    p.ba.verdict = Some(Box::new(move |_| {
        Verdict::drop_if(std::mem::take(&mut once))
    }));
    let out = read_stepping(&mut p, hb, data.len(), 4096, Duration::from_secs(60));
    assert_eq!(out, data);
}

/// Read `len` bytes from `b`'s `hb` in reads of at most `chunk`, stepping
/// the pair between reads; fails if that takes longer than `limit`.
fn read_stepping(
    p: &mut Pair,
    hb: ConnHandle,
    len: usize,
    chunk: usize,
    limit: Duration,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; chunk];
    let deadline = p.now + limit;
    while out.len() < len {
        while let Ok(n) = p.cb(hb).recv(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert!(p.now < deadline, "stalled at {}", out.len());
        p.step();
    }
    out
}

fn quick(nagle: bool) -> Config {
    Config {
        nagle,
        delayed_ack: DelayedAckConfig {
            quickack_segments: 0,
            ..DelayedAckConfig::default()
        },
        ..Config::default()
    }
}

/// Lengths of the data segments a sends for ten 100-byte writes.
fn small_writes(nagle: bool) -> Vec<usize> {
    let mut p = Pair::new(quick(nagle), quick(true), 63);
    let (ha, _hb) = p.connect();
    let mark = p.trace.len();
    for _ in 0..10 {
        p.ca(ha).send(&[9u8; 100]).unwrap();
        p.flush();
    }
    p.run_for(Duration::from_secs(1));
    p.trace[mark..]
        .iter()
        .filter(|t| t.dir == Dir::AtoB && t.len > 0)
        .map(|t| t.len)
        .collect()
}

#[test]
fn nagle_coalesces_small_writes() {
    assert_eq!(small_writes(true), vec![100, 900]);
    assert_eq!(small_writes(false), vec![100; 10]);
}

#[test]
fn delayed_ack_timing() {
    let mut p = Pair::new(quick(false), quick(false), 64);
    let (ha, _hb) = p.connect();
    let delay = p.ab.delay;
    // One small segment: ACKed by the delayed-ACK timer, 40 ms after arrival.
    let mark = p.trace.len();
    p.ca(ha).send(b"ping").unwrap();
    p.run_for(Duration::from_millis(500));
    let sent = p.trace[mark..]
        .iter()
        .find(|t| t.dir == Dir::AtoB && t.len > 0)
        .unwrap()
        .time;
    let ack = p.trace[mark..]
        .iter()
        .find(|t| t.dir == Dir::BtoA)
        .unwrap()
        .time;
    let held = ack - (sent + delay);
    assert!(
        held > Duration::ZERO && held <= Duration::from_millis(40),
        "{held:?}"
    );
    // Two full-sized segments: ACKed at once on the second.
    let smss = p.ca(ha).negotiated().smss;
    let mark = p.trace.len();
    p.ca(ha).send(&vec![1u8; 2 * smss]).unwrap();
    p.run_for(Duration::from_millis(500));
    let data: Vec<_> = p.trace[mark..]
        .iter()
        .filter(|t| t.dir == Dir::AtoB && t.len > 0)
        .collect();
    assert_eq!(data.len(), 2);
    let acks: Vec<_> = p.trace[mark..]
        .iter()
        .filter(|t| t.dir == Dir::BtoA)
        .collect();
    assert_eq!(acks.len(), 1, "one ACK for two full segments");
    assert_eq!(acks[0].time, data[1].time + delay);
    assert_eq!(acks[0].tcp.ack, data[1].tcp.seq + smss);
}

#[test]
fn quickack_acks_every_segment_at_start() {
    let mut p = Pair::default_pair(65);
    // A bottleneck spaces the segments out, so each is handled on its own.
    p.ab.rate_bps = Some(10_000_000);
    let (ha, hb) = p.connect();
    let data = Pair::data(10_000, 3);
    let mark = p.trace.len();
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(1)), data);
    p.run_for(Duration::from_millis(100));
    let segs = p.trace[mark..]
        .iter()
        .filter(|t| t.dir == Dir::AtoB && t.len > 0)
        .count();
    let acks = p.trace[mark..]
        .iter()
        .filter(|t| t.dir == Dir::BtoA)
        .count();
    assert_eq!(segs, acks);
}

/// A pure ACK sent while SND.NXT lies past the peer's (closed) window
/// carries SEQ = SND.UNA + SND.WND, which the peer accepts, not SND.NXT,
/// which a receiver checking RFC 9293 §3.10.7.4 strictly — Linux — drops,
/// ACK field included (Linux's `tcp_acceptable_seq` does the same).
#[test]
fn a_pure_ack_past_a_closed_window_is_sent_at_its_right_edge() {
    // Without timestamps, so that a hand-made segment needs none.
    let c = Config {
        timestamps: false,
        ..Config::default()
    };
    let mut p = Pair::new(c.clone(), c, 71);
    let (ha, hb) = p.connect();
    // A's data is in flight (not yet delivered) ...
    assert_eq!(p.ca(ha).send(&[5u8; 3000]), Ok(3000));
    let now = p.now;
    let mut sent = Vec::new();
    while let Some(s) = p.a.poll_transmit(now) {
        sent.push(s);
    }
    assert!(!sent.is_empty());
    let (una, nxt, rcv_nxt) = {
        let c = p.ca(ha);
        (c.snd_una(), c.snd_nxt(), c.rcv_nxt())
    };
    assert!(nxt > una, "data outstanding");
    // ... when B's next segment closes its window without acknowledging
    // any of it, and carries data A must acknowledge.
    let (a_addr, b_addr) = {
        let c = p.ca(ha);
        (c.local(), c.remote())
    };
    let _ = hb;
    let seg = hollywood_wire::TcpRepr {
        src_port: b_addr.port(),
        dst_port: a_addr.port(),
        seq: rcv_nxt,
        ack: una,
        flags: hollywood_wire::TcpFlags::ACK | hollywood_wire::TcpFlags::PSH,
        window: 0,
        urgent: 0,
        options: hollywood_wire::TcpOptions::default(),
    };
    let pkt = hollywood_wire::build_tcp_ip(b_addr, a_addr, &seg, b"hello");
    p.a.handle_packet(now, &pkt);
    let mut acks = Vec::new();
    while let Some(s) = p.a.poll_transmit(now) {
        let r = hollywood_wire::parse_tcp_ip(&s).unwrap();
        if r.payload.is_empty() && r.tcp.ack == rcv_nxt + 5 {
            acks.push(r.tcp.seq);
        }
    }
    assert_eq!(acks, vec![una], "at the window's right edge (SND.UNA + 0)");
}
