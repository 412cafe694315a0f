//! Blind in-window attacks (RFC 5961): a third party that knows the
//! 4-tuple but not the exact sequence numbers injects RST, SYN and data.

use super::{has_event, segment};
use crate::endpoint::ConnHandle;
use crate::pair::{Dir, Pair};
use crate::{Config, Event, State};
use hollywood_wire::{SeqNumber, TcpFlags, TcpRepr};
use std::time::Duration;

/// Timestamps off: with them, a segment lacking TSopt is dropped before
/// RFC 5961 even looks at it (RFC 7323 §3.2).
fn pair() -> (Pair, ConnHandle, ConnHandle) {
    let cfg = Config {
        timestamps: false,
        ..Config::default()
    };
    let mut p = Pair::new(cfg.clone(), cfg, 31);
    let (ha, hb) = p.connect();
    (p, ha, hb)
}

/// Inject a segment "from the client" into the server.
fn inject(
    p: &mut Pair,
    ha: ConnHandle,
    seq: SeqNumber,
    ack: Option<SeqNumber>,
    flags: TcpFlags,
    data: &[u8],
) {
    let client = p.ca(ha).local();
    inject_from(p, client, seq, ack, flags, data);
}

/// [`inject`] with the client's address given (its connection may be gone).
fn inject_from(
    p: &mut Pair,
    client: std::net::SocketAddr,
    seq: SeqNumber,
    ack: Option<SeqNumber>,
    flags: TcpFlags,
    data: &[u8],
) {
    let tcp = segment((client.port(), p.b_addr.port()), seq, ack, flags, 65_535);
    let pkt = hollywood_wire::build_tcp_ip(client, p.b_addr, &tcp, data);
    p.b.handle_packet(p.now, &pkt);
}

/// ACKs the server sent since trace index `from`.
fn server_acks(p: &Pair, from: usize) -> Vec<TcpRepr> {
    p.trace[from..]
        .iter()
        .filter(|t| t.dir == Dir::BtoA)
        .map(|t| t.tcp)
        .collect()
}

#[test]
fn rst_exactly_at_rcv_nxt_resets() {
    let (mut p, ha, hb) = pair();
    let nxt = p.cb(hb).rcv_nxt();
    inject(&mut p, ha, nxt, None, TcpFlags::RST, &[]);
    p.run_for(Duration::from_millis(50));
    assert!(has_event(&p.b_events, hb, Event::Reset));
}

#[test]
fn rst_in_window_but_not_exact_gets_challenge_ack() {
    let (mut p, ha, hb) = pair();
    let nxt = p.cb(hb).rcv_nxt();
    let mark = p.trace.len();
    inject(&mut p, ha, nxt + 1000, None, TcpFlags::RST, &[]);
    p.run_for(Duration::from_millis(50));
    assert_eq!(p.b.state_of(hb), Some(State::Established));
    let acks = server_acks(&p, mark);
    assert_eq!(acks.len(), 1);
    assert_eq!((acks[0].flags, acks[0].ack), (TcpFlags::ACK, nxt));
    assert_eq!(p.cb(hb).stats().challenge_acks_sent, 1);
    // The real client sees a harmless duplicate ACK; the connection works.
    let data = Pair::data(20_000, 3);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(5)), data);
}

#[test]
fn blind_rst_out_of_window_is_ignored_silently() {
    let (mut p, ha, hb) = pair();
    let nxt = p.cb(hb).rcv_nxt();
    let mark = p.trace.len();
    inject(
        &mut p,
        ha,
        nxt + 3_000_000_000usize,
        None,
        TcpFlags::RST,
        &[],
    );
    p.run_for(Duration::from_millis(50));
    assert_eq!(p.b.state_of(hb), Some(State::Established));
    assert!(server_acks(&p, mark).is_empty());
}

#[test]
fn blind_syn_gets_challenge_ack() {
    let (mut p, ha, hb) = pair();
    let nxt = p.cb(hb).rcv_nxt();
    let mark = p.trace.len();
    for off in [0usize, 5000, 2_000_000_000] {
        inject(&mut p, ha, nxt + off, None, TcpFlags::SYN, &[]);
    }
    p.run_for(Duration::from_millis(50));
    assert_eq!(p.b.state_of(hb), Some(State::Established));
    assert_eq!(p.cb(hb).stats().challenge_acks_sent, 3);
    assert!(server_acks(&p, mark)
        .iter()
        .all(|a| a.flags == TcpFlags::ACK && a.ack == nxt));
}

#[test]
fn blind_data_with_bad_ack_is_dropped() {
    let (mut p, ha, hb) = pair();
    let nxt = p.cb(hb).rcv_nxt();
    let una = p.cb(hb).snd_una();
    // ACK beyond SND.NXT, and ACK far below SND.UNA - MAX.SND.WND.
    inject(
        &mut p,
        ha,
        nxt,
        Some(una + 1_000_000),
        TcpFlags::PSH,
        b"injected",
    );
    inject(
        &mut p,
        ha,
        nxt,
        Some(una - 1_000_000_000usize),
        TcpFlags::PSH,
        b"injected",
    );
    p.run_for(Duration::from_millis(50));
    assert_eq!(p.cb(hb).recv_ready(), 0);
    assert_eq!(p.cb(hb).stats().challenge_acks_sent, 2);
    let data = Pair::data(10_000, 4);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(5)), data);
}

