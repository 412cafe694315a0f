//! Connection unit tests, grouped by state (after smoltcp's
//! `socket/tcp.rs`): fixtures build a connection in a given state by
//! feeding it hand-made segments; `send!` feeds one, `recv!` takes the next
//! output segment.

use super::*;
use hollywood_wire::{SackBlock, TcpFlags, Timestamp};

const LOCAL: &str = "192.168.1.1:4000";
const REMOTE: &str = "192.168.1.2:80";
const ISS: SeqNumber = SeqNumber(1000);
const RISS: SeqNumber = SeqNumber(5000);

fn ms(v: u64) -> Instant {
    Instant::from_nanos(v * 1_000_000)
}

/// Predictable config: no timestamps or scaling, immediate ACKs.
fn cfg() -> Config {
    Config {
        timestamps: false,
        window_scaling: false,
        recv_buffer: 64 * 1024,
        send_buffer: 64 * 1024,
        delayed_ack: crate::config::DelayedAckConfig {
            enabled: false,
            ..Default::default()
        },
        ..Config::default()
    }
}

fn seg(seq: SeqNumber, ack: Option<SeqNumber>, flags: TcpFlags) -> TcpRepr {
    crate::tests::segment((80, 4000), seq, ack, flags, 65_535)
}

macro_rules! send {
    ($c:expr, $t:expr, $seg:expr) => {
        $c.handle_segment($t, &$seg, &[])
    };
    ($c:expr, $t:expr, $seg:expr, $data:expr) => {
        $c.handle_segment($t, &$seg, $data)
    };
}

macro_rules! recv {
    ($c:expr, $t:expr) => {{
        let mut p = Vec::new();
        $c.poll_transmit($t, &mut p).map(|r| (r, p))
    }};
}

/// Every event queued so far.
fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn syn_sent(config: Config) -> Connection {
    let mut c = Connection::connect(ms(0), config, addr(LOCAL), addr(REMOTE), ISS);
    let (r, _) = recv!(c, ms(0)).expect("SYN");
    assert!(r.flags.syn() && !r.flags.ack());
    c
}

/// An ESTABLISHED client: SND.NXT = 1001, RCV.NXT = 5001.
fn established_with(config: Config) -> Connection {
    let mut c = syn_sent(config);
    let mut sa = seg(RISS, Some(ISS + 1), TcpFlags::SYN);
    sa.options.mss = Some(1460);
    sa.options.sack_permitted = true;
    send!(c, ms(10), sa);
    assert_eq!(c.state(), State::Established);
    let (ack, _) = recv!(c, ms(10)).expect("ACK of SYN-ACK");
    assert_eq!(
        (ack.seq, ack.ack, ack.flags),
        (ISS + 1, RISS + 1, TcpFlags::ACK)
    );
    assert!(recv!(c, ms(10)).is_none());
    events(&mut c);
    c
}

fn established() -> Connection {
    established_with(cfg())
}

// =========================================================================
// Option negotiation (all 16 x 16 combinations)
// =========================================================================

/// `mask` bits: 0 = window scaling, 1 = SACK, 2 = timestamps, 3 = MSS option present.
fn opt_cfg(mask: u8) -> Config {
    Config {
        window_scaling: mask & 1 != 0,
        sack: mask & 2 != 0,
        timestamps: mask & 4 != 0,
        ..Config::default()
    }
}

