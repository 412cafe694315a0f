//! Property: whatever the loss / reordering / duplication schedule, the
//! receiver reads exactly the bytes the sender wrote.

use crate::pair::Pair;
use crate::Config;
use proptest::prelude::*;
use std::time::Duration;

/// `default` cases in the suite; `PROPTEST_CASES=N` for a longer campaign.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(96), max_shrink_iters: 32, ..ProptestConfig::default() })]
    #[test]
    fn random_faults_preserve_the_byte_stream(
        seed in any::<u64>(),
        loss in 0.0f64..0.15,
        reorder in 0.0f64..0.2,
        dup in 0.0f64..0.1,
        sack in any::<bool>(),
        timestamps in any::<bool>(),
        nagle in any::<bool>(),
        size in 1usize..400_000,
        chunk in 1usize..20_000,
    ) {
        let cfg = Config { sack, timestamps, nagle, ..Config::default() };
        let mut p = Pair::new(cfg.clone(), cfg, seed);
        p.ab.rate_bps = Some(50_000_000);
        p.ab.queue_limit = 128 * 1024;
        for l in [&mut p.ab, &mut p.ba] {
            l.loss = loss;
            l.reorder = reorder;
            l.reorder_delay = Duration::from_millis(5);
            l.dup = dup;
        }
        let (ha, hb) = p.connect();
        let data = Pair::data(size, seed);
        let got = p.transfer_chunked(ha, hb, &data, chunk, Duration::from_secs(3600));
        prop_assert!(got == data);
        p.check_segmentation(crate::pair::Dir::AtoB);
    }
}

mod hostile {
    use crate::{Config, Connection, Endpoint, Instant};
    use hollywood_wire::{SackBlock, SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamp};
    use proptest::prelude::*;
    use std::time::Duration;

    /// A segment relative to the connection's sequence state.
    #[derive(Debug, Clone)]
    struct Hostile {
        flags: u8,
        seq_off: i64,
        ack_off: i64,
        window: u16,
        len: usize,
        ts: Option<(u32, u32)>,
        sacks: Vec<(i64, i64)>,
        ws: Option<u8>,
        mss: Option<u16>,
        advance_ms: u64,
    }

    /// Feed `h` to `a` at `now`, run a due timer, and check every segment
    /// it sends: at most one MSS of data, at most four SACK blocks.
    fn feed(
        a: &mut Connection,
        now: Instant,
        h: &Hostile,
        out: &mut Vec<u8>,
        mss: u16,
    ) -> Result<(), TestCaseError> {
        let r = repr(a, h);
        a.handle_segment(now, &r, &[0xAB; 3000][..h.len]);
        if a.poll_timeout().is_some_and(|t| t <= now) {
            a.handle_timeout(now);
        }
        while let Some(s) = a.poll_transmit(now, out) {
            prop_assert!(out.len() <= mss as usize);
            prop_assert!(s.options.sacks().len() <= 4);
        }
        Ok(())
    }

    fn hostile() -> impl Strategy<Value = Hostile> {
        (
            any::<u8>(),
            prop_oneof![-70_000i64..70_000, any::<u32>().prop_map(i64::from)],
            prop_oneof![-70_000i64..70_000, any::<u32>().prop_map(i64::from)],
            any::<u16>(),
            0usize..3000,
            proptest::option::of((any::<u32>(), any::<u32>())),
            proptest::collection::vec((-5000i64..70_000, -5000i64..70_000), 0..5),
            proptest::option::of(any::<u8>()),
            proptest::option::of(any::<u16>()),
            0u64..3000,
        )
            .prop_map(
                |(flags, seq_off, ack_off, window, len, ts, sacks, ws, mss, advance_ms)| Hostile {
                    flags,
                    seq_off,
                    ack_off,
                    window,
                    len,
                    ts,
                    sacks,
                    ws,
                    mss,
                    advance_ms,
                },
            )
    }

    fn at(base: SeqNumber, off: i64) -> SeqNumber {
        SeqNumber(base.0.wrapping_add(off as u32))
    }

    fn repr(c: &Connection, h: &Hostile) -> TcpRepr {
        let mut o = TcpOptions {
            window_scale: h.ws,
            mss: h.mss,
            ..TcpOptions::default()
        };
        o.timestamp = h.ts.map(|(tsval, tsecr)| Timestamp { tsval, tsecr });
        let blocks: Vec<_> = h
            .sacks
            .iter()
            .map(|&(l, r)| SackBlock {
                left: at(c.snd_una(), l),
                right: at(c.snd_una(), r),
            })
            .collect();
        o.set_sacks(&blocks);
        TcpRepr {
            src_port: c.remote().port(),
            dst_port: c.local().port(),
            seq: at(c.rcv_nxt(), h.seq_off),
            ack: at(c.snd_una(), h.ack_off),
            flags: TcpFlags(h.flags),
            window: h.window,
            urgent: 0,
            options: o,
        }
    }

