//! Data transfer: byte-exact bulk transfers under loss, reordering and
//! duplication.

use crate::pair::{Dir, Pair};
use crate::Config;
use std::time::Duration;

fn cfg(sack: bool) -> Config {
    Config {
        sack,
        ..Config::default()
    }
}

/// 1 MB over a 10 Mb/s, 20 ms RTT path with the given random faults.
fn bulk(seed: u64, sack: bool, loss: f64, reorder: f64, dup: f64) -> Pair {
    let mut p = Pair::new(cfg(sack), cfg(sack), seed);
    p.ab.rate_bps = Some(10_000_000);
    p.ab.queue_limit = 64 * 1024;
    let (ha, hb) = p.connect();
    for l in [&mut p.ab, &mut p.ba] {
        l.loss = loss;
        l.reorder = reorder;
        l.reorder_delay = Duration::from_millis(3);
        l.dup = dup;
    }
    let data = Pair::data(1 << 20, seed);
    let got = p.transfer(ha, hb, &data, Duration::from_secs(600));
    assert!(got == data, "corrupted transfer");
    p.check_segmentation(Dir::AtoB);
    p
}

#[test]
fn bulk_1mb_clean() {
    let mut p = Pair::default_pair(1);
    let (ha, hb) = p.connect();
    let data = Pair::data(1 << 20, 7);
    let got = p.transfer(ha, hb, &data, Duration::from_secs(60));
    assert_eq!(got, data);
    assert_eq!(p.ca(ha).stats().retransmitted_segments, 0);
}

#[test]
fn bulk_1mb_lossy_sack() {
    for (seed, loss) in [(1, 0.0), (2, 0.01), (3, 0.05)] {
        bulk(seed, true, loss, 0.02, 0.01);
    }
}

#[test]
fn bulk_1mb_lossy_newreno() {
    for (seed, loss) in [(1, 0.0), (2, 0.01), (3, 0.05)] {
        bulk(seed, false, loss, 0.02, 0.01);
    }
}

#[test]
fn bidirectional_transfer() {
    let mut p = Pair::default_pair(5);
    p.ab.loss = 0.02;
    p.ba.loss = 0.02;
    let (ha, hb) = p.connect();
    let up = Pair::data(300_000, 1);
    let down = Pair::data(200_000, 2);
    let (mut su, mut sd) = (0, 0);
    let (mut gu, mut gd) = (Vec::new(), Vec::new());
    let mut buf = vec![0u8; 16384];
    let deadline = p.now + Duration::from_secs(120);
    while gu.len() < up.len() || gd.len() < down.len() {
        su += p.ca(ha).send(&up[su..]).unwrap_or(0);
        sd += p.cb(hb).send(&down[sd..]).unwrap_or(0);
        while let Ok(n @ 1..) = p.cb(hb).recv(&mut buf) {
            gu.extend_from_slice(&buf[..n]);
        }
        while let Ok(n @ 1..) = p.ca(ha).recv(&mut buf) {
            gd.extend_from_slice(&buf[..n]);
        }
        assert!(p.now < deadline);
        p.step();
    }
    assert!(gu == up && gd == down);
}

#[test]
fn writable_after_a_full_send_buffer() {
    let cfg = Config {
        send_buffer: 10_000,
        ..Config::default()
    };
    let mut p = Pair::new(cfg, Config::default(), 6);
    let (ha, hb) = p.connect();
    assert_eq!(p.ca(ha).send(&[1u8; 15_000]), Ok(10_000));
    assert_eq!(p.ca(ha).send(&[1u8; 10]), Err(crate::Error::WouldBlock));
    p.run_for(Duration::from_millis(100));
    assert!(super::has_event(&p.a_events, ha, crate::Event::Writable));
    assert!(p.ca(ha).send_capacity() > 0);
    let mut buf = vec![0u8; 20_000];
    assert_eq!(p.cb(hb).recv(&mut buf), Ok(10_000));
}

#[test]
fn writable_waits_until_the_refused_message_fits() {
    // A refused 9000-byte frame is not woken for every freed byte: only
    // when all of it fits (the byte stream above wakes on any room).
    let cfg = Config {
        send_buffer: 10_000,
        ..Config::default()
    };
    let rcv = Config {
        recv_buffer: 4_000,
        ..Config::default()
    };
    let mut p = Pair::new(cfg, rcv, 8);
    let (ha, hb) = p.connect();
    let meta = |id| crate::MessageMeta {
        id,
        ..Default::default()
    };
    let now = p.now;
    assert_eq!(p.ca(ha).send_message(now, &[7u8; 8_000], meta(1)), Ok(()));
    assert!(p.ca(ha).poll_send_room(2_000));
    assert_eq!(
        p.ca(ha).send_message(now, &[7u8; 9_000], meta(2)),
        Err(crate::SendMessageError::WouldBlock)
    );
    assert!(!p.ca(ha).poll_send_room(9_000));
    // The receiver does not read: its 4000-byte window is acknowledged,
    // leaving 6000 bytes free, short of the frame.
    p.a_events.clear();
    p.run_for(Duration::from_millis(300));
    let free = p.ca(ha).send_capacity();
    assert!((2_000..9_000).contains(&free), "{free}");
    assert!(!super::has_event(&p.a_events, ha, crate::Event::Writable));
    // Once it reads, the rest is acknowledged and the frame fits.
    let mut buf = vec![0u8; 10_000];
    let mut got = 0;
    for _ in 0..20 {
        while let Ok(n @ 1..) = p.cb(hb).recv(&mut buf) {
            got += n;
        }
        p.run_for(Duration::from_millis(50));
    }
    assert_eq!(got, 8_000);
    assert!(super::has_event(&p.a_events, ha, crate::Event::Writable));
    let now = p.now;
    assert_eq!(p.ca(ha).send_message(now, &[7u8; 9_000], meta(2)), Ok(()));
    // Larger than the whole buffer: refused for good, not "not now".
    assert_eq!(
        p.ca(ha).send_message(now, &[7u8; 10_001], meta(3)),
        Err(crate::SendMessageError::TooLarge {
            len: 10_001,
            capacity: 10_000
        })
    );
    assert!(p.ca(ha).poll_send_room(10_001));
    // After close, a full buffer says why it cannot send, not WouldBlock.
    p.ca(ha).close();
    assert!(matches!(
        p.ca(ha).send_message(now, &[7u8; 5_000], meta(3)),
        Err(crate::SendMessageError::State(_))
    ));
    assert!(p.ca(ha).poll_send_room(5_000));
}