#[test]
fn handshake_option_matrix() {
    for cm in 0u8..16 {
        for sm in 0u8..16 {
            let mut client =
                Connection::connect(ms(0), opt_cfg(cm), addr(LOCAL), addr(REMOTE), ISS);
            let (mut syn, _) = recv!(client, ms(0)).unwrap();
            assert_eq!(syn.options.window_scale.is_some(), cm & 1 != 0);
            assert_eq!(syn.options.sack_permitted, cm & 2 != 0);
            assert_eq!(syn.options.timestamp.is_some(), cm & 4 != 0);
            if cm & 8 == 0 {
                syn.options.mss = None;
            }
            let mut server =
                Connection::accept(ms(1), opt_cfg(sm), addr(REMOTE), addr(LOCAL), RISS, &syn);
            let (mut synack, _) = recv!(server, ms(1)).unwrap();
            let (ws, sack, ts) = (cm & sm & 1 != 0, cm & sm & 2 != 0, cm & sm & 4 != 0);
            // The SYN-ACK carries only what both sides want.
            assert_eq!(synack.options.window_scale.is_some(), ws, "c={cm} s={sm}");
            assert_eq!(synack.options.sack_permitted, sack);
            assert_eq!(synack.options.timestamp.is_some(), ts);
            if sm & 8 == 0 {
                synack.options.mss = None;
            }
            client.handle_segment(ms(2), &synack, &[]);
            assert_eq!(client.state(), State::Established, "c={cm} s={sm}");
            let (ack, _) = recv!(client, ms(2)).unwrap();
            server.handle_segment(ms(3), &ack, &[]);
            assert_eq!(server.state(), State::Established, "c={cm} s={sm}");
            for (c, peer_mss_present) in [(&client, sm & 8 != 0), (&server, cm & 8 != 0)] {
                let n = c.negotiated();
                assert_eq!(
                    (n.window_scaling, n.sack, n.timestamps),
                    (ws, sack, ts),
                    "c={cm} s={sm}"
                );
                assert_eq!(n.peer_mss_present, peer_mss_present);
                let peer_mss = if peer_mss_present { 1460 } else { 536 };
                assert_eq!(n.peer_mss, peer_mss);
                assert_eq!(n.smss, peer_mss as usize - if ts { 12 } else { 0 });
                if ws {
                    // 4 MiB buffer: shift 7 (4 MiB >> 7 = 32768).
                    assert_eq!((n.snd_wscale, n.rcv_wscale), (7, 7));
                } else {
                    assert_eq!((n.snd_wscale, n.rcv_wscale), (0, 0));
                }
            }
        }
    }
}

#[test]
fn window_scale_shift_is_clamped_and_derived_from_buffer() {
    assert_eq!(wscale_for(65_535), 0);
    assert_eq!(wscale_for(65_536), 1);
    assert_eq!(wscale_for(4 << 20), 7);
    assert_eq!(wscale_for(usize::MAX), 14);
    let mut c = Connection::connect(ms(0), Config::default(), addr(LOCAL), addr(REMOTE), ISS);
    recv!(c, ms(0)).unwrap();
    let mut sa = seg(RISS, Some(ISS + 1), TcpFlags::SYN);
    sa.options.window_scale = Some(30);
    sa.options.timestamp = Some(Timestamp { tsval: 1, tsecr: 0 });
    send!(c, ms(1), sa);
    // RFC 7323 §2.3: more than 14 is taken as 14.
    assert_eq!(c.negotiated().snd_wscale, 14);
}

// =========================================================================
// SYN-SENT
// =========================================================================

#[test]
fn syn_sent_unacceptable_ack_gets_rst() {
    let mut c = syn_sent(cfg());
    send!(c, ms(1), seg(RISS, Some(ISS + 100), TcpFlags::SYN));
    let (r, _) = recv!(c, ms(1)).unwrap();
    assert_eq!((r.flags, r.seq), (TcpFlags::RST, ISS + 100));
    assert_eq!(c.state(), State::SynSent);
}

#[test]
fn syn_sent_rst_needs_acceptable_ack() {
    let mut c = syn_sent(cfg());
    // RFC 5961 §3.2 / RFC 9293: a RST without ACK is ignored in SYN-SENT.
    send!(c, ms(1), seg(RISS, None, TcpFlags::RST));
    assert_eq!(c.state(), State::SynSent);
    send!(c, ms(1), seg(RISS, Some(ISS + 1), TcpFlags::RST));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), vec![Event::Reset, Event::Closed]);
    assert_eq!(c.send(b"x"), Err(Error::Reset));
}

#[test]
fn syn_sent_retransmits_with_backoff_then_times_out() {
    let mut c = syn_sent(Config {
        max_syn_retransmissions: 3,
        ..cfg()
    });
    let mut t = ms(0);
    let mut gaps = Vec::new();
    loop {
        let next = c.poll_timeout().expect("SYN timer");
        gaps.push((next - t).as_millis());
        t = next;
        c.handle_timeout(t);
        match recv!(c, t) {
            Some((r, _)) => assert!(r.flags.syn()),
            None => break,
        }
    }
    assert_eq!(gaps, vec![1000, 2000, 4000, 8000]);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), vec![Event::TimedOut, Event::Closed]);
    assert_eq!(c.stats().syn_retransmissions, 3);
}

