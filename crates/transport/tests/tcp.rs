//! TCP and the TCP Hollywood deployments behind the message-transport
//! interface, over the pair harness: delivery, head-of-line blocking and
//! its absence, expiry reports, flow control without gaps, closing.

mod common;

use common::{
    addrs, connect, delivers_everything_on_a_clean_link, exchange, late_after_one_loss,
    lossy_trace, received_ids, run,
};
use hollywood_tcp::Config;
use hollywood_transport::pair::{Dir, Pair};
use hollywood_transport::tcp::{Deployment, TcpTransport};
use hollywood_transport::{
    ExpiryReason, Instant, MessageTransport, OutMessage, SendError, TransportEvent,
};
use std::time::Duration;

fn tcp_pair(d: Deployment, seed: u64, delay: Duration) -> Pair {
    let (c, s) = addrs();
    let (a, b) = d.endpoints(&Config::default(), c, s, seed);
    Pair::new(Box::new(a), Box::new(b), delay)
}

fn tcp(t: &dyn MessageTransport) -> &TcpTransport {
    t.as_any().downcast_ref().expect("a TCP transport")
}

#[test]
fn every_deployment_delivers_everything_on_a_clean_link() {
    for d in Deployment::ALL {
        let mut p = tcp_pair(d, 1, Duration::from_millis(20));
        delivers_everything_on_a_clean_link(&mut p);
        assert_eq!(p.a.name(), d.name());
        assert!(p.a.stats().srtt.is_some());
    }
}

#[test]
fn standard_tcp_blocks_the_head_of_line_hollywood_does_not() {
    let go = |d| {
        let mut p = tcp_pair(d, 2, Duration::from_millis(50));
        let (late, o) = late_after_one_loss(&mut p);
        (late, o, tcp(&*p.b).details())
    };
    let (late_tcp, o, _) = go(Deployment::Tcp);
    // Everything behind the loss waits for the repair (an RTT and more).
    assert!(late_tcp >= 5, "tcp late {late_tcp}: {o:?}");
    assert!(o.arrival.iter().all(Option::is_some), "TCP is reliable");
    let (late_hw, o, rx) = go(Deployment::Hollywood);
    // Out of order: only the lost message itself is late or replaced.
    assert!(late_hw <= 1, "hollywood late {late_hw}: {o:?}");
    assert_eq!(o.duplicates, 0);
    assert!(rx.ooo.out_of_order > 0, "{rx:?}");
}

#[test]
fn an_inconsistent_retransmission_sender_reports_what_it_gave_up() {
    // Drop every 5th data packet: on a 100 ms RTT path a 60 ms lifetime
    // leaves no time for any retransmission, so a TCP Hollywood sender
    // replaces the lost messages and says so.
    let mut p = tcp_pair(Deployment::Hollywood, 3, Duration::from_millis(50));
    p.set_drop(Box::new(|_, d, i, pk| {
        d == Dir::AtoB && pk.len() > 300 && i % 5 == 2
    }));
    let o = run(
        &mut p,
        100,
        400,
        Duration::from_millis(20),
        Duration::from_secs(3),
        |i, m| {
            m.lifetime = Some(Duration::from_millis(60));
            m.substream = (i % 3) as u16;
        },
    );
    let lost: Vec<usize> = (0..100).filter(|&i| o.arrival[i].is_none()).collect();
    assert!(!lost.is_empty(), "the drop rule dropped nothing");
    assert_eq!(o.duplicates, 0);
    for &i in &lost {
        assert!(o.expired[i].is_some(), "message {i} lost without a report");
    }
    // Reports carry the message's sub-stream.
    for (_, e) in &p.a_events {
        if let TransportEvent::Expired {
            id,
            substream,
            reason,
        } = e
        {
            assert_eq!(*substream, (id % 3) as u16, "{e:?}");
            assert_ne!(*reason, ExpiryReason::QueueFull);
        }
    }
    let tx = tcp(&*p.a).details();
    assert!(tx.hollywood.ir_sent > 0, "{tx:?}");
    assert_eq!(
        p.a.stats().messages_expired as usize,
        o.expired.iter().flatten().count()
    );
}

