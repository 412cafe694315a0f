//! QUIC mappings and QUICsilver over the pair harness: delivery, head-of-line
//! blocking, partial reliability, dependency retention, determinism.

mod common;

use common::{
    addrs, delays_ms, delivers_everything_on_a_clean_link, drop_data_packet_at, exchange,
    late_after_one_loss, lossy_trace, run,
};
use hollywood_transport::pair::{Dir, Pair};
use hollywood_transport::quic::{QuicConfig, QuicIdentity, QuicTransport, Role};
use hollywood_transport::udp::UdpTransport;
use hollywood_transport::{ExpiryReason, Instant, OutMessage, TransportEvent};
use std::time::Duration;

fn quic_pair(name: &str, seed: u64, delay: Duration) -> Pair {
    let (c, s) = addrs();
    let id = QuicIdentity::generate().unwrap();
    let cfg = QuicConfig::of(hollywood_transport::QuicKind::parse(name).unwrap());
    let a = QuicTransport::new(cfg.clone(), Role::Client { remote: s }, c, &id, seed).unwrap();
    let b = QuicTransport::new(cfg, Role::Server, s, &id, seed + 1).unwrap();
    Pair::new(Box::new(a), Box::new(b), delay)
}

#[test]
fn every_mapping_delivers_everything_on_a_clean_link() {
    for name in hollywood_transport::QuicKind::ALL.map(hollywood_transport::QuicKind::name) {
        delivers_everything_on_a_clean_link(&mut quic_pair(name, 1, Duration::from_millis(20)));
    }
}

#[test]
fn runs_are_deterministic_for_a_seed() {
    let trace = |seed| lossy_trace(quic_pair("quicsilver", seed, Duration::from_millis(30)));
    assert_eq!(trace(5), trace(5));
    assert_ne!(trace(5).2, [0, 0]);
}

#[test]
fn one_stream_blocks_the_head_of_line_a_stream_per_message_does_not() {
    let go = |name| late_after_one_loss(&mut quic_pair(name, 2, Duration::from_millis(50)));
    let (late_ss, ss) = go("quic-ss");
    let (late_pps, pps) = go("quic-pps");
    // Standard QUIC holds back everything behind the loss until the repair
    // (about one RTT plus detection: ~10 messages at 10 ms spacing).
    assert!(late_ss >= 5, "quic-ss late {late_ss}: {ss:?}");
    assert!(ss.arrival.iter().all(Option::is_some));
    // Per message: only the lost one is late.
    assert!(late_pps <= 1, "quic-pps late {late_pps}: {pps:?}");
    assert!(pps.arrival.iter().all(Option::is_some));
}

#[test]
fn quicsilver_gives_up_on_an_expired_message_and_never_resends_it() {
    let mut p = quic_pair("quicsilver", 3, Duration::from_millis(50));
    let large = std::rc::Rc::new(std::cell::Cell::new(0u32));
    let mut drop = drop_data_packet_at(300);
    let count = large.clone();
    p.set_drop(Box::new(move |now, d, i, pkt| {
        // Message packets (~560 B), not MTU probes (>= 1200 B).
        if d == Dir::AtoB
            && (500..1000).contains(&pkt.len())
            && now >= Instant::ZERO + Duration::from_millis(100)
        {
            count.set(count.get() + 1);
        }
        drop(now, d, i, pkt)
    }));
    // A 60 ms lifetime: a loss detected after ~1 RTT (100 ms) cannot be
    // repaired in time.
    let o = run(
        &mut p,
        60,
        500,
        Duration::from_millis(10),
        Duration::from_secs(2),
        |_, m| {
            m.lifetime = Some(Duration::from_millis(60));
        },
    );
    let lost: Vec<usize> = (0..60).filter(|&i| o.arrival[i].is_none()).collect();
    assert_eq!(lost, vec![20], "{o:?}");
    let expired: Vec<usize> = (0..60).filter(|&i| o.expired[i].is_some()).collect();
    assert_eq!(expired, vec![20]);
    assert_eq!(o.expired[20], Some(ExpiryReason::Abandoned));
    let sender = p.a.stats();
    let receiver = p.b.stats();
    assert_eq!(sender.streams_reset, 1);
    assert_eq!(receiver.streams_reset_received, 1);
    // Everything else on time.
    for d in delays_ms(&o).into_iter().flatten() {
        assert!(d <= 60.0, "delay {d}");
    }
    // One packet per message, none for a retransmission of message 20.
    assert_eq!(large.get(), 60);
}