#[test]
fn simultaneous_open() {
    let mut a = Connection::connect(ms(0), cfg(), addr(LOCAL), addr(REMOTE), ISS);
    let mut b = Connection::connect(ms(0), cfg(), addr(REMOTE), addr(LOCAL), RISS);
    let (sa, _) = recv!(a, ms(0)).unwrap();
    let (sb, _) = recv!(b, ms(0)).unwrap();
    // The SYNs cross.
    send!(a, ms(5), sb);
    send!(b, ms(5), sa);
    assert_eq!(
        (a.state(), b.state()),
        (State::SynReceived, State::SynReceived)
    );
    let (ra, _) = recv!(a, ms(5)).unwrap();
    let (rb, _) = recv!(b, ms(5)).unwrap();
    assert_eq!(ra.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!((ra.seq, ra.ack), (ISS, RISS + 1));
    send!(a, ms(10), rb);
    send!(b, ms(10), ra);
    assert_eq!(
        (a.state(), b.state()),
        (State::Established, State::Established)
    );
    assert_eq!(events(&mut a), vec![Event::Connected]);
    // Data flows.
    a.send(b"hello").unwrap();
    let (d, p) = recv!(a, ms(11)).unwrap();
    b.handle_segment(ms(12), &d, &p);
    let mut buf = [0u8; 8];
    assert_eq!(b.recv(&mut buf), Ok(5));
}

// =========================================================================
// SYN-RECEIVED
// =========================================================================

fn syn_received() -> Connection {
    let mut syn = seg(RISS, None, TcpFlags::SYN);
    syn.options.mss = Some(1200);
    let mut c = Connection::accept(ms(0), cfg(), addr(LOCAL), addr(REMOTE), ISS, &syn);
    let (r, _) = recv!(c, ms(0)).unwrap();
    assert_eq!(
        (r.flags, r.seq, r.ack),
        (TcpFlags::SYN | TcpFlags::ACK, ISS, RISS + 1)
    );
    c
}

#[test]
fn syn_received_retransmitted_syn_resends_synack() {
    let mut c = syn_received();
    send!(c, ms(100), seg(RISS, None, TcpFlags::SYN));
    let (r, _) = recv!(c, ms(100)).unwrap();
    assert_eq!(r.flags, TcpFlags::SYN | TcpFlags::ACK);
}

#[test]
fn syn_received_ack_establishes_bad_ack_resets() {
    let mut c = syn_received();
    send!(c, ms(5), seg(RISS + 1, Some(ISS + 7), TcpFlags::NONE));
    let (r, _) = recv!(c, ms(5)).unwrap();
    assert_eq!((r.flags, r.seq), (TcpFlags::RST, ISS + 7));
    assert_eq!(c.state(), State::SynReceived);
    send!(
        c,
        ms(6),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        b"hi"
    );
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.recv_ready(), 2);
    assert_eq!(c.negotiated().smss, 1200);
}

// =========================================================================
// ESTABLISHED
// =========================================================================

#[test]
fn established_in_order_data_is_acked() {
    let mut c = established();
    send!(
        c,
        ms(20),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::PSH),
        b"abc"
    );
    let (a, _) = recv!(c, ms(20)).unwrap();
    assert_eq!((a.seq, a.ack), (ISS + 1, RISS + 4));
    assert_eq!(events(&mut c), vec![Event::Readable]);
    let mut buf = [0u8; 10];
    assert_eq!(c.recv(&mut buf), Ok(3));
    assert_eq!(&buf[..3], b"abc");
    assert_eq!(c.recv(&mut buf), Err(Error::WouldBlock));
}