#[test]
fn several_connections_share_an_endpoint() {
    let mut p = Pair::default_pair(7);
    let conns: Vec<_> = (0..4).map(|_| p.connect()).collect();
    let ports: std::collections::BTreeSet<_> = conns
        .iter()
        .map(|&(ha, _)| p.ca(ha).local().port())
        .collect();
    assert_eq!(ports.len(), 4);
    for (i, &(ha, hb)) in conns.iter().enumerate() {
        let data = Pair::data(50_000 + i, i as u64);
        assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(10)), data);
    }
}

#[test]
fn rtt_measurement_with_and_without_timestamps() {
    for ts in [true, false] {
        let cfg = Config {
            timestamps: ts,
            ..Config::default()
        };
        let mut p = Pair::new(cfg.clone(), cfg, 8);
        p.ab.rate_bps = Some(50_000_000);
        let (ha, hb) = p.connect();
        let t0 = p.now;
        let data = Pair::data(1 << 20, 3);
        assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(30)), data);
        let elapsed = p.now - t0;
        let s = p.ca(ha).stats().clone();
        let srtt = p.ca(ha).srtt().unwrap();
        assert!(srtt >= Duration::from_millis(20), "{srtt:?}");
        if ts {
            // RFC 7323 §4: a sample on (nearly) every ACK that advances.
            assert!(s.rtt_samples > 100, "{s:?}");
        } else {
            // RFC 6298 §3: one timed segment per RTT (+1 for the SYN).
            let rtts = (elapsed.as_millis() / 20) as u64 + 2;
            assert!(
                s.rtt_samples <= rtts && s.rtt_samples >= 3,
                "{} samples in {rtts} RTTs",
                s.rtt_samples
            );
        }
    }
}

#[test]
#[ignore = "throughput measurement; run with --release --ignored"]
// The wall clock is read by the test, never by the engine.
#[allow(clippy::disallowed_methods)]
fn perf_200mb_10gbps() {
    let cfg = Config {
        send_buffer: 8 << 20,
        recv_buffer: 8 << 20,
        ..Config::default()
    };
    let mut p = Pair::new(cfg.clone(), cfg, 99);
    p.ab.delay = Duration::from_micros(250);
    p.ba.delay = Duration::from_micros(250);
    p.ab.rate_bps = Some(10_000_000_000);
    p.ab.queue_limit = 4 << 20;
    let (ha, hb) = p.connect();
    let data = Pair::data(200 << 20, 1);
    let wall = std::time::Instant::now();
    let got = p.transfer(ha, hb, &data, Duration::from_secs(60));
    let el = wall.elapsed();
    assert!(got == data);
    eprintln!(
        "wall {el:?}, virtual {:?}: {:?}",
        p.now.since_epoch(),
        p.ca(ha).stats()
    );
}

/// `recv_with` reads in place what `recv` would copy: every byte in order
/// under loss (the ring wraps and grows), `WouldBlock` with nothing ready,
/// `Ok(0)` at end of stream, and at most `max` bytes a call.
#[test]
fn reading_in_place_gets_every_byte_then_end_of_stream() {
    let mut p = Pair::default_pair(21);
    p.ab.loss = 0.02;
    let (ha, hb) = p.connect();
    assert_eq!(
        p.cb(hb).recv_with(100, |_| panic!("nothing ready")),
        Err(crate::Error::WouldBlock)
    );
    let data = Pair::data(400_000, 5);
    let (mut sent, mut got) = (0, Vec::new());
    let deadline = p.now + Duration::from_secs(60);
    while got.len() < data.len() {
        if let Ok(n) = p.ca(ha).send(&data[sent..]) {
            sent += n;
        }
        while let Ok(n) = p
            .cb(hb)
            .recv_with(7_000, |piece| got.extend_from_slice(piece))
        {
            assert!(n > 0 && n <= 7_000, "{n}");
        }
        assert!(p.now <= deadline && (got.len() == data.len() || p.step()));
    }
    assert!(got == data, "bytes differ");
    p.ca(ha).close();
    p.run_for(Duration::from_secs(1));
    assert_eq!(
        p.cb(hb).recv_with(100, |_| panic!("no data after FIN")),
        Ok(0)
    );
}