#[test]
fn quicsilver_keeps_a_dependency_while_its_dependents_live() {
    // Message 20 is an I-frame; 21..29 depend on it. Its first packet is
    // lost; its own lifetime is short, theirs long enough for a repair.
    let mut p = quic_pair("quicsilver", 4, Duration::from_millis(50));
    p.set_drop(drop_data_packet_at(300));
    let o = run(
        &mut p,
        40,
        500,
        Duration::from_millis(10),
        Duration::from_secs(2),
        |i, m| {
            m.lifetime = Some(Duration::from_millis(if (21..30).contains(&i) {
                400
            } else {
                60
            }));
            if (21..30).contains(&i) {
                m.depends_on = Some(20);
            }
        },
    );
    assert!(o.arrival[20].is_some(), "the I-frame is repaired: {o:?}");
    assert_eq!(o.expired[20], None);
    // Late for itself, still delivered for its dependents.
    let d = delays_ms(&o)[20].unwrap();
    assert!(d > 60.0, "delay {d}");
    assert!(o.arrival.iter().all(Option::is_some));
}

#[test]
fn quicsilver_drops_what_expired_before_it_was_sent() {
    let mut p = quic_pair("quicsilver", 6, Duration::from_millis(50));
    // Lifetime shorter than half the RTT: nothing can arrive in time.
    let o = run(
        &mut p,
        10,
        100,
        Duration::from_millis(10),
        Duration::from_secs(1),
        |_, m| {
            m.lifetime = Some(Duration::from_millis(20));
        },
    );
    assert!(o.arrival.iter().all(Option::is_none));
    assert!(o
        .expired
        .iter()
        .all(|e| *e == Some(ExpiryReason::BeforeSend)));
    assert_eq!(p.a.stats().streams_reset, 0);
}

#[test]
fn datagrams_are_never_retransmitted() {
    let mut p = quic_pair("quic-dgram", 7, Duration::from_millis(20));
    p.set_drop(drop_data_packet_at(200));
    let o = run(
        &mut p,
        30,
        500,
        Duration::from_millis(10),
        Duration::from_secs(1),
        |_, _| {},
    );
    assert_eq!(o.arrival.iter().filter(|a| a.is_none()).count(), 1);
    assert!(p.a.send(p.now, OutMessage::new(99, vec![0; 5000])).is_err());
}

#[test]
fn messages_larger_than_a_packet_span_several() {
    let mut p = quic_pair("quic-pps", 8, Duration::from_millis(10));
    let o = run(
        &mut p,
        5,
        20_000,
        Duration::from_millis(50),
        Duration::from_secs(1),
        |_, _| {},
    );
    assert!(o.arrival.iter().all(Option::is_some));
}

#[test]
fn a_second_client_is_refused_and_garbage_is_ignored() {
    let mut p = quic_pair("quic-pps", 9, Duration::from_millis(10));
    let (_, s) = addrs();
    p.run_until(Instant::ZERO + Duration::from_millis(100));
    // Garbage to the server: not a crash, not a connection.
    let junk = hollywood_wire::build_udp_ip("10.0.0.9:1".parse().unwrap(), s, &[0xC3; 1200]);
    p.b.handle_packet(p.now, &junk);
    let short = hollywood_wire::build_udp_ip("10.0.0.9:1".parse().unwrap(), s, &[1, 2, 3]);
    p.b.handle_packet(p.now, &short);
    p.b.handle_packet(p.now, &[0x45, 0, 0]);
    p.flush();
    assert!(p.b.stats().malformed >= 1);
    let o = run(
        &mut p,
        5,
        100,
        Duration::from_millis(10),
        Duration::from_millis(500),
        |_, _| {},
    );
    assert!(o.arrival.iter().all(Option::is_some));
}