#[test]
fn established_out_of_order_sacked_then_filled() {
    let mut c = established();
    send!(
        c,
        ms(20),
        seg(RISS + 11, Some(ISS + 1), TcpFlags::NONE),
        b"klmno"
    );
    let (a, _) = recv!(c, ms(20)).unwrap();
    assert_eq!(a.ack, RISS + 1);
    assert_eq!(
        a.options.sacks(),
        &[SackBlock {
            left: RISS + 11,
            right: RISS + 16
        }]
    );
    send!(
        c,
        ms(21),
        seg(RISS + 21, Some(ISS + 1), TcpFlags::NONE),
        b"vw"
    );
    let (a, _) = recv!(c, ms(21)).unwrap();
    // RFC 2018 §4: the block with the latest segment first.
    assert_eq!(
        a.options.sacks(),
        &[
            SackBlock {
                left: RISS + 21,
                right: RISS + 23
            },
            SackBlock {
                left: RISS + 11,
                right: RISS + 16
            }
        ]
    );
    send!(
        c,
        ms(22),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        b"abcdefghij"
    );
    let (a, _) = recv!(c, ms(22)).unwrap();
    assert_eq!(a.ack, RISS + 16);
    assert_eq!(
        a.options.sacks(),
        &[SackBlock {
            left: RISS + 21,
            right: RISS + 23
        }]
    );
    let mut buf = [0u8; 32];
    assert_eq!(c.recv(&mut buf), Ok(15));
    assert_eq!(&buf[..15], b"abcdefghijklmno");
}

#[test]
fn established_duplicate_gets_dsack() {
    let mut c = established();
    send!(
        c,
        ms(20),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        b"abcd"
    );
    recv!(c, ms(20)).unwrap();
    // Entirely old: unacceptable, answered with an ACK carrying D-SACK.
    send!(
        c,
        ms(21),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        b"abcd"
    );
    let (a, _) = recv!(c, ms(21)).unwrap();
    assert_eq!(
        a.options.sacks(),
        &[SackBlock {
            left: RISS + 1,
            right: RISS + 5
        }]
    );
    // Partly old: D-SACK for the old part only.
    send!(
        c,
        ms(22),
        seg(RISS + 3, Some(ISS + 1), TcpFlags::NONE),
        b"cdef"
    );
    let (a, _) = recv!(c, ms(22)).unwrap();
    assert_eq!(a.ack, RISS + 7);
    assert_eq!(
        a.options.sacks(),
        &[SackBlock {
            left: RISS + 3,
            right: RISS + 5
        }]
    );
    // D-SACK is reported once.
    send!(
        c,
        ms(23),
        seg(RISS + 7, Some(ISS + 1), TcpFlags::NONE),
        b"g"
    );
    let (a, _) = recv!(c, ms(23)).unwrap();
    assert!(a.options.sacks().is_empty());
}

#[test]
fn every_duplicate_range_gets_its_own_dsack() {
    // Two duplicates arriving before we answer (a sender that timed out
    // after its ACK was lost resends two old segments back to back): each
    // is reported in an ACK of its own (RFC 2883 §4: the first block of an
    // ACK names the duplicate that triggered it), as Linux does. A TCP
    // Hollywood sender learns from each D-SACK that the message it put into
    // that range did not arrive (review B4).
    let mut c = established();
    send!(
        c,
        ms(20),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        b"abcdefgh"
    );
    recv!(c, ms(20)).unwrap();
    send!(
        c,
        ms(21),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        b"ab"
    );
    send!(
        c,
        ms(21),
        seg(RISS + 5, Some(ISS + 1), TcpFlags::NONE),
        b"ef"
    );
    let (a1, _) = recv!(c, ms(21)).unwrap();
    let (a2, _) = recv!(c, ms(21)).unwrap();
    assert!(recv!(c, ms(21)).is_none(), "one ACK per duplicate range");
    for (a, left) in [(a1, RISS + 1), (a2, RISS + 5)] {
        assert_eq!(a.ack, RISS + 9);
        assert_eq!(
            a.options.sacks(),
            &[SackBlock {
                left,
                right: left + 2
            }]
        );
    }
    // Adjacent duplicates make one block, reported once.
    send!(
        c,
        ms(22),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        b"ab"
    );
    send!(
        c,
        ms(22),
        seg(RISS + 3, Some(ISS + 1), TcpFlags::NONE),
        b"cd"
    );
    let (a, _) = recv!(c, ms(22)).unwrap();
    assert_eq!(
        a.options.sacks(),
        &[SackBlock {
            left: RISS + 1,
            right: RISS + 5
        }]
    );
    assert!(recv!(c, ms(22)).is_none());
}