#[test]
fn the_deadline_tcp_skips_what_expired_and_delivers_the_rest_in_order() {
    // [TCP-video] §7.2 through the transport: every 5th data packet is
    // dropped and a 60 ms lifetime on a 100 ms RTT path leaves no time
    // to resend it, so the sender skips it; the in-order receiver reads
    // the skipped bytes as empty frames and goes on, in order.
    let mut p = tcp_pair(Deployment::Deadline, 5, Duration::from_millis(50));
    p.set_drop(Box::new(|_, d, i, pk| {
        d == Dir::AtoB && pk.len() > 300 && i % 5 == 2
    }));
    let o = run(
        &mut p,
        100,
        400,
        Duration::from_millis(20),
        Duration::from_secs(5),
        |_, m| m.lifetime = Some(Duration::from_millis(60)),
    );
    let lost: Vec<usize> = (0..100).filter(|&i| o.arrival[i].is_none()).collect();
    assert!(!lost.is_empty(), "the drop rule dropped nothing");
    assert_eq!(o.duplicates, 0);
    for &i in &lost {
        assert!(o.expired[i].is_some(), "message {i} lost without a report");
    }
    for i in 0..100 {
        assert!(
            !(o.arrival[i].is_some() && o.expired[i].is_some()),
            "message {i} delivered and reported"
        );
    }
    // In order: delivery times never go backwards along the ids.
    let times: Vec<_> = o.arrival.iter().flatten().collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert_eq!(
        tcp(&*p.a).details().hollywood.ir_sent,
        0,
        "never inconsistent"
    );
    assert_eq!(p.a.name(), "tcp-deadline");
}

#[test]
fn a_full_send_buffer_refuses_without_leaving_a_gap() {
    let base = Config {
        send_buffer: 16 * 1024,
        ..Config::default()
    };
    let (c, s) = addrs();
    let (a, b) = Deployment::Tcp.endpoints(&base, c, s, 4);
    let mut p = Pair::new(Box::new(a), Box::new(b), Duration::from_millis(10));
    connect(&mut p);
    let limit = Instant::ZERO + Duration::from_secs(30);
    // Larger than the whole buffer: never, not "not now" (it would wait
    // for a Writable that cannot come).
    assert_eq!(
        p.a.send(p.now, OutMessage::new(0, vec![7; 100 * 1024])),
        Err(SendError::TooLarge(100 * 1024))
    );
    let mut next = 0u32;
    let mut refused = 0;
    while next < 200 {
        match p
            .a
            .send(p.now, OutMessage::new(next, vec![next as u8; 1000]))
        {
            Ok(()) => next += 1,
            Err(SendError::WouldBlock) => {
                refused += 1;
                assert!(p.step(limit), "stuck");
            }
            Err(e) => panic!("{e}"),
        }
        p.flush();
    }
    p.run_until(p.now + Duration::from_secs(2));
    assert!(refused > 0, "the buffer never filled");
    let got = received_ids(&p.b_events);
    assert_eq!(got, (0..200).collect::<Vec<_>>());
    let rx = tcp(&*p.b).details().deframer;
    assert_eq!(rx.crc_rejected, 0);
}

#[test]
fn bad_metadata_and_early_sends_are_refused_clearly() {
    let (c, s) = addrs();
    let (mut a, _) = Deployment::Hollywood.endpoints(&Config::default(), c, s, 5);
    assert_eq!(
        a.send(Instant::ZERO, OutMessage::new(0, vec![1])),
        Err(SendError::NotConnected)
    );
    let mut p = tcp_pair(Deployment::Hollywood, 5, Duration::from_millis(10));
    connect(&mut p);
    p.a.send(p.now, OutMessage::new(10, vec![1; 10])).unwrap();
    assert!(matches!(
        p.a.send(p.now, OutMessage::new(9, vec![1; 10])),
        Err(SendError::Invalid(_))
    ));
    let mut m = OutMessage::new(11, vec![1; 10]);
    m.depends_on = Some(12);
    assert!(matches!(p.a.send(p.now, m), Err(SendError::Invalid(_))));
    assert_eq!(
        p.a.send(p.now, OutMessage::new(11, vec![1; 2 << 20])),
        Err(SendError::TooLarge(2 << 20))
    );
    // The refusals used no id or sequence number: 11 goes through.
    p.a.send(p.now, OutMessage::new(11, vec![2; 10])).unwrap();
    p.run_until(p.now + Duration::from_secs(1));
    let got = received_ids(&p.b_events);
    assert_eq!(got, [10, 11]);
}

