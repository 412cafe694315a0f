//! Issue 34 item 0: a live stream where retransmission cannot help (the
//! lifetime is shorter than one-way delay plus a round trip), so the best
//! any transport can do is the no-retransmission oracle: deliver every
//! message whose first transmission the network did not drop. UDP does
//! that; TCP Hollywood must lose no more than UDP, with BBR and with CUBIC
//! (docs/LIVE-CC.md).

use hollywood_media::{MessagesRun, MessagesScenario, Transport, TransportKind};
use hollywood_sim::LossModel;
use hollywood_tcp::{CcAlgorithm, Config};
use std::time::Duration;

/// The path: 10 Mb/s, 250 ms RTT, 2 % random loss, 1200 B every
/// 5 ms (1.9 Mb/s of payload), 180 ms lifetime.
fn live(kind: TransportKind, cc: CcAlgorithm, seed: u64, count: u32) -> MessagesRun {
    let sc = MessagesScenario {
        rate_bps: 10_000_000,
        uplink_bps: 10_000_000,
        rtt: Duration::from_millis(250),
        loss: LossModel::Bernoulli(0.02),
        count,
        size: 1200,
        interval: Duration::from_millis(5),
        lifetime: Some(Duration::from_millis(180)),
        transport: hollywood_media::GenericTransport::from(kind).with_cc(cc),
        seed,
        base: Config {
            cc,
            ..Config::default()
        },
        ..MessagesScenario::default()
    };
    sc.run().expect("scenario runs")
}

fn report(r: &MessagesRun) -> String {
    format!(
        "{} {:?} seed {}: on time {} (oracle {}), late {}, never arrived {}, not sent {}",
        r.scenario.transport.name(),
        r.scenario.base.cc,
        r.scenario.seed,
        r.on_time.on_time,
        r.on_time.oracle_on_time,
        r.on_time.late,
        r.on_time.never_arrived,
        r.hollywood.not_sent,
    )
}

/// Issue 34 item 0's bar: on the path above, TCP Hollywood delivers at
/// least 99.5 % of UDP's on-time count, with BBR and with CUBIC, seeds
/// 1-5, 4000 messages each (20 s of stream; before the live-stream window
/// it was 98.0 % with BBR — the initial window's first round trips — and
/// 29-39 % with CUBIC; docs/LIVE-CC.md).
#[test]
fn hollywood_is_at_the_oracle_where_retransmission_cannot_help() {
    for cc in [CcAlgorithm::Bbr, CcAlgorithm::Cubic] {
        for seed in 1..=5 {
            let udp = live(TransportKind::Udp, cc, seed, 4000);
            let hw = live(TransportKind::Tcp(Transport::Hollywood), cc, seed, 4000);
            // UDP is the oracle: it loses what the network dropped.
            assert_eq!(udp.on_time.on_time, udp.on_time.oracle_on_time);
            assert!(
                hw.on_time.on_time * 1000 >= udp.on_time.on_time * 995,
                "{} against {}",
                report(&hw),
                report(&udp)
            );
            assert_eq!(hw.error, None, "{}", report(&hw));
            assert_eq!(hw.corrupt_delivered + hw.duplicates_delivered, 0);
        }
    }
}

/// The live-stream window is a switch of TCP Hollywood's sender: standard
/// TCP, the out-of-order-only deployment (a standard sender) and the
/// deadline TCP keep their windows as they were.
#[test]
fn the_live_window_is_a_hollywood_sender_switch() {
    let base = Config::default();
    assert!(!base.hollywood.live_window);
    for (t, on) in [
        (Transport::Tcp, false),
        (Transport::HollywoodOoo, false),
        (Transport::Deadline, false),
        (Transport::HollywoodIr, true),
        (Transport::Hollywood, true),
    ] {
        assert_eq!(t.sender_config(&base).hollywood.live_window, on, "{t:?}");
        assert!(!t.receiver_config(&base).hollywood.live_window, "{t:?}");
    }
    assert!(Config::hollywood(true, false).hollywood.live_window);
    assert!(!Config::hollywood(false, true).hollywood.live_window);
}

/// Measurement (not a check): `LIVE_CC_SEEDS=1,2,3 LIVE_CC_COUNT=4000
/// cargo test -p hollywood-media --test live_cc measure -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement; prints a table"]
fn measure() {
    let seeds: Vec<u64> = std::env::var("LIVE_CC_SEEDS")
        .unwrap_or_else(|_| "1,2,3,4,5".into())
        .split(',')
        .map(|s| s.trim().parse().expect("seed"))
        .collect();
    let count: u32 = std::env::var("LIVE_CC_COUNT")
        .ok()
        .map_or(4000, |s| s.parse().expect("count"));
    let ccs: Vec<CcAlgorithm> = std::env::var("LIVE_CC_CC")
        .unwrap_or_else(|_| "bbr,cubic".into())
        .split(',')
        .map(|s| CcAlgorithm::parse(s).expect("cc"))
        .collect();
    for &cc in &ccs {
        for &seed in &seeds {
            let udp = live(TransportKind::Udp, cc, seed, count);
            let hw = live(TransportKind::Tcp(Transport::Hollywood), cc, seed, count);
            println!("{}", report(&udp));
            println!("{}", report(&hw));
            println!(
                "RATIO {:?} seed {seed}: udp {} hollywood {} = {:.4}",
                cc,
                udp.on_time.on_time,
                hw.on_time.on_time,
                hw.on_time.on_time as f64 / udp.on_time.on_time as f64
            );
        }
    }
}