#[test]
fn a_flood_of_duplicates_keeps_the_dsack_list_bounded() {
    // A peer resending 1-byte duplicates of old data, 200 of them before we
    // answer: at most DSACK_PENDING are remembered (the newest), one ACK
    // each, never more.
    let mut c = established();
    let data = [7u8; 400];
    send!(
        c,
        ms(20),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        &data
    );
    recv!(c, ms(20)).unwrap();
    for k in 0..200usize {
        send!(
            c,
            ms(21),
            seg(RISS + 1 + 2 * k, Some(ISS + 1), TcpFlags::NONE),
            &data[..1]
        );
    }
    let mut acks = Vec::new();
    while let Some((a, _)) = recv!(c, ms(21)) {
        acks.push(a);
    }
    assert_eq!(acks.len(), super::DSACK_PENDING);
    for (i, a) in acks.iter().enumerate() {
        let k = 200 - super::DSACK_PENDING + i;
        assert_eq!(
            a.options.sacks(),
            &[SackBlock {
                left: RISS + 1 + 2 * k,
                right: RISS + 2 + 2 * k
            }]
        );
    }
}

#[test]
fn out_of_order_copies_of_tiny_segments_are_charged_their_overhead() {
    // Review B3: a peer sending 1-byte segments ahead of a hole to an
    // out-of-order receiver whose application does not read. Each copy
    // costs its bytes plus SEGMENT_COPY_OVERHEAD, and the copies stay
    // within twice the receive buffer; a segment whose copy does not fit is
    // refused whole (not SACKed, so the peer resends it later: B1).
    let mut config = cfg();
    config.recv_buffer = 8192;
    config.hollywood.out_of_order_delivery = true;
    let mut c = established_with(config);
    let mut accepted = 0u64;
    for k in 1..4000u32 {
        // Byte k of the stream; byte 0 (at RCV.NXT) never comes.
        let before = c.ooo_stats().segments;
        send!(
            c,
            ms(20),
            seg(RISS + 1 + k as usize, Some(ISS + 1), TcpFlags::NONE),
            &[k as u8]
        );
        accepted += c.ooo_stats().segments - before;
        while recv!(c, ms(20)).is_some() {}
    }
    let bound = 2 * 8192 / (1 + SEGMENT_COPY_OVERHEAD) as u64;
    assert_eq!(accepted, bound, "copies held: charged 65 bytes each");
    let mut held = 0;
    while c.recv_segment().is_some() {
        held += 1;
    }
    assert_eq!(held, bound);
}

#[test]
fn established_rst_exact_resets() {
    let mut c = established();
    send!(c, ms(20), seg(RISS + 1, None, TcpFlags::RST));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), vec![Event::Reset, Event::Closed]);
}

#[test]
fn established_rst_in_window_gets_challenge_ack() {
    let mut c = established();
    send!(c, ms(20), seg(RISS + 100, None, TcpFlags::RST));
    assert_eq!(c.state(), State::Established);
    let (a, _) = recv!(c, ms(20)).unwrap();
    assert_eq!((a.flags, a.seq, a.ack), (TcpFlags::ACK, ISS + 1, RISS + 1));
    assert_eq!(c.stats().challenge_acks_sent, 1);
    // Out of window: silently dropped.
    send!(c, ms(21), seg(RISS + 1_000_000, None, TcpFlags::RST));
    assert!(recv!(c, ms(21)).is_none());
    assert_eq!(c.state(), State::Established);
}

#[test]
fn established_syn_gets_challenge_ack() {
    let mut c = established();
    send!(c, ms(20), seg(RISS + 50, None, TcpFlags::SYN));
    assert_eq!(c.state(), State::Established);
    let (a, _) = recv!(c, ms(20)).unwrap();
    assert_eq!((a.flags, a.ack), (TcpFlags::ACK, RISS + 1));
    assert_eq!(c.stats().challenge_acks_sent, 1);
}

#[test]
fn established_unacceptable_ack_is_challenged_and_data_dropped() {
    let mut c = established();
    // SEG.ACK > SND.NXT.
    send!(
        c,
        ms(20),
        seg(RISS + 1, Some(ISS + 500), TcpFlags::NONE),
        b"evil"
    );
    let (a, _) = recv!(c, ms(20)).unwrap();
    assert_eq!(a.ack, RISS + 1);
    assert_eq!(c.recv_ready(), 0);
    // SEG.ACK < SND.UNA - MAX.SND.WND.
    send!(
        c,
        ms(21),
        seg(RISS + 1, Some(ISS - 200_000), TcpFlags::NONE),
        b"evil"
    );
    assert!(recv!(c, ms(21)).is_some());
    assert_eq!(c.recv_ready(), 0);
    assert_eq!(c.stats().challenge_acks_sent, 2);
}