    /// Handshake two connections directly.
    fn pair(cfg: &Config) -> (Connection, Connection) {
        let t = Instant::ZERO;
        let (la, lb) = (
            "10.0.0.1:1000".parse().unwrap(),
            "10.0.0.2:80".parse().unwrap(),
        );
        let mut a = Connection::connect(t, cfg.clone(), la, lb, SeqNumber(u32::MAX - 5000));
        let mut p = Vec::new();
        let syn = a.poll_transmit(t, &mut p).unwrap();
        let mut b = Connection::accept(t, cfg.clone(), lb, la, SeqNumber(77), &syn);
        let sa = b.poll_transmit(t, &mut p).unwrap();
        a.handle_segment(t, &sa, &[]);
        let ack = a.poll_transmit(t, &mut p).unwrap();
        b.handle_segment(t, &ack, &[]);
        (a, b)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: super::cases(256), max_shrink_iters: 64, ..ProptestConfig::default() })]
        /// No segment sequence, however hostile, panics a connection, and
        /// its outputs stay well-formed.
        #[test]
        fn hostile_segments_never_panic(
            segs in proptest::collection::vec(hostile(), 1..40),
            ts in any::<bool>(),
            sack in any::<bool>(),
            sends in 0usize..50_000,
        ) {
            let cfg = Config { timestamps: ts, sack, recv_buffer: 32 * 1024, ..Config::default() };
            let (mut a, _b) = pair(&cfg);
            a.send(&vec![5u8; sends]).ok();
            let mut now = Instant::ZERO;
            let mut out = Vec::new();
            for h in &segs {
                now += Duration::from_millis(h.advance_ms);
                feed(&mut a, now, h, &mut out, cfg.mss)?;
                while a.poll_event().is_some() {}
                let mut buf = [0u8; 4096];
                while let Ok(1..) = a.recv(&mut buf) {}
            }
        }

        /// The same with every TCP Hollywood switch on (review §3: hostile
        /// input must reach the message table, the out-of-order copy queue
        /// and the fallback), any congestion controller, pacing on or off:
        /// no panic, well-formed output, each message reported at most once.
        #[test]
        fn hostile_segments_never_panic_with_hollywood_on(
            segs in proptest::collection::vec(hostile(), 1..40),
            ts in any::<bool>(),
            cc in 0usize..3,
            pacing in any::<bool>(),
            always in any::<bool>(),
            msgs in proptest::collection::vec((1usize..1600, proptest::option::of(0u64..400), any::<bool>(), 0u16..3, -2i8..3), 0..60),
        ) {
            let cfg = Config {
                timestamps: ts,
                recv_buffer: 32 * 1024,
                cc: [crate::CcAlgorithm::NewReno, crate::CcAlgorithm::Cubic, crate::CcAlgorithm::Bbr][cc],
                pacing,
                hollywood: crate::HollywoodConfig {
                    inconsistent_retransmissions: true,
                    out_of_order_delivery: true,
                    always_inconsistent: always,
                    ..Default::default()
                },
                ..Config::hollywood(true, true)
            };
            let (mut a, _b) = pair(&cfg);
            let mut now = Instant::ZERO;
            let mut latest: std::collections::BTreeMap<u16, u32> = Default::default();
            for (id, &(len, life, dep, sub, priority)) in msgs.iter().enumerate() {
                let id = id as u32;
                let depends_on = (dep && id > 0)
                    .then(|| id - 1)
                    .filter(|d| latest.get(&sub).is_none_or(|l| d >= l));
                if let Some(d) = depends_on {
                    latest.insert(sub, d);
                }
                let meta = crate::MessageMeta {
                    id,
                    lifetime: life.map(Duration::from_millis),
                    depends_on,
                    replaceable: true,
                    substream: sub,
                    priority,
                };
                let _ = a.send_message(now, &vec![0x11; len], meta);
            }
            let mut out = Vec::new();
            let mut reported = std::collections::BTreeSet::new();
            for h in &segs {
                now += Duration::from_millis(h.advance_ms);
                feed(&mut a, now, h, &mut out, cfg.mss)?;
                while let Some(e) = a.poll_event() {
                    if let crate::Event::Expired(x) = e {
                        prop_assert!(reported.insert(x.id), "message {} reported twice", x.id);
                    }
                }
                while a.recv_segment().is_some() {}
            }
        }

        /// Random bytes and random segments to an endpoint never panic it.
        #[test]
        fn hostile_packets_never_panic_an_endpoint(
            segs in proptest::collection::vec(hostile(), 1..30),
            junk in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..10),
        ) {
            let mut e = Endpoint::new(Config::default(), 3);
            let me: std::net::SocketAddr = "10.0.0.2:80".parse().unwrap();
            let peer: std::net::SocketAddr = "10.0.0.9:999".parse().unwrap();
            e.listen(me).unwrap();
            let h = e.connect(Instant::ZERO, "10.0.0.2:0".parse().unwrap(), peer).unwrap();
            let mut now = Instant::ZERO;
            for j in &junk {
                e.handle_packet(now, j);
            }
            let payload = vec![1u8; 3000];
            for s in &segs {
                now += Duration::from_millis(s.advance_ms);
                let tcp = match e.connection(h) {
                    Some(c) => repr(c, s),
                    None => TcpRepr { src_port: 999, dst_port: 80, flags: TcpFlags(s.flags), ..TcpRepr::default() },
                };
                let src = if s.flags & 1 == 0 { peer } else { "10.0.0.9:4444".parse().unwrap() };
                let pkt = hollywood_wire::build_tcp_ip(src, me, &tcp, &payload[..s.len]);
                e.handle_packet(now, &pkt);
                e.handle_timeout(now);
                while e.poll_transmit(now).is_some() {}
                while e.poll_event().is_some() {}
            }
        }
    }
}
