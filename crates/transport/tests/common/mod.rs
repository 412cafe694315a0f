//! Shared by the transport integration tests: a message stream over the
//! pair harness and what it produced.
#![allow(dead_code)]

use hollywood_transport::pair::{Dir, Pair};
use hollywood_transport::{ExpiryReason, Instant, MessageTransport, OutMessage, TransportEvent};
use std::net::SocketAddr;
use std::time::Duration;

pub fn addrs() -> (SocketAddr, SocketAddr) {
    (
        "10.0.0.1:4000".parse().unwrap(),
        "10.0.0.2:4433".parse().unwrap(),
    )
}

/// What a stream of messages produced.
#[derive(Debug, Default)]
pub struct Outcome {
    pub sent_at: Vec<Option<Instant>>,
    pub arrival: Vec<Option<Instant>>,
    pub expired: Vec<Option<ExpiryReason>>,
    pub duplicates: u64,
}

/// Send `n` messages of `size` bytes every `interval` once connected; `meta`
/// fills in the rest of each message. Runs until `linger` after the last.
pub fn run(
    p: &mut Pair,
    n: u32,
    size: usize,
    interval: Duration,
    linger: Duration,
    meta: impl Fn(u32, &mut OutMessage),
) -> Outcome {
    let mut o = Outcome {
        sent_at: vec![None; n as usize],
        arrival: vec![None; n as usize],
        expired: vec![None; n as usize],
        duplicates: 0,
    };
    connect(p);
    let start = p.now;
    let mut next = 0u32;
    let end = start + interval * n + linger;
    loop {
        let due = (next < n).then(|| start + interval * next);
        let t = [due, p.next_time()].into_iter().flatten().min();
        let Some(t) = t.filter(|t| *t <= end) else {
            break;
        };
        if due == Some(t) && t >= p.now {
            p.now = t;
            let mut m = OutMessage::new(next, vec![next as u8; size]);
            meta(next, &mut m);
            p.a.send(p.now, m).unwrap();
            o.sent_at[next as usize] = Some(p.now);
            next += 1;
            p.flush();
        } else {
            p.step(end);
        }
    }
    for (_, e) in p.a_events.iter() {
        if let TransportEvent::Expired { id, reason, .. } = e {
            o.expired[*id as usize] = Some(*reason);
        }
    }
    for (_, e) in p.b_events.iter() {
        if let TransportEvent::Message(m) = e {
            assert_eq!(m.payload, vec![m.id as u8; size], "payload of {}", m.id);
            let slot = &mut o.arrival[m.id as usize];
            if slot.is_some() {
                o.duplicates += 1;
            }
            slot.get_or_insert(m.arrival);
        }
    }
    o
}

pub fn delays_ms(o: &Outcome) -> Vec<Option<f64>> {
    o.sent_at
        .iter()
        .zip(&o.arrival)
        .map(|(s, a)| Some((a.as_ref()?.as_nanos() - s.as_ref()?.as_nanos()) as f64 / 1e6))
        .collect()
}

/// Drop the first large a→b packet sent at or after `at` (after the
/// handshake, large a→b packets carry message data): with the connection
/// up at 100 ms and a message every 10 ms, `at` = 100 + 10·k ms is the
/// packet of message k.
pub fn drop_data_packet_at(at_ms: u64) -> hollywood_transport::pair::DropFn {
    let at = Instant::ZERO + Duration::from_millis(at_ms);
    let mut done = false;
    Box::new(move |now, d, _, p| {
        if d != Dir::AtoB || done || p.len() < 300 || now < at {
            return false;
        }
        done = true;
        true
    })
}

/// Ids of the messages `events` delivered, in order.
pub fn received_ids(events: &[(Instant, TransportEvent)]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|(_, e)| match e {
            TransportEvent::Message(m) => Some(m.id),
            _ => None,
        })
        .collect()
}