#[test]
fn challenge_acks_are_rate_limited() {
    let mut c = established_with(Config {
        challenge_ack_limit: 5,
        ..cfg()
    });
    for i in 0..20 {
        send!(c, ms(20), seg(RISS + 100 + i, None, TcpFlags::RST));
    }
    assert_eq!(c.stats().challenge_acks_sent, 5);
    assert_eq!(c.stats().challenge_acks_suppressed, 15);
    // A new one-second window allows more.
    send!(c, ms(1100), seg(RISS + 100, None, TcpFlags::RST));
    assert_eq!(c.stats().challenge_acks_sent, 6);
}

#[test]
fn established_paws_drops_old_timestamps() {
    let config = Config {
        timestamps: true,
        ..cfg()
    };
    let mut c = syn_sent(config);
    let mut sa = seg(RISS, Some(ISS + 1), TcpFlags::SYN);
    sa.options.timestamp = Some(Timestamp {
        tsval: 100,
        tsecr: 0,
    });
    send!(c, ms(10), sa);
    recv!(c, ms(10)).unwrap();
    let mut d = seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE);
    d.options.timestamp = Some(Timestamp {
        tsval: 200,
        tsecr: 0,
    });
    send!(c, ms(20), d, b"new");
    recv!(c, ms(20)).unwrap();
    // Older TSval: dropped by PAWS (RFC 7323 §5.3 R1), answered with an ACK.
    let mut old = seg(RISS + 4, Some(ISS + 1), TcpFlags::NONE);
    old.options.timestamp = Some(Timestamp {
        tsval: 150,
        tsecr: 0,
    });
    send!(c, ms(21), old, b"old");
    assert_eq!(c.stats().paws_rejected, 1);
    assert_eq!(c.recv_ready(), 3);
    let (a, _) = recv!(c, ms(21)).unwrap();
    assert_eq!(a.options.timestamp.unwrap().tsecr, 200);
    // No timestamp at all once negotiated: silently dropped (RFC 7323 §3.2).
    send!(
        c,
        ms(22),
        seg(RISS + 4, Some(ISS + 1), TcpFlags::NONE),
        b"bare"
    );
    assert_eq!(c.recv_ready(), 3);
    assert!(recv!(c, ms(22)).is_none());
}

#[test]
fn established_send_segments_at_mss_and_records_retransmit_same_range() {
    // RACK off: the first timer to fire is the RTO, not a loss probe
    // (tests::rack covers the probe).
    let mut c = established_with(Config {
        nagle: false,
        rack: false,
        ..cfg()
    });
    let data = vec![7u8; 3000];
    assert_eq!(c.send(&data), Ok(3000));
    let mut segs = Vec::new();
    while let Some((r, p)) = recv!(c, ms(20)) {
        segs.push((r.seq, p.len()));
    }
    assert_eq!(
        segs,
        vec![(ISS + 1, 1460), (ISS + 1461, 1460), (ISS + 2921, 80)]
    );
    // RTO: the first segment is resent with its original boundaries.
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let (r, p) = recv!(c, t).unwrap();
    assert_eq!((r.seq, p.len()), (ISS + 1, 1460));
    assert_eq!(c.stats().rto_events, 1);
    assert_eq!(c.stats().retransmitted_segments, 1);
}

#[test]
fn karn_no_sample_from_a_retransmitted_segment() {
    let mut c = established();
    let before = c.stats().rtt_samples;
    c.send(b"data").unwrap();
    recv!(c, ms(20)).unwrap();
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    recv!(c, t).unwrap();
    let srtt = c.srtt();
    // The ACK is ambiguous (original or retransmission): no sample.
    send!(
        c,
        t + Duration::from_millis(5),
        seg(RISS + 1, Some(ISS + 5), TcpFlags::NONE)
    );
    assert_eq!(c.stats().rtt_samples, before);
    assert_eq!(c.srtt(), srtt);
    // The next, clean segment is timed.
    c.send(b"more").unwrap();
    let t2 = t + Duration::from_millis(10);
    recv!(c, t2).unwrap();
    send!(
        c,
        t2 + Duration::from_millis(30),
        seg(RISS + 1, Some(ISS + 9), TcpFlags::NONE)
    );
    assert_eq!(c.stats().rtt_samples, before + 1);
}

