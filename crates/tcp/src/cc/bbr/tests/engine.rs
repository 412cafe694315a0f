//! BBR inside the engine: two endpoints over `crate::pair`'s simulated
//! link. The other tests drive the controller directly (see
//! [`super::model`] for why); this one checks that what they measure
//! holds with the engine's own delivery-rate sampler, loss detection,
//! delayed ACKs and pacing, through the public connection API only.

use crate::pair::{Dir, Pair};
use crate::{CcAlgorithm, Config};
use std::time::Duration;

/// What a bulk transfer showed at the sender.
#[derive(Debug)]
struct Bulk {
    /// Payload goodput over the whole transfer, as a share of the link.
    goodput: f64,
    /// Smoothed RTT at the end over the minimum RTT.
    rtt_ratio: f64,
    /// Packets the bottleneck dropped.
    dropped: u64,
    /// Segments retransmitted.
    retransmitted: u64,
}

/// 6 MB greedy over 10 Mb/s, 40 ms RTT, a 2-BDP drop-tail buffer, with
/// `loss` random loss of data packets.
fn bulk(cc: CcAlgorithm, seed: u64, loss: f64) -> Bulk {
    let cfg = Config {
        cc,
        ..Config::default()
    };
    let mut p = Pair::new(cfg, Config::default(), seed);
    p.ab.delay = Duration::from_millis(20);
    p.ba.delay = Duration::from_millis(20);
    let rate = 10_000_000u64; // bits per second
    let bdp = (rate / 8) * 40 / 1000;
    p.ab.rate_bps = Some(rate);
    p.ab.queue_limit = 2 * bdp as usize;
    p.ab.loss = loss;
    let (ha, hb) = p.connect();
    assert_eq!(p.ca(ha).cc_name(), cc.name());
    let data = Pair::data(6 << 20, seed);
    let t0 = p.now;
    let got = p.transfer(ha, hb, &data, Duration::from_secs(60));
    let elapsed = p.now - t0;
    assert!(got == data, "corrupted transfer");
    p.check_segmentation(Dir::AtoB);
    let dropped = p.ab.dropped;
    let c = p.ca(ha);
    let (srtt, min_rtt) = (c.srtt().expect("srtt"), c.min_rtt().expect("min_rtt"));
    let b = Bulk {
        goodput: data.len() as f64 * 8.0 / elapsed.as_secs_f64() / rate as f64,
        rtt_ratio: srtt.as_secs_f64() / min_rtt.as_secs_f64(),
        dropped,
        retransmitted: c.stats().retransmitted_segments,
    };
    eprintln!(
        "engine bulk, {}, loss {loss}: {elapsed:?}, {b:?}",
        cc.name()
    );
    b
}

/// BBR fills the link (the model measures 97 % of it in steady state;
/// here the 6 MB include Startup and the headers) without overflowing the
/// buffer, and ends with little queue, where CUBIC fills the buffer.
#[test]
fn bulk_transfer_fills_the_link_without_a_standing_queue() {
    let bbr = bulk(CcAlgorithm::Bbr, 11, 0.0);
    assert!(bbr.goodput >= 0.85, "{bbr:?}");
    assert_eq!((bbr.dropped, bbr.retransmitted), (0, 0), "{bbr:?}");
    assert!(bbr.rtt_ratio <= 1.25, "{bbr:?}");
    let cubic = bulk(CcAlgorithm::Cubic, 11, 0.0);
    assert!(cubic.rtt_ratio > 1.5, "{cubic:?}");
}

/// Random loss that is not congestion (it comes without a queue): the
/// engine confirms what the model measures with the default deviations
/// (`scenarios::steady_state_goodput_with_random_loss`,
/// `scenarios::queue_gate_keeps_the_rate_at_five_percent_random_loss`).
/// Measured: 0.90 of the link at 1 %, 0.87 at 5 % (CUBIC: 0.42-0.57 at
/// 1 %).
#[test]
fn bulk_transfer_keeps_its_rate_under_random_loss() {
    for seed in 1..4 {
        for loss in [0.01, 0.05] {
            let bbr = bulk(CcAlgorithm::Bbr, seed, loss);
            assert!(bbr.goodput >= 0.80, "seed {seed}, loss {loss}: {bbr:?}");
            assert!(bbr.rtt_ratio <= 1.25, "seed {seed}, loss {loss}: {bbr:?}");
        }
    }
}