/// Run until the client reports Connected.
pub fn connect(p: &mut Pair) {
    let limit = p.now + Duration::from_secs(30);
    while !p
        .a_events
        .iter()
        .any(|(_, e)| *e == TransportEvent::Connected)
    {
        assert!(p.step(limit), "no connection");
    }
}

/// 60 messages of 500 bytes every 10 ms, 120 ms lifetime, on a 100 ms RTT
/// path that drops one data packet (at 300 ms): how many messages were
/// late or never arrived, and the outcome. One loss in a single ordered
/// stream holds back what follows until the repair; with per-message
/// delivery only the lost message is affected.
pub fn late_after_one_loss(p: &mut Pair) -> (usize, Outcome) {
    p.set_drop(drop_data_packet_at(300));
    let o = run(
        p,
        60,
        500,
        Duration::from_millis(10),
        Duration::from_secs(2),
        |_, m| m.lifetime = Some(Duration::from_millis(120)),
    );
    let late = delays_ms(&o)
        .iter()
        .filter(|d| d.is_none_or(|d| d > 120.0))
        .count();
    (late, o)
}

/// 50 messages of 300 bytes every 10 ms with groups of 10 and frames of 2,
/// 200 ms lifetime, on a clean link with 20 ms one-way delay: everything
/// arrives once, nothing expires, each after exactly the link delay.
pub fn delivers_everything_on_a_clean_link(p: &mut Pair) {
    let name = p.a.name();
    let o = run(
        p,
        50,
        300,
        Duration::from_millis(10),
        Duration::from_secs(1),
        |i, m| {
            m.group = Some(u64::from(i / 10));
            m.frame = Some(u64::from(i / 2));
            m.lifetime = Some(Duration::from_millis(200));
        },
    );
    assert!(o.arrival.iter().all(Option::is_some), "{name}: {o:?}");
    assert_eq!(o.duplicates, 0, "{name}");
    assert!(o.expired.iter().all(Option::is_none), "{name}");
    // One-way delay plus serialisation-free link: 20 ms each.
    for d in delays_ms(&o).into_iter().flatten() {
        assert!((20.0..21.0).contains(&d), "{name}: delay {d}");
    }
    assert_eq!(p.a.stats().messages_sent, 50, "{name}");
    assert_eq!(p.b.stats().messages_delivered, 50, "{name}");
}

/// What a lossy run did, for determinism checks: 60 messages of 900 bytes
/// every 16 ms with a 120 ms lifetime, every 7th a→b packet dropped.
pub type Trace = (
    Vec<Option<Instant>>,
    Vec<Option<ExpiryReason>>,
    [u64; 2],
    Instant,
);

/// Run the lossy workload of [`Trace`] on `p`.
pub fn lossy_trace(mut p: Pair) -> Trace {
    p.set_drop(Box::new(|_, d, i, _| d == Dir::AtoB && i % 7 == 3));
    let o = run(
        &mut p,
        60,
        900,
        Duration::from_millis(16),
        Duration::from_secs(1),
        |_, m| m.lifetime = Some(Duration::from_millis(120)),
    );
    (o.arrival, o.expired, p.sent(), p.now)
}

/// Move packets both ways at `now` until nothing moves (at most 64
/// rounds), running timers each round: every time, or with
/// `timers_when_due` only those due.
pub fn exchange<T: MessageTransport>(a: &mut T, b: &mut T, now: Instant, timers_when_due: bool) {
    for _ in 0..64 {
        let mut moved = false;
        while let Some(p) = a.poll_transmit(now) {
            b.handle_packet(now, &p);
            moved = true;
        }
        while let Some(p) = b.poll_transmit(now) {
            a.handle_packet(now, &p);
            moved = true;
        }
        for t in [&mut *a, &mut *b] {
            if !timers_when_due || t.poll_timeout().is_some_and(|d| d <= now) {
                t.handle_timeout(now);
            }
        }
        if !moved {
            break;
        }
    }
}