#[test]
fn dsack_can_be_turned_off() {
    let mut c = established_with(Config {
        dsack: false,
        ..cfg()
    });
    send!(
        c,
        ms(20),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        b"abcd"
    );
    recv!(c, ms(20)).unwrap();
    send!(
        c,
        ms(21),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        b"abcd"
    );
    let (a, _) = recv!(c, ms(21)).unwrap();
    assert!(a.options.sacks().is_empty());
}

#[test]
fn rewrite_changes_retransmitted_bytes_only() {
    let mut c = established_with(Config {
        nagle: false,
        ..cfg()
    });
    c.send(b"hello world").unwrap();
    let (_, p) = recv!(c, ms(20)).unwrap();
    assert_eq!(p, b"hello world");
    c.rewrite(ISS + 7, b"WORLD").unwrap();
    assert_eq!(c.rewrite(ISS + 11, b"xx"), Err(Error::InvalidState));
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let (r, p) = recv!(c, t).unwrap();
    assert_eq!((r.seq, p.as_slice()), (ISS + 1, &b"hello WORLD"[..]));
}

#[test]
fn consistent_segmentation_never_spans_records() {
    let mut c = established_with(Config {
        consistent_segmentation: true,
        ..cfg()
    });
    c.send(&[1u8; 100]).unwrap();
    c.send(&[2u8; 3000]).unwrap();
    c.send(&[3u8; 10]).unwrap();
    let mut lens = Vec::new();
    while let Some((_, p)) = recv!(c, ms(20)) {
        assert!(p.iter().all(|&b| b == p[0]), "segment spans two records");
        lens.push(p.len());
    }
    assert_eq!(lens, vec![100, 1460, 1460, 80, 10]);
}

#[test]
fn window_never_shrinks_and_sws_receiver() {
    // 4000-byte buffer: MSS-sized SWS threshold is min(2000, 1460) = 1460.
    let mut c = established_with(Config {
        recv_buffer: 4000,
        ..cfg()
    });
    send!(
        c,
        ms(20),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        &[0u8; 3000]
    );
    let (a, _) = recv!(c, ms(20)).unwrap();
    assert_eq!(a.window, 1000);
    // Reading 500 bytes frees less than the SWS threshold: no update, and
    // the right edge stays put.
    let mut buf = [0u8; 500];
    c.recv(&mut buf).unwrap();
    assert!(recv!(c, ms(21)).is_none());
    send!(
        c,
        ms(22),
        seg(RISS + 3001, Some(ISS + 1), TcpFlags::NONE),
        &[0u8; 100]
    );
    let (a, _) = recv!(c, ms(22)).unwrap();
    assert_eq!(
        a.window, 900,
        "right edge must not move by less than the SWS threshold"
    );
    // Reading everything opens the window fully: a window update goes out.
    let mut big = [0u8; 4000];
    c.recv(&mut big).unwrap();
    let (u, _) = recv!(c, ms(23)).unwrap();
    assert_eq!(u.window, 4000);
}

#[test]
fn zero_window_segment_at_rcv_nxt_still_acks() {
    let mut c = established_with(Config {
        recv_buffer: 1000,
        ..cfg()
    });
    c.send(b"x").unwrap();
    recv!(c, ms(20)).unwrap();
    send!(
        c,
        ms(21),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        &[0u8; 1000]
    );
    let (a, _) = recv!(c, ms(21)).unwrap();
    assert_eq!(a.window, 0);
    // Window closed: a probe at RCV.NXT is not taken, but its ACK is.
    send!(
        c,
        ms(22),
        seg(RISS + 1001, Some(ISS + 2), TcpFlags::NONE),
        b"p"
    );
    let (a, _) = recv!(c, ms(22)).unwrap();
    assert_eq!((a.ack, a.window), (RISS + 1001, 0));
    assert_eq!(c.bytes_in_flight(), 0);
}

// =========================================================================
// Closing states
// =========================================================================