#[test]
fn challenge_ack_flood_is_rate_limited() {
    let (mut p, ha, hb) = pair();
    let nxt = p.cb(hb).rcv_nxt();
    for i in 0..1500usize {
        inject(&mut p, ha, nxt + 10 + i, None, TcpFlags::RST, &[]);
    }
    p.run_for(Duration::from_millis(10));
    let s = p.cb(hb).stats().clone();
    assert_eq!(s.challenge_acks_sent, 1000);
    assert_eq!(s.challenge_acks_suppressed, 500);
    assert_eq!(p.b.state_of(hb), Some(State::Established));
}

/// Inject a segment "from the server" into the client.
fn inject_into_client(p: &mut Pair, ha: ConnHandle, seq: SeqNumber, ack: SeqNumber, data: &[u8]) {
    let client = p.ca(ha).local();
    let tcp = segment(
        (p.b_addr.port(), client.port()),
        seq,
        Some(ack),
        TcpFlags::PSH,
        65_535,
    );
    let pkt = hollywood_wire::build_tcp_ip(p.b_addr, client, &tcp, data);
    p.a.handle_packet(p.now, &pkt);
}

/// Fuzz regression (engine_segments): blind data injected into both ends
/// moves each RCV.NXT beyond the other's SND.NXT. Every ACK is then
/// unacceptable to the other side, which answers with an ACK (RFC 9293
/// §3.10.7.4, RFC 5961 §5.2), and so on: an endless ACK storm. Pure
/// out-of-window segments are answered at most once per 500 ms.
#[test]
fn desynchronized_peers_do_not_ack_storm() {
    let (mut p, ha, hb) = pair();
    let (b_nxt, b_una) = (p.cb(hb).rcv_nxt(), p.cb(hb).snd_una());
    inject(
        &mut p,
        ha,
        b_nxt,
        Some(b_una),
        TcpFlags::PSH,
        b"forged to b",
    );
    let (a_nxt, a_una) = (p.ca(ha).rcv_nxt(), p.ca(ha).snd_una());
    inject_into_client(&mut p, ha, a_nxt, a_una, b"forged to a");
    assert_eq!(p.cb(hb).rcv_nxt(), b_nxt + 11);
    assert_eq!(p.ca(ha).rcv_nxt(), a_nxt + 11);
    let mark = p.trace.len();
    // 20 ms RTT: a storm would exchange about 100 ACKs per second each way.
    p.run_for(Duration::from_secs(2));
    let n = p.trace.len() - mark;
    assert!(n <= 12, "{n} segments exchanged in 2 s");
    assert!(n >= 2, "the injections are acknowledged");
    assert_eq!(p.a.state_of(ha), Some(State::Established));
}

/// An RST that closes a connection in TIME-WAIT (the peer forgot it after
/// its LAST-ACK and answers our duplicate ACK with a bare RST, as Linux
/// does) must not take away data TCP already acknowledged: the
/// application still reads every byte, then the connection is forgotten.
/// Found on real packets against Linux (`interop_linux`
/// `c_bulk_with_1pct_loss`, about 1 run in 80).
#[test]
fn rst_in_time_wait_keeps_unread_data_readable() {
    let (mut p, ha, hb) = pair();
    let client = p.ca(ha).local();
    // The server half-closes first, the client then sends and closes.
    p.cb(hb).close();
    p.run_for(Duration::from_millis(50));
    assert_eq!(p.b.state_of(hb), Some(State::FinWait2));
    let data = Pair::data(30_000, 9);
    let mut off = 0;
    while off < data.len() {
        off += p.ca(ha).send(&data[off..]).unwrap();
        p.run_for(Duration::from_millis(20));
    }
    p.ca(ha).close();
    p.run_for(Duration::from_millis(100));
    assert_eq!(p.b.state_of(hb), Some(State::TimeWait));
    // The server read nothing yet. The client forgot the connection, so
    // it answers with a bare RST at the server's RCV.NXT.
    let nxt = p.cb(hb).rcv_nxt();
    inject_from(&mut p, client, nxt, None, TcpFlags::RST, &[]);
    p.run_for(Duration::from_millis(10));
    assert!(has_event(&p.b_events, hb, Event::Closed));
    assert_eq!(p.b.state_of(hb), Some(State::Closed));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match p.cb(hb).recv(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("recv after {} bytes: {e:?}", got.len()),
        }
    }
    assert_eq!(got, data, "every acknowledged byte reaches the application");
    p.run_for(Duration::from_millis(10));
    assert_eq!(p.b.connection_count(), 0, "forgotten once drained");
}

/// `abort` on a CLOSED connection with unread data gives the data up.
#[test]
fn abort_after_close_discards_unread_data() {
    let (mut p, ha, hb) = pair();
    let client = p.ca(ha).local();
    p.cb(hb).close();
    p.run_for(Duration::from_millis(50));
    p.ca(ha).send(b"never read").unwrap();
    p.ca(ha).close();
    p.run_for(Duration::from_millis(100));
    let nxt = p.cb(hb).rcv_nxt();
    inject_from(&mut p, client, nxt, None, TcpFlags::RST, &[]);
    p.run_for(Duration::from_millis(10));
    assert_eq!(p.b.connection_count(), 1, "kept for its unread data");
    p.cb(hb).abort();
    p.run_for(Duration::from_millis(10));
    assert_eq!(p.b.connection_count(), 0);
}