#[test]
fn closing_delivers_everything_then_both_ends_close() {
    for d in Deployment::ALL {
        let mut p = tcp_pair(d, 6, Duration::from_millis(15));
        connect(&mut p);
        let limit = Instant::ZERO + Duration::from_secs(60);
        for i in 0..20 {
            p.a.send(p.now, OutMessage::new(i, vec![i as u8; 2000]))
                .unwrap();
        }
        p.a.close(p.now);
        p.flush();
        while !p
            .b_events
            .iter()
            .any(|(_, e)| *e == TransportEvent::PeerClosed)
        {
            assert!(p.step(limit), "{d:?}: no PeerClosed");
        }
        let n = p
            .b_events
            .iter()
            .filter(|(_, e)| matches!(e, TransportEvent::Message(_)))
            .count();
        assert_eq!(n, 20, "{d:?}: PeerClosed before everything arrived");
        p.b.close(p.now);
        p.flush();
        p.run_until(limit);
        for ev in [&p.a_events, &p.b_events] {
            let closed = ev
                .iter()
                .filter(|(_, e)| *e == TransportEvent::Closed)
                .count();
            assert_eq!(closed, 1, "{d:?}: {ev:?}");
            assert!(!ev
                .iter()
                .any(|(_, e)| matches!(e, TransportEvent::Failed(_))));
        }
    }
}

#[test]
fn runs_are_deterministic_for_a_seed() {
    let trace = |seed| {
        lossy_trace(tcp_pair(
            Deployment::Hollywood,
            seed,
            Duration::from_millis(30),
        ))
    };
    assert_eq!(trace(5), trace(5));
    assert_ne!(trace(5).2, [0, 0]);
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        // 64 cases in the suite; PROPTEST_CASES=N for a longer campaign.
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
            ..ProptestConfig::default()
        })]

        /// Whatever the path drops (either direction, handshake included):
        /// every message arrives at most once and intact, nothing fails, a
        /// reliable stream and every standard-TCP sender deliver
        /// everything, and an inconsistent-retransmission sender reports
        /// every message it did not deliver (thesis §4.2; nothing is lost
        /// silently, review B4).
        #[test]
        fn delivery_invariants_under_arbitrary_loss(
            d in prop::sample::select(Deployment::ALL.to_vec()),
            drops in prop::collection::btree_set(0u64..300, 0..40),
            reliable in any::<bool>(),
            seed in any::<u64>(),
            secure in any::<bool>(),
        ) {
            // Secure mode too: the handshake's messages are lost and
            // repaired like any others, then every message is sealed.
            let mut p = if secure {
                static ID: std::sync::OnceLock<hollywood_transport::secure::Identity> =
                    std::sync::OnceLock::new();
                let id = ID.get_or_init(|| hollywood_transport::secure::Identity::generate().unwrap());
                let (c, s) = addrs();
                let (a, b) = d.endpoints_secure(&Config::default(), c, s, seed, id).unwrap();
                Pair::new(Box::new(a), Box::new(b), Duration::from_millis(25))
            } else {
                tcp_pair(d, seed, Duration::from_millis(25))
            };
            let drops: BTreeSet<u64> = drops;
            p.set_drop(Box::new(move |_, _, i, _| drops.contains(&i)));
            // Two hours of (virtual) linger: drops of data and ACKs alike
            // back the RTO off, up to `max_rto` (two minutes) per loss
            // when they hit a repair again and again, and an RTT sample
            // from an ACK echoing an old TSval (RFC 7323 §4.3: a duplicate
            // does not move TS.Recent) starts the backoff high. The run
            // ends when nothing is left to happen.
            let o = run(
                &mut p,
                80,
                700,
                Duration::from_millis(10),
                Duration::from_secs(7200),
                |_, m| {
                    if !reliable {
                        m.lifetime = Some(Duration::from_millis(90));
                    }
                },
            );
            prop_assert_eq!(o.duplicates, 0);
            for (_, e) in p.a_events.iter().chain(&p.b_events) {
                prop_assert!(!matches!(e, TransportEvent::Failed(_)), "{:?}", e);
            }
            for (id, a) in o.arrival.iter().enumerate() {
                if a.is_none() {
                    prop_assert!(
                        !reliable && d.sender_ir(),
                        "{:?}: message {} lost (reliable {}, reported {:?})",
                        d, id, reliable, o.expired[id]
                    );
                    prop_assert!(
                        o.expired[id].is_some(),
                        "{:?}: message {} neither delivered nor reported", d, id
                    );
                }
            }
        }
    }
}