#[test]
fn closing_delivers_everything_then_both_ends_close() {
    let mut p = quic_pair("quic-ss", 10, Duration::from_millis(10));
    let _ = run(
        &mut p,
        20,
        1000,
        Duration::from_millis(1),
        Duration::from_millis(200),
        |_, _| {},
    );
    p.a.close(p.now);
    p.flush();
    p.run_until(p.now + Duration::from_secs(5));
    assert!(p.a_events.iter().any(|(_, e)| *e == TransportEvent::Closed));
    assert!(p
        .b_events
        .iter()
        .any(|(_, e)| *e == TransportEvent::PeerClosed));
    assert_eq!(p.a.poll_timeout(), None, "drained");
}

#[test]
fn udp_sends_each_message_once() {
    let (c, s) = addrs();
    let a = UdpTransport::new(c, Some(s));
    let b = UdpTransport::new(s, None);
    let mut p = Pair::new(Box::new(a), Box::new(b), Duration::from_millis(20));
    p.set_drop(Box::new(|_, _, i, _| i == 3));
    let o = run(
        &mut p,
        10,
        200,
        Duration::from_millis(10),
        Duration::from_millis(100),
        |_, _| {},
    );
    assert_eq!(p.sent(), [10, 0]);
    assert_eq!(o.arrival.iter().filter(|a| a.is_none()).count(), 1);
    assert!(o.arrival[3].is_none());
}

/// A receiving application that stops polling while the peer floods it:
/// the transport stops reading quinn's streams once about RX_QUEUE_LIMIT
/// bytes of messages wait (quinn's flow control then closes), and every
/// message arrives once the application polls again. Per mapping that
/// uses streams, and for datagrams (quinn drops beyond its buffer).
#[test]
fn a_receiver_that_does_not_poll_holds_a_bounded_queue() {
    use hollywood_transport::{MessageTransport, SendError, RX_QUEUE_LIMIT};
    for name in ["quic-ss", "quic-pps"] {
        let (c, s) = addrs();
        let id = QuicIdentity::generate().unwrap();
        let cfg = QuicConfig::of(hollywood_transport::QuicKind::parse(name).unwrap());
        let mut a = QuicTransport::new(cfg.clone(), Role::Client { remote: s }, c, &id, 3).unwrap();
        let mut b = QuicTransport::new(cfg, Role::Server, s, &id, 4).unwrap();
        let mut now = Instant::ZERO;
        b.start(now);
        a.start(now);
        let mut sent = 0u32;
        let mut max_queued = 0;
        for _ in 0..4_000 {
            exchange(&mut a, &mut b, now, true);
            while a.poll_event().is_some() {}
            for _ in 0..400 {
                match a.send(now, OutMessage::new(sent, vec![7; 16])) {
                    Ok(()) => sent += 1,
                    Err(SendError::WouldBlock) => break,
                    Err(e) => panic!("{name}: {e:?}"),
                }
            }
            max_queued = max_queued.max(b.rx_queued_bytes());
            now += Duration::from_millis(1);
        }
        // The limit was reached (80 B charged per queued message), so the
        // hold engaged.
        assert!(
            max_queued >= RX_QUEUE_LIMIT,
            "{name}: queued only {max_queued}, sent {sent}"
        );
        assert!(
            max_queued <= RX_QUEUE_LIMIT + (2 << 20),
            "{name}: queued {max_queued} > limit {RX_QUEUE_LIMIT} + one read of quinn's window"
        );
        let mut got = vec![false; sent as usize];
        let mut n = 0;
        for _ in 0..20_000 {
            while let Some(e) = b.poll_event() {
                if let TransportEvent::Message(m) = e {
                    assert!(!got[m.id as usize], "{name}: message {} twice", m.id);
                    got[m.id as usize] = true;
                    n += 1;
                }
            }
            if n == sent as usize {
                break;
            }
            exchange(&mut a, &mut b, now, true);
            now += Duration::from_millis(1);
        }
        assert_eq!(
            n, sent as usize,
            "{name}: every message once the application reads"
        );
    }
}