#[test]
fn active_close_fin_wait_to_time_wait_to_closed() {
    let mut c = established_with(Config {
        time_wait: Duration::from_secs(2),
        ..cfg()
    });
    c.send(b"bye").unwrap();
    c.close();
    assert_eq!(c.state(), State::FinWait1);
    assert_eq!(c.send(b"more"), Err(Error::InvalidState));
    let (f, p) = recv!(c, ms(20)).unwrap();
    assert_eq!(
        (f.flags, f.seq, p.len()),
        (TcpFlags::ACK | TcpFlags::FIN | TcpFlags::PSH, ISS + 1, 3)
    );
    send!(c, ms(30), seg(RISS + 1, Some(ISS + 5), TcpFlags::NONE));
    assert_eq!(c.state(), State::FinWait2);
    // Half-close: the peer may still send.
    send!(
        c,
        ms(31),
        seg(RISS + 1, Some(ISS + 5), TcpFlags::NONE),
        b"late"
    );
    assert_eq!(c.recv_ready(), 4);
    send!(c, ms(32), seg(RISS + 5, Some(ISS + 5), TcpFlags::FIN));
    assert_eq!(c.state(), State::TimeWait);
    let (a, _) = recv!(c, ms(32)).unwrap();
    assert_eq!(a.ack, RISS + 6);
    // A retransmitted FIN is ACKed and restarts the 2*MSL timer.
    send!(c, ms(1032), seg(RISS + 5, Some(ISS + 5), TcpFlags::FIN));
    let (a, _) = recv!(c, ms(1032)).unwrap();
    assert_eq!(a.ack, RISS + 6);
    assert_eq!(c.poll_timeout(), Some(ms(3032)));
    c.handle_timeout(ms(3032));
    assert_eq!(c.state(), State::Closed);
    let ev = events(&mut c);
    assert_eq!(ev.last(), Some(&Event::Closed));
    assert!(ev.contains(&Event::PeerClosed));
}

#[test]
fn passive_close_close_wait_last_ack() {
    let mut c = established();
    send!(c, ms(20), seg(RISS + 1, Some(ISS + 1), TcpFlags::FIN));
    assert_eq!(c.state(), State::CloseWait);
    recv!(c, ms(20)).unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(c.recv(&mut buf), Ok(0), "EOF");
    // CLOSE-WAIT may still send.
    c.send(b"resp").unwrap();
    c.close();
    assert_eq!(c.state(), State::LastAck);
    let (f, p) = recv!(c, ms(21)).unwrap();
    assert!(f.flags.fin());
    assert_eq!(p, b"resp");
    send!(c, ms(30), seg(RISS + 2, Some(ISS + 6), TcpFlags::NONE));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), vec![Event::PeerClosed, Event::Closed]);
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let mut c = established();
    c.close();
    let (f, _) = recv!(c, ms(20)).unwrap();
    assert!(f.flags.fin());
    // The peer's FIN crosses ours (it does not ACK our FIN yet).
    send!(c, ms(25), seg(RISS + 1, Some(ISS + 1), TcpFlags::FIN));
    assert_eq!(c.state(), State::Closing);
    recv!(c, ms(25)).unwrap();
    send!(c, ms(30), seg(RISS + 2, Some(ISS + 2), TcpFlags::NONE));
    assert_eq!(c.state(), State::TimeWait);
}

#[test]
fn fin_ahead_of_missing_data_waits() {
    let mut c = established();
    send!(
        c,
        ms(20),
        seg(RISS + 4, Some(ISS + 1), TcpFlags::FIN),
        b"def"
    );
    assert_eq!(c.state(), State::Established);
    send!(
        c,
        ms(21),
        seg(RISS + 1, Some(ISS + 1), TcpFlags::NONE),
        b"abc"
    );
    assert_eq!(c.state(), State::CloseWait);
    let mut buf = [0u8; 8];
    assert_eq!(c.recv(&mut buf), Ok(6));
    assert_eq!(c.recv(&mut buf), Ok(0));
}

#[test]
fn abort_sends_rst() {
    let mut c = established();
    c.send(b"pending").unwrap();
    c.abort();
    assert_eq!(c.state(), State::Closed);
    let (r, _) = recv!(c, ms(20)).unwrap();
    assert_eq!(r.flags, TcpFlags::RST);
    assert!(recv!(c, ms(20)).is_none());
    assert_eq!(events(&mut c), vec![Event::Closed]);
}