/// Messages that cannot arrive in time (lifetime 10 ms on a 25 ms one-way
/// path) expire in the sender's queue, and each is reported — the last
/// one too, though no later send or packet pokes the engine (the endpoint
/// used to leave events raised while it found nothing to transmit).
#[test]
fn every_message_expired_in_the_queue_is_reported() {
    let mut p = tcp_pair(Deployment::Hollywood, 7, Duration::from_millis(25));
    let o = run(
        &mut p,
        10,
        200,
        Duration::from_millis(10),
        Duration::from_secs(5),
        |_, m| m.lifetime = Some(Duration::from_millis(10)),
    );
    assert!(o.arrival.iter().all(Option::is_none), "{o:?}");
    assert!(
        o.expired
            .iter()
            .all(|e| *e == Some(ExpiryReason::BeforeSend)),
        "{:?}",
        o.expired
    );
    assert_eq!(tcp(&*p.a).details().hollywood.not_sent, 10);
}

/// Found by the property test above (review B4): a cumulative ACK is
/// lost, the RTO resends two expired slots the receiver already holds with
/// live messages (64 among them) in them; the receiver drops
/// both duplicate ranges, and its one ACK reported only the second with a
/// D-SACK, so the sender took 64 for delivered and dropped it from its
/// queue unreported. Fixed twice over: the receiver sends a D-SACK for
/// each duplicate range, and a copy put into a slot by a retransmission
/// without evidence of loss (RTO, tail loss probe) is never taken for
/// delivered. Every message must be delivered or reported (thesis §4.2,
/// RFC 9622 Expired).
#[test]
fn a_displaced_carried_copy_is_reported() {
    let mut p = tcp_pair(Deployment::HollywoodIr, 0, Duration::from_millis(25));
    p.set_drop(Box::new(|_, _, i, _| [15, 30, 41].contains(&i)));
    let o = run(
        &mut p,
        80,
        700,
        Duration::from_millis(10),
        Duration::from_secs(120),
        |_, m| m.lifetime = Some(Duration::from_millis(90)),
    );
    for (id, a) in o.arrival.iter().enumerate() {
        assert!(a.is_some() || o.expired[id].is_some(), "message {id}");
    }
}

mod secure {
    use super::*;
    use hollywood_transport::secure::Identity;

    fn secure_pair(
        d: Deployment,
        seed: u64,
        delay: Duration,
        trust: &Identity,
        id: &Identity,
    ) -> Pair {
        let (c, s) = addrs();
        let (a, _) = d
            .endpoints_secure(&Config::default(), c, s, seed, trust)
            .unwrap();
        let (_, b) = d
            .endpoints_secure(&Config::default(), c, s, seed, id)
            .unwrap();
        Pair::new(Box::new(a), Box::new(b), delay)
    }

    #[test]
    fn every_deployment_delivers_sealed_messages() {
        let id = Identity::generate().unwrap();
        for d in Deployment::ALL {
            let mut p = secure_pair(d, 1, Duration::from_millis(20), &id, &id);
            let o = run(
                &mut p,
                50,
                300,
                Duration::from_millis(10),
                Duration::from_secs(2),
                |i, m| m.substream = (i % 3) as u16,
            );
            assert!(o.arrival.iter().all(Option::is_some), "{d:?}: {o:?}");
            assert_eq!(o.duplicates, 0);
            let s = tcp(&*p.b).details().secure.expect("secure stats");
            assert_eq!(s.opened, 50, "{d:?}: {s:?}");
            assert_eq!((s.auth_failed, s.replayed, s.too_old), (0, 0, 0));
            let a = tcp(&*p.a).details().secure.unwrap();
            assert_eq!(a.sealed, 50);
        }
    }

    #[test]
    fn sealed_messages_survive_loss_and_inconsistent_retransmissions() {
        // Every 5th data packet dropped (handshake included): lifetimes
        // make the sender replace what it gives up; every message is
        // delivered intact or reported.
        let id = Identity::generate().unwrap();
        let mut p = secure_pair(
            Deployment::Hollywood,
            3,
            Duration::from_millis(50),
            &id,
            &id,
        );
        p.set_drop(Box::new(|_, d, i, pk| {
            d == Dir::AtoB && pk.len() > 300 && i % 5 == 2
        }));
        let o = run(
            &mut p,
            100,
            400,
            Duration::from_millis(20),
            Duration::from_secs(5),
            |_, m| m.lifetime = Some(Duration::from_millis(60)),
        );
        assert_eq!(o.duplicates, 0);
        for i in 0..100 {
            assert!(
                o.arrival[i].is_some() || o.expired[i].is_some(),
                "message {i}"
            );
        }
        assert!(tcp(&*p.a).details().hollywood.ir_sent > 0);
        let s = tcp(&*p.b).details().secure.unwrap();
        assert_eq!(s.auth_failed, 0, "{s:?}");
    }

    #[test]
    fn a_client_that_does_not_trust_the_server_never_connects() {
        let real = Identity::generate().unwrap();
        let other = Identity::generate().unwrap();
        let mut p = secure_pair(
            Deployment::Hollywood,
            4,
            Duration::from_millis(10),
            &other,
            &real,
        );
        p.run_until(Instant::ZERO + Duration::from_secs(2));
        assert!(!p
            .a_events
            .iter()
            .any(|(_, e)| *e == TransportEvent::Connected));
        assert!(
            p.a_events
                .iter()
                .any(|(_, e)| matches!(e, TransportEvent::Failed(m) if m.contains("secure"))),
            "{:?}",
            p.a_events
        );
        let e =
            p.a.send(p.now, OutMessage::new(0, vec![1; 10]))
                .unwrap_err();
        assert_eq!(e, SendError::NotConnected);
    }
}

/// A receiving application that stops polling while the peer floods it
/// with empty messages: the transport stops taking data from the engine
/// once about RX_QUEUE_LIMIT bytes of messages wait (each charged its
/// overhead, so empty ones count), the window closes, and everything
/// arrives once the application polls again.
#[test]
fn a_receiver_that_does_not_poll_holds_a_bounded_queue() {
    use hollywood_transport::tcp::RX_QUEUE_LIMIT;
    let (c, s) = addrs();
    let (mut a, mut b) = Deployment::Hollywood.endpoints(&Config::default(), c, s, 9);
    let mut now = Instant::ZERO;
    a.start(now);
    b.start(now);
    let mut sent = 0u32;
    let mut max_queued = 0;
    // The sender polls its events; the receiver does not (yet).
    for _ in 0..3_000 {
        exchange(&mut a, &mut b, now, false);
        while a.poll_event().is_some() {}
        for _ in 0..200 {
            match a.send(now, OutMessage::new(sent, Vec::new())) {
                Ok(()) => sent += 1,
                Err(SendError::WouldBlock) => break,
                Err(SendError::NotConnected) => break,
                Err(e) => panic!("{e:?}"),
            }
        }
        max_queued = max_queued.max(b.rx_queued_bytes());
        now += Duration::from_millis(1);
    }
    assert!(sent > 200_000, "the sender got far enough: {sent}");
    assert!(
        max_queued <= RX_QUEUE_LIMIT + 64 * 1500,
        "queued {max_queued} > limit {RX_QUEUE_LIMIT} + one segment of empty messages"
    );
    // Now the application reads: everything arrives, once, in order.
    let mut got = Vec::new();
    for _ in 0..20_000 {
        while let Some(e) = b.poll_event() {
            if let TransportEvent::Message(m) = e {
                got.push(m.id);
            }
        }
        if got.len() == sent as usize {
            break;
        }
        exchange(&mut a, &mut b, now, false);
        now += Duration::from_millis(1);
    }
    assert_eq!(got.len(), sent as usize);
    assert!(got.windows(2).all(|w| w[0] < w[1]));
}
